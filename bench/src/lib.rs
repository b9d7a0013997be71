//! `palisade-bench`, the library behind the binary: lock-cycle throughput and latency against Palisade, Redis and etcd.
//!
//! ```text
//! palisade-bench --target palisade=palisade@127.0.0.1:6379 --target redis-always=redis@127.0.0.1:7000 \
//!     --target etcd-3=etcd@127.0.0.1:2379 \
//!     --clients 1,4,16,64 --duration 10 --rounds 3 --workload cycle [--json out.json] [--plot out.png] \
//!     [--members palisade=127.0.0.1:6379,127.0.0.1:6380,127.0.0.1:6381]
//! palisade-bench --workload load --locks 1000000 --target p=palisade@127.0.0.1:6379
//! palisade-bench --workload contention --clients 16 --duration 20 --target p=palisade@127.0.0.1:6379 \
//!     --members p=127.0.0.1:6379,127.0.0.1:6380,127.0.0.1:6381 [--methods poll,queue] [--retry-ms 5]
//! ```
//!
//! For each client count, it alternates the targets round by round (so that drift in the
//! machine's state hits all alike), prints per-round figures, then one table of medians with
//! ratios to the reference target at the same client count. For RESP targets it also reads
//! each member node's INFO counters and CPU time just before and after every timed run, and
//! prints a second table of what the differences say: commands per log entry and entries per
//! fsync (Palisade), CPU ms per 1,000 cycles (all nodes of the target). `load` acquires N
//! distinct long-lived locks with deep pipelining and prints locks/s. `contention` compares
//! two ways of waiting for a held lock on a few hot keys, polling and `LOCK ... WAIT`, with
//! clients on every member: throughput, acquire latency, fairness, token order (see
//! [`contention`]). etcd targets run the cycle and hot workloads only.

pub mod chart;
mod client;
mod contender;
mod contention;
mod contention_table;
mod etcd;
mod fairness;
mod grant;
mod load;
mod progress;
mod report;
mod stats;
mod workload;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Parser;
use hdrhistogram::Histogram;
use serde::Serialize;

use client::Client;
use report::{RoundResult, Summary};
use stats::RunStats;
use workload::{Conn, Kind, Worker, Workload, RELEASE};

/// The command line of `palisade-bench`.
#[derive(Parser, Debug)]
#[command(
    name = "palisade-bench",
    version,
    about = "Lock-cycle benchmark for Palisade, Redis and etcd"
)]
pub struct Args {
    /// A target: NAME=KIND@HOST:PORT, KIND being palisade, redis or etcd (etcd v3.4's client
    /// port; cycle and hot workloads only), or NAME=redlock@HOST:PORT,HOST:PORT,... (Redlock
    /// over those Redis servers; cycle and hot workloads only). Repeat to compare.
    #[arg(long = "target", required_unless_present = "replot")]
    targets: Vec<String>,
    /// The nodes of target NAME, as NAME=HOST:PORT,HOST:PORT,... (client ports), whose INFO
    /// counters and CPU time (/proc, loopback nodes only) are read before and after each timed
    /// run. Repeat per target. Default for a palisade or redis target: its own address.
    #[arg(long = "members")]
    members: Vec<String>,
    /// Concurrent clients (connections): one count or a list such as 1,4,16,64. Every target
    /// runs at every count. The load workload uses the first count as its connection count.
    #[arg(long, default_value = "16")]
    clients: String,
    /// Seconds per round and target.
    #[arg(long, default_value_t = 10)]
    duration: u64,
    /// Rounds (targets alternate within each round).
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// cycle, hot, read, pipeline, load, or contention (Palisade only: poll versus LOCK WAIT
    /// on a few hot keys; see the contention options below). etcd targets: cycle or hot.
    #[arg(long, default_value = "cycle")]
    workload: String,
    /// Cycles in flight per client for the pipeline workload.
    #[arg(long, default_value_t = 16)]
    depth: usize,
    /// Write the results as JSON to this file.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
    /// Draw cycles/s and p99 against the client count into this PNG file (contention:
    /// grants per client, one line per run of a method).
    #[arg(long)]
    plot: Option<std::path::PathBuf>,
    /// Redraw --plot from the --json file of an earlier run, without running anything.
    #[arg(long, requires = "plot")]
    replot: Option<std::path::PathBuf>,
    /// The title of the plot.
    #[arg(long, default_value = "Lock cycles")]
    title: String,
    /// The target that ratios are taken against (default: the first target whose name
    /// starts with redis-always, else the first target).
    #[arg(long)]
    reference: Option<String>,
    /// load: how many distinct locks to acquire.
    #[arg(long, default_value_t = 1_000_000)]
    locks: u64,
    /// load: commands per pipelined batch.
    #[arg(long, default_value_t = 1000)]
    batch: usize,
    /// load: the locks' TTL in ms.
    #[arg(long, default_value_t = 3_600_000)]
    ttl: u64,
    /// The contention workload's options.
    #[command(flatten)]
    contention: contention::ContentionArgs,
}

