//! `--metrics-addr`: a real node serves Prometheus text at `/metrics`; lock traffic moves
//! the lock families by exactly what was done; other paths are 404; a taken port stops the
//! node at start.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::common::*;

/// One HTTP/1.1 GET: (status, body).
fn http_get(port: u16, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect to the metrics port");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("read timeout");
    let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).expect("send the request");
    let mut raw = String::new();
    s.read_to_string(&mut raw).expect("read the response");
    let (head, body) = raw.split_once("\r\n\r\n").expect("a header and a body");
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status code");
    (status, body.to_string())
}

/// Parses the exposition: every sample line is `name[{labels}] value`, every name has the
/// `palisade_` prefix, and the text ends with `# EOF`. Returns the samples by their full
/// name (labels included).
fn parse(text: &str) -> BTreeMap<String, f64> {
    assert!(text.ends_with("# EOF\n"), "no # EOF at the end:\n{text}");
    let mut out = BTreeMap::new();
    for line in text.lines() {
        if line.starts_with('#') {
            let kind = line.split_whitespace().nth(1).unwrap_or("");
            assert!(
                ["HELP", "TYPE", "UNIT", "EOF"].contains(&kind),
                "bad comment: {line}"
            );
            continue;
        }
        let (name, value) = line.rsplit_once(' ').expect("a sample line");
        assert!(name.starts_with("palisade_"), "no palisade_ prefix: {line}");
        let value: f64 = value.parse().expect("a number");
        assert!(
            out.insert(name.to_string(), value).is_none(),
            "twice: {line}"
        );
    }
    out
}

fn scrape(port: u16) -> BTreeMap<String, f64> {
    let (status, body) = http_get(port, "/metrics");
    assert_eq!(status, 200, "{body}");
    parse(&body)
}

fn value(m: &BTreeMap<String, f64>, name: &str) -> f64 {
    *m.get(name)
        .unwrap_or_else(|| panic!("no {name} in the scrape: {m:?}"))
}

/// Polls the scrape until `name` reaches `want` (apply and the event task are async).
fn wait_for(port: u16, name: &str, want: f64) -> BTreeMap<String, f64> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let m = scrape(port);
        if value(&m, name) >= want || Instant::now() > deadline {
            return m;
        }
        thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn lock_traffic_moves_the_families_by_what_was_done() {
    let mport = free_port();
    let server = Server::start_with(&["--metrics-addr", &format!("127.0.0.1:{mport}")]);
    let mut c = server.conn();
    let before = wait_for(mport, "palisade_raft_has_leader", 1.0);
    assert_eq!(value(&before, "palisade_raft_has_leader"), 1.0);
    assert_eq!(value(&before, "palisade_raft_is_leader"), 1.0);
    assert!(value(&before, "palisade_raft_term") >= 1.0);

    // A grant and its release.
    let t1 = as_int(&c.c("LOCK m:1 a PX 10000"));
    assert_eq!(c.c("UNLOCK m:1 a"), b":1\r\n");
    // A lease that expires while held, then is granted to another owner.
    as_int(&c.c("LOCK m:2 b PX 100"));
    thread::sleep(Duration::from_millis(300));
    as_int(&c.c("LOCK m:2 c PX 10000"));
    // A fenced write with a stale token.
    let t3 = as_int(&c.c("LOCK m:3 d PX 10000"));
    assert_eq!(c.c(&format!("FENCEDSET res v {t3}")), b"+OK\r\n");
    let refused = c.c(&format!("FENCEDSET res v {t1}"));
    assert!(refused.starts_with(b"-FENCED"), "{}", show(&refused));
    // A waiter, granted when the holder lets go.
    let mut w = server.conn();
    w.send(&words("LOCK m:3 e PX 10000 WAIT 10000"));
    let queued = wait_for(mport, "palisade_lock_waiters", 1.0);
    assert_eq!(value(&queued, "palisade_lock_waiters"), 1.0);
    thread::sleep(Duration::from_millis(100));
    assert_eq!(c.c("UNLOCK m:3 d"), b":1\r\n");
    assert!(as_int(&w.read_reply()) > t3);

    let after = wait_for(
        mport,
        "palisade_lock_grants_total",
        value(&before, "palisade_lock_grants_total") + 5.0,
    );
    let moved = |name: &str| value(&after, name) - value(&before, name);
    assert_eq!(moved("palisade_lock_grants_total"), 5.0, "{after:?}");
    assert_eq!(moved("palisade_lock_releases_total"), 2.0);
    assert_eq!(moved("palisade_lock_expiries_total"), 1.0);
    assert_eq!(moved("palisade_fenced_rejections_total"), 1.0);
    assert_eq!(moved("palisade_lock_acquire_wait_seconds_count"), 1.0);
    assert!(value(&after, "palisade_lock_acquire_wait_seconds_sum") >= 0.1);
    assert_eq!(moved("palisade_lock_hold_seconds_count"), 3.0);
    assert_eq!(value(&after, "palisade_locks_held"), 2.0);
    assert_eq!(value(&after, "palisade_lock_waiters"), 0.0);
    assert!(moved("palisade_raft_applied_entries_total") >= 8.0);
    assert!(value(&after, "palisade_raft_fsync_seconds_count") > 0.0);
    assert!(value(&after, "palisade_raft_apply_seconds_count") > 0.0);
    assert!(value(&after, "palisade_raft_leader_changes_total") >= 1.0);
    assert!(moved("palisade_commands_processed_total") >= 9.0);
    assert!(value(&after, "palisade_connected_clients") >= 2.0);
    assert_eq!(
        value(&after, "palisade_raft_applied_index"),
        value(&after, "palisade_raft_committed_index")
    );

    let (status, _) = http_get(mport, "/other");
    assert_eq!(status, 404);
    dashboard_queries_name_served_families(&after);
}

