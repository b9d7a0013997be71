//! The `contention` workload (issue 16): many clients on a few hot locks of one Palisade
//! cluster, comparing two ways of waiting for a lock that another client holds.
//!
//! - `poll`: `LOCK key owner PX ms`; on nil, sleep a retry delay (plus random jitter) and try
//!   again. This is what Redis lock libraries do with `SET key owner NX PX ms`.
//! - `queue`: `LOCK key owner PX ms WAIT ms`, which the server answers when the lock is
//!   granted (or with nil when the wait runs out).
//!
//! Client `i` connects to member `i % members` (so some wait through followers) and contends
//! for hot key `i % hot-keys`. A cycle is: acquire by the method, FENCEDSET a resource with
//! the token, an optional hold, `UNLOCK key owner`, an optional pause. Only the waiting
//! differs between the methods. Each method runs for a warm-up, then for the timed duration;
//! a cycle counts if it started after the warm-up and ended before the deadline. Every grant
//! (also in the warm-up) goes into the token-order check of [`crate::grant`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use hdrhistogram::Histogram;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis_protocol::resp2::types::OwnedFrame;
use serde::Serialize;
use tokio::time::Instant;

use crate::client::{is_error, Client};
use crate::fairness::{mean_of_role, worst_key_jain, Fairness};
use crate::grant::{self, Check, Grant};
use crate::stats::{self, RunStats};
use crate::workload::Kind;
use crate::{chart, contention_table, progress, Args, Target};

/// The contention workload's options (the rest are shared: --clients, --duration, --rounds).
#[derive(clap::Args, Debug, Clone, Serialize)]
pub struct ContentionArgs {
    /// contention: the waiting methods to run, in this order each round: poll and/or queue.
    #[arg(long, default_value = "poll,queue")]
    pub methods: String,
    /// contention: how many hot keys the clients share (client i contends for key i % N).
    #[arg(long, default_value_t = 4)]
    pub hot_keys: usize,
    /// contention: seconds of warm-up before each timed run of a method (not measured).
    #[arg(long, default_value_t = 2)]
    pub warmup: u64,
    /// contention, poll: ms to sleep after a refused LOCK before trying again.
    #[arg(long, default_value_t = 5)]
    pub retry_ms: u64,
    /// contention, poll: up to this many ms more per retry, uniformly at random (so that
    /// the clients do not retry in step).
    #[arg(long, default_value_t = 5)]
    pub retry_jitter_ms: u64,
    /// contention: how long one acquire may wait, in ms: queue's `WAIT ms`, and the time
    /// after which poll gives up and starts a new cycle. Both count as a timeout.
    #[arg(long, default_value_t = 5000)]
    pub wait_ms: u64,
    /// contention: the lease (PX) of every lock, in ms.
    #[arg(long, default_value_t = 10_000)]
    pub lease_ms: u64,
    /// contention: ms to hold the lock after the FENCEDSET, before the UNLOCK.
    #[arg(long, default_value_t = 0)]
    pub hold_ms: u64,
    /// contention: ms between a client's UNLOCK and its next acquire.
    #[arg(long, default_value_t = 0)]
    pub pause_ms: u64,
}

/// A way of waiting for a lock.
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// Retry LOCK after a sleep.
    Poll,
    /// LOCK ... WAIT: the server answers when granted.
    Queue,
}

impl Method {
    /// The method's name on the command line and in the tables.
    pub fn name(self) -> &'static str {
        match self {
            Method::Poll => "poll",
            Method::Queue => "queue",
        }
    }
}

/// Parses `--methods` such as `poll,queue`.
pub fn parse_methods(s: &str) -> Result<Vec<Method>, String> {
    s.split(',')
        .map(|m| match m.trim() {
            "poll" => Ok(Method::Poll),
            "queue" => Ok(Method::Queue),
            other => Err(format!(
                "unknown method {other:?} in --methods (poll, queue)"
            )),
        })
        .collect()
}

