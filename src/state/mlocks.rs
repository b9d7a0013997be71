//! MLOCK and MUNLOCK: exclusive leases on several keys, granted together or not at all.
//!
//! An MLOCK takes every key in one entry, each with its own token, or none of them. With a
//! waiter it joins the queue of every key at once, in one entry, and is granted when it is
//! the first live waiter of every queue and every key is free (or already its owner's):
//! then all its keys are granted in that one entry.
//!
//! No deadlock between MLOCKs: an MLOCK joins all its queues in one entry, at their ends, so
//! any two waiters stand in the same order in every queue they share (log order). The
//! earliest live waiter of all is first in each of its queues, and holders never wait, so
//! some waiter can always be granted once the holders release or expire. To keep that
//! order, a retry never keeps an MLOCK's place unless it asks for the same keys (same
//! entry, same order everywhere); otherwise the owner's old waiter leaves every queue it
//! was in and the new one goes to the ends.

use bytes::Bytes;

use super::keyspace::{Entry, Keyspace, Value};
use super::locks::{LockEventKind, Waiter, WaiterId};

/// What an MLOCK asks for.
#[derive(Clone, Copy, Debug)]
pub struct MultiAcquire<'a> {
    /// The keys, in the command's order (distinct).
    pub keys: &'a [Bytes],
    /// The owner.
    pub owner: &'a Bytes,
    /// Lease length in ms, for every key.
    pub ttl_ms: u64,
    /// Join the queues if a key is taken: who waits, and until when (`None`: for ever).
    pub wait: Option<(WaiterId, Option<u64>)>,
}

/// How an MLOCK went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MultiAcquired {
    /// Every key is the owner's now: their tokens, in the keys' order (a key the owner held
    /// already keeps its token, and its lease is reset).
    Granted(Vec<u64>),
    /// A key was taken; the waiter is in every key's queue.
    Queued,
    /// A key was taken, and the caller does not wait.
    Busy,
}

/// How a key stands for an owner that wants it exclusively.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Claim {
    /// Nobody holds it and no lock-delay runs.
    Free,
    /// The owner holds it, with this token.
    Own(u64),
    /// Someone else holds it (or it holds data, or its lock-delay runs).
    Taken,
}

impl Keyspace {
    fn claim(&self, key: &[u8], owner: &[u8], now: u64) -> Claim {
        match self.get(key, now) {
            Some(Entry {
                value: Value::Str(v),
                token,
                ..
            }) if v == owner => Claim::Own(*token),
            Some(_) => Claim::Taken,
            None if self
                .lock_meta(key)
                .is_some_and(|m| !m.kinds.holders.is_empty() || m.blocked_until > now) =>
            {
                Claim::Taken
            }
            None => Claim::Free,
        }
    }

    /// MLOCK: takes every key of `a` for its owner at `now`, or none; a grant's token is
    /// `revision` (each key its own, see [`Keyspace::take_token`]). A key with a live waiter
    /// is taken, as for LOCK: the queues are FIFO.
    pub fn lock_acquire_all(
        &mut self,
        a: MultiAcquire<'_>,
        now: u64,
        revision: u64,
    ) -> MultiAcquired {
        for key in a.keys {
            self.settle_lock(key, now, revision);
        }
        let waited = |ks: &Keyspace, key: &Bytes| {
            ks.lock_meta(key)
                .is_some_and(|m| m.first_live(now).is_some())
        };
        let clear = a
            .keys
            .iter()
            .all(|k| self.claim(k, a.owner, now) != Claim::Taken && !waited(self, k));
        if clear {
            let tokens = self.take_all(a.keys, a.owner, a.ttl_ms, None, now, revision);
            return MultiAcquired::Granted(tokens);
        }
        let Some((id, deadline)) = a.wait else {
            return MultiAcquired::Busy;
        };
        let waiter = Waiter {
            id,
            owner: a.owner.clone(),
            ttl_ms: a.ttl_ms,
            delay_ms: 0,
            deadline,
        };
        self.enqueue_group(a.keys, waiter, now);
        MultiAcquired::Queued
    }

    /// MUNLOCK: releases each key `owner` holds (in any mode), as UNLOCK does; returns how
    /// many it released.
    pub fn lock_release_all(
        &mut self,
        keys: &[Bytes],
        owner: &[u8],
        now: u64,
        revision: u64,
    ) -> usize {
        keys.iter()
            .filter(|k| self.lock_release(k, owner, now, revision))
            .count()
    }