#[derive(Serialize)]
struct Target {
    name: String,
    #[serde(serialize_with = "kind_name")]
    kind: Kind,
    addr: String,
    /// The nodes whose counters are read around each timed run (none for etcd).
    members: Vec<String>,
}

fn kind_name<S: serde::Serializer>(k: &Kind, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(match k {
        Kind::Palisade => "palisade",
        Kind::Redis => "redis",
        Kind::Etcd => "etcd",
        Kind::Redlock => "redlock",
    })
}

fn parse_target(s: &str) -> anyhow::Result<Target> {
    let (name, rest) = s
        .split_once('=')
        .context("target must be NAME=KIND@HOST:PORT")?;
    let (kind, addr) = rest
        .split_once('@')
        .context("target must be NAME=KIND@HOST:PORT")?;
    let kind = match kind {
        "palisade" => Kind::Palisade,
        "redis" => Kind::Redis,
        "etcd" => Kind::Etcd,
        "redlock" => Kind::Redlock,
        other => bail!("unknown target kind {other:?} (palisade, redis, etcd or redlock)"),
    };
    let members = match kind {
        Kind::Etcd => vec![],
        Kind::Palisade | Kind::Redis => vec![addr.to_string()],
        Kind::Redlock => addr.split(',').map(str::to_string).collect(),
    };
    Ok(Target {
        name: name.into(),
        kind,
        addr: addr.into(),
        members,
    })
}

/// Applies the --members options to `targets`.
fn set_members(targets: &mut [Target], options: &[String]) -> anyhow::Result<()> {
    for o in options {
        let (name, members) = stats::parse_members(o).map_err(anyhow::Error::msg)?;
        let t = targets
            .iter_mut()
            .find(|t| t.name == name)
            .with_context(|| format!("--members {o:?}: {name:?} is not a target name"))?;
        if t.kind == Kind::Etcd {
            bail!("--members {o:?}: {name} is an etcd target, which has no INFO counters");
        }
        t.members = members;
    }
    Ok(())
}

