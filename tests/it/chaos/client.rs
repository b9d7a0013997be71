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

    /// Runs a command and records it. Returns the reply.
    fn op(
        &mut self,
        f: &str,
        key: &str,
        arg: Option<&str>,
        token: Option<i64>,
        args: &[&str],
    ) -> Reply {
        let inv = self.now();
        let reply = self.call(args);
        let ret = self.now();
        let (outcome, result) = match &reply {
            Reply::Int(n) => (Outcome::Ok, Some(n.to_string())),
            Reply::Bulk(v) => (Outcome::Ok, v.clone()),
            Reply::Simple => (Outcome::Ok, Some("OK".to_string())),
            Reply::Fenced => (Outcome::Fail, None),
            Reply::Unknown => (Outcome::Unknown, None),
        };
        let op = Op {
            client: self.spec.id,
            f: f.into(),
            key: key.into(),
            arg: arg.map(str::to_string),
            token,
            inv,
            ret,
            outcome,
            result,
        };
        if let Ok(line) = serde_json::to_string(&op) {
            let _ = writeln!(self.out, "{line}");
            let _ = self.out.flush();
        }
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

fn locks(c: &mut Client) {
    let px = c.spec.ttl_ms.to_string();
    let mut n = 0u64;
    while c.running() {
        n += 1;
        let key = format!("lk:{}", c.rng.gen_range(0..2));
        let owner = format!("c{}-{n}", c.spec.id);
        let lock = ["LOCK", key.as_str(), owner.as_str(), "PX", px.as_str()];
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
            match c.op("lock", &key, Some(&owner), None, args) {
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
            c.op("lock", &key, Some(&owner), None, &lock);
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
