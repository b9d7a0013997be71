//! The node's side of the lock queue: which of its clients wait for which lock, and the task
//! that answers them.
//!
//! A blocked `LOCK ... WAIT` registers a [`WaiterId`] here before its entry is proposed. The
//! state machine grants a queued lock inside apply, on every node, and records an
//! [`Event::Lock`] naming the waiter; the [`run`] task of the waiter's node takes it from the
//! registry and hands the token to the session. A grant that finds nobody registered (the
//! client timed out, disconnected, or its request's outcome was unknown) is released through
//! the log at once, so a lock never stays with a client that has gone.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, oneshot, watch};

use super::Shared;
use crate::cmd::lockwait::{LockCancel, LockPurge, LockReleaseToken};
use crate::cmd::Command;
use crate::resp::Reply;
use crate::state::{Event, LockEventKind, Value, WaiterId};

/// How often a node checks for waiters that an earlier process of it left in the queues.
const PURGE_CHECK: Duration = Duration::from_secs(1);
/// Attempts at releasing a grant that reached nobody (each waits for the write's outcome).
const RELEASE_ATTEMPTS: usize = 5;

struct Pending {
    key: Bytes,
    owner: Bytes,
    tx: oneshot::Sender<u64>,
}

/// The clients of this node process that wait in a lock queue.
pub struct Waiters {
    node: u64,
    boot: u64,
    next: AtomicU64,
    pending: Mutex<HashMap<u64, Pending>>,
}

impl Waiters {
    /// An empty registry for this node process.
    pub fn new(node: u64, boot: u64) -> Waiters {
        Waiters {
            node,
            boot,
            next: AtomicU64::new(1),
            pending: Mutex::new(HashMap::new()),
        }
    }

    /// Registers a waiter for `key` as `owner`; the receiver gets the token of its grant.
    pub fn register(&self, key: Bytes, owner: Bytes) -> (WaiterId, oneshot::Receiver<u64>) {
        let id = WaiterId {
            node: self.node,
            boot: self.boot,
            seq: self.next.fetch_add(1, Ordering::Relaxed),
        };
        let (tx, rx) = oneshot::channel();
        if let Ok(mut p) = self.pending.lock() {
            p.insert(id.seq, Pending { key, owner, tx });
        }
        (id, rx)
    }

    /// Unregisters a waiter. False if a grant has already been handed to it (its token is in
    /// the receiver, or about to be).
    pub fn forget(&self, id: WaiterId) -> bool {
        self.pending
            .lock()
            .map(|mut p| p.remove(&id.seq).is_some())
            .unwrap_or(false)
    }

    /// Hands a grant to its waiter; false if the waiter is not registered (or has gone).
    fn deliver(&self, id: WaiterId, token: u64) -> bool {
        if id.node != self.node || id.boot != self.boot {
            return true; // another node's or another process's waiter: not ours to act on
        }
        let pending = self.pending.lock().ok().and_then(|mut p| p.remove(&id.seq));
        pending.is_some_and(|p| p.tx.send(token).is_ok())
    }
}

/// Proposes that `waiter` leave the queue of `key`, without waiting for the outcome: if it
/// is lost, a later grant to the waiter finds nobody and is released.
pub fn cancel(shared: &Shared, key: Bytes, waiter: WaiterId) {
    drop(
        shared
            .proposer
            .submit(Command::LockCancel(LockCancel { key, waiter })),
    );
}

/// Releases the lease with `token` on `key` (its grant reached no client), retrying a few
/// times if the write's outcome is unknown.
pub fn release(shared: &Arc<Shared>, key: Bytes, token: u64) {
    let shared = shared.clone();
    tokio::spawn(async move {
        let timeout = Duration::from_millis(shared.config.write_timeout_ms);
        for _ in 0..RELEASE_ATTEMPTS {
            let cmd = Command::LockReleaseToken(LockReleaseToken {
                key: key.clone(),
                token,
            });
            if let Ok(Ok(Reply::Int(_))) =
                tokio::time::timeout(timeout, shared.proposer.submit(cmd)).await
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tracing::warn!(key = %String::from_utf8_lossy(&key), token, "could not release a lock granted to a client that had gone; it expires with its lease");
    });
}

/// Answers this node's waiters from the applied log until `stop` changes. `events` (the
/// state machine's grants to waiters) is subscribed before the first client connects, so no
/// grant is missed.
pub async fn run(
    shared: Arc<Shared>,
    mut events: broadcast::Receiver<Event>,
    mut stop: watch::Receiver<bool>,
) {
    let mut purge = tokio::time::interval(PURGE_CHECK);
    loop {
        tokio::select! {
            ev = events.recv() => match ev {
                Ok(Event::Lock { kind: LockEventKind::Granted, key, token, waiter: Some(id), .. }) => {
                    if !shared.waiters.deliver(id, token) {
                        release(&shared, key, token);
                    }
                }
                Ok(Event::Served { waiter, reply }) => super::popwait::deliver(&shared, waiter, &reply),
                Ok(_) => {}
                Err(RecvError::Lagged(n)) => {
                    tracing::error!(lost = n, "the waiter task fell behind; answering lock waiters from the state, failing blocked pops");
                    deliver_from_state(&shared);
                    super::popwait::fail_all(&shared, "blocked pop lost its reply (the node fell behind); retry");
                }
                Err(RecvError::Closed) => return,
            },
            _ = purge.tick() => {
                purge_stale(&shared);
                super::popwait::fail_lost(&shared);
            }
            _ = stop.changed() => return,
        }
    }
}

/// After lost events: hands each registered waiter whose owner now holds its lock its token.
/// (A grant to a waiter that had already gone cannot be found this way; it expires with its
/// lease.)
fn deliver_from_state(shared: &Shared) {
    let Ok(st) = shared.state.read() else {
        return;
    };
    let now = super::reader::cluster_now(&shared.raft, &st, &shared.clock);
    let Ok(mut pending) = shared.waiters.pending.lock() else {
        return;
    };
    let granted: Vec<(u64, u64)> = pending
        .iter()
        .filter_map(|(seq, p)| match st.ks.get(&p.key, now) {
            Some(e) if e.value == Value::Str(p.owner.clone()) => Some((*seq, e.token)),
            _ => None,
        })
        .collect();
    for (seq, token) in granted {
        if let Some(p) = pending.remove(&seq) {
            let _ = p.tx.send(token);
        }
    }
}

/// Proposes dropping the waiters (of locks and of blocked pops) an earlier process of this
/// node left queued (their clients went with it), if there are any.
fn purge_stale(shared: &Shared) {
    let (node, boot) = (shared.waiters.node, shared.waiters.boot);
    let stale = shared.state.read().is_ok_and(|st| {
        st.ks.has_stale_waiters(node, boot) || st.ks.has_stale_pop_waiters(node, boot)
    });
    if stale {
        drop(shared.proposer.submit(Command::LockPurge(LockPurge {
            node: shared.waiters.node,
            boot: shared.waiters.boot,
        })));
    }
}
