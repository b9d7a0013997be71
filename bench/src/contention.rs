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
//! the token, an optional hold, `UNLOCK key owner`, an optional pause (the loop is in
//! [`crate::contender`]). Only the waiting differs between the methods. Each method runs for a warm-up, then for the timed duration;
//! a cycle counts if it started after the warm-up and ended before the deadline. Every grant
//! (also in the warm-up) goes into the token-order check of [`crate::grant`].

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use hdrhistogram::Histogram;
use serde::Serialize;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::contender::{Contender, Outcome};
use crate::fairness::{mean_of_role, worst_key_jain, Fairness};
use crate::grant::{self, Check};
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
    /// after which poll gives up and starts a new cycle. Both count as a timeout. 0: wait
    /// for ever (`WAIT 0`), up to the deadline for poll.
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
#[derive(Serialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// Retry LOCK after a sleep.
    #[default]
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

/// One timed run of one method.
#[derive(Serialize, Clone, Debug, Default)]
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

/// Which run of the workload: its method, client count, round (from 0) and number in the
/// whole invocation.
#[derive(Clone, Copy, Debug)]
struct RunId {
    method: Method,
    clients: usize,
    round: usize,
    run: usize,
}

/// Starts `id.clients` contenders on `members` for one run (see [`Contender`]).
fn start_contenders(
    id: RunId,
    members: &[String],
    opts: &ContentionArgs,
    (start, measure_from, deadline): (Instant, Instant, Instant),
    done: &Arc<AtomicU64>,
) -> Vec<JoinHandle<anyhow::Result<Outcome>>> {
    (0..id.clients)
        .map(|i| {
            let key = i % opts.hot_keys.max(1);
            let c = Contender {
                id: i,
                addr: members[i % members.len()].clone(),
                key,
                key_name: format!("contend:{}:{key}", id.run),
                method: id.method,
                opts: opts.clone(),
                start,
                measure_from,
                deadline,
                done: done.clone(),
            };
            tokio::spawn(c.run())
        })
        .collect()
}

/// Runs one method on `t`'s members: the contenders start, and the members' counters are
/// read when the warm-up ends and at the deadline. `id.run` makes the keys unique to the run,
/// so that no leftover lease or waiter of one run can slow the next.
async fn run_method(
    t: &Target,
    args: &Args,
    id: RunId,
    ticks: u64,
) -> anyhow::Result<MethodResult> {
    let (opts, members) = (&args.contention, &t.members);
    let roles_now = stats::sample(members).await;
    let start = Instant::now();
    let measure_from = start + Duration::from_secs(opts.warmup);
    let deadline = measure_from + Duration::from_secs(args.duration);
    let done = Arc::new(AtomicU64::new(0));
    let tasks = start_contenders(id, members, opts, (start, measure_from, deadline), &done);
    let label = format!(
        "[{} clients, round {}] {}",
        id.clients,
        id.round + 1,
        id.method.name()
    );
    let progress = progress::start(done, label, "cycles");
    tokio::time::sleep_until(measure_from).await;
    let before = stats::sample(members).await;
    tokio::time::sleep_until(deadline).await;
    let after = stats::sample(members).await;
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.push(task.await??);
    }
    drop(progress);
    let mut r = MethodResult {
        target: t.name.clone(),
        method: id.method,
        clients: id.clients,
        round: id.round + 1,
        seconds: deadline.duration_since(measure_from).as_secs_f64(),
        client_nodes: (0..id.clients)
            .map(|i| members[i % members.len()].clone())
            .collect(),
        client_roles: (0..id.clients)
            .map(|i| {
                roles_now[i % members.len()]
                    .role
                    .clone()
                    .unwrap_or_else(|| "?".into())
            })
            .collect(),
        server: RunStats::between(members, &before, &after, ticks),
        ..MethodResult::default()
    };
    r.tally(outcomes, opts.hot_keys)?;
    Ok(r)
}

impl MethodResult {
    /// Adds up the contenders' `outcomes` (in client order) and works out the figures.
    fn tally(&mut self, outcomes: Vec<Outcome>, hot_keys: usize) -> anyhow::Result<()> {
        let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
        let mut grants = Vec::new();
        for o in outcomes {
            hist.add(&o.hist)?;
            self.cycles += o.cycles;
            self.lock_commands += o.lock_commands;
            self.timeouts += o.timeouts;
            self.errors += o.errors;
            self.fenced += o.fenced;
            self.lost += o.lost;
            self.grants_per_client.push(o.cycles);
            grants.extend(o.grants);
        }
        self.cycles_per_sec = self.cycles as f64 / self.seconds.max(1e-9);
        self.acquire_p50_us = hist.value_at_quantile(0.5);
        self.acquire_p99_us = hist.value_at_quantile(0.99);
        self.acquire_max_us = hist.max();
        let per_client = &self.grants_per_client;
        self.fairness = Fairness::of(per_client);
        let keys: Vec<usize> = (0..per_client.len()).map(|i| i % hot_keys.max(1)).collect();
        self.key_jain_min = worst_key_jain(per_client, &keys);
        self.leader_mean = mean_of_role(per_client, &self.client_roles, "leader");
        self.follower_mean = mean_of_role(per_client, &self.client_roles, "follower");
        self.check = grant::check(&mut grants);
        Ok(())
    }
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
                    let id = RunId {
                        method: m,
                        clients: n,
                        round,
                        run,
                    };
                    let r = run_method(t, args, id, ticks)
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
        .map(|r| r.check.token_violations + r.check.overlaps + r.check.shared_tokens + r.fenced)
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

    #[test]
    fn the_options_parse_with_their_defaults() {
        use clap::Parser;
        let base = [
            "palisade-bench",
            "--target",
            "p=palisade@127.0.0.1:1",
            "--workload",
            "contention",
        ];
        let args = Args::try_parse_from(base).unwrap();
        let o = &args.contention;
        assert_eq!(
            (o.methods.as_str(), o.hot_keys, o.warmup),
            ("poll,queue", 4, 2)
        );
        assert_eq!((o.retry_ms, o.retry_jitter_ms, o.wait_ms), (5, 5, 5000));
        assert_eq!((o.lease_ms, o.hold_ms, o.pause_ms), (10_000, 0, 0));
        let more = ["--methods", "queue", "--retry-ms", "7", "--hold-ms", "1"];
        let args = Args::try_parse_from(base.into_iter().chain(more)).unwrap();
        let o = &args.contention;
        assert_eq!((o.methods.as_str(), o.retry_ms, o.hold_ms), ("queue", 7, 1));
    }
}
