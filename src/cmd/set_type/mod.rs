//! Set commands (SADD, SPOP, SINTER, SMOVE, ...).

pub mod sets;
