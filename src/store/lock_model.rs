//! A model-based property test of the lock state machine, through the real apply path
//! (`store::state_machine::apply_batch`): random sequences of LOCK (with WAIT and DELAY),
//! SET NX PX, UNLOCK, RENEW, DEL, PEXPIRE, FLUSHALL, FENCEDSET, MULTI/EXEC, eviction
//! entries, cancels, releases of grants that reached nobody, purges, and snapshot restores,
//! checked against a small reference model of the queues:
//! - every grant has a token no other grant had, and a LOCK reply's token belongs to one
//!   (key, owner) only;
//! - a key's grants have rising tokens, and no token exceeds the revision;
//! - grants to waiters follow the queue order (skipping waits that ran out), a waiter is
//!   granted at most once, and only while queued;
//! - fences never go down;
//! - RLOCK and SEMACQUIRE (with and without WAIT) share the queues: at most one exclusive
//!   holder, never a lock-granted exclusive holder beside a shared one, a semaphore never
//!   above its limit, holders all of one mode, and every queued waiter's mode recorded;
//! - MLOCK (with and without WAIT) is all or none: a reply's tokens are the owner's on every
//!   key right after the entry, a nil reply grants nothing, and a queued MLOCK is granted
//!   all its keys in one entry (in FIFO order on each), never some of them;
//! - nothing waits for ever: once the holders stop, time passes and eviction entries run,
//!   no waiter whose wait is live is left in a queue (no deadlock between MLOCKs);
//! - a replica that restores from its persisted parts at any point stays identical to one
//!   that never did.
//!
//! The model is library code (a violation panics), so that the fuzz target `lock_apply`
//! (fuzz/) drives it with libFuzzer's byte strings ([`Op::decode_all`]) as the property test
//! below drives it with proptest's histories.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;

use crate::cmd::evict::Evict;
use crate::cmd::lock::Acquire;
use crate::cmd::lockwait::{LockCancel, LockPurge, LockReleaseGrant};
use crate::cmd::mlock::MLock;
use crate::cmd::multi::Exec;
use crate::cmd::rlock::Hold;
use crate::cmd::{parse, Command, Request};
use crate::raft_types::Batch;
use crate::resp::Reply;
use crate::state::{Event, Keyspace, LockEventKind, Mode, Value, WaiterId};
use crate::store::state_machine::apply_batch;

const KEYS: [&str; 2] = ["k0", "k1"];
const OWNERS: [&str; 3] = ["a", "b", "c"];

/// One step of a history.
#[derive(Clone, Debug)]
pub enum Op {
    /// LOCK key owner PX ttl [WAIT wait] [DELAY delay]; `wait` needs a waiter (node).
    Lock {
        key: usize,
        owner: usize,
        ttl: u64,
        wait: Option<(u64, u64)>,
        delay: u64,
    },
    /// RLOCK (`limit` None) or SEMACQUIRE LIMIT `limit` key owner PX ttl [WAIT wait].
    Hold {
        key: usize,
        owner: usize,
        ttl: u64,
        wait: Option<(u64, u64)>,
        limit: Option<u32>,
    },
    /// MLOCK owner PX ttl [WAIT wait] KEYS n ...: both keys (`first` first), or `first` alone.
    MLock {
        first: usize,
        both: bool,
        owner: usize,
        ttl: u64,
        wait: Option<(u64, u64)>,
    },
    /// A plain data command line (key and owner indices filled in).
    Line(usize, usize, u8),
    /// Several data command lines in one MULTI/EXEC.
    Multi(Vec<(usize, usize, u8)>),
    /// A script that does several lock calls in one entry.
    Script(usize, usize, u8),
    /// The leader's eviction entry for what is due.
    Evict,
    /// A waiter's node takes it out of the queue (its wait ended there).
    Cancel(usize),
    /// A grant's node found its waiter gone and releases it.
    ReleaseGrant(usize),
    /// A node restarted (new boot id) and purges its old waiters.
    Purge(u64),
    /// The replica restores from its persisted parts (a snapshot install or restart).
    Restore,
    /// Cluster time passes.
    Sleep(u64),
}

fn line(key: usize, owner: usize, kind: u8) -> String {
    let (k, o) = (KEYS[key], OWNERS[owner]);
    match kind % 14 {
        0 => format!("UNLOCK {k} {o}"),
        1 => format!("RENEW {k} {o} PX 300"),
        2 => format!("DEL {k}"),
        3 => format!("PEXPIRE {k} 50"),
        4 => format!("SET {k} {o} NX PX 200"),
        5 => "FLUSHALL".to_string(),
        6 => format!("FENCEDSET r{key} v {}", owner * 7),
        7 => format!("RENAME {k} {}", KEYS[1 - key]),
        8 => format!("COPY {k} {} REPLACE", KEYS[1 - key]),
        10 => format!("RLOCK {k} {o} PX 150"),
        11 => format!("SEMACQUIRE {k} {o} LIMIT 2 PX 150"),
        12 => format!("MLOCK {o} PX 150 KEYS 2 {k} {}", KEYS[1 - key]),
        13 => format!("MUNLOCK {o} KEYS 2 {k} {}", KEYS[1 - key]),
        _ => format!("LOCK {k} {o} PX 150"),
    }
}

