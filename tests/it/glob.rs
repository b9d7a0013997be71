//! Glob patterns (KEYS, SCAN MATCH, PSUBSCRIBE, scripts): Redis's semantics for the odd
//! cases, compared with a real redis-server, and bounded work for patterns that take a
//! backtracking matcher exponential time (CVE-2022-36021's shape).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::common::*;

/// Keys and patterns around the matcher's corner cases: classes with `]`, `-`, `^`, escapes,
/// unterminated classes, a trailing backslash, reversed ranges.
const KEYS: &[&str] = &[
    "a", "b", "]", "-", "\\", "ab", "a]", "a-b", "]a", "^", "a^", "[", "[a", "a[b", "b-", "aa",
    "ba", "lock:1", "lock:22", "l*ck",
];
const PATTERNS: &[&str] = &[
    "[a-]", "[]a]", "[^", "a\\", "*[", "[a-]*", "[\\]]", "[z-a]", "[^]a]", "[a-]b", "*a*", "\\",
    "[", "[^a", "a[b", "[]", "[]]", "[-a]", "[a-\\]]", "?", "*?", "[!a]", "[^-]", "lock:?",
    "lock:*", "l\\*ck", "l[*]ck", "*", "**", "?*?", "[a-c-]", "\\[a", "[\\",
];

fn sorted_keys(reply: &[u8]) -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = match decode2(reply) {
        redis_protocol::resp2::types::OwnedFrame::Array(items) => items
            .into_iter()
            .map(|f| match f {
                redis_protocol::resp2::types::OwnedFrame::BulkString(b) => b,
                other => panic!("not a bulk: {other:?}"),
            })
            .collect(),
        other => panic!("not an array: {other:?}"),
    };
    keys.sort();
    keys
}

#[test]
fn keys_patterns_match_redis_on_the_corner_cases() {
    let srv = Server::start();
    let redis = RedisServer::start();
    let (mut p, mut r) = (srv.conn(), redis.conn());
    for k in KEYS {
        for c in [&mut p, &mut r] {
            assert_reply(&c.cmd(&["SET", k, "1"]), b"+OK\r\n", "SET");
        }
    }
    for pat in PATTERNS {
        let (got, want) = (p.cmd(&["KEYS", pat]), r.cmd(&["KEYS", pat]));
        assert_eq!(
            sorted_keys(&got),
            sorted_keys(&want),
            "KEYS {pat:?}: palisade {} redis {}",
            show(&got),
            show(&want)
        );
    }
}

/// `*a*a*...*a*b` with `n` `*a` pairs.
fn pathological(n: usize) -> String {
    "*a".repeat(n) + "*b"
}

#[test]
fn a_pathological_pattern_is_answered_at_once_and_writes_keep_flowing() {
    let srv = Server::start();
    let mut c = srv.conn();
    let key = "a".repeat(40);
    assert_reply(&c.cmd(&["SET", &key, "1"]), b"+OK\r\n", "SET");
    // A writer on its own connection, counting acknowledged writes.
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(AtomicU64::new(0));
    let writer = {
        let (stop, acked, port) = (stop.clone(), acked.clone(), srv.port());
        thread::spawn(move || {
            let mut w = Conn::connect(port);
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                if w.cmd(&["SET", &format!("w:{i}"), "x"]) == b"+OK\r\n" {
                    acked.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    };
    // 20 pairs: a backtracking matcher tries on the order of C(40, 20) = 1.4e11 ways to
    // split the key among the stars (an estimate, not a measurement); Redis before 7.0.9
    // and Palisade before this matcher took 36 s with 10 pairs (the measurement).
    let pat = pathological(20);
    let mut sub = srv.conn();
    sub.cmd(&["PSUBSCRIBE", &pat]);
    let started = Instant::now();
    let before = acked.load(Ordering::Relaxed);
    assert_reply(&c.cmd(&["KEYS", &pat]), b"*0\r\n", "KEYS");
    assert_eq!(
        as_int(&c.cmd(&["PUBLISH", &key, "m"])),
        0,
        "the pattern does not match the channel"
    );
    let scan = c.cmd(&["SCAN", "0", "MATCH", &pat, "COUNT", "1000"]);
    assert!(scan.ends_with(b"*0\r\n"), "SCAN {}", show(&scan));
    // In a script the matcher runs inside apply, on every replica.
    let script = format!("return #redis.call('KEYS', '{pat}')");
    assert_reply(&c.cmd(&["EVAL", &script, "0"]), b":0\r\n", "EVAL KEYS");
    let took = started.elapsed();
    // Some writes were acknowledged while the pattern was being matched.
    wait_for(Duration::from_secs(5), "writes after the pattern", || {
        (acked.load(Ordering::Relaxed) > before + 10).then_some(())
    });
    stop.store(true, Ordering::Relaxed);
    writer.join().expect("writer");
    assert!(
        took < Duration::from_secs(1),
        "four pattern matches took {took:?}"
    );
    // And the pattern still matches what it should.
    let hit = "a".repeat(40) + "b";
    assert_reply(&c.cmd(&["SET", &hit, "1"]), b"+OK\r\n", "SET");
    assert_eq!(sorted_keys(&c.cmd(&["KEYS", &pat])), vec![hit.into_bytes()]);
}
