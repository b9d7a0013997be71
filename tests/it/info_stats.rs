//! INFO's statistics against a real redis-server: the same commands go to both, and what
//! Redis 7 counts deterministically (errorstats, the calls, rejections and failures of
//! commandstats, total_commands_processed, input bytes, the keyspace line, the sections of
//! `INFO`, `INFO all` and `INFO everything`) must come out the same. Times (usec, CPU) and
//! rates are checked against what the test itself measures.

use std::collections::BTreeMap;
use std::thread;
use std::time::{Duration, Instant};

use crate::common::*;
use crate::differential::{diff, same, Step};

/// Commands that make every kind of count move: calls, failures inside a command, arity
/// rejections, NOAUTH-free unknown commands, errors inside EXEC and EXECABORT.
fn counted_steps() -> Vec<Step> {
    vec![
        same("SET k v"),
        same("GET k"),
        same("GET nokey"),
        same("INCR k"),
        same("LPUSH l a"),
        same("GET l"),
        same("GET"),
        same("SET k"),
        same("NOSUCHCOMMAND a b"),
        same("SET k v BADOPTION"),
        same("MULTI"),
        same("INCR k"),
        same("GET k"),
        same("EXEC"),
        same("MULTI"),
        same("GET"),
        same("EXEC"),
        same("CLIENT SETNAME me"),
        same("CLIENT GETNAME"),
        same("CLIENT NOSUCHSUB"),
        same("PING"),
        same("DEL k l"),
    ]
}

#[test]
fn errorstats_match_redis_resp2() {
    let mut steps = counted_steps();
    steps.push(same("INFO errorstats"));
    diff(2, &steps);
}

#[test]
fn errorstats_match_redis_resp3() {
    let mut steps = counted_steps();
    steps.push(same("INFO errorstats"));
    diff(3, &steps);
}

/// `cmdstat_<name>` to (calls, rejected_calls, failed_calls), checking each line's format.
fn commandstats(text: &str) -> BTreeMap<String, (u64, u64, u64)> {
    let mut out = BTreeMap::new();
    for line in text.split("\r\n").filter(|l| l.starts_with("cmdstat_")) {
        let (name, fields) = line.split_once(':').expect("cmdstat line");
        let f: BTreeMap<&str, &str> = fields
            .split(',')
            .map(|kv| kv.split_once('=').expect("key=value"))
            .collect();
        let keys: Vec<&str> = fields
            .split(',')
            .map(|kv| kv.split('=').next().unwrap())
            .collect();
        assert_eq!(
            keys,
            [
                "calls",
                "usec",
                "usec_per_call",
                "rejected_calls",
                "failed_calls"
            ],
            "{line}"
        );
        let per_call = f["usec_per_call"];
        assert!(
            per_call.split_once('.').is_some_and(|(_, d)| d.len() == 2),
            "usec_per_call has two decimals: {line}"
        );
        let n = |k: &str| f[k].parse::<u64>().unwrap_or_else(|_| panic!("{line}"));
        out.insert(
            name.to_string(),
            (n("calls"), n("rejected_calls"), n("failed_calls")),
        );
    }
    out
}

#[test]
fn commandstats_and_totals_match_redis() {
    let redis = RedisServer::start();
    let pal = Server::start();
    let (mut rc, mut pc) = (redis.conn(), pal.conn());
    let stats = |c: &mut Conn, section: &str| info_text(&c.cmd(&["INFO", section]), 2);
    let num = |text: &str, f: &str| -> u64 {
        info_field(text, f)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{f} in {text}"))
    };
    let before = (stats(&mut rc, "stats"), stats(&mut pc, "stats"));
    let bad = crate::differential::run_steps(&counted_steps(), &mut rc, &mut pc);
    assert!(bad.is_empty(), "replies differ:\n{}", bad.join("\n"));
    let after = (stats(&mut rc, "stats"), stats(&mut pc, "stats"));
    for field in [
        "total_commands_processed",
        "total_error_replies",
        "total_net_input_bytes",
    ] {
        let want = num(&after.0, field) - num(&before.0, field);
        let got = num(&after.1, field) - num(&before.1, field);
        assert_eq!(got, want, "{field} grew by {got}, redis: {want}");
    }
    let (want, got) = (
        commandstats(&stats(&mut rc, "commandstats")),
        commandstats(&stats(&mut pc, "commandstats")),
    );
    assert_eq!(got, want, "commandstats (calls, rejected, failed)");

    // The time a command took is counted: a write goes through the Raft log and its fsync.
    let text = stats(&mut pc, "commandstats");
    let set = info_field(&text, "cmdstat_set").expect("cmdstat_set");
    let usec: u64 = set
        .split(',')
        .find_map(|kv| kv.strip_prefix("usec="))
        .and_then(|v| v.parse().ok())
        .expect("usec");
    assert!(usec > 0, "cmdstat_set:{set}");
}

