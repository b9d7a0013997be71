//! Sorted-set commands (ZADD, ZRANGE, ZUNIONSTORE, BZPOPMIN, ...).

pub mod bzpop;
pub mod zrange;
pub mod zset;
pub mod zsetop;
