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

/// A key's queue and lock-delay, and the holders of a shared lock or semaphore.
///
/// Stored with postcard. `kinds` and then `groups` were added after the first three fields:
/// a record written before them reads with them empty (see the `Deserialize` impl below).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LockMeta {
    /// Waiters in arrival (log) order.
    pub queue: VecDeque<Waiter>,
    /// The current lease's lock-delay: (its token, delay ms). It applies only if the lease
    /// with that token expires; a release or another write drops it.
    pub delay: Option<(u64, u64)>,
    /// No grant before this cluster time (a lease with a lock-delay expired).
    pub blocked_until: u64,
    /// The shared and semaphore side: waiters' modes and the holders.
    pub kinds: Kinds,
    /// The queued MLOCK waiters: each one's keys, in its command's order. Every key of an
    /// MLOCK holds the same row, and the waiter is in each of their queues.
    pub groups: Vec<(WaiterId, Vec<Bytes>)>,
}

/// How a lock is held or asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mode {
    /// LOCK: one holder, alone.
    Exclusive,
    /// RLOCK: any number of holders together, never beside an exclusive one.
    Shared,
    /// SEMACQUIRE with this LIMIT: at most that many holders.
    Semaphore(u32),
}

impl Mode {
    /// The name LOCKINFO reports.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Exclusive => "exclusive",
            Mode::Shared => "shared",
            Mode::Semaphore(_) => "semaphore",
        }
    }
}

/// One holder of a shared lock or a semaphore permit: its own lease and token.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    /// The owner.
    pub owner: Bytes,
    /// Its fencing token (the revision of its grant).
    pub token: u64,
    /// Cluster time its lease ends.
    pub expire_at: u64,
    /// Renewed (RENEW, or re-acquired by its owner) since the grant.
    pub renewed: bool,
}

/// The shared and semaphore side of a key's lock record.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kinds {
    /// The mode of every queued waiter that is not exclusive (a waiter missing here is an
    /// exclusive LOCK), by waiter id.
    pub modes: Vec<(WaiterId, Mode)>,
    /// How the holders hold the key: [`Mode::Shared`] or [`Mode::Semaphore`]; `None` while
    /// nobody holds it that way.
    pub mode: Option<Mode>,
    /// The holders, in grant order (never empty while `mode` is set).
    pub holders: Vec<Holder>,
}

impl<'de> Deserialize<'de> for LockMeta {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = LockMeta;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a lock record")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut s: A,
            ) -> Result<LockMeta, A::Error> {
                use serde::de::Error;
                let queue = s
                    .next_element()?
                    .ok_or_else(|| A::Error::invalid_length(0, &self))?;
                let delay = s
                    .next_element()?
                    .ok_or_else(|| A::Error::invalid_length(1, &self))?;
                let blocked_until = s
                    .next_element()?
                    .ok_or_else(|| A::Error::invalid_length(2, &self))?;
                // A record written before `kinds` existed ends here: postcard reports the
                // end of its input as an error, which means "no kinds".
                let kinds = s.next_element().ok().flatten().unwrap_or_default();
                // The same for `groups`, added after `kinds`.
                let groups = s.next_element().ok().flatten().unwrap_or_default();
                Ok(LockMeta {
                    queue,
                    delay,
                    blocked_until,
                    kinds,
                    groups,
                })
            }
        }
        const FIELDS: &[&str] = &["queue", "delay", "blocked_until", "kinds", "groups"];
        d.deserialize_struct("LockMeta", FIELDS, V)
    }
}

impl LockMeta {
    /// True when the record holds nothing worth keeping at `now`.
    fn idle(&self, now: u64) -> bool {
        self.queue.is_empty()
            && self.delay.is_none()
            && self.blocked_until <= now
            && self.kinds.holders.is_empty()
            && self.kinds.modes.is_empty()
            && self.groups.is_empty()
    }

    /// The keys of a queued MLOCK waiter (`None`: a waiter of one key).
    pub(super) fn group_of(&self, id: WaiterId) -> Option<&Vec<Bytes>> {
        self.groups.iter().find(|(w, _)| *w == id).map(|(_, ks)| ks)
    }

    /// The position of the first waiter whose wait has not run out at `now`.
    pub(super) fn first_live(&self, now: u64) -> Option<usize> {
        self.queue
            .iter()
            .position(|w| w.deadline.is_none_or(|d| d > now))
    }

    /// The mode of a queued waiter.
    fn mode_of(&self, id: WaiterId) -> Mode {
        self.kinds
            .modes
            .iter()
            .find(|(w, _)| *w == id)
            .map_or(Mode::Exclusive, |(_, m)| *m)
    }

