//! The lock promise under interleavings that once broke it, against real processes:
//! - an UNLOCK that settles a queue twice in one entry gives each waiter its own token;
//! - a LOCK ... WAIT client that is killed, or hangs up after pipelining more commands,
//!   leaves the queue at once (and a live one gets its pipelined replies after the grant);
//! - a write forwarded to a node that no longer leads is refused, never forwarded again
//!   (a second hop could apply it after the follower gave up on it).

use std::time::{Duration, Instant};

use bytes::Bytes;
use palisade::raft::auth::PeerAuth;
use palisade::raft::protocol::{PeerRequest, PeerResponse};

use crate::common::cluster::{Cluster, CLUSTER_SECRET};
use crate::common::{decode2, encode, peer, show, try_int, words, Conn, Server};

/// LOCKINFO's `waiters` field of `key` (0 when absent or the key is free).
fn waiters(c: &mut Conn, key: &str) -> i64 {
    use redis_protocol::resp2::types::OwnedFrame;
    let OwnedFrame::Array(items) = decode2(&c.cmd(&["LOCKINFO", key])) else {
        return 0;
    };
    items
        .chunks(2)
        .find(|p| matches!(&p[0], OwnedFrame::BulkString(b) if b == b"waiters"))
        .and_then(|p| match &p[1] {
            OwnedFrame::Integer(i) => Some(*i),
            _ => None,
        })
        .unwrap_or(0)
}

