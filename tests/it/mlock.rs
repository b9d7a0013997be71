//! MLOCK and MUNLOCK against real server processes: all keys or none with a token each,
//! the errors, movable key positions, waiting MLOCKs on crossed keys served in turn (no
//! deadlock), a timed-out or hung-up MLOCK leaving every queue, and a waiting MLOCK sent
//! through a follower of a 3-node cluster.

use std::time::{Duration, Instant};

use redis_protocol::resp2::types::OwnedFrame;

use crate::common::cluster::Cluster;
use crate::common::{decode2, show, wait_for, words, Conn, Server};

/// The tokens of an MLOCK reply (an array of integers); panics on anything else.
fn tokens(r: &[u8], what: &str) -> Vec<i64> {
    match decode2(r) {
        OwnedFrame::Array(items) => items
            .iter()
            .map(|i| match i {
                OwnedFrame::Integer(t) => *t,
                _ => panic!("{what}: not a token array: {}", show(r)),
            })
            .collect(),
        _ => panic!("{what}: expected tokens, got {}", show(r)),
    }
}

/// The holder LOCKINFO reports for `key`, if any.
fn holder(c: &mut Conn, key: &str) -> Option<String> {
    let OwnedFrame::Array(items) = decode2(&c.cmd(&["LOCKINFO", key])) else {
        return None;
    };
    let pos = items
        .iter()
        .position(|i| matches!(i, OwnedFrame::BulkString(b) if b == b"owner"))?;
    match items.get(pos + 1) {
        Some(OwnedFrame::BulkString(b)) => Some(String::from_utf8_lossy(b).into_owned()),
        _ => None,
    }
}

/// LOCKINFO's `waiters` of `key` (0 when the key has no record).
fn waiters(c: &mut Conn, key: &str) -> i64 {
    let OwnedFrame::Array(items) = decode2(&c.cmd(&["LOCKINFO", key])) else {
        return 0;
    };
    let pos = items
        .iter()
        .position(|i| matches!(i, OwnedFrame::BulkString(b) if b == b"waiters"));
    match pos.and_then(|p| items.get(p + 1)) {
        Some(OwnedFrame::Integer(n)) => *n,
        _ => 0,
    }
}

#[test]
fn all_keys_or_none_with_a_token_each() {
    let srv = Server::start();
    let mut c = srv.conn();
    let t = tokens(&c.c("MLOCK a PX 60000 KEYS 3 x y z"), "a");
    assert_eq!(t.len(), 3);
    assert!(t[0] < t[1] && t[1] < t[2], "each key its own token: {t:?}");
    // A retry by the owner: the same tokens, in the order asked.
    assert_eq!(
        tokens(&c.c("MLOCK a PX 60000 KEYS 2 z x"), "retry"),
        vec![t[2], t[0]]
    );
    // Another owner: nothing, not even the free key.
    assert_eq!(c.c("MLOCK b PX 60000 KEYS 2 free y"), b"$-1\r\n");
    assert_eq!(holder(&mut c, "free"), None, "no partial grant");
    // Each lease is an ordinary lock afterwards.
    assert_eq!(c.c(&format!("FENCEDSET res v {}", t[1])), b"+OK\r\n");
    assert_eq!(c.c("UNLOCK y a"), b":1\r\n");
    assert_eq!(c.c("MUNLOCK a KEYS 3 x y z"), b":2\r\n");
    assert_eq!(c.c("MUNLOCK a KEYS 1 x"), b":0\r\n");
    let again = tokens(&c.c("MLOCK b PX 60000 KEYS 2 free y"), "b");
    assert!(again[0] > t[2], "tokens keep rising: {again:?}");
    // RESP3: the same array; nil is RESP3's null.
    c.c("HELLO 3");
    let r = c.c("MLOCK c PX 100 KEYS 1 y");
    assert_eq!(r, b"_\r\n", "{}", show(&r));
    assert!(c.c("MLOCK c PX 100 KEYS 1 other").starts_with(b"*1\r\n:"));
}

#[test]
fn bad_lines_get_errors_and_keys_are_found_after_keys_n() {
    let srv = Server::start();
    let mut c = srv.conn();
    for (line, error) in [
        (
            "MLOCK o PX 100 KEYS 0",
            "-ERR numkeys should be greater than 0",
        ),
        (
            "MLOCK o PX 100 KEYS 3 a b",
            "-ERR Number of keys can't be greater than number of args",
        ),
        ("MLOCK o PX 100 KEYS 1 a b", "-ERR syntax error"),
        (
            "MLOCK o PX 100 KEYS 2 a a",
            "-ERR the same key appears twice",
        ),
        (
            "MLOCK o PX 0 KEYS 1 a",
            "-ERR invalid expire time in 'mlock' command",
        ),
        ("MLOCK o WAIT 5 KEYS 1 a", "-ERR syntax error"),
        (
            "MLOCK o PX 100 KEYS x a",
            "-ERR value is not an integer or out of range",
        ),
        (
            "MUNLOCK o KEYS 1",
            "-ERR wrong number of arguments for 'munlock' command",
        ),
    ] {
        let r = c.c(line);
        assert!(r.starts_with(error.as_bytes()), "{line}: {}", show(&r));
    }
    assert_eq!(
        c.c("COMMAND GETKEYS MLOCK o PX 1 WAIT 2 KEYS 2 a b"),
        b"*2\r\n$1\r\na\r\n$1\r\nb\r\n"
    );
    // No key was touched by the refused lines.
    assert_eq!(c.c("DBSIZE"), b":0\r\n");
}

