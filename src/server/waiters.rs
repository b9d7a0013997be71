//! One registry of the clients of this node process that wait for an answer from the
//! applied log: lock waiters (`lockwait`, answered with tokens) and blocked pops (`popwait`,
//! answered with a served reply) are both a [`Registry`], generic over the waiter's data and
//! its outcome.
//!
//! A waiter is registered before its entry is proposed, marked queued once its entry queued
//! it, and then either answered (at most once: the answer removes it) or forgotten by its
//! client (which then leaves the replicated queue). An outcome for a waiter that is no
//! longer registered, or whose client dropped its receiver, is handed back to the caller,
//! which gives back what it stands for (a lease, popped elements): an answer is never
//! delivered twice nor silently dropped. A queued waiter that disappears from the replicated
//! queues without an answer (a snapshot install covered it) is found by [`Table::missing`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use tokio::sync::oneshot;

use crate::state::WaiterId;

/// Checks in a row (one a second) that must find a queued waiter gone from the replicated
/// queues, with no answer handed to it, before it is answered from the state: a waiter seen
/// there before (the answer of an entry applied here arrives within milliseconds)...
pub const LOST_AFTER: u8 = 2;
/// ... and one never seen there (its entry may be applied elsewhere and not yet here: a
/// follower that lags).
pub const LOST_UNSEEN_AFTER: u8 = 10;

/// The waiters of one kind of this node process, keyed by [`WaiterId`].
pub struct Registry<D, O> {
    node: u64,
    boot: u64,
    next: AtomicU64,
    table: Mutex<Table<D, O>>,
}

/// The registered waiters, locked (see [`Registry::table`]).
pub struct Table<D, O> {
    node: u64,
    boot: u64,
    waiters: HashMap<u64, Waiter<D, O>>,
}

struct Waiter<D, O> {
    data: D,
    tx: oneshot::Sender<O>,
    /// Its entry applied and queued it (set by the session).
    queued: bool,
    /// A check found it in its queue in this node's state.
    seen: bool,
    /// Consecutive checks that found it in no queue.
    misses: u8,
}

/// Why an outcome reached no client: it is handed back for the caller to give back.
#[derive(Debug, PartialEq)]
pub enum Unanswered<D, O> {
    /// No such waiter is registered: it was forgotten, or already answered.
    NotWaiting(O),
    /// The waiter's client had dropped its receiver (the waiter is unregistered now).
    Dropped(D, O),
}

impl<D, O> Registry<D, O> {
    /// An empty registry for this node process.
    pub fn new(node: u64, boot: u64) -> Registry<D, O> {
        Registry {
            node,
            boot,
            next: AtomicU64::new(1),
            table: Mutex::new(Table {
                node,
                boot,
                waiters: HashMap::new(),
            }),
        }
    }

    /// Registers a waiter with `data`; the receiver gets its outcome.
    pub fn register(&self, data: D) -> (WaiterId, oneshot::Receiver<O>) {
        let id = WaiterId {
            node: self.node,
            boot: self.boot,
            seq: self.next.fetch_add(1, Ordering::Relaxed),
        };
        let (tx, rx) = oneshot::channel();
        if let Some(mut t) = self.table() {
            let waiter = Waiter {
                data,
                tx,
                queued: false,
                seen: false,
                misses: 0,
            };
            t.waiters.insert(id.seq, waiter);
        }
        (id, rx)
    }

    /// True for a waiter of this node process (another node's or another process's waiter
    /// is not ours to act on).
    pub fn ours(&self, id: WaiterId) -> bool {
        id.node == self.node && id.boot == self.boot
    }

    /// This node process's (node id, boot id).
    pub fn process(&self) -> (u64, u64) {
        (self.node, self.boot)
    }

    /// The registered waiters, locked (None if a panic poisoned the lock).
    pub fn table(&self) -> Option<MutexGuard<'_, Table<D, O>>> {
        self.table.lock().ok()
    }

    /// Notes that the waiter's entry applied and queued it: from now on, a waiter missing
    /// from its queue is looked into.
    pub fn mark_queued(&self, id: WaiterId) {
        if let Some(w) = self
            .table()
            .as_mut()
            .and_then(|t| t.waiters.get_mut(&id.seq))
        {
            w.queued = true;
        }
    }

    /// Unregisters a waiter without answering it; its data if it was registered.
    pub fn forget(&self, id: WaiterId) -> Option<D> {
        self.table()?.remove(id.seq)
    }

    /// Answers a waiter (see [`Table::answer`]).
    pub fn answer(&self, id: WaiterId, outcome: O) -> Result<D, Unanswered<D, O>> {
        match self.table() {
            Some(mut t) => t.answer(id.seq, outcome),
            None => Err(Unanswered::NotWaiting(outcome)),
        }
    }

    /// How many waiters are registered.
    pub fn len(&self) -> usize {
        self.table().map_or(0, |t| t.waiters.len())
    }
}

impl<D, O> Table<D, O> {
    /// The id of this process's waiter `seq`.
    pub fn id(&self, seq: u64) -> WaiterId {
        WaiterId {
            node: self.node,
            boot: self.boot,
            seq,
        }
    }

    /// The data of waiter `seq`, if registered.
    pub fn get(&self, seq: u64) -> Option<&D> {
        self.waiters.get(&seq).map(|w| &w.data)
    }

    /// The data of waiter `seq`, to change, if registered.
    pub fn get_mut(&mut self, seq: u64) -> Option<&mut D> {
        self.waiters.get_mut(&seq).map(|w| &mut w.data)
    }

