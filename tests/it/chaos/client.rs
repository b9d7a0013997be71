//! The client side of a chaos run: a separate process (this test binary, re-invoked) that
//! runs one workload against the cluster and appends every operation to its own JSON-lines
//! file. Being a process of its own, it can be paused with SIGSTOP like a real client in a
//! GC pause, and it pauses itself mid-critical-section when told to.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::thread;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use super::history::{unix_us, Op, Outcome};
use crate::common::{encode, signal, Conn};

/// How the counter workload reads and writes the resource.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// FENCEDGET then FENCEDSET (the headline).
    Fenced,
    /// GET then SET (control a).
    Unfenced,
    /// GET then FENCEDSET (control b).
    WriteFenced,
}

/// What one client process does.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// Lock-guarded read-modify-write of one counter.
    Counter(Mode),
    /// LOCK / re-LOCK / RENEW / UNLOCK on a few keys.
    Locks,
    /// SET / GET / DEL / INCR on a few keys, checked for linearizability.
    Register,
    /// SET of fresh keys, checked after a full-cluster crash.
    Durability,
    /// RPUSH of unique items and BLPOP of them from a few lists: the replicated wait queue
    /// under faults (no item popped twice, none popped that was never pushed).
    Queue,
    /// One owner queueing for a few contended locks with `LOCK ... WAIT`, a client-side
    /// timeout, hang-ups mid-wait and an UNLOCK whatever happened (a `finally`), beside
    /// `DEL k` and `MULTI / DEL k / UNLOCK k <owner> / EXEC` that break locks under the
    /// queue. Its grants are checked for token uniqueness.
    LockQueue,
    /// Lock-library scripts: acquire with `SET NX PX` in EVAL, the token by LOCK (directly
    /// or inside a script), extend and release by compare-and-act scripts.
    Scripts,
}

/// Everything a client process needs, passed as JSON in an environment variable.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct ClientSpec {
    /// Client number (unique in the run).
    pub id: u32,
    /// What it does.
    pub workload: Workload,
    /// Seed of its random choices.
    pub seed: u64,
    /// File with the client addresses (host:port) of the current members, one per line.
    pub ports_file: PathBuf,
    /// Its history file.
    pub out: PathBuf,
    /// Run start and end, in Unix microseconds.
    pub start_us: u64,
    /// When to stop starting operations.
    pub end_us: u64,
    /// Lease TTL for LOCK and RENEW, ms.
    pub ttl_ms: u64,
    /// Time spent "working" between the read and the write of the counter, ms.
    pub work_ms: u64,
    /// Chance (per mille) of pausing itself (SIGSTOP) between the read and the write.
    pub self_pause_per_mille: u32,
    /// How long to wait for a reply before the outcome counts as unknown, ms.
    pub reply_timeout_ms: u64,
    /// The ids of the run's lock-queue clients (whose owners a lock-queue client names in
    /// `MULTI / DEL / UNLOCK / EXEC`).
    #[serde(default)]
    pub lock_queue_ids: Vec<u32>,
}

/// The counter's resource key and its lock.
pub const COUNTER_KEY: &str = "ctr";
const COUNTER_LOCK: &str = "lock:ctr";

/// A reply, reduced to what the checkers need.
enum Reply {
    Int(i64),
    Bulk(Option<String>),
    Simple,
    Fenced,
    Unknown,
}

/// What an operation is recorded as (the fields of [`Op`] that the client chooses).
#[derive(Clone, Copy)]
struct OpLine<'a> {
    f: &'a str,
    key: &'a str,
    arg: Option<&'a str>,
    token: Option<i64>,
}

struct Client {
    spec: ClientSpec,
    conn: Option<Conn>,
    attempt: usize,
    out: BufWriter<File>,
    rng: StdRng,
}

impl Client {
    fn now(&self) -> u64 {
        unix_us().saturating_sub(self.spec.start_us)
    }