/// Everything one client does in one run, from its connection to its last release.
struct ClientSpec {
    id: usize,
    addr: String,
    key: usize,
    key_name: String,
    method: Method,
    opts: ContentionArgs,
    /// When the run started (the zero of [`Grant`] times), the warm-up ended, and no new
    /// cycle may start.
    start: Instant,
    measure_from: Instant,
    deadline: Instant,
    done: Arc<AtomicU64>,
}

/// What one client reports at the end of a run.
struct ClientOutcome {
    /// Acquire latency of the timed cycles, µs.
    hist: Histogram<u64>,
    /// Timed cycles (= this client's grants in the timed window).
    cycles: u64,
    /// LOCK commands sent in the timed cycles.
    lock_commands: u64,
    /// Acquires that ran out of wait (whole run).
    timeouts: u64,
    /// Error replies (whole run).
    errors: u64,
    /// FENCEDSETs refused with FENCED although the UNLOCK then released (whole run).
    fenced: u64,
    /// UNLOCKs that found the lock no longer held by this owner (whole run).
    lost: u64,
    /// Every grant, also in the warm-up and after the deadline.
    grants: Vec<Grant>,
}

fn ns_since(start: Instant, t: Instant) -> u64 {
    t.duration_since(start).as_nanos() as u64
}

impl ClientSpec {
    /// Acquires the lock by the method; the token, or None after a timeout, an error, or
    /// (poll) the deadline. Counts the LOCK commands sent into `sent`.
    async fn acquire(
        &self,
        c: &mut Client,
        owner: &str,
        rng: &mut StdRng,
        out: &mut ClientOutcome,
        sent: &mut u64,
    ) -> anyhow::Result<Option<u64>> {
        let (key, lease) = (self.key_name.as_bytes(), self.opts.lease_ms.to_string());
        let started = Instant::now();
        loop {
            *sent += 1;
            let reply = match self.method {
                Method::Poll => {
                    c.call(&[b"LOCK", key, owner.as_bytes(), b"PX", lease.as_bytes()])
                        .await?
                }
                Method::Queue => {
                    let wait = self.opts.wait_ms.to_string();
                    let argv: [&[u8]; 7] = [
                        b"LOCK",
                        key,
                        owner.as_bytes(),
                        b"PX",
                        lease.as_bytes(),
                        b"WAIT",
                        wait.as_bytes(),
                    ];
                    c.call(&argv).await?
                }
            };
            match reply {
                OwnedFrame::Integer(t) => return Ok(Some(t as u64)),
                OwnedFrame::Null if self.method == Method::Queue => {
                    out.timeouts += 1;
                    return Ok(None);
                }
                OwnedFrame::Null => {}
                r if is_error(&r) => {
                    out.errors += 1;
                    // An election, say: back off instead of spinning on errors.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    if self.method == Method::Queue {
                        return Ok(None);
                    }
                }
                other => bail!("LOCK replied {other:?}"),
            }
            let now = Instant::now();
            if now >= self.deadline {
                return Ok(None);
            }
            if now >= started + Duration::from_millis(self.opts.wait_ms) {
                out.timeouts += 1;
                return Ok(None);
            }
            let jitter = rng.gen_range(0..=self.opts.retry_jitter_ms * 1000);
            let nap = Duration::from_micros(self.opts.retry_ms * 1000 + jitter);
            tokio::time::sleep(nap).await;
        }
    }

    /// The client's loop: cycles until the deadline.
    async fn run(self) -> anyhow::Result<ClientOutcome> {
        let mut c = Client::connect(&self.addr)
            .await
            .with_context(|| format!("connecting to {}", self.addr))?;
        let mut rng = StdRng::from_entropy();
        let mut out = ClientOutcome {
            hist: Histogram::new_with_bounds(1, 60_000_000, 3)?,
            cycles: 0,
            lock_commands: 0,
            timeouts: 0,
            errors: 0,
            fenced: 0,
            lost: 0,
            grants: Vec::new(),
        };
        let resource = format!("res:{}", self.key_name);
        let mut n = 0u64;
        while Instant::now() < self.deadline {
            n += 1;
            let owner = format!("c{}-{n}", self.id);
            let started = Instant::now();
            let mut sent = 0;
            let Some(token) = self
                .acquire(&mut c, &owner, &mut rng, &mut out, &mut sent)
                .await?
            else {
                continue;
            };
            let granted = Instant::now();
            let t = token.to_string();
            let write = c
                .call(&[
                    b"FENCEDSET",
                    resource.as_bytes(),
                    owner.as_bytes(),
                    t.as_bytes(),
                ])
                .await?;
            let fenced = matches!(&write, OwnedFrame::Error(e) if e.starts_with("FENCED"));
            if is_error(&write) && !fenced {
                out.errors += 1;
            }
            if self.opts.hold_ms > 0 {
                tokio::time::sleep(Duration::from_millis(self.opts.hold_ms)).await;
            }
            let release = Instant::now();
            let released = match c
                .call(&[b"UNLOCK", self.key_name.as_bytes(), owner.as_bytes()])
                .await?
            {
                OwnedFrame::Integer(1) => true,
                OwnedFrame::Integer(_) => {
                    out.lost += 1;
                    false
                }
                r => {
                    out.errors += is_error(&r) as u64;
                    false
                }
            };
            // A holder whose lease ran out is rightly fenced off by the next one; a holder
            // that still held the lock at its UNLOCK must never be.
            out.fenced += (fenced && released) as u64;
            out.grants.push(Grant {
                key: self.key,
                client: self.id,
                token,
                granted_ns: ns_since(self.start, granted),
                released_ns: released.then(|| ns_since(self.start, release)),
            });
            if started >= self.measure_from && Instant::now() <= self.deadline {
                out.cycles += 1;
                out.lock_commands += sent;
                out.hist
                    .saturating_record(granted.duration_since(started).as_micros() as u64);
                self.done.fetch_add(1, Ordering::Relaxed);
            }
            if self.opts.pause_ms > 0 {
                tokio::time::sleep(Duration::from_millis(self.opts.pause_ms)).await;
            }
        }
        Ok(out)
    }
}

