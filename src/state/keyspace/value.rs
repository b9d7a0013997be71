//! What the keyspace stores: [`Value`]s in [`Entry`]s.

use std::collections::VecDeque;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

/// A Redis hash. Fields keep insertion order (an update keeps the field's place, a delete
/// closes the gap), which is the order Redis 7 replies with for small (listpack) hashes.
/// Iteration is over the entry vector, never a hash order, so it is deterministic.
pub type Hash = indexmap::IndexMap<Bytes, Bytes>;

/// A Redis list.
pub type List = VecDeque<Bytes>;

/// A Redis set. Members keep insertion order, and a removal moves the last member into the
/// gap (`swap_remove`, O(1)): iteration is over the entry vector, never a hash order, so it
/// is the same on every replica, and a member can be drawn by index (SPOP, SRANDMEMBER).
pub type Set = indexmap::IndexSet<Bytes>;

/// A stored value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Value {
    /// A Redis string. Any string key is also a lock whose owner is its value.
    Str(Bytes),
    /// A Redis hash (never empty while stored). Boxed: an `IndexMap` is 72 bytes, and an
    /// unboxed one would make every entry, locks included, that much larger.
    Hash(Box<Hash>),
    /// A Redis list (never empty while stored).
    List(List),
    /// A Redis set (never empty while stored). Boxed like [`Value::Hash`]. It comes after
    /// `List` (serde variant index 3), so data written before sets existed reads unchanged.
    Set(Box<Set>),
    /// A Redis sorted set (never empty while stored). Boxed, for the size reason `Hash` gives.
    ZSet(Box<crate::state::ZSet>),
}

impl Value {
    /// The name `TYPE` reports.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
            Value::Hash(_) => "hash",
            Value::List(_) => "list",
            Value::Set(_) => "set",
            Value::ZSet(_) => "zset",
        }
    }

    /// True for an empty hash or list (such a key is removed, as Redis does).
    pub fn is_empty_collection(&self) -> bool {
        match self {
            Value::Str(_) => false,
            Value::Hash(h) => h.is_empty(),
            Value::List(l) => l.is_empty(),
            Value::Set(s) => s.is_empty(),
            Value::ZSet(z) => z.is_empty(),
        }
    }
}

/// One key's persisted record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The value.
    pub value: Value,
    /// Deadline in cluster milliseconds; `None` means no TTL.
    pub expire_at: Option<u64>,
    /// Fencing token: the revision at which the current owner (value) first wrote the key.
    pub token: u64,
    /// The revision of the last write to this key (WATCH compares it at EXEC).
    pub modified: u64,
}

impl Entry {
    /// True if the entry is still visible at cluster time `now`.
    pub fn live(&self, now: u64) -> bool {
        self.expire_at.is_none_or(|at| at > now)
    }

    /// Remaining TTL in ms at `now`, or -1 without a deadline.
    pub fn pttl(&self, now: u64) -> i64 {
        match self.expire_at {
            Some(at) => at.saturating_sub(now) as i64,
            None => -1,
        }
    }
}
