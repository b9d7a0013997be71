//! The replicated keyspace: entries with optional deadlines, per-key fences and the revision.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::clock::ClusterClock;
use super::locks::{lock_notifications, LockEventKind, LockMeta, WaiterId};
use super::Error;

/// A tree is rebuilt once it has grown by a quarter, and by at least this many keys, since
/// its last rebuild (see [`compact_if_grown`]).
const COMPACT_MIN_GROWTH: usize = 65_536;

/// A Redis hash. Fields keep insertion order (an update keeps the field's place, a delete
/// closes the gap), which is the order Redis 7 replies with for small (listpack) hashes.
/// Iteration is over the entry vector, never a hash order, so it is deterministic.
pub type Hash = indexmap::IndexMap<Bytes, Bytes>;

/// A Redis list.
pub type List = VecDeque<Bytes>;

/// A Redis set. Members keep insertion order, and a removal moves the last member into the
/// gap (`swap_remove`, O(1)): iteration is over the entry vector, never a hash order, so it
/// is the same on every replica, and a member can be drawn by index (SPOP, SRANDMEMBER).
pub type Set = indexmap::IndexSet<Bytes>;

/// A stored value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Value {
    /// A Redis string. Any string key is also a lock whose owner is its value.
    Str(Bytes),
    /// A Redis hash (never empty while stored). Boxed: an `IndexMap` is 72 bytes, and an
    /// unboxed one would make every entry, locks included, that much larger.
    Hash(Box<Hash>),
    /// A Redis list (never empty while stored).
    List(List),
    /// A Redis set (never empty while stored). Boxed like [`Value::Hash`]. It comes after
    /// `List` (serde variant index 3), so data written before sets existed reads unchanged.
    Set(Box<Set>),
    /// A Redis sorted set (never empty while stored). Boxed, for the size reason `Hash` gives.
    ZSet(Box<super::ZSet>),
}

impl Value {
    /// The name `TYPE` reports.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
            Value::Hash(_) => "hash",
            Value::List(_) => "list",
            Value::Set(_) => "set",
            Value::ZSet(_) => "zset",
        }
    }

    /// True for an empty hash or list (such a key is removed, as Redis does).
    pub fn is_empty_collection(&self) -> bool {
        match self {
            Value::Str(_) => false,
            Value::Hash(h) => h.is_empty(),
            Value::List(l) => l.is_empty(),
            Value::Set(s) => s.is_empty(),
            Value::ZSet(z) => z.is_empty(),
        }
    }
}

/// One key's persisted record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The value.
    pub value: Value,
    /// Deadline in cluster milliseconds; `None` means no TTL.
    pub expire_at: Option<u64>,
    /// Fencing token: the revision at which the current owner (value) first wrote the key.
    pub token: u64,
    /// The revision of the last write to this key (WATCH compares it at EXEC).
    pub modified: u64,
}

impl Entry {
    /// True if the entry is still visible at cluster time `now`.
    pub fn live(&self, now: u64) -> bool {
        self.expire_at.is_none_or(|at| at > now)
    }

    /// Remaining TTL in ms at `now`, or -1 without a deadline.
    pub fn pttl(&self, now: u64) -> i64 {
        match self.expire_at {
            Some(at) => at.saturating_sub(now) as i64,
            None => -1,
        }
    }
}

/// Changes since the last [`Keyspace::take_changes`], to be written in one WriteBatch; `R` is
/// the record the caller made of each written entry (the store encodes it).
#[derive(Debug, Default)]
pub struct Changes<R> {
    /// Keys to write (`Some`) or delete (`None`).
    pub entries: Vec<(Bytes, Option<R>)>,
    /// Fences to write.
    pub fences: Vec<(Bytes, u64)>,
    /// Cached scripts to write (`Some` body) or delete (`None`), by SHA1 hex.
    pub scripts: Vec<(String, Option<Bytes>)>,
    /// The script instruction budget, if it changed.
    pub script_budget: Option<u64>,
    /// Lock queues and delays to write (`Some`) or delete (`None`).
    pub locks: Vec<(Bytes, Option<LockMeta>)>,
    /// ACL users to write (`Some`) or delete (`None`), by name.
    pub users: Vec<(String, Option<super::acl::User>)>,
    /// Blocked-pop queues to write (`Some`) or delete (`None`), by key.
    pub pops: Vec<(Bytes, Option<VecDeque<super::popq::PopWaiter>>)>,
}

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

