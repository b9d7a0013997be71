//! Pub/sub (PUBLISH, SPUBLISH, SUBSCRIBE, PUBSUB).

pub mod publish;
pub mod pubsub;
pub mod spublish;
pub mod subscribe;
