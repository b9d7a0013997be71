//! Redis's shared algorithms, each in one place with golden tests: the deterministic PRNG of
//! the replicated draws ([`rng`]), C's `%.<n>g` and `strtod` ([`float`]), the 80-bit long
//! double of INCRBYFLOAT ([`float80`]), the geohash arithmetic of the GEO commands
//! ([`geohash`]) and the partial quicksort of GEOSEARCH ... COUNT ([`pqsort`]).
//!
//! A leaf: it uses no other module of the crate, so `resp`, `cmd` and `script` all share it.
//! What it computes is replicated state or reply bytes, so its outputs are pinned by tests
//! and must never change.

pub mod float;
pub mod float80;
pub mod geohash;
pub mod pqsort;
pub mod rng;