    fn addrs(&self) -> Vec<std::net::SocketAddr> {
        std::fs::read_to_string(&self.spec.ports_file)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    fn connect(&mut self) -> Option<&mut Conn> {
        if self.conn.is_none() {
            let addrs = self.addrs();
            if addrs.is_empty() {
                return None;
            }
            self.attempt += 1;
            let addr = addrs[(self.spec.id as usize + self.attempt) % addrs.len()];
            let c = Conn::try_connect_addr(addr).ok()?;
            let t = Some(Duration::from_millis(self.spec.reply_timeout_ms));
            c.stream_clone().set_read_timeout(t).ok()?;
            self.conn = Some(c);
        }
        self.conn.as_mut()
    }

    /// Sends one command and classifies the reply; I/O trouble drops the connection.
    fn call(&mut self, args: &[&str]) -> Reply {
        let Some(c) = self.connect() else {
            thread::sleep(Duration::from_millis(50));
            return Reply::Unknown;
        };
        let raw = c
            .try_send_raw(&encode(args))
            .ok()
            .and_then(|_| c.try_read_reply().ok());
        let Some(raw) = raw else {
            self.conn = None;
            return Reply::Unknown;
        };
        let text = String::from_utf8_lossy(&raw);
        match raw.first() {
            Some(b':') => text[1..]
                .trim_end()
                .parse()
                .map(Reply::Int)
                .unwrap_or(Reply::Unknown),
            Some(b'+') => Reply::Simple,
            Some(b'$') if raw.starts_with(b"$-1") => Reply::Bulk(None),
            Some(b'$') => {
                let body = text.split_once("\r\n").map(|x| x.1).unwrap_or("");
                Reply::Bulk(Some(body.trim_end_matches("\r\n").to_string()))
            }
            Some(b'_') => Reply::Bulk(None),
            Some(b'*') if raw.starts_with(b"*-1") => Reply::Bulk(None),
            // BLPOP's `[key, element]`: the element.
            Some(b'*') if raw.starts_with(b"*2\r\n") => match text.split("\r\n").nth(4) {
                Some(v) => Reply::Bulk(Some(v.to_string())),
                None => Reply::Unknown,
            },
            Some(b'-') if raw.starts_with(b"-FENCED") => Reply::Fenced,
            Some(b'-') => {
                // TIMEOUT, TRYAGAIN, CLUSTERDOWN: not done, or unknown. Back off a little,
                // and try another node in case this one is cut off.
                self.conn = None;
                thread::sleep(Duration::from_millis(20));
                Reply::Unknown
            }
            _ => Reply::Unknown,
        }
    }

    /// [`Client::call`] with its own reply timeout (`None`: the spec's); after a timeout the
    /// connection is dropped, which hangs up on a waiting command.
    fn call_within(&mut self, args: &[&str], timeout_ms: Option<u64>) -> Reply {
        let t = timeout_ms.unwrap_or(self.spec.reply_timeout_ms);
        if let Some(c) = self.connect() {
            let _ = c
                .stream_clone()
                .set_read_timeout(Some(Duration::from_millis(t.max(1))));
        }
        let reply = self.call(args);
        if let Some(c) = &self.conn {
            let t = Some(Duration::from_millis(self.spec.reply_timeout_ms));
            let _ = c.stream_clone().set_read_timeout(t);
        }
        reply
    }

    /// Sends `MULTI`, the commands and `EXEC` in one write; the EXEC reply's integers (`None`
    /// if no EXEC array came back).
    fn transaction(&mut self, cmds: &[&[&str]]) -> Option<Vec<i64>> {
        let c = self.connect()?;
        let mut data = encode(&["MULTI"]);
        cmds.iter().for_each(|a| data.extend(encode(a)));
        data.extend(encode(&["EXEC"]));
        let mut replies = Vec::new();
        let ok = c.try_send_raw(&data).is_ok()
            && (0..cmds.len() + 2).all(|_| c.try_read_reply().map(|r| replies.push(r)).is_ok());
        let exec = replies.last().filter(|r| ok && r.starts_with(b"*"));
        let Some(exec) = exec else {
            self.conn = None;
            return None;
        };
        let text = String::from_utf8_lossy(exec);
        Some(
            text.split("\r\n")
                .filter_map(|l| l.strip_prefix(':')?.parse().ok())
                .collect(),
        )
    }

    /// Records an operation that ran from `times.0` to `times.1` and ended with `reply`.
    fn record(&mut self, op: OpLine<'_>, times: (u64, u64), reply: &Reply) {
        let (outcome, result) = match reply {
            Reply::Int(n) => (Outcome::Ok, Some(n.to_string())),
            Reply::Bulk(v) => (Outcome::Ok, v.clone()),
            Reply::Simple => (Outcome::Ok, Some("OK".to_string())),
            Reply::Fenced => (Outcome::Fail, None),
            Reply::Unknown => (Outcome::Unknown, None),
        };
        let op = Op {
            client: self.spec.id,
            f: op.f.into(),
            key: op.key.into(),
            arg: op.arg.map(str::to_string),
            token: op.token,
            inv: times.0,
            ret: times.1,
            outcome,
            result,
        };
        if let Ok(line) = serde_json::to_string(&op) {
            let _ = writeln!(self.out, "{line}");
            let _ = self.out.flush();
        }
    }

    /// Runs a command and records it. Returns the reply.
    fn op(
        &mut self,
        f: &str,
        key: &str,
        arg: Option<&str>,
        token: Option<i64>,
        args: &[&str],
    ) -> Reply {
        self.op_within(OpLine { f, key, arg, token }, args, None)
    }

    /// [`Client::op`] with its own reply timeout (see [`Client::call_within`]).
    fn op_within(&mut self, op: OpLine<'_>, args: &[&str], timeout_ms: Option<u64>) -> Reply {
        let inv = self.now();
        let reply = self.call_within(args, timeout_ms);
        self.record(op, (inv, self.now()), &reply);
        reply
    }

    fn running(&self) -> bool {
        unix_us() < self.spec.end_us
    }

    fn sleep_ms(&mut self, lo: u64, hi: u64) {
        let ms = self.rng.gen_range(lo..=hi);
        thread::sleep(Duration::from_millis(ms));
    }
}

/// Runs the client described by `spec` until its end time.
pub fn run(spec: ClientSpec) {
    let out = BufWriter::new(File::create(&spec.out).expect("create client history"));
    let mut c = Client {
        rng: StdRng::seed_from_u64(spec.seed ^ (spec.id as u64).wrapping_mul(0x9E37_79B9)),
        spec,
        conn: None,
        attempt: 0,
        out,
    };
    match c.spec.workload {
        Workload::Counter(mode) => counter(&mut c, mode),
        Workload::Locks => locks(&mut c),
        Workload::Register => register(&mut c),
        Workload::Durability => durability(&mut c),
        Workload::Queue => queue(&mut c),
        Workload::LockQueue => lock_queue(&mut c),
        Workload::Scripts => scripts(&mut c),
    }
}

fn counter(c: &mut Client, mode: Mode) {
    let owner = format!("c{}", c.spec.id);
    let px = c.spec.ttl_ms.to_string();
    while c.running() {
        // LOCK is idempotent per owner, so an unknown outcome is simply retried.
        let token = match c.op(
            "lock",
            COUNTER_LOCK,
            Some(&owner),
            None,
            &["LOCK", COUNTER_LOCK, &owner, "PX", &px],
        ) {
            Reply::Int(t) => t,
            _ => {
                c.sleep_ms(2, 10);
                continue;
            }
        };
        let ts = token.to_string();
        let read = match mode {
            Mode::Fenced => c.op(
                "fencedget",
                COUNTER_KEY,
                None,
                Some(token),
                &["FENCEDGET", COUNTER_KEY, &ts],
            ),
            _ => c.op("get", COUNTER_KEY, None, None, &["GET", COUNTER_KEY]),
        };
        if let Reply::Bulk(v) = read {
            let v: i64 = v.and_then(|v| v.parse().ok()).unwrap_or(0);
            thread::sleep(Duration::from_millis(c.spec.work_ms));
            if c.rng.gen_range(0..1000) < c.spec.self_pause_per_mille {
                // A "GC pause" at the worst moment; the harness sends SIGCONT later.
                signal(std::process::id(), "STOP");
            }
            let nv = (v + 1).to_string();
            match mode {
                Mode::Unfenced => c.op(
                    "set",
                    COUNTER_KEY,
                    Some(&nv),
                    None,
                    &["SET", COUNTER_KEY, &nv],
                ),
                _ => c.op(
                    "fencedset",
                    COUNTER_KEY,
                    Some(&nv),
                    Some(token),
                    &["FENCEDSET", COUNTER_KEY, &nv, &ts],
                ),
            };
        }
        c.op(
            "unlock",
            COUNTER_LOCK,
            Some(&owner),
            None,
            &["UNLOCK", COUNTER_LOCK, &owner],
        );
    }
}

/// The LIMIT of the lock workload's semaphore (`sem:0`).
pub const SEMAPHORE_LIMIT: usize = 2;

fn locks(c: &mut Client) {
    let px = c.spec.ttl_ms.to_string();
    let limit = SEMAPHORE_LIMIT.to_string();
    let mut n = 0u64;
    while c.running() {
        n += 1;
        // One cycle in six takes both lock keys at once with MLOCK.
        if c.rng.gen_range(0..6) == 0 {
            mlock_cycle(c, &px, n);
            continue;
        }
        // Mostly LOCK on lk:0 and lk:1; also RLOCK on the same keys (readers beside
        // writers), and SEMACQUIRE on sem:0.
        let (f, key) = match c.rng.gen_range(0..10) {
            0..=5 => ("lock", format!("lk:{}", c.rng.gen_range(0..2))),
            6..=7 => ("rlock", format!("lk:{}", c.rng.gen_range(0..2))),
            _ => ("semacquire", "sem:0".to_string()),
        };
        let owner = format!("c{}-{n}", c.spec.id);
        let lock: Vec<&str> = match f {
            "lock" => vec!["LOCK", &key, &owner, "PX", &px],
            "rlock" => vec!["RLOCK", &key, &owner, "PX", &px],
            _ => vec!["SEMACQUIRE", &key, &owner, "LIMIT", &limit, "PX", &px],
        };
        // Half the acquisitions wait in the key's queue (up to twice the lease, and below
        // the reply timeout), so grants by release and by expiry run through every fault.
        let wait = c
            .rng
            .gen_range(50..=(2 * c.spec.ttl_ms).clamp(50, 3_000))
            .to_string();
        let queued = [&lock[..], &["WAIT", wait.as_str()]].concat();
        let first: &[&str] = if c.rng.gen_bool(0.5) { &queued } else { &lock };
        let mut granted = None;
        for attempt in 0..3 {
            let args = if attempt == 0 { first } else { &lock[..] };
            match c.op(f, &key, Some(&owner), None, args) {
                Reply::Int(t) => granted = Some(t),
                Reply::Unknown => continue,
                _ => {}
            }
            break;
        }
        let Some(_) = granted else {
            c.sleep_ms(5, 20);
            continue;
        };
        if c.rng.gen_bool(0.5) {
            c.op(f, &key, Some(&owner), None, &lock);
        }
        let hold = c.spec.ttl_ms / 3;
        c.sleep_ms(0, hold);
        if c.rng.gen_bool(0.3) {
            c.op(
                "renew",
                &key,
                Some(&owner),
                None,
                &["RENEW", &key, &owner, "PX", &px],
            );
        }
        if c.rng.gen_bool(0.85) {
            c.op(
                "unlock",
                &key,
                Some(&owner),
                None,
                &["UNLOCK", &key, &owner],
            );
        }
    }
}

/// How an MLOCK went.
enum Multi {
    Granted(Vec<i64>),
    Nil,
    Unknown,
}

/// Sends an MLOCK of `keys` and records it as one `lock` op per key (the same times, each
/// key's own token, or nil, or unknown), so that the lock checkers see each key's grant as
/// an exclusive LOCK's.
fn mlock(c: &mut Client, keys: &[String; 2], owner: &str, args: &[&str]) -> Multi {
    let inv = c.now();
    let raw = c.connect().and_then(|conn| {
        conn.try_send_raw(&encode(args))
            .ok()
            .and_then(|_| conn.try_read_reply().ok())
    });
    let times = (inv, c.now());
    let outcome = match raw {
        Some(r) if r.starts_with(b"*2\r\n") => {
            let tokens: Vec<i64> = String::from_utf8_lossy(&r)
                .split("\r\n")
                .filter_map(|l| l.strip_prefix(':')?.parse().ok())
                .collect();
            if tokens.len() == 2 {
                Multi::Granted(tokens)
            } else {
                Multi::Unknown
            }
        }
        Some(r) if r.starts_with(b"$-1") || r.starts_with(b"_") => Multi::Nil,
        _ => Multi::Unknown,
    };
    if let Multi::Unknown = outcome {
        c.conn = None;
        thread::sleep(Duration::from_millis(20));
    }
    for (i, key) in keys.iter().enumerate() {
        let reply = match &outcome {
            Multi::Granted(t) => Reply::Int(t[i]),
            Multi::Nil => Reply::Bulk(None),
            Multi::Unknown => Reply::Unknown,
        };
        let line = OpLine {
            f: "lock",
            key,
            arg: Some(owner),
            token: None,
        };
        c.record(line, times, &reply);
    }
    outcome
}

/// MLOCK of lk:0 and lk:1 (in a random order), half the time waiting first; then hold,
/// maybe RENEW, and release with MUNLOCK or one UNLOCK per key (each recorded as `unlock`).
fn mlock_cycle(c: &mut Client, px: &str, n: u64) {
    let mut keys = ["lk:0".to_string(), "lk:1".to_string()];
    if c.rng.gen_bool(0.5) {
        keys.swap(0, 1);
    }
    let owner = format!("c{}-{n}", c.spec.id);
    let wait = c
        .rng
        .gen_range(50..=(2 * c.spec.ttl_ms).clamp(50, 3_000))
        .to_string();
    let (k0, k1) = (keys[0].as_str(), keys[1].as_str());
    let plain = ["MLOCK", &owner, "PX", px, "KEYS", "2", k0, k1];
    let queued = [
        "MLOCK", &owner, "PX", px, "WAIT", &wait, "KEYS", "2", k0, k1,
    ];
    let first: &[&str] = if c.rng.gen_bool(0.5) { &queued } else { &plain };
    let mut granted = false;
    for attempt in 0..3 {
        let args = if attempt == 0 { first } else { &plain[..] };
        match mlock(c, &keys, &owner, args) {
            Multi::Granted(_) => granted = true,
            Multi::Unknown => continue,
            Multi::Nil => {}
        }
        break;
    }
    if !granted {
        c.sleep_ms(5, 20);
        return;
    }
    c.sleep_ms(0, c.spec.ttl_ms / 3);
    if c.rng.gen_bool(0.3) {
        for key in &keys {
            c.op(
                "renew",
                key,
                Some(&owner),
                None,
                &["RENEW", key, &owner, "PX", px],
            );
        }
    }
    if !c.rng.gen_bool(0.85) {
        return;
    }
    if c.rng.gen_bool(0.5) {
        let inv = c.now();
        let reply = c.call(&["MUNLOCK", &owner, "KEYS", "2", k0, k1]);
        let times = (inv, c.now());
        for key in &keys {
            let line = OpLine {
                f: "unlock",
                key,
                arg: Some(&owner),
                token: None,
            };
            c.record(line, times, &reply);
        }
    } else {
        for key in &keys {
            c.op("unlock", key, Some(&owner), None, &["UNLOCK", key, &owner]);
        }
    }
}

/// Register keys change every this many seconds, so that each key's history stays short
/// enough for the linearizability search.
pub const REGISTER_EPOCH_S: u64 = 10;

fn register(c: &mut Client) {
    let mut n = 0i64;
    while c.running() {
        n += 1;
        let epoch = c.now() / (REGISTER_EPOCH_S * 1_000_000);
        let key = format!("reg:{epoch}:{}", c.rng.gen_range(0..3));
        match c.rng.gen_range(0..20) {
            0..=7 => c.op("get", &key, None, None, &["GET", &key]),
            8..=12 => {
                let v = (c.spec.id as i64 * 1_000_000 + n).to_string();
                c.op("set", &key, Some(&v), None, &["SET", &key, &v])
            }
            13..=17 => c.op("incr", &key, None, None, &["INCR", &key]),
            _ => c.op("del", &key, None, None, &["DEL", &key]),
        };
        c.sleep_ms(0, 5);
    }
}

fn durability(c: &mut Client) {
    let mut n = 0u64;
    while c.running() {
        n += 1;
        let key = format!("dur:{}:{n}", c.spec.id);
        let v = n.to_string();
        c.op("set", &key, Some(&v), None, &["SET", &key, &v]);
        c.sleep_ms(0, 5);
    }
}

/// The lists of the queue workload.
pub const QUEUE_KEYS: [&str; 2] = ["q:0", "q:1"];

fn queue(c: &mut Client) {
    let mut n = 0u64;
    while c.running() {
        let key = QUEUE_KEYS[c.rng.gen_range(0..QUEUE_KEYS.len())];
        if c.rng.gen_bool(0.5) {
            n += 1;
            let item = format!("i{}-{n}", c.spec.id);
            c.op("push", key, Some(&item), None, &["RPUSH", key, &item]);
        } else {
            // Well inside the reply timeout, so a timeout is a null, not an unknown.
            c.op("bpop", key, None, None, &["BLPOP", key, "0.3"]);
        }
        c.sleep_ms(0, 5);
    }
}

/// The keys of the lock-queue workload: most acquisitions go to the first, so that owners
/// queue behind each other.
pub const LOCK_QUEUE_KEYS: [&str; 2] = ["lq:0", "lq:1"];

/// The owner name of the lock-queue client `id`.
fn queue_owner(id: u32) -> String {
    format!("q{id}")
}

fn lock_queue(c: &mut Client) {
    let owner = queue_owner(c.spec.id);
    while c.running() {
        let key = LOCK_QUEUE_KEYS[usize::from(c.rng.gen_bool(0.2))];
        let line = |f| OpLine {
            f,
            key,
            arg: Some(&owner),
            token: None,
        };
        match c.rng.gen_range(0..100) {
            // Someone breaks the lock under the queue.
            0..=5 => {
                c.op("qdel", key, None, None, &["DEL", key]);
            }
            // ... and releases some owner's claim in the same transaction.
            6..=9 => break_and_release(c, key),
            _ => {
                let ttl = c.rng.gen_range(200..=1_500u64);
                let wait = c.rng.gen_range(100..=2_000u64);
                let (px, w) = (ttl.to_string(), wait.to_string());
                let args = ["LOCK", key, &owner, "PX", &px, "WAIT", &w];
                // The client gives up a while after the server should have answered nil,
                // or, one time in eight, hangs up half-way through the wait.
                let timeout = if c.rng.gen_bool(0.125) {
                    wait / 2
                } else {
                    wait + 2_000
                };
                let granted = c.op_within(line("qlock"), &args, Some(timeout));
                // Held for a good part of the lease (sometimes past it), so that the other
                // owners queue behind it.
                if let Reply::Int(_) = granted {
                    c.sleep_ms(ttl / 4, ttl * 3 / 4);
                    // The holder breaks its own lock with the owners queued behind it: the
                    // DEL grants the key to the head of the queue, the UNLOCK releases some
                    // owner's claim, in one entry (the shape of a duplicate-token report).
                    if c.rng.gen_bool(0.2) {
                        break_and_release(c, key);
                    }
                }
                // `finally`: release whatever the LOCK's outcome (a timed-out or hung-up
                // wait may still have been granted).
                c.op("qunlock", key, Some(&owner), None, &["UNLOCK", key, &owner]);
            }
        }
        c.sleep_ms(0, 20);
    }
}

/// `MULTI / DEL key / UNLOCK key <some lock-queue owner> / EXEC`, recorded as `qexec`.
fn break_and_release(c: &mut Client, key: &str) {
    let ids = &c.spec.lock_queue_ids;
    let other = queue_owner(match ids.len() {
        0 => c.spec.id,
        n => ids[c.rng.gen_range(0..n)],
    });
    let inv = c.now();
    let reply = match c.transaction(&[&["DEL", key], &["UNLOCK", key, &other]]) {
        Some(r) => Reply::Int(r.iter().sum()),
        None => Reply::Unknown,
    };
    let op = OpLine {
        f: "qexec",
        key,
        arg: Some(&other),
        token: None,
    };
    c.record(op, (inv, c.now()), &reply);
}

/// Lock-library scripts (the shapes of tests/it/lock_scripts.rs): acquire, LOCK inside a
/// script, extend, release.
const SCRIPT_ACQUIRE: &str = "return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])";
const SCRIPT_LOCK: &str = "return redis.call('LOCK', KEYS[1], ARGV[1], 'PX', ARGV[2])";
const SCRIPT_EXTEND: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end";
const SCRIPT_RELEASE: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end";

/// The keys of the script workload.
pub const SCRIPT_KEYS: [&str; 2] = ["sl:0", "sl:1"];

fn scripts(c: &mut Client) {
    let mut n = 0u64;
    while c.running() {
        n += 1;
        let key = SCRIPT_KEYS[c.rng.gen_range(0..SCRIPT_KEYS.len())];
        let owner = format!("s{}-{n}", c.spec.id);
        let px = c.rng.gen_range(200..=1_500u64).to_string();
        let eval = |script: &str, extra: &str| {
            ["EVAL", script, "1", key, owner.as_str(), extra].map(String::from)
        };
        let call = |c: &mut Client, f: &str, args: [String; 6]| {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            c.op(f, key, Some(&owner), None, &args)
        };
        // The token: LOCK inside a script, or SET NX PX by script and then LOCK by the same
        // owner (which returns the SET's token).
        let token = if c.rng.gen_bool(0.5) {
            call(c, "slock", eval(SCRIPT_LOCK, px.as_str()))
        } else {
            match call(c, "sacquire", eval(SCRIPT_ACQUIRE, px.as_str())) {
                Reply::Simple => c.op(
                    "slock",
                    key,
                    Some(&owner),
                    None,
                    &["LOCK", key, &owner, "PX", &px],
                ),
                other => other,
            }
        };
        if let Reply::Int(_) = token {
            c.sleep_ms(0, 50);
            if c.rng.gen_bool(0.5) {
                call(c, "sextend", eval(SCRIPT_EXTEND, px.as_str()));
            }
        }
        // Released by script whatever happened (an unknown acquire may have succeeded).
        call(c, "srelease", eval(SCRIPT_RELEASE, ""));
        c.sleep_ms(0, 20);
    }
}
