//! Server administration (INFO, CONFIG, SLOWLOG, DEBUG, SAVE, COMMAND, MONITOR, ...).

pub mod command;
pub mod config;
pub mod debug;
pub mod info;
pub mod latency;
pub mod lolwut;
pub mod memory;
pub mod monitor;
pub mod save;
pub mod shutdown;
pub mod slowlog;
pub mod time;