/// A holder keeps x and y; m1 waits for (x, y), m2 for (y, x), and a LOCK for x waits
/// behind both. Each is served in turn when the one before it releases: no deadlock.
#[test]
fn waiting_mlocks_on_crossed_keys_are_served_in_turn() {
    let srv = Server::start();
    let mut h = srv.conn();
    tokens(&h.c("MLOCK h PX 60000 KEYS 2 x y"), "h");
    let mut m1 = srv.conn();
    m1.send(&words("MLOCK m1 PX 60000 WAIT 20000 KEYS 2 x y"));
    wait_for(Duration::from_secs(5), "m1 queued", || {
        (waiters(&mut h, "y") == 1).then_some(())
    });
    let mut m2 = srv.conn();
    m2.send(&words("MLOCK m2 PX 60000 WAIT 20000 KEYS 2 y x"));
    wait_for(Duration::from_secs(5), "m2 queued", || {
        (waiters(&mut h, "y") == 2).then_some(())
    });
    let mut s = srv.conn();
    s.send(&words("LOCK x s PX 60000 WAIT 20000"));
    wait_for(Duration::from_secs(5), "s queued", || {
        (waiters(&mut h, "x") == 3).then_some(())
    });
    // Releasing one key serves nobody: m1 needs both.
    assert_eq!(h.c("UNLOCK x h"), b":1\r\n");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(holder(&mut h, "x"), None, "x waits for m1");
    assert_eq!(h.c("UNLOCK y h"), b":1\r\n");
    let t1 = tokens(&m1.read_reply(), "m1");
    assert_eq!(
        (holder(&mut h, "x"), holder(&mut h, "y")),
        (Some("m1".into()), Some("m1".into()))
    );
    assert_eq!(m1.c("MUNLOCK m1 KEYS 2 x y"), b":2\r\n");
    let t2 = tokens(&m2.read_reply(), "m2");
    assert!(t2.iter().all(|t| t > &t1[1]), "{t1:?} then {t2:?}");
    assert_eq!(m2.c("MUNLOCK m2 KEYS 2 x y"), b":2\r\n");
    let ts = crate::common::as_int(&s.read_reply());
    assert!(ts > t2[1]);
}

#[test]
fn an_mlock_that_times_out_or_hangs_up_leaves_every_queue() {
    let srv = Server::start();
    let mut h = srv.conn();
    assert!(h.c("LOCK x h PX 60000").starts_with(b":"));
    let mut c = srv.conn();
    let start = Instant::now();
    assert_eq!(c.c("MLOCK m PX 60000 WAIT 300 KEYS 2 y x"), b"$-1\r\n");
    assert!(start.elapsed() >= Duration::from_millis(290));
    // y was free all along, and its queue is empty again: another owner takes it at once.
    wait_for(Duration::from_secs(5), "m left y's queue", || {
        (waiters(&mut h, "y") == 0).then_some(())
    });
    assert!(h.c("LOCK y other PX 60000").starts_with(b":"), "y is free");
    assert_eq!(h.c("UNLOCK y other"), b":1\r\n");
    // A waiting MLOCK whose client hangs up leaves both queues; x's release grants nobody.
    let mut gone = srv.conn();
    gone.send(&words("MLOCK g PX 60000 WAIT 0 KEYS 2 x y"));
    wait_for(Duration::from_secs(5), "g queued", || {
        (waiters(&mut h, "y") == 1).then_some(())
    });
    drop(gone);
    wait_for(Duration::from_secs(5), "g left the queues", || {
        (waiters(&mut h, "x") == 0 && waiters(&mut h, "y") == 0).then_some(())
    });
    assert_eq!(h.c("UNLOCK x h"), b":1\r\n");
    assert_eq!(holder(&mut h, "x"), None);
    assert_eq!(holder(&mut h, "y"), None);
}

/// A waiting MLOCK through a follower: it is granted when the holder releases on the
/// leader, and every node reports the same holders and tokens.
#[test]
fn a_waiting_mlock_through_a_follower_is_granted_on_every_node() {
    let cluster = Cluster::start(3, &[]);
    let leader = cluster.wait_leader(&[1, 2, 3]);
    let follower = [1, 2, 3]
        .into_iter()
        .find(|&n| n != leader)
        .expect("a follower");
    let mut l = cluster.conn(leader);
    assert!(l.c("LOCK b h PX 60000").starts_with(b":"));
    let mut f = cluster.conn(follower);
    f.send(&words("MLOCK m PX 60000 WAIT 20000 KEYS 3 a b c"));
    wait_for(Duration::from_secs(10), "m queued", || {
        (waiters(&mut l, "b") == 1).then_some(())
    });
    assert_eq!(l.c("UNLOCK b h"), b":1\r\n");
    let t = tokens(&f.read_reply(), "m");
    assert_eq!(t.len(), 3);
    cluster.wait_converged(&[1, 2, 3]);
    for node in [1, 2, 3] {
        let mut c = cluster.conn(node);
        for (key, token) in ["a", "b", "c"].iter().zip(&t) {
            assert_eq!(
                holder(&mut c, key).as_deref(),
                Some("m"),
                "node {node} {key}"
            );
            let info = c.cmd(&["LOCKINFO", key]);
            assert!(
                show(&info).contains(&format!(":{token}")),
                "node {node} {key}: {}",
                show(&info)
            );
        }
    }
}
