//! Sharded pub/sub and MONITOR against redis-server: SSUBSCRIBE, SUNSUBSCRIBE, SPUBLISH and
//! PUBSUB SHARDCHANNELS/SHARDNUMSUB as a channel namespace apart (RESP2 arrays, RESP3
//! pushes), their ACL channel permissions, an SPUBLISH crossing a 3-node cluster, and the
//! lines a MONITOR receives (timestamps and addresses masked).

use std::time::Duration;

use crate::common::cluster::Cluster;
use crate::common::*;
use crate::differential::{diff, same};
use crate::pubsub::read_n;

/// Runs the shard scenario on a server and returns everything both clients received.
fn transcript(port: u16, proto: u8) -> Vec<Vec<u8>> {
    let mut sub = Conn::connect(port);
    let mut publ = Conn::connect(port);
    if proto == 3 {
        sub.c("HELLO 3");
    }
    let mut t = Vec::new();
    let on_sub = |c: &mut Conn, line: &str, replies: usize, t: &mut Vec<Vec<u8>>| {
        c.send(&words(line));
        t.extend(read_n(c, replies));
    };
    // Nothing to leave: one reply with a nil channel.
    on_sub(&mut sub, "SUNSUBSCRIBE", 1, &mut t);
    on_sub(&mut sub, "SSUBSCRIBE sx", 1, &mut t);
    // The counts of shard and ordinary subscriptions are kept apart.
    on_sub(&mut sub, "SUBSCRIBE sx", 1, &mut t);
    on_sub(&mut sub, "SSUBSCRIBE sy sx", 2, &mut t);
    on_sub(&mut sub, "PSUBSCRIBE s*", 1, &mut t);
    for line in [
        "PUBSUB SHARDCHANNELS sx",
        "PUBSUB SHARDCHANNELS s?",
        "PUBSUB SHARDCHANNELS nomatch*",
        "PUBSUB SHARDNUMSUB sx sy none",
        "PUBSUB SHARDNUMSUB",
        "PUBSUB NUMSUB sx sy",
        "PUBSUB CHANNELS",
        "PUBSUB NUMPAT",
    ] {
        let r = publ.c(line);
        // Two channels come in hash order from Redis: compare them sorted.
        t.push(if line == "PUBSUB SHARDCHANNELS s?" {
            sorted_lines(r)
        } else {
            r
        });
    }
    let info = publ.c("INFO stats");
    let info = String::from_utf8_lossy(&info);
    for field in [
        "pubsub_channels:",
        "pubsub_patterns:",
        "pubsubshard_channels:",
    ] {
        let line = info
            .lines()
            .find(|l| l.starts_with(field))
            .unwrap_or("missing");
        t.push(line.as_bytes().to_vec());
    }
    // SPUBLISH reaches the shard subscription only; PUBLISH the channel and the pattern only.
    t.push(publ.c("SPUBLISH sx m1"));
    t.extend(read_n(&mut sub, 1));
    t.push(publ.c("PUBLISH sx m2"));
    t.extend(read_n(&mut sub, 2));
    t.push(publ.c("SPUBLISH none m"));
    t.push(publ.c("SPUBLISH sy m3"));
    t.extend(read_n(&mut sub, 1));
    // From a script too (its reply inside the script is node-local: only delivery compared).
    publ.cmd(&[
        "EVAL",
        "redis.call('spublish', KEYS[1], ARGV[1]) return 1",
        "1",
        "sy",
        "from-script",
    ]);
    t.extend(read_n(&mut sub, 1));
    on_sub(&mut sub, "GET x", 1, &mut t);
    on_sub(&mut sub, "PING", 1, &mut t);
    on_sub(&mut sub, "SUNSUBSCRIBE sy nosuch", 2, &mut t);
    on_sub(&mut sub, "SUNSUBSCRIBE", 1, &mut t);
    on_sub(&mut sub, "SUNSUBSCRIBE", 1, &mut t);
    // Still subscribed to a channel and a pattern.
    on_sub(&mut sub, "GET x", 1, &mut t);
    on_sub(&mut sub, "UNSUBSCRIBE", 1, &mut t);
    on_sub(&mut sub, "PUNSUBSCRIBE", 1, &mut t);
    t.push(sub.c("GET x"));
    // A shard subscription alone keeps RESP2's subscribed mode; UNSUBSCRIBE does not end it.
    on_sub(&mut sub, "SSUBSCRIBE only", 1, &mut t);
    on_sub(&mut sub, "UNSUBSCRIBE", 1, &mut t);
    on_sub(&mut sub, "PUNSUBSCRIBE", 1, &mut t);
    on_sub(&mut sub, "GET x", 1, &mut t);
    t.push(sub.c("RESET"));
    t.push(publ.c("SPUBLISH only after-reset"));
    t.push(publ.c("PUBSUB SHARDCHANNELS"));
    t.push(publ.c("SPUBLISH sx"));
    t.push(publ.c("SSUBSCRIBE"));
    let (rest, closed) = sub.read_until_close(Duration::from_millis(300));
    assert!(
        !closed && rest.is_empty(),
        "unexpected extra data: {}",
        show(&rest)
    );
    t
}

