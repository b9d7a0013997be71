//! The replicated half of fair waiting: per-key FIFO queues of waiters, lock-delays, and the
//! lock events every node derives from the applied log.
//!
//! A lock is a string key whose value is its owner (see [`Value::Str`]). A key gets a
//! [`LockMeta`] only while it has waiters or a lock-delay, so plain locks cost nothing more.
//! Every change here happens inside apply, at the entry's cluster time, so every replica
//! grants the same waiter the same token in the same entry:
//! - a release (UNLOCK, or the release of a grant whose client has gone) grants the head of
//!   the queue in the same entry;
//! - an expired lease is removed when an entry next looks at the key (the leader's eviction
//!   entry, or any lock command on it), which grants the head in that entry, unless the
//!   lease had a lock-delay: then nobody is granted the key before `expire_at + delay`;
//! - a waiter leaves the queue through the log ([`Keyspace::lock_cancel`]), when its wait
//!   runs out on the cluster clock, or when its node restarts ([`Keyspace::lock_purge`]).

use std::collections::VecDeque;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::keyspace::{Entry, Event, Keyspace, Value};

/// Who is waiting: the node serving the client, that node process's boot id, and a number
/// unique within the process. Only that node acts on a grant to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WaiterId {
    /// The node the client is connected to.
    pub node: u64,
    /// The boot id of that node's process (a restarted node purges its old waiters).
    pub boot: u64,
    /// Unique within the process.
    pub seq: u64,
}

/// One queued LOCK.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Waiter {
    /// Who to tell.
    pub id: WaiterId,
    /// The owner to grant the lock to.
    pub owner: Bytes,
    /// The lease the grant gets, in ms.
    pub ttl_ms: u64,
    /// The lock-delay of that lease, in ms.
    pub delay_ms: u64,
    /// Cluster time after which the waiter is skipped (`None`: waits for ever).
    pub deadline: Option<u64>,
}

/// A key's queue and lock-delay.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockMeta {
    /// Waiters in arrival (log) order.
    pub queue: VecDeque<Waiter>,
    /// The current lease's lock-delay: (its token, delay ms). It applies only if the lease
    /// with that token expires; a release or another write drops it.
    pub delay: Option<(u64, u64)>,
    /// No grant before this cluster time (a lease with a lock-delay expired).
    pub blocked_until: u64,
}

impl LockMeta {
    /// True when the record holds nothing worth keeping at `now`.
    fn idle(&self, now: u64) -> bool {
        self.queue.is_empty() && self.delay.is_none() && self.blocked_until <= now
    }
}

/// What a lock event reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockEventKind {
    /// The lock was granted (at once, or to a waiter).
    Granted,
    /// The holder released it (UNLOCK), or a grant to a gone client was released.
    Released,
    /// The lease ran out.
    Expired,
    /// The holder renewed it (RENEW, or LOCK again by the same owner).
    Renewed,
}

impl LockEventKind {
    /// The event's name in keyspace notifications.
    pub fn name(self) -> &'static str {
        match self {
            LockEventKind::Granted => "lock_granted",
            LockEventKind::Released => "lock_released",
            LockEventKind::Expired => "lock_expired",
            LockEventKind::Renewed => "lock_renewed",
        }
    }
}

/// A lock event as a keyspace notification: (channel, message) pairs. The keyspace channel
/// carries the event with the lease's token and owner; the keyevent channel carries the key,
/// as Redis's keyevent channels do.
pub fn lock_notifications(
    kind: LockEventKind,
    key: &[u8],
    token: u64,
    owner: &[u8],
) -> [(Bytes, Bytes); 2] {
    let name = kind.name();
    let mut keyspace = b"__keyspace@0__:".to_vec();
    keyspace.extend_from_slice(key);
    let mut message = format!("{name} {token} ").into_bytes();
    message.extend_from_slice(owner);
    [
        (Bytes::from(keyspace), Bytes::from(message)),
        (
            Bytes::from(format!("__keyevent@0__:{name}")),
            Bytes::copy_from_slice(key),
        ),
    ]
}

/// What a LOCK asks for.
#[derive(Clone, Copy, Debug)]
pub struct Acquire<'a> {
    /// The lock's key.
    pub key: &'a Bytes,
    /// The owner.
    pub owner: &'a Bytes,
    /// Lease length in ms.
    pub ttl_ms: u64,
    /// Lock-delay of the lease, in ms (0: none).
    pub delay_ms: u64,
    /// Join the queue if the lock is taken: who waits, and until when (`None`: for ever).
    pub wait: Option<(WaiterId, Option<u64>)>,
}

