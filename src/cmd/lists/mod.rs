//! List commands (LPUSH, LPOP, BLPOP, LMOVE, LSET, ...) and the replicated queue of blocking pops.

pub mod blpop;
pub mod ledit;
pub mod list;
pub mod lmove;
pub mod popwait;
