//! Blocking list pops beyond BLPOP (BLMOVE, BRPOPLPUSH, BLMPOP) and the order blocked
//! clients are served in: first come, first served across the cluster (the replicated wait
//! queue, `src/cmd/lists/popwait.rs`), on a single node, on a follower, and among the clients of
//! every node of a 3-node cluster; a timeout of 0 waits however long; a transaction that
//! pushes and pops wakes nobody; a client that stops waiting leaves the queue (timeout,
//! hang-up, a restart of its node) and no element is lost to it.

use std::time::{Duration, Instant};

use crate::common::cluster::Cluster;
use crate::common::*;

fn pair(key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut out = b"*2\r\n".to_vec();
    out.extend(bulk_bytes(key));
    out.extend(bulk_bytes(value));
    out
}

/// The number INFO `section` gives for `field`.
fn info_number(c: &mut Conn, section: &str, field: &str) -> usize {
    let info = String::from_utf8_lossy(&c.c(&format!("INFO {section}"))).into_owned();
    info.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("INFO {field}"))
}

fn info_blocked(c: &mut Conn) -> usize {
    info_number(c, "clients", "blocked_clients")
}

#[test]
fn blmove_brpoplpush_and_blmpop_are_woken_by_a_push() {
    let pal = Server::start();
    let mut w = pal.conn();
    let mut p = pal.conn();
    w.send(&words("BLMOVE src dst RIGHT LEFT 10"));
    wait_blocked(&mut p, 1);
    assert_eq!(info_blocked(&mut p), 1, "INFO counts a BLMOVE");
    p.c("RPUSH src a b");
    assert_reply(&w.read_reply(), &bulk_bytes(b"b"), "BLMOVE");
    assert_reply(&p.c("LRANGE dst 0 -1"), b"*1\r\n$1\r\nb\r\n", "moved");

    w.send(&words("BRPOPLPUSH empty dst 10"));
    wait_blocked(&mut p, 1);
    p.c("LPUSH empty x");
    assert_reply(&w.read_reply(), &bulk_bytes(b"x"), "BRPOPLPUSH");

    w.send(&words("BLMPOP 10 2 m1 m2 LEFT COUNT 5"));
    wait_blocked(&mut p, 1);
    assert_eq!(info_blocked(&mut p), 1, "INFO counts a BLMPOP");
    p.c("RPUSH m2 1 2 3");
    assert_reply(
        &w.read_reply(),
        b"*2\r\n$2\r\nm2\r\n*3\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n",
        "BLMPOP",
    );
    assert_eq!(info_blocked(&mut p), 0, "nobody blocked any more");

    // A BLMOVE woken by another client's LMOVE into its source.
    w.send(&words("BLMOVE chain out LEFT LEFT 10"));
    wait_blocked(&mut p, 1);
    p.c("LMOVE dst chain LEFT LEFT");
    assert_reply(&w.read_reply(), &bulk_bytes(b"x"), "woken by LMOVE");

    // Timeouts: a null array in RESP2 and `_` in RESP3, as Redis.
    assert_reply(
        &w.c("BLMOVE none dst LEFT LEFT 0.1"),
        b"*-1\r\n",
        "BLMOVE timeout",
    );
    assert_reply(&w.c("BLMPOP 0.1 1 none LEFT"), b"*-1\r\n", "BLMPOP timeout");
    w.c("HELLO 3");
    assert_reply(&w.c("BRPOPLPUSH none dst 0.1"), b"_\r\n", "RESP3 timeout");
}

/// BLPOP counts in INFO blocked_clients too.
#[test]
fn info_counts_blpop_waiters() {
    let pal = Server::start();
    let mut w1 = pal.conn();
    let mut w2 = pal.conn();
    let mut p = pal.conn();
    w1.send(&words("BLPOP k 10"));
    w2.send(&words("BRPOP k 10"));
    wait_blocked(&mut p, 2);
    assert_eq!(info_blocked(&mut p), 2);
    p.c("RPUSH k a b");
    w1.read_reply();
    w2.read_reply();
    assert_eq!(info_blocked(&mut p), 0);
}

