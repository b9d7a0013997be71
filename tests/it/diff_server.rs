//! The server surface of issue 14: FLUSHALL/FLUSHDB, SAVE/BGSAVE/BGREWRITEAOF/LASTSAVE,
//! DEBUG behind `enable-debug-command`, and keyspace notifications
//! (`notify-keyspace-events`), against redis-server where Redis defines the bytes, and on a
//! 3-node cluster for what only Palisade has (fences kept by a flush, events on a follower).

use std::time::Duration;

use crate::common::cluster::Cluster;
use crate::common::events::{compare_events, lines};
use crate::common::*;
use crate::differential::{diff, diff_with, same, Step};

// ---------------------------------------------------------------------------------------
// FLUSHALL, FLUSHDB, SAVE, BGSAVE, BGREWRITEAOF, DEBUG: replies as redis-server's
// ---------------------------------------------------------------------------------------

fn flush_and_save_steps() -> Vec<Step> {
    vec![
        same("SET a 1"),
        same("HSET h f v"),
        same("RPUSH l x y"),
        same("SET e 1 PX 100000"),
        same("DBSIZE"),
        same("FLUSHALL"),
        same("DBSIZE"),
        same("GET a"),
        same("EXISTS h l e"),
        same("SET a 2"),
        same("FLUSHDB"),
        same("DBSIZE"),
        same("FLUSHALL ASYNC"),
        same("FLUSHALL sync"),
        same("FLUSHDB async"),
        same("FLUSHDB SYNC"),
        same("FLUSHALL foo"),
        same("FLUSHALL async sync"),
        same("FLUSHDB x y"),
        same("SET a 3"),
        same("SAVE"),
        same("SAVE now"),
        same("BGSAVE foo"),
        same("BGSAVE schedule extra"),
        same("BGREWRITEAOF x"),
        same("BGSAVE"),
        Step::Sleep(1500),
        same("BGREWRITEAOF"),
        Step::Sleep(1500),
        same("BGSAVE SCHEDULE"),
        Step::Sleep(1500),
        same("GET a"),
        // DEBUG is refused by default (enable-debug-command no), whatever the subcommand.
        same("DEBUG HELP"),
        same("DEBUG SLEEP 0"),
        same("DEBUG OBJECT a"),
        same("DEBUG"),
        same("CONFIG GET enable-debug-command"),
        same("CONFIG SET enable-debug-command yes"),
    ]
}

#[test]
fn flush_and_save_match_redis_resp2() {
    diff(2, &flush_and_save_steps());
}

#[test]
fn flush_and_save_match_redis_resp3() {
    diff(3, &flush_and_save_steps());
}

fn debug_steps() -> Vec<Step> {
    vec![
        same("CONFIG GET enable-debug-command"),
        same("DEBUG SLEEP 0"),
        same("DEBUG SLEEP 0.01"),
        same("DEBUG SLEEP x"),
        same("DEBUG SLEEP"),
        same("DEBUG OBJECT nokey"),
        same("DEBUG OBJECT"),
        same("DEBUG SET-ACTIVE-EXPIRE 1"),
        same("DEBUG SET-ACTIVE-EXPIRE"),
        same("DEBUG JMAP"),
        same("DEBUG foo bar"),
        same("DEBUG"),
        same("PING"),
    ]
}

#[test]
fn debug_matches_redis_when_enabled_resp2() {
    let flags = ["--enable-debug-command", "yes"];
    diff_with(2, &debug_steps(), &flags, &flags);
}

#[test]
fn debug_matches_redis_when_enabled_resp3() {
    let flags = ["--enable-debug-command", "yes"];
    diff_with(3, &debug_steps(), &flags, &flags);
}

/// DEBUG OBJECT's line has Redis's fields and the encoding OBJECT ENCODING reports (the
/// address and LRU are Redis's own and not compared).
#[test]
fn debug_object_reports_the_encoding() {
    let pal = Server::start_with(&["--enable-debug-command", "local"]);
    let mut c = pal.conn();
    c.c("SET n 12");
    c.c("RPUSH l a");
    for (key, encoding) in [("n", "int"), ("l", "quicklist")] {
        let r = String::from_utf8_lossy(&c.c(&format!("DEBUG OBJECT {key}"))).into_owned();
        assert!(
            r.starts_with("+Value at:") && r.contains(&format!(" encoding:{encoding} ")),
            "DEBUG OBJECT {key}: {r}"
        );
        assert!(
            r.contains(" serializedlength:") && r.contains(" lru_seconds_idle:"),
            "{r}"
        );
    }
}

