//! Differential tests (against redis-server 7.0) for what the Redis 7.0.15 Tcl units found
//! (issue 27, item 3; scripts/redis-units.sh, docs/compatibility.md): each runs the same
//! transcript on both servers and compares the replies, or, for random replies, what they
//! cover.
//!
//! - blocked clients on several keys that one transaction fills are served key by key in
//!   the order the keys were written (unit/type/list "BLMPOP with multiple blocked clients");
//! - sub-millisecond timeouts of the blocking pops time out (Redis rounds them up to 1 ms);
//! - subscription confirmations are pushed under CLIENT REPLY OFF (unit/pubsub);
//! - HRANDFIELD, RANDOMKEY, SRANDMEMBER and ZRANDMEMBER draw afresh on every call, even
//!   with no write in between (unit/type/hash "HRANDFIELD", unit/keyspace);
//! - INFO's replication section has `master_repl_offset` (unit/info-command);
//! - OBJECT ENCODING of a list is `quicklist`, as in Redis 7.0 (unit/type/list).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::common::*;

/// The Tcl unit's scenario: four clients blocked in BLMPOP on two keys, one transaction
/// filling both (the second key named first in key order), then a push to the second.
fn blmpop_transcript(port: u16) -> Vec<String> {
    let mut admin = Conn::connect(port);
    admin.c("DEL blist{t} blist2{t}");
    let mut waiters = Vec::new();
    for (i, cmd) in [
        "BLMPOP 0 2 blist{t} blist2{t} LEFT COUNT 1",
        "BLMPOP 0 2 blist{t} blist2{t} RIGHT COUNT 10",
        "BLMPOP 0 2 blist{t} blist2{t} LEFT COUNT 10",
        "BLMPOP 0 2 blist{t} blist2{t} RIGHT COUNT 1",
    ]
    .into_iter()
    .enumerate()
    {
        let mut w = Conn::connect(port);
        w.send(&words(cmd));
        wait_blocked(&mut admin, i + 1);
        waiters.push(w);
    }
    let mut out = vec![
        show(&admin.c("MULTI")),
        show(&admin.c("LPUSH blist{t} a b c d e")),
        show(&admin.c("LPUSH blist2{t} 1 2 3 4 5")),
        show(&admin.c("EXEC")),
    ];
    for w in &mut waiters[..3] {
        out.push(show(&w.read_reply()));
    }
    out.push(show(&admin.c("LPUSH blist2{t} 1 2 3")));
    out.push(show(&waiters[3].read_reply()));
    out.push(show(&admin.c("LRANGE blist2{t} 0 -1")));
    out
}

#[test]
fn blocked_clients_are_served_in_the_order_their_keys_were_written() {
    let redis = RedisServer::start();
    let pal = Server::start();
    let want = blmpop_transcript(redis.port());
    assert_eq!(
        blmpop_transcript(pal.port()),
        want,
        "BLMPOP transcripts differ"
    );
}

/// Every blocking pop with a timeout below a millisecond, on keys that stay empty: each must
/// answer its timeout reply (read with the harness's 15 s bound: a hang fails the test).
fn tiny_timeouts_transcript(port: u16) -> Vec<String> {
    let mut c = Conn::connect(port);
    let mut out = Vec::new();
    for cmd in [
        "BLPOP tiny 0.0001",
        "BRPOP tiny 0.0004",
        "BLMPOP 0.0001 1 tiny LEFT",
        "BRPOPLPUSH tiny dst 0.0001",
        "BLMOVE tiny dst LEFT RIGHT 0.0009",
        "BZPOPMIN ztiny 0.0001",
        "BZPOPMAX ztiny 0.0001",
        "BZMPOP 0.0001 1 ztiny MIN",
        "BLPOP tiny 0.001",
        "BLPOP tiny 0.0000000001",
    ] {
        let start = Instant::now();
        out.push(format!("{cmd} -> {}", show(&c.c(cmd))));
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{cmd} took {:?} on port {port}",
            start.elapsed()
        );
    }
    out.push(
        show(&c.c("INFO clients"))
            .contains("blocked_clients:0")
            .to_string(),
    );
    out
}

#[test]
fn sub_millisecond_timeouts_time_out() {
    let redis = RedisServer::start();
    let pal = Server::start();
    let want = tiny_timeouts_transcript(redis.port());
    assert_eq!(tiny_timeouts_transcript(pal.port()), want);
}

/// unit/pubsub "PubSub messages with CLIENT REPLY OFF", in RESP2 and RESP3, and REPLY SKIP.
fn reply_off_transcript(port: u16, proto: u8) -> Vec<String> {
    let mut publisher = Conn::connect(port);
    let mut c = Conn::connect(port);
    if proto == 3 {
        c.c("HELLO 3");
    }
    let mut out = Vec::new();
    c.send(&words("CLIENT REPLY OFF"));
    c.send(&words("SUBSCRIBE channel"));
    out.push(show(&c.read_reply()));
    c.send(&words("PSUBSCRIBE ch*"));
    out.push(show(&c.read_reply()));
    out.push(show(&publisher.c("PUBLISH channel hello")));
    out.push(show(&c.read_reply()));
    out.push(show(&c.read_reply()));
    c.send(&words("UNSUBSCRIBE channel"));
    out.push(show(&c.read_reply()));
    c.send(&words("PUNSUBSCRIBE"));
    out.push(show(&c.read_reply()));
    // Back on: a plain command's reply is silenced no more; SKIP silences only the next.
    c.send(&words("CLIENT REPLY ON"));
    out.push(show(&c.read_reply()));
    c.send(&words("CLIENT REPLY SKIP"));
    c.send(&words("SET k v"));
    c.send(&words("SUBSCRIBE other"));
    out.push(show(&c.read_reply()));
    c.send(&words("UNSUBSCRIBE"));
    out.push(show(&c.read_reply()));
    out.push(show(&c.c("GET k")));
    out
}