/// Every `palisade_*` name in the Grafana dashboard's queries is a family the node serves.
fn dashboard_queries_name_served_families(scraped: &BTreeMap<String, f64>) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/grafana-palisade.json");
    let text = std::fs::read_to_string(path).expect("read the dashboard");
    let dash: serde_json::Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let panels = dash["panels"].as_array().expect("panels");
    assert!(panels.len() >= 10);
    for target in panels
        .iter()
        .flat_map(|p| p["targets"].as_array().expect("targets"))
    {
        let expr = target["expr"].as_str().expect("expr");
        for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if word.starts_with("palisade_") {
                let served = scraped
                    .keys()
                    .any(|k| k == word || k.starts_with(&format!("{word}{{")));
                assert!(served, "the dashboard queries {word}, which is not served");
            }
        }
    }
}

#[test]
fn a_taken_metrics_port_stops_the_node_at_start() {
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
    let mport = taken.local_addr().expect("addr").port();
    let dir = tempfile::tempdir().expect("tempdir");
    let ports = free_ports(2);
    let mut child = Command::new(env!("CARGO_BIN_EXE_palisade"))
        .args(["--bind", "127.0.0.1", "--port", &ports[0].to_string()])
        .args(["--peer-port", &ports[1].to_string(), "--dir"])
        .arg(dir.path().join("data"))
        .args(["--metrics-addr", &format!("127.0.0.1:{mport}")])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run palisade");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("palisade kept running with its metrics port taken");
        }
        thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        e.read_to_string(&mut err).expect("stderr");
    }
    assert!(!status.success());
    assert!(err.contains("--metrics-addr"), "{err}");
    drop(taken);
}

#[test]
fn every_node_counts_the_lock_events_of_its_own_applied_log() {
    let ports = free_ports(3);
    let extra = (1..=3u64)
        .map(|id| {
            let addr = format!("127.0.0.1:{}", ports[id as usize - 1]);
            (id, vec!["--metrics-addr".to_string(), addr])
        })
        .collect();
    let cluster = crate::common::cluster::Cluster::start_with(3, &[], extra);
    let leader = cluster.wait_leader(&[1, 2, 3]);
    let mut c = cluster.conn(leader);
    for i in 0..3 {
        as_int(&c.c(&format!("LOCK n:{i} a PX 10000")));
        assert_eq!(c.c(&format!("UNLOCK n:{i} a")), b":1\r\n");
    }
    let t = as_int(&c.c("LOCK n:x a PX 10000"));
    assert!(c.c(&format!("FENCEDSET n:r v {t}")).starts_with(b"+OK"));
    assert!(c.c("FENCEDSET n:r v 1").starts_with(b"-FENCED"));
    cluster.wait_converged(&[1, 2, 3]);
    let scrapes: Vec<_> = ports
        .iter()
        .map(|p| wait_for(*p, "palisade_lock_grants_total", 4.0))
        .collect();
    for (id, m) in (1..=3u64).zip(&scrapes) {
        // Every node applied the same entries, so its lock counters moved alike.
        assert_eq!(value(m, "palisade_lock_grants_total"), 4.0, "node {id}");
        assert_eq!(value(m, "palisade_lock_releases_total"), 3.0, "node {id}");
        assert_eq!(value(m, "palisade_locks_held"), 1.0, "node {id}");
        assert_eq!(value(m, "palisade_raft_has_leader"), 1.0, "node {id}");
        // Fenced refusals are counted where the client was served.
        let fenced = if id == leader { 1.0 } else { 0.0 };
        assert_eq!(
            value(m, "palisade_fenced_rejections_total"),
            fenced,
            "node {id}"
        );
    }
    let leaders: f64 = scrapes
        .iter()
        .map(|m| value(m, "palisade_raft_is_leader"))
        .sum();
    assert_eq!(leaders, 1.0);
}