/// A reply's lines, sorted (for arrays whose order is Redis's hash order).
fn sorted_lines(r: Vec<u8>) -> Vec<u8> {
    let text = String::from_utf8_lossy(&r).into_owned();
    let mut lines: Vec<&str> = text.split("\r\n").collect();
    lines.sort();
    lines.join("\n").into_bytes()
}

fn compare(proto: u8) {
    compare_with_redis("shard pub/sub", proto, transcript);
}

#[test]
fn shard_pubsub_matches_redis_resp2() {
    compare(2);
}

#[test]
fn shard_pubsub_matches_redis_resp3() {
    compare(3);
}

/// ACL channel permissions apply to shard channels, as in Redis.
#[test]
fn shard_channels_obey_acl_channel_rules() {
    let steps = [
        same("ACL SETUSER u on >pw ~* +@all resetchannels &ok*"),
        same("AUTH u pw"),
        same("SPUBLISH no m"),
        same("SPUBLISH okay m"),
        same("SSUBSCRIBE okay no"),
        same("SSUBSCRIBE okay"),
    ];
    for proto in [2, 3] {
        diff(proto, &steps);
    }
}

/// SSUBSCRIBE and MONITOR are queued inside MULTI and refused by EXEC, as in Redis.
#[test]
fn ssubscribe_and_monitor_inside_multi() {
    let steps = [
        same("MULTI"),
        same("SSUBSCRIBE a b"),
        same("MONITOR"),
        same("SET k v"),
        same("EXEC"),
        same("GET k"),
    ];
    for proto in [2, 3] {
        diff(proto, &steps);
    }
}

/// An SPUBLISH through one node reaches a shard subscriber on another, once; each node
/// counts its own receivers (as PUBLISH does).
#[test]
fn spublish_crosses_the_cluster() {
    let cluster = Cluster::start(3, &[]);
    let leader = cluster.wait_leader(&[1, 2, 3]);
    let follower = [1, 2, 3].into_iter().find(|&i| i != leader).unwrap_or(1);
    let other = [1, 2, 3]
        .into_iter()
        .find(|&i| i != leader && i != follower)
        .unwrap_or(1);
    let mut sub = cluster.conn(follower);
    sub.send(&words("SSUBSCRIBE room"));
    assert_reply(
        &sub.read_reply(),
        b"*3\r\n$10\r\nssubscribe\r\n$4\r\nroom\r\n:1\r\n",
        "ssubscribe",
    );
    let mut plain = cluster.conn(other);
    plain.send(&words("SUBSCRIBE room"));
    plain.read_reply();
    let mut p = cluster.conn(other);
    assert_reply(
        &p.c("SPUBLISH room hello"),
        b":0\r\n",
        "receivers on the publishing node",
    );
    assert_reply(
        &sub.read_reply(),
        b"*3\r\n$8\r\nsmessage\r\n$4\r\nroom\r\n$5\r\nhello\r\n",
        "smessage on another node",
    );
    let mut q = cluster.conn(follower);
    assert_reply(
        &q.c("SPUBLISH room again"),
        b":1\r\n",
        "receivers on the subscriber's node",
    );
    assert_reply(
        &sub.read_reply(),
        b"*3\r\n$8\r\nsmessage\r\n$4\r\nroom\r\n$5\r\nagain\r\n",
        "second smessage",
    );
    let (rest, _) = sub.read_until_close(Duration::from_millis(300));
    assert!(rest.is_empty(), "duplicate delivery: {}", show(&rest));
    // The ordinary subscriber of the same name got none of it.
    let (rest, _) = plain.read_until_close(Duration::from_millis(100));
    assert!(
        rest.is_empty(),
        "SUBSCRIBEr got a shard message: {}",
        show(&rest)
    );
}

/// A monitor line with its time and client address replaced by `T` and `ADDR`, after
/// checking their shape (the time within a minute of now, the address the client's).
fn masked(line: &[u8], addrs: &[String]) -> String {
    let text = String::from_utf8_lossy(line).into_owned();
    let (time, rest) = text
        .strip_prefix('+')
        .and_then(|t| t.split_once(" [0 "))
        .unwrap_or_else(|| panic!("not a monitor line: {text:?}"));
    let (secs, micros) = time.split_once('.').expect("secs.micros");
    assert_eq!(micros.len(), 6, "{text:?}");
    let secs: i64 = secs.parse().expect("secs");
    assert!((secs - unix_ms() / 1000).abs() < 60, "{text:?}");
    let (addr, args) = rest.split_once("] ").expect("addr");
    assert!(
        addrs.iter().any(|a| a == addr),
        "{addr} is no client's: {text:?}"
    );
    format!("+T [0 ADDR] {args}")
}