/// How a LOCK went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acquired {
    /// Granted now, with this token.
    Granted(u64),
    /// Already held by the same owner: the lease was reset; the token is unchanged.
    Held(u64),
    /// Taken (or in its lock-delay); the waiter is in the queue.
    Queued,
    /// Taken, and the caller does not wait.
    Busy,
}

impl Keyspace {
    /// Takes or queues for a lock at `now`; a grant's token is `revision`.
    pub fn lock_acquire(&mut self, a: Acquire<'_>, now: u64, revision: u64) -> Acquired {
        self.settle_lock(a.key, now, revision);
        match self.get(a.key, now) {
            Some(Entry {
                value: Value::Str(v),
                token,
                ..
            }) if v == a.owner => {
                let token = *token;
                self.set_expire(a.key, Some(now.saturating_add(a.ttl_ms)), now);
                self.set_lease_delay(a.key, token, a.delay_ms, now);
                self.emit_lock(LockEventKind::Renewed, a.key, token, a.owner, None);
                return Acquired::Held(token);
            }
            Some(_) => {}
            None if !self.lock_blocked(a.key, now) => {
                self.grant(a.key, a.owner, a.ttl_ms, a.delay_ms, None, now, revision);
                return Acquired::Granted(revision);
            }
            None => {}
        }
        let Some((id, deadline)) = a.wait else {
            return Acquired::Busy;
        };
        let waiter = Waiter {
            id,
            owner: a.owner.clone(),
            ttl_ms: a.ttl_ms,
            delay_ms: a.delay_ms,
            deadline,
        };
        let meta = self.lock_meta_mut(a.key);
        // A retry by an owner already queued keeps its place (its earlier request may have
        // been queued even though its client saw no reply).
        match meta.queue.iter_mut().find(|w| w.owner == waiter.owner) {
            Some(w) => *w = waiter,
            None => meta.queue.push_back(waiter),
        }
        Acquired::Queued
    }

    /// UNLOCK: releases the lock if `owner` holds it and grants it to the next waiter.
    pub fn lock_release(&mut self, key: &Bytes, owner: &[u8], now: u64, revision: u64) -> bool {
        self.settle_lock(key, now, revision);
        let token = match self.get(key, now) {
            Some(Entry {
                value: Value::Str(v),
                token,
                ..
            }) if v == owner => *token,
            _ => return false,
        };
        self.release(key, token, now, revision);
        true
    }

    /// Releases the lock if its lease has `token` (a grant to a waiter whose client has
    /// gone), and grants it to the next waiter.
    pub fn lock_release_token(&mut self, key: &Bytes, token: u64, now: u64, revision: u64) -> bool {
        self.settle_lock(key, now, revision);
        match self.get(key, now) {
            Some(Entry {
                value: Value::Str(_),
                token: t,
                ..
            }) if *t == token => {
                self.release(key, token, now, revision);
                true
            }
            _ => false,
        }
    }

    /// RENEW: resets the lease if `owner` holds the lock; its token, or `None` if lost.
    pub fn lock_renew(
        &mut self,
        key: &Bytes,
        owner: &Bytes,
        ttl_ms: u64,
        now: u64,
        revision: u64,
    ) -> Option<u64> {
        self.settle_lock(key, now, revision);
        let token = match self.get(key, now) {
            Some(Entry {
                value: Value::Str(v),
                token,
                ..
            }) if v == owner => *token,
            _ => return None,
        };
        self.set_expire(key, Some(now.saturating_add(ttl_ms)), now);
        self.emit_lock(LockEventKind::Renewed, key, token, owner, None);
        Some(token)
    }

