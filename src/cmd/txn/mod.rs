//! Transactions (MULTI, EXEC, WATCH, ...).

pub mod multi;