impl Op {
    /// Reads one step from the front of `data` (a fuzzer's bytes); None when they run out.
    pub fn decode(data: &mut &[u8]) -> Option<Op> {
        let (&tag, rest) = data.split_first()?;
        let mut take = |n: usize| -> Option<&[u8]> {
            if rest.len() < n {
                return None;
            }
            let (head, tail) = rest.split_at(n);
            *data = tail;
            Some(head)
        };
        let key = |b: u8| b as usize % KEYS.len();
        let owner = |b: u8| b as usize % OWNERS.len();
        let op = match tag % 14 {
            0..=2 => {
                let b = take(5)?;
                Op::Lock {
                    key: key(b[0]),
                    owner: owner(b[1]),
                    ttl: 50 + u64::from(b[2]) * 2,
                    wait: (b[3] % 4 != 0).then(|| (1 + u64::from(b[3] % 2), u64::from(b[4]) * 2)),
                    delay: if b[3] & 0x80 != 0 { u64::from(b[4]) } else { 0 },
                }
            }
            3..=4 => {
                let b = take(3)?;
                Op::Line(key(b[0]), owner(b[1]), b[2])
            }
            5 => {
                let b = take(4)?;
                let n = 1 + b[0] as usize % 3;
                let lines = (0..n)
                    .map(|i| {
                        (
                            key(b[1] >> i),
                            owner(b[2] >> i),
                            b[3].rotate_left(i as u32 * 3),
                        )
                    })
                    .collect();
                Op::Multi(lines)
            }
            6 => {
                let b = take(3)?;
                Op::Script(key(b[0]), owner(b[1]), b[2])
            }
            7 => Op::Evict,
            8 => Op::Cancel(take(1)?[0] as usize),
            9 => Op::ReleaseGrant(take(1)?[0] as usize),
            10 => {
                let b = take(1)?[0];
                if b & 1 == 0 {
                    Op::Restore
                } else {
                    Op::Purge(1 + u64::from(b >> 1) % 2)
                }
            }
            11 => {
                let b = take(5)?;
                Op::Hold {
                    key: key(b[0]),
                    owner: owner(b[1]),
                    ttl: 50 + u64::from(b[2]) * 2,
                    wait: (b[3] % 4 != 0).then(|| (1 + u64::from(b[3] % 2), u64::from(b[4]) * 2)),
                    limit: match b[3] >> 5 {
                        0..=3 => None,
                        4..=6 => Some(2),
                        _ => Some(3),
                    },
                }
            }
            12 => {
                let b = take(4)?;
                Op::MLock {
                    first: key(b[0]),
                    both: b[0] & 0x10 == 0,
                    owner: owner(b[1]),
                    ttl: 50 + u64::from(b[2]) * 2,
                    wait: (b[3] % 4 != 0)
                        .then(|| (1 + u64::from(b[3] % 2), u64::from(b[3] >> 2) * 8)),
                }
            }
            _ => Op::Sleep(1 + u64::from(take(1)?[0])),
        };
        if matches!(op, Op::Evict) {
            *data = rest;
        }
        Some(op)
    }

    /// Every step in `data`.
    pub fn decode_all(mut data: &[u8]) -> Vec<Op> {
        let mut ops = Vec::new();
        while let Some(op) = Op::decode(&mut data) {
            ops.push(op);
        }
        ops
    }
}

fn parsed(text: &str) -> Command {
    let argv = text
        .split(' ')
        .map(|w| Bytes::copy_from_slice(w.as_bytes()))
        .collect();
    match parse(argv) {
        Ok(Request::Data(c)) => c,
        other => panic!("{text}: not a write: {other:?}"),
    }
}

/// The scripts of [`Op::Script`]: several lock calls in one entry, as lock libraries send.
const SCRIPTS: [&str; 4] = [
    "redis.call('DEL', KEYS[1]) return redis.call('UNLOCK', KEYS[1], ARGV[1])",
    "redis.call('UNLOCK', KEYS[1], ARGV[1]) return redis.call('LOCK', KEYS[1], ARGV[1], 'PX', '100')",
    "redis.call('PEXPIRE', KEYS[1], 1) return redis.call('RENEW', KEYS[1], ARGV[1], 'PX', '200')",
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return redis.call('UNLOCK', KEYS[1], ARGV[1]) end",
];

fn script(key: usize, owner: usize, which: u8) -> Command {
    let argv = [
        "EVAL",
        SCRIPTS[which as usize % SCRIPTS.len()],
        "1",
        KEYS[key],
        OWNERS[owner],
    ]
    .iter()
    .map(|w| Bytes::copy_from_slice(w.as_bytes()))
    .collect();
    match parse(argv) {
        Ok(Request::Data(c)) => c,
        other => panic!("EVAL: not a write: {other:?}"),
    }
}

