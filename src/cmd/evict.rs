//! Internal entries proposed by the leader, never by clients: `Evict` removes keys whose
//! deadline has passed (expiry is replicated, never local), and `Tick` advances cluster time
//! while leases are live so that a failover's lateness stays bounded.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::registry::{Replicated, Spec};
use super::Ctx;
use crate::resp::Reply;
use crate::state::Keyspace;

/// No client can send these: they have no rows in the command table.
pub static COMMANDS: &[Spec] = &[];

/// Removes the listed keys if they have expired at the entry's cluster time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evict {
    /// Candidate keys, chosen by the leader.
    pub keys: Vec<Bytes>,
}

impl Replicated for Evict {
    fn is_read(&self) -> bool {
        false
    }

    /// Applies the eviction; replies with the number removed. Each key's lock is then
    /// settled: a lock that is now free goes to its first waiter, and a lock record whose
    /// lock-delay has ended is dropped (the leader lists such keys too).
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let removed = self
            .keys
            .iter()
            .filter(|k| ks.expire_lease(k, ctx.now))
            .count();
        // Each grant takes a revision of its own: tokens are unique across keys.
        let mut revision = ctx.revision;
        for k in &self.keys {
            if ks.settle_lock(k, ctx.now, revision) {
                revision = ks.bump_revision();
            }
        }
        Reply::Int(removed as i64)
    }
}

/// Advances cluster time and does nothing else (its entry's timestamp is the point).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tick;

impl Replicated for Tick {
    fn is_read(&self) -> bool {
        false
    }

    fn apply(&self, _ks: &mut Keyspace, _ctx: Ctx) -> Reply {
        Reply::ok()
    }
}
