//! Generic key commands (DEL, EXPIRE, KEYS, SCAN, RENAME, SORT, FLUSHALL, ...) and the helpers they share (TTL arguments, the draw seed).

pub mod del;
pub mod draw;
pub mod exists;
pub mod expire;
pub mod expiry;
pub mod flush;
pub mod keyinfo;
pub mod keys;
pub mod object;
pub mod rename;
pub mod sort;
pub mod swapdb;
pub mod ttl;
pub mod type_;
