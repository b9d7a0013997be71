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

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{oneshot, watch};

use super::waiters::{self, Registry, Unanswered};
use super::Shared;
use crate::cmd::lockwait::{LockCancel, LockPurge, LockReleaseGrant};
use crate::cmd::Command;
use crate::resp::Reply;
use crate::state::{Event, LockEventKind, WaiterId};
use crate::store::state_machine::EventReceiver;

/// How often a node checks for waiters that an earlier process of it left in the queues.
const PURGE_CHECK: Duration = Duration::from_secs(1);
/// Attempts at releasing a grant that reached nobody (each waits for the write's outcome).
const RELEASE_ATTEMPTS: usize = 5;

/// How many answers given from the state are remembered, so that a late grant event for the
/// same waiter is not taken for a grant that reached nobody.
const ANSWERED_KEPT: usize = 1024;

/// What a waiter is told: the tokens of its grant (one per key; MLOCK waits for several),
/// or `None` when its place in the queue was lost (a snapshot install covered what happened
/// to it).
pub type Outcome = Option<Vec<u64>>;

/// What is kept of one lock waiter.
struct Pending {
    /// Its keys: one, or an MLOCK's.
    keys: Vec<Bytes>,
    /// The tokens granted so far, by key (an MLOCK's grants arrive as one event per key).
    tokens: Vec<Option<u64>>,
    owner: Bytes,
}

/// The locked registry of lock waiters.
type Table = waiters::Table<Pending, Outcome>;

/// The clients of this node process that wait in a lock queue.
pub struct Waiters {
    registry: Registry<Pending, Outcome>,
    /// Waiters answered from the state with a token: (seq, token), newest last.
    answered: Mutex<VecDeque<(u64, u64)>>,
}

