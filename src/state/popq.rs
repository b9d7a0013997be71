//! The replicated queue of clients blocked in BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP,
//! BZPOPMIN, BZPOPMAX and BZMPOP, so that they are served first-come, first-served across
//! the whole cluster.
//!
//! A blocking pop that finds nothing joins the queue of every key it names, through the log
//! (its entry's place in the log is its place in the queues). When a command leaves data in a
//! key that has waiters (a push, a move, a store, a RENAME onto it), the key is *ready*; after
//! that top-level command (a whole MULTI/EXEC or script counts as one, as in Redis), apply
//! serves the key's waiters in queue order while it holds data of their type, on every
//! replica alike (`cmd::popwait`). A served waiter leaves every queue, and its node hands
//! the reply to its client. A waiter leaves without being served through the log: when its
//! client's wait runs out or it hangs up ([`Keyspace::pop_cancel`]), when its node restarts
//! ([`Keyspace::pop_purge`]), or, if those entries are lost, once its deadline has passed
//! on the cluster clock (it is skipped, never served late).
//!
//! This module stores the waiter's command as opaque bytes (the `cmd` layer encodes and
//! decodes it), so the keyspace needs to know nothing about commands.

use std::collections::VecDeque;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::keyspace::Keyspace;
use super::locks::WaiterId;

/// Which values a waiter pops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PopKind {
    /// Lists (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP).
    List,
    /// Sorted sets (BZPOPMIN, BZPOPMAX, BZMPOP).
    ZSet,
}

/// One blocked client, as stored in the queue of each key it waits on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PopWaiter {
    /// Who to answer.
    pub id: WaiterId,
    /// What it pops.
    pub kind: PopKind,
    /// Cluster time after which it is skipped (`None`: waits for ever).
    pub deadline: Option<u64>,
    /// The blocking command, encoded by the `cmd` layer.
    pub cmd: Bytes,
    /// Every key it waits on (to leave all their queues at once).
    pub keys: Vec<Bytes>,
}

impl PopWaiter {
    /// True if the waiter's deadline has passed at `now`.
    pub fn expired(&self, now: u64) -> bool {
        self.deadline.is_some_and(|d| now > d)
    }
}

impl Keyspace {
    /// The waiters blocked on `key`, in arrival order.
    pub fn pop_queue(&self, key: &[u8]) -> Option<&VecDeque<PopWaiter>> {
        self.popq.get(key)
    }

    /// Every key's queue (for snapshots and full rewrites).
    pub fn pop_queues(&self) -> &std::collections::BTreeMap<Bytes, VecDeque<PopWaiter>> {
        &self.popq
    }

    /// Replaces every queue (after loading a database or a snapshot).
    pub fn set_pop_queues(
        &mut self,
        queues: std::collections::BTreeMap<Bytes, VecDeque<PopWaiter>>,
    ) {
        self.popq = queues;
    }

    /// Puts `w` at the end of the queue of each of its keys. A waiter already queued (a
    /// retry of the same request) keeps its place.
    pub fn pop_enqueue(&mut self, w: PopWaiter) {
        let mut keys = w.keys.clone();
        keys.sort();
        keys.dedup();
        for key in keys {
            let q = self.popq.entry(key.clone()).or_default();
            if !q.iter().any(|x| x.id == w.id) {
                q.push_back(w.clone());
                self.dirty_popq.insert(key);
            }
        }
    }

    /// Takes `id` out of every queue it is in. True if it was queued.
    pub fn pop_remove(&mut self, keys: &[Bytes], id: WaiterId) -> bool {
        let mut found = false;
        for key in keys {
            let Some(q) = self.popq.get_mut(key) else {
                continue;
            };
            let before = q.len();
            q.retain(|w| w.id != id);
            if q.len() != before {
                found = true;
                if q.is_empty() {
                    self.popq.remove(key);
                }
                self.dirty_popq.insert(key.clone());
            }
        }
        found
    }

    /// A waiter's client stopped waiting (timeout, hang-up): it leaves every queue. True if
    /// it was still queued (not served).
    pub fn pop_cancel(&mut self, keys: &[Bytes], id: WaiterId) -> bool {
        self.pop_remove(keys, id)
    }

    /// Drops every waiter of `node` queued by a process other than `boot` (the node
    /// restarted: their clients are gone). Returns how many were dropped.
    pub fn pop_purge(&mut self, node: u64, boot: u64) -> usize {
        let stale: Vec<PopWaiter> = self
            .popq
            .values()
            .flatten()
            .filter(|w| is_stale(w.id, node, boot))
            .cloned()
            .collect();
        let mut dropped = 0;
        for w in stale {
            dropped += usize::from(self.pop_remove(&w.keys, w.id));
        }
        dropped
    }

