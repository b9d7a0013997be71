//! Internal entries proposed by the leader, never by clients: `Evict` removes keys whose
//! deadline has passed (expiry is replicated, never local), and `Tick` advances cluster time
//! while leases are live so that a failover's lateness stays bounded.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::Ctx;
use crate::resp::Reply;
use crate::state::Keyspace;

/// Removes the listed keys if they have expired at the entry's cluster time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evict {
    /// Candidate keys, chosen by the leader.
    pub keys: Vec<Bytes>,
}

impl Evict {
    /// Applies the eviction; replies with the number removed.
    pub fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        Reply::Int(self.keys.iter().filter(|k| ks.evict(k, ctx.now)).count() as i64)
    }
}