/// Waits until `key` has `n` waiters, for at most `within`.
fn wait_waiters(c: &mut Conn, key: &str, n: i64, within: Duration) -> bool {
    let end = Instant::now() + within;
    while Instant::now() < end {
        if waiters(c, key) == n {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn token(r: &[u8], what: &str) -> i64 {
    try_int(r).unwrap_or_else(|| panic!("{what}: expected a token, got {}", show(r)))
}

/// The history: a lease deleted under two queued owners, then `MULTI / DEL k /
/// UNLOCK k b / EXEC`. UNLOCK grants b, releases b's grant and grants c: before the fix,
/// b and c both received the same token.
#[test]
fn an_unlock_that_grants_twice_gives_each_waiter_its_own_token() {
    let pal = Server::start();
    let mut a = pal.conn();
    let first = token(&a.c("LOCK k a PX 60000"), "a");
    let mut b = pal.conn();
    let mut c = pal.conn();
    b.send(&words("LOCK k b PX 60000 WAIT 10000"));
    assert!(wait_waiters(&mut a, "k", 1, Duration::from_secs(5)));
    c.send(&words("LOCK k c PX 60000 WAIT 10000"));
    assert!(wait_waiters(&mut a, "k", 2, Duration::from_secs(5)));
    let exec = a.pipeline(&[
        words("MULTI"),
        words("DEL k"),
        words("UNLOCK k b"),
        words("EXEC"),
    ]);
    assert_eq!(exec[3], b"*2\r\n:1\r\n:1\r\n", "EXEC: {}", show(&exec[3]));
    let tb = token(&b.read_reply(), "b");
    let tc = token(&c.read_reply(), "c");
    assert!(tb > first && tc > first);
    assert_ne!(tb, tc, "two grants share token {tb}");
    // c holds the lock, with its own token; FENCEDSET refuses b's lower one after c wrote.
    let info = a.c("LOCKINFO k");
    assert!(
        show(&info).contains("\"c\"") || String::from_utf8_lossy(&info).contains("\r\nc\r\n"),
        "c holds k: {}",
        show(&info)
    );
    assert_eq!(a.c(&format!("FENCEDSET res v {tc}")), b"+OK\r\n");
    assert!(a
        .c(&format!("FENCEDSET res v {tb}"))
        .starts_with(b"-FENCED"));
}

/// CLIENT KILL ends a LOCK ... WAIT at once: the waiter leaves the queue (before the fix it
/// stayed until its WAIT ran out).
#[test]
fn a_killed_lock_waiter_leaves_the_queue_at_once() {
    let pal = Server::start();
    let mut admin = pal.conn();
    token(&admin.c("LOCK kk holder PX 60000"), "holder");
    let mut w = pal.conn();
    let id = try_int(&w.c("CLIENT ID")).expect("CLIENT ID");
    w.send(&words("LOCK kk w PX 60000 WAIT 60000"));
    assert!(wait_waiters(&mut admin, "kk", 1, Duration::from_secs(5)));
    assert_eq!(admin.c(&format!("CLIENT KILL ID {id}")), b":1\r\n");
    assert!(
        wait_waiters(&mut admin, "kk", 0, Duration::from_secs(3)),
        "the killed waiter is still queued"
    );
    let (_, closed) = w.read_until_close(Duration::from_secs(2));
    assert!(closed, "the killed client is closed");
    // The lock goes to nobody else: the holder keeps it, and a release leaves it free.
    assert_eq!(admin.c("UNLOCK kk holder"), b":1\r\n");
    assert_eq!(admin.c("LOCKINFO kk"), b"$-1\r\n");
}

/// A waiting client that pipelined a command behind its LOCK ... WAIT and then hung up
/// leaves the queue at once (before the fix, the pipelined bytes stopped the hang-up watch,
/// and the waiter stayed until its WAIT ran out). A live client that pipelines gets the
/// token first, then the replies of what it pipelined, in order.
#[test]
fn a_waiter_that_pipelined_then_hung_up_leaves_the_queue() {
    let pal = Server::start();
    let mut admin = pal.conn();
    token(&admin.c("LOCK kp holder PX 60000"), "holder");
    {
        let mut gone = pal.conn();
        gone.send_raw(&encode(&[
            "LOCK", "kp", "gone", "PX", "60000", "WAIT", "60000",
        ]));
        assert!(wait_waiters(&mut admin, "kp", 1, Duration::from_secs(5)));
        // Sent while the LOCK blocks, so the node reads it during the wait.
        gone.send_raw(&encode(&["PING"]));
        std::thread::sleep(Duration::from_millis(200));
        gone.shutdown_write();
        drop(gone);
    }
    assert!(
        wait_waiters(&mut admin, "kp", 0, Duration::from_secs(3)),
        "a hung-up waiter that had pipelined is still queued"
    );
    // A live client: its pipelined PING and GET are answered after its token, in order.
    let mut live = pal.conn();
    live.send_raw(&encode(&[
        "LOCK", "kp", "live", "PX", "60000", "WAIT", "60000",
    ]));
    assert!(wait_waiters(&mut admin, "kp", 1, Duration::from_secs(5)));
    let mut bytes = encode(&["PING"]);
    bytes.extend(encode(&["GET", "kp"]));
    live.send_raw(&bytes);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(admin.c("UNLOCK kp holder"), b":1\r\n");
    let t = token(&live.read_reply(), "live");
    assert!(t > 0);
    assert_eq!(live.read_reply(), b"+PONG\r\n");
    assert_eq!(live.read_reply(), b"$4\r\nlive\r\n");
}

/// A follower that receives a forwarded write (a client's node took it for the leader)
/// refuses it with TRYAGAIN and does not forward it again: a second hop could deliver the
/// write after the first node gave up on it and, say, cancelled the waiter it queued, or
/// after a later write of the same connection.
#[test]
fn a_forwarded_write_is_never_forwarded_again() {
    let cluster = Cluster::start(3, &[]);
    let leader = cluster.wait_leader(&[1, 2, 3]);
    let follower = (1..=3).find(|&i| i != leader).expect("a follower");
    let from = (1..=3)
        .find(|&i| i != leader && i != follower)
        .expect("a third node");
    let cluster_id = u64::from_str_radix(&cluster.info(1, "cluster_id").expect("cluster_id"), 16)
        .expect("hex cluster id");
    let set = match palisade::cmd::parse(vec![
        Bytes::from_static(b"SET"),
        Bytes::from_static(b"twohops"),
        Bytes::from_static(b"1"),
    ]) {
        Ok(palisade::cmd::Request::Data(c)) => c,
        other => panic!("SET: {other:?}"),
    };
    let body = PeerRequest::Forward {
        write: true,
        cmds: vec![set],
        users: vec![None],
    };
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let reply = rt.block_on(async {
        let auth = PeerAuth::new(Some(CLUSTER_SECRET.as_bytes().to_vec()));
        let addr = cluster.peer_addr(follower);
        let mut framed = peer::open_as(&addr, &auth, cluster_id, from, follower).await;
        peer::call(&mut framed, cluster_id, (from, follower), body).await
    });
    match reply {
        PeerResponse::Forward(replies) => {
            assert_eq!(replies.len(), 1);
            let text = format!("{:?}", replies[0]);
            assert!(text.contains("TRYAGAIN"), "follower answered {text}");
        }
        other => panic!("follower answered {other:?}"),
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        cluster.conn(leader).c("GET twohops"),
        b"$-1\r\n",
        "the write was applied"
    );
}

/// A follower's client waits (`WAIT 0`: for ever) while the follower is cut off; the leader
/// grants it the lock, then writes until it has purged its log past the follower, which can
/// then only catch up by installing a snapshot, and so never sees the grant's event. The
/// waiter must still be answered, with its token (before the fix it waited for ever).
#[test]
fn a_waiter_whose_grant_falls_inside_a_snapshot_install_gets_its_token() {
    let cluster = Cluster::start(3, &["--enable-fault-injection", "--snapshot-every", "50"]);
    let leader = cluster.wait_leader(&[1, 2, 3]);
    let others: Vec<u64> = [1, 2, 3].into_iter().filter(|id| *id != leader).collect();
    let (lagger, third) = (others[0], others[1]);
    let mut c = cluster.conn(leader);
    let first = token(&c.c("LOCK ks holder PX 60000"), "holder");
    let mut w = cluster.conn(lagger);
    w.send(&words("LOCK ks w PX 60000 WAIT 0"));
    assert!(wait_waiters(&mut c, "ks", 1, Duration::from_secs(10)));
    cluster.wait_converged(&[1, 2, 3]);
    let had = cluster.info_u64(lagger, "applied_index");
    let mut l = cluster.conn(lagger);
    assert_eq!(
        l.c(&format!("RAFT.FAULT DROP {leader} {third}")),
        b"+OK\r\n"
    );
    // The grant happens where the lagger cannot see it.
    assert_eq!(c.c("UNLOCK ks holder"), b":1\r\n");
    let granted = token(&c.c("LOCK ks w PX 60000"), "w holds ks");
    assert!(granted > first);
    let mut i = 0;
    while cluster.info_u64(leader, "purged_index") <= had + 10 || i < 200 {
        assert_eq!(c.c(&format!("SET s:{i} {i}")), b"+OK\r\n");
        i += 1;
        assert!(i < 5000, "the leader never purged past {had}");
    }
    assert_eq!(l.c("RAFT.FAULT HEAL"), b"+OK\r\n");
    let started = Instant::now();
    let reply = w.read_reply();
    assert_eq!(
        try_int(&reply),
        Some(granted),
        "the waiter was told {} after {:?}",
        show(&reply),
        started.elapsed()
    );
}
