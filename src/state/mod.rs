//! The pure, deterministic keyspace: values, expiry, locks, fences, the revision and the
//! cluster clock. Nothing here reads a clock (time is always passed in as cluster time),
//! draws randomness or iterates a HashMap, so every replica that applies the same entries
//! reaches the same state. It knows nothing of the protocol: it returns its own [`Error`],
//! which `cmd` turns into Redis's reply text.

pub mod acl;
pub mod clock;
pub mod digest;
pub mod keyspace;
pub mod locks;
pub mod mlocks;
pub mod notify;
pub mod pattern;
pub mod popq;
pub mod scripts;
pub mod zset;

pub use clock::ClusterClock;
pub use keyspace::{Entry, Event, Hash, Keyspace, List, Set, Value};
pub use locks::{
    Acquire, Acquired, Holder, Kinds, LockEventKind, LockMeta, Mode, Waiter, WaiterId,
    KIND_MISMATCH, LIMIT_MISMATCH,
};
pub use mlocks::{MultiAcquire, MultiAcquired};
pub use popq::{PopKind, PopWaiter};
pub use scripts::DEFAULT_SCRIPT_BUDGET;
pub use zset::ZSet;

/// Why an operation on the keyspace was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The key holds a value of another type (Redis's WRONGTYPE).
    #[error("operation against a key holding the wrong kind of value")]
    WrongType,
}
