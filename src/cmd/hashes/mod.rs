//! Hash commands (HSET, HGET, HINCRBYFLOAT, HSCAN, ...).

pub mod hash;
pub mod hash_ext;