/// Runs `clients` workers against `t` for `args.duration` seconds. `run` numbers the runs of
/// the whole invocation, so that no two runs share keys. The members' counters are read just
/// before the workers start and just after the last one ends; `ticks` is /proc's clock rate.
async fn run_round(
    t: &Target,
    args: &Args,
    workload: Workload,
    clients: usize,
    round: usize,
    run: usize,
    ticks: u64,
) -> anyhow::Result<RoundResult> {
    let done = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(args.duration);
    let mut sha = Vec::new();
    if matches!(t.kind, Kind::Redis | Kind::Redlock) {
        // Every Redlock server needs the script; its SHA is the same on all.
        for addr in t.addr.split(',') {
            let mut c = Client::connect(addr).await?;
            match c.call(&[b"SCRIPT", b"LOAD", RELEASE.as_bytes()]).await? {
                redis_protocol::resp2::types::OwnedFrame::BulkString(s) => sha = s,
                other => bail!("SCRIPT LOAD failed: {other:?}"),
            }
        }
    }
    // An etcd client's lease must outlast the round, also when a slow target makes it overrun.
    let lease_secs = args.duration + 60;
    let before = stats::sample(&t.members).await;
    let mut tasks = Vec::new();
    for id in 0..clients {
        let (addr, done, sha) = (t.addr.clone(), done.clone(), sha.clone());
        let mut worker = Worker {
            id: id + run * 100_000,
            kind: t.kind,
            workload,
            release_sha: sha,
            n: 0,
        };
        tasks.push(tokio::spawn(async move {
            let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
            let mut c = Conn::connect(worker.kind, &addr, lease_secs).await?;
            let (mut busy, mut errors) = (0u64, 0u64);
            while Instant::now() < deadline {
                let start = Instant::now();
                let step = worker.step(&mut c).await?;
                if step.done > 0 {
                    let per = start.elapsed().as_micros() as u64 / step.done.max(1);
                    hist.record_n(per.max(1), step.done)?;
                    done.fetch_add(step.done, Ordering::Relaxed);
                }
                busy += step.busy;
                errors += step.errors;
            }
            anyhow::Ok((hist, busy, errors))
        }));
    }
    let started = Instant::now();
    let progress = progress::start(
        done.clone(),
        format!("[{clients} clients, round {}] {}", round + 1, t.name),
        "ops",
    );
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    let (mut busy, mut errors) = (0, 0);
    for task in tasks {
        let (h, b, e) = task.await??;
        hist.add(h)?;
        busy += b;
        errors += e;
    }
    drop(progress);
    let secs = started.elapsed().as_secs_f64();
    let ops = done.load(Ordering::Relaxed);
    let after = stats::sample(&t.members).await;
    Ok(RoundResult {
        target: t.name.clone(),
        round: round + 1,
        clients,
        workload: args.workload.clone(),
        ops_per_sec: ops as f64 / secs,
        ops,
        busy,
        errors,
        p50_us: hist.value_at_quantile(0.50),
        p90_us: hist.value_at_quantile(0.90),
        p99_us: hist.value_at_quantile(0.99),
        max_us: hist.max(),
        server: RunStats::between(&t.members, &before, &after, ticks),
    })
}

/// The index of the reference target: `wanted` by name, else the first redis-always target,
/// else the first.
fn reference(targets: &[Target], wanted: Option<&str>) -> anyhow::Result<usize> {
    if let Some(w) = wanted {
        return targets
            .iter()
            .position(|t| t.name == w)
            .with_context(|| format!("--reference {w:?} is not a target name"));
    }
    Ok(targets
        .iter()
        .position(|t| t.name.starts_with("redis-always"))
        .unwrap_or(0))
}

/// Everything --json writes for a sweep.
#[derive(Serialize)]
struct Report<'a> {
    workload: &'a str,
    duration_s: u64,
    rounds: usize,
    clients: &'a [usize],
    reference: &'a str,
    targets: &'a [Target],
    summary: &'a [Summary],
    round_results: &'a [RoundResult],
}

fn write_json<T: Serialize>(path: &std::path::Path, value: &T) -> anyhow::Result<()> {
    std::fs::write(path, serde_json::to_vec_pretty(value)?)
        .with_context(|| format!("writing {}", path.display()))
}

async fn run_load(args: &Args, targets: &[Target], conns: usize) -> anyhow::Result<()> {
    let mut out = Vec::new();
    for t in targets {
        let r = load::load(
            &t.name, t.kind, &t.addr, args.locks, conns, args.batch, args.ttl,
        )
        .await
        .with_context(|| format!("target {}", t.name))?;
        println!(
            "{}: {} locks in {:.1} s = {:.0} locks/s ({} granted, {} refused, {} errors; {} connections, batches of {})",
            r.target, r.locks, r.seconds, r.locks_per_sec, r.granted, r.refused, r.errors, r.connections, r.batch
        );
        out.push(r);
    }
    if let Some(path) = &args.json {
        write_json(path, &out)?;
    }
    Ok(())
}

