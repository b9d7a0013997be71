//! Bitmap commands (SETBIT, BITCOUNT, BITOP, BITFIELD, ...).

pub mod bitfield;
pub mod bitops;
