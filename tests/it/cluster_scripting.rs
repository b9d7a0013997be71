//! Scripts, BLPOP and pub/sub on a 3-node cluster: a script's PUBLISH reaches every
//! subscriber on every node exactly once, a BLPOP on one node is woken by a push (or a
//! script) committed through another, and the script cache survives a failover.

use std::time::Duration;

use crate::common::cluster::Cluster;
use crate::common::*;

fn followers(c: &Cluster, leader: u64) -> Vec<u64> {
    c.nodes.keys().copied().filter(|id| *id != leader).collect()
}

#[test]
fn scripted_publish_reaches_every_node_once_and_blpop_wakes_across_nodes() {
    let c = Cluster::start(3, &[]);
    let leader = c.wait_leader(&[1, 2, 3]);
    let f = followers(&c, leader);
    // One subscriber per node.
    let mut subs: Vec<Conn> = [leader, f[0], f[1]].iter().map(|id| c.conn(*id)).collect();
    for s in &mut subs {
        s.send(&words("SUBSCRIBE locks"));
        assert_reply(
            &s.read_reply(),
            b"*3\r\n$9\r\nsubscribe\r\n$5\r\nlocks\r\n:1\r\n",
            "subscribe",
        );
    }
    let mut publ = c.conn(f[0]);
    let r = publ.cmd(&[
        "EVAL",
        "redis.call(ARGV[2], KEYS[1], ARGV[1]) return 1",
        "1",
        "locks",
        "released",
        "PUBLISH",
    ]);
    assert_reply(&r, b":1\r\n", "script through a follower");
    // PUBLISH counts the receivers on the node the client is connected to.
    assert_reply(
        &publ.c("PUBLISH locks direct"),
        b":1\r\n",
        "local receivers",
    );
    for (i, s) in subs.iter_mut().enumerate() {
        for msg in ["released", "direct"] {
            let mut want = b"*3\r\n$7\r\nmessage\r\n$5\r\nlocks\r\n".to_vec();
            want.extend(bulk_bytes(msg.as_bytes()));
            assert_reply(&s.read_reply(), &want, &format!("subscriber {i}: {msg}"));
        }
        let (rest, _) = s.read_until_close(Duration::from_millis(300));
        assert!(
            rest.is_empty(),
            "subscriber {i} got a duplicate: {}",
            show(&rest)
        );
    }

    // BLPOP on one follower, LPUSH through the other.
    let mut waiter = c.conn(f[1]);
    waiter.send(&words("BLPOP jobs 10"));
    wait_blocked(&mut c.conn(f[1]), 1);
    assert_reply(
        &c.conn(f[0]).c("LPUSH jobs j1"),
        b":1\r\n",
        "push via follower",
    );
    assert_reply(
        &waiter.read_reply(),
        b"*2\r\n$4\r\njobs\r\n$2\r\nj1\r\n",
        "woken on another node",
    );
    // And by a script run through the leader.
    waiter.send(&words("BLPOP jobs 10"));
    wait_blocked(&mut c.conn(f[1]), 1);
    c.conn(leader).cmd(&[
        "EVAL",
        "return redis.call('rpush', KEYS[1], 'j2')",
        "1",
        "jobs",
    ]);
    assert_reply(
        &waiter.read_reply(),
        b"*2\r\n$4\r\njobs\r\n$2\r\nj2\r\n",
        "woken by a script",
    );
}

#[test]
fn script_cache_survives_failover() {
    let mut c = Cluster::start(3, &[]);
    let leader = c.wait_leader(&[1, 2, 3]);
    let f = followers(&c, leader);
    let mut conn = c.conn(f[0]);
    let sha =
        as_bulk(&conn.cmd(&["SCRIPT", "LOAD", "return redis.call('incr', KEYS[1])"])).expect("sha");
    let sha = String::from_utf8(sha).expect("hex");
    assert_reply(
        &conn.cmd(&["EVALSHA", &sha, "1", "n"]),
        b":1\r\n",
        "before failover",
    );
    // Scripts whose effects must be identical on every replica: a PRNG-derived write, an
    // error after a write (kept), a budget abort after writes (discarded).
    let rnd = conn.cmd(&[
        "EVAL",
        "redis.call('set', 'r', math.random(1000000)) return redis.call('get', 'r')",
        "0",
    ]);
    let partial = conn.cmd(&[
        "EVAL",
        "redis.call('set', 'kept', 1) return redis.call('incr', 'r2', 'x')",
        "0",
    ]);
    assert!(partial.starts_with(b"-ERR"), "{}", show(&partial));
    let abort = conn.cmd(&[
        "EVAL",
        "redis.call('set', 'gone', 1) while true do end",
        "0",
    ]);
    assert!(
        abort.starts_with(b"-ERR Script exceeded"),
        "{}",
        show(&abort)
    );
    c.wait_converged(&[1, 2, 3]);
    let revisions: Vec<String> = [1, 2, 3]
        .iter()
        .map(|id| {
            let info = c.conn(*id).c("INFO raft");
            let text = String::from_utf8_lossy(&info).into_owned();
            text.split("\r\n")
                .find_map(|l| l.strip_prefix("raft_revision:").map(str::to_string))
                .unwrap_or_default()
        })
        .collect();
    assert!(
        revisions
            .iter()
            .all(|r| *r == revisions[0] && !r.is_empty()),
        "replicas disagree on the revision: {revisions:?}"
    );
    c.kill9(leader);
    let new_leader = c.wait_leader(&f);
    let survivor = if new_leader == f[0] { f[1] } else { f[0] };
    let mut conn = c.conn(survivor);
    let r = wait_for(Duration::from_secs(20), "EVALSHA after failover", || {
        let r = conn.cmd(&["EVALSHA", &sha, "1", "n"]);
        (!r.starts_with(b"-CLUSTERDOWN") && !r.starts_with(b"-TRYAGAIN")).then_some(r)
    });
    assert_reply(&r, b":2\r\n", "EVALSHA after failover");
    // The new leader (a different replica) computed the same script results.
    assert_reply(
        &conn.c("GET r"),
        &rnd,
        "PRNG-derived value on another replica",
    );
    assert_reply(
        &conn.c("GET kept"),
        &bulk_bytes(b"1"),
        "write before the error kept",
    );
    assert_reply(
        &conn.c("EXISTS gone"),
        b":0\r\n",
        "aborted script left no trace",
    );
}