/// Sends `cmd` on a new connection per waiter, each only after the one before is blocked,
/// so their arrival order is known.
fn block_in_order(pal_conn: impl Fn() -> Conn, watcher: &mut Conn, cmds: &[&str]) -> Vec<Conn> {
    let mut out = Vec::new();
    for (i, cmd) in cmds.iter().enumerate() {
        let mut c = pal_conn();
        c.send(&words(cmd));
        wait_blocked(watcher, i + 1);
        out.push(c);
    }
    out
}

#[test]
fn blocked_clients_are_served_in_arrival_order() {
    let pal = Server::start();
    let mut p = pal.conn();
    for round in 0..3 {
        // Sixteen waiters, so that (without the queue) their retries, all woken by one push,
        // would race on the runtime's worker threads.
        let mut ws = block_in_order(|| pal.conn(), &mut p, &["BLPOP q 10"; 16]);
        // One push of sixteen elements: the first waiter gets the first, and so on.
        let elems: Vec<String> = (1..=16).map(|i| format!("e{i}")).collect();
        p.c(&format!("RPUSH q {}", elems.join(" ")));
        for (i, w) in ws.iter_mut().enumerate() {
            let want = format!("e{}", i + 1);
            assert_reply(
                &w.read_reply(),
                &pair(b"q", want.as_bytes()),
                &format!("round {round}, waiter {i}"),
            );
        }
    }
    // Pushes one at a time, and mixed commands waiting on one key.
    let mut ws = block_in_order(
        || pal.conn(),
        &mut p,
        &[
            "BLMOVE q d1 LEFT LEFT 10",
            "BLMPOP 10 1 q LEFT",
            "BRPOP q 10",
        ],
    );
    for e in ["x1", "x2", "x3"] {
        p.c(&format!("RPUSH q {e}"));
    }
    assert_reply(&ws[0].read_reply(), &bulk_bytes(b"x1"), "BLMOVE first");
    assert_reply(
        &ws[1].read_reply(),
        b"*2\r\n$1\r\nq\r\n*1\r\n$2\r\nx2\r\n",
        "BLMPOP second",
    );
    assert_reply(&ws[2].read_reply(), &pair(b"q", b"x3"), "BRPOP third");
}

/// A client waiting behind others on one key still pops at once from another key that has
/// data (Redis tries every key; the ones others wait on are empty for it).
#[test]
fn a_queued_key_does_not_hold_up_a_key_with_data() {
    let pal = Server::start();
    let mut p = pal.conn();
    let mut first = pal.conn();
    first.send(&words("BLPOP a 10"));
    wait_blocked(&mut p, 1);
    p.c("RPUSH b ready");
    let mut second = pal.conn();
    assert_reply(
        &second.c("BLPOP a b 10"),
        &pair(b"b", b"ready"),
        "from b at once",
    );
    p.c("RPUSH a x");
    assert_reply(&first.read_reply(), &pair(b"a", b"x"), "first keeps a");
}

/// When the first client in line gives up, the next one gets the element.
#[test]
fn a_waiter_that_times_out_passes_its_turn_on() {
    let pal = Server::start();
    let mut p = pal.conn();
    let mut ws = block_in_order(|| pal.conn(), &mut p, &["BLPOP t 0.5", "BLPOP t 10"]);
    assert_reply(&ws[0].read_reply(), b"*-1\r\n", "first times out");
    p.c("RPUSH t v");
    assert_reply(&ws[1].read_reply(), &pair(b"t", b"v"), "second served");
}

