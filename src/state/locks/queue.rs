//! A lock's FIFO queue: joining it, leaving it through the log, and dropping the waiters of
//! a restarted node.

use bytes::Bytes;

use super::meta::{Mode, Waiter, WaiterId};
use crate::state::keyspace::Keyspace;

impl Keyspace {
    /// Puts a waiter at the end of the queue of `key`. A retry by an owner already queued
    /// keeps its place (its earlier request may have been queued even though its client saw
    /// no reply), with the new request's waiter and mode.
    pub(super) fn enqueue(&mut self, key: &Bytes, waiter: Waiter, mode: Mode, now: u64) {
        // An MLOCK waiter of the owner keeps no place here: it leaves all its queues (a
        // place kept in one of them only could order two MLOCKs differently in two queues).
        let group = self.lock_meta(key).and_then(|m| {
            let old = m.queue.iter().find(|w| w.owner == waiter.owner)?;
            Some((old.id, m.group_of(old.id)?.clone()))
        });
        if let Some((old, keys)) = group {
            self.drop_waiter(&keys, old, now);
        }
        let meta = self.lock_meta_mut(key);
        let id = waiter.id;
        match meta.queue.iter_mut().find(|w| w.owner == waiter.owner) {
            Some(w) => *w = waiter,
            None => meta.queue.push_back(waiter),
        }
        if mode != Mode::Exclusive {
            meta.kinds.modes.push((id, mode));
        }
        meta.tidy();
    }

    /// Takes a waiter out of the queue (its wait ended on its node); false if it was not
    /// queued (already granted, skipped, or never queued).
    pub fn lock_cancel(&mut self, key: &Bytes, id: WaiterId, now: u64) -> bool {
        let Some(meta) = self.lock_meta(key) else {
            return false;
        };
        if !meta.queue.iter().any(|w| w.id == id) {
            return false;
        }
        // An MLOCK waiter leaves the queues of all its keys.
        let keys = meta
            .group_of(id)
            .cloned()
            .unwrap_or_else(|| vec![key.clone()]);
        self.drop_waiter(&keys, id, now);
        for key in &keys {
            self.drop_lock_meta_if_idle(key, now);
            // The waiter may have kept readers, permits or others from the waiters behind it.
            self.settle_lock(key, now, self.revision());
        }
        true
    }

    /// Drops every waiter of `node` queued by a process other than `boot` (the node
    /// restarted: their clients are gone). Returns how many were dropped.
    pub fn lock_purge(&mut self, node: u64, boot: u64, now: u64) -> usize {
        let keys: Vec<Bytes> = self
            .lock_metas()
            .iter()
            .filter(|(_, m)| m.queue.iter().any(|w| is_stale(w, node, boot)))
            .map(|(k, _)| k.clone())
            .collect();
        let mut dropped = 0;
        for key in keys {
            let meta = self.lock_meta_mut(&key);
            let before = meta.queue.len();
            meta.queue.retain(|w| !is_stale(w, node, boot));
            meta.tidy();
            dropped += before - meta.queue.len();
            self.drop_lock_meta_if_idle(&key, now);
        }
        dropped
    }

    /// True if `node` has waiters queued by a process other than `boot`.
    pub fn has_stale_waiters(&self, node: u64, boot: u64) -> bool {
        self.lock_metas()
            .values()
            .any(|m| m.queue.iter().any(|w| is_stale(w, node, boot)))
    }

    /// Waiters queued for `key`, and the remaining lock-delay in ms at `now`.
    pub fn lock_queue(&self, key: &[u8], now: u64) -> (usize, u64) {
        match self.lock_meta(key) {
            Some(m) => {
                // A lease that has expired but not been removed yet starts its delay now.
                let pending = match (self.entries().get(key), m.delay) {
                    (Some(e), Some((token, d))) if !e.live(now) && e.token == token => {
                        e.expire_at.unwrap_or(now).saturating_add(d)
                    }
                    _ => 0,
                };
                let until = m.blocked_until.max(pending);
                (m.queue.len(), until.saturating_sub(now))
            }
            None => (0, 0),
        }
    }

    /// True while a lock-delay keeps `key` from being granted.
    pub(super) fn lock_blocked(&self, key: &[u8], now: u64) -> bool {
        self.lock_meta(key).is_some_and(|m| {
            m.blocked_until > now || !m.queue.is_empty() || !m.kinds.holders.is_empty()
        })
    }
}

fn is_stale(w: &Waiter, node: u64, boot: u64) -> bool {
    w.id.node == node && w.id.boot != boot
}
