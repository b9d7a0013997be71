//! Internal entries proposed by the leader, never by clients: `Evict` removes keys whose
//! deadline has passed (expiry is replicated, never local), and `Tick` advances cluster time
//! while leases are live so that a failover's lateness stays bounded.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::registry::{Replicated, Spec, Touches};
use crate::cmd::Ctx;
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
    fn forwarded(&self) -> Option<Touches<'_>> {
        None
    }

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
    fn forwarded(&self) -> Option<Touches<'_>> {
        None
    }

    fn is_read(&self) -> bool {
        false
    }

    fn apply(&self, _ks: &mut Keyspace, _ctx: Ctx) -> Reply {
        Reply::ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{Acquire, Acquired, Event, LockEventKind, WaiterId};

    /// One eviction entry that frees two queued locks grants each a token of its own
    /// (tokens are unique across keys).
    #[test]
    fn one_eviction_entry_grants_each_freed_lock_its_own_token() {
        let mut ks = Keyspace::default();
        let waiter = WaiterId {
            node: 1,
            boot: 7,
            seq: 1,
        };
        for key in ["k", "m"] {
            crate::cmd::run_line(&mut ks, &format!("LOCK {key} a PX 100"), 0);
            let (key, owner) = (
                Bytes::copy_from_slice(key.as_bytes()),
                Bytes::from_static(b"w"),
            );
            let a = Acquire {
                key: &key,
                owner: &owner,
                ttl_ms: 100,
                delay_ms: 0,
                wait: Some((waiter, None)),
            };
            assert_eq!(ks.lock_acquire(a, 1, ks.revision()), Acquired::Queued);
        }
        ks.take_events();
        let evict = Evict {
            keys: vec![Bytes::from_static(b"k"), Bytes::from_static(b"m")],
        };
        let revision = ks.bump_revision();
        assert_eq!(
            evict.apply(&mut ks, Ctx { now: 100, revision }),
            Reply::Int(2)
        );
        let tokens: Vec<u64> = ks
            .take_events()
            .into_iter()
            .filter_map(|e| match e {
                Event::Lock {
                    kind: LockEventKind::Granted,
                    token,
                    ..
                } => Some(token),
                _ => None,
            })
            .collect();
        assert_eq!(tokens.len(), 2, "both locks went to their waiters");
        assert_ne!(tokens[0], tokens[1], "one token for two grants: {tokens:?}");
        assert!(
            ks.revision() >= tokens[1],
            "the revision moved past every token"
        );
    }
}