#[test]
fn timeout_zero_waits_until_a_push() {
    let pal = Server::start();
    let mut w = pal.conn();
    let mut p = pal.conn();
    let start = Instant::now();
    w.send(&words("BLPOP forever 0"));
    wait_blocked(&mut p, 1);
    std::thread::sleep(Duration::from_millis(2500));
    wait_blocked(&mut p, 1);
    p.c("LPUSH forever late");
    assert_reply(&w.read_reply(), &pair(b"forever", b"late"), "after 2.5 s");
    assert!(start.elapsed() >= Duration::from_millis(2500));
    // The same for BLMOVE and BLMPOP.
    w.send(&words("BLMOVE forever2 d LEFT LEFT 0"));
    wait_blocked(&mut p, 1);
    std::thread::sleep(Duration::from_millis(2100));
    p.c("LPUSH forever2 late2");
    assert_reply(&w.read_reply(), &bulk_bytes(b"late2"), "BLMOVE after 2.1 s");
}

/// MULTI LPUSH + LPOP leaves the list empty: the waiter must not be answered with
/// anything; the next real push reaches it.
#[test]
fn a_transaction_that_pushes_and_pops_wakes_nobody() {
    let pal = Server::start();
    let mut w = pal.conn();
    let mut p = pal.conn();
    w.send(&words("BLPOP k 0"));
    wait_blocked(&mut p, 1);
    p.c("MULTI");
    p.c("LPUSH k ghost");
    p.c("LPOP k");
    assert_reply(
        &p.c("EXEC"),
        b"*2\r\n:1\r\n$5\r\nghost\r\n",
        "the transaction",
    );
    // A script doing the same.
    p.cmd(&[
        "EVAL",
        "redis.call('rpush', KEYS[1], 'g2'); return redis.call('lpop', KEYS[1])",
        "1",
        "k",
    ]);
    std::thread::sleep(Duration::from_millis(300));
    wait_blocked(&mut p, 1);
    p.c("RPUSH k real");
    assert_reply(&w.read_reply(), &pair(b"k", b"real"), "only the real push");
}

/// On a follower of a 3-node cluster: its blocked clients are served in their arrival
/// order, by pushes made on the leader.
#[test]
fn a_followers_blocked_clients_are_served_in_order() {
    let cluster = Cluster::start(3, &[]);
    let leader = cluster.wait_leader(&[1, 2, 3]);
    let follower = (1..=3).find(|id| *id != leader).unwrap_or(1);
    let mut watcher = cluster.conn(follower);
    let mut ws = block_in_order(
        || cluster.conn(follower),
        &mut watcher,
        &[
            "BLPOP cq 10",
            "BLPOP cq 10",
            "BLMPOP 10 1 cq LEFT",
            "BLPOP cq 10",
        ],
    );
    let mut p = cluster.conn(leader);
    p.c("RPUSH cq c1 c2");
    p.c("RPUSH cq c3 c4");
    assert_reply(&ws[0].read_reply(), &pair(b"cq", b"c1"), "first");
    assert_reply(&ws[1].read_reply(), &pair(b"cq", b"c2"), "second");
    assert_reply(
        &ws[2].read_reply(),
        b"*2\r\n$2\r\ncq\r\n*1\r\n$2\r\nc3\r\n",
        "third",
    );
    assert_reply(&ws[3].read_reply(), &pair(b"cq", b"c4"), "fourth");
}

/// `raft_pop_waiters` of INFO: the clients queued in a blocking pop on any node.
fn pop_waiters(c: &mut Conn) -> usize {
    info_number(c, "raft", "raft_pop_waiters")
}

fn wait_pop_waiters(c: &mut Conn, n: usize) {
    wait_for(
        Duration::from_secs(10),
        &format!("{n} queued pop waiter(s)"),
        || (pop_waiters(c) == n).then_some(()),
    );
}

