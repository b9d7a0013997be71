//! Read-modify-write under fencing (docs/locks-and-fencing.md, "Read-modify-write needs
//! fenced reads").
//!
//! Two holders of one lock, A (older token) and B (newer token, after A's lease lapsed),
//! each increment a counter. The interleaving is fixed: A reads, B reads, A writes,
//! B writes.
//! - With GET + FENCEDSET both writes are accepted and one increment is lost.
//! - With FENCEDGET + FENCEDSET, B's read raises the fence, A's write is rejected, and A
//!   (told so) retries after B is done: no increment is lost.

use std::time::Duration;

use crate::common::*;

/// A takes `lock_key` with a 200 ms lease. Returns tA.
fn a_locks(a: &mut Conn, lock_key: &str) -> i64 {
    lock(a, lock_key, "A", 200).expect("A locks")
}

/// Once A's lease lapses (A is not told), B takes the lock. Returns tB.
fn b_takes_over(b: &mut Conn, lock_key: &str, ta: i64) -> i64 {
    let tb = wait_for(
        Duration::from_secs(10),
        "A's lease to lapse and B to lock",
        || lock(b, lock_key, "B", 60_000),
    );
    assert!(tb > ta, "B's token {tb} must be above A's {ta}");
    tb
}

#[track_caller]
fn read_counter(reply: &[u8]) -> i64 {
    let v = as_bulk(reply).unwrap_or_else(|| panic!("counter missing: {}", show(reply)));
    std::str::from_utf8(&v).unwrap().parse().unwrap()
}

#[test]
fn unfenced_read_loses_an_increment() {
    let srv = Server::start();
    let (mut a, mut b) = (srv.conn(), srv.conn());
    assert_reply(&a.c("SET ctr 5"), b"+OK\r\n", "initial value");
    // Phase 1: A reads while it holds the lock; then its lease lapses and B reads.
    let ta = a_locks(&mut a, "lock1");
    let va = read_counter(&a.c("GET ctr"));
    let tb = b_takes_over(&mut b, "lock1", ta);
    let vb = read_counter(&b.c("GET ctr"));
    assert_eq!((va, vb), (5, 5));
    let set =
        |c: &mut Conn, v: i64, t: i64| c.cmd(&["FENCEDSET", "ctr", &v.to_string(), &t.to_string()]);
    // Phase 2: A writes, then B writes; both are accepted.
    assert_reply(
        &set(&mut a, va + 1, ta),
        b"+OK\r\n",
        "A's write (fence was unset)",
    );
    assert_reply(
        &set(&mut b, vb + 1, tb),
        b"+OK\r\n",
        "B's write (higher token)",
    );
    // Two increments were acknowledged, but the counter moved by one.
    assert_reply(
        &a.c("GET ctr"),
        b"$1\r\n6\r\n",
        "one increment lost with GET + FENCEDSET",
    );
}

#[test]
fn fenced_read_loses_no_increment() {
    let srv = Server::start();
    let (mut a, mut b) = (srv.conn(), srv.conn());
    assert_reply(&a.c("SET ctr 5"), b"+OK\r\n", "initial value");
    let get = |c: &mut Conn, t: i64| c.cmd(&["FENCEDGET", "ctr", &t.to_string()]);
    let set =
        |c: &mut Conn, v: i64, t: i64| c.cmd(&["FENCEDSET", "ctr", &v.to_string(), &t.to_string()]);

    // Phase 1: A reads while it holds the lock; its lease lapses; B reads, which raises
    // the fence to tB.
    let ta = a_locks(&mut a, "lock2");
    let va = read_counter(&get(&mut a, ta));
    let tb = b_takes_over(&mut b, "lock2", ta);
    let vb = read_counter(&get(&mut b, tb));
    assert_eq!((va, vb), (5, 5));

    // Phase 2: A's write is rejected, B's is accepted.
    assert_reply(
        &set(&mut a, va + 1, ta),
        &fenced_err(ta, tb),
        "A's stale write",
    );
    assert_reply(&set(&mut b, vb + 1, tb), b"+OK\r\n", "B's write");
    assert_reply(&b.c("UNLOCK lock2 B"), b":1\r\n", "B releases");

    // Phase 3: A knows its write failed; it re-acquires and redoes its increment.
    let ta2 = lock(&mut a, "lock2", "A", 60_000).expect("A re-locks");
    assert!(ta2 > tb);
    let va2 = read_counter(&get(&mut a, ta2));
    assert_eq!(va2, 6, "A re-reads B's result");
    assert_reply(&set(&mut a, va2 + 1, ta2), b"+OK\r\n", "A's retried write");
    assert_reply(&a.c("GET ctr"), b"$1\r\n7\r\n", "both increments applied");

    // A late read with B's old token is refused too, so B cannot act on stale data.
    assert_reply(&get(&mut b, tb), &fenced_err(tb, ta2), "stale FENCEDGET");
}
