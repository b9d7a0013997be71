//! Palisade's lock family (docs/locks-and-fencing.md): LOCK, UNLOCK, RENEW, LOCKINFO, FENCEDSET,
//! FENCEDGET, FENCECHECK, and the SET NX PX compatibility path. Exact reply bytes in RESP2
//! and RESP3, phase by phase.

use std::collections::BTreeSet;
use std::thread;
use std::time::{Duration, Instant};

use crate::common::*;

/// LOCKINFO's reply up to the pttl value; returns the pttl parsed from the rest.
#[track_caller]
fn lockinfo(c: &mut Conn, key: &str, owner: &str, token: i64) -> i64 {
    let r = c.cmd(&["LOCKINFO", key]);
    let header: &[u8] = if c.proto() == 3 { b"%3\r\n" } else { b"*6\r\n" };
    let mut want = header.to_vec();
    want.extend_from_slice(&bulk_bytes(b"owner"));
    want.extend_from_slice(&bulk_bytes(owner.as_bytes()));
    want.extend_from_slice(&bulk_bytes(b"token"));
    want.extend_from_slice(&int_bytes(token));
    want.extend_from_slice(&bulk_bytes(b"pttl"));
    assert!(
        r.starts_with(&want),
        "LOCKINFO {key} (RESP{}):\n  expected {}:<pttl>\\r\\n\n       got {}",
        c.proto(),
        show(&want),
        show(&r)
    );
    as_int(&r[want.len()..])
}

#[track_caller]
fn unlock(c: &mut Conn, key: &str, owner: &str) -> Vec<u8> {
    c.cmd(&["UNLOCK", key, owner])
}

#[track_caller]
fn fencecheck(c: &mut Conn, key: &str, token: i64) -> Vec<u8> {
    c.cmd(&["FENCECHECK", key, &token.to_string()])
}

/// The basic lifecycle in one protocol: acquire, re-acquire, contend, unlock, renew.
fn lifecycle(proto: u8) {
    let srv = Server::start();
    let mut a = srv.conn();
    let mut b = srv.conn();
    if proto == 3 {
        assert!(a.c("HELLO 3").starts_with(b"%"));
        assert!(b.c("HELLO 3").starts_with(b"%"));
    }
    let nil = nil(proto);

    // Phase 1: A acquires; the reply is an integer token.
    let t1 = lock(&mut a, "res", "A", 10_000).expect("free lock must be granted");
    assert!(t1 > 0, "token must be positive, got {t1}");

    // Phase 2: A re-locks with the same owner: same token, TTL reset.
    let t1b = lock(&mut a, "res", "A", 20_000).expect("re-lock by the holder");
    assert_eq!(
        t1b, t1,
        "re-LOCK by the same owner must return the same token"
    );
    let pttl = lockinfo(&mut a, "res", "A", t1);
    assert!(
        (18_000..=20_000).contains(&pttl),
        "re-LOCK must reset the TTL to 20000, pttl={pttl}"
    );

    // Phase 3: B cannot take it.
    assert_reply(&b.c("LOCK res B PX 10000"), nil, "LOCK by another owner");
    assert!(lockinfo(&mut b, "res", "A", t1) > 0, "A still holds");

    // Phase 4: UNLOCK by the wrong owner does nothing; by the holder releases.
    assert_reply(
        &unlock(&mut b, "res", "B"),
        b":0\r\n",
        "UNLOCK by a wrong owner",
    );
    assert_reply(
        &fencecheck(&mut b, "res", t1),
        b":1\r\n",
        "A still holds after B's UNLOCK",
    );
    assert_reply(
        &unlock(&mut a, "res", "A"),
        b":1\r\n",
        "UNLOCK by the holder",
    );
    assert_reply(&unlock(&mut a, "res", "A"), b":0\r\n", "second UNLOCK");
    assert_reply(&a.c("LOCKINFO res"), nil, "LOCKINFO after UNLOCK");
    assert_reply(
        &fencecheck(&mut a, "res", t1),
        b":0\r\n",
        "FENCECHECK after UNLOCK",
    );
    assert_reply(
        &unlock(&mut a, "never", "A"),
        b":0\r\n",
        "UNLOCK of a key never locked",
    );

    // Phase 5: B now gets it, with a higher token.
    let t2 = lock(&mut b, "res", "B", 1_000).expect("lock is free after UNLOCK");
    assert!(t2 > t1, "tokens must increase: {t1} then {t2}");

    // Phase 6: RENEW while held extends and returns the token; a wrong owner gets nil.
    assert_eq!(
        renew(&mut b, "res", "B", 1_000),
        Some(t2),
        "RENEW by the holder"
    );
    assert_eq!(
        renew(&mut a, "res", "A", 1_000),
        None,
        "RENEW by another owner"
    );
    let pttl = lockinfo(&mut b, "res", "B", t2);
    assert!(
        (1..=1_000).contains(&pttl),
        "pttl after RENEW PX 1000: {pttl}"
    );

    // Phase 7: after expiry, RENEW is nil and LOCKINFO is nil.
    thread::sleep(Duration::from_millis(1_500));
    assert_reply(&b.c("RENEW res B PX 10000"), nil, "RENEW after expiry");
    assert_reply(&b.c("LOCKINFO res"), nil, "LOCKINFO after expiry");
    assert_reply(
        &fencecheck(&mut b, "res", t2),
        b":0\r\n",
        "FENCECHECK after expiry",
    );

    // Phase 8: a new holder after expiry gets a higher token again.
    let t3 = lock(&mut a, "res", "A", 10_000).expect("lock is free after expiry");
    assert!(t3 > t2, "tokens must increase: {t2} then {t3}");
    assert_reply(&a.c("LOCKINFO missing"), nil, "LOCKINFO of a missing key");
}