/// What --replot reads back from a --json file.
#[derive(serde::Deserialize)]
struct Saved {
    targets: Vec<SavedTarget>,
    summary: Vec<Summary>,
}

#[derive(serde::Deserialize)]
struct SavedTarget {
    name: String,
}

/// Runs the benchmark that `args` describes: a sweep, a load, or a replot.
pub async fn run(args: Args) -> anyhow::Result<()> {
    if let (Some(json), Some(plot)) = (&args.replot, &args.plot) {
        let text = std::fs::read(json).with_context(|| format!("reading {}", json.display()))?;
        let saved: Saved = serde_json::from_slice(&text)
            .with_context(|| format!("{} is not the --json of a sweep", json.display()))?;
        let names: Vec<String> = saved.targets.into_iter().map(|t| t.name).collect();
        return chart::save(plot, &saved.summary, &names, &args.title);
    }
    let mut targets = args
        .targets
        .iter()
        .map(|s| parse_target(s))
        .collect::<anyhow::Result<Vec<_>>>()?;
    set_members(&mut targets, &args.members)?;
    let ticks = stats::ticks_per_sec();
    let clients = report::parse_clients(&args.clients).map_err(anyhow::Error::msg)?;
    let etcd = targets
        .iter()
        .find(|t| matches!(t.kind, Kind::Etcd | Kind::Redlock));
    let workload = match (args.workload.as_str(), etcd) {
        ("contention", _) => return contention::run(&args, &targets, &clients, ticks).await,
        ("cycle", _) => Workload::Cycle,
        ("hot", _) => Workload::Hot,
        (w @ ("read" | "pipeline" | "load"), Some(t)) => bail!(
            "target {} runs the cycle and hot workloads only, not {w}",
            t.name
        ),
        ("read", _) => Workload::Read,
        ("pipeline", _) => Workload::Pipeline(args.depth.max(1)),
        ("load", _) => return run_load(&args, &targets, clients[0]).await,
        (other, _) => bail!("unknown workload {other:?}"),
    };
    let reference = &targets[reference(&targets, args.reference.as_deref())?].name;
    let mut results = Vec::new();
    println!(
        "{:<14} {:>5} {:>8} {:>12} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7}",
        "target",
        "round",
        "clients",
        "ops/s",
        "p50 us",
        "p90 us",
        "p99 us",
        "max us",
        "busy",
        "errors"
    );
    let mut run = 0;
    for &n in &clients {
        for round in 0..args.rounds {
            for t in &targets {
                let r = run_round(t, &args, workload, n, round, run, ticks)
                    .await
                    .with_context(|| format!("target {}", t.name))?;
                run += 1;
                println!(
                    "{:<14} {:>5} {:>8} {:>12.0} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7}",
                    r.target,
                    r.round,
                    r.clients,
                    r.ops_per_sec,
                    r.p50_us,
                    r.p90_us,
                    r.p99_us,
                    r.max_us,
                    r.busy,
                    r.errors
                );
                results.push(r);
            }
        }
    }
    let names: Vec<String> = targets.iter().map(|t| t.name.clone()).collect();
    let summary = report::summarize(&results, &names, &clients, reference);
    let unit = match workload {
        Workload::Read => "ops",
        _ => "cycles",
    };
    println!(
        "\nworkload {}, {} s per round, {} round(s) per target and client count:",
        args.workload, args.duration, args.rounds
    );
    print!("{}", report::table(&summary, reference, unit));
    if report::has_server_figures(&summary) {
        println!("\nserver side, over the same timed runs:");
        print!("{}", report::server_table(&summary, unit));
    }
    if let Some(path) = &args.json {
        write_json(
            path,
            &Report {
                workload: &args.workload,
                duration_s: args.duration,
                rounds: args.rounds,
                clients: &clients,
                reference,
                targets: &targets,
                summary: &summary,
                round_results: &results,
            },
        )?;
    }
    if let Some(path) = &args.plot {
        chart::save(path, &summary, &names, &args.title)?;
    }
    Ok(())
}
