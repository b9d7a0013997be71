//! Scripting (EVAL, EVALSHA, SCRIPT).

pub mod eval;
pub mod script;
