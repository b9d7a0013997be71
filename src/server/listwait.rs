//! The node's queue of clients blocked in BLPOP, BRPOP, BLMOVE, BRPOPLPUSH and BLMPOP, so
//! that the clients of one node are served first-come, first-served.
//!
//! Each blocked client holds a [`Ticket`] in the queue of every key it waits on. When a push
//! to a key is applied, only the head of that key's queue retries its pop; when a client
//! leaves the queue (it popped, timed out, or hung up), the new heads of its keys are
//! notified and retry, because an element may be left for them. A client only ever tries
//! the keys it is first in line for: one that arrives while others already wait on a key
//! leaves that key to them, as Redis serves them before it.
//!
//! The order is node-local: clients of different nodes still race (each retry is a log
//! entry, and the first one applied wins). See the README's note "Blocking pops ... are
//! first-come, first-served per node".

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::sync::Notify;

#[derive(Default)]
struct Inner {
    next: u64,
    queues: BTreeMap<Bytes, VecDeque<u64>>,
    wake: BTreeMap<u64, Arc<Notify>>,
}

/// This node's blocked list clients, per key, in arrival order.
#[derive(Default)]
pub struct ListWaiters {
    inner: Arc<Mutex<Inner>>,
}

/// A place in the queues; leaving them (drop) lets the next clients try.
pub struct Ticket {
    seq: u64,
    keys: Vec<Bytes>,
    /// Set when this client's turn came without a push event (a predecessor left).
    pub turn: Arc<Notify>,
    inner: Arc<Mutex<Inner>>,
}

impl ListWaiters {
    /// Queues a client on `keys` (duplicates ignored).
    pub fn join(&self, keys: &[Bytes]) -> Ticket {
        let mut keys = keys.to_vec();
        keys.sort();
        keys.dedup();
        let turn = Arc::new(Notify::new());
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let seq = g.next;
        g.next += 1;
        for k in &keys {
            g.queues.entry(k.clone()).or_default().push_back(seq);
        }
        g.wake.insert(seq, turn.clone());
        Ticket {
            seq,
            keys,
            turn,
            inner: self.inner.clone(),
        }
    }

    /// How many clients wait (tests and INFO-style checks).
    pub fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .wake
            .len()
    }

    /// True if nobody waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Ticket {
    /// True if this client is first in `key`'s queue: a push to `key` is its to take.
    pub fn is_head(&self, key: &[u8]) -> bool {
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.queues
            .get(key)
            .and_then(|q| q.front())
            .is_some_and(|&s| s == self.seq)
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.wake.remove(&self.seq);
        let mut next_heads = Vec::new();
        for k in &self.keys {
            let Some(q) = g.queues.get_mut(k) else {
                continue;
            };
            let was_head = q.front() == Some(&self.seq);
            q.retain(|&s| s != self.seq);
            if was_head {
                next_heads.extend(q.front().copied());
            }
            if q.is_empty() {
                g.queues.remove(k);
            }
        }
        for s in next_heads {
            if let Some(n) = g.wake.get(&s) {
                n.notify_one();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn heads_follow_arrival_order_per_key() {
        let w = ListWaiters::default();
        let t1 = w.join(&[b("a")]);
        let t2 = w.join(&[b("a"), b("b")]);
        let t3 = w.join(&[b("b")]);
        assert!(t1.is_head(b"a") && !t2.is_head(b"a"));
        assert!(t2.is_head(b"b") && !t3.is_head(b"b"));
        drop(t1);
        assert!(t2.is_head(b"a"));
        drop(t2);
        assert!(t3.is_head(b"b"));
        drop(t3);
        assert!(w.is_empty());
    }
}