/// A replica rebuilt from what the store persists (as `StateMachine::open` does).
fn restored(ks: &Keyspace) -> Keyspace {
    let mut back = Keyspace::from_parts(
        ks.entries().clone(),
        ks.fences().clone(),
        ks.revision(),
        *ks.clock(),
    );
    back.set_lock_metas(ks.lock_metas().clone());
    back.set_pop_queues(ks.pop_queues().clone());
    back
}

/// The replicated state two replicas must agree on.
#[allow(clippy::type_complexity)]
fn state(
    ks: &Keyspace,
) -> (
    Vec<(Bytes, crate::state::Entry)>,
    Vec<(Bytes, u64)>,
    u64,
    Vec<(Bytes, crate::state::LockMeta)>,
) {
    (
        ks.entries()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        ks.fences().iter().map(|(k, v)| (k.clone(), *v)).collect(),
        ks.revision(),
        ks.lock_metas()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    )
}

/// A queued waiter in the reference model.
#[derive(Clone, Debug)]
struct Queued {
    id: WaiterId,
    owner: Bytes,
    deadline: Option<u64>,
    /// An MLOCK waiter's keys.
    group: Option<Vec<Bytes>>,
}

#[derive(Default)]
struct Checker {
    /// token -> (key, owner) of every grant or LOCK reply seen.
    tokens: HashMap<u64, (Bytes, Bytes)>,
    /// Last grant token per key.
    last: HashMap<Bytes, u64>,
    /// The reference queues.
    queues: HashMap<Bytes, Vec<Queued>>,
    /// Every grant to a waiter: (key, token, owner, waiter).
    grants: Vec<(Bytes, u64, Bytes, WaiterId)>,
    /// Waiters granted so far, by key (an MLOCK waiter is granted each of its keys once).
    granted: std::collections::HashSet<(WaiterId, Bytes)>,
    /// The grants of the last entry that went to no waiter: (key, owner, token).
    immediate: Vec<(Bytes, Bytes, u64)>,
    fences: BTreeMap<Bytes, u64>,
    /// Tokens of exclusive leases granted by lock commands (LOCK, a queued LOCK's grant).
    exclusive: std::collections::HashSet<u64>,
}

impl Checker {
    fn token(&mut self, token: u64, key: &Bytes, owner: &Bytes) {
        let mine = (key.clone(), owner.clone());
        let seen = self.tokens.entry(token).or_insert_with(|| mine.clone());
        assert_eq!(*seen, mine, "token {token} given to two grants");
    }

    /// Checks the events of one entry at cluster time `now`.
    fn events(&mut self, ks: &Keyspace, events: Vec<Event>, now: u64, revision: u64) {
        self.immediate.clear();
        // MLOCK waiters granted in this entry, and the keys each got.
        let mut groups: HashMap<WaiterId, (Vec<Bytes>, Vec<Bytes>)> = HashMap::new();
        for e in events {
            let Event::Lock {
                kind,
                key,
                token,
                owner,
                waiter,
            } = e
            else {
                continue;
            };
            match (kind, waiter) {
                (LockEventKind::Granted, _) => {}
                // An MLOCK waiter's key that its owner already held: served, not granted.
                (LockEventKind::Renewed, Some(id)) => {
                    let head = self.serve(&key, id, &owner, now);
                    let group = head.group.expect("a renewal served a waiter of one key");
                    groups.entry(id).or_insert((group, Vec::new())).1.push(key);
                    continue;
                }
                _ => continue,
            }
            assert!(token <= revision, "token {token} above revision {revision}");
            if ks_holds_exclusive(ks, &key, token) {
                self.exclusive.insert(token);
            }
            self.token(token, &key, &owner);
            let last = self.last.insert(key.clone(), token);
            assert!(
                last.is_none_or(|l| l < token),
                "grant tokens of {key:?} went from {last:?} to {token}"
            );
            let Some(id) = waiter else {
                self.immediate.push((key, owner, token));
                continue;
            };
            let head = self.serve(&key, id, &owner, now);
            if let Some(group) = head.group {
                groups
                    .entry(id)
                    .or_insert((group, Vec::new()))
                    .1
                    .push(key.clone());
            }
            self.grants.push((key, token, owner, id));
        }
        for (id, (mut want, mut got)) in groups {
            want.sort();
            got.sort();
            assert_eq!(
                got, want,
                "MLOCK waiter {id:?} granted some of its keys only"
            );
        }
    }

    /// Serves waiter `id` on `key` in the model: it must be the first waiter whose wait has
    /// not run out (those before it are skipped), and be served there once.
    fn serve(&mut self, key: &Bytes, id: WaiterId, owner: &Bytes, now: u64) -> Queued {
        assert!(
            self.granted.insert((id, key.clone())),
            "waiter {id:?} granted {key:?} twice"
        );
        let q = self.queues.entry(key.clone()).or_default();
        // Waits that ran out are skipped; the grant goes to the first live waiter.
        while q
            .first()
            .is_some_and(|w| w.deadline.is_some_and(|d| d <= now))
        {
            q.remove(0);
        }
        assert!(
            !q.is_empty(),
            "grant to {id:?} on {key:?}, whose queue is empty"
        );
        let head = q.remove(0);
        assert_eq!(head.id, id, "grant out of FIFO order on {key:?}");
        assert_eq!(&head.owner, owner);
        head
    }