/// Undo information for one script run: the first old value of everything it touched.
#[derive(Clone, Debug, Default)]
struct Journal {
    entries: BTreeMap<Bytes, Option<Entry>>,
    fences: BTreeMap<Bytes, Option<u64>>,
    locks: BTreeMap<Bytes, Option<LockMeta>>,
    revision: u64,
    events: usize,
}

/// Something apply wants the local node to observe after the batch is durable: an output of
/// the state machine (delivery to subscribers, wake-ups), never an input to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A message published to a channel.
    Publish {
        /// The channel.
        channel: Bytes,
        /// The message.
        message: Bytes,
    },
    /// A message published to a shard channel (SPUBLISH): delivered to shard subscribers
    /// only, a namespace apart from [`Event::Publish`]'s channels.
    ShardPublish {
        /// The shard channel.
        channel: Bytes,
        /// The message.
        message: Bytes,
    },
    /// A key was given data that blocked pops may take (a push, a move, a store): it makes
    /// the key ready for serving ([`super::popq`]). Consumed inside apply, never delivered.
    Touched(Bytes),
    /// A lock was granted, released, renewed or lost (keyspace notifications; a grant to a
    /// waiter also names it, so that its node can answer it).
    Lock {
        /// What happened.
        kind: LockEventKind,
        /// The lock's key.
        key: Bytes,
        /// The lease's fencing token.
        token: u64,
        /// The lease's owner.
        owner: Bytes,
        /// The waiter granted the lock (grants from the queue only).
        waiter: Option<WaiterId>,
    },
    /// A client blocked in a pop was served ([`super::popq`]): its node hands it the reply.
    Served {
        /// The waiter.
        waiter: WaiterId,
        /// The reply, encoded by the `cmd` layer.
        reply: Bytes,
    },
    /// A keyspace notification ([`Keyspace::notify`]), for the channels chosen when it was
    /// recorded.
    Notify {
        /// Redis's event name (`set`, `del`, `expired`, ...).
        event: &'static str,
        /// The key.
        key: Bytes,
        /// Publish on `__keyspace@0__:<key>`.
        keyspace: bool,
        /// Publish on `__keyevent@0__:<event>`.
        keyevent: bool,
    },
}

impl Event {
    /// The pub/sub messages the event stands for: (channel, message) pairs.
    pub fn publications(&self) -> Vec<(Bytes, Bytes)> {
        match self {
            Event::Publish { channel, message } => vec![(channel.clone(), message.clone())],
            Event::Touched(_) | Event::Served { .. } | Event::ShardPublish { .. } => Vec::new(),
            Event::Lock {
                kind,
                key,
                token,
                owner,
                ..
            } => lock_notifications(*kind, key, *token, owner).to_vec(),
            Event::Notify {
                event,
                key,
                keyspace,
                keyevent,
            } => {
                let mut out = Vec::with_capacity(2);
                if *keyspace {
                    let mut channel = b"__keyspace@0__:".to_vec();
                    channel.extend_from_slice(key);
                    out.push((Bytes::from(channel), Bytes::from_static(event.as_bytes())));
                }
                if *keyevent {
                    out.push((Bytes::from(format!("__keyevent@0__:{event}")), key.clone()));
                }
                out
            }
        }
    }
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
        if token > self.fence(key) {
            if let Some(j) = &mut self.journal {
                let old = self.fences.get(key).copied();
                j.fences.entry(key.clone()).or_insert(old);
            }
            // An exact copy, for the reason `raw_insert` gives.
            if self
                .fences
                .insert(Bytes::copy_from_slice(key), token)
                .is_none()
            {
                compact_if_grown(&mut self.fences, &mut self.compact_fences_at);
            }
            self.dirty_fences.insert(key.clone());
        }
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