#[test]
fn lock_lifecycle_resp2() {
    lifecycle(2);
}

#[test]
fn lock_lifecycle_resp3() {
    lifecycle(3);
}

/// FENCECHECK says whether a token is the live holder's token.
#[test]
fn fencecheck_reports_the_live_holder() {
    let srv = Server::start();
    let mut c = srv.conn();
    let t = lock(&mut c, "fc", "me", 10_000).unwrap();
    assert_reply(&fencecheck(&mut c, "fc", t), b":1\r\n", "holder's token");
    assert_reply(&fencecheck(&mut c, "fc", t - 1), b":0\r\n", "a lower token");
    assert_reply(
        &fencecheck(&mut c, "fc", t + 1),
        b":0\r\n",
        "a higher token",
    );
    assert_reply(
        &fencecheck(&mut c, "nolock", t),
        b":0\r\n",
        "a key that is not locked",
    );
    c.c("SET plain v");
    assert_reply(&fencecheck(&mut c, "plain", t), b":0\r\n", "a plain key");
    let r = c.c("FENCECHECK fc abc");
    assert!(
        r.starts_with(b"-ERR"),
        "non-integer token must be an -ERR, got {}",
        show(&r)
    );
    assert_reply(&c.c("UNLOCK fc me"), b":1\r\n", "UNLOCK");
    assert_reply(
        &fencecheck(&mut c, "fc", t),
        b":0\r\n",
        "token after UNLOCK",
    );
}

/// `SET k v NX PX` is a lock owned by `v`: LOCK by `v` returns its token, others get nil.
#[test]
fn set_nx_px_is_a_lock() {
    let srv = Server::start();
    let mut c = srv.conn();
    let before = lock(&mut c, "other", "x", 10_000).unwrap();

    assert_reply(
        &c.c("SET rl client-1 NX PX 10000"),
        b"+OK\r\n",
        "Redlock-style acquire",
    );
    assert_reply(
        &c.c("SET rl client-2 NX PX 10000"),
        b"$-1\r\n",
        "second acquire fails",
    );
    let t = lock(&mut c, "rl", "client-1", 10_000).expect("LOCK by the SET NX owner");
    assert!(
        t > before,
        "the SET NX grant came after token {before}, got {t}"
    );
    assert_eq!(
        lock(&mut c, "rl", "client-1", 10_000),
        Some(t),
        "stable token"
    );
    assert_eq!(lock(&mut c, "rl", "client-2", 10_000), None, "other owner");
    let pttl = lockinfo(&mut c, "rl", "client-1", t);
    assert!((9_000..=10_000).contains(&pttl), "pttl {pttl}");
    assert_reply(
        &fencecheck(&mut c, "rl", t),
        b":1\r\n",
        "FENCECHECK on a SET NX lock",
    );
    let after = lock(&mut c, "other2", "x", 10_000).unwrap();
    assert!(
        after > t,
        "later grants get higher tokens: {t} then {after}"
    );
    assert_reply(
        &c.c("UNLOCK rl client-1"),
        b":1\r\n",
        "UNLOCK of a SET NX lock",
    );
    assert_reply(&c.c("GET rl"), b"$-1\r\n", "key gone after UNLOCK");
}

