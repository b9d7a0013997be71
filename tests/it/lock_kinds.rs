//! RLOCK and SEMACQUIRE against a real server process: shared holders together, a writer
//! waiting for readers (and readers queued behind it), semaphore limits and their mismatch
//! error, UNLOCK / RENEW / LOCKINFO for every kind, fencing with a shared holder's token, a
//! waiting reader killed while queued, and a permit's lease expiring on its own.

use std::time::{Duration, Instant};

use crate::common::{show, try_int, words, Server};

fn token(r: &[u8], what: &str) -> i64 {
    try_int(r).unwrap_or_else(|| panic!("{what}: expected a token, got {}", show(r)))
}

/// True when LOCKINFO of `key` contains `needle`, checked until `within` runs out.
fn info_shows(c: &mut crate::common::Conn, key: &str, needle: &str, within: Duration) -> bool {
    let end = Instant::now() + within;
    loop {
        let info = String::from_utf8_lossy(&c.c(&format!("LOCKINFO {key}"))).into_owned();
        if info.contains(needle) {
            return true;
        }
        if Instant::now() > end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn readers_share_and_a_writer_waits_for_them_in_fifo_order() {
    let pal = Server::start();
    let mut a = pal.conn();
    let r1 = token(&a.c("RLOCK k r1 PX 60000"), "r1");
    let r2 = token(&a.c("RLOCK k r2 PX 60000"), "r2");
    assert_ne!(r1, r2, "each reader has its own token");
    assert_eq!(token(&a.c("RLOCK k r1 PX 60000"), "r1 again"), r1);
    // A writer is refused while readers hold the key, or waits.
    assert_eq!(a.c("LOCK k w PX 60000"), b"$-1\r\n");
    let mut w = pal.conn();
    w.send(&words("LOCK k w PX 60000 WAIT 20000"));
    assert!(info_shows(&mut a, "k", "waiters", Duration::from_secs(5)));
    // A reader behind the queued writer waits too.
    assert_eq!(a.c("RLOCK k r3 PX 60000"), b"$-1\r\n");
    let mut r3 = pal.conn();
    r3.send(&words("RLOCK k r3 PX 60000 WAIT 20000"));
    let mut r4 = pal.conn();
    r4.send(&words("RLOCK k r4 PX 60000 WAIT 20000"));
    assert!(info_shows(
        &mut a,
        "k",
        "\r\n:3\r\n",
        Duration::from_secs(5)
    ));
    let info = String::from_utf8_lossy(&a.c("LOCKINFO k")).into_owned();
    assert!(
        info.contains("shared") && info.contains("r1") && info.contains("r2"),
        "{info}"
    );
    assert_eq!(a.c("UNLOCK k r1"), b":1\r\n");
    assert_eq!(a.c("UNLOCK k r2"), b":1\r\n");
    let tw = token(&w.read_reply(), "writer");
    assert!(tw > r2);
    assert_eq!(a.c("UNLOCK k w"), b":1\r\n");
    // Both readers at the head are granted together, each with its own token.
    let t3 = token(&r3.read_reply(), "r3");
    let t4 = token(&r4.read_reply(), "r4");
    assert!(t3 > tw && t4 > tw && t3 != t4);
    assert_eq!(token(&a.c("RENEW k r3 PX 60000"), "renew"), t3);
    // A reader's token fences like a LOCK token.
    assert_eq!(a.c(&format!("FENCEDSET res v {t4}")), b"+OK\r\n");
    assert!(
        a.c(&format!("FENCEDSET res v {t3}"))
            .starts_with(b"-FENCED")
            || t3 > t4
    );
    assert_eq!(a.c("UNLOCK k r3"), b":1\r\n");
    assert_eq!(a.c("UNLOCK k r4"), b":1\r\n");
    assert_eq!(a.c("LOCKINFO k"), b"$-1\r\n");
}

#[test]
fn a_semaphore_grants_its_limit_and_each_permit_expires_alone() {
    let pal = Server::start();
    let mut a = pal.conn();
    let p1 = token(&a.c("SEMACQUIRE s a LIMIT 2 PX 300"), "a");
    let p2 = token(&a.c("SEMACQUIRE s b LIMIT 2 PX 60000"), "b");
    assert_ne!(p1, p2);
    assert_eq!(a.c("SEMACQUIRE s c LIMIT 2 PX 60000"), b"$-1\r\n");
    assert_eq!(
        a.c("SEMACQUIRE s c LIMIT 3 PX 60000"),
        b"-ERR semaphore limit mismatch\r\n"
    );
    assert!(a
        .c("RLOCK s c PX 60000")
        .starts_with(b"-ERR lock kind mismatch"));
    assert_eq!(a.c("LOCK s c PX 60000"), b"$-1\r\n");
    assert!(a.c("SEMACQUIRE s c LIMIT 0 PX 60000").starts_with(b"-ERR"));
    let info = String::from_utf8_lossy(&a.c("LOCKINFO s")).into_owned();
    assert!(
        info.contains("semaphore") && info.contains("limit"),
        "{info}"
    );
    // c waits; a's permit expires on its own (b keeps its) and c takes it.
    let mut c = pal.conn();
    c.send(&words("SEMACQUIRE s c LIMIT 2 PX 60000 WAIT 10000"));
    let pc = token(&c.read_reply(), "c");
    assert!(pc > p2);
    assert_eq!(
        a.c("RENEW s a PX 1000"),
        b"$-1\r\n",
        "a's permit has expired"
    );
    assert_eq!(token(&a.c("RENEW s b PX 60000"), "b renews"), p2);
    assert_eq!(a.c("UNLOCK s a"), b":0\r\n");
    assert_eq!(a.c("UNLOCK s b"), b":1\r\n");
    assert_eq!(a.c("UNLOCK s c"), b":1\r\n");
    assert_eq!(a.c("LOCKINFO s"), b"$-1\r\n");
}

#[test]
fn a_killed_reader_leaves_the_queue_and_a_timed_out_one_gets_nil() {
    let pal = Server::start();
    let mut admin = pal.conn();
    token(&admin.c("LOCK k w PX 60000"), "writer");
    let mut r = pal.conn();
    let id = try_int(&r.c("CLIENT ID")).expect("CLIENT ID");
    r.send(&words("RLOCK k r PX 60000 WAIT 60000"));
    assert!(info_shows(
        &mut admin,
        "k",
        "waiters",
        Duration::from_secs(5)
    ));
    assert_eq!(admin.c(&format!("CLIENT KILL ID {id}")), b":1\r\n");
    let end = Instant::now() + Duration::from_secs(3);
    while String::from_utf8_lossy(&admin.c("LOCKINFO k")).contains("waiters") {
        assert!(Instant::now() < end, "the killed reader is still queued");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut t = pal.conn();
    assert_eq!(t.c("RLOCK k t PX 60000 WAIT 200"), b"$-1\r\n");
    assert_eq!(admin.c("UNLOCK k w"), b":1\r\n");
    assert_eq!(admin.c("LOCKINFO k"), b"$-1\r\n", "nobody was granted");
}

/// A key held by readers or permits has no value, but `SET key owner NX` (the lock most
/// Redis users take) must still see it taken: no writer beside readers, whichever command
/// took the write lock. Once the shared holders are gone, SET NX succeeds again.
#[test]
fn set_nx_is_refused_while_readers_or_permits_hold_the_key() {
    let srv = Server::start();
    let mut c = srv.conn();
    token(&c.c("RLOCK r reader PX 60000"), "RLOCK");
    assert_eq!(
        c.c("SET r writer NX PX 60000"),
        b"$-1\r\n",
        "SET NX beside a reader"
    );
    assert_eq!(c.c("SETNX r writer"), b":0\r\n", "SETNX beside a reader");
    token(&c.c("SEMACQUIRE s p1 LIMIT 2 PX 60000"), "SEMACQUIRE");
    assert_eq!(c.c("SET s writer NX"), b"$-1\r\n", "SET NX beside a permit");
    assert_eq!(c.c("UNLOCK r reader"), b":1\r\n");
    assert_eq!(c.c("SET r writer NX PX 60000"), b"+OK\r\n", "free again");
}