    /// Gives every key to `owner` (each is free or already the owner's) and returns the
    /// tokens in the keys' order.
    fn take_all(
        &mut self,
        keys: &[Bytes],
        owner: &Bytes,
        ttl_ms: u64,
        waiter: Option<WaiterId>,
        now: u64,
        revision: u64,
    ) -> Vec<u64> {
        let mut tokens = Vec::with_capacity(keys.len());
        for key in keys {
            let token = match self.claim(key, owner, now) {
                Claim::Own(token) => {
                    self.set_expire(key, Some(now.saturating_add(ttl_ms)), now);
                    // A renewal; it names the waiter so that its node can answer it.
                    self.emit_lock(LockEventKind::Renewed, key, token, owner, waiter);
                    token
                }
                _ => self.grant(key, owner, ttl_ms, 0, waiter, now, revision),
            };
            tokens.push(token);
        }
        tokens
    }

    /// Puts an MLOCK's waiter at the end of every key's queue, in one step. A retry by an
    /// owner already queued for exactly these keys keeps its place (with the new waiter);
    /// any other waiter of the owner on these keys leaves every queue it is in first.
    fn enqueue_group(&mut self, keys: &[Bytes], waiter: Waiter, now: u64) {
        let same = keys.first().and_then(|k| {
            let m = self.lock_meta(k)?;
            let old = m.queue.iter().find(|w| w.owner == waiter.owner)?;
            let group = m.group_of(old.id)?;
            (group.as_slice() == keys).then_some(old.id)
        });
        if let Some(old) = same {
            let everywhere = keys.iter().all(|k| {
                self.lock_meta(k)
                    .is_some_and(|m| m.queue.iter().any(|w| w.id == old))
            });
            if everywhere {
                for key in keys {
                    let meta = self.lock_meta_mut(key);
                    for w in meta.queue.iter_mut().filter(|w| w.id == old) {
                        *w = waiter.clone();
                    }
                    for (id, _) in meta.groups.iter_mut().filter(|(id, _)| *id == old) {
                        *id = waiter.id;
                    }
                }
                return;
            }
        }
        self.drop_owner_waiters(keys, &waiter.owner, now);
        for key in keys {
            let meta = self.lock_meta_mut(key);
            meta.queue.push_back(waiter.clone());
            meta.groups.push((waiter.id, keys.to_vec()));
        }
    }

    /// Takes every waiter of `owner` out of the queues of `keys`, an MLOCK waiter out of all
    /// of its keys' queues.
    fn drop_owner_waiters(&mut self, keys: &[Bytes], owner: &[u8], now: u64) {
        for key in keys {
            let Some(meta) = self.lock_meta(key) else {
                continue;
            };
            let mine: Vec<(WaiterId, Option<Vec<Bytes>>)> = meta
                .queue
                .iter()
                .filter(|w| w.owner == owner)
                .map(|w| (w.id, meta.group_of(w.id).cloned()))
                .collect();
            for (id, group) in mine {
                let from = group.unwrap_or_else(|| vec![key.clone()]);
                self.drop_waiter(&from, id, now);
            }
        }
    }

    /// Takes waiter `id` out of the queues of `keys` (a record left holding nothing at `now`
    /// goes).
    pub(super) fn drop_waiter(&mut self, keys: &[Bytes], id: WaiterId, now: u64) {
        for key in keys {
            if self
                .lock_meta(key)
                .is_some_and(|m| m.queue.iter().any(|w| w.id == id))
            {
                let meta = self.lock_meta_mut(key);
                meta.queue.retain(|w| w.id != id);
                meta.tidy();
                self.drop_lock_meta_if_idle(key, now);
            }
        }
    }

    /// True if the MLOCK waiter `id`, with `keys`, is the first live waiter of every key's
    /// queue and every key is free or its owner's.
    pub(super) fn group_ready(&self, id: WaiterId, keys: &[Bytes], now: u64) -> bool {
        keys.iter().all(|key| {
            let Some(m) = self.lock_meta(key) else {
                return false;
            };
            let Some(w) = m.first_live(now).map(|p| &m.queue[p]) else {
                return false;
            };
            w.id == id && self.claim(key, &w.owner, now) != Claim::Taken
        })
    }

