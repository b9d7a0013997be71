//! Operational tools against a Palisade node: Debian's Prometheus exporter for Redis
//! (`prometheus-redis-exporter`) and redis-cli's `--stat`, `--scan` and `--bigkeys`.
//!
//! The keys are hashes and lists: `--bigkeys` sizes strings with STRLEN, which Palisade does
//! not have yet (another change adds it), so no string key is planted.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::*;

fn plant(c: &mut Conn) {
    c.c("HSET khash f1 v1 f2 v2");
    c.c("RPUSH klist a b c");
    c.c("HSET other f v");
}

/// The exporter binary, or None (loudly) outside CI; under CI=true it must be installed
/// (scripts/test.sh installs it).
fn exporter() -> Option<&'static str> {
    let bin = "prometheus-redis-exporter";
    let found = Command::new(bin)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    if found {
        return Some(bin);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{bin} is missing under CI: apt-get install -y prometheus-redis-exporter"
    );
    eprintln!("SKIPPED: {bin} is not installed (apt-get install -y prometheus-redis-exporter)");
    None
}

/// GET `path` over HTTP/1.0; the body, or None while nothing listens.
fn http_get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(local(port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    out.split_once("\r\n\r\n").map(|(_, body)| body.to_string())
}

/// The value of the first sample of `metric` (a name with its labels, as printed).
fn sample(body: &str, metric: &str) -> Option<f64> {
    body.lines()
        .find(|l| l.starts_with(metric) && l[metric.len()..].starts_with([' ', '{']))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[test]
fn prometheus_exporter_scrapes_a_node() {
    let Some(bin) = exporter() else { return };
    let pal = Server::start();
    let mut c = pal.conn();
    plant(&mut c);
    let web = free_port();
    let child = Command::new(bin)
        .arg(format!("--redis.addr=redis://127.0.0.1:{}", pal.port()))
        .arg(format!("--web.listen-address=127.0.0.1:{web}"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the exporter");
    let _guard = ChildGuard(child);
    let body = wait_for(Duration::from_secs(20), "the exporter's /metrics", || {
        http_get(web, "/metrics").filter(|b| b.contains("redis_up"))
    });
    assert_eq!(sample(&body, "redis_up"), Some(1.0), "redis_up:\n{body}");
    assert_eq!(
        sample(&body, "redis_db_keys{db=\"db0\"}"),
        Some(3.0),
        "redis_db_keys:\n{body}"
    );
    let clients = sample(&body, "redis_connected_clients").expect("redis_connected_clients");
    assert!(clients >= 2.0, "redis_connected_clients {clients}");
}

fn redis_cli(port: u16, args: &[&str]) -> std::process::Output {
    Command::new("redis-cli")
        .args(["-p", &port.to_string()])
        .args(args)
        .output()
        .expect("run redis-cli")
}

#[test]
fn redis_cli_scan_and_bigkeys_run_against_a_node() {
    let pal = Server::start();
    let mut c = pal.conn();
    plant(&mut c);
    let out = redis_cli(pal.port(), &["--scan", "--pattern", "k*"]);
    assert!(out.status.success(), "--scan: {out:?}");
    let mut keys: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    keys.sort();
    assert_eq!(keys, ["khash", "klist"]);
    let out = redis_cli(pal.port(), &["--bigkeys"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "--bigkeys: {out:?}");
    assert!(
        !text.contains("ERR") && out.stderr.is_empty(),
        "--bigkeys: {text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("Sampled 3 keys"), "{text}");
    assert!(
        text.contains("'\"khash\"' with 2 fields") && text.contains("'\"klist\"' with 3 items"),
        "{text}"
    );
}

#[test]
fn redis_cli_stat_prints_lines() {
    let pal = Server::start();
    let mut c = pal.conn();
    plant(&mut c);
    // Unbuffered (coreutils' stdbuf): the killed redis-cli never flushes its stdout.
    let child = Command::new("stdbuf")
        .args([
            "-o0",
            "redis-cli",
            "-p",
            &pal.port().to_string(),
            "--stat",
            "-i",
            "0.2",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run redis-cli --stat");
    std::thread::sleep(Duration::from_millis(1500));
    let mut guard = ChildGuard(child);
    let _ = guard.0.kill();
    let out = guard.0.wait_with_output_ref();
    let text = String::from_utf8_lossy(&out.0).into_owned();
    assert!(
        text.contains("keys") && text.contains("clients"),
        "header: {text}"
    );
    let rows = text
        .lines()
        .filter(|l| l.trim_start().starts_with('3'))
        .count();
    assert!(rows >= 2, "a few stat lines with 3 keys: {text}");
    assert!(
        !text.contains("ERR") && out.1.is_empty(),
        "--stat: {text}\n{}",
        String::from_utf8_lossy(&out.1)
    );
}

trait OutputRef {
    fn wait_with_output_ref(&mut self) -> (Vec<u8>, Vec<u8>);
}

impl OutputRef for std::process::Child {
    /// Reads what the killed child printed.
    fn wait_with_output_ref(&mut self) -> (Vec<u8>, Vec<u8>) {
        let _ = self.wait();
        let mut out = Vec::new();
        let mut err = Vec::new();
        if let Some(mut s) = self.stdout.take() {
            let _ = s.read_to_end(&mut out);
        }
        if let Some(mut s) = self.stderr.take() {
            let _ = s.read_to_end(&mut err);
        }
        (out, err)
    }
}