/// What a monitor sees of another client's commands and its own, on one server.
fn monitor_transcript(port: u16, proto: u8) -> Vec<String> {
    let mut m = Conn::connect(port);
    if proto == 3 {
        m.c("HELLO 3");
    }
    let mut a = Conn::connect(port);
    let addrs: Vec<String> = [&m, &a]
        .iter()
        .map(|c| c.stream_clone().local_addr().expect("addr").to_string())
        .collect();
    let mut t = vec![String::from_utf8_lossy(&m.c("MONITOR")).into_owned()];
    // Shown: what ran (errors it answered included), passwords redacted.
    // Hidden: admin commands, and commands refused before they ran.
    let lines: &[&[&[u8]]] = &[
        &[b"SET", b"k", b"a\"b\\c\n\x01\xc3\xbf \x00\x7f"],
        &[b"GET", b"k"],
        &[b"CONFIG", b"GET", b"port"],
        &[b"CLIENT", b"ID"],
        &[b"NOSUCH"],
        &[b"GET"],
        &[b"INCR", b"k"],
        &[b"AUTH", b"pw"],
        &[b"HELLO", b"2", b"AUTH", b"default", b"pw"],
        &[b"PING"],
        &[b"ECHO", b"x y"],
        &[b"SPUBLISH", b"ch", b"m"],
        &[b"PUBLISH", b"ch", b"m"],
        // A transaction's commands show when EXEC runs them, before EXEC.
        &[b"MULTI"],
        &[b"SET", b"q", b"1"],
        &[b"GET", b"q"],
        &[b"EXEC"],
    ];
    for args in lines {
        a.cmd(args);
    }
    // Read the lines before the monitor sends anything, so that no reply of its own can
    // come between them.
    for _ in 0..14 {
        t.push(masked(&m.read_reply(), &addrs));
    }
    // The monitoring client itself: connection commands run (and are shown after their
    // reply), commands on the keyspace are refused, and a second MONITOR gets no reply.
    let text = |r: Vec<u8>| String::from_utf8_lossy(&r).into_owned();
    t.push(text(m.c("PING")));
    t.push(masked(&m.read_reply(), &addrs));
    t.push(text(m.c("GET k")));
    m.send(&words("MONITOR"));
    t.push(text(m.c("ECHO e")));
    t.push(masked(&m.read_reply(), &addrs));
    t.push(text(m.c("RESET")));
    t.push(text(m.c("GET k")));
    let (rest, _) = m.read_until_close(Duration::from_millis(300));
    assert!(rest.is_empty(), "after RESET: {}", show(&rest));
    t
}

#[test]
fn monitor_matches_redis() {
    for proto in [2, 3] {
        let redis = RedisServer::start();
        let pal = Server::start();
        let want = monitor_transcript(redis.port(), proto);
        let got = monitor_transcript(pal.port(), proto);
        assert_eq!(
            got, want,
            "RESP{proto}: palisade's MONITOR (left) differs from redis-server's (right)"
        );
    }
}

/// MONITOR is per node: a follower's monitor shows its own clients' commands (writes it
/// forwards to the leader included), not those sent to another node.
#[test]
fn monitor_shows_this_nodes_clients_only() {
    let cluster = Cluster::start(3, &[]);
    let leader = cluster.wait_leader(&[1, 2, 3]);
    let follower = [1, 2, 3].into_iter().find(|&i| i != leader).unwrap_or(1);
    let mut m = cluster.conn(follower);
    assert_reply(&m.c("MONITOR"), b"+OK\r\n", "MONITOR");
    let mut here = cluster.conn(follower);
    let mut there = cluster.conn(leader);
    let addr = here.stream_clone().local_addr().expect("addr").to_string();
    assert_reply(&here.c("SET k here"), b"+OK\r\n", "forwarded SET");
    assert_reply(&there.c("SET k there"), b"+OK\r\n", "SET on the leader");
    assert_reply(&here.c("GET k"), b"$5\r\nthere\r\n", "forwarded GET");
    let lines = [m.read_reply(), m.read_reply()];
    let lines: Vec<String> = lines
        .iter()
        .map(|l| masked(l, std::slice::from_ref(&addr)))
        .collect();
    assert_eq!(
        lines,
        [
            "+T [0 ADDR] \"SET\" \"k\" \"here\"\r\n",
            "+T [0 ADDR] \"GET\" \"k\"\r\n"
        ]
    );
    let (rest, _) = m.read_until_close(Duration::from_millis(300));
    assert!(
        rest.is_empty(),
        "another node's command shown: {}",
        show(&rest)
    );
}