    /// True if a hold in `mode` fits beside the current shared or semaphore holders (the
    /// caller has checked that no exclusive lease is held).
    fn admits(&self, mode: Mode) -> bool {
        let k = &self.kinds;
        match mode {
            Mode::Exclusive => k.holders.is_empty(),
            Mode::Shared => k.holders.is_empty() || k.mode == Some(Mode::Shared),
            Mode::Semaphore(n) => {
                k.holders.is_empty()
                    || (matches!(k.mode, Some(Mode::Semaphore(_))) && k.holders.len() < n as usize)
            }
        }
    }

    /// Drops the modes and MLOCK keys of waiters no longer queued.
    pub(super) fn tidy(&mut self) {
        let queue = &self.queue;
        self.kinds
            .modes
            .retain(|(id, _)| queue.iter().any(|w| w.id == *id));
        self.groups
            .retain(|(id, _)| queue.iter().any(|w| w.id == *id));
        if self.kinds.holders.is_empty() {
            self.kinds.mode = None;
        }
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

/// The error of a SEMACQUIRE whose LIMIT differs from the one its key is held or awaited with.
pub const LIMIT_MISMATCH: &str = "ERR semaphore limit mismatch";
/// The error of an RLOCK on a semaphore, or a SEMACQUIRE on a shared lock.
pub const KIND_MISMATCH: &str =
    "ERR lock kind mismatch: the key is held or awaited in another mode";

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
                let token = self.grant(a.key, a.owner, a.ttl_ms, a.delay_ms, None, now, revision);
                return Acquired::Granted(token);
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
        self.enqueue(a.key, waiter, Mode::Exclusive, now);
        Acquired::Queued
    }

