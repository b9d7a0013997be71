//! The node's side of the lock queue: which of its clients wait for which lock, and the task
//! that answers them.
//!
//! A blocked `LOCK ... WAIT` registers a [`WaiterId`] here before its entry is proposed. The
//! state machine grants a queued lock inside apply, on every node, and records an
//! [`Event::Lock`] naming the waiter; the [`run`] task of the waiter's node takes it from the
//! registry and hands the token to the session. A grant that finds nobody registered (the
//! client timed out, disconnected, or its request's outcome was unknown) is released through
//! the log at once, so a lock never stays with a client that has gone.
//!
//! A grant that falls inside a snapshot install produces no event on this node. Once a
//! second, the task looks for queued waiters that are no longer in their key's queue: one
//! missing at two checks in a row (ten if this node never saw it queued: its LOCK may not
//! have been applied here yet) is answered from the state (its token if its owner holds
//! the lock, else an error that says its place was lost), so no waiter hangs.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, oneshot, watch};

use super::Shared;
use crate::cmd::lockwait::{LockCancel, LockPurge, LockReleaseGrant};
use crate::cmd::Command;
use crate::resp::Reply;
use crate::state::{Event, LockEventKind, WaiterId};

/// How often a node checks for waiters that an earlier process of it left in the queues.
const PURGE_CHECK: Duration = Duration::from_secs(1);
/// Attempts at releasing a grant that reached nobody (each waits for the write's outcome).
const RELEASE_ATTEMPTS: usize = 5;

/// Checks a queued waiter may be missing from its queue before it is answered from the
/// state (the grant event of an entry applied here arrives within milliseconds; two checks a
/// second apart rule it out).
const LOST_AFTER: u8 = 2;
/// The same for a waiter this node has not yet seen in its queue: its LOCK may be applied
/// elsewhere and not yet here (a follower that lags).
const LOST_UNSEEN_AFTER: u8 = 10;
/// How many answers given from the state are remembered, so that a late grant event for the
/// same waiter is not taken for a grant that reached nobody.
const ANSWERED_KEPT: usize = 1024;

/// What a waiter is told: the tokens of its grant (one per key; MLOCK waits for several),
/// or `None` when its place in the queue was lost (a snapshot install covered what happened
/// to it).
pub type Outcome = Option<Vec<u64>>;

struct Pending {
    /// Its keys: one, or an MLOCK's.
    keys: Vec<Bytes>,
    /// The tokens granted so far, by key (an MLOCK's grants arrive as one event per key).
    tokens: Vec<Option<u64>>,
    owner: Bytes,
    tx: oneshot::Sender<Outcome>,
    /// Its LOCK applied and queued it (set by the session).
    queued: bool,
    /// Consecutive checks that found it in no queue.
    misses: u8,
    /// A check found it in its queue in this node's state.
    seen: bool,
}

/// The clients of this node process that wait in a lock queue.
pub struct Waiters {
    node: u64,
    boot: u64,
    next: AtomicU64,
    pending: Mutex<HashMap<u64, Pending>>,
    /// Waiters answered from the state with a token: (seq, token), newest last.
    answered: Mutex<VecDeque<(u64, u64)>>,
}

impl Waiters {
    /// An empty registry for this node process.
    pub fn new(node: u64, boot: u64) -> Waiters {
        Waiters {
            node,
            boot,
            next: AtomicU64::new(1),
            pending: Mutex::new(HashMap::new()),
            answered: Mutex::new(VecDeque::new()),
        }
    }

    /// Registers a waiter for `keys` (one, or an MLOCK's) as `owner`; the receiver gets the
    /// tokens of its grant.
    pub fn register(
        &self,
        keys: Vec<Bytes>,
        owner: Bytes,
    ) -> (WaiterId, oneshot::Receiver<Outcome>) {
        let id = WaiterId {
            node: self.node,
            boot: self.boot,
            seq: self.next.fetch_add(1, Ordering::Relaxed),
        };
        let (tx, rx) = oneshot::channel();
        if let Ok(mut p) = self.pending.lock() {
            p.insert(
                id.seq,
                Pending {
                    tokens: vec![None; keys.len()],
                    keys,
                    owner,
                    tx,
                    queued: false,
                    misses: 0,
                    seen: false,
                },
            );
        }
        (id, rx)
    }

