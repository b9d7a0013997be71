//! Palisade's lock commands (LOCK, RLOCK, MLOCK, UNLOCK, RENEW, FENCEDSET, ...) and the internal entries of the lock queue and of expiry.

pub mod evict;
pub mod fencecheck;
pub mod fencedget;
pub mod fencedset;
pub mod lock;
pub mod lockinfo;
pub mod locknotify;
pub mod lockwait;
pub mod mlock;
pub mod renew;
pub mod rlock;
pub mod unlock;