    /// Grants the MLOCK waiter `id` every one of `keys` if it is ready ([`Self::group_ready`]),
    /// in this entry; true if it did. The waiters whose waits ran out ahead of it leave the
    /// queues. A waiter missing from one of its queues (it can only be one whose wait ran
    /// out) leaves all of them.
    pub(super) fn grant_group(
        &mut self,
        id: WaiterId,
        keys: &[Bytes],
        now: u64,
        revision: u64,
    ) -> bool {
        let whole = keys.iter().all(|k| {
            self.lock_meta(k)
                .is_some_and(|m| m.queue.iter().any(|w| w.id == id))
        });
        if !whole {
            self.drop_waiter(keys, id, now);
            return false;
        }
        if !self.group_ready(id, keys, now) {
            return false;
        }
        let mut waiter = None;
        for key in keys {
            let meta = self.lock_meta_mut(key);
            let Some(pos) = meta.queue.iter().position(|w| w.id == id) else {
                continue;
            };
            meta.queue.drain(..pos);
            waiter = meta.queue.pop_front();
            meta.tidy();
            self.drop_lock_meta_if_idle(key, now);
        }
        let Some(w) = waiter else {
            return false;
        };
        self.take_all(keys, &w.owner, w.ttl_ms, Some(id), now, revision);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::keyspace::Event;
    use crate::state::Acquire;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    fn keys(ks: &[&str]) -> Vec<Bytes> {
        ks.iter().map(|k| b(k)).collect()
    }

    fn id(seq: u64) -> WaiterId {
        WaiterId {
            node: 1,
            boot: 7,
            seq,
        }
    }

    /// MLOCK `ks` as `owner` at `now` (revision `rev`), waiting for ever as `seq` if given.
    fn mlock(
        k: &mut Keyspace,
        owner: &str,
        ks: &[&str],
        seq: Option<u64>,
        now: u64,
        rev: u64,
    ) -> MultiAcquired {
        let (keys, owner) = (keys(ks), b(owner));
        let a = MultiAcquire {
            keys: &keys,
            owner: &owner,
            ttl_ms: 1_000,
            wait: seq.map(|s| (id(s), None)),
        };
        k.lock_acquire_all(a, now, rev)
    }

    fn lock(k: &mut Keyspace, owner: &str, key: &str, now: u64, rev: u64) -> u64 {
        let (key, owner) = (b(key), b(owner));
        let a = Acquire {
            key: &key,
            owner: &owner,
            ttl_ms: 1_000,
            delay_ms: 0,
            wait: None,
        };
        match k.lock_acquire(a, now, rev) {
            crate::state::Acquired::Granted(t) => t,
            other => panic!("LOCK {other:?}"),
        }
    }

    fn holder(k: &Keyspace, key: &str, now: u64) -> Option<Bytes> {
        k.get(key.as_bytes(), now).map(|e| match &e.value {
            Value::Str(v) => v.clone(),
            _ => panic!("not a lock"),
        })
    }

    /// The grants to waiters among the recorded events: (key, waiter seq).
    fn grants(k: &mut Keyspace) -> Vec<(Bytes, u64)> {
        k.take_events()
            .into_iter()
            .filter_map(|e| match e {
                Event::Lock {
                    kind: LockEventKind::Granted | LockEventKind::Renewed,
                    key,
                    waiter: Some(w),
                    ..
                } => Some((key, w.seq)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn all_keys_or_none_each_with_its_own_token() {
        let mut k = Keyspace::default();
        let MultiAcquired::Granted(t) = mlock(&mut k, "a", &["x", "y", "z"], None, 10, 5) else {
            panic!("free keys")
        };
        assert_eq!(t.len(), 3);
        assert!(t[0] < t[1] && t[1] < t[2] && t[0] >= 5, "{t:?}");
        // Another owner gets none of them, even where one key is free.
        lock(&mut k, "c", "w", 11, 20);
        assert_eq!(
            mlock(&mut k, "b", &["w", "q"], None, 12, 30),
            MultiAcquired::Busy
        );
        assert_eq!(holder(&k, "q", 12), None, "no partial grant");
        // The owner again: its own tokens, new leases.
        assert_eq!(
            mlock(&mut k, "a", &["z", "x"], None, 900, 40),
            MultiAcquired::Granted(vec![t[2], t[0]])
        );
        assert!(k.get(b"x", 1_500).is_some() && k.get(b"y", 1_500).is_none());
        assert_eq!(
            k.lock_release_all(&keys(&["x", "y", "z", "w"]), b"a", 901, 41),
            3
        );
    }

    #[test]
    fn a_waiter_is_granted_all_its_keys_in_one_step_once_all_are_free() {
        let mut k = Keyspace::default();
        lock(&mut k, "h1", "x", 10, 1);
        lock(&mut k, "h2", "y", 10, 2);
        assert_eq!(
            mlock(&mut k, "m", &["x", "y"], Some(1), 11, 3),
            MultiAcquired::Queued
        );
        k.take_events();
        assert!(k.lock_release(&b("x"), b"h1", 12, 4));
        assert_eq!(grants(&mut k), vec![], "y is still held");
        assert_eq!(holder(&k, "x", 12), None, "x stays free for the waiter");
        // A LOCK without WAIT on x is refused: the queue is FIFO.
        let (x, o) = (b("x"), b("late"));
        let a = Acquire {
            key: &x,
            owner: &o,
            ttl_ms: 100,
            delay_ms: 0,
            wait: None,
        };
        assert_eq!(k.lock_acquire(a, 12, 5), crate::state::Acquired::Busy);
        assert!(
            !k.locks_due(12, 10).contains(&x),
            "no entry for a waiter that cannot go"
        );
        assert!(k.lock_release(&b("y"), b"h2", 13, 6));
        assert_eq!(grants(&mut k), vec![(b("x"), 1), (b("y"), 1)]);
        assert_eq!(
            (holder(&k, "x", 13), holder(&k, "y", 13)),
            (Some(b("m")), Some(b("m")))
        );
        assert!(k.lock_metas().is_empty(), "{:?}", k.lock_metas());
    }

    /// Two MLOCKs that ask for the same keys in opposite orders, each behind a holder, and a
    /// LOCK waiter between them: every one is granted in turn, none is stuck.
    #[test]
    fn crossed_waiters_never_deadlock() {
        let mut k = Keyspace::default();
        lock(&mut k, "h", "x", 10, 1);
        lock(&mut k, "h", "y", 10, 2);
        assert_eq!(
            mlock(&mut k, "m1", &["x", "y"], Some(1), 11, 3),
            MultiAcquired::Queued
        );
        assert_eq!(
            mlock(&mut k, "m2", &["y", "x"], Some(2), 11, 4),
            MultiAcquired::Queued
        );
        k.take_events();
        assert_eq!(k.lock_release_all(&keys(&["y", "x"]), b"h", 12, 5), 2);
        assert_eq!(grants(&mut k), vec![(b("x"), 1), (b("y"), 1)]);
        assert_eq!(k.lock_release_all(&keys(&["x", "y"]), b"m1", 13, 6), 2);
        assert_eq!(grants(&mut k), vec![(b("y"), 2), (b("x"), 2)]);
    }

    #[test]
    fn cancel_and_retry_move_the_waiter_in_every_queue() {
        let mut k = Keyspace::default();
        lock(&mut k, "h", "x", 10, 1);
        assert_eq!(
            mlock(&mut k, "m", &["x", "y"], Some(1), 11, 2),
            MultiAcquired::Queued
        );
        // A retry for the same keys keeps its place, with the new waiter.
        assert_eq!(
            mlock(&mut k, "m", &["x", "y"], Some(2), 11, 3),
            MultiAcquired::Queued
        );
        for key in ["x", "y"] {
            let m = k.lock_meta(key.as_bytes()).expect("queued");
            assert_eq!(
                m.queue.iter().map(|w| w.id.seq).collect::<Vec<_>>(),
                vec![2]
            );
            assert_eq!(m.groups.len(), 1);
        }
        // A LOCK WAIT by the same owner on y takes it out of x's queue too.
        let (y, o) = (b("y"), b("m"));
        let a = Acquire {
            key: &y,
            owner: &o,
            ttl_ms: 100,
            delay_ms: 0,
            wait: Some((id(3), None)),
        };
        k.lock_acquire(a, 12, 4);
        assert!(k.lock_meta(b"x").is_none_or(|m| m.queue.is_empty()));
        // Cancelling an MLOCK waiter by one key empties every queue it was in.
        assert_eq!(
            mlock(&mut k, "n", &["x", "y"], Some(4), 13, 5),
            MultiAcquired::Queued
        );
        assert!(k.lock_cancel(&b("y"), id(4), 14));
        assert!(k
            .lock_meta(b"x")
            .is_none_or(|m| m.queue.is_empty() && m.groups.is_empty()));
    }

    #[test]
    fn a_key_the_owner_holds_counts_as_free_and_keeps_its_token() {
        let mut k = Keyspace::default();
        let tx = lock(&mut k, "m", "x", 10, 1);
        lock(&mut k, "h", "y", 10, 2);
        assert_eq!(
            mlock(&mut k, "m", &["x", "y"], Some(1), 11, 3),
            MultiAcquired::Queued
        );
        k.take_events();
        assert!(k.lock_release(&b("y"), b"h", 12, 4));
        assert_eq!(grants(&mut k), vec![(b("x"), 1), (b("y"), 1)]);
        assert_eq!(k.get(b"x", 12).map(|e| e.token), Some(tx));
        assert_eq!(k.get(b"x", 12).and_then(|e| e.expire_at), Some(12 + 1_000));
    }
}