/// A lock taken with LOCK is visible to plain Redis commands as a key holding the owner,
/// which is what Redlock-style release and check code reads.
#[test]
fn lock_is_a_string_key_holding_the_owner() {
    let srv = Server::start();
    let mut c = srv.conn();
    lock(&mut c, "lk", "owner-1", 10_000).unwrap();
    assert_reply(&c.c("GET lk"), b"$7\r\nowner-1\r\n", "GET on a lock key");
    assert_reply(&c.c("TYPE lk"), b"+string\r\n", "TYPE of a lock key");
    assert_reply(&c.c("EXISTS lk"), b":1\r\n", "EXISTS");
    let pttl = as_int(&c.c("PTTL lk"));
    assert!(
        (9_000..=10_000).contains(&pttl),
        "PTTL of a lock key: {pttl}"
    );
    assert_reply(
        &c.c("SET lk thief NX PX 10000"),
        b"$-1\r\n",
        "SET NX on a held lock",
    );
    assert_reply(
        &c.c("DEL lk"),
        b":1\r\n",
        "DEL releases like Redlock's release",
    );
    let t = lock(&mut c, "lk", "owner-2", 10_000).expect("free after DEL");
    let pttl = lockinfo(&mut c, "lk", "owner-2", t);
    assert!(pttl > 0);
}

/// Tokens strictly increase across 1,000 acquisitions of one key, pipelined so that many
/// grants share a batch (they must still get distinct, increasing tokens).
#[test]
fn tokens_strictly_increase_across_1000_acquisitions() {
    let srv = Server::start();
    let mut c = srv.conn();
    let mut cmds = Vec::new();
    for _ in 0..1000 {
        cmds.push(words("LOCK seq me PX 60000"));
        cmds.push(words("UNLOCK seq me"));
    }
    let replies = c.pipeline(&cmds);
    let mut last = 0i64;
    for (i, pair) in replies.chunks(2).enumerate() {
        let t =
            token_or_nil(&pair[0], 2, "LOCK").unwrap_or_else(|| panic!("acquisition {i} got nil"));
        assert!(
            t > last,
            "acquisition {i}: token {t} is not above the previous {last}"
        );
        assert_reply(&pair[1], b":1\r\n", &format!("UNLOCK {i}"));
        last = t;
    }
}

/// Concurrent acquirers on several connections: every grant's token is unique, and each
/// connection sees its own tokens strictly increase.
#[test]
fn tokens_unique_across_concurrent_connections() {
    let srv = Server::start();
    let port = srv.port();
    let workers: Vec<_> = (0..4)
        .map(|w| {
            thread::spawn(move || {
                let mut c = Conn::connect(port);
                let key = format!("k{w}");
                let mut cmds = Vec::new();
                for _ in 0..250 {
                    cmds.push(words(&format!("LOCK {key} w{w} PX 60000")));
                    cmds.push(words(&format!("UNLOCK {key} w{w}")));
                }
                let replies = c.pipeline(&cmds);
                replies
                    .chunks(2)
                    .map(|p| token_or_nil(&p[0], 2, "LOCK").expect("own key is free"))
                    .collect::<Vec<i64>>()
            })
        })
        .collect();
    let mut all = BTreeSet::new();
    for w in workers {
        let tokens = w.join().expect("worker");
        assert!(
            tokens.windows(2).all(|p| p[0] < p[1]),
            "per-connection order: {tokens:?}"
        );
        for t in tokens {
            assert!(all.insert(t), "token {t} was granted twice");
        }
    }
    assert_eq!(all.len(), 1000);
}