    /// Notes that the waiter's LOCK applied and queued it: from now on, a waiter missing
    /// from its queue is looked into.
    pub fn mark_queued(&self, id: WaiterId) {
        if let Ok(mut p) = self.pending.lock() {
            if let Some(w) = p.get_mut(&id.seq) {
                w.queued = true;
            }
        }
    }

    /// Unregisters a waiter. False if a grant has already been handed to it (its tokens are
    /// in the receiver, or about to be: an MLOCK's grant of which some keys have arrived
    /// stays registered until the rest, from the same entry, arrive).
    pub fn forget(&self, id: WaiterId) -> bool {
        let Ok(mut p) = self.pending.lock() else {
            return false;
        };
        match p.get(&id.seq) {
            Some(w) if w.tokens.iter().any(Option::is_some) => false,
            Some(_) => p.remove(&id.seq).is_some(),
            None => false,
        }
    }

    /// Hands the grant of `key` to its waiter. `Err` lists the grants to give back: the
    /// waiter is not registered (or has gone).
    fn deliver(&self, id: WaiterId, key: &Bytes, token: u64) -> Result<(), Vec<(Bytes, u64)>> {
        if id.node != self.node || id.boot != self.boot {
            return Ok(()); // another node's or another process's waiter: not ours to act on
        }
        let Ok(mut pending) = self.pending.lock() else {
            return Err(vec![(key.clone(), token)]);
        };
        let Some(p) = pending.get_mut(&id.seq) else {
            drop(pending);
            // Already answered from the state with this very grant's token.
            let answered = self.answered.lock().is_ok_and(|mut a| {
                let pos = a.iter().position(|&(s, t)| s == id.seq && t == token);
                pos.and_then(|i| a.remove(i)).is_some()
            });
            return if answered {
                Ok(())
            } else {
                Err(vec![(key.clone(), token)])
            };
        };
        match p.keys.iter().position(|k| k == key) {
            Some(i) => p.tokens[i] = Some(token),
            None => return Err(vec![(key.clone(), token)]),
        }
        if p.tokens.iter().any(Option::is_none) {
            return Ok(()); // the rest of an MLOCK's grant follows
        }
        let Some(p) = pending.remove(&id.seq) else {
            return Ok(());
        };
        let tokens: Vec<u64> = p.tokens.iter().flatten().copied().collect();
        match p.tx.send(Some(tokens.clone())) {
            Ok(()) => Ok(()),
            Err(_) => Err(p.keys.into_iter().zip(tokens).collect()),
        }
    }

    /// Answers a waiter from the state: with `token`, or as lost.
    fn answer(&self, pending: &mut HashMap<u64, Pending>, seq: u64, outcome: Outcome) {
        let Some(p) = pending.remove(&seq) else {
            return;
        };
        if let (Some(tokens), Ok(mut a)) = (&outcome, self.answered.lock()) {
            for &token in tokens {
                if a.len() >= ANSWERED_KEPT {
                    a.pop_front();
                }
                a.push_back((seq, token));
            }
        }
        let _ = p.tx.send(outcome);
    }
}

/// How a wait that its client ended (timeout, CLIENT UNBLOCK) stands in this node's state.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// A grant was already handed to the waiter: its token is in the receiver.
    Delivered,
    /// The waiter's owner holds the lock with this token, though no grant reached the
    /// waiter (its event is still on its way, or a snapshot install covered it): the client
    /// is told the token, as a LOCK by a holder is, and a late grant event for it is not
    /// taken for a grant that reached nobody.
    Held(Vec<u64>),
    /// Not held: the caller leaves the queue and answers as the wait's end says.
    Free,
}