fn titles(text: &str) -> Vec<String> {
    text.split("\r\n")
        .filter(|l| l.starts_with("# "))
        .map(String::from)
        .collect()
}

/// `INFO`, `INFO default`, `INFO all` and `INFO everything` print Redis's sections, in
/// Redis's order, leaving out only Latencystats (not kept) and adding Palisade's `# Raft`.
#[test]
fn section_lists_match_redis() {
    let redis = RedisServer::start();
    let pal = Server::start();
    let (mut rc, mut pc) = (redis.conn(), pal.conn());
    for args in [
        &["INFO"][..],
        &["INFO", "default"],
        &["INFO", "all"],
        &["INFO", "everything"],
    ] {
        let want: Vec<String> = titles(&info_text(&rc.cmd(args), 2))
            .into_iter()
            .filter(|t| t != "# Latencystats")
            .collect();
        let got: Vec<String> = titles(&info_text(&pc.cmd(args), 2))
            .into_iter()
            .filter(|t| t != "# Raft")
            .collect();
        assert_eq!(got, want, "{args:?}");
    }
    for section in ["commandstats", "errorstats", "cpu", "keyspace", "cluster"] {
        let want = titles(&info_text(&rc.cmd(&["INFO", section]), 2));
        let got = titles(&info_text(&pc.cmd(&["INFO", section]), 2));
        assert_eq!(got, want, "INFO {section}");
    }
}

/// `pubsub_channels` and `pubsub_patterns` count this node's subscriptions as Redis does:
/// channels with at least one subscriber, and distinct patterns.
#[test]
fn pubsub_counts_match_redis() {
    let redis = RedisServer::start();
    let pal = Server::start();
    for port in [redis.port(), pal.port()] {
        let (mut a, mut b, mut observer) = (
            Conn::connect(port),
            Conn::connect(port),
            Conn::connect(port),
        );
        a.send(&["SUBSCRIBE", "c1", "c2"]);
        a.read_reply();
        a.read_reply();
        b.send(&["SUBSCRIBE", "c2", "c3"]);
        b.read_reply();
        b.read_reply();
        b.send(&["PSUBSCRIBE", "p*", "q*"]);
        b.read_reply();
        b.read_reply();
        a.send(&["PSUBSCRIBE", "p*"]);
        a.read_reply();
        let counts = |c: &mut Conn| {
            let text = info_text(&c.c("INFO stats"), 2);
            (
                info_field(&text, "pubsub_channels"),
                info_field(&text, "pubsub_patterns"),
            )
        };
        let want = (Some("3".to_string()), Some("2".to_string()));
        assert_eq!(counts(&mut observer), want, "port {port}");
        drop(b);
        wait_for(Duration::from_secs(5), "b's subscriptions to go", || {
            (counts(&mut observer) == (Some("2".into()), Some("1".into()))).then_some(())
        });
    }
}

#[test]
fn keyspace_matches_redis() {
    diff(
        2,
        &[
            same("INFO keyspace"),
            same("SET a 1"),
            same("HSET h f v"),
            same("INFO keyspace"),
            same("DEL a h"),
            same("INFO keyspace"),
        ],
    );
    // With TTLs: the same counts; avg_ttl is the exact mean remaining TTL (Redis estimates it
    // from samples, so its figure is not compared).
    let srv = Server::start();
    let mut c = srv.conn();
    c.c("SET a 1");
    c.c("SET b 1 PX 100000");
    c.c("SET c 1 PX 200000");
    c.c("SET gone 1 PX 1");
    thread::sleep(Duration::from_millis(20));
    let text = info_text(&c.c("INFO keyspace"), 2);
    let line = info_field(&text, "db0").expect("db0 line");
    let (counts, avg) = line.rsplit_once(",avg_ttl=").expect("avg_ttl");
    assert_eq!(counts, "keys=3,expires=2", "{line}");
    let avg: u64 = avg.parse().expect("avg_ttl number");
    assert!((140_000..=150_000).contains(&avg), "avg_ttl {avg}: {line}");
}

