//! Replicas agree (design.md section 9): the same log gives byte-identical state on every
//! node, with or without a snapshot install or a restart in between, as `Keyspace::digest`
//! (what `RAFT.DIGEST` shows) sees it.
//!
//! Each seed makes a random log: client commands as the sessions propose them (SET, DEL,
//! EXPIRE, LOCK with and without WAIT and DELAY, UNLOCK, RENEW, FENCEDSET, FENCEDGET,
//! MULTI/EXEC blocks such as the `DEL k` + `UNLOCK k b` of a queued lock, EVAL of lock-library
//! scripts, pushes, pops and blocked pops, sets, sorted sets, ACL SETUSER, SCRIPT BUDGET), the
//! entries nodes propose on their own (evictions, ticks, a waiter leaving the queue, a grant
//! released because its client had gone, a restarted node's purge), blank entries and leader
//! changes with new clocks. The log goes to four replicas:
//! - `a`: a RocksDB state machine that applies all of it, in runs of random length;
//! - `b`: one that applies a prefix, then serves its snapshot image;
//! - `c`: a fresh one that installs `b`'s snapshot, applies the rest, and is closed and
//!   reopened from its database at a second random point (a restart);
//! - `pure`: a bare keyspace fed through `apply_batch` (no store at all).
//!
//! All four digests must be equal at the end, and `a`'s must equal `b`'s and `c`'s at the
//! snapshot and restart points.

use std::collections::BTreeMap;

use bytes::Bytes;
use openraft::storage::RaftStateMachine;
use openraft::EntryPayload;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use palisade::cmd::lockwait::{LockCancel, LockPurge, LockReleaseToken};
use palisade::cmd::multi::Exec;
use palisade::cmd::popwait::{PopCancel, PopWait};
use palisade::cmd::{Command, Request};
use palisade::raft_types::{log_id, Batch, Entry};
use palisade::state::digest::StateDigest;
use palisade::state::{Keyspace, WaiterId};
use palisade::store::StateMachine;

const SEEDS: u64 = 16;
const ENTRIES: u64 = 300;

const LOCKS: [&str; 3] = ["lk:0", "lk:1", "lk:2"];
const OWNERS: [&str; 4] = ["a", "b", "c", "d"];
const STRINGS: [&str; 3] = ["s:0", "s:1", "lk:0"];
const LISTS: [&str; 2] = ["q:0", "q:1"];

/// Scripts of the shapes real lock libraries send (see tests/it/lock_scripts.rs), plus one
/// that fails half-way (its first write stays, as in Redis) and a runaway loop that the
/// instruction budget stops at the same instruction on every replica.
const SCRIPTS: [&str; 6] = [
    "return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])",
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end",
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end",
    "return redis.call('LOCK', KEYS[1], ARGV[1], 'PX', ARGV[2])",
    "redis.call('SET', KEYS[1], ARGV[1]) return redis.call('INCR', KEYS[1])",
    "local i = 0 while true do i = i + 1 end",
];

fn parse(words: &[&str]) -> Command {
    let argv = words.iter().map(|w| Bytes::copy_from_slice(w.as_bytes()));
    match palisade::cmd::parse(argv.collect()) {
        Ok(Request::Data(c)) => c,
        other => panic!("{words:?} is not a write: {other:?}"),
    }
}

/// The random log's writer: picks commands, and knows the waiters it has queued.
struct Gen {
    rng: StdRng,
    /// The boot id of each node's current process.
    boots: [u64; 3],
    seq: u64,
    lock_waiters: Vec<(Bytes, WaiterId)>,
    pop_waiters: Vec<(Vec<Bytes>, WaiterId)>,
}