/// Clients of all three nodes of a cluster, blocked in turn on one key (lists and sorted
/// sets), are served in the order they blocked, whichever node serves them and whichever
/// node the push goes to.
#[test]
fn waiters_on_different_nodes_are_served_in_arrival_order() {
    let cluster = Cluster::start(3, &[]);
    let leader = cluster.wait_leader(&[1, 2, 3]);
    let mut watcher = cluster.conn(leader);
    // Nine waiters, node 1, 2, 3, 1, 2, 3, ...: each blocks only after the one before is
    // in the replicated queue, so the arrival order is known.
    let mut ws = Vec::new();
    for i in 0..9u64 {
        let node = i % 3 + 1;
        let mut c = cluster.conn(node);
        let cmd = match i % 3 {
            0 => "BLPOP xq 10",
            1 => "BLMPOP 10 2 other xq LEFT",
            _ => "BRPOP other xq 10",
        };
        c.send(&words(cmd));
        wait_pop_waiters(&mut watcher, i as usize + 1);
        ws.push(c);
    }
    // Pushes from a follower, three elements at a time.
    let pusher = (1..=3).find(|id| *id != leader).unwrap_or(1);
    let mut p = cluster.conn(pusher);
    for round in 0..3 {
        let base = round * 3;
        p.c(&format!("RPUSH xq e{} e{} e{}", base, base + 1, base + 2));
    }
    for (i, w) in ws.iter_mut().enumerate() {
        let e = format!("e{i}");
        let want = if i % 3 == 1 {
            let mut out = b"*2\r\n$2\r\nxq\r\n*1\r\n".to_vec();
            out.extend(bulk_bytes(e.as_bytes()));
            out
        } else {
            pair(b"xq", e.as_bytes())
        };
        assert_reply(
            &w.read_reply(),
            &want,
            &format!("waiter {i} (node {})", i % 3 + 1),
        );
    }
    assert_eq!(pop_waiters(&mut watcher), 0);
    // Sorted sets: the same, with BZPOPMIN waiters on two nodes and a BZMPOP on the third.
    let mut zs = Vec::new();
    for (i, cmd) in ["BZPOPMIN zq 10", "BZMPOP 10 1 zq MIN", "BZPOPMIN zq 10"]
        .iter()
        .enumerate()
    {
        let mut c = cluster.conn(3 - i as u64);
        c.send(&words(cmd));
        wait_pop_waiters(&mut watcher, i + 1);
        zs.push(c);
    }
    p.c("ZADD zq 1 a 2 b 3 c");
    assert_reply(
        &zs[0].read_reply(),
        b"*3\r\n$2\r\nzq\r\n$1\r\na\r\n$1\r\n1\r\n",
        "first BZPOPMIN",
    );
    assert_reply(
        &zs[1].read_reply(),
        b"*2\r\n$2\r\nzq\r\n*1\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n",
        "BZMPOP second",
    );
    assert_reply(
        &zs[2].read_reply(),
        b"*3\r\n$2\r\nzq\r\n$1\r\nc\r\n$1\r\n3\r\n",
        "second BZPOPMIN",
    );
}

/// A client that stops waiting leaves the cluster's queue: one that timed out, one that hung
/// up, and those of a node that was killed and restarted. A push afterwards stays in the
/// list (nothing is served to a client that has gone).
#[test]
fn clients_that_stop_waiting_leave_the_queue_and_lose_nothing() {
    let mut cluster = Cluster::start(3, &[]);
    let leader = cluster.wait_leader(&[1, 2, 3]);
    let follower = (1..=3).find(|id| *id != leader).unwrap_or(1);
    let mut watcher = cluster.conn(leader);
    // A timeout on a follower: the client sees a null array, and the queue empties.
    let mut t = cluster.conn(follower);
    assert_reply(&t.c("BLPOP gone 0.3"), b"*-1\r\n", "timed out");
    wait_pop_waiters(&mut watcher, 0);
    // A client that hangs up while blocked.
    let mut h = cluster.conn(follower);
    h.send(&words("BRPOP gone 0"));
    wait_pop_waiters(&mut watcher, 1);
    drop(h);
    wait_pop_waiters(&mut watcher, 0);
    // The clients of a node that dies: its next process purges them from the queue.
    let mut k1 = cluster.conn(follower);
    k1.send(&words("BLPOP gone 0"));
    wait_pop_waiters(&mut watcher, 1);
    let mut k2 = cluster.conn(follower);
    k2.send(&words("BLMOVE gone dst LEFT LEFT 0"));
    wait_pop_waiters(&mut watcher, 2);
    cluster.restart(follower);
    wait_pop_waiters(&mut watcher, 0);
    assert_reply(&watcher.c("RPUSH gone a b"), b":2\r\n", "push");
    assert_reply(
        &watcher.c("LRANGE gone 0 -1"),
        b"*2\r\n$1\r\na\r\n$1\r\nb\r\n",
        "nothing was served to a client that had gone",
    );
    // The restarted node serves its new clients as before.
    let mut n = cluster.conn(follower);
    assert_reply(&n.c("BLPOP gone 1"), &pair(b"gone", b"a"), "served again");
}

