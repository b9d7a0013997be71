//! LOCKNOTIFY against a real server: a RESP3 connection that took a lease is pushed
//! `lock_lost` when the lease expires or another connection releases it, never for its own
//! UNLOCK or MUNLOCK, and RESP2 is refused with a pointer to keyspace events.

use std::time::Duration;

use crate::common::{show, Server};

/// The push `lock_lost key token owner why` in RESP3.
fn lost(key: &str, token: &str, owner: &str, why: &str) -> Vec<u8> {
    format!(
        ">5\r\n$9\r\nlock_lost\r\n${}\r\n{key}\r\n:{token}\r\n${}\r\n{owner}\r\n${}\r\n{why}\r\n",
        key.len(),
        owner.len(),
        why.len()
    )
    .into_bytes()
}

fn token_of(r: &[u8]) -> String {
    let s = String::from_utf8_lossy(r).into_owned();
    s.strip_prefix(':')
        .and_then(|t| t.strip_suffix("\r\n"))
        .unwrap_or_else(|| panic!("not a token: {}", show(r)))
        .to_string()
}

#[test]
fn a_lost_lease_is_pushed_to_the_connection_that_took_it() {
    let srv = Server::start();
    let mut c = srv.conn();
    assert!(c
        .c("LOCKNOTIFY ON")
        .starts_with(b"-ERR LOCKNOTIFY needs RESP3"));
    c.c("HELLO 3");
    assert_eq!(c.c("LOCKNOTIFY ON"), b"+OK\r\n");
    // Expiry.
    let t = token_of(&c.c("LOCK k o PX 150"));
    assert_eq!(c.read_reply(), lost("k", &t, "o", "expired"), "expiry push");
    // Released by another connection with the same owner.
    let t = token_of(&c.c("LOCK k o PX 60000"));
    let mut other = srv.conn();
    assert_eq!(other.c("UNLOCK k o"), b":1\r\n");
    assert_eq!(
        c.read_reply(),
        lost("k", &t, "o", "released"),
        "release push"
    );
    // Each key of an MLOCK is watched; this connection's own releases push nothing.
    let r = c.c("MLOCK o PX 60000 KEYS 2 a b");
    assert!(r.starts_with(b"*2\r\n"), "{}", show(&r));
    assert_eq!(c.c("UNLOCK a o"), b":1\r\n");
    assert_eq!(c.c("MUNLOCK o KEYS 1 b"), b":1\r\n");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(c.c("PING"), b"+PONG\r\n", "no push for its own releases");
    // OFF: nothing more.
    assert_eq!(c.c("LOCKNOTIFY OFF"), b"+OK\r\n");
    c.c("LOCK k o PX 100");
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(c.c("PING"), b"+PONG\r\n", "no push once off");
    // Another connection never hears of leases it did not take.
    let mut third = srv.conn();
    third.c("HELLO 3");
    assert_eq!(third.c("LOCKNOTIFY ON"), b"+OK\r\n");
    c.c("LOCK z o PX 100");
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(third.c("PING"), b"+PONG\r\n");
}
