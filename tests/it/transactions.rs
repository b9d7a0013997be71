//! MULTI/EXEC/DISCARD/WATCH against redis-server, byte for byte.

use crate::common::*;
use crate::differential::{diff, same, Step};

fn txn_steps() -> Vec<Step> {
    vec![
        same("MULTI"),
        same("SET k 1"),
        same("INCR k"),
        same("GET k"),
        same("HSET h f v"),
        same("LPUSH l a"),
        same("BLPOP l 0"),
        same("BLPOP l 0"),
        same("PING"),
        same("ECHO hi"),
        same("SET k v xx nx"),
        same("INCR h"),
        same("EXEC"),
        same("GET k"),
        same("MULTI"),
        same("EXEC"),
        same("EXEC"),
        same("DISCARD"),
        same("MULTI"),
        same("MULTI"),
        same("WATCH k"),
        same("SET k discarded"),
        same("DISCARD"),
        same("GET k"),
        same("MULTI"),
        same("SET k 5"),
        same("NOSUCHCOMMAND x"),
        same("GET k"),
        same("EXEC"),
        same("GET k"),
        same("MULTI"),
        same("GET"),
        same("EXEC"),
        same("MULTI"),
        same("GET k"),
        same("EXISTS k nokey"),
        same("EXEC"),
        // WATCH: the connection's own write to a watched key aborts the transaction.
        same("WATCH k"),
        same("SET k 6"),
        same("MULTI"),
        same("SET k 7"),
        same("EXEC"),
        same("GET k"),
        // Unchanged watched keys (including missing ones) let EXEC run.
        same("WATCH k missing"),
        same("MULTI"),
        same("SET k 8"),
        same("EXEC"),
        same("GET k"),
        same("WATCH k"),
        same("UNWATCH"),
        same("SET k 9"),
        same("MULTI"),
        same("GET k"),
        same("EXEC"),
        same("WATCH"),
    ]
}

#[test]
fn transactions_match_redis() {
    diff(2, &txn_steps());
    diff(3, &txn_steps());
}

/// A write from another client between WATCH and EXEC aborts the transaction.
fn watch_transcript(port: u16) -> Vec<Vec<u8>> {
    let mut a = Conn::connect(port);
    let mut b = Conn::connect(port);
    vec![
        a.c("SET balance 10"),
        a.c("WATCH balance"),
        b.c("INCRBY balance 5"),
        a.c("MULTI"),
        a.c("SET balance 0"),
        a.c("EXEC"),
        a.c("GET balance"),
        a.c("WATCH balance"),
        a.c("MULTI"),
        a.c("SET balance 0"),
        b.c("GET balance"),
        a.c("EXEC"),
        a.c("GET balance"),
        a.c("WATCH gone"),
        b.c("SET gone x"),
        a.c("MULTI"),
        a.c("GET gone"),
        a.c("EXEC"),
    ]
}

#[test]
fn watch_sees_other_clients_writes() {
    let redis = RedisServer::start();
    let pal = Server::start();
    let want = watch_transcript(redis.port());
    let got = watch_transcript(pal.port());
    for (i, (w, g)) in want.iter().zip(&got).enumerate() {
        assert_reply(g, w, &format!("WATCH step {i}"));
    }
}