/// FENCEDSET / FENCEDGET against the fence: equal is accepted, lower rejected with the
/// exact `-FENCED` text; the fence survives DEL and expiry.
#[test]
fn fences() {
    let srv = Server::start();
    let mut c = srv.conn();
    let t1 = lock(&mut c, "L", "a", 60_000).unwrap();
    assert_reply(&c.c("UNLOCK L a"), b":1\r\n", "unlock");
    let t2 = lock(&mut c, "L", "b", 60_000).unwrap();
    assert!(t2 > t1);
    let (s1, s2) = (t1.to_string(), t2.to_string());

    // Phase 1: a first write sets the fence; equal tokens are accepted again.
    assert_reply(
        &c.cmd(&["FENCEDSET", "r", "v1", &s1]),
        b"+OK\r\n",
        "first FENCEDSET",
    );
    assert_reply(
        &c.cmd(&["FENCEDSET", "r", "v1b", &s1]),
        b"+OK\r\n",
        "equal token",
    );
    assert_reply(&c.c("GET r"), b"$3\r\nv1b\r\n", "value");
    assert_reply(
        &c.cmd(&["FENCEDSET", "r", "v2", &s2]),
        b"+OK\r\n",
        "higher token",
    );
    assert_reply(
        &c.cmd(&["FENCEDSET", "r", "old", &s1]),
        &fenced_err(t1, t2),
        "lower token",
    );
    assert_reply(
        &c.c("GET r"),
        b"$2\r\nv2\r\n",
        "rejected write left no trace",
    );

    // Phase 2: FENCEDGET returns the value and raises the fence.
    let t3 = lock(&mut c, "L3", "c", 60_000).unwrap();
    let s3 = t3.to_string();
    assert_reply(
        &c.cmd(&["FENCEDGET", "r", &s2]),
        b"$2\r\nv2\r\n",
        "FENCEDGET at the fence",
    );
    assert_reply(
        &c.cmd(&["FENCEDGET", "r", &s3]),
        b"$2\r\nv2\r\n",
        "FENCEDGET raising",
    );
    assert_reply(
        &c.cmd(&["FENCEDSET", "r", "x", &s2]),
        &fenced_err(t2, t3),
        "after FENCEDGET",
    );
    assert_reply(
        &c.cmd(&["FENCEDGET", "r", &s1]),
        &fenced_err(t1, t3),
        "FENCEDGET lower",
    );
    assert_reply(
        &c.cmd(&["FENCEDGET", "nokey", &s1]),
        b"$-1\r\n",
        "FENCEDGET of missing key",
    );
    assert_reply(
        &c.cmd(&["FENCEDSET", "nokey", "y", &s1]),
        b"+OK\r\n",
        "fence raised to t1 only",
    );
    assert_reply(
        &c.cmd(&["FENCEDGET", "nokey", &s3]),
        b"$1\r\ny\r\n",
        "read back",
    );

    // Phase 3: the fence outlives DEL.
    assert_reply(&c.c("DEL r"), b":1\r\n", "DEL");
    assert_reply(
        &c.cmd(&["FENCEDSET", "r", "z", &s2]),
        &fenced_err(t2, t3),
        "after DEL",
    );
    assert_reply(&c.c("GET r"), b"$-1\r\n", "still deleted");

    // Phase 4: the fence outlives expiry (FENCEDSET ... PX).
    assert_reply(
        &c.cmd(&["FENCEDSET", "e", "v", &s3, "PX", "500"]),
        b"+OK\r\n",
        "with PX",
    );
    let pttl = as_int(&c.c("PTTL e"));
    assert!(
        (1..=500).contains(&pttl),
        "PTTL after FENCEDSET PX 500: {pttl}"
    );
    thread::sleep(Duration::from_millis(800));
    assert_reply(&c.c("GET e"), b"$-1\r\n", "expired");
    assert_reply(
        &c.cmd(&["FENCEDSET", "e", "w", &s2]),
        &fenced_err(t2, t3),
        "after expiry",
    );

    // Phase 5: plain writes do not lower the fence.
    assert_reply(&c.c("SET r plain"), b"+OK\r\n", "plain SET");
    assert_reply(
        &c.cmd(&["FENCEDSET", "r", "z", &s1]),
        &fenced_err(t1, t3),
        "after plain SET",
    );

    // Phase 6: malformed tokens are command errors, and the connection stays usable.
    for bad in [
        &["FENCEDSET", "r", "v", "abc"][..],
        &["FENCEDGET", "r", "-x"],
        &["FENCEDSET", "r", "v"],
    ] {
        let r = c.cmd(bad);
        assert!(
            r.starts_with(b"-ERR"),
            "{bad:?} must be an -ERR, got {}",
            show(&r)
        );
    }
    assert_reply(&c.c("PING"), b"+PONG\r\n", "connection still usable");
}