#[test]
fn cached_scripts_match_redis() {
    diff(
        2,
        &[
            same("SCRIPT LOAD \"return 1\""),
            same("SCRIPT LOAD \"return 2\""),
            same("SCRIPT LOAD \"return 1\""),
        ],
    );
    let redis = RedisServer::start();
    let pal = Server::start();
    for port in [redis.port(), pal.port()] {
        let mut c = Conn::connect(port);
        c.cmd(&["SCRIPT", "LOAD", "return 1"]);
        c.cmd(&["EVAL", "return 2", "0"]);
        let text = info_text(&c.c("INFO memory"), 2);
        assert_eq!(
            info_field(&text, "number_of_cached_scripts").as_deref(),
            Some("2"),
            "port {port}"
        );
    }
}

/// `# CPU` reports this process's own usage: it agrees with the kernel's figures in
/// /proc/<pid>/stat (clock ticks), and grows with work.
#[test]
fn cpu_is_the_process_own_usage() {
    let srv = Server::start();
    let mut c = srv.conn();
    let cpu = |c: &mut Conn| -> (f64, f64) {
        let text = info_text(&c.c("INFO cpu"), 2);
        let f = |name: &str| -> f64 {
            let v = info_field(&text, name).unwrap_or_else(|| panic!("{name}: {text}"));
            assert!(
                v.split_once('.').is_some_and(|(_, us)| us.len() == 6),
                "{name}:{v} is not seconds.micros"
            );
            v.parse().expect("seconds")
        };
        f("used_cpu_sys_children");
        f("used_cpu_user_children");
        (f("used_cpu_user"), f("used_cpu_sys"))
    };
    let (u0, s0) = cpu(&mut c);
    let pings: Vec<Vec<Vec<u8>>> = (0..20_000).map(|_| words("PING")).collect();
    for chunk in pings.chunks(2000) {
        c.pipeline(chunk);
    }
    let (u1, s1) = cpu(&mut c);
    assert!(
        u1 + s1 > u0 + s0,
        "CPU did not grow: {u0}+{s0} then {u1}+{s1}"
    );
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", srv.pid())).expect("stat");
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .expect("comm")
        .1
        .split_whitespace()
        .collect();
    // utime and stime are fields 14 and 15, the 12th and 13th after the command name.
    let ticks = |i: usize| fields[i].parse::<f64>().expect("ticks") / 100.0;
    let (ku, ks) = (ticks(11), ticks(12));
    let (u2, s2) = cpu(&mut c);
    assert!(
        (u2 - ku).abs() < 0.2 && (s2 - ks).abs() < 0.2,
        "INFO cpu user {u2} sys {s2}, /proc user {ku} sys {ks}"
    );
}

/// `instantaneous_ops_per_sec` is the rate of the last 1.6 s (16 samples of 100 ms), as in
/// Redis: close to what a busy client measures, and 0 again once it stops.
#[test]
fn instantaneous_ops_follow_the_load() {
    let srv = Server::start();
    let port = srv.port();
    let mut c = srv.conn();
    let ops = |c: &mut Conn| -> u64 {
        let text = info_text(&c.c("INFO stats"), 2);
        info_field(&text, "instantaneous_ops_per_sec")
            .and_then(|v| v.parse().ok())
            .expect("instantaneous_ops_per_sec")
    };
    let load = thread::spawn(move || {
        let mut busy = Conn::connect(port);
        let start = Instant::now();
        let mut n = 0u64;
        while start.elapsed() < Duration::from_millis(2500) {
            assert_eq!(busy.c("PING"), b"+PONG\r\n");
            n += 1;
        }
        n as f64 / start.elapsed().as_secs_f64()
    });
    thread::sleep(Duration::from_millis(2200));
    let during = ops(&mut c) as f64;
    let measured = load.join().expect("load thread");
    assert!(
        during > measured / 2.0 && during < measured * 2.0,
        "instantaneous_ops_per_sec {during}, the client measured {measured:.0}/s"
    );
    thread::sleep(Duration::from_millis(2000));
    assert_eq!(ops(&mut c), 0, "after 2 s without commands");
}