    /// Takes waiter `id` out of every model queue.
    fn drop_waiter(&mut self, id: WaiterId) {
        for q in self.queues.values_mut() {
            q.retain(|w| w.id != id);
        }
    }

    /// Takes `owner`'s waiters out of the model queues of `keys` (an MLOCK waiter out of all
    /// its queues), as an MLOCK does before it queues or is granted.
    fn drop_owner_waiters(&mut self, keys: &[Bytes], owner: &Bytes) {
        let ids: Vec<WaiterId> = keys
            .iter()
            .flat_map(|k| self.queues.get(k).into_iter().flatten())
            .filter(|w| w.owner == owner)
            .map(|w| w.id)
            .collect();
        for id in ids {
            self.drop_waiter(id);
        }
    }

    /// A LOCK, RLOCK or SEMACQUIRE queued as `w` on `key`: a retry by a queued owner keeps
    /// its place, unless that waiter is an MLOCK's, which leaves all its queues.
    fn enqueue(&mut self, key: Bytes, w: Queued) {
        let old = self
            .queues
            .get(&key)
            .and_then(|q| q.iter().find(|x| x.owner == w.owner))
            .map(|x| (x.id, x.group.is_some()));
        if let Some((old, true)) = old {
            self.drop_waiter(old);
        }
        let q = self.queues.entry(key).or_default();
        match q.iter_mut().find(|x| x.owner == w.owner) {
            Some(x) => *x = w,
            None => q.push(w),
        }
    }

    /// An MLOCK queued as `w` on `keys`: a retry for the same keys keeps its place;
    /// otherwise the owner's waiters on these keys leave and it joins every queue's end.
    fn enqueue_group(&mut self, keys: &[Bytes], w: Queued) {
        let same = self
            .queues
            .get(&keys[0])
            .and_then(|q| q.iter().find(|x| x.owner == w.owner))
            .filter(|x| x.group.as_deref() == Some(keys))
            .map(|x| x.id)
            .filter(|&old| {
                keys.iter().all(|k| {
                    self.queues
                        .get(k)
                        .is_some_and(|q| q.iter().any(|x| x.id == old))
                })
            });
        if let Some(old) = same {
            for q in self.queues.values_mut() {
                for x in q.iter_mut().filter(|x| x.id == old) {
                    *x = w.clone();
                }
            }
            return;
        }
        self.drop_owner_waiters(keys, &w.owner);
        for k in keys {
            self.queues.entry(k.clone()).or_default().push(w.clone());
        }
    }

    fn fences(&mut self, ks: &Keyspace) {
        for (k, f) in ks.fences() {
            let old = self.fences.insert(k.clone(), *f).unwrap_or(0);
            assert!(*f >= old, "fence of {k:?} went down from {old} to {f}");
        }
        for (k, f) in &self.fences {
            assert!(ks.fence(k) >= *f, "fence of {k:?} lost");
        }
    }

    /// The holds at `now`: at most one exclusive holder (the string value); never an
    /// exclusive lease granted by a lock command beside shared or semaphore holders; holders
    /// of one mode, a semaphore within its limit, each holder once with its own token; and
    /// the mode of every queued waiter that is not exclusive recorded, of no other.
    fn holds(&mut self, ks: &Keyspace, now: u64) {
        for key in KEYS {
            let Some((mode, hs)) = ks.lock_holders(key.as_bytes(), now) else {
                continue;
            };
            let writer = ks.get(key.as_bytes(), now);
            assert!(
                !writer.is_some_and(
                    |e| self.exclusive.contains(&e.token) && matches!(e.value, Value::Str(_))
                ),
                "{key}: an exclusive lock beside {mode:?} holders"
            );
            match mode {
                Mode::Shared => {}
                Mode::Semaphore(n) => assert!(hs.len() <= n as usize, "{key}: over its limit"),
                Mode::Exclusive => panic!("{key}: exclusive holders in the shared list"),
            }
            let mut owners: Vec<&Bytes> = hs.iter().map(|h| &h.owner).collect();
            owners.sort();
            owners.dedup();
            assert_eq!(owners.len(), hs.len(), "{key}: an owner holds twice");
            for h in &hs {
                let mine = (Bytes::from_static(key.as_bytes()), h.owner.clone());
                assert_eq!(
                    self.tokens.get(&h.token),
                    Some(&mine),
                    "{key}: holder token"
                );
            }
        }
        for (key, m) in ks.lock_metas() {
            for (id, _) in &m.kinds.modes {
                assert!(
                    m.queue.iter().any(|w| w.id == *id),
                    "{key:?}: a mode for a waiter not queued"
                );
            }
            for (id, keys) in &m.groups {
                assert!(
                    m.queue.iter().any(|w| w.id == *id) && keys.contains(key),
                    "{key:?}: MLOCK keys {keys:?} for a waiter not queued here"
                );
            }
            if m.kinds.holders.is_empty() {
                assert_eq!(m.kinds.mode, None, "{key:?}: a mode without holders");
            }
        }
    }

