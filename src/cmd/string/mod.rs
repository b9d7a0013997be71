//! String commands (GET, SET, INCR, MGET, GETEX, APPEND, LCS, the conditional writes, ...).

pub mod cond;
pub mod get;
pub mod getex;
pub mod incr;
pub mod lcs;
pub mod mget;
pub mod set;
pub mod strings;
