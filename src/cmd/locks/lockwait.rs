//! Internal entries of the lock queue, proposed by the node that serves a waiter, never sent
//! by clients: a waiter leaves the queue (`LockCancel`), a grant that reached no client is
//! released (`LockReleaseGrant`; older entries: `LockReleaseToken`), and a restarted node drops the waiters its previous process
//! queued (`LockPurge`). See `state::locks`.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::registry::{none, one, Replicated, Spec, Touches};
use crate::cmd::Ctx;
use crate::resp::Reply;
use crate::state::{Keyspace, WaiterId};

/// No client can send these: they have no rows in the command table.
pub static COMMANDS: &[Spec] = &[];

/// Takes a waiter out of a key's queue (its wait timed out, or its client went away).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockCancel {
    /// The lock's key.
    pub key: Bytes,
    /// The waiter.
    pub waiter: WaiterId,
}

impl Replicated for LockCancel {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["lock"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// 1 if the waiter was still queued, else 0.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        Reply::Int(i64::from(ks.lock_cancel(&self.key, self.waiter, ctx.now)))
    }
}

/// Releases the lease with this token: it was granted to a waiter whose client had gone.
/// Written by older nodes only (new nodes write [`LockReleaseGrant`]); kept so that their
/// entries replay as they were applied.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockReleaseToken {
    /// The lock's key.
    pub key: Bytes,
    /// The token of the grant.
    pub token: u64,
}

impl Replicated for LockReleaseToken {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["unlock"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// 1 if that lease was still held (and is now released), else 0.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let released = ks.lock_release_token(&self.key, self.token, ctx.now, ctx.revision);
        Reply::Int(i64::from(released))
    }
}

/// Releases the lease of one grant that reached no client (its waiter had gone), matched
/// exactly: token, owner, and untouched since the grant, so that a lease its owner has since
/// been told it holds (a retry's LOCK, a RENEW) is kept. Replaces [`LockReleaseToken`] for
/// new entries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockReleaseGrant {
    /// The lock's key.
    pub key: Bytes,
    /// The token of the grant.
    pub token: u64,
    /// The owner it was granted to.
    pub owner: Bytes,
    /// The waiter it was granted to (for the record: a token names one grant).
    pub waiter: WaiterId,
}

impl Replicated for LockReleaseGrant {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["unlock"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// 1 if that grant's lease was still held untouched (and is now released), else 0.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let released =
            ks.lock_release_grant(&self.key, self.token, &self.owner, ctx.now, ctx.revision);
        Reply::Int(i64::from(released))
    }
}

/// Drops the waiters a node's earlier processes queued (proposed by the node after a restart).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockPurge {
    /// The node.
    pub node: u64,
    /// The boot id of its current process; waiters of any other boot id are dropped.
    pub boot: u64,
}

impl Replicated for LockPurge {
    fn forwarded(&self) -> Option<Touches<'_>> {
        None
    }

    fn is_read(&self) -> bool {
        false
    }

    /// The number of waiters dropped: LOCK waiters and, since blocked pops queue in the
    /// log too, pop waiters (entries written before pop queues existed find none).
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let locks = ks.lock_purge(self.node, self.boot, ctx.now);
        let pops = ks.pop_purge(self.node, self.boot);
        Reply::Int((locks + pops) as i64)
    }
}