    /// The model queue follows the real one where the model cannot predict on its own
    /// (skips of waits that ran out happen lazily); it must hold the same waiters in the
    /// same order, apart from those skipped.
    fn compare_queues(&mut self, ks: &Keyspace, now: u64) {
        for key in KEYS {
            let key = Bytes::from_static(key.as_bytes());
            let real: Vec<WaiterId> = ks
                .lock_meta(&key)
                .map(|m| m.queue.iter().map(|w| w.id).collect())
                .unwrap_or_default();
            let model = self.queues.entry(key.clone()).or_default();
            // Drop from the model the waiters the real queue skipped (wait ran out).
            model.retain(|w| real.contains(&w.id) || w.deadline.is_none_or(|d| d > now));
            let ids: Vec<WaiterId> = model.iter().map(|w| w.id).collect();
            assert_eq!(ids, real, "queue of {key:?} differs from the model");
        }
    }
}

/// True if the grant `token` of `key` was exclusive: no shared or semaphore holder has it.
fn ks_holds_exclusive(ks: &Keyspace, key: &[u8], token: u64) -> bool {
    !ks.lock_meta(key)
        .is_some_and(|m| m.kinds.holders.iter().any(|h| h.token == token))
}

/// Two replicas, the cluster clock, and the checker.
pub struct World {
    ks: Keyspace,
    twin: Keyspace,
    now: u64,
    next_seq: u64,
    boot: [u64; 3],
    check: Checker,
}

impl Default for World {
    fn default() -> World {
        World {
            ks: Keyspace::default(),
            twin: Keyspace::default(),
            now: 1_000,
            next_seq: 0,
            boot: [0, 1, 1],
            check: Checker::default(),
        }
    }
}

impl World {
    /// Runs a whole history, checking every invariant after every step (a violation panics).
    pub fn run(ops: impl IntoIterator<Item = Op>) {
        let mut w = World::default();
        for op in ops {
            w.step(op);
        }
        w.drain();
    }

    /// The cluster time an entry applied now would get (the model's clock runs ahead of it
    /// by the offset the first entry set).
    fn cluster_now(&self) -> u64 {
        (self.now as i64 + self.ks.clock().offset).max(0) as u64
    }

    /// Liveness: with no new requests, leases run out and the leader's eviction entries
    /// serve the queues; every waiter whose wait is live must be granted in turn, none left
    /// waiting for ever (two MLOCKs never wait on each other).
    fn drain(&mut self) {
        for _ in 0..400 {
            let live = |w: &World| {
                w.ks.lock_metas().values().any(|m| {
                    m.queue
                        .iter()
                        .any(|q| q.deadline.is_none_or(|d| d > w.cluster_now()))
                })
            };
            if !live(self) {
                return;
            }
            self.step(Op::Sleep(1_000));
            self.step(Op::Evict);
        }
        panic!(
            "waiters left after the holders stopped: {:?}",
            self.ks.lock_metas()
        );
    }

    fn apply(&mut self, cmd: Command) -> Reply {
        let batch = Batch {
            ts: self.now,
            boot: 1,
            cmds: vec![cmd],
        };
        let reply = apply_batch(&mut self.ks, 1, &batch).0.remove(0);
        apply_batch(&mut self.twin, 1, &batch);
        let events = self.ks.take_events();
        self.twin.take_events();
        self.check
            .events(&self.ks, events, self.now, self.ks.revision());
        self.check.holds(&self.ks, self.now);
        self.check.fences(&self.ks);
        assert_eq!(state(&self.ks), state(&self.twin), "replicas diverged");
        reply
    }

    /// Applies a LOCK, RLOCK or SEMACQUIRE and follows its reply in the model.
    fn acquired(
        &mut self,
        cmd: Command,
        k: Bytes,
        o: Bytes,
        waiter: Option<WaiterId>,
        wait_ms: Option<u64>,
    ) {
        let now = self.now;
        match self.apply(cmd) {
            Reply::Int(t) => self.check.token(t as u64, &k, &o),
            Reply::Nil => {}
            Reply::Simple(s) if s == crate::cmd::lock::QUEUED => {
                let id = waiter.expect("queued without a waiter");
                let w = Queued {
                    id,
                    owner: o.clone(),
                    deadline: wait_ms.filter(|&m| m > 0).map(|m| now + m),
                    group: None,
                };
                self.check.enqueue(k, w);
            }
            Reply::Error(e)
                if e == crate::state::LIMIT_MISMATCH || e == crate::state::KIND_MISMATCH => {}
            other => panic!("LOCK replied {other:?}"),
        }
    }

