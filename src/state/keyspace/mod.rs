//! The replicated keyspace: entries with optional deadlines, per-key fences and the revision.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use bytes::Bytes;

use super::clock::ClusterClock;
use super::locks::LockMeta;
use super::Error;

mod changes;
mod event;
#[cfg(test)]
mod tests;
mod value;

pub use changes::Changes;
use changes::Journal;
pub use event::Event;
pub use value::{Entry, Hash, List, Set, Value};

/// A tree is rebuilt once it has grown by a quarter, and by at least this many keys, since
/// its last rebuild (see [`compact_if_grown`]).
const COMPACT_MIN_GROWTH: usize = 65_536;

/// The whole replicated state machine data.
#[derive(Clone, Debug, Default)]
pub struct Keyspace {
    entries: BTreeMap<Bytes, Entry>,
    fences: BTreeMap<Bytes, u64>,
    revision: u64,
    clock: ClusterClock,
    /// The replicated script cache (SHA1 hex -> body) and budget.
    pub(super) scripts: super::scripts::ScriptCache,
    /// The replicated ACL users.
    pub(super) acl: super::acl::Users,
    /// Number of entries with a deadline (expired keys are found by a sweep, not an index:
    /// an index costs a second copy of every lock's key).
    volatile: usize,
    dirty: BTreeSet<Bytes>,
    dirty_fences: BTreeSet<Bytes>,
    /// Queues and lock-delays, only for the keys that have one ([`super::locks`]).
    locks: BTreeMap<Bytes, LockMeta>,
    dirty_locks: BTreeSet<Bytes>,
    /// Clients blocked in a pop, per key, in arrival order ([`super::popq`]).
    pub(super) popq: BTreeMap<Bytes, VecDeque<super::popq::PopWaiter>>,
    pub(super) dirty_popq: BTreeSet<Bytes>,
    /// Keys with waiters that a command has written since they were last served, in the order
    /// they first became ready, as Redis's `ready_keys` list (not state: emptied by the serving
    /// step after every top-level command).
    pub(super) ready: VecDeque<Bytes>,
    /// Sizes at which `entries` and `fences` are next rebuilt with full nodes.
    compact_entries_at: usize,
    compact_fences_at: usize,
    events: Vec<Event>,
    journal: Option<Journal>,
    /// This node's `notify-keyspace-events` classes ([`super::notify`]): which keyspace
    /// notifications apply records. A local output filter, never part of the state.
    notify_flags: u32,
    /// The last token the current command gave out, and whether to a lock grant (not
    /// state: reset by [`Keyspace::bump_revision`] when the next command starts). It is how
    /// a command that grants twice, or grants after a write, gives each grant a revision of
    /// its own ([`Keyspace::take_token`]).
    last_token: Option<(u64, bool)>,
}

impl Keyspace {
    /// Rebuilds a keyspace from persisted parts.
    pub fn from_parts(
        entries: BTreeMap<Bytes, Entry>,
        fences: BTreeMap<Bytes, u64>,
        revision: u64,
        clock: ClusterClock,
    ) -> Self {
        let mut ks = Keyspace {
            entries,
            fences,
            revision,
            clock,
            ..Default::default()
        };
        ks.rebuild_index();
        ks
    }

    /// Recounts the keys with a deadline (after loading entries).
    pub fn rebuild_index(&mut self) {
        self.volatile = self
            .entries
            .values()
            .filter(|e| e.expire_at.is_some())
            .count();
    }

    /// The revision: advanced by one for every applied write command.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// Advances and returns the revision: a command (or a script's call) starts.
    pub fn bump_revision(&mut self) -> u64 {
        self.revision += 1;
        self.last_token = None;
        self.revision
    }

    /// The token for a key the current command writes (`grant`: a lock grant), given the
    /// command's revision. Design rule: no revision is handed to two grants.
    /// - A grant takes `revision` unless this command already gave that revision (or a
    ///   later one) to a key; then it advances the revision and takes the new one.
    /// - A plain write takes `revision` unless a grant of this command took it. Several keys
    ///   written by one command (MSET) share its revision, as they always have, so that the
    ///   log replays to the same state.
    pub fn take_token(&mut self, revision: u64, grant: bool) -> u64 {
        let token = match self.last_token {
            Some((last, last_grant)) if revision <= last && (grant || last_grant) => {
                self.revision = self.revision.max(last) + 1;
                self.revision
            }
            _ => revision,
        };
        self.last_token = Some((token, grant));
        token
    }

