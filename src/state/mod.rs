//! The pure, deterministic keyspace: values, expiry, locks, fences, the revision and the
//! cluster clock. Nothing here reads a clock, draws randomness or iterates a HashMap, so
//! every replica that applies the same entries reaches the same state.

pub mod clock;
pub mod keyspace;
pub mod pattern;
pub mod scripts;

pub use clock::ClusterClock;
pub use keyspace::{Entry, Event, Hash, Keyspace, List, Value};
pub use scripts::DEFAULT_SCRIPT_BUDGET;