    /// Checks an MLOCK's reply that did not queue: all or none.
    fn mlocked(&mut self, keys: &[Bytes], owner: &Bytes, reply: &Reply) {
        match reply {
            Reply::Array(ts) => {
                assert_eq!(ts.len(), keys.len(), "MLOCK replied {reply:?}");
                for (k, t) in keys.iter().zip(ts) {
                    let Reply::Int(t) = t else {
                        panic!("MLOCK replied {reply:?}")
                    };
                    let t = *t as u64;
                    self.check.token(t, k, owner);
                    match self.ks.get(k, self.cluster_now()) {
                        Some(e) if e.token == t && e.value == Value::Str(owner.clone()) => {}
                        other => panic!("MLOCK's {k:?} token {t} is not held: {other:?}"),
                    }
                }
            }
            Reply::Nil => assert!(
                !self
                    .check
                    .immediate
                    .iter()
                    .any(|(k, o, _)| o == owner && keys.contains(k)),
                "a nil MLOCK granted a key: {:?}",
                self.check.immediate
            ),
            other => panic!("MLOCK replied {other:?}"),
        }
    }

    /// A new waiter on the node `wait` names (none without a wait).
    fn waiter(&mut self, wait: Option<(u64, u64)>) -> Option<WaiterId> {
        let (node, _) = wait?;
        self.next_seq += 1;
        Some(WaiterId {
            node,
            boot: self.boot[node as usize],
            seq: self.next_seq,
        })
    }

    fn step(&mut self, op: Op) {
        self.act(op);
        self.check.compare_queues(&self.ks, self.now);
    }