    /// Every registered waiter's seq.
    pub fn seqs(&self) -> Vec<u64> {
        self.waiters.keys().copied().collect()
    }

    /// Unregisters waiter `seq` without answering it; its data if it was registered.
    pub fn remove(&mut self, seq: u64) -> Option<D> {
        self.waiters.remove(&seq).map(|w| w.data)
    }

    /// Unregisters waiter `seq` and hands it `outcome`: its data, or the outcome back if it
    /// reached nobody.
    pub fn answer(&mut self, seq: u64, outcome: O) -> Result<D, Unanswered<D, O>> {
        let Some(w) = self.waiters.remove(&seq) else {
            return Err(Unanswered::NotWaiting(outcome));
        };
        match w.tx.send(outcome) {
            Ok(()) => Ok(w.data),
            Err(outcome) => Err(Unanswered::Dropped(w.data, outcome)),
        }
    }

    /// One check of the queued waiters against the replicated queues (`in_queue`): the ones
    /// found missing [`LOST_AFTER`] times in a row ([`LOST_UNSEEN_AFTER`] if never seen
    /// there). They stay registered.
    pub fn missing(&mut self, mut in_queue: impl FnMut(WaiterId, &D) -> bool) -> Vec<WaiterId> {
        let (node, boot) = (self.node, self.boot);
        let mut lost = Vec::new();
        for (&seq, w) in self.waiters.iter_mut().filter(|(_, w)| w.queued) {
            let id = WaiterId { node, boot, seq };
            let queued = in_queue(id, &w.data);
            w.seen |= queued;
            w.misses = if queued {
                0
            } else {
                w.misses.saturating_add(1)
            };
            let limit = if w.seen {
                LOST_AFTER
            } else {
                LOST_UNSEEN_AFTER
            };
            if w.misses >= limit {
                lost.push(id);
            }
        }
        lost
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::oneshot::error::TryRecvError;

    fn registry() -> Registry<&'static str, u64> {
        Registry::new(1, 9)
    }

    #[test]
    fn an_answer_is_delivered_once() {
        let r = registry();
        let (id, mut rx) = r.register("a");
        assert_eq!((id.node, id.boot), (1, 9));
        assert_eq!(r.answer(id, 7), Ok("a"));
        assert_eq!(rx.try_recv(), Ok(7));
        // A second answer (a late duplicate event) reaches nobody and is handed back.
        assert_eq!(r.answer(id, 8), Err(Unanswered::NotWaiting(8)));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Closed));
        assert!(r.forget(id).is_none(), "answered: nothing to forget");
        assert_eq!(r.len(), 0);
    }

    #[test]
    fn a_late_answer_after_forget_is_handed_back() {
        let r = registry();
        let (id, mut rx) = r.register("a");
        let (other, mut other_rx) = r.register("b");
        assert_ne!(id, other);
        assert_eq!(r.forget(id), Some("a"));
        assert_eq!(r.forget(id), None, "only once");
        assert_eq!(r.answer(id, 5), Err(Unanswered::NotWaiting(5)));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Closed));
        // The other waiter is untouched.
        assert_eq!(r.len(), 1);
        assert_eq!(r.answer(other, 6), Ok("b"));
        assert_eq!(other_rx.try_recv(), Ok(6));
    }

    #[test]
    fn an_answer_to_a_dropped_receiver_is_handed_back_with_its_data() {
        let r = registry();
        let (id, rx) = r.register("a");
        drop(rx);
        assert_eq!(r.answer(id, 3), Err(Unanswered::Dropped("a", 3)));
        assert_eq!(r.len(), 0);
        assert_eq!(r.answer(id, 3), Err(Unanswered::NotWaiting(3)));
    }

    #[test]
    fn only_this_process_waiters_are_ours() {
        let r = registry();
        let (id, _rx) = r.register("a");
        assert!(r.ours(id));
        assert!(!r.ours(WaiterId { boot: 8, ..id }));
        assert!(!r.ours(WaiterId { node: 2, ..id }));
        let t = r.table().expect("table");
        assert_eq!(t.get(id.seq), Some(&"a"));
        assert_eq!(t.seqs(), vec![id.seq]);
    }

    #[test]
    fn a_queued_waiter_missing_from_the_queues_is_found_lost() {
        let r = registry();
        let (early, _rx1) = r.register("early");
        let (seen, _rx2) = r.register("seen");
        let (never, _rx3) = r.register("never");
        for id in [seen, never] {
            r.mark_queued(id);
        }
        let check = |present: Option<WaiterId>| {
            let mut t = r.table().expect("table");
            let mut lost: Vec<u64> = t
                .missing(|id, _| Some(id) == present)
                .into_iter()
                .map(|id| id.seq)
                .collect();
            lost.sort();
            lost
        };
        // `early`'s entry has not answered yet: never a candidate. `seen` is in the queue.
        assert!(check(Some(seen)).is_empty());
        // `seen` leaves the queues with no answer: lost at the second check in a row.
        assert!(check(None).is_empty());
        assert_eq!(check(None), vec![seen.seq]);
        // One never seen queued (its node may lag) is lost only at the tenth.
        for _ in 3..9 {
            assert_eq!(check(None), vec![seen.seq]);
        }
        assert_eq!(check(None), vec![seen.seq, never.seq]);
        assert!(!check(None).contains(&early.seq));
        // Found lost is not answered: still registered until its owner answers it.
        assert_eq!(r.len(), 3);
    }
}