impl Waiters {
    /// An empty registry for this node process.
    pub fn new(node: u64, boot: u64) -> Waiters {
        Waiters {
            registry: Registry::new(node, boot),
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
        self.registry.register(Pending {
            tokens: vec![None; keys.len()],
            keys,
            owner,
        })
    }

    /// Notes that the waiter's LOCK applied and queued it: from now on, a waiter missing
    /// from its queue is looked into.
    pub fn mark_queued(&self, id: WaiterId) {
        self.registry.mark_queued(id);
    }

    /// Unregisters a waiter. False if a grant has already been handed to it (its tokens are
    /// in the receiver, or about to be: an MLOCK's grant of which some keys have arrived
    /// stays registered until the rest, from the same entry, arrive).
    pub fn forget(&self, id: WaiterId) -> bool {
        let Some(mut t) = self.registry.table() else {
            return false;
        };
        match t.get(id.seq) {
            Some(w) if w.tokens.iter().any(Option::is_some) => false,
            Some(_) => t.remove(id.seq).is_some(),
            None => false,
        }
    }

    /// Hands the grant of `key` to its waiter. `Err` lists the grants to give back: the
    /// waiter is not registered (or has gone).
    fn deliver(&self, id: WaiterId, key: &Bytes, token: u64) -> Result<(), Vec<(Bytes, u64)>> {
        if !self.registry.ours(id) {
            return Ok(()); // another node's or another process's waiter: not ours to act on
        }
        let Some(mut t) = self.registry.table() else {
            return Err(vec![(key.clone(), token)]);
        };
        let Some(p) = t.get_mut(id.seq) else {
            drop(t);
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
        let tokens: Vec<u64> = p.tokens.iter().flatten().copied().collect();
        match t.answer(id.seq, Some(tokens.clone())) {
            Ok(_) | Err(Unanswered::NotWaiting(_)) => Ok(()),
            Err(Unanswered::Dropped(p, _)) => Err(p.keys.into_iter().zip(tokens).collect()),
        }
    }

    /// Answers a waiter from the state: with its tokens, or as lost.
    fn answer(&self, t: &mut Table, seq: u64, outcome: Outcome) {
        if t.get(seq).is_none() {
            return;
        }
        if let (Some(tokens), Ok(mut a)) = (&outcome, self.answered.lock()) {
            for &token in tokens {
                if a.len() >= ANSWERED_KEPT {
                    a.pop_front();
                }
                a.push_back((seq, token));
            }
        }
        let _ = t.answer(seq, outcome);
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
    let waiters = &shared.waiters;
    let Ok(st) = shared.state.read() else {
        return if waiters.forget(id) {
            Ended::Free
        } else {
            Ended::Delivered
        };
    };
    let now = super::reader::cluster_now(&shared.raft, &st, &shared.clock);
    let Some(mut t) = waiters.registry.table() else {
        return Ended::Free;
    };
    let Some(p) = t.get(id.seq) else {
        return Ended::Delivered;
    };
    match holder_token(&st.ks, p, now) {
        Some(tokens) => {
            waiters.answer(&mut t, id.seq, Some(tokens.clone()));
            Ended::Held(tokens)
        }
        None => {
            t.remove(id.seq);
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
pub async fn run(shared: Arc<Shared>, mut events: EventReceiver, mut stop: watch::Receiver<bool>) {
    let mut purge = tokio::time::interval(PURGE_CHECK);
    loop {
        tokio::select! {
            ev = events.recv() => match ev.as_deref() {
                // A grant to a waiter; or, for an MLOCK, a key its owner held already.
                Ok(Event::Lock { kind: LockEventKind::Granted | LockEventKind::Renewed, key, token, owner, waiter: Some(id) }) => {
                    if let Err(back) = shared.waiters.deliver(*id, key, *token) {
                        for (key, token) in back {
                            release(&shared, key, token, owner.clone(), *id);
                        }
                    }
                }
                Ok(Event::Served { waiter, reply }) => super::popwait::deliver(&shared, *waiter, reply),
                Ok(_) => {}
                Err(RecvError::Lagged(n)) => {
                    tracing::error!(lost = *n, "the waiter task fell behind; answering lock waiters from the state, failing blocked pops");
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
    let Some(mut t) = shared.waiters.registry.table() else {
        return;
    };
    let granted: Vec<(u64, Vec<u64>)> = t
        .seqs()
        .into_iter()
        .filter_map(|seq| {
            let p = t.get(seq)?;
            holder_token(&st.ks, p, now).map(|tokens| (seq, tokens))
        })
        .collect();
    for (seq, tokens) in granted {
        shared.waiters.answer(&mut t, seq, Some(tokens));
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

/// Answers the queued waiters that have been missing from their queue for
/// [`waiters::LOST_AFTER`] checks with no grant reaching them (a snapshot install covered
/// their grant, or their skip): with the token if their owner holds the lock, else with an
/// error.
fn answer_lost(shared: &Shared) {
    let Ok(st) = shared.state.read() else {
        return;
    };
    let now = super::reader::cluster_now(&shared.raft, &st, &shared.clock);
    let Some(mut t) = shared.waiters.registry.table() else {
        return;
    };
    // An MLOCK waiter is in all its keys' queues or none (it joins and leaves them in one
    // entry), so its first key tells.
    let lost = t.missing(|id, p| {
        p.keys.first().is_some_and(|k| {
            st.ks
                .lock_meta(k)
                .is_some_and(|m| m.queue.iter().any(|w| w.id == id))
        })
    });
    for id in lost {
        let outcome = t.get(id.seq).and_then(|p| holder_token(&st.ks, p, now));
        tracing::warn!(
            waiter = id.seq,
            granted = outcome.is_some(),
            "a lock waiter is in no queue and no grant reached it (a snapshot install covered it?); answering it from the state"
        );
        shared.waiters.answer(&mut t, id.seq, outcome);
    }
}

/// Proposes dropping the waiters (of locks and of blocked pops) an earlier process of this
/// node left queued (their clients went with it), if there are any.
fn purge_stale(shared: &Shared) {
    let (node, boot) = shared.waiters.registry.process();
    let stale = shared.state.read().is_ok_and(|st| {
        st.ks.has_stale_waiters(node, boot) || st.ks.has_stale_pop_waiters(node, boot)
    });
    if stale {
        drop(
            shared
                .proposer
                .submit(Command::LockPurge(LockPurge { node, boot })),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::oneshot::error::TryRecvError;

    fn key(k: &'static str) -> Bytes {
        Bytes::from_static(k.as_bytes())
    }

    #[test]
    fn a_grant_reaches_its_waiter_once_and_a_late_one_is_given_back() {
        let w = Waiters::new(1, 9);
        let (id, mut rx) = w.register(vec![key("k")], key("me"));
        assert_eq!(w.deliver(id, &key("k"), 7), Ok(()));
        assert_eq!(rx.try_recv(), Ok(Some(vec![7])));
        // The same grant again, or a grant after the waiter was forgotten: released.
        assert_eq!(w.deliver(id, &key("k"), 7), Err(vec![(key("k"), 7)]));
        let (gone, _rx) = w.register(vec![key("k")], key("me"));
        assert!(w.forget(gone));
        assert!(!w.forget(gone), "only once");
        assert_eq!(w.deliver(gone, &key("k"), 8), Err(vec![(key("k"), 8)]));
        // Another process's waiter is not ours to release.
        let other = WaiterId { boot: 8, ..gone };
        assert_eq!(w.deliver(other, &key("k"), 9), Ok(()));
    }

    #[test]
    fn an_mlock_grant_is_handed_over_whole() {
        let w = Waiters::new(1, 9);
        let (id, mut rx) = w.register(vec![key("a"), key("b")], key("me"));
        assert_eq!(w.deliver(id, &key("b"), 4), Ok(()));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
        // Partly granted: its client can no longer simply walk away.
        assert!(!w.forget(id));
        assert_eq!(w.deliver(id, &key("a"), 3), Ok(()));
        assert_eq!(rx.try_recv(), Ok(Some(vec![3, 4])));
        // A key it does not wait for is given back.
        let (id, _rx) = w.register(vec![key("a")], key("me"));
        assert_eq!(w.deliver(id, &key("z"), 5), Err(vec![(key("z"), 5)]));
    }

    #[test]
    fn a_grant_to_a_client_that_dropped_its_receiver_is_given_back() {
        let w = Waiters::new(1, 9);
        let (id, rx) = w.register(vec![key("a"), key("b")], key("me"));
        drop(rx);
        assert_eq!(w.deliver(id, &key("a"), 3), Ok(()));
        assert_eq!(
            w.deliver(id, &key("b"), 4),
            Err(vec![(key("a"), 3), (key("b"), 4)])
        );
    }

    #[test]
    fn a_waiter_answered_from_the_state_takes_no_second_grant() {
        let w = Waiters::new(1, 9);
        let (id, mut rx) = w.register(vec![key("k")], key("me"));
        let (lost, mut lost_rx) = w.register(vec![key("k")], key("me"));
        {
            let mut t = w.registry.table().expect("table");
            w.answer(&mut t, id.seq, Some(vec![6]));
            w.answer(&mut t, lost.seq, None);
            // Answered: a second answer from the state is a no-op.
            w.answer(&mut t, id.seq, Some(vec![60]));
        }
        assert_eq!(rx.try_recv(), Ok(Some(vec![6])));
        assert_eq!(lost_rx.try_recv(), Ok(None));
        // The grant event for the token it was told is expected once, not released...
        assert_eq!(w.deliver(id, &key("k"), 6), Ok(()));
        // ... and only once; any other grant reached nobody.
        assert_eq!(w.deliver(id, &key("k"), 6), Err(vec![(key("k"), 6)]));
        assert_eq!(w.deliver(lost, &key("k"), 11), Err(vec![(key("k"), 11)]));
        assert_eq!(w.registry.len(), 0);
    }
}