/// One timed run of one method.
#[derive(Serialize, Clone, Debug)]
pub struct MethodResult {
    /// Target name.
    pub target: String,
    /// poll or queue.
    pub method: Method,
    /// Concurrent clients.
    pub clients: usize,
    /// Round number, from 1.
    pub round: usize,
    /// Length of the timed window, s.
    pub seconds: f64,
    /// Cycles that started after the warm-up and ended before the deadline.
    pub cycles: u64,
    /// `cycles / seconds`.
    pub cycles_per_sec: f64,
    /// Acquire latency (first LOCK sent to grant reply, retries and sleeps included), µs.
    pub acquire_p50_us: u64,
    /// 99th percentile, µs.
    pub acquire_p99_us: u64,
    /// Maximum, µs.
    pub acquire_max_us: u64,
    /// LOCK commands the timed cycles sent (poll: one per attempt).
    pub lock_commands: u64,
    /// Acquires that ran out of wait (whole run, warm-up included).
    pub timeouts: u64,
    /// Error replies (whole run).
    pub errors: u64,
    /// FENCEDSETs refused with FENCED although the lock was still held, as the UNLOCK after
    /// it showed (whole run): must be 0. After a lease ran out, FENCED is right and not
    /// counted here (see `lost`).
    pub fenced: u64,
    /// UNLOCKs that found the lock no longer theirs (whole run): a lease ran out.
    pub lost: u64,
    /// Timed cycles of each client.
    pub grants_per_client: Vec<u64>,
    /// The node each client was connected to.
    pub client_nodes: Vec<String>,
    /// That node's Raft role just before the run.
    pub client_roles: Vec<String>,
    /// The spread of `grants_per_client`.
    pub fairness: Fairness,
    /// The lowest Jain's index of the clients of one key, among the keys (see
    /// [`worst_key_jain`]).
    pub key_jain_min: Option<f64>,
    /// Mean grants of the clients on the leader.
    pub leader_mean: Option<f64>,
    /// Mean grants of the clients on followers.
    pub follower_mean: Option<f64>,
    /// The token-order check over every grant of the run.
    pub check: Check,
    /// What the nodes did during the timed window (INFO counter differences).
    pub server: RunStats,
}

