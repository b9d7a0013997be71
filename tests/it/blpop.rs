//! BLPOP/BRPOP: woken by a push from another client or from a script, the timeout and its
//! reply shapes, and python-redis-lock's wait-for-unlock flow.

use std::time::{Duration, Instant};

use crate::common::*;
use crate::lock_scripts::PRL_UNLOCK;

fn pair(key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut out = b"*2\r\n".to_vec();
    out.extend(bulk_bytes(key));
    out.extend(bulk_bytes(value));
    out
}

#[test]
fn blpop_is_woken_by_lpush() {
    let pal = Server::start();
    let mut waiter = pal.conn();
    let mut pusher = pal.conn();
    let start = Instant::now();
    waiter.send(&words("BLPOP q1 other 10"));
    wait_blocked(&mut pusher, 1);
    assert_reply(&pusher.c("LPUSH q1 x"), b":1\r\n", "push");
    assert_reply(&waiter.read_reply(), &pair(b"q1", b"x"), "woken BLPOP");
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_reply(&pusher.c("EXISTS q1"), b":0\r\n", "element consumed");
    // The second key of a multi-key BLPOP, and BRPOP from the tail.
    waiter.send(&words("BRPOP nothing q2 10"));
    wait_blocked(&mut pusher, 1);
    pusher.c("RPUSH q2 a b");
    assert_reply(&waiter.read_reply(), &pair(b"q2", b"b"), "BRPOP");
    // The connection is usable afterwards.
    assert_reply(&waiter.c("LLEN q2"), b":1\r\n", "after BRPOP");
}

#[test]
fn blpop_is_woken_by_a_script() {
    let pal = Server::start();
    let mut waiter = pal.conn();
    let mut pusher = pal.conn();
    waiter.send(&words("BLPOP sq 10"));
    wait_blocked(&mut pusher, 1);
    pusher.cmd(&[
        "EVAL",
        "return redis.call('lpush', KEYS[1], 'from-lua')",
        "1",
        "sq",
    ]);
    assert_reply(
        &waiter.read_reply(),
        &pair(b"sq", b"from-lua"),
        "woken by script",
    );
}

#[test]
fn blpop_timeout_replies_with_null_array() {
    let pal = Server::start();
    let mut c = pal.conn();
    let t = Instant::now();
    assert_reply(&c.c("BLPOP empty 0.3"), b"*-1\r\n", "RESP2 timeout");
    let waited = t.elapsed();
    assert!(
        waited >= Duration::from_millis(290) && waited < Duration::from_secs(3),
        "waited {waited:?}"
    );
    c.c("HELLO 3");
    assert_reply(&c.c("BLPOP empty 0.2"), b"_\r\n", "RESP3 timeout");
    assert_reply(&c.c("PING"), b"+PONG\r\n", "usable after timeout");
}

/// CLIENT LIST flags a client as blocked (`flags=b`, as Redis) only while it waits: not
/// while its BLPOP can pop at once, and not after it was woken or timed out.
#[test]
fn a_client_is_flagged_blocked_only_while_it_waits() {
    let pal = Server::start();
    let mut waiter = pal.conn();
    let mut other = pal.conn();
    let blocked = |c: &mut Conn| {
        let list = String::from_utf8_lossy(&c.c("CLIENT LIST")).into_owned();
        list.matches(" flags=b ").count()
    };
    other.c("RPUSH ready x");
    assert_reply(
        &waiter.c("BLPOP ready 10"),
        &pair(b"ready", b"x"),
        "pops at once",
    );
    assert_eq!(blocked(&mut other), 0, "a BLPOP that did not wait");
    waiter.send(&words("BLPOP later 10"));
    wait_blocked(&mut other, 1);
    let line = String::from_utf8_lossy(&other.c("CLIENT LIST")).into_owned();
    assert!(
        line.contains("flags=b") && line.contains("cmd=blpop"),
        "{line}"
    );
    other.c("LPUSH later y");
    assert_reply(&waiter.read_reply(), &pair(b"later", b"y"), "woken");
    assert_eq!(blocked(&mut other), 0, "after the wake-up");
    assert_reply(&waiter.c("BLPOP never 0.1"), b"*-1\r\n", "timeout");
    assert_eq!(blocked(&mut other), 0, "after the timeout");
}

/// One push wakes one waiter; the other keeps waiting until its own timeout.
#[test]
fn one_push_serves_one_waiter() {
    let pal = Server::start();
    let mut w1 = pal.conn();
    let mut w2 = pal.conn();
    let mut p = pal.conn();
    w1.send(&words("BLPOP one 1"));
    w2.send(&words("BLPOP one 1"));
    wait_blocked(&mut p, 2);
    p.c("LPUSH one only");
    let r1 = w1.read_reply();
    let r2 = w2.read_reply();
    let got = [r1.as_slice(), r2.as_slice()];
    assert!(got.contains(&pair(b"one", b"only").as_slice()), "{got:?}");
    assert!(got.contains(&b"*-1\r\n".as_slice()), "{got:?}");
}

/// python-redis-lock: a waiter that lost the SET NX blocks on the signal list; the
/// holder's unlock script pushes to it, and the waiter then acquires.
#[test]
fn python_redis_lock_wait_flow() {
    let pal = Server::start();
    let mut holder = pal.conn();
    let mut waiter = pal.conn();
    assert_reply(
        &holder.c("SET lock:job id1 NX EX 60"),
        b"+OK\r\n",
        "holder acquires",
    );
    assert_reply(
        &waiter.c("SET lock:job id2 NX EX 60"),
        b"$-1\r\n",
        "waiter is refused",
    );
    waiter.send(&words("BLPOP lock-signal:job 10"));
    wait_blocked(&mut holder, 1);
    let r = holder.cmd(&[
        "EVAL",
        PRL_UNLOCK,
        "2",
        "lock:job",
        "lock-signal:job",
        "id1",
        "100",
    ]);
    assert_reply(&r, b":0\r\n", "unlock script");
    assert_reply(
        &waiter.read_reply(),
        &pair(b"lock-signal:job", b"1"),
        "signal",
    );
    assert_reply(
        &waiter.c("SET lock:job id2 NX EX 60"),
        b"+OK\r\n",
        "waiter acquires",
    );
}