/// Unregisters a waiter whose client stopped waiting, and says whether its owner holds the
/// lock: a waiter is never told nil while its owner holds the lock in this node's state.
pub fn end_wait(shared: &Shared, id: WaiterId) -> Ended {
    let Ok(st) = shared.state.read() else {
        return if shared.waiters.forget(id) {
            Ended::Free
        } else {
            Ended::Delivered
        };
    };
    let now = super::reader::cluster_now(&shared.raft, &st, &shared.clock);
    let Ok(mut pending) = shared.waiters.pending.lock() else {
        return Ended::Free;
    };
    let Some(p) = pending.get(&id.seq) else {
        return Ended::Delivered;
    };
    match holder_token(&st.ks, p, now) {
        Some(tokens) => {
            shared
                .waiters
                .answer(&mut pending, id.seq, Some(tokens.clone()));
            Ended::Held(tokens)
        }
        None => {
            pending.remove(&id.seq);
            Ended::Free
        }
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

/// Releases the lease of the grant `token` to `owner` and `waiter` on `key` (it reached no
/// client), retrying a few times if the write's outcome is unknown. The entry matches that
/// grant exactly, so a lease the owner has since been told it holds stays.
pub fn release(shared: &Arc<Shared>, key: Bytes, token: u64, owner: Bytes, waiter: WaiterId) {
    let shared = shared.clone();
    tokio::spawn(async move {
        let timeout = Duration::from_millis(shared.config.write_timeout_ms);
        for _ in 0..RELEASE_ATTEMPTS {
            let cmd = Command::LockReleaseGrant(LockReleaseGrant {
                key: key.clone(),
                token,
                owner: owner.clone(),
                waiter,
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
                // A grant to a waiter; or, for an MLOCK, a key its owner held already.
                Ok(Event::Lock { kind: LockEventKind::Granted | LockEventKind::Renewed, key, token, owner, waiter: Some(id) }) => {
                    if let Err(back) = shared.waiters.deliver(id, &key, token) {
                        for (key, token) in back {
                            release(&shared, key, token, owner.clone(), id);
                        }
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
                answer_lost(&shared);
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
    let granted: Vec<(u64, Vec<u64>)> = pending
        .iter()
        .filter_map(|(seq, p)| holder_token(&st.ks, p, now).map(|t| (*seq, t)))
        .collect();
    for (seq, token) in granted {
        shared.waiters.answer(&mut pending, seq, Some(token));
    }
}

/// The tokens of the leases `p`'s owner holds on its keys at `now` (in any mode), if it
/// holds every one.
fn holder_token(ks: &crate::state::Keyspace, p: &Pending, now: u64) -> Option<Vec<u64>> {
    p.keys
        .iter()
        .map(|k| ks.lock_holder_token(k, &p.owner, now))
        .collect()
}

/// Answers the queued waiters that have been missing from their queue for [`LOST_AFTER`]
/// checks with no grant reaching them (a snapshot install covered their grant, or their
/// skip): with the token if their owner holds the lock, else with an error.
fn answer_lost(shared: &Shared) {
    let Ok(st) = shared.state.read() else {
        return;
    };
    let now = super::reader::cluster_now(&shared.raft, &st, &shared.clock);
    let Ok(mut pending) = shared.waiters.pending.lock() else {
        return;
    };
    let (node, boot) = (shared.waiters.node, shared.waiters.boot);
    let mut lost = Vec::new();
    for (&seq, p) in pending.iter_mut().filter(|(_, p)| p.queued) {
        let id = WaiterId { node, boot, seq };
        // An MLOCK waiter is in all its keys' queues or none (it joins and leaves them in
        // one entry), so its first key tells.
        let queued = p.keys.first().is_some_and(|k| {
            st.ks
                .lock_meta(k)
                .is_some_and(|m| m.queue.iter().any(|w| w.id == id))
        });
        p.seen |= queued;
        p.misses = if queued {
            0
        } else {
            p.misses.saturating_add(1)
        };
        let limit = if p.seen {
            LOST_AFTER
        } else {
            LOST_UNSEEN_AFTER
        };
        if p.misses >= limit {
            lost.push((seq, holder_token(&st.ks, p, now)));
        }
    }
    for (seq, outcome) in lost {
        tracing::warn!(
            waiter = seq,
            granted = outcome.is_some(),
            "a lock waiter is in no queue and no grant reached it (a snapshot install covered it?); answering it from the state"
        );
        shared.waiters.answer(&mut pending, seq, outcome);
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
