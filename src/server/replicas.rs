//! What Redis reports about replicas, answered from Raft: `ROLE` (every node a master, its
//! applied index as the offset) and `WAIT` (how many other voters hold the log up to the
//! commit index).
//!
//! Only the leader knows how far each voter's log reaches (openraft's replication
//! progress), so a follower forwards WAIT to it over the peer port, as it forwards RAFT.*
//! admin commands; the leader counts the voters other than itself, the asking follower
//! included. Inside MULTI, WAIT answers at EXEC without blocking, as in Redis: the leader
//! from its progress, a follower from what it knows (the leader holds every committed entry).

use std::time::Duration;

use bytes::Bytes;
use openraft::async_runtime::watch::WatchReceiver;
use tokio::time::Instant;

use super::forward::{ForwardError, Leader};
use super::Shared;
use crate::cmd::wait::Wait;
use crate::resp::Reply;

/// How often the leader looks at the replication progress while WAIT blocks.
const POLL: Duration = Duration::from_millis(10);

/// ROLE's reply on this node.
pub fn role(shared: &Shared) -> Reply {
    let m = shared.raft.metrics().borrow_watched().clone();
    crate::cmd::role::reply(shared.applied_index(&m))
}

/// How long WAIT may block: its timeout, bounded by the node's write timeout (the longest
/// any client waits for an outcome); 0, Redis's "forever", waits that bound.
fn bound(shared: &Shared, w: Wait) -> Duration {
    let cap = shared.config.write_timeout_ms;
    Duration::from_millis(match w.timeout_ms {
        0 => cap,
        t => t.min(cap),
    })
}

/// WAIT outside a transaction: on the leader from its replication progress, on a follower
/// by asking the leader (`argv` is the command line to forward).
pub async fn wait(shared: &Shared, w: Wait, argv: Vec<Bytes>) -> Reply {
    if shared.link.leader() == Leader::Me {
        return wait_local(shared, w).await;
    }
    // The leader bounds its own wait; the margin covers the round trip.
    let deadline = Instant::now() + bound(shared, w) + Duration::from_secs(2);
    match shared.link.admin(argv, deadline).await {
        Ok(reply) | Err(ForwardError::Failed(reply)) => reply,
        Err(ForwardError::BecameLeader) => wait_local(shared, w).await,
    }
}

/// WAIT on this node, the leader: polls the replication progress until `numreplicas`
/// other voters hold the log up to the commit index as it was when WAIT arrived, or the
/// (bounded) timeout passes; replies with the count.
pub async fn wait_local(shared: &Shared, w: Wait) -> Reply {
    let deadline = Instant::now() + bound(shared, w);
    let target = commit_index(shared);
    loop {
        let n = acked(shared, target);
        if n >= w.numreplicas || Instant::now() >= deadline {
            return Reply::Int(n);
        }
        tokio::time::sleep_until(deadline.min(Instant::now() + POLL)).await;
    }
}

/// WAIT inside EXEC: the count now, without blocking.
pub fn acked_now(shared: &Shared) -> Reply {
    let target = commit_index(shared);
    Reply::Int(match shared.link.leader() {
        Leader::Me => acked(shared, target),
        // A follower knows only that the leader holds every committed entry.
        Leader::Other(..) => 1,
        Leader::Unknown => 0,
    })
}

/// This node's commit index (an applied entry is committed, whatever the metrics say).
fn commit_index(shared: &Shared) -> u64 {
    let m = shared.raft.metrics().borrow_watched().clone();
    let committed = m.local_committed.map(|l| l.index).unwrap_or(0);
    committed.max(shared.applied_index(&m))
}

/// The voters other than this node whose log is known to reach `target` (only a leader
/// knows: elsewhere 0).
fn acked(shared: &Shared, target: u64) -> i64 {
    let metrics = shared.raft.metrics();
    let m = metrics.borrow_watched();
    let Some(repl) = &m.replication else {
        return 0;
    };
    let me = shared.config.node_id;
    let count = m
        .membership_config
        .membership()
        .voter_ids()
        .filter(|id| *id != me)
        .filter(|id| {
            repl.get(id)
                .copied()
                .flatten()
                .is_some_and(|l| l.index >= target)
        })
        .count();
    count as i64
}