    fn act(&mut self, op: Op) {
        match op {
            Op::Lock {
                key,
                owner,
                ttl,
                wait,
                delay,
            } => {
                let (k, o) = (
                    Bytes::from_static(KEYS[key].as_bytes()),
                    Bytes::from_static(OWNERS[owner].as_bytes()),
                );
                let waiter = self.waiter(wait);
                let wait_ms = wait.map(|(_, ms)| ms);
                let cmd = Command::Acquire(Acquire {
                    key: k.clone(),
                    owner: o.clone(),
                    ttl_ms: ttl,
                    wait_ms,
                    delay_ms: Some(delay),
                    waiter,
                });
                self.acquired(cmd, k, o, waiter, wait_ms);
            }
            Op::Hold {
                key,
                owner,
                ttl,
                wait,
                limit,
            } => {
                let (k, o) = (
                    Bytes::from_static(KEYS[key].as_bytes()),
                    Bytes::from_static(OWNERS[owner].as_bytes()),
                );
                let waiter = self.waiter(wait);
                let wait_ms = wait.map(|(_, ms)| ms);
                let cmd = Command::Hold(Hold {
                    key: k.clone(),
                    owner: o.clone(),
                    mode: limit.map_or(Mode::Shared, Mode::Semaphore),
                    ttl_ms: ttl,
                    wait_ms,
                    waiter,
                });
                self.acquired(cmd, k, o, waiter, wait_ms);
            }
            Op::MLock {
                first,
                both,
                owner,
                ttl,
                wait,
            } => {
                let keys: Vec<Bytes> = if both {
                    vec![KEYS[first], KEYS[1 - first]]
                } else {
                    vec![KEYS[first]]
                }
                .into_iter()
                .map(|k| Bytes::from_static(k.as_bytes()))
                .collect();
                let o = Bytes::from_static(OWNERS[owner].as_bytes());
                let waiter = self.waiter(wait);
                let wait_ms = wait.map(|(_, ms)| ms);
                let cmd = Command::MLock(MLock {
                    owner: o.clone(),
                    keys: keys.clone(),
                    ttl_ms: ttl,
                    wait_ms,
                    waiter,
                });
                let now = self.now;
                match self.apply(cmd) {
                    Reply::Simple(s) if s == crate::cmd::lock::QUEUED => {
                        let w = Queued {
                            id: waiter.expect("queued without a waiter"),
                            owner: o,
                            deadline: wait_ms.filter(|&m| m > 0).map(|m| now + m),
                            group: Some(keys.clone()),
                        };
                        self.check.enqueue_group(&keys, w);
                    }
                    reply => self.mlocked(&keys, &o, &reply),
                }
            }
            Op::Line(k, o, kind) => {
                let text = line(k, o, kind);
                let reply = self.apply(parsed(&text));
                if text.starts_with("MLOCK") {
                    let keys = [KEYS[k], KEYS[1 - k]].map(|k| Bytes::from_static(k.as_bytes()));
                    self.mlocked(&keys, &Bytes::from_static(OWNERS[o].as_bytes()), &reply);
                }
                if let (Reply::Int(t), true) = (
                    &reply,
                    text.starts_with("LOCK")
                        || text.starts_with("RENEW")
                        || text.starts_with("RLOCK")
                        || text.starts_with("SEMACQUIRE"),
                ) {
                    let (k, o) = (
                        Bytes::from_static(KEYS[k].as_bytes()),
                        Bytes::from_static(OWNERS[o].as_bytes()),
                    );
                    self.check.token(*t as u64, &k, &o);
                }
            }
            Op::Multi(lines) => {
                let cmds = lines
                    .iter()
                    .map(|&(k, o, x)| parsed(&line(k, o, x)))
                    .collect();
                self.apply(Command::Exec(Exec {
                    watched: Vec::new(),
                    cmds,
                }));
            }
            Op::Script(k, o, which) => {
                let reply = self.apply(script(k, o, which));
                if let (Reply::Int(t), 1 | 2) = (&reply, which % 4) {
                    let (k, o) = (
                        Bytes::from_static(KEYS[k].as_bytes()),
                        Bytes::from_static(OWNERS[o].as_bytes()),
                    );
                    self.check.token(*t as u64, &k, &o);
                }
            }
            Op::Evict => {
                let now = self.now;
                let mut keys = self.ks.locks_due(now, 100);
                for k in KEYS {
                    let k = Bytes::from_static(k.as_bytes());
                    if self.ks.entries().get(&k).is_some_and(|e| !e.live(now)) && !keys.contains(&k)
                    {
                        keys.push(k);
                    }
                }
                if !keys.is_empty() {
                    self.apply(Command::Evict(Evict { keys }));
                }
            }
            Op::Cancel(i) => {
                let all: Vec<(Bytes, WaiterId)> = self
                    .check
                    .queues
                    .iter()
                    .flat_map(|(k, q)| q.iter().map(|w| (k.clone(), w.id)))
                    .collect();
                if all.is_empty() {
                    return;
                }
                let (key, waiter) = all[i % all.len()].clone();
                // Out of the model first: leaving the queue may grant the waiters behind it
                // in the same entry. An MLOCK waiter leaves all its queues.
                self.check.drop_waiter(waiter);
                self.apply(Command::LockCancel(LockCancel { key, waiter }));
            }
            Op::ReleaseGrant(i) => {
                if self.check.grants.is_empty() {
                    return;
                }
                let (key, token, owner, waiter) =
                    self.check.grants[i % self.check.grants.len()].clone();
                self.apply(Command::LockReleaseGrant(LockReleaseGrant {
                    key,
                    token,
                    owner,
                    waiter,
                }));
            }
            Op::Purge(node) => {
                self.boot[node as usize] += 1;
                let boot = self.boot[node as usize];
                self.apply(Command::LockPurge(LockPurge { node, boot }));
                for q in self.check.queues.values_mut() {
                    q.retain(|w| !(w.id.node == node && w.id.boot != boot));
                }
            }
            Op::Restore => self.ks = restored(&self.ks),
            Op::Sleep(ms) => self.now += ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Value;
    use proptest::prelude::*;

    fn op() -> impl Strategy<Value = Op> {
        let k = 0..KEYS.len();
        let o = 0..OWNERS.len();
        let wait = proptest::option::weighted(
            0.7,
            (1u64..3, prop_oneof![1 => Just(0u64), 3 => 1u64..300]),
        );
        let delay = prop_oneof![3 => Just(0u64), 1 => 1u64..200];
        prop_oneof![
            6 => (k.clone(), o.clone(), 50u64..400, wait.clone(), delay)
                .prop_map(|(key, owner, ttl, wait, delay)| Op::Lock { key, owner, ttl, wait, delay }),
            // UNLOCK, often by an owner that is queued rather than holding.
            4 => (k.clone(), o.clone(), 50u64..400, wait.clone(), prop_oneof![3 => Just(None), 2 => Just(Some(2u32)), 1 => Just(Some(3u32))])
                .prop_map(|(key, owner, ttl, wait, limit)| Op::Hold { key, owner, ttl, wait, limit }),
            3 => (k.clone(), any::<bool>(), o.clone(), 50u64..400, wait.clone())
                .prop_map(|(first, both, owner, ttl, wait)| Op::MLock { first, both, owner, ttl, wait }),
            4 => (k.clone(), o.clone()).prop_map(|(k, o)| Op::Line(k, o, 0)),
            4 => (k.clone(), o.clone(), any::<u8>()).prop_map(|(k, o, x)| Op::Line(k, o, x)),
            2 => proptest::collection::vec((k.clone(), o.clone(), any::<u8>()), 1..4).prop_map(Op::Multi),
            2 => (k, o, any::<u8>()).prop_map(|(k, o, x)| Op::Script(k, o, x)),
            2 => Just(Op::Evict),
            1 => (0usize..64).prop_map(Op::Cancel),
            1 => (0usize..64).prop_map(Op::ReleaseGrant),
            1 => (1u64..3).prop_map(Op::Purge),
            1 => Just(Op::Restore),
            3 => (1u64..200).prop_map(Op::Sleep),
        ]
    }

    /// Cases per run: `PALISADE_MODEL_CASES` (scripts/model.sh runs many more), else 400.
    fn cases() -> u32 {
        std::env::var("PALISADE_MODEL_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(400)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

        #[test]
        fn lock_histories_keep_every_invariant(ops in proptest::collection::vec(op(), 1..120)) {
            World::run(ops);
        }
    }

    /// SEMACQUIRE k0 (owner index) LIMIT `limit` PX 60000 (RLOCK without a limit).
    fn hold(owner: usize, limit: Option<u32>, wait: Option<(u64, u64)>) -> Op {
        Op::Hold {
            key: 0,
            owner,
            ttl: 60_000,
            wait,
            limit,
        }
    }

    /// Three owners ask for a semaphore of two permits and a reader waits behind a writer:
    /// the checks see every hold and grant.
    #[test]
    fn a_semaphore_and_readers_keep_their_invariants() {
        let mut w = World::default();
        w.step(hold(0, Some(2), None));
        w.step(hold(1, Some(2), None));
        w.step(hold(2, Some(2), Some((1, 0))));
        let (_, hs) = w.ks.lock_holders(b"k0", w.now).expect("held");
        assert_eq!(hs.len(), 2);
        w.step(Op::Line(0, 0, 0)); // UNLOCK k0 a: c takes its permit
        assert_eq!(w.check.grants.len(), 1);
        w.step(Op::Line(0, 1, 0));
        w.step(Op::Line(0, 2, 0));
        assert!(w.ks.lock_meta(b"k0").is_none());
        // Readers, then a writer waits, then a reader queues behind it.
        w.step(hold(0, None, None));
        w.step(lock(1, Some((1, 0))));
        w.step(hold(2, None, Some((2, 0))));
        w.step(Op::Line(0, 0, 0)); // the reader leaves: the writer gets it
        assert_eq!(
            w.ks.lock_holder_token(b"k0", b"b", w.now),
            w.check.grants.last().map(|g| g.1)
        );
        w.step(Op::Line(0, 1, 0)); // the writer leaves: the reader gets it
        assert!(w.ks.lock_holders(b"k0", w.now).is_some());
        assert_eq!(w.check.grants.len(), 3);
    }

    /// LOCK k0 (owner index) PX 60000, waiting as (node, ms) if given.
    fn lock(owner: usize, wait: Option<(u64, u64)>) -> Op {
        Op::Lock {
            key: 0,
            owner,
            ttl: 60_000,
            wait,
            delay: 0,
        }
    }

    /// The history the issue reported: b and c queue behind a lease that DEL removed, then
    /// `MULTI / DEL k / UNLOCK k b / EXEC`. UNLOCK settled the queue (granting b), released b's
    /// grant, and settled again, and c got b's token.
    #[test]
    fn an_unlock_that_settles_twice_gives_two_tokens() {
        let mut w = World::default();
        w.step(lock(0, None));
        w.step(lock(1, Some((1, 10_000))));
        w.step(lock(2, Some((2, 10_000))));
        // DEL k (kind 2), UNLOCK k b (kind 0, owner 1).
        w.step(Op::Multi(vec![(0, 0, 2), (0, 1, 0)]));
        let tokens: Vec<u64> = w.check.grants.iter().map(|g| g.1).collect();
        assert_eq!(tokens.len(), 2, "b and c were both granted");
        assert_ne!(tokens[0], tokens[1], "b and c got the same token");
        match w.ks.get(b"k0", w.now).map(|e| (&e.value, e.token)) {
            Some((Value::Str(o), t)) => {
                assert_eq!(o, &Bytes::from_static(b"c"));
                assert_eq!(t, tokens[1]);
            }
            other => panic!("c should hold k0: {other:?}"),
        }
    }

    /// A grant reaches nobody, but the owner's retry has since been told it holds the lock
    /// (LOCK again, same owner): the release of the lost grant must keep the lease.
    #[test]
    fn a_lost_grants_release_keeps_a_lease_a_retry_was_told_it_holds() {
        let mut w = World::default();
        w.step(lock(0, None));
        w.step(lock(1, Some((1, 0))));
        w.step(Op::Line(0, 0, 0)); // UNLOCK k0 a: b is granted (its client has gone)
        let (key, token, owner, waiter) = w.check.grants[0].clone();
        w.step(Op::Sleep(10));
        // b's retry: told it holds the lock, same token.
        w.step(lock(1, None));
        // The entry older nodes write (tag 38) matched the token alone, and released it.
        let mut old = w.ks.clone();
        let revision = old.bump_revision();
        let released = crate::cmd::lockwait::LockReleaseToken {
            key: key.clone(),
            token,
        };
        let ctx = crate::cmd::Ctx {
            now: w.now,
            revision,
        };
        assert_eq!(
            crate::cmd::registry::Replicated::apply(&released, &mut old, ctx),
            Reply::Int(1)
        );
        let reply = w.apply(Command::LockReleaseGrant(LockReleaseGrant {
            key: key.clone(),
            token,
            owner: owner.clone(),
            waiter,
        }));
        assert_eq!(reply, Reply::Int(0), "the retried lease was released");
        assert_eq!(w.ks.get(&key, w.now).map(|e| e.token), Some(token));
        // Without a retry, the lost grant is released.
        w.step(lock(2, Some((1, 0))));
        w.step(Op::Line(0, 1, 0)); // UNLOCK k0 b: c is granted
        let (key, token, owner, waiter) = w.check.grants[1].clone();
        let reply = w.apply(Command::LockReleaseGrant(LockReleaseGrant {
            key: key.clone(),
            token,
            owner,
            waiter,
        }));
        assert_eq!(reply, Reply::Int(1));
        assert!(w.ks.get(&key, w.now).is_none());
    }
}
