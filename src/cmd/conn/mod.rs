//! Connection commands (PING, HELLO, AUTH, SELECT, CLIENT, ...).

pub mod client;
pub mod connection;