    /// RLOCK (`Mode::Shared`) and SEMACQUIRE (`Mode::Semaphore`): takes or queues for a
    /// hold of `key` at `now`; a grant's token is `revision` (or a new one, see
    /// [`Keyspace::take_token`]). A holder asking again gets its own token and a new lease.
    /// An error reply's text when the key is held or awaited in another mode (a shared lock
    /// and a semaphore, or two semaphore limits). `a.delay_ms` is ignored: lock-delays are
    /// for exclusive leases.
    pub fn lock_acquire_kind(
        &mut self,
        a: Acquire<'_>,
        mode: Mode,
        now: u64,
        revision: u64,
    ) -> Result<Acquired, &'static str> {
        self.settle_lock(a.key, now, revision);
        if let Some(meta) = self.lock_meta(a.key) {
            let held = meta.kinds.mode.into_iter();
            let queued = meta.kinds.modes.iter().map(|(_, m)| *m);
            for other in held.chain(queued) {
                match (other, mode) {
                    (Mode::Semaphore(x), Mode::Semaphore(y)) if x != y => {
                        return Err(LIMIT_MISMATCH)
                    }
                    (Mode::Semaphore(_), Mode::Shared) | (Mode::Shared, Mode::Semaphore(_)) => {
                        return Err(KIND_MISMATCH)
                    }
                    _ => {}
                }
            }
            if let Some(pos) = meta.kinds.holders.iter().position(|h| h.owner == a.owner) {
                let meta = self.lock_meta_mut(a.key);
                let h = &mut meta.kinds.holders[pos];
                h.expire_at = now.saturating_add(a.ttl_ms);
                h.renewed = true;
                let token = h.token;
                self.emit_lock(LockEventKind::Renewed, a.key, token, a.owner, None);
                return Ok(Acquired::Held(token));
            }
        }
        let free = self.get(a.key, now).is_none()
            && self
                .lock_meta(a.key)
                .is_none_or(|m| m.queue.is_empty() && m.blocked_until <= now && m.admits(mode));
        if free {
            let token = self.grant_hold(a.key, mode, a.owner, a.ttl_ms, None, now, revision);
            return Ok(Acquired::Granted(token));
        }
        let Some((id, deadline)) = a.wait else {
            return Ok(Acquired::Busy);
        };
        let waiter = Waiter {
            id,
            owner: a.owner.clone(),
            ttl_ms: a.ttl_ms,
            delay_ms: 0,
            deadline,
        };
        self.enqueue(a.key, waiter, mode, now);
        Ok(Acquired::Queued)
    }

    /// Puts a waiter at the end of the queue of `key`. A retry by an owner already queued
    /// keeps its place (its earlier request may have been queued even though its client saw
    /// no reply), with the new request's waiter and mode.
    fn enqueue(&mut self, key: &Bytes, waiter: Waiter, mode: Mode, now: u64) {
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

    /// The token `owner` holds `key` with at `now`, in any mode.
    pub fn lock_holder_token(&self, key: &[u8], owner: &[u8], now: u64) -> Option<u64> {
        if let Some(e) = self.get(key, now) {
            return match &e.value {
                Value::Str(v) if v == owner => Some(e.token),
                _ => None,
            };
        }
        self.lock_holders(key, now)
            .and_then(|(_, hs)| hs.into_iter().find(|h| h.owner == owner))
            .map(|h| h.token)
    }

    /// The mode and live holders of a shared lock or semaphore at `now`.
    pub fn lock_holders(&self, key: &[u8], now: u64) -> Option<(Mode, Vec<&Holder>)> {
        let meta = self.lock_meta(key)?;
        let mode = meta.kinds.mode?;
        let live: Vec<&Holder> = meta
            .kinds
            .holders
            .iter()
            .filter(|h| h.expire_at > now)
            .collect();
        (!live.is_empty()).then_some((mode, live))
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
            _ => return self.release_holder(key, |h| h.owner == owner, now, revision),
        };
        self.release(key, token, now, revision);
        true
    }

    /// Releases the first shared or semaphore holder of `key` that `which` picks, and
    /// grants the key to the waiters it frees. True if one was released.
    fn release_holder(
        &mut self,
        key: &Bytes,
        which: impl Fn(&Holder) -> bool,
        now: u64,
        revision: u64,
    ) -> bool {
        let Some(pos) = self
            .lock_meta(key)
            .and_then(|m| m.kinds.holders.iter().position(&which))
        else {
            return false;
        };
        let meta = self.lock_meta_mut(key);
        let h = meta.kinds.holders.remove(pos);
        meta.tidy();
        self.emit_lock(LockEventKind::Released, key, h.token, &h.owner, None);
        self.settle_lock(key, now, revision);
        true
    }

    /// Releases the lease of a grant that reached no client (its waiter had gone), and
    /// grants the lock to the next waiter. It matches that grant exactly: the lease must
    /// still have `token` and `owner`, and be untouched since it was granted. A lease that
    /// its owner has since re-locked or renewed (a retry that was told it holds the lock)
    /// is kept. True if it released.
    pub fn lock_release_grant(
        &mut self,
        key: &Bytes,
        token: u64,
        owner: &[u8],
        now: u64,
        revision: u64,
    ) -> bool {
        self.settle_lock(key, now, revision);
        match self.get(key, now) {
            Some(Entry {
                value: Value::Str(v),
                token: t,
                modified,
                ..
            }) if *t == token && v == owner && *modified <= token => {
                self.release(key, token, now, revision);
                true
            }
            Some(_) => false,
            None => self.release_holder(
                key,
                |h| h.token == token && h.owner == owner && !h.renewed,
                now,
                revision,
            ),
        }
    }

    /// Releases the lock if its lease has `token` (a grant to a waiter whose client has
    /// gone), and grants it to the next waiter. Only for log entries written before
    /// [`Keyspace::lock_release_grant`] existed (tag 38), which replay as they were applied.
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
            Some(_) => return None,
            None => {
                let pos = self
                    .lock_meta(key)?
                    .kinds
                    .holders
                    .iter()
                    .position(|h| h.owner == owner)?;
                let h = &mut self.lock_meta_mut(key).kinds.holders[pos];
                h.expire_at = now.saturating_add(ttl_ms);
                h.renewed = true;
                let token = h.token;
                self.emit_lock(LockEventKind::Renewed, key, token, owner, None);
                return Some(token);
            }
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

    /// Removes `key` if its lease has expired at `now` (eviction), reporting a lock's expiry
    /// and starting its lock-delay. True if it was removed.
    pub fn expire_lease(&mut self, key: &Bytes, now: u64) -> bool {
        let Some(old) = self.take_expired(key, now) else {
            return false;
        };
        self.notify(super::notify::EXPIRED, "expired", key);
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
    /// the first waiter whose wait has not run out (with token `revision`). True if it
    /// granted the lock: a caller that settles several keys in one command must give each
    /// grant a revision of its own.
    pub fn settle_lock(&mut self, key: &Bytes, now: u64, revision: u64) -> bool {
        self.expire_lease(key, now);
        self.expire_holders(key, now);
        let Some(meta) = self.lock_meta(key) else {
            return false;
        };
        if meta.queue.is_empty() || meta.blocked_until > now || self.get(key, now).is_some() {
            self.drop_lock_meta_if_idle(key, now);
            return false;
        }
        // Grants from the head while the head fits: one exclusive waiter, or every shared
        // waiter (semaphore waiter, up to the limit) at the head together.
        let mut granted = false;
        // The first waiter whose wait has not run out; the ones before it are skipped only
        // when it is granted (as a lone LOCK queue always did).
        while let Some(meta) = self.lock_meta(key) {
            let Some(pos) = meta
                .queue
                .iter()
                .position(|w| w.deadline.is_none_or(|d| d > now))
            else {
                break;
            };
            let id = meta.queue[pos].id;
            if let Some(keys) = meta.group_of(id).cloned() {
                // An MLOCK waiter: granted all its keys at once, or it waits on.
                granted |= self.grant_group(id, &keys, now, revision);
                break;
            }
            let mode = meta.mode_of(id);
            if !meta.admits(mode) {
                break;
            }
            let meta = self.lock_meta_mut(key);
            meta.queue.drain(..pos);
            let Some(w) = meta.queue.pop_front() else {
                break;
            };
            meta.tidy();
            granted = true;
            // Its own revision, even when this command granted or wrote before (an UNLOCK
            // that settles, releases, then settles again; a MULTI or script).
            if mode == Mode::Exclusive {
                self.grant(
                    key,
                    &w.owner,
                    w.ttl_ms,
                    w.delay_ms,
                    Some(w.id),
                    now,
                    revision,
                );
                break;
            }
            self.grant_hold(key, mode, &w.owner, w.ttl_ms, Some(w.id), now, revision);
        }
        if let Some(meta) = self.lock_meta(key) {
            if meta.kinds.modes.len() > meta.queue.len() {
                self.lock_meta_mut(key).tidy();
            }
        }
        self.drop_lock_meta_if_idle(key, now);
        granted
    }

    /// Removes the shared or semaphore holders of `key` whose lease has run out at `now`,
    /// reporting each expiry.
    fn expire_holders(&mut self, key: &Bytes, now: u64) {
        let expired = self
            .lock_meta(key)
            .is_some_and(|m| m.kinds.holders.iter().any(|h| h.expire_at <= now));
        if !expired {
            return;
        }
        let meta = self.lock_meta_mut(key);
        let (gone, kept): (Vec<Holder>, Vec<Holder>) = std::mem::take(&mut meta.kinds.holders)
            .into_iter()
            .partition(|h| h.expire_at <= now);
        meta.kinds.holders = kept;
        meta.tidy();
        for h in gone {
            self.emit_lock(LockEventKind::Expired, key, h.token, &h.owner, None);
        }
    }

    /// Gives a shared hold or a semaphore permit of `key` to `owner`; returns its token.
    #[allow(clippy::too_many_arguments)]
    fn grant_hold(
        &mut self,
        key: &Bytes,
        mode: Mode,
        owner: &Bytes,
        ttl_ms: u64,
        waiter: Option<WaiterId>,
        now: u64,
        revision: u64,
    ) -> u64 {
        let token = self.take_token(revision, true);
        let meta = self.lock_meta_mut(key);
        meta.kinds.mode = Some(mode);
        meta.kinds.holders.push(Holder {
            owner: owner.clone(),
            token,
            expire_at: now.saturating_add(ttl_ms),
            renewed: false,
        });
        self.emit_lock(LockEventKind::Granted, key, token, owner, waiter);
        token
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
                let lapsed = m.kinds.holders.iter().any(|h| h.expire_at <= now);
                // A free key whose first live waiter is an MLOCK that is not ready waits
                // for its other keys (an entry for it would grant nothing).
                let blocked_group = || {
                    m.first_live(now).is_some_and(|p| {
                        let id = m.queue[p].id;
                        m.group_of(id)
                            .is_some_and(|keys| !self.group_ready(id, keys, now))
                    })
                };
                expired
                    || lapsed
                    || m.idle(now)
                    || (free && !m.queue.is_empty() && m.blocked_until <= now && !blocked_group())
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
        self.lock_meta(key).is_some_and(|m| {
            m.blocked_until > now || !m.queue.is_empty() || !m.kinds.holders.is_empty()
        })
    }

    /// Gives the lock to `owner` and returns its token: `revision`, or a new revision if
    /// this command already gave `revision` out ([`Keyspace::take_token`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn grant(
        &mut self,
        key: &Bytes,
        owner: &Bytes,
        ttl_ms: u64,
        delay_ms: u64,
        waiter: Option<WaiterId>,
        now: u64,
        revision: u64,
    ) -> u64 {
        let token = self.take_token(revision, true);
        self.insert(
            key.clone(),
            Entry {
                value: Value::Str(owner.clone()),
                expire_at: Some(now.saturating_add(ttl_ms)),
                token,
                modified: 0,
            },
        );
        self.set_lease_delay(key, token, delay_ms, now);
        self.emit_lock(LockEventKind::Granted, key, token, owner, waiter);
        token
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

    pub(super) fn emit_lock(
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
    pub(super) fn drop_lock_meta_if_idle(&mut self, key: &Bytes, now: u64) {
        if self.lock_meta(key).is_some_and(|m| m.idle(now)) {
            self.remove_lock_meta(key);
        }
    }
}

fn is_stale(w: &Waiter, node: u64, boot: u64) -> bool {
    w.id.node == node && w.id.boot != boot
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    fn id(seq: u64) -> WaiterId {
        WaiterId {
            node: 1,
            boot: 7,
            seq,
        }
    }

    /// A LOCK at `now` with revision `rev`; waits (for ever) as waiter `seq` if given.
    fn lock(
        ks: &mut Keyspace,
        owner: &str,
        ttl: u64,
        delay: u64,
        seq: Option<u64>,
        now: u64,
        rev: u64,
    ) -> Acquired {
        let (key, owner) = (b("k"), b(owner));
        let a = Acquire {
            key: &key,
            owner: &owner,
            ttl_ms: ttl,
            delay_ms: delay,
            wait: seq.map(|s| (id(s), None)),
        };
        ks.lock_acquire(a, now, rev)
    }

    fn holder(ks: &Keyspace, now: u64) -> Option<(Bytes, u64)> {
        ks.get(b"k", now).map(|e| match &e.value {
            Value::Str(v) => (v.clone(), e.token),
            _ => panic!("not a lock"),
        })
    }

    /// The grants (owner, token, waiter) among the recorded events.
    fn grants(ks: &mut Keyspace) -> Vec<(Bytes, u64, Option<u64>)> {
        ks.take_events()
            .into_iter()
            .filter_map(|e| match e {
                Event::Lock {
                    kind: LockEventKind::Granted,
                    owner,
                    token,
                    waiter,
                    ..
                } => Some((owner, token, waiter.map(|w| w.seq))),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_release_grants_the_queue_in_arrival_order_with_rising_tokens() {
        let mut ks = Keyspace::default();
        assert_eq!(
            lock(&mut ks, "a", 1000, 0, None, 0, 1),
            Acquired::Granted(1)
        );
        assert_eq!(lock(&mut ks, "b", 1000, 0, Some(2), 1, 2), Acquired::Queued);
        assert_eq!(lock(&mut ks, "c", 1000, 0, Some(3), 2, 3), Acquired::Queued);
        // Without a waiter, a LOCK neither waits nor jumps the queue.
        assert_eq!(lock(&mut ks, "d", 1000, 0, None, 3, 4), Acquired::Busy);
        assert_eq!(ks.lock_queue(b"k", 3), (2, 0));
        assert_eq!(grants(&mut ks), vec![(b("a"), 1, None)]);

        assert!(ks.lock_release(&b("k"), b"a", 4, 5));
        assert_eq!(
            holder(&ks, 4),
            Some((b("b"), 5)),
            "granted in the same entry"
        );
        assert_eq!(grants(&mut ks), vec![(b("b"), 5, Some(2))]);
        assert!(
            !ks.lock_release(&b("k"), b"a", 5, 6),
            "a no longer holds it"
        );
        assert!(ks.lock_release(&b("k"), b"b", 6, 7));
        assert_eq!(holder(&ks, 6), Some((b("c"), 7)));
        assert!(ks.lock_release(&b("k"), b"c", 7, 8));
        assert_eq!(holder(&ks, 7), None);
        assert!(
            ks.lock_meta(b"k").is_none(),
            "an empty queue leaves no record"
        );
    }

    #[test]
    fn an_expired_lease_goes_to_the_first_waiter_and_skips_waits_that_ran_out() {
        let mut ks = Keyspace::default();
        lock(&mut ks, "a", 100, 0, None, 0, 1);
        let (key, x, y) = (b("k"), b("x"), b("y"));
        // x waits until 50 (cluster time), y for ever.
        let wait = |owner, seq, until| Acquire {
            key: &key,
            owner,
            ttl_ms: 500,
            delay_ms: 0,
            wait: Some((id(seq), until)),
        };
        assert_eq!(
            ks.lock_acquire(wait(&x, 2, Some(50)), 10, 2),
            Acquired::Queued
        );
        assert_eq!(ks.lock_acquire(wait(&y, 3, None), 20, 3), Acquired::Queued);
        assert_eq!(
            ks.locks_due(99, 10),
            Vec::<Bytes>::new(),
            "nothing to do yet"
        );
        assert_eq!(ks.locks_due(100, 10), vec![b("k")]);
        ks.take_events();
        // The leader's eviction entry at 100 expires a's lease and grants y (x's wait ended).
        assert!(ks.expire_lease(&b("k"), 100));
        assert!(ks.settle_lock(&b("k"), 100, 4));
        assert_eq!(holder(&ks, 100), Some((b("y"), 4)));
        let kinds: Vec<_> = ks
            .take_events()
            .into_iter()
            .filter_map(|e| match e {
                Event::Lock { kind, owner, .. } => Some((kind, owner)),
                _ => None,
            })
            .collect();
        assert_eq!(
            kinds,
            vec![
                (LockEventKind::Expired, b("a")),
                (LockEventKind::Granted, b("y"))
            ]
        );
        assert_eq!(ks.get(b"k", 100).and_then(|e| e.expire_at), Some(600));
    }

    #[test]
    fn a_lock_delay_holds_the_key_after_an_expiry_but_not_after_an_unlock() {
        let mut ks = Keyspace::default();
        lock(&mut ks, "a", 100, 300, None, 0, 1);
        assert_eq!(lock(&mut ks, "b", 100, 0, Some(2), 10, 2), Acquired::Queued);
        // a's lease ends at 100; nobody gets the key before 400.
        ks.settle_lock(&b("k"), 150, 3);
        assert_eq!(holder(&ks, 150), None);
        assert_eq!(ks.lock_queue(b"k", 150), (1, 250));
        assert_eq!(lock(&mut ks, "c", 100, 0, None, 200, 4), Acquired::Busy);
        assert_eq!(ks.locks_due(399, 10), Vec::<Bytes>::new());
        assert_eq!(ks.locks_due(400, 10), vec![b("k")]);
        ks.settle_lock(&b("k"), 400, 5);
        assert_eq!(holder(&ks, 400), Some((b("b"), 5)));

        // The same delay does not apply when the holder releases.
        let mut ks = Keyspace::default();
        lock(&mut ks, "a", 100, 300, None, 0, 1);
        assert!(ks.lock_release(&b("k"), b"a", 50, 2));
        assert_eq!(
            lock(&mut ks, "c", 100, 0, None, 51, 3),
            Acquired::Granted(3)
        );
        // Nor does a delay set for an earlier lease of the key.
        let mut ks = Keyspace::default();
        lock(&mut ks, "a", 100, 300, None, 0, 1);
        assert!(ks.lock_release(&b("k"), b"a", 10, 2));
        lock(&mut ks, "b", 100, 0, None, 20, 3);
        assert_eq!(
            lock(&mut ks, "c", 100, 0, None, 121, 4),
            Acquired::Granted(4)
        );
    }

    #[test]
    fn a_retry_keeps_its_place_and_cancel_and_purge_leave_the_queue() {
        let mut ks = Keyspace::default();
        lock(&mut ks, "a", 1000, 0, None, 0, 1);
        lock(&mut ks, "b", 1000, 0, Some(2), 1, 2);
        lock(&mut ks, "c", 1000, 0, Some(3), 2, 3);
        // b's client retries (its first reply was lost): same place, new waiter id.
        lock(&mut ks, "b", 1000, 0, Some(4), 3, 4);
        let queue: Vec<_> = ks
            .lock_meta(b"k")
            .unwrap()
            .queue
            .iter()
            .map(|w| (w.owner.clone(), w.id.seq))
            .collect();
        assert_eq!(queue, vec![(b("b"), 4), (b("c"), 3)]);
        assert!(ks.lock_cancel(&b("k"), id(4), 5));
        assert!(!ks.lock_cancel(&b("k"), id(4), 5), "already gone");
        // Node 1 restarted with boot 8: its boot-7 waiters (c) are dropped, others stay.
        let other = WaiterId {
            node: 2,
            boot: 7,
            seq: 1,
        };
        let (key, d) = (b("k"), b("d"));
        let a = Acquire {
            key: &key,
            owner: &d,
            ttl_ms: 10,
            delay_ms: 0,
            wait: Some((other, None)),
        };
        assert_eq!(ks.lock_acquire(a, 6, 6), Acquired::Queued);
        assert!(ks.has_stale_waiters(1, 8));
        assert_eq!(ks.lock_purge(1, 8, 7), 1);
        assert!(!ks.has_stale_waiters(1, 8));
        assert!(
            !ks.has_stale_waiters(1, 7),
            "the current process's waiters are not stale"
        );
        assert!(ks.lock_release(&b("k"), b"a", 8, 8));
        assert_eq!(holder(&ks, 8), Some((b("d"), 8)));
        // A grant that reached nobody is released by its token, and only that lease.
        assert!(!ks.lock_release_token(&b("k"), 7, 9, 9));
        assert!(ks.lock_release_token(&b("k"), 8, 9, 9));
        assert_eq!(holder(&ks, 9), None);
    }

    #[test]
    fn a_deleted_lock_is_due_for_its_waiter() {
        let mut ks = Keyspace::default();
        lock(&mut ks, "a", 1000, 0, None, 0, 1);
        lock(&mut ks, "b", 1000, 0, Some(2), 1, 2);
        ks.remove(b"k", 2);
        assert_eq!(ks.locks_due(2, 10), vec![b("k")]);
        ks.settle_lock(&b("k"), 3, 3);
        assert_eq!(holder(&ks, 3), Some((b("b"), 3)));
    }

    /// A script that queues or grants and is then rolled back leaves no trace of it.
    #[test]
    fn a_rolled_back_script_restores_the_queue() {
        let mut ks = Keyspace::default();
        lock(&mut ks, "a", 1000, 0, None, 0, 1);
        lock(&mut ks, "b", 1000, 0, Some(2), 1, 2);
        let before = ks.lock_meta(b"k").cloned();
        ks.take_changes(Entry::clone);
        ks.begin_undo();
        assert!(ks.lock_release(&b("k"), b"a", 2, 3));
        assert!(ks.lock_meta(b"k").is_none());
        ks.rollback_undo();
        assert_eq!(ks.lock_meta(b"k").cloned(), before);
        assert_eq!(holder(&ks, 2), Some((b("a"), 1)));
        // The store rewrites what the rollback restored.
        let ch = ks.take_changes(Entry::clone);
        assert_eq!(ch.locks, vec![(b("k"), before)]);
    }

    /// An RLOCK (or SEMACQUIRE with `mode`) at `now` with revision `rev`.
    fn hold(
        ks: &mut Keyspace,
        mode: Mode,
        owner: &str,
        seq: Option<u64>,
        now: u64,
        rev: u64,
    ) -> Result<Acquired, &'static str> {
        let (key, owner) = (b("k"), b(owner));
        let a = Acquire {
            key: &key,
            owner: &owner,
            ttl_ms: 1000,
            delay_ms: 0,
            wait: seq.map(|s| (id(s), None)),
        };
        ks.lock_acquire_kind(a, mode, now, rev)
    }

    fn holders(ks: &Keyspace, now: u64) -> Vec<(Bytes, u64)> {
        ks.lock_holders(b"k", now)
            .map(|(_, hs)| hs.iter().map(|h| (h.owner.clone(), h.token)).collect())
            .unwrap_or_default()
    }

    #[test]
    fn readers_share_writers_wait_and_the_queue_is_fifo() {
        let mut ks = Keyspace::default();
        let r = Mode::Shared;
        assert_eq!(hold(&mut ks, r, "r1", None, 0, 1), Ok(Acquired::Granted(1)));
        assert_eq!(hold(&mut ks, r, "r2", None, 1, 2), Ok(Acquired::Granted(2)));
        // A reader asking again keeps its token.
        assert_eq!(hold(&mut ks, r, "r1", None, 2, 3), Ok(Acquired::Held(1)));
        // A writer is refused, or waits, while readers hold the key.
        assert_eq!(lock(&mut ks, "w", 1000, 0, None, 3, 4), Acquired::Busy);
        assert_eq!(lock(&mut ks, "w", 1000, 0, Some(5), 4, 5), Acquired::Queued);
        // A reader behind a queued writer waits too (no writer starvation).
        assert_eq!(hold(&mut ks, r, "r3", None, 5, 6), Ok(Acquired::Busy));
        assert_eq!(hold(&mut ks, r, "r3", Some(7), 6, 7), Ok(Acquired::Queued));
        assert_eq!(hold(&mut ks, r, "r4", Some(8), 7, 8), Ok(Acquired::Queued));
        ks.take_events();
        assert!(ks.lock_release(&b("k"), b"r1", 8, 9));
        assert_eq!(holder(&ks, 8), None, "r2 still reads");
        assert!(ks.lock_release(&b("k"), b"r2", 9, 10));
        assert_eq!(holder(&ks, 9), Some((b("w"), 10)));
        assert!(holders(&ks, 9).is_empty());
        // The writer's release grants both readers at the head together, each its token.
        assert!(ks.lock_release(&b("k"), b"w", 10, 11));
        assert_eq!(holders(&ks, 10), vec![(b("r3"), 11), (b("r4"), 12)]);
        assert_eq!(
            grants(&mut ks),
            vec![
                (b("w"), 10, Some(5)),
                (b("r3"), 11, Some(7)),
                (b("r4"), 12, Some(8))
            ]
        );
        // RENEW keeps a reader's token; the lease expires on its own.
        assert_eq!(ks.lock_renew(&b("k"), &b("r3"), 5000, 11, 13), Some(11));
        ks.settle_lock(&b("k"), 1500, 14);
        assert_eq!(
            holders(&ks, 1500),
            vec![(b("r3"), 11)],
            "r4's lease ran out"
        );
        assert_eq!(ks.lock_holder_token(b"k", b"r3", 1500), Some(11));
        assert!(ks.lock_release(&b("k"), b"r3", 1600, 15));
        assert!(ks.lock_meta(b"k").is_none(), "nothing left");
    }

    #[test]
    fn a_semaphore_keeps_its_limit_and_refuses_another() {
        let mut ks = Keyspace::default();
        let s2 = Mode::Semaphore(2);
        assert_eq!(hold(&mut ks, s2, "a", None, 0, 1), Ok(Acquired::Granted(1)));
        assert_eq!(hold(&mut ks, s2, "b", None, 0, 2), Ok(Acquired::Granted(2)));
        assert_eq!(hold(&mut ks, s2, "c", None, 0, 3), Ok(Acquired::Busy));
        assert_eq!(hold(&mut ks, s2, "c", Some(4), 0, 4), Ok(Acquired::Queued));
        assert_eq!(
            hold(&mut ks, Mode::Semaphore(3), "d", None, 0, 5),
            Err(LIMIT_MISMATCH)
        );
        assert_eq!(
            hold(&mut ks, Mode::Shared, "d", None, 0, 6),
            Err(KIND_MISMATCH)
        );
        assert_eq!(lock(&mut ks, "w", 1000, 0, None, 0, 7), Acquired::Busy);
        ks.take_events();
        // A permit's lease runs out alone: c takes it.
        assert_eq!(ks.lock_renew(&b("k"), &b("a"), 5000, 10, 8), Some(1));
        assert_eq!(ks.locks_due(1000, 10), vec![b("k")]);
        ks.settle_lock(&b("k"), 1000, 9);
        assert_eq!(holders(&ks, 1000), vec![(b("a"), 1), (b("c"), 9)]);
        // A grant that reached nobody is given back; a renewed one is not.
        assert!(!ks.lock_release_grant(&b("k"), 1, b"a", 1001, 10));
        assert!(ks.lock_release_grant(&b("k"), 9, b"c", 1001, 11));
        assert_eq!(holders(&ks, 1001), vec![(b("a"), 1)]);
    }

    #[test]
    fn a_record_written_before_kinds_reads_without_them() {
        #[derive(Serialize)]
        struct Old {
            queue: VecDeque<Waiter>,
            delay: Option<(u64, u64)>,
            blocked_until: u64,
        }
        let w = Waiter {
            id: id(3),
            owner: b("o"),
            ttl_ms: 5,
            delay_ms: 0,
            deadline: Some(9),
        };
        let old = Old {
            queue: VecDeque::from(vec![w.clone()]),
            delay: Some((1, 2)),
            blocked_until: 7,
        };
        let bytes = postcard::to_allocvec(&old).unwrap();
        let read: LockMeta = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(read.queue, old.queue);
        assert_eq!((read.delay, read.blocked_until), (Some((1, 2)), 7));
        assert_eq!(read.kinds, Kinds::default());
        let mut new = read.clone();
        new.kinds.mode = Some(Mode::Semaphore(4));
        new.kinds.modes.push((id(3), Mode::Semaphore(4)));
        let bytes = postcard::to_allocvec(&new).unwrap();
        assert_eq!(postcard::from_bytes::<LockMeta>(&bytes).unwrap(), new);
    }

    #[test]
    fn notifications_follow_redis_keyspace_channels() {
        let [(ch, msg), (ev, key)] =
            lock_notifications(LockEventKind::Expired, b"res:1", 42, b"worker 7");
        assert_eq!(ch, b("__keyspace@0__:res:1"));
        assert_eq!(msg, b("lock_expired 42 worker 7"));
        assert_eq!(ev, b("__keyevent@0__:lock_expired"));
        assert_eq!(key, b("res:1"));
    }
}