#[test]
fn subscriptions_are_confirmed_under_client_reply_off() {
    let redis = RedisServer::start();
    let pal = Server::start();
    for proto in [2, 3] {
        let want = reply_off_transcript(redis.port(), proto);
        assert_eq!(
            reply_off_transcript(pal.port(), proto),
            want,
            "RESP{proto} transcripts differ"
        );
    }
}

/// What 200 calls of each random read cover, with no write in between: every field, key or
/// member, as on Redis (a draw fixed by the keyspace's revision would cover one).
fn random_reads_cover(port: u16) -> Vec<(String, BTreeSet<Vec<u8>>)> {
    let mut c = Conn::connect(port);
    c.c("FLUSHALL");
    c.c("HSET h a 1 b 2 c 3");
    c.c("SADD s a b c");
    c.c("ZADD z 1 a 2 b 3 c");
    let mut out = Vec::new();
    for cmd in [
        "HRANDFIELD h",
        "RANDOMKEY",
        "SRANDMEMBER s",
        "ZRANDMEMBER z",
        "HRANDFIELD h -1",
        "SRANDMEMBER s 1",
        "ZRANDMEMBER z -1",
    ] {
        let mut seen = BTreeSet::new();
        for _ in 0..200 {
            seen.insert(c.c(cmd));
        }
        out.push((cmd.to_string(), seen));
    }
    out
}

#[test]
fn random_reads_draw_afresh_on_every_call() {
    let redis = RedisServer::start();
    let pal = Server::start();
    let want = random_reads_cover(redis.port());
    assert_eq!(random_reads_cover(pal.port()), want);
}

/// unit/info-command "info command with multiple sub-sections", as booleans.
fn info_sections(port: u16) -> Vec<(String, bool)> {
    let mut c = Conn::connect(port);
    let mut out = Vec::new();
    for (args, field) in [
        ("cpu sentinel", "used_cpu_user"),
        ("cpu sentinel", "master_repl_offset"),
        ("cpu all", "master_repl_offset"),
        ("cpu all", "rejected_calls"),
        ("cpu default", "master_repl_offset"),
        ("cpu default", "rejected_calls"),
        ("replication", "master_repl_offset"),
        ("replication", "role:master"),
        ("replication", "master_failover_state:no-failover"),
        ("replication", "second_repl_offset:-1"),
    ] {
        let info = String::from_utf8_lossy(&c.c(&format!("INFO {args}"))).into_owned();
        out.push((format!("INFO {args} has {field}"), info.contains(field)));
    }
    out
}

#[test]
fn info_replication_has_the_replication_offset() {
    let redis = RedisServer::start();
    let pal = Server::start();
    assert_eq!(info_sections(pal.port()), info_sections(redis.port()));
}

#[test]
fn object_encoding_of_a_list_is_quicklist() {
    let redis = RedisServer::start();
    let pal = Server::start();
    let steps = |port: u16| {
        let mut c = Conn::connect(port);
        [
            "RPUSH small a",
            "OBJECT ENCODING small",
            "RPUSH big a b c d e f g h i j k l m n o p q r s t u v w x y z",
            "OBJECT ENCODING big",
            "LPOP big 25",
            "OBJECT ENCODING big",
        ]
        .into_iter()
        .map(|l| show(&c.c(l)))
        .collect::<Vec<_>>()
    };
    assert_eq!(steps(pal.port()), steps(redis.port()));
}

/// unit/scripting "SORT BY <constant> output gets ordered for scripting" (and with GET): a
/// script's SORT of a set BY a constant sorts ALPHA; of a list it keeps the list's order.
#[test]
fn a_scripts_sort_by_a_constant_is_ordered() {
    let redis = RedisServer::start();
    let pal = Server::start();
    let steps = |port: u16| {
        let mut c = Conn::connect(port);
        c.c("SADD myset a b c d e f g h i l m n o p q r s t u v z aa aaa azz 10 9");
        c.c("RPUSH mylist c b a");
        let mut out = Vec::new();
        for args in [
            vec!["myset", "by", "_"],
            vec!["myset", "by", "_", "get", "#", "get", "_:*"],
            vec!["myset", "by", "nosort", "desc", "limit", "1", "3"],
            vec!["mylist", "by", "_"],
        ] {
            let script = "return redis.call('sort', KEYS[1], unpack(ARGV))";
            out.push(show(&c.cmd(&eval_argv(
                "EVAL",
                script,
                &args[..1],
                &args[1..],
            ))));
        }
        out
    };
    assert_eq!(steps(pal.port()), steps(redis.port()));
}