    /// True if `node` has pop waiters queued by a process other than `boot`.
    pub fn has_stale_pop_waiters(&self, node: u64, boot: u64) -> bool {
        self.popq
            .values()
            .flatten()
            .any(|w| is_stale(w.id, node, boot))
    }

    /// How many distinct clients are queued, cluster-wide.
    pub fn pop_waiter_count(&self) -> usize {
        let mut ids: Vec<WaiterId> = self.popq.values().flatten().map(|w| w.id).collect();
        ids.sort_by_key(|i| (i.node, i.boot, i.seq));
        ids.dedup();
        ids.len()
    }

    /// Marks `key` ready if clients wait on it (called when a command leaves data there).
    pub(super) fn mark_ready(&mut self, key: &Bytes) {
        if self.popq.contains_key(key) && !self.ready.contains(key) {
            self.ready.push_back(key.clone());
        }
    }

    /// Takes the next ready key, in the order keys became ready (deterministic: the order of
    /// the writes in the log), if any. Redis serves its ready keys in this order too: a
    /// transaction that pushes onto `b` and then `a` serves `b`'s clients first.
    pub fn next_ready(&mut self) -> Option<Bytes> {
        self.ready.pop_front()
    }
}

fn is_stale(id: WaiterId, node: u64, boot: u64) -> bool {
    id.node == node && id.boot != boot
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    fn waiter(node: u64, boot: u64, seq: u64, keys: &[&str]) -> PopWaiter {
        PopWaiter {
            id: WaiterId { node, boot, seq },
            kind: PopKind::List,
            deadline: None,
            cmd: Bytes::new(),
            keys: keys.iter().map(|k| b(k)).collect(),
        }
    }

    #[test]
    fn queues_keep_arrival_order_and_a_waiter_leaves_all_of_them() {
        let mut ks = Keyspace::default();
        ks.pop_enqueue(waiter(1, 1, 1, &["a", "b"]));
        ks.pop_enqueue(waiter(2, 1, 1, &["a"]));
        // A retry keeps its place.
        ks.pop_enqueue(waiter(1, 1, 1, &["a", "b"]));
        let order: Vec<u64> = ks
            .pop_queue(b"a")
            .unwrap()
            .iter()
            .map(|w| w.id.node)
            .collect();
        assert_eq!(order, vec![1, 2]);
        assert_eq!(ks.pop_waiter_count(), 2);
        let first = waiter(1, 1, 1, &["a", "b"]);
        assert!(ks.pop_cancel(&first.keys, first.id));
        assert!(!ks.pop_cancel(&first.keys, first.id), "already gone");
        assert!(
            ks.pop_queue(b"b").is_none(),
            "an empty queue leaves no record"
        );
        assert_eq!(ks.pop_queue(b"a").unwrap().len(), 1);
    }

    #[test]
    fn a_restarted_node_purges_only_its_older_processes_waiters() {
        let mut ks = Keyspace::default();
        ks.pop_enqueue(waiter(1, 7, 1, &["a"]));
        ks.pop_enqueue(waiter(1, 8, 1, &["a"]));
        ks.pop_enqueue(waiter(2, 7, 1, &["a", "c"]));
        assert!(ks.has_stale_pop_waiters(1, 8));
        assert_eq!(ks.pop_purge(1, 8), 1);
        assert!(!ks.has_stale_pop_waiters(1, 8));
        let left: Vec<(u64, u64)> = ks
            .pop_queue(b"a")
            .unwrap()
            .iter()
            .map(|w| (w.id.node, w.id.boot))
            .collect();
        assert_eq!(left, vec![(1, 8), (2, 7)]);
    }

    #[test]
    fn only_keys_with_waiters_become_ready() {
        let mut ks = Keyspace::default();
        ks.pop_enqueue(waiter(1, 1, 1, &["a"]));
        ks.mark_ready(&b("z"));
        ks.mark_ready(&b("a"));
        assert_eq!(ks.next_ready(), Some(b("a")));
        assert_eq!(ks.next_ready(), None);
    }

    #[test]
    fn ready_keys_are_served_in_the_order_they_became_ready() {
        let mut ks = Keyspace::default();
        ks.pop_enqueue(waiter(1, 1, 1, &["b", "a"]));
        ks.mark_ready(&b("b"));
        ks.mark_ready(&b("a"));
        ks.mark_ready(&b("b"));
        assert_eq!(ks.next_ready(), Some(b("b")));
        assert_eq!(ks.next_ready(), Some(b("a")));
        assert_eq!(ks.next_ready(), None);
    }
}