    /// Takes the keys and fences changed since the last call.
    pub fn take_changes<R>(&mut self, mut record: impl FnMut(&Entry) -> R) -> Changes<R> {
        let (scripts, script_budget) = self.scripts.take_changes();
        // `record` sees the stored entry in place: a clone of its value would give the stored
        // buffer a shared header for life (see `raw_insert`).
        let entries = std::mem::take(&mut self.dirty).into_iter().map(|k| {
            let e = self.entries.get(&k).map(&mut record);
            (k, e)
        });
        let fences = std::mem::take(&mut self.dirty_fences).into_iter().map(|k| {
            let f = self.fence(&k);
            (k, f)
        });
        let entries = entries.collect();
        let fences = fences.collect();
        let locks = std::mem::take(&mut self.dirty_locks)
            .into_iter()
            .map(|k| {
                let m = self.locks.get(&k).cloned();
                (k, m)
            })
            .collect();
        Changes {
            entries,
            fences,
            scripts,
            script_budget,
            locks,
            users: self.acl.take_changes(),
            pops: std::mem::take(&mut self.dirty_popq)
                .into_iter()
                .map(|k| {
                    let q = self.popq.get(&k).cloned();
                    (k, q)
                })
                .collect(),
        }
    }

    /// Starts recording undo information (a script is about to run).
    pub fn begin_undo(&mut self) {
        self.journal = Some(Journal {
            revision: self.revision,
            events: self.events.len(),
            ..Default::default()
        });
    }

    /// Stops recording and keeps every change.
    pub fn commit_undo(&mut self) {
        self.journal = None;
    }

    /// Stops recording and restores everything changed since [`Keyspace::begin_undo`]:
    /// entries, fences, the revision and the recorded events (a budget abort leaves no trace).
    pub fn rollback_undo(&mut self) {
        let Some(j) = self.journal.take() else {
            return;
        };
        for (key, old) in j.entries {
            match old {
                Some(entry) => self.raw_insert(key, entry),
                None => {
                    if let Some(e) = self.entries.remove(&key) {
                        self.volatile -= usize::from(e.expire_at.is_some());
                    }
                    self.dirty.insert(key);
                }
            }
        }
        for (key, old) in j.fences {
            match old {
                Some(f) => self.fences.insert(key.clone(), f),
                None => self.fences.remove(&key),
            };
            self.dirty_fences.insert(key);
        }
        for (key, old) in j.locks {
            match old {
                Some(m) => self.locks.insert(key.clone(), m),
                None => self.locks.remove(&key),
            };
            self.dirty_locks.insert(key);
        }
        self.revision = j.revision;
        self.events.truncate(j.events);
    }

    /// Records the current entry of `key` in the journal, the first time it is touched.
    fn note(&mut self, key: &Bytes) {
        if let Some(j) = &mut self.journal {
            if !j.entries.contains_key(key) {
                j.entries
                    .insert(key.clone(), self.entries.get(key).cloned());
            }
        }
    }

    /// Records an event for the local node (delivered after the batch is persisted).
    pub fn emit(&mut self, event: Event) {
        if let Event::Touched(key) = &event {
            self.mark_ready(key);
            return;
        }
        self.events.push(event);
    }

