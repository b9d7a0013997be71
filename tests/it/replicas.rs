//! What Redis clients ask about replication, answered from Raft: `WAIT` counts the other
//! voters holding the log (on a 3-node cluster, through the leader and through a follower,
//! healthy and with a follower stopped), `ROLE` says master with the applied index as
//! offset, `LOLWUT` prints Palisade's version; their argument errors match redis-server.

use std::time::{Duration, Instant};

use crate::common::cluster::Cluster;
use crate::common::{as_int, show, Server};
use crate::differential::{diff, same, same_args, Step};

fn wait_steps() -> Vec<Step> {
    vec![
        same("SET k v"),
        // A single node has no replicas: 0 at once, or after the timeout.
        same("WAIT 0 0"),
        same("WAIT 1 100"),
        same("WAIT x 1"),
        same("WAIT 1 x"),
        same("WAIT 1 1.5"),
        same("WAIT 1 -1"),
        same("WAIT -1 -1"),
        same("WAIT 99999999999999999999 1"),
        same("WAIT 1"),
        same_args(&[b"EVAL", b"return redis.call('wait', 0, 0)", b"0"]),
        // Queued in MULTI, answered at EXEC without blocking.
        same("MULTI"),
        same("WAIT 1 0"),
        same("WAIT x 0"),
        same("EXEC"),
        same("ROLE x"),
        same("LOLWUT VERSION x"),
        same_args(&[b"EVAL", b"return redis.call('role')", b"0"]),
    ]
}

#[test]
fn wait_role_and_lolwut_errors_match_redis_resp2() {
    diff(2, &wait_steps());
}

#[test]
fn wait_role_and_lolwut_errors_match_redis_resp3() {
    diff(3, &wait_steps());
}

/// ROLE: a master with no replicas, its offset the applied index; LOLWUT: a bulk string
/// (verbatim in RESP3) ending with Palisade's version.
#[test]
fn role_is_master_and_lolwut_names_palisade() {
    let server = Server::start();
    let mut c = server.conn();
    assert_eq!(c.c("SET k v"), b"+OK\r\n");
    let role = c.c("ROLE");
    let text = String::from_utf8_lossy(&role).into_owned();
    let offset: i64 = text
        .strip_prefix("*3\r\n$6\r\nmaster\r\n:")
        .and_then(|rest| rest.strip_suffix("\r\n*0\r\n"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("ROLE: {}", show(&role)));
    assert!(offset > 0, "ROLE offset {offset}");
    let version = env!("CARGO_PKG_VERSION");
    let line = format!("Palisade ver. {version}\n");
    let want2 = format!("${}\r\n{line}\r\n", line.len());
    assert_eq!(c.c("LOLWUT"), want2.as_bytes());
    assert_eq!(c.c("LOLWUT VERSION 5 1 2"), want2.as_bytes());
    c.c("HELLO 3");
    let want3 = format!("={}\r\ntxt:{line}\r\n", line.len() + 4);
    assert_eq!(c.c("LOLWUT"), want3.as_bytes());
}

/// WAIT on a 3-node cluster: 2 once both followers hold the writes, asked on the leader or
/// on a follower; with a follower stopped, 1 after the timeout; inside MULTI, the count at
/// EXEC without waiting.
#[test]
fn wait_counts_the_voters_that_hold_the_log() {
    let mut cluster = Cluster::start(3, &[]);
    let leader = cluster.wait_leader(&[1, 2, 3]);
    let followers: Vec<u64> = (1..=3).filter(|id| *id != leader).collect();
    let (mut lc, mut fc) = (cluster.conn(leader), cluster.conn(followers[0]));
    assert_eq!(lc.c("SET a 1"), b"+OK\r\n");
    assert_eq!(lc.c("WAIT 2 5000"), b":2\r\n", "on the leader");
    assert_eq!(fc.c("SET b 1"), b"+OK\r\n");
    assert_eq!(fc.c("WAIT 2 5000"), b":2\r\n", "through a follower");
    assert_eq!(lc.c("WAIT 0 0"), b":2\r\n", "numreplicas 0 answers at once");
    for c in [&mut lc, &mut fc] {
        let role = c.c("ROLE");
        assert!(
            role.starts_with(b"*3\r\n$6\r\nmaster\r\n:"),
            "{}",
            show(&role)
        );
    }

    cluster.kill9(followers[1]);
    assert_eq!(lc.c("SET c 1"), b"+OK\r\n");
    for (c, on) in [(&mut lc, "leader"), (&mut fc, "follower")] {
        let start = Instant::now();
        assert_eq!(
            as_int(&c.c("WAIT 2 300")),
            1,
            "on the {on}, one follower down"
        );
        let took = start.elapsed();
        assert!(
            took >= Duration::from_millis(290) && took < Duration::from_secs(3),
            "WAIT 2 300 on the {on} took {took:?}"
        );
        let start = Instant::now();
        assert_eq!(as_int(&c.c("WAIT 1 0")), 1, "on the {on}");
        assert!(start.elapsed() < Duration::from_secs(2));
    }
    assert_eq!(lc.c("MULTI"), b"+OK\r\n");
    assert_eq!(lc.c("WAIT 2 0"), b"+QUEUED\r\n");
    let start = Instant::now();
    assert_eq!(lc.c("EXEC"), b"*1\r\n:1\r\n");
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "EXEC does not block"
    );
}
