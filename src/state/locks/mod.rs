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

use super::keyspace::{Entry, Event, Keyspace, Value};
use bytes::Bytes;

mod meta;
mod queue;
#[cfg(test)]
mod tests;

pub use meta::{
    lock_notifications, Holder, Kinds, LockEventKind, LockMeta, Mode, Waiter, WaiterId,
};

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