    /// The cluster clock.
    pub fn clock(&self) -> &ClusterClock {
        &self.clock
    }

    /// The cluster clock, for apply.
    pub fn clock_mut(&mut self) -> &mut ClusterClock {
        &mut self.clock
    }

    /// The live entry for `key` at `now`.
    pub fn get(&self, key: &[u8], now: u64) -> Option<&Entry> {
        self.entries.get(key).filter(|e| e.live(now))
    }

    /// The live string value of `key`, `Ok(None)` if absent, or [`Error::WrongType`].
    pub fn get_str(&self, key: &[u8], now: u64) -> Result<Option<&Bytes>, Error> {
        match self.get(key, now).map(|e| &e.value) {
            None => Ok(None),
            Some(Value::Str(b)) => Ok(Some(b)),
            Some(_) => Err(Error::WrongType),
        }
    }

    /// The live hash at `key`, `Ok(None)` if absent, or [`Error::WrongType`].
    pub fn get_hash(&self, key: &[u8], now: u64) -> Result<Option<&Hash>, Error> {
        match self.get(key, now).map(|e| &e.value) {
            None => Ok(None),
            Some(Value::Hash(h)) => Ok(Some(h)),
            Some(_) => Err(Error::WrongType),
        }
    }

    /// The live list at `key`, `Ok(None)` if absent, or [`Error::WrongType`].
    pub fn get_list(&self, key: &[u8], now: u64) -> Result<Option<&List>, Error> {
        match self.get(key, now).map(|e| &e.value) {
            None => Ok(None),
            Some(Value::List(l)) => Ok(Some(l)),
            Some(_) => Err(Error::WrongType),
        }
    }

    /// The live set at `key`, `Ok(None)` if absent, or [`Error::WrongType`].
    pub fn get_set(&self, key: &[u8], now: u64) -> Result<Option<&Set>, Error> {
        match self.get(key, now).map(|e| &e.value) {
            None => Ok(None),
            Some(Value::Set(s)) => Ok(Some(s)),
            Some(_) => Err(Error::WrongType),
        }
    }

    /// The live sorted set at `key`, `Ok(None)` if absent, or [`Error::WrongType`].
    pub fn get_zset(&self, key: &[u8], now: u64) -> Result<Option<&super::ZSet>, Error> {
        match self.get(key, now).map(|e| &e.value) {
            None => Ok(None),
            Some(Value::ZSet(z)) => Ok(Some(z)),
            Some(_) => Err(Error::WrongType),
        }
    }

    /// The live value at `key` for in-place modification, creating it with `empty()` when
    /// absent (if `empty` is given). [`Error::WrongType`] if `fits` rejects the existing value.
    /// The key is marked written; the caller must call [`Keyspace::drop_if_empty`] after
    /// removing elements.
    pub fn value_mut(
        &mut self,
        key: &Bytes,
        now: u64,
        fits: fn(&Value) -> bool,
        empty: Option<fn() -> Value>,
    ) -> Result<Option<&mut Value>, Error> {
        match self.get(key, now) {
            Some(e) if !fits(&e.value) => return Err(Error::WrongType),
            Some(_) => {}
            None => match empty {
                None => return Ok(None),
                Some(make) => {
                    let token = self.take_token(self.revision, false);
                    let entry = Entry {
                        value: make(),
                        expire_at: None,
                        token,
                        modified: self.revision,
                    };
                    self.insert(key.clone(), entry);
                }
            },
        }
        self.note(key);
        self.dirty.insert(key.clone());
        let revision = self.revision;
        Ok(self.entries.get_mut(key).map(|e| {
            e.modified = revision;
            &mut e.value
        }))
    }