    /// Takes the events recorded since the last call.
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    /// Forgets pending changes (after a full rewrite such as a snapshot install).
    pub fn clear_changes(&mut self) {
        self.dirty.clear();
        self.dirty_fences.clear();
        self.dirty_locks.clear();
        self.dirty_popq.clear();
        self.ready.clear();
        self.scripts.take_changes();
        self.acl.take_changes();
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

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    /// Every lock is one entry: its size is most of a node's memory per lock
    /// (docs/performance.md). An unboxed hash variant made it 112 bytes.
    #[test]
    fn entries_stay_compact() {
        assert!(std::mem::size_of::<Value>() <= 40);
        assert!(std::mem::size_of::<Entry>() <= 72);
    }

    /// A bulk load of keys in order rebuilds the tree as it grows, and the rebuilt tree holds
    /// exactly what was inserted, in order, with the volatile count intact.
    #[test]
    fn a_growing_keyspace_is_rebuilt_without_losing_or_reordering_keys() {
        let mut ks = Keyspace::default();
        let n = 3 * COMPACT_MIN_GROWTH;
        for i in 0..n {
            let ttl = (i % 2 == 0).then_some(1_000_000);
            ks.set_str(b(&format!("lock:{i:08}")), b("owner"), ttl, i as u64 + 1, 0);
            ks.raise_fence(&b(&format!("res:{i:08}")), i as u64 + 1);
        }
        // The first mark is set at the first insert, then each rebuild moves it on by a
        // quarter of the tree plus the minimum growth.
        assert!(ks.compact_entries_at > n, "mark {}", ks.compact_entries_at);
        assert_eq!(ks.entries().len(), n);
        assert_eq!(ks.fences().len(), n);
        for (i, (k, e)) in ks.entries().iter().enumerate() {
            assert_eq!(k, &b(&format!("lock:{i:08}")));
            assert_eq!(e.token, i as u64 + 1);
        }
        assert_eq!(ks.fence(format!("res:{:08}", n - 1).as_bytes()), n as u64);
        assert_eq!(ks.volatile, n / 2);
        let mut mark = 0;
        compact_if_grown(&mut BTreeMap::<Bytes, u64>::new(), &mut mark);
        assert_eq!(mark, COMPACT_MIN_GROWTH, "an empty tree's first mark");
        let mut small: BTreeMap<Bytes, u64> = (0..10u64).map(|i| (b(&i.to_string()), i)).collect();
        let mut mark = 10;
        compact_if_grown(&mut small, &mut mark);
        assert_eq!(mark, 10 + 2 + COMPACT_MIN_GROWTH);
        assert_eq!(small.len(), 10);
    }

    /// The tree holds private, exact copies: a stored key or value that shared a buffer with
    /// the command that wrote it would carry a 32-byte shared header for life (about 64 bytes
    /// per lock; docs/performance.md). The store records a change from the stored entry in
    /// place, without a clone; an overwrite keeps the stored key.
    #[test]
    fn stored_keys_and_values_share_no_buffer_with_their_writers() {
        fn value_ptr(e: &Entry) -> *const u8 {
            match &e.value {
                Value::Str(v) => v.as_ptr(),
                _ => std::ptr::null(),
            }
        }
        let mut ks = Keyspace::default();
        let (key, owner, res) = (b("lock:1"), b("owner-1"), b("res:1"));
        ks.set_str(key.clone(), owner.clone(), Some(1000), 1, 0);
        ks.raise_fence(&res, 1);
        let changes = ks.take_changes(value_ptr);
        let (k, e) = ks.entries().iter().next().expect("one entry");
        let Value::Str(v) = &e.value else {
            panic!("a string")
        };
        assert_eq!((k, v), (&key, &owner));
        assert_ne!(k.as_ptr(), key.as_ptr(), "key shares the command's buffer");
        assert_ne!(
            v.as_ptr(),
            owner.as_ptr(),
            "value shares the command's buffer"
        );
        assert_eq!(
            changes.entries,
            vec![(key.clone(), Some(v.as_ptr()))],
            "the store's record was not made from the stored entry in place"
        );
        let (fk, _) = ks.fences().iter().next().expect("one fence");
        assert_ne!(
            fk.as_ptr(),
            res.as_ptr(),
            "fence key shares the command's buffer"
        );

        // An overwrite replaces the entry and keeps the stored key.
        let stored_key = k.as_ptr();
        ks.set_str(key.clone(), b("owner-2"), None, 2, 0);
        let (k, e) = ks.entries().iter().next().expect("one entry");
        assert_eq!(
            k.as_ptr(),
            stored_key,
            "the overwrite replaced the stored key"
        );
        assert_eq!(e.value, Value::Str(b("owner-2")));
        assert_eq!(ks.volatile, 0, "the deadline went with the old entry");
    }

    #[test]
    fn token_kept_for_same_owner_changed_for_new_owner() {
        let mut ks = Keyspace::default();
        ks.set_str(b("k"), b("A"), Some(100), 5, 0);
        ks.set_str(b("k"), b("A"), Some(200), 6, 50);
        assert_eq!(ks.get(b"k", 50).unwrap().token, 5);
        ks.set_str(b("k"), b("B"), None, 7, 60);
        assert_eq!(ks.get(b"k", 60).unwrap().token, 7);
    }

    #[test]
    fn expiry_hides_and_index_tracks() {
        let mut ks = Keyspace::default();
        ks.set_str(b("a"), b("1"), Some(10), 1, 0);
        ks.set_str(b("b"), b("1"), None, 2, 0);
        assert!(ks.get(b"a", 9).is_some());
        assert!(ks.get(b"a", 10).is_none());
        assert_eq!(ks.expired_keys(10, None, 10, 100).0, vec![b("a")]);
        assert_eq!(ks.volatile_len(), 1);
        assert_eq!(ks.live_len(10), 1);
        assert!(ks.expire_lease(&b("a"), 10));
        assert!(!ks.expire_lease(&b("b"), 10));
        assert_eq!(ks.volatile_len(), 0);
        assert!(ks.expired_keys(100, None, 10, 100).0.is_empty());
    }

    /// The eviction sweep visits every key once per pass, resuming where it stopped and
    /// wrapping around, and respects both the scan and the result limits.
    #[test]
    fn the_expiry_sweep_resumes_and_wraps() {
        let mut ks = Keyspace::default();
        for i in 0..10u64 {
            // Even keys expire at 5, odd ones never.
            let at = (i % 2 == 0).then_some(5);
            ks.set_str(b(&format!("k{i}")), b("v"), at, i + 1, 0);
        }
        let (found, next) = ks.expired_keys(10, None, 100, 4);
        assert_eq!(found, vec![b("k0"), b("k2")]);
        assert_eq!(next, Some(b("k3")));
        let (found, next) = ks.expired_keys(10, next.as_ref(), 100, 4);
        assert_eq!(found, vec![b("k4"), b("k6")]);
        assert_eq!(next, Some(b("k7")));
        // The rest of the pass, then it wraps to the start and stops before k7 again.
        let (found, next) = ks.expired_keys(10, next.as_ref(), 100, 100);
        assert_eq!(found, vec![b("k8"), b("k0"), b("k2"), b("k4"), b("k6")]);
        assert_eq!(next, None);
        // The result limit stops the sweep early, with a cursor after the last key seen.
        let (found, next) = ks.expired_keys(10, None, 1, 100);
        assert_eq!(found, vec![b("k0")]);
        assert_eq!(next, Some(b("k0")));
        // Nothing has expired yet: a full pass finds nothing.
        assert_eq!(ks.expired_keys(4, None, 100, 100), (vec![], None));
    }

    #[test]
    fn fences_only_rise_and_outlive_values() {
        let mut ks = Keyspace::default();
        ks.set_str(b("r"), b("v"), None, 1, 0);
        ks.raise_fence(&b("r"), 34);
        ks.raise_fence(&b("r"), 33);
        ks.remove(b"r", 0);
        assert_eq!(ks.fence(b"r"), 34);
        let ch = ks.take_changes(Entry::clone);
        assert_eq!(ch.fences, vec![(b("r"), 34)]);
        assert_eq!(ch.entries, vec![(b("r"), None)]);
    }
}
