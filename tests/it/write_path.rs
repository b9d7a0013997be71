//! The write path on openraft 0.10: the leader replicates an entry while its own log sync
//! is still running, counts itself only once that sync is done, and acknowledges a write
//! only after a quorum has synced it. `RAFT.FAULT SYNCDELAY ms` (fault injection) makes
//! every log sync of one node wait that long first, so the tests can tell the syncs apart.

use std::time::{Duration, Instant};

use crate::common::cluster::Cluster;
use crate::common::{as_bulk, assert_reply, info_field, info_text, wait_for};

/// Each delayed sync takes at least this long.
const SLOW_SYNC_MS: u64 = 1500;

fn followers(leader: u64) -> Vec<u64> {
    (1..=3).filter(|id| *id != leader).collect()
}

fn set_sync_delay(c: &Cluster, id: u64, ms: u64) {
    let mut conn = c.conn(id);
    assert_reply(
        &conn.c(&format!("RAFT.FAULT SYNCDELAY {ms}")),
        b"+OK\r\n",
        "RAFT.FAULT SYNCDELAY",
    );
}

/// Runs one SET on the leader and returns how long its acknowledgement took.
fn timed_set(c: &Cluster, leader: u64, key: &str) -> Duration {
    let mut conn = c.conn(leader);
    let started = Instant::now();
    assert_reply(&conn.c(&format!("SET {key} v")), b"+OK\r\n", "SET");
    started.elapsed()
}

#[test]
fn the_leader_replicates_before_its_own_sync_and_acknowledges_only_after_a_quorum_synced() {
    let c = Cluster::start(3, &["--enable-fault-injection"]);
    let leader = c.wait_leader(&[1, 2, 3]);
    let f = followers(leader);
    timed_set(&c, leader, "warm");

    // Phase 1: only the leader's syncs are slow. The two followers form a quorum on their
    // own, so the write commits and is acknowledged long before the leader's sync ends: the
    // entry went out before the leader's own sync completed. (Under openraft 0.9 the leader
    // replicated only after its sync, and this took longer than SLOW_SYNC_MS.)
    set_sync_delay(&c, leader, SLOW_SYNC_MS);
    let took = timed_set(&c, leader, "fast");
    assert!(
        took < Duration::from_millis(SLOW_SYNC_MS * 2 / 3),
        "a write waited for the leader's slow sync: {took:?}"
    );

    // Phase 2: the leader and one follower sync slowly. A quorum now needs the fast
    // follower and one slow node, so no write may be acknowledged before a slow sync ended.
    set_sync_delay(&c, f[0], SLOW_SYNC_MS);
    for i in 0..3 {
        let took = timed_set(&c, leader, &format!("slow{i}"));
        assert!(
            took >= Duration::from_millis(SLOW_SYNC_MS),
            "write {i} was acknowledged after {took:?}, before a quorum had synced it"
        );
    }
    set_sync_delay(&c, f[0], 0);
    set_sync_delay(&c, leader, 0);
}

/// A power cut (kill -9 with unsynced writes lost) of a leader whose syncs lag behind its
/// followers' loses no acknowledged write: each one was on a quorum's disks.
#[test]
fn a_leader_killed_mid_sync_loses_no_acknowledged_write() {
    let mut c = Cluster::start(
        3,
        &["--enable-fault-injection", "--test-lose-unsynced-writes"],
    );
    let leader = c.wait_leader(&[1, 2, 3]);
    let f = followers(leader);
    set_sync_delay(&c, leader, 3000);
    let mut conn = c.conn(leader);
    let keys = 40;
    for i in 0..keys {
        assert_reply(&conn.c(&format!("SET dur{i} v{i}")), b"+OK\r\n", "SET");
    }
    // The leader is inside a 3 s sync delay: these writes are acknowledged but not on its
    // disk. Cut its power.
    c.kill9(leader);
    let new_leader = c.wait_leader(&f);
    c.restart(leader);
    for id in [new_leader, leader] {
        let mut conn = c.conn(id);
        for i in 0..keys {
            let key = format!("dur{i}");
            // Errors (no leader yet) and nil are retried; a lost write times out here.
            let got = wait_for(Duration::from_secs(20), &key, || {
                let reply = conn.c(&format!("GET {key}"));
                reply.starts_with(b"$").then(|| as_bulk(&reply)).flatten()
            });
            assert_eq!(
                got,
                format!("v{i}").into_bytes(),
                "node {id}: acknowledged {key}"
            );
        }
    }
}

/// INFO raft's append stream counters of node `id`: requests sent, commit-only ones dropped.
fn peer_appends(c: &Cluster, id: u64) -> (u64, u64) {
    let text = info_text(&c.conn(id).c("INFO raft"), 2);
    let field = |name: &str| {
        info_field(&text, name)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("INFO raft has no {name}: {text}"))
    };
    (
        field("raft_peer_appends_sent"),
        field("raft_peer_appends_coalesced"),
    )
}

/// Under a steady stream of writes, the leader drops commit-only appends that the next
/// append of the same stream covers (`raft::pipeline`'s coalescing), and INFO raft shows it;
/// every write is still acknowledged and every node ends with all of them.
#[test]
fn commit_only_appends_are_coalesced_under_load() {
    let c = Cluster::start(3, &[]);
    let leader = c.wait_leader(&[1, 2, 3]);
    let (sent0, coalesced0) = peer_appends(&c, leader);
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let mut conn = c.conn(leader);
            std::thread::spawn(move || {
                let until = Instant::now() + Duration::from_secs(3);
                let mut n = 0u64;
                while Instant::now() < until {
                    assert_reply(
                        &conn.c(&format!("SET w{w}:{} v", n % 64)),
                        b"+OK\r\n",
                        "SET",
                    );
                    n += 1;
                }
                n
            })
        })
        .collect();
    let writes: u64 = writers.into_iter().map(|t| t.join().expect("writer")).sum();
    assert_reply(&c.conn(leader).c("SET last v"), b"+OK\r\n", "SET");
    let (sent, coalesced) = peer_appends(&c, leader);
    eprintln!(
        "{writes} writes: {} appends sent, {} coalesced",
        sent - sent0,
        coalesced - coalesced0
    );
    assert!(sent > sent0, "no append counted as sent");
    assert!(
        coalesced > coalesced0,
        "no commit-only append was coalesced in {writes} writes"
    );
    // The followers still learn every commit (the last write's may have gone in a held
    // request, sent when its hold ended) and apply everything.
    c.wait_converged(&[1, 2, 3]);
}