    /// Removes `key` if it holds an empty hash or list (with Redis's `del` notification).
    pub fn drop_if_empty(&mut self, key: &[u8], now: u64) {
        if self
            .entries
            .get(key)
            .is_some_and(|e| e.value.is_empty_collection())
        {
            self.notify(super::notify::GENERIC, "del", key);
            self.remove(key, now);
        }
    }

    /// Stores a `*STORE` command's result at `key` as a fresh value (no TTL, token
    /// `revision`), replacing whatever the key held, or removes `key` when the result is an
    /// empty collection. Notifies as Redis does: `new` for a created key, then `event` (a
    /// class and an event name, e.g. `(notify::SET, "sinterstore")`); `del` when an empty
    /// result removes a live key, nothing when it removes nothing. True if it stored.
    pub fn store_result(
        &mut self,
        key: &Bytes,
        value: Value,
        revision: u64,
        now: u64,
        event: (u32, &'static str),
    ) -> bool {
        if value.is_empty_collection() {
            if self.remove(key, now).is_some() {
                self.notify(super::notify::GENERIC, "del", key);
            }
            return false;
        }
        let entry = Entry {
            value,
            expire_at: None,
            token: self.take_token(revision, false),
            modified: 0,
        };
        self.insert(key.clone(), entry);
        self.notify(event.0, event.1, key);
        true
    }

    /// Sets this node's `notify-keyspace-events` classes (see [`super::notify`]).
    pub fn set_notify_flags(&mut self, flags: u32) {
        self.notify_flags = flags;
    }

    /// Records Redis's keyspace notification `event` of `class` (a [`super::notify`]
    /// constant such as `notify::STRING`) for `key`, if this node's flags ask for it.
    /// Commands call it in apply, after the change and in the order Redis signals events:
    /// e.g. `ks.notify(notify::LIST, "lpush", &key)`. It costs one test when notifications
    /// are off; a script rolled back drops its notifications with its other events.
    pub fn notify(&mut self, class: u32, event: &'static str, key: &[u8]) {
        use super::notify::{KEYEVENT, KEYSPACE};
        let flags = self.notify_flags;
        if flags & class == 0 || flags & (KEYSPACE | KEYEVENT) == 0 {
            return;
        }
        self.events.push(Event::Notify {
            event,
            key: Bytes::copy_from_slice(key),
            keyspace: flags & KEYSPACE != 0,
            keyevent: flags & KEYEVENT != 0,
        });
    }

    /// Writes a string. The token is kept when a live entry already holds the same value
    /// (the same owner renewing or re-writing), and is `revision` otherwise.
    pub fn set_str(
        &mut self,
        key: Bytes,
        value: Bytes,
        expire_at: Option<u64>,
        revision: u64,
        now: u64,
    ) {
        let token = match self.get(&key, now) {
            Some(Entry {
                value: Value::Str(old),
                token,
                ..
            }) if *old == value => *token,
            _ => self.take_token(revision, false),
        };
        self.insert(
            key,
            Entry {
                value: Value::Str(value),
                expire_at,
                token,
                modified: 0,
            },
        );
    }

    /// Inserts or replaces an entry (its `modified` becomes the current revision). A key
    /// that was not live at the entry's cluster time is new (Redis's `new` notification).
    pub fn insert(&mut self, key: Bytes, mut entry: Entry) {
        if self.notify_flags & super::notify::NEW != 0
            && !self
                .entries
                .get(&key)
                .is_some_and(|e| e.live(self.clock.now))
        {
            self.notify(super::notify::NEW, "new", &key);
        }
        self.note(&key);
        entry.modified = self.revision;
        self.raw_insert(key, entry);
    }

    fn raw_insert(&mut self, key: Bytes, mut entry: Entry) {
        let volatile = entry.expire_at.is_some();
        // The tree keeps exact, private copies of the key and of a string value. They arrive
        // as clones of a command's buffers, and the first clone of a `Bytes` made from a Vec
        // adds a shared header (a 32-byte allocation) that would stay with the stored copy for
        // life: about 64 bytes per lock, a third of what a lock costs (docs/performance.md).
        if let Value::Str(v) = &mut entry.value {
            *v = Bytes::copy_from_slice(v);
        }
        match self.entries.get_mut(&key) {
            // A key already stored keeps its stored copy.
            Some(slot) => {
                self.volatile -= usize::from(slot.expire_at.is_some());
                *slot = entry;
            }
            None => {
                self.entries.insert(Bytes::copy_from_slice(&key), entry);
                compact_if_grown(&mut self.entries, &mut self.compact_entries_at);
            }
        }
        self.dirty.insert(key);
        self.volatile += usize::from(volatile);
    }

    /// Removes `key`; returns the entry if it was live at `now`.
    pub fn remove(&mut self, key: &[u8], now: u64) -> Option<Entry> {
        if self.journal.is_some() && self.entries.contains_key(key) {
            self.note(&Bytes::copy_from_slice(key));
        }
        let (k, old) = self.entries.remove_entry(key)?;
        self.volatile -= usize::from(old.expire_at.is_some());
        self.dirty.insert(k);
        old.live(now).then_some(old)
    }

    /// Sets or clears the deadline of a live key; returns false if the key is not live.
    pub fn set_expire(&mut self, key: &[u8], expire_at: Option<u64>, now: u64) -> bool {
        let Some(mut entry) = self.get(key, now).cloned() else {
            return false;
        };
        entry.expire_at = expire_at;
        self.insert(Bytes::copy_from_slice(key), entry);
        true
    }

    /// The fence of `key`: the highest token FENCEDSET/FENCEDGET accepted (0 if none).
    pub fn fence(&self, key: &[u8]) -> u64 {
        self.fences.get(key).copied().unwrap_or(0)
    }

    /// Raises the fence of `key` to `token` if it is higher.
    pub fn raise_fence(&mut self, key: &Bytes, token: u64) {
        // One lookup of the key; a new key only is copied in.
        let old = match self.fences.get_mut(key) {
            Some(fence) if token > *fence => Some(std::mem::replace(fence, token)),
            None if token > 0 => {
                // An exact copy, for the reason `raw_insert` gives.
                self.fences.insert(Bytes::copy_from_slice(key), token);
                compact_if_grown(&mut self.fences, &mut self.compact_fences_at);
                None
            }
            _ => return,
        };
        if let Some(j) = &mut self.journal {
            j.fences.entry(key.clone()).or_insert(old);
        }
        self.dirty_fences.insert(key.clone());
    }

    /// Live keys at `now`, in sorted order.
    pub fn live_keys(&self, now: u64) -> impl Iterator<Item = (&Bytes, &Entry)> {
        self.entries.iter().filter(move |(_, e)| e.live(now))
    }

    /// Live keys at `now` after `after` (from the first key if None), in sorted order: SCAN
    /// and KEYS resume here in O(log n) instead of skipping from the start.
    pub fn live_keys_after<'a>(
        &'a self,
        after: Option<&Bytes>,
        now: u64,
    ) -> impl Iterator<Item = (&'a Bytes, &'a Entry)> + 'a {
        use std::ops::Bound::{Excluded, Unbounded};
        let from = after.map_or(Unbounded, |k| Excluded(k.clone()));
        self.entries
            .range((from, Unbounded))
            .filter(move |(_, e)| e.live(now))
    }

    /// Number of live keys at `now`.
    pub fn live_len(&self, now: u64) -> usize {
        if self.volatile == 0 {
            return self.entries.len();
        }
        self.live_keys(now).count()
    }

    /// Number of stored keys, including expired ones not yet evicted.
    pub fn stored_len(&self) -> usize {
        self.entries.len()
    }

    /// Number of keys with a deadline.
    pub fn volatile_len(&self) -> usize {
        self.volatile
    }

    /// Sweeps for keys whose deadline has passed at `now`: looks at up to `max_scan` keys in
    /// key order after `after` (from the start if `None`, wrapping around once), and returns
    /// up to `limit` expired ones and where the next sweep should start (`None`: from the
    /// start). A full pass over the keyspace takes `len / max_scan` sweeps.
    pub fn expired_keys(
        &self,
        now: u64,
        after: Option<&Bytes>,
        limit: usize,
        max_scan: usize,
    ) -> (Vec<Bytes>, Option<Bytes>) {
        use std::ops::Bound::{Excluded, Unbounded};
        let mut found = Vec::new();
        if self.volatile == 0 {
            return (found, None);
        }
        let lower = after.map_or(Unbounded, Excluded);
        let tail = self.entries.range::<Bytes, _>((lower, Unbounded));
        let head = self
            .entries
            .range::<Bytes, _>((Unbounded, after.map_or(Unbounded, Excluded)));
        let mut last: Option<&Bytes> = None;
        let wrapped = after.is_some();
        for (i, (k, e)) in tail.chain(head.take_while(|_| wrapped)).enumerate() {
            if i >= max_scan || found.len() >= limit {
                return (found, last.cloned());
            }
            if !e.live(now) {
                found.push(k.clone());
            }
            last = Some(k);
        }
        (found, None)
    }

    /// The lock record (queue, lock-delay) of `key`, if it has one.
    pub fn lock_meta(&self, key: &[u8]) -> Option<&LockMeta> {
        self.locks.get(key)
    }

    /// The lock record of `key` for change, created empty if missing (journaled, and
    /// written with the batch).
    pub(super) fn lock_meta_mut(&mut self, key: &Bytes) -> &mut LockMeta {
        if let Some(j) = &mut self.journal {
            if !j.locks.contains_key(key) {
                j.locks.insert(key.clone(), self.locks.get(key).cloned());
            }
        }
        self.dirty_locks.insert(key.clone());
        self.locks.entry(Bytes::copy_from_slice(key)).or_default()
    }

    /// Deletes the lock record of `key`.
    pub(super) fn remove_lock_meta(&mut self, key: &Bytes) {
        if let Some(j) = &mut self.journal {
            if !j.locks.contains_key(key) {
                j.locks.insert(key.clone(), self.locks.get(key).cloned());
            }
        }
        if self.locks.remove(key).is_some() {
            self.dirty_locks.insert(key.clone());
        }
    }

    /// Every lock record (for snapshots and full rewrites).
    pub fn lock_metas(&self) -> &BTreeMap<Bytes, LockMeta> {
        &self.locks
    }

    /// Replaces the lock records (after loading a database or a snapshot).
    pub fn set_lock_metas(&mut self, locks: BTreeMap<Bytes, LockMeta>) {
        self.locks = locks;
    }

    /// Removes `key` if its deadline has passed at `now`, and returns the removed entry.
    pub fn take_expired(&mut self, key: &[u8], now: u64) -> Option<Entry> {
        if self.entries.get(key)?.live(now) {
            return None;
        }
        if self.journal.is_some() {
            self.note(&Bytes::copy_from_slice(key));
        }
        let (k, old) = self.entries.remove_entry(key)?;
        self.volatile -= usize::from(old.expire_at.is_some());
        self.dirty.insert(k);
        Some(old)
    }

    /// Iterates all stored entries (for snapshots and full rewrites).
    pub fn entries(&self) -> &BTreeMap<Bytes, Entry> {
        &self.entries
    }

    /// Iterates all fences.
    pub fn fences(&self) -> &BTreeMap<Bytes, u64> {
        &self.fences
    }
}

/// Rebuilds `map` with full nodes once it has reached `*next` keys, and sets the next mark.
///
/// std's B-tree splits a full node in the middle, so keys that arrive in order (a bulk load
/// of numbered locks) leave every node half empty, about twice the memory of a tree built
/// from sorted input (which is how a restart builds it). Only growth triggers a rebuild, so a
/// steady churn of locks never pays for one; the cost is amortized O(1) per insert. The
/// rebuild holds the state machine for as long as one pass over the tree takes.
fn compact_if_grown<V>(map: &mut BTreeMap<Bytes, V>, next: &mut usize) {
    let len = map.len();
    if len < *next {
        return;
    }
    // The first mark is set from whatever size the tree has when it is first grown.
    // This module reads no clock, so the rebuild is not timed here: its duration is the time
    // between the two log lines, which the log subscriber stamps.
    if *next > 0 {
        tracing::debug!(keys = len, "rebuilding a key tree with full nodes");
        *map = std::mem::take(map).into_iter().collect();
        tracing::debug!(keys = len, "rebuilt a key tree with full nodes");
    }
    *next = len + len / 4 + COMPACT_MIN_GROWTH;
}
