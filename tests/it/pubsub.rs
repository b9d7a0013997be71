//! Pub/sub: the same subscribe/publish transcript against redis-server and Palisade, in
//! RESP2 (arrays) and RESP3 (pushes), including PING while subscribed; delivery from PUBLISH
//! and from a script, exactly once.

use std::time::Duration;

use crate::common::*;

/// Reads `n` replies (pushes) from a subscribed connection.
pub(crate) fn read_n(c: &mut Conn, n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|_| c.read_reply()).collect()
}

/// Runs the scenario on a server and returns everything both clients received, in order.
fn transcript(port: u16, proto: u8) -> Vec<Vec<u8>> {
    let mut sub = Conn::connect(port);
    let mut publ = Conn::connect(port);
    if proto == 3 {
        sub.c("HELLO 3");
    }
    let mut t = Vec::new();
    sub.send(&words("SUBSCRIBE news"));
    t.extend(read_n(&mut sub, 1));
    sub.send(&words("PSUBSCRIBE n*"));
    t.extend(read_n(&mut sub, 1));
    sub.send(&words("SUBSCRIBE alerts"));
    t.extend(read_n(&mut sub, 1));
    t.push(publ.c("PUBLISH news hello"));
    t.extend(read_n(&mut sub, 2));
    t.push(publ.c("PUBLISH alerts a1"));
    t.extend(read_n(&mut sub, 1));
    t.push(publ.c("PUBLISH other nobody"));
    // A PUBLISH from a script is delivered like any other (its reply inside the script is
    // node-local and differs by design, so only the delivery is compared).
    publ.cmd(&[
        "EVAL",
        "redis.call('publish', KEYS[1], ARGV[1]) return 1",
        "1",
        "news",
        "from-script",
    ]);
    t.extend(read_n(&mut sub, 2));
    sub.send(&words("PING"));
    t.extend(read_n(&mut sub, 1));
    sub.send(&words("PING hi"));
    t.extend(read_n(&mut sub, 1));
    sub.send(&words("GET x"));
    t.extend(read_n(&mut sub, 1));
    sub.send(&words("UNSUBSCRIBE news"));
    t.extend(read_n(&mut sub, 1));
    sub.send(&words("PUNSUBSCRIBE"));
    t.extend(read_n(&mut sub, 1));
    sub.send(&words("UNSUBSCRIBE alerts"));
    t.extend(read_n(&mut sub, 1));
    sub.send(&words("UNSUBSCRIBE"));
    t.extend(read_n(&mut sub, 1));
    t.push(sub.c("GET x"));
    t.push(publ.c("PUBLISH news after"));
    // Nothing else arrives: every message was delivered exactly once.
    let (rest, closed) = sub.read_until_close(Duration::from_millis(300));
    assert!(
        !closed && rest.is_empty(),
        "unexpected extra data: {}",
        show(&rest)
    );
    t
}

fn compare(proto: u8) {
    compare_with_redis("pub/sub", proto, transcript);
}

#[test]
fn pubsub_matches_redis_resp2() {
    compare(2);
}

#[test]
fn pubsub_matches_redis_resp3() {
    compare(3);
}

/// Each subscriber gets each message once, and PUBLISH counts local receivers (one per
/// channel subscription plus one per matching pattern).
#[test]
fn publish_counts_receivers_and_delivers_once() {
    let pal = Server::start();
    let mut a = pal.conn();
    let mut b = pal.conn();
    let mut p = pal.conn();
    a.send(&words("SUBSCRIBE ch"));
    a.read_reply();
    b.send(&words("PSUBSCRIBE c*"));
    b.read_reply();
    b.send(&words("SUBSCRIBE ch"));
    b.read_reply();
    assert_reply(&p.c("PUBLISH ch m1"), b":3\r\n", "receivers");
    for _ in 0..20 {
        p.cmd(&["EVAL", "redis.call('publish', 'ch', 'burst')", "0"]);
    }
    let msg = b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nm1\r\n";
    assert_reply(&a.read_reply(), msg, "a: message");
    assert_reply(&b.read_reply(), msg, "b: message");
    assert_reply(
        &b.read_reply(),
        b"*4\r\n$8\r\npmessage\r\n$2\r\nc*\r\n$2\r\nch\r\n$2\r\nm1\r\n",
        "b: pmessage",
    );
    let burst = b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$5\r\nburst\r\n";
    for _ in 0..20 {
        assert_reply(&a.read_reply(), burst, "a: scripted message");
    }
    let (rest, _) = a.read_until_close(Duration::from_millis(300));
    assert!(rest.is_empty(), "duplicate delivery: {}", show(&rest));
    // Disconnecting removes the client's subscriptions from the count.
    drop(a);
    wait_for(Duration::from_secs(5), "a's subscriptions to go", || {
        (p.c("PUBLISH ch m2") == b":2\r\n").then_some(())
    });
}