/// Runs `method` with `clients` clients on `t`'s members. `run` numbers the runs, so that no
/// two share keys (a leftover lease or waiter of one cannot slow the next).
async fn run_method(
    t: &Target,
    args: &Args,
    (method, clients, round, run): (Method, usize, usize, usize),
    ticks: u64,
) -> anyhow::Result<MethodResult> {
    let opts = &args.contention;
    let members = &t.members;
    let roles_now = stats::sample(members).await;
    let role = |m: usize| roles_now[m].role.clone().unwrap_or_else(|| "?".into());
    let start = Instant::now();
    let measure_from = start + Duration::from_secs(opts.warmup);
    let deadline = measure_from + Duration::from_secs(args.duration);
    let done = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for id in 0..clients {
        let key = id % opts.hot_keys.max(1);
        let spec = ClientSpec {
            id,
            addr: members[id % members.len()].clone(),
            key,
            key_name: format!("contend:{run}:{key}"),
            method,
            opts: opts.clone(),
            start,
            measure_from,
            deadline,
            done: done.clone(),
        };
        tasks.push(tokio::spawn(spec.run()));
    }
    let label = format!("[{clients} clients, round {}] {}", round + 1, method.name());
    let progress = progress::start(done.clone(), label, "cycles");
    tokio::time::sleep_until(measure_from).await;
    let before = stats::sample(members).await;
    tokio::time::sleep_until(deadline).await;
    let after = stats::sample(members).await;
    let seconds = deadline.duration_since(measure_from).as_secs_f64();
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    let mut grants = Vec::new();
    let mut r = MethodResult {
        target: t.name.clone(),
        method,
        clients,
        round: round + 1,
        seconds,
        cycles: 0,
        cycles_per_sec: 0.0,
        acquire_p50_us: 0,
        acquire_p99_us: 0,
        acquire_max_us: 0,
        lock_commands: 0,
        timeouts: 0,
        errors: 0,
        fenced: 0,
        lost: 0,
        grants_per_client: Vec::new(),
        client_nodes: (0..clients)
            .map(|i| members[i % members.len()].clone())
            .collect(),
        client_roles: (0..clients).map(|i| role(i % members.len())).collect(),
        fairness: Fairness::default(),
        key_jain_min: None,
        leader_mean: None,
        follower_mean: None,
        check: Check::default(),
        server: RunStats::between(members, &before, &after, ticks),
    };
    for task in tasks {
        let o = task.await??;
        hist.add(&o.hist)?;
        r.cycles += o.cycles;
        r.lock_commands += o.lock_commands;
        r.timeouts += o.timeouts;
        r.errors += o.errors;
        r.fenced += o.fenced;
        r.lost += o.lost;
        r.grants_per_client.push(o.cycles);
        grants.extend(o.grants);
    }
    drop(progress);
    r.cycles_per_sec = r.cycles as f64 / seconds.max(1e-9);
    (r.acquire_p50_us, r.acquire_p99_us) =
        (hist.value_at_quantile(0.5), hist.value_at_quantile(0.99));
    r.acquire_max_us = hist.max();
    r.fairness = Fairness::of(&r.grants_per_client);
    let keys: Vec<usize> = (0..clients).map(|i| i % opts.hot_keys.max(1)).collect();
    r.key_jain_min = worst_key_jain(&r.grants_per_client, &keys);
    r.leader_mean = mean_of_role(&r.grants_per_client, &r.client_roles, "leader");
    r.follower_mean = mean_of_role(&r.grants_per_client, &r.client_roles, "follower");
    r.check = grant::check(&mut grants);
    Ok(r)
}