impl Gen {
    fn pick<'a>(&mut self, of: &[&'a str]) -> &'a str {
        of[self.rng.gen_range(0..of.len())]
    }

    fn waiter(&mut self) -> WaiterId {
        let node = self.rng.gen_range(0..3);
        self.seq += 1;
        WaiterId {
            node: node as u64 + 1,
            boot: self.boots[node],
            seq: self.seq,
        }
    }

    fn ttl(&mut self) -> String {
        self.rng.gen_range(50..2_000u64).to_string()
    }

    /// One command; `current` is the state before this entry.
    fn command(&mut self, current: &Keyspace) -> Command {
        let key = self.pick(&LOCKS);
        let owner = self.pick(&OWNERS);
        match self.rng.gen_range(0..100) {
            0..=11 => {
                let ttl = self.ttl();
                parse(&["LOCK", key, owner, "PX", &ttl])
            }
            12..=25 => {
                let (ttl, wait) = (self.ttl(), self.rng.gen_range(0..3_000u64).to_string());
                let delay = self.rng.gen_range(1..300u64).to_string();
                let mut words = vec!["LOCK", key, owner, "PX", &ttl, "WAIT", &wait];
                if self.rng.gen_bool(0.2) {
                    words.extend(["DELAY", &delay]);
                }
                let Command::Acquire(mut a) = parse(&words) else {
                    panic!("LOCK ... WAIT is an Acquire")
                };
                let id = self.waiter();
                a.waiter = Some(id);
                self.lock_waiters.push((a.key.clone(), id));
                Command::Acquire(a)
            }
            26..=33 => parse(&["UNLOCK", key, owner]),
            34..=37 => {
                let ttl = self.ttl();
                parse(&["RENEW", key, owner, "PX", &ttl])
            }
            38..=41 => {
                let k = self.pick(&["lk:0", "lk:1", "s:0", "q:0", "r:0"]);
                parse(&["DEL", k])
            }
            42..=45 => {
                // The shape of the queued-waiter bug: DEL and UNLOCK in one transaction.
                let cmds = vec![parse(&["DEL", key]), parse(&["UNLOCK", key, owner])];
                let watched = Vec::new();
                Command::Exec(Exec { watched, cmds })
            }
            46..=49 => {
                let n = self.rng.gen_range(1..4);
                let cmds = (0..n).map(|_| self.simple()).collect();
                Command::Exec(Exec {
                    watched: Vec::new(),
                    cmds,
                })
            }
            50..=55 => {
                let i = self.rng.gen_range(0..SCRIPTS.len() - 1);
                // The runaway loop rarely: it costs a whole budget.
                let i = if self.rng.gen_bool(0.05) { 5 } else { i };
                let ttl = self.ttl();
                parse(&["EVAL", SCRIPTS[i], "1", key, owner, &ttl])
            }
            56..=59 => {
                let q = self.pick(&LISTS);
                let Command::BPop(p) = parse(&["BLPOP", q, "0.5"]) else {
                    panic!("BLPOP")
                };
                let id = self.waiter();
                self.pop_waiters.push((p.keys.clone(), id));
                Command::PopWait(PopWait {
                    waiter: id,
                    cmd: Box::new(Command::BPop(p)),
                })
            }
            60..=62 if !self.pop_waiters.is_empty() => {
                let i = self.rng.gen_range(0..self.pop_waiters.len());
                let (keys, waiter) = self.pop_waiters.swap_remove(i);
                Command::PopCancel(PopCancel { keys, waiter })
            }
            63..=66 if !self.lock_waiters.is_empty() => {
                let i = self.rng.gen_range(0..self.lock_waiters.len());
                let (key, waiter) = self.lock_waiters.swap_remove(i);
                Command::LockCancel(LockCancel { key, waiter })
            }
            67..=69 => {
                // A grant that reached no client: its node releases that token.
                let k = Bytes::from(key);
                let token = current.get(&k, current.clock().now).map_or(1, |e| e.token);
                Command::LockReleaseToken(LockReleaseToken { key: k, token })
            }
            70 => {
                // A node restarts: its old waiters are purged.
                let node = self.rng.gen_range(0..3);
                self.boots[node] = self.rng.gen();
                Command::LockPurge(LockPurge {
                    node: node as u64 + 1,
                    boot: self.boots[node],
                })
            }
            71..=74 => {
                let keys = ["lk:0", "lk:1", "lk:2", "s:0", "s:1", "q:0", "r:0", "h"];
                Command::Evict(palisade::cmd::evict::Evict {
                    keys: keys.iter().map(|k| Bytes::from(*k)).collect(),
                })
            }
            75 => Command::Tick(palisade::cmd::evict::Tick),
            76 => {
                let rules = ["on", ">pw", "~lk:*", "+@all"].map(Bytes::from);
                let name = self.pick(&["alice", "bob"]).to_string();
                let rules = rules[..self.rng.gen_range(1..=4)].to_vec();
                Command::AclSetUser(palisade::cmd::acl::AclSetUser { name, rules })
            }
            77 => {
                let n = self.rng.gen_range(1_000..100_000u64).to_string();
                parse(&["SCRIPT", "BUDGET", &n])
            }
            _ => self.simple(),
        }
    }

    /// A data command (also what transactions are made of).
    fn simple(&mut self) -> Command {
        let s = self.pick(&STRINGS);
        let q = self.pick(&LISTS);
        let v = self.rng.gen_range(0..5u32).to_string();
        let ttl = self.ttl();
        let token = self.rng.gen_range(0..400u64).to_string();
        match self.rng.gen_range(0..16) {
            0 => parse(&["SET", s, &v]),
            1 => parse(&["SET", s, &v, "PX", &ttl, "NX"]),
            2 => parse(&["PEXPIRE", s, &ttl]),
            3 => parse(&["INCR", "s:1"]),
            4 => parse(&["FENCEDSET", "r:0", &v, &token]),
            5 => parse(&["FENCEDGET", "r:0", &token]),
            6 => parse(&["RPUSH", q, &v]),
            7 => parse(&["LPUSH", q, &v, "x"]),
            8 => parse(&["LPOP", q]),
            9 => parse(&["HSET", "h", &v, &ttl]),
            10 => parse(&["HDEL", "h", &v]),
            11 => parse(&["SADD", "st", &v, &ttl]),
            12 => parse(&["SPOP", "st"]),
            13 => parse(&["ZADD", "z", &ttl, &v]),
            14 => parse(&["ZPOPMIN", "z"]),
            _ => parse(&["EXPIRE", s, "1"]),
        }
    }
}