/// PUBSUB's replies on one server, with two subscribers: one on `a`, `b` and `p*`, one on
/// `a` and `p*`. CHANNELS lists channels in no set order (Redis walks a hash table), so its
/// replies are returned sorted.
fn introspection(port: u16, proto: u8) -> Vec<Vec<u8>> {
    let mut s1 = Conn::connect(port);
    let mut s2 = Conn::connect(port);
    s1.send(&words("SUBSCRIBE a b"));
    read_n(&mut s1, 2);
    s1.send(&words("PSUBSCRIBE p*"));
    read_n(&mut s1, 1);
    s2.send(&words("SUBSCRIBE a"));
    read_n(&mut s2, 1);
    s2.send(&words("PSUBSCRIBE p*"));
    read_n(&mut s2, 1);
    let mut c = Conn::connect(port);
    if proto == 3 {
        c.c("HELLO 3");
    }
    let sorted = |r: Vec<u8>| {
        let text = String::from_utf8_lossy(&r).into_owned();
        let mut lines: Vec<&str> = text.split("\r\n").collect();
        lines.sort();
        lines.join("\n").into_bytes()
    };
    let mut t = vec![
        sorted(c.c("PUBSUB CHANNELS")),
        sorted(c.c("PUBSUB channels a*")),
    ];
    for line in [
        "PUBSUB CHANNELS z*",
        "PUBSUB NUMSUB a b c",
        "PUBSUB NUMSUB",
        "PUBSUB NUMPAT",
        "PUBSUB SHARDCHANNELS",
        "PUBSUB SHARDNUMSUB a",
        "PUBSUB HELP",
        "PUBSUB CHANNELS a b",
        "PUBSUB NUMPAT x",
        "PUBSUB FOO",
        "PUBSUB",
    ] {
        t.push(c.c(line));
    }
    drop(s2);
    // The server notices the closed subscriber; NUMSUB then counts one on `a`.
    // (A flat array in RESP3 too, as Redis 7 replies.)
    let want = b"*2\r\n$1\r\na\r\n:1\r\n";
    let mut last = Vec::new();
    let forgotten = (0..500).any(|_| {
        last = c.c("PUBSUB NUMSUB a");
        std::thread::sleep(Duration::from_millis(10));
        last == want[..]
    });
    assert!(
        forgotten,
        "port {port}: NUMSUB a after a subscriber closed: {}",
        show(&last)
    );
    t.push(c.c("PUBSUB NUMPAT"));
    t
}

/// PUBSUB CHANNELS, NUMSUB, NUMPAT, SHARDCHANNELS, SHARDNUMSUB and their errors answer as
/// redis-server's, in RESP2 and RESP3.
#[test]
fn pubsub_introspection_matches_redis() {
    for proto in [2, 3] {
        let redis = RedisServer::start();
        let pal = Server::start();
        let want = introspection(redis.port(), proto);
        let got = introspection(pal.port(), proto);
        assert_eq!(want.len(), got.len());
        for (i, (w, g)) in want.iter().zip(&got).enumerate() {
            assert_reply(g, w, &format!("RESP{proto} PUBSUB step {i}"));
        }
    }
}