/// Everything --json writes for the contention workload.
#[derive(Serialize)]
struct Report<'a> {
    workload: &'static str,
    duration_s: u64,
    rounds: usize,
    settings: &'a ContentionArgs,
    targets: &'a [Target],
    results: &'a [MethodResult],
}

/// Runs the contention workload: for each target, client count and round, each method in turn.
pub async fn run(
    args: &Args,
    targets: &[Target],
    clients: &[usize],
    ticks: u64,
) -> anyhow::Result<()> {
    let methods = parse_methods(&args.contention.methods).map_err(anyhow::Error::msg)?;
    if let Some(t) = targets.iter().find(|t| t.kind != Kind::Palisade) {
        bail!(
            "the contention workload runs on palisade targets only, not {}",
            t.name
        );
    }
    let o = &args.contention;
    println!(
        "contention: {} hot key(s); poll retries after {}-{} ms; queue: LOCK ... WAIT {}; \
         lease {} ms, hold {} ms, pause {} ms; warm-up {} s, timed {} s",
        o.hot_keys,
        o.retry_ms,
        o.retry_ms + o.retry_jitter_ms,
        o.wait_ms,
        o.lease_ms,
        o.hold_ms,
        o.pause_ms,
        o.warmup,
        args.duration
    );
    let mut results = Vec::new();
    let mut run = 0;
    for t in targets {
        for &n in clients {
            for round in 0..args.rounds {
                for &m in &methods {
                    let r = run_method(t, args, (m, n, round, run), ticks)
                        .await
                        .with_context(|| format!("target {}, method {}", t.name, m.name()))?;
                    run += 1;
                    eprintln!(
                        "{} {} clients round {}: {:.0} cycles/s",
                        m.name(),
                        n,
                        round + 1,
                        r.cycles_per_sec
                    );
                    results.push(r);
                }
            }
        }
    }
    print!("{}", contention_table::tables(&results));
    if let Some(path) = &args.json {
        crate::write_json(
            path,
            &Report {
                workload: "contention",
                duration_s: args.duration,
                rounds: args.rounds,
                settings: &args.contention,
                targets,
                results: &results,
            },
        )?;
    }
    if let Some(path) = &args.plot {
        let one = clients.len() == 1 && args.rounds == 1 && targets.len() == 1;
        let lines: Vec<chart::GrantLine> = results
            .iter()
            .map(|r| {
                let name = if one {
                    r.method.name().to_string()
                } else {
                    format!("{} {}c r{}", r.method.name(), r.clients, r.round)
                };
                (name, r.grants_per_client.clone())
            })
            .collect();
        let on_leader: Vec<bool> = results.first().map_or_else(Vec::new, |r| {
            r.client_roles.iter().map(|x| x == "leader").collect()
        });
        chart::save_grants(path, &lines, &on_leader, &args.title)?;
    }
    let bad: u64 = results
        .iter()
        .map(|r| r.check.token_violations + r.check.overlaps + r.fenced)
        .sum();
    if bad > 0 {
        bail!("{bad} correctness violation(s); see above");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_parse_in_order_and_reject_unknown_ones() {
        assert_eq!(
            parse_methods("poll,queue"),
            Ok(vec![Method::Poll, Method::Queue])
        );
        assert_eq!(parse_methods(" queue "), Ok(vec![Method::Queue]));
        assert!(parse_methods("poll,spin").is_err());
        assert!(parse_methods("").is_err());
    }
}