/// CLIENT UNBLOCK as a transcript on the server at `port`: a blocked BLPOP unblocked with
/// TIMEOUT and a BZPOPMIN with ERROR (RESP2 and RESP3), a client that is not blocked, and the
/// argument errors; then CLIENT KILL of a blocked client, which leaves its element alone.
fn unblock_transcript(port: u16) -> Vec<String> {
    let mut admin = Conn::connect(port);
    let mut out = Vec::new();
    for (proto, cmd, how) in [
        (2, "BLPOP ub 0", "TIMEOUT"),
        (3, "BLMOVE ub d LEFT LEFT 0", ""),
        (2, "BZPOPMIN ubz 0", "ERROR"),
        (3, "BLMPOP 0 1 ub LEFT", "error"),
    ] {
        let mut w = Conn::connect(port);
        if proto == 3 {
            w.c("HELLO 3");
        }
        let id = as_int(&w.c("CLIENT ID"));
        w.send(&words(cmd));
        wait_blocked(&mut admin, 1);
        out.push(show(
            &admin.c(format!("CLIENT UNBLOCK {id} {how}").trim_end()),
        ));
        out.push(show(&w.read_reply()));
        wait_for(Duration::from_secs(5), "unblocked", || {
            let list = String::from_utf8_lossy(&admin.c("CLIENT LIST")).into_owned();
            (!list.contains(" flags=b ")).then_some(())
        });
        // Not blocked any more: 0, and the connection works.
        out.push(show(&admin.c(&format!("CLIENT UNBLOCK {id}"))));
        out.push(show(&w.c("PING")));
    }
    for bad in [
        "CLIENT UNBLOCK x",
        "CLIENT UNBLOCK 1 later",
        "CLIENT UNBLOCK",
        "CLIENT UNBLOCK 1 TIMEOUT x",
        "CLIENT UNBLOCK -5",
    ] {
        out.push(show(&admin.c(bad)));
    }
    // Nothing was served to the unblocked clients: a push stays.
    out.push(show(&admin.c("RPUSH ub x")));
    out.push(show(&admin.c("LLEN ub")));
    out
}

#[test]
fn client_unblock_matches_redis() {
    let redis = RedisServer::start();
    let pal = Server::start();
    let want = unblock_transcript(redis.port());
    let got = unblock_transcript(pal.port());
    assert_eq!(
        got, want,
        "CLIENT UNBLOCK transcripts differ from redis-server's"
    );
}

/// CLIENT KILL closes a blocked client at once, and nothing is served to it afterwards.
#[test]
fn a_killed_blocked_client_leaves_the_queue() {
    let pal = Server::start();
    let mut admin = pal.conn();
    let mut w = pal.conn();
    let id = as_int(&w.c("CLIENT ID"));
    w.send(&words("BLPOP kq 0"));
    wait_pop_waiters(&mut admin, 1);
    assert_reply(&admin.c(&format!("CLIENT KILL ID {id}")), b":1\r\n", "kill");
    let (_, closed) = w.read_until_close(Duration::from_secs(2));
    assert!(closed, "the killed client is closed");
    wait_pop_waiters(&mut admin, 0);
    admin.c("RPUSH kq v");
    assert_reply(&admin.c("LLEN kq"), b":1\r\n", "the element stays");
}
