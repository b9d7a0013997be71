//! `palisade-bench`: lock-cycle throughput and latency against any RESP target.
//!
//! ```text
//! palisade-bench --target palisade=palisade@127.0.0.1:6379 --target redis=redis@127.0.0.1:7000 \
//!     --clients 16 --duration 10 --rounds 3 --workload cycle [--json out.json]
//! ```
//!
//! With several targets it alternates them round by round (so that drift in the machine's
//! state hits all alike) and prints per-round figures, medians and ratios to the first target.

mod client;
mod workload;

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Parser;
use hdrhistogram::Histogram;
use serde::Serialize;

use client::Client;
use workload::{Kind, Worker, Workload, RELEASE};

#[derive(Parser, Debug)]
#[command(
    name = "palisade-bench",
    version,
    about = "Lock-cycle benchmark for Palisade and Redis"
)]
struct Args {
    /// A target: NAME=KIND@HOST:PORT, KIND being palisade or redis. Repeat to compare.
    #[arg(long = "target", required = true)]
    targets: Vec<String>,
    /// Concurrent clients (connections).
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// Seconds per round and target.
    #[arg(long, default_value_t = 10)]
    duration: u64,
    /// Rounds (targets alternate within each round).
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// cycle, hot, read, or pipeline.
    #[arg(long, default_value = "cycle")]
    workload: String,
    /// Cycles in flight per client for the pipeline workload.
    #[arg(long, default_value_t = 16)]
    depth: usize,
    /// Write the results as JSON to this file.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}

struct Target {
    name: String,
    kind: Kind,
    addr: String,
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
        other => bail!("unknown target kind {other:?} (palisade or redis)"),
    };
    Ok(Target {
        name: name.into(),
        kind,
        addr: addr.into(),
    })
}

/// One round's result for one target.
#[derive(Serialize, Clone, Debug)]
struct RoundResult {
    target: String,
    round: usize,
    clients: usize,
    workload: String,
    ops_per_sec: f64,
    ops: u64,
    busy: u64,
    errors: u64,
    p50_us: u64,
    p90_us: u64,
    p99_us: u64,
    max_us: u64,
}

async fn run_round(
    t: &Target,
    args: &Args,
    workload: Workload,
    round: usize,
) -> anyhow::Result<RoundResult> {
    let done = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(args.duration);
    let mut sha = Vec::new();
    if t.kind == Kind::Redis {
        let mut c = Client::connect(&t.addr).await?;
        match c.call(&[b"SCRIPT", b"LOAD", RELEASE.as_bytes()]).await? {
            redis_protocol::resp2::types::OwnedFrame::BulkString(s) => sha = s,
            other => bail!("SCRIPT LOAD failed: {other:?}"),
        }
    }
    let mut tasks = Vec::new();
    for id in 0..args.clients {
        let (addr, done, sha) = (t.addr.clone(), done.clone(), sha.clone());
        let mut worker = Worker {
            id: id + round * 100_000,
            kind: t.kind,
            workload,
            release_sha: sha,
            n: 0,
        };
        tasks.push(tokio::spawn(async move {
            let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
            let mut c = Client::connect(&addr).await?;
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
    let progress = {
        let (done, name) = (done.clone(), t.name.clone());
        tokio::spawn(async move {
            let mut last = 0;
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let now = done.load(Ordering::Relaxed);
                eprint!(
                    "\r[round {}] {name}: {} ops/s, {now} total    ",
                    round + 1,
                    now - last
                );
                let _ = std::io::stderr().flush();
                last = now;
            }
        })
    };
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    let (mut busy, mut errors) = (0, 0);
    for task in tasks {
        let (h, b, e) = task.await??;
        hist.add(h)?;
        busy += b;
        errors += e;
    }
    progress.abort();
    eprint!("\r{:70}\r", "");
    let secs = started.elapsed().as_secs_f64();
    let ops = done.load(Ordering::Relaxed);
    Ok(RoundResult {
        target: t.name.clone(),
        round: round + 1,
        clients: args.clients,
        workload: args.workload.clone(),
        ops_per_sec: ops as f64 / secs,
        ops,
        busy,
        errors,
        p50_us: hist.value_at_quantile(0.50),
        p90_us: hist.value_at_quantile(0.90),
        p99_us: hist.value_at_quantile(0.99),
        max_us: hist.max(),
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        0.0
    } else {
        v[v.len() / 2]
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let targets = args
        .targets
        .iter()
        .map(|s| parse_target(s))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let workload = match args.workload.as_str() {
        "cycle" => Workload::Cycle,
        "hot" => Workload::Hot,
        "read" => Workload::Read,
        "pipeline" => Workload::Pipeline(args.depth.max(1)),
        other => bail!("unknown workload {other:?}"),
    };
    let mut results = Vec::new();
    println!(
        "{:<12} {:>5} {:>8} {:>12} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7}",
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
    for round in 0..args.rounds {
        for t in &targets {
            let r = run_round(t, &args, workload, round)
                .await
                .with_context(|| format!("target {}", t.name))?;
            println!(
                "{:<12} {:>5} {:>8} {:>12.0} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7}",
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
    println!(
        "\nmedians over {} round(s), workload {}, {} clients:",
        args.rounds, args.workload, args.clients
    );
    let base = median(
        results
            .iter()
            .filter(|r| r.target == targets[0].name)
            .map(|r| r.ops_per_sec)
            .collect(),
    );
    let base_p99 = median(
        results
            .iter()
            .filter(|r| r.target == targets[0].name)
            .map(|r| r.p99_us as f64)
            .collect(),
    );
    for t in &targets {
        let mine: Vec<&RoundResult> = results.iter().filter(|r| r.target == t.name).collect();
        let ops = median(mine.iter().map(|r| r.ops_per_sec).collect());
        let p99 = median(mine.iter().map(|r| r.p99_us as f64).collect());
        println!("{:<12} {:>12.0} ops/s  p99 {:>8.0} us  throughput ratio {:>6.2}x  p99 ratio {:>6.2}x  (vs {})", t.name, ops, p99, ops / base.max(1e-9), p99 / base_p99.max(1e-9), targets[0].name);
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&results)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