    /// Takes a waiter out of the queue (its wait ended on its node); false if it was not
    /// queued (already granted, skipped, or never queued).
    pub fn lock_cancel(&mut self, key: &Bytes, id: WaiterId, now: u64) -> bool {
        let Some(meta) = self.lock_meta(key) else {
            return false;
        };
        let Some(pos) = meta.queue.iter().position(|w| w.id == id) else {
            return false;
        };
        self.lock_meta_mut(key).queue.remove(pos);
        self.drop_lock_meta_if_idle(key, now);
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

    /// Removes `key` if its lease has expired at `now` (eviction), reporting a lock's expiry
    /// and starting its lock-delay. True if it was removed.
    pub fn expire_lease(&mut self, key: &Bytes, now: u64) -> bool {
        let Some(old) = self.take_expired(key, now) else {
            return false;
        };
        let Value::Str(owner) = &old.value else {
            return true;
        };
        self.emit_lock(LockEventKind::Expired, key, old.token, owner, None);
        if let Some(meta) = self.lock_meta(key) {
            if let Some((token, delay_ms)) = meta.delay {
                let until = old
                    .expire_at
                    .unwrap_or(now)
                    .saturating_add(if token == old.token { delay_ms } else { 0 });
                let meta = self.lock_meta_mut(key);
                meta.delay = None;
                meta.blocked_until = meta.blocked_until.max(until);
            }
        }
        true
    }

    /// Brings `key` up to date at `now`: removes an expired lease, and grants a free lock to
    /// the first waiter whose wait has not run out (with token `revision`).
    pub fn settle_lock(&mut self, key: &Bytes, now: u64, revision: u64) {
        self.expire_lease(key, now);
        let Some(meta) = self.lock_meta(key) else {
            return;
        };
        if meta.queue.is_empty() || meta.blocked_until > now || self.get(key, now).is_some() {
            self.drop_lock_meta_if_idle(key, now);
            return;
        }
        let meta = self.lock_meta_mut(key);
        let mut next = None;
        while let Some(w) = meta.queue.pop_front() {
            if w.deadline.is_none_or(|d| d > now) {
                next = Some(w);
                break;
            }
        }
        if let Some(w) = next {
            self.grant(
                key,
                &w.owner,
                w.ttl_ms,
                w.delay_ms,
                Some(w.id),
                now,
                revision,
            );
        }
        self.drop_lock_meta_if_idle(key, now);
    }

    /// Keys whose queue or lock-delay needs an entry at `now`: a waiter with a free or
    /// expired lock, or a lock-delay that has ended (the leader proposes them with its
    /// eviction entries). At most `limit`.
    pub fn locks_due(&self, now: u64, limit: usize) -> Vec<Bytes> {
        self.lock_metas()
            .iter()
            .filter(|(k, m)| {
                let stored = self.entries().get(*k);
                let expired = stored.is_some_and(|e| !e.live(now));
                let free = stored.is_none() || expired;
                expired || m.idle(now) || (free && !m.queue.is_empty() && m.blocked_until <= now)
            })
            .take(limit)
            .map(|(k, _)| k.clone())
            .collect()
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
    fn lock_blocked(&self, key: &[u8], now: u64) -> bool {
        self.lock_meta(key)
            .is_some_and(|m| m.blocked_until > now || !m.queue.is_empty())
    }

    /// Gives the lock to `owner` with token `revision`.
    #[allow(clippy::too_many_arguments)]
    fn grant(
        &mut self,
        key: &Bytes,
        owner: &Bytes,
        ttl_ms: u64,
        delay_ms: u64,
        waiter: Option<WaiterId>,
        now: u64,
        revision: u64,
    ) {
        self.insert(
            key.clone(),
            Entry {
                value: Value::Str(owner.clone()),
                expire_at: Some(now.saturating_add(ttl_ms)),
                token: revision,
                modified: 0,
            },
        );
        self.set_lease_delay(key, revision, delay_ms, now);
        self.emit_lock(LockEventKind::Granted, key, revision, owner, waiter);
    }

    /// Removes the lease with `token` (no lock-delay: it was released, not lost) and grants
    /// the lock to the next waiter.
    fn release(&mut self, key: &Bytes, token: u64, now: u64, revision: u64) {
        if let Some(old) = self.remove(key, now) {
            if let Value::Str(owner) = &old.value {
                self.emit_lock(LockEventKind::Released, key, token, owner, None);
            }
        }
        if self.lock_meta(key).is_some_and(|m| m.delay.is_some()) {
            self.lock_meta_mut(key).delay = None;
        }
        self.settle_lock(key, now, revision);
    }

    /// Records the lock-delay of the lease with `token`.
    fn set_lease_delay(&mut self, key: &Bytes, token: u64, delay_ms: u64, now: u64) {
        let want = (delay_ms > 0).then_some((token, delay_ms));
        let current = self.lock_meta(key).and_then(|m| m.delay);
        if current != want {
            self.lock_meta_mut(key).delay = want;
            self.drop_lock_meta_if_idle(key, now);
        }
    }

    fn emit_lock(
        &mut self,
        kind: LockEventKind,
        key: &Bytes,
        token: u64,
        owner: &Bytes,
        waiter: Option<WaiterId>,
    ) {
        self.emit(Event::Lock {
            kind,
            key: key.clone(),
            token,
            owner: owner.clone(),
            waiter,
        });
    }

    /// Removes the lock record of `key` if it holds nothing at `now`.
    fn drop_lock_meta_if_idle(&mut self, key: &Bytes, now: u64) {
        if self.lock_meta(key).is_some_and(|m| m.idle(now)) {
            self.remove_lock_meta(key);
        }
    }
}

fn is_stale(w: &Waiter, node: u64, boot: u64) -> bool {
    w.id.node == node && w.id.boot != boot
}