/// SAVE takes a snapshot: LASTSAVE and INFO persistence say so, and RAFT.INFO shows a
/// snapshot covering the writes; BGSAVE reports its progress and status.
#[test]
fn save_takes_a_snapshot_and_info_tells() {
    let pal = Server::start();
    let mut c = pal.conn();
    let started = as_int(&c.c("LASTSAVE"));
    for i in 0..5 {
        c.c(&format!("SET k{i} v"));
    }
    let info = |c: &mut Conn, field: &str| {
        let text = info_text(&c.c("INFO persistence"), 2);
        info_field(&text, field).unwrap_or_else(|| panic!("no {field} in {text}"))
    };
    assert!(
        info(&mut c, "rdb_changes_since_last_save")
            .parse::<u64>()
            .unwrap()
            >= 5
    );
    assert_eq!(info(&mut c, "rdb_bgsave_in_progress"), "0");
    assert_eq!(info(&mut c, "rdb_last_bgsave_status"), "ok");
    std::thread::sleep(Duration::from_millis(1100));
    assert_reply(&c.c("SAVE"), b"+OK\r\n", "SAVE");
    let saved = as_int(&c.c("LASTSAVE"));
    assert!(saved > started, "LASTSAVE {saved} after start {started}");
    assert_eq!(info(&mut c, "rdb_last_save_time"), saved.to_string());
    assert_eq!(info(&mut c, "rdb_changes_since_last_save"), "0");
    let raft = String::from_utf8_lossy(&c.c("RAFT.INFO")).into_owned();
    let snap: u64 = raft
        .split("snapshot_index:")
        .nth(1)
        .and_then(|s| s.split('\r').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    assert!(snap > 0, "no snapshot after SAVE: {raft}");
    c.c("SET after v");
    assert_reply(&c.c("BGSAVE"), b"+Background saving started\r\n", "BGSAVE");
    wait_for(Duration::from_secs(20), "BGSAVE to finish", || {
        (info(&mut c, "rdb_bgsave_in_progress") == "0").then_some(())
    });
    assert_eq!(info(&mut c, "rdb_last_bgsave_status"), "ok");
    assert_eq!(info(&mut c, "rdb_changes_since_last_save"), "0");
}

// ---------------------------------------------------------------------------------------
// Keyspace notifications: the event sequence of the existing commands, as redis-server's
// ---------------------------------------------------------------------------------------

/// The commands whose notifications are compared (each line's events arrive in order).
const EVENT_COMMANDS: &[&str] = &[
    "SET k v",
    "SET k v2 EX 100",
    "SET k v3 KEEPTTL",
    "SETNX k x",
    "SETNX n 1",
    "SETEX s 10 v",
    "PSETEX p 100000 v",
    "SET g 1 XX",
    "SET k v4 GET",
    "INCR c",
    "INCRBY c 5",
    "DECR c",
    "DECRBY c 2",
    "EXPIRE c 100",
    "PEXPIRE c 200000 GT",
    "PERSIST c",
    "PERSIST c",
    "EXPIRE k -1",
    "EXPIRE nokey 10",
    "GETDEL n",
    "GETDEL n",
    "DEL s p nokey",
    "UNLINK c",
    "HSET h a 1 b 2",
    "HMSET h b 3",
    "HSETNX h a 3",
    "HSETNX h c 3",
    "HINCRBY h a 5",
    "HDEL h nofield",
    "HDEL h a b",
    "HDEL h c",
    "LPUSH l a b",
    "RPUSH l c",
    "LPUSHX nolist a",
    "RPUSHX l d",
    "LPOP l",
    "RPOP l 2",
    "LPOP l 5",
    "LPOP l",
    "RPUSH q x",
    "BLPOP q 0",
    "SET big 1",
    "FLUSHALL",
    "SET e 1 PX 50",
];

/// Both servers expire `e` by themselves within a second or two (Redis from its active
/// expiry, Palisade from the leader's eviction entry): its `expired` comes last.
fn wait_for_e_to_expire(c: &mut Conn) {
    wait_for(Duration::from_secs(10), "e to expire", || {
        (c.c("DBSIZE") == b":0\r\n").then_some(())
    });
    std::thread::sleep(Duration::from_millis(300));
}

fn compare(proto: u8, classes: &[&str]) {
    compare_events(proto, classes, &lines(EVENT_COMMANDS), wait_for_e_to_expire);
}

#[test]
fn keyspace_events_match_redis_resp2() {
    compare(2, &["KEA"]);
}

#[test]
fn keyspace_events_match_redis_resp3() {
    compare(3, &["KEA"]);
}

/// Only the classes asked for, only the channels asked for (`n`: new keys; `E` alone:
/// keyevent channels only).
#[test]
fn keyspace_event_classes_filter_like_redis() {
    compare(2, &["En", "Kg$", "Elh", "Kx"]);
}

fn notify_config_steps() -> Vec<Step> {
    vec![
        same("CONFIG GET notify-keyspace-events"),
        same("CONFIG SET notify-keyspace-events KEA"),
        same("CONFIG GET notify-keyspace-events"),
        same("CONFIG SET notify-keyspace-events Ag$lshzxetdmnKE"),
        same("CONFIG GET notify-keyspace-events"),
        same("CONFIG SET notify-keyspace-events tdnme"),
        same("CONFIG GET notify-keyspace-events"),
        same("CONFIG SET notify-keyspace-events KEq"),
        same("CONFIG GET notify-keyspace-events"),
        same("CONFIG SET notify-keyspace-events"),
        same("CONFIG SET notify-keyspace-events ''"),
        same("CONFIG GET notify-keyspace-events"),
    ]
}

#[test]
fn notify_config_matches_redis() {
    diff(2, &notify_config_steps());
    diff(3, &notify_config_steps());
}

/// The start flag sets the classes as CONFIG SET does.
#[test]
fn notify_flag_sets_the_classes() {
    let pal = Server::start_with(&["--notify-keyspace-events", "KEA"]);
    let mut c = pal.conn();
    let r = c.c("CONFIG GET notify-keyspace-events");
    assert_reply(
        &r,
        b"*2\r\n$22\r\nnotify-keyspace-events\r\n$3\r\nAKE\r\n",
        "CONFIG GET after --notify-keyspace-events KEA",
    );
    let mut sub = pal.conn();
    sub.c("SUBSCRIBE __keyevent@0__:set");
    c.c("SET x 1");
    let m = sub.read_reply();
    assert_reply(
        &m,
        b"*3\r\n$7\r\nmessage\r\n$18\r\n__keyevent@0__:set\r\n$1\r\nx\r\n",
        "the set event",
    );
}

// ---------------------------------------------------------------------------------------
// On a cluster: a follower's subscriber, fences across a flush and a restart
// ---------------------------------------------------------------------------------------

/// A lock's expiry produces `expired` on `__keyevent@0__:expired` for a subscriber on a
/// follower (events come from each node's own applied log), and a write through the leader
/// produces the follower's `set`.
#[test]
fn a_follower_publishes_expired_for_a_lock() {
    let cluster = Cluster::start(3, &[]);
    let leader = cluster.wait_leader(&[1, 2, 3]);
    let follower = (1..=3).find(|id| *id != leader).unwrap_or(1);
    let mut f = cluster.conn(follower);
    assert_reply(
        &f.c("CONFIG SET notify-keyspace-events Ex$"),
        b"+OK\r\n",
        "CONFIG SET on the follower",
    );
    let mut sub = cluster.conn(follower);
    sub.c("SUBSCRIBE __keyevent@0__:expired __keyevent@0__:set");
    sub.read_reply(); // the second channel's subscribe reply
    let mut c = cluster.conn(leader);
    assert!(lock(&mut c, "lk", "owner", 300).is_some(), "LOCK granted");
    c.c("SET plain v");
    let m = sub.read_reply();
    assert_reply(
        &m,
        b"*3\r\n$7\r\nmessage\r\n$18\r\n__keyevent@0__:set\r\n$5\r\nplain\r\n",
        "set on the follower",
    );
    let m = sub.read_reply();
    assert_reply(
        &m,
        b"*3\r\n$7\r\nmessage\r\n$22\r\n__keyevent@0__:expired\r\n$2\r\nlk\r\n",
        "the lock's expiry on the follower",
    );
}

/// FLUSHALL through a follower removes every key in one entry, but a flushed key's fence
/// still refuses a lower token, also after the follower restarts; a lock's waiter gets the
/// flushed lock as after a DEL of it.
#[test]
fn flushall_keeps_fences_on_a_cluster_and_across_a_restart() {
    let mut cluster = Cluster::start(3, &[]);
    let leader = cluster.wait_leader(&[1, 2, 3]);
    let follower = (1..=3).find(|id| *id != leader).unwrap_or(1);
    let mut f = cluster.conn(follower);
    assert_reply(&f.c("FENCEDSET res v 50"), b"+OK\r\n", "FENCEDSET 50");
    f.c("SET a 1");
    f.c("HSET h f v");
    let t1 = lock(&mut f, "lk", "a", 60_000).expect("lock granted");
    let mut waiter = cluster.conn(follower);
    waiter.send(&words("LOCK lk b PX 60000 WAIT 20000"));
    wait_blocked(&mut f, 1);
    assert_reply(&f.c("FLUSHALL"), b"+OK\r\n", "FLUSHALL through a follower");
    let t2 = try_int(&waiter.read_reply()).expect("the waiter is granted the flushed lock");
    assert!(t2 > t1, "token {t2} after {t1}");
    assert_reply(&f.c("EXISTS a h res"), b":0\r\n", "keys gone");
    assert_reply(
        &f.c("FENCEDSET res w 49"),
        &fenced_err(49, 50),
        "fence kept",
    );
    assert_reply(&f.c("FENCEDGET res 49"), &fenced_err(49, 50), "fence kept");
    cluster.restart(follower);
    cluster.wait_converged(&[1, 2, 3]);
    let mut f = cluster.conn(follower);
    assert_reply(
        &f.c("FENCEDSET res w 49"),
        &fenced_err(49, 50),
        "fence kept after a restart",
    );
    assert_reply(&f.c("GET a"), b"$-1\r\n", "still flushed after a restart");
    assert_reply(
        &f.c("FENCEDSET res w 50"),
        b"+OK\r\n",
        "an equal token passes",
    );
}

// ---------------------------------------------------------------------------------------
// CLIENT KILL, PAUSE, UNPAUSE, REPLY, NO-EVICT, GETREDIR
// ---------------------------------------------------------------------------------------

fn client_steps() -> Vec<Step> {
    vec![
        same("CLIENT KILL 1.2.3.4:5"),
        same("CLIENT KILL ID 0"),
        same("CLIENT KILL ID x"),
        same("CLIENT KILL ID 99999"),
        same("CLIENT KILL ADDR 1.2.3.4:5"),
        same("CLIENT KILL LADDR 1.2.3.4:5"),
        same("CLIENT KILL TYPE foo"),
        same("CLIENT KILL TYPE master"),
        same("CLIENT KILL TYPE replica"),
        same("CLIENT KILL SKIPME maybe"),
        same("CLIENT KILL USER nobody"),
        same("CLIENT KILL USER default SKIPME yes ID 99999"),
        same("CLIENT KILL foo bar"),
        same("CLIENT KILL ID 5 SKIPME"),
        same("CLIENT KILL"),
        same("CLIENT PAUSE x"),
        same("CLIENT PAUSE -1"),
        same("CLIENT PAUSE 10 foo"),
        same("CLIENT PAUSE 1 all extra"),
        same("CLIENT PAUSE"),
        same("CLIENT PAUSE 10 WRITE"),
        same("CLIENT UNPAUSE"),
        same("CLIENT UNPAUSE x"),
        same("CLIENT REPLY foo"),
        same("CLIENT REPLY"),
        same("CLIENT NO-EVICT maybe"),
        same("CLIENT NO-EVICT on"),
        same("CLIENT NO-EVICT OFF"),
        same("CLIENT GETREDIR"),
        same("CLIENT GETREDIR x"),
        same("CLIENT TRACKING"),
        same("CLIENT REPLY ON"),
        same("PING"),
    ]
}

#[test]
fn client_subcommands_match_redis_resp2() {
    diff(2, &client_steps());
}

#[test]
fn client_subcommands_match_redis_resp3() {
    diff(3, &client_steps());
}

/// CLIENT REPLY OFF, ON and SKIP send exactly the replies Redis sends (the raw stream of a
/// pipeline is compared).
#[test]
fn client_reply_skips_replies_as_redis() {
    let input = encode_all(&[
        "CLIENT REPLY OFF",
        "SET a 1",
        "GET a",
        "CLIENT REPLY ON",
        "GET a",
        "CLIENT REPLY SKIP",
        "INCR a",
        "GET a",
        "QUIT",
    ]);
    let redis = RedisServer::start();
    let pal = Server::start();
    let run = |port: u16| {
        let mut c = Conn::connect(port);
        c.send_raw(&input);
        c.read_until_close(Duration::from_millis(500)).0
    };
    assert_eq!(show(&run(pal.port())), show(&run(redis.port())));
}

fn encode_all(lines: &[&str]) -> Vec<u8> {
    lines.iter().flat_map(|l| encode(&words(l))).collect()
}

/// CLIENT KILL closes the chosen connections (by ID, ADDR, USER; SKIPME spares the caller)
/// and counts them; the old form answers OK.
#[test]
fn client_kill_closes_connections() {
    let pal = Server::start();
    let mut me = pal.conn();
    let mut victim = pal.conn();
    let id = as_int(&victim.c("CLIENT ID"));
    assert_reply(
        &me.c(&format!("CLIENT KILL ID {id}")),
        b":1\r\n",
        "kill by ID",
    );
    let (_, closed) = victim.read_until_close(Duration::from_secs(2));
    assert!(closed, "the killed client is closed");
    let mut victim = pal.conn();
    let info = String::from_utf8_lossy(&victim.c("CLIENT INFO")).into_owned();
    let addr = info
        .split(' ')
        .find_map(|f| f.strip_prefix("addr="))
        .expect("addr field")
        .to_string();
    assert_reply(
        &me.c(&format!("CLIENT KILL {addr}")),
        b"+OK\r\n",
        "old form",
    );
    assert!(victim.read_until_close(Duration::from_secs(2)).1);
    // A command each, so that both are registered before the kill.
    let (mut a, mut b) = (pal.conn(), pal.conn());
    a.c("PING");
    b.c("PING");
    // Everyone but the caller (SKIPME yes is the default).
    let n = as_int(&me.c("CLIENT KILL USER default"));
    assert_eq!(n, 2, "the two other clients");
    assert!(a.read_until_close(Duration::from_secs(2)).1, "a is closed");
    assert!(b.read_until_close(Duration::from_secs(2)).1, "b is closed");
    assert_reply(&me.c("PING"), b"+PONG\r\n", "the caller is spared");
    assert_reply(
        &me.c("CLIENT KILL USER default SKIPME no"),
        b":1\r\n",
        "SKIPME no kills the caller",
    );
    assert!(me.read_until_close(Duration::from_secs(2)).1);
}

/// CLIENT PAUSE WRITE holds writes (reads go on) until it ends or CLIENT UNPAUSE.
#[test]
fn client_pause_holds_writes_until_unpause() {
    let pal = Server::start();
    let mut admin = pal.conn();
    let mut w = pal.conn();
    assert_reply(&admin.c("CLIENT PAUSE 20000 WRITE"), b"+OK\r\n", "PAUSE");
    assert_reply(&admin.c("GET k"), b"$-1\r\n", "reads are not paused");
    let started = std::time::Instant::now();
    w.send(&words("SET k v"));
    std::thread::sleep(Duration::from_millis(300));
    assert_reply(&admin.c("GET k"), b"$-1\r\n", "the write waits");
    assert_reply(&admin.c("CLIENT UNPAUSE"), b"+OK\r\n", "UNPAUSE");
    assert_reply(&w.read_reply(), b"+OK\r\n", "the write ran");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_reply(&admin.c("GET k"), b"$1\r\nv\r\n", "written");
    // A short pause of everything ends by itself.
    assert_reply(&admin.c("CLIENT PAUSE 300"), b"+OK\r\n", "PAUSE ALL");
    let started = std::time::Instant::now();
    assert_reply(&w.c("GET k"), b"$1\r\nv\r\n", "read after the pause");
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "{:?}",
        started.elapsed()
    );
}