/// A replica's keyspace (a clone, so that no lock is held).
fn keyspace(sm: &StateMachine) -> Keyspace {
    sm.shared().read().expect("state lock").ks.clone()
}

fn digest(sm: &StateMachine) -> StateDigest {
    sm.shared().read().expect("state lock").ks.digest()
}

async fn apply(sm: &mut StateMachine, entries: &[Entry]) {
    let items = entries.iter().cloned().map(|e| Ok((e, None)));
    sm.apply(futures::stream::iter(items)).await.expect("apply");
}

/// The state machine of the database in `dir` (no log store: nothing else holds the
/// database, so dropping the state machine closes it).
fn open(dir: &std::path::Path) -> StateMachine {
    let db = palisade::store::schema::open_db(dir).expect("open database");
    StateMachine::open(std::sync::Arc::new(db)).expect("open state machine")
}

/// What one seed's run saw at the snapshot point (to show the test reaches the queues).
#[derive(Default)]
struct Seen {
    lock_queues: usize,
    pop_queues: usize,
    scripts: usize,
    users: usize,
}

async fn one_seed(seed: u64) -> Seen {
    let mut rng = StdRng::seed_from_u64(seed);
    let snapshot_at = rng.gen_range(1..ENTRIES);
    let restart_at = rng.gen_range(snapshot_at..=ENTRIES);
    let mut gen = Gen {
        rng: StdRng::seed_from_u64(seed ^ 0x5eed),
        boots: [11, 22, 33],
        seq: 0,
        lock_waiters: Vec::new(),
        pop_waiters: Vec::new(),
    };
    let dirs: Vec<tempfile::TempDir> = (0..3)
        .map(|_| tempfile::tempdir().expect("tempdir"))
        .collect();
    let mut a = open(dirs[0].path());
    let mut b = open(dirs[1].path());
    let mut pure = Keyspace::default();
    let (mut term, mut boot, mut ts) = (1u64, 1u64, 1_000u64);
    let mut log: Vec<Entry> = Vec::new();
    let mut at: BTreeMap<u64, StateDigest> = BTreeMap::new();
    let mut pending: Vec<Entry> = Vec::new();
    for index in 1..=ENTRIES {
        let payload = if index > 1 && rng.gen_bool(0.02) {
            // A new leader: a new term, a new process clock, and its blank entry first.
            term += 1;
            boot = rng.gen();
            ts = rng.gen_range(0..10_000);
            EntryPayload::Blank
        } else {
            ts += rng.gen_range(0..400);
            let n = rng.gen_range(1..=4);
            let mut cmds: Vec<Command> = (0..n).map(|_| gen.command(&pure)).collect();
            if index == 1 {
                // A small budget, so that the runaway script stops soon.
                let budget = rng.gen_range(10_000..100_000u64).to_string();
                cmds.insert(0, parse(&["SCRIPT", "BUDGET", &budget]));
            }
            EntryPayload::Normal(Batch { ts, boot, cmds })
        };
        if let EntryPayload::Normal(batch) = &payload {
            palisade::store::state_machine::apply_batch(&mut pure, term, batch);
        }
        let entry = Entry {
            log_id: log_id(term, 1, index),
            payload,
        };
        log.push(entry.clone());
        pending.push(entry);
        // `a` applies in runs of random length (each run is one WriteBatch).
        let point = index == snapshot_at || index == restart_at;
        if point || index == ENTRIES || rng.gen_bool(0.3) {
            apply(&mut a, &std::mem::take(&mut pending)).await;
        }
        if point {
            at.insert(index, digest(&a));
            assert_eq!(
                pure.digest(),
                at[&index],
                "seed {seed}: pure and a at {index}"
            );
        }
    }
    let end = digest(&a);
    assert_eq!(
        pure.digest(),
        end,
        "seed {seed}: the bare keyspace and the state machine disagree"
    );

    // b: the prefix, then its snapshot image.
    let cut = snapshot_at as usize;
    apply(&mut b, &log[..cut]).await;
    assert_eq!(
        digest(&b),
        at[&snapshot_at],
        "seed {seed}: b at the snapshot point"
    );
    let ks = keyspace(&b);
    let seen = Seen {
        lock_queues: ks.lock_metas().values().map(|m| m.queue.len()).sum(),
        pop_queues: ks.pop_queues().values().map(|q| q.len()).sum(),
        scripts: ks.scripts().len(),
        users: ks.users().stored().len(),
    };
    let snap = b
        .get_current_snapshot()
        .await
        .expect("snapshot")
        .expect("a snapshot after applying");

    // c: installs it, applies the rest with a restart in between.
    let mut c = open(dirs[2].path());
    c.install_snapshot(&snap.meta, snap.snapshot)
        .await
        .expect("install");
    assert_eq!(
        digest(&c),
        at[&snapshot_at],
        "seed {seed}: c right after installing the snapshot of index {snapshot_at}"
    );
    let restart = restart_at as usize;
    apply(&mut c, &log[cut..restart]).await;
    drop(c);
    let mut c = open(dirs[2].path());
    assert_eq!(
        digest(&c),
        at[&restart_at],
        "seed {seed}: c after a restart at index {restart_at}"
    );
    apply(&mut c, &log[restart..]).await;
    assert_eq!(
        digest(&c),
        end,
        "seed {seed}: c (snapshot at {snapshot_at}, restart at {restart_at}) disagrees with a"
    );
    seen
}

#[tokio::test]
async fn replicas_agree_after_a_random_log_with_a_snapshot_install_and_a_restart() {
    let mut total = Seen::default();
    for seed in 0..SEEDS {
        let s = one_seed(seed).await;
        total.lock_queues += s.lock_queues;
        total.pop_queues += s.pop_queues;
        total.scripts += s.scripts;
        total.users += s.users;
    }
    // The snapshot points carried every kind of state at least once (else the test would
    // not show that they survive an install).
    assert!(total.lock_queues > 0, "no lock queue at a snapshot point");
    assert!(total.pop_queues > 0, "no pop queue at a snapshot point");
    assert!(total.scripts > 0, "no cached script at a snapshot point");
    assert!(total.users > 0, "no ACL user at a snapshot point");
}
