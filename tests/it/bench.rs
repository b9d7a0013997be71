//! The benchmark's smoke run (issue 7): every workload of `palisade-bench` against a real
//! Palisade node and a real Redis, one short round each, so the tool cannot rot unnoticed.
//! Nothing here asserts a speed: only that every target completed cycles without errors.

use std::path::Path;

use clap::Parser;

use crate::common::*;

/// Runs `palisade-bench` with `args` and returns its JSON report. The benchmark is a separate
/// crate of the workspace, so its binary is not one of this package's (no
/// `CARGO_BIN_EXE_palisade-bench`): the test runs its library, which the binary is a thin
/// shell over, on a runtime of its own.
#[track_caller]
fn bench(args: &[&str], json: &Path) -> serde_json::Value {
    let argv = ["palisade-bench"]
        .iter()
        .chain(args)
        .copied()
        .chain(["--json", json.to_str().expect("a UTF-8 path")]);
    let args = palisade_bench::Args::try_parse_from(argv).expect("valid arguments");
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    if let Err(e) = rt.block_on(palisade_bench::run(args)) {
        panic!("palisade-bench failed: {e:#}");
    }
    let text = std::fs::read_to_string(json).expect("the JSON report");
    serde_json::from_str(&text).expect("valid JSON")
}

#[test]
fn the_bench_runs_every_workload_against_palisade_and_redis() {
    let srv = Server::start();
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let palisade = format!("palisade-1=palisade@127.0.0.1:{}", srv.port());
    let reference = format!("redis=redis@127.0.0.1:{}", redis.port());
    for workload in ["cycle", "hot", "read", "pipeline"] {
        let json = dir.path().join(format!("{workload}.json"));
        let report = bench(
            &[
                "--target",
                &palisade,
                "--target",
                &reference,
                "--workload",
                workload,
                "--clients",
                "1,4",
                "--duration",
                "1",
                "--rounds",
                "1",
            ],
            &json,
        );
        let rows = report["summary"].as_array().expect("summary rows");
        assert_eq!(
            rows.len(),
            4,
            "{workload}: 2 targets x 2 client counts: {report}"
        );
        for row in rows {
            let ops = row["ops_per_sec"].as_f64().unwrap_or(0.0);
            assert!(ops > 0.0, "{workload}: no cycles completed: {row}");
            assert_eq!(row["errors"].as_u64(), Some(0), "{workload}: errors: {row}");
        }
    }

    // The memory benchmark's loader: every lock granted, and the node holds them all.
    // On a fresh node: the workloads above leave keys behind (and there is no FLUSHALL).
    let fresh = Server::start();
    let palisade = format!("palisade-1=palisade@127.0.0.1:{}", fresh.port());
    let json = dir.path().join("load.json");
    bench(
        &[
            "--target",
            &palisade,
            "--workload",
            "load",
            "--locks",
            "5000",
            "--batch",
            "250",
            "--clients",
            "2",
        ],
        &json,
    );
    let mut c = fresh.conn();
    assert_reply(
        &c.c("DBSIZE"),
        b":5000\r\n",
        "DBSIZE after loading 5000 locks",
    );
}

/// The contention workload (issue 16) against one node: both ways of waiting complete cycles,
/// and its checker saw every grant in token order, without overlap, shared tokens, or a fenced
/// write refused while its lock was held.
#[test]
fn the_contention_workload_checks_every_grant() {
    let srv = Server::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let target = format!("p=palisade@127.0.0.1:{}", srv.port());
    let report = bench(
        &[
            "--target",
            &target,
            "--workload",
            "contention",
            "--clients",
            "8",
            "--duration",
            "1",
            "--warmup",
            "0",
        ],
        &dir.path().join("contention.json"),
    );
    let results = report["results"].as_array().expect("results");
    assert_eq!(results.len(), 2, "poll and queue: {report}");
    for r in results {
        assert!(r["cycles"].as_u64() > Some(0), "{r}");
        for f in ["token_violations", "overlaps", "shared_tokens"] {
            assert_eq!(r["check"][f], 0, "{f}: {r}");
        }
        assert_eq!(r["fenced"].as_u64(), Some(0), "{r}");
        assert_eq!(r["errors"].as_u64(), Some(0), "{r}");
    }
}