/// RESP3: nil replies of the lock family are `_`.
#[test]
fn fences_resp3_nulls() {
    let srv = Server::start();
    let mut c = srv.conn();
    assert!(c.c("HELLO 3").starts_with(b"%"));
    let t = lock(&mut c, "L", "a", 60_000).unwrap().to_string();
    assert_reply(
        &c.cmd(&["FENCEDGET", "nokey", &t]),
        b"_\r\n",
        "FENCEDGET missing (RESP3)",
    );
    assert_reply(&c.c("LOCK L b PX 1000"), b"_\r\n", "LOCK contended (RESP3)");
    assert_reply(
        &c.c("RENEW L b PX 1000"),
        b"_\r\n",
        "RENEW by non-holder (RESP3)",
    );
}

/// Argument errors are `-ERR` replies, and the connection stays open.
#[test]
fn lock_argument_errors() {
    let srv = Server::start();
    let mut c = srv.conn();
    for line in [
        "LOCK",
        "LOCK k",
        "LOCK k o",
        "LOCK k o PX",
        "LOCK k o PX abc",
        "LOCK k o PX 0",
        "LOCK k o PX -5",
        "LOCK k o PX 1000 WAIT",
        "LOCK k o PX 1000 WAIT abc",
        "UNLOCK k",
        "RENEW k o",
        "RENEW k o PX 0",
        "LOCKINFO",
        "FENCEDSET k v",
        "FENCEDGET k",
        "FENCECHECK k",
    ] {
        let r = c.c(line);
        assert!(
            r.starts_with(b"-ERR "),
            "`{line}` must be an -ERR reply, got {}",
            show(&r)
        );
    }
    for line in ["LOCK", "UNLOCK k", "LOCKINFO", "FENCEDGET k"] {
        let name = line.split(' ').next().unwrap().to_ascii_lowercase();
        let want = format!("-ERR wrong number of arguments for '{name}' command\r\n");
        assert_reply(&c.c(line), want.as_bytes(), &format!("arity of `{line}`"));
    }
    assert_reply(
        &c.c("LOCKINFO k"),
        b"$-1\r\n",
        "no lock was created by the bad commands",
    );
    assert_reply(&c.c("PING"), b"+PONG\r\n", "still usable");
}

/// LOCK ... WAIT: waits for the holder's release or expiry, up to the WAIT time.
#[test]
fn lock_wait() {
    let srv = Server::start();
    let mut a = srv.conn();
    let t1 = lock(&mut a, "w", "A", 60_000).unwrap();

    // Phase 1: WAIT shorter than the holder's lease times out with nil, after the wait.
    let mut b = srv.conn();
    let start = Instant::now();
    assert_reply(
        &b.c("LOCK w B PX 10000 WAIT 200"),
        b"$-1\r\n",
        "WAIT times out",
    );
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(190),
        "LOCK WAIT 200 returned after {waited:?}"
    );
    assert!(
        waited < Duration::from_secs(5),
        "LOCK WAIT 200 took {waited:?}"
    );

    // Phase 2: a waiter gets the lock when the holder unlocks.
    let port = srv.port();
    let waiter = thread::spawn(move || {
        let mut b = Conn::connect(port);
        let r = b.c("LOCK w B PX 10000 WAIT 10000");
        (r, Instant::now())
    });
    wait_blocked(&mut a, 1);
    assert_reply(&a.c("UNLOCK w A"), b":1\r\n", "holder unlocks");
    let unlocked_at = Instant::now();
    let (r, got_at) = waiter.join().unwrap();
    let t2 = token_or_nil(&r, 2, "LOCK WAIT").expect("waiter must get the lock after UNLOCK");
    assert!(t2 > t1);
    let lag = got_at.saturating_duration_since(unlocked_at);
    assert!(
        lag < Duration::from_secs(3),
        "waiter got the lock {lag:?} after UNLOCK"
    );

    // Phase 3: a waiter gets the lock when the holder's lease expires.
    let t3 = lock(&mut a, "w2", "A", 300).unwrap();
    let start = Instant::now();
    let r = b.c("LOCK w2 B PX 10000 WAIT 5000");
    let t4 = token_or_nil(&r, 2, "LOCK WAIT").expect("waiter must get the lock after expiry");
    assert!(t4 > t3);
    assert!(
        start.elapsed() >= Duration::from_millis(250),
        "granted before A's lease ended"
    );
    lockinfo(&mut b, "w2", "B", t4);
}
