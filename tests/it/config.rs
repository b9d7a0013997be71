//! CONFIG SET takes effect on the running node (client limits, password, lock-delay, log
//! level), CONFIG REWRITE writes the `--config` file that the next start reads, the slow log
//! records slow writes, and SHUTDOWN stops the node cleanly. Reply bytes against Redis are in
//! differential.rs ("Server commands").

use std::time::{Duration, Instant};

use crate::common::cluster::Cluster;
use crate::common::*;

/// Phase by phase: each live setting is changed with CONFIG SET and the next request shows it.
#[test]
fn config_set_changes_the_running_node() {
    let srv = Server::start();
    let mut c = srv.conn();

    // maxclients: with two allowed, a third connection is refused.
    assert_reply(&c.c("CONFIG SET maxclients 2"), b"+OK\r\n", "maxclients");
    let mut second = srv.conn();
    assert_reply(&second.c("PING"), b"+PONG\r\n", "second client");
    let mut third = srv.conn();
    let (got, closed) = third.read_until_close(Duration::from_secs(5));
    assert_eq!(show(&got), show(b"-ERR max number of clients reached\r\n"));
    assert!(closed, "the refused connection is closed");
    drop(second);
    assert_reply(&c.c("CONFIG SET maxclients 100"), b"+OK\r\n", "maxclients");

    // proto-max-bulk-len: a bulk over the new limit is a protocol error.
    assert_reply(
        &c.c("CONFIG SET proto-max-bulk-len 1mb"),
        b"+OK\r\n",
        "bulk len",
    );
    let mut big = srv.conn();
    big.send_raw(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1048577\r\n");
    let (got, closed) = big.read_until_close(Duration::from_secs(5));
    assert_eq!(
        show(&got),
        show(b"-ERR Protocol error: invalid bulk length\r\n")
    );
    assert!(closed);
    let at_limit = vec![b'x'; 1_048_576];
    assert_reply(
        &c.cmd(&[&b"SET"[..], b"k", &at_limit]),
        b"+OK\r\n",
        "at the limit",
    );

    // requirepass: new connections must authenticate; this one stays authenticated.
    assert_reply(
        &c.c("CONFIG SET requirepass s3cret"),
        b"+OK\r\n",
        "requirepass",
    );
    let mut other = srv.conn();
    assert_reply(
        &other.c("GET k"),
        b"-NOAUTH Authentication required.\r\n",
        "a new connection",
    );
    assert_reply(&other.c("AUTH s3cret"), b"+OK\r\n", "AUTH");
    assert_reply(&c.c("DBSIZE"), b":1\r\n", "the old connection");
    assert_reply(
        &c.cmd(&["CONFIG", "SET", "requirepass", ""]),
        b"+OK\r\n",
        "no password",
    );
    assert_reply(&srv.conn().c("DBSIZE"), b":1\r\n", "no AUTH needed again");

    // lock-delay-ms: an expired lease keeps its key for the delay.
    assert_reply(
        &c.c("CONFIG SET lock-delay-ms 3000"),
        b"+OK\r\n",
        "lock-delay",
    );
    assert!(try_int(&c.c("LOCK d a PX 100")).is_some(), "a takes d");
    std::thread::sleep(Duration::from_millis(400));
    assert_reply(&c.c("LOCK d b PX 1000"), b"$-1\r\n", "b in a's lock-delay");
    assert_reply(
        &c.c("CONFIG SET lock-delay-ms 0"),
        b"+OK\r\n",
        "no lock-delay",
    );
    assert!(try_int(&c.c("LOCK e a PX 100")).is_some(), "a takes e");
    std::thread::sleep(Duration::from_millis(400));
    assert!(
        try_int(&c.c("LOCK e b PX 1000")).is_some(),
        "b takes e at once"
    );
}

/// CONFIG SET loglevel changes what the running node logs.
#[test]
fn config_set_loglevel_changes_the_log() {
    let srv = Server::start();
    let mut c = srv.conn();
    let protocol_error = || {
        let mut bad = srv.conn();
        bad.send_raw(b"*1\r\n$x\r\n");
        bad.read_until_close(Duration::from_secs(5));
    };
    let debug_lines = || {
        tail(&srv.log_path(), 1000)
            .matches("protocol error")
            .count()
    };
    protocol_error();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(debug_lines(), 0, "debug events are off at notice");
    assert_reply(&c.c("CONFIG SET loglevel verbose"), b"+OK\r\n", "verbose");
    assert_reply(
        &c.c("CONFIG GET loglevel"),
        b"*2\r\n$8\r\nloglevel\r\n$7\r\nverbose\r\n",
        "GET",
    );
    protocol_error();
    wait_for(Duration::from_secs(5), "a debug line", || {
        (debug_lines() == 1).then_some(())
    });
    assert_reply(&c.c("CONFIG SET loglevel notice"), b"+OK\r\n", "notice");
    protocol_error();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(debug_lines(), 1, "debug events are off again");
}

/// CONFIG REWRITE puts the live values into the `--config` file, keeps its comments, and
/// the node starts again with them.
#[test]
fn config_rewrite_writes_the_file_the_next_start_reads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("palisade.toml");
    std::fs::write(&path, "# kept\nmaxclients = 50\nlock-delay-ms = 1\n").expect("write");
    let file = path.to_str().expect("UTF-8 path");
    let mut srv = Server::start_with(&["--config", file]);
    let mut c = srv.conn();
    assert_reply(
        &c.c("CONFIG GET maxclients"),
        b"*2\r\n$10\r\nmaxclients\r\n$2\r\n50\r\n",
        "from the file",
    );
    let set = "CONFIG SET maxclients 60 lock-delay-ms 0 slowlog-max-len 5 loglevel warning";
    assert_reply(&c.c(set), b"+OK\r\n", "set");
    assert_reply(&c.c("CONFIG REWRITE"), b"+OK\r\n", "rewrite");
    let text = std::fs::read_to_string(&path).expect("read");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        &lines[..3],
        ["# kept", "maxclients = 60", "lock-delay-ms = 0"]
    );
    assert!(lines.contains(&"log-level = \"warn\""), "{text}");
    assert!(
        lines.contains(&format!("port = {}", srv.port()).as_str()),
        "{text}"
    );
    assert!(!text.contains("slowlog"), "not a file setting: {text}");
    srv.restart();
    let mut c = srv.conn();
    assert_reply(
        &c.c("CONFIG GET maxclients"),
        b"*2\r\n$10\r\nmaxclients\r\n$2\r\n60\r\n",
        "after the restart",
    );
    assert_reply(
        &c.c("CONFIG GET loglevel"),
        b"*2\r\n$8\r\nloglevel\r\n$7\r\nwarning\r\n",
        "after the restart",
    );
}

/// A write slower than `slowlog-log-slower-than` is in the slow log, with its arguments and
/// its real duration (here the Raft log's fsync, slowed by fault injection); a fast one is not.
#[test]
fn the_slow_log_records_slow_writes() {
    let srv = Server::start_with(&["--enable-fault-injection"]);
    let mut c = srv.conn();
    let set = "CONFIG SET slowlog-log-slower-than 200000";
    assert_reply(&c.c(set), b"+OK\r\n", "200 ms");
    c.c("SET fast v");
    assert_reply(&c.c("SLOWLOG LEN"), b":0\r\n", "nothing slow yet");
    assert_reply(&c.c("RAFT.FAULT SYNCDELAY 300"), b"+OK\r\n", "slow syncs");
    c.c("SET slow v");
    assert_reply(&c.c("RAFT.FAULT HEAL"), b"+OK\r\n", "heal");
    let r = c.c("SLOWLOG GET");
    assert!(r.starts_with(b"*1\r\n*6\r\n"), "{}", show(&r));
    let fields = split_frames(&r[8..], 2);
    let micros = as_int(&fields[2]);
    assert!(micros >= 300_000, "duration {micros} µs");
    assert_eq!(fields[3], b"*3\r\n$3\r\nSET\r\n$4\r\nslow\r\n$1\r\nv\r\n");
    // Off with -1; max-len keeps the newest.
    let all = "CONFIG SET slowlog-log-slower-than 0 slowlog-max-len 2";
    assert_reply(&c.c(all), b"+OK\r\n", "all");
    for i in 0..5 {
        c.c(&format!("SET k{i} v"));
    }
    assert_reply(&c.c("SLOWLOG LEN"), b":2\r\n", "the newest two");
    assert_reply(
        &c.c("CONFIG SET slowlog-log-slower-than -1"),
        b"+OK\r\n",
        "off",
    );
    assert_reply(&c.c("SLOWLOG RESET"), b"+OK\r\n", "reset");
    c.c("SET k v");
    assert_reply(&c.c("SLOWLOG LEN"), b":0\r\n", "off");
}

/// SHUTDOWN: no reply, the connection closes, the process exits 0 after its ordered stop,
/// and the data is there at the next start.
#[test]
fn shutdown_stops_the_node_cleanly() {
    let mut srv = Server::start();
    let mut c = srv.conn();
    assert_reply(&c.c("SET k v"), b"+OK\r\n", "SET");
    c.send(&["SHUTDOWN", "NOSAVE"]);
    let (got, closed) = c.read_until_close(Duration::from_secs(10));
    assert!(got.is_empty() && closed, "SHUTDOWN replied {}", show(&got));
    let start = Instant::now();
    let status = srv
        .wait_exit(Duration::from_secs(15))
        .expect("the node exits");
    assert!(status.success(), "exit status {status}");
    let log = tail(&srv.log_path(), 50);
    assert!(log.contains("palisade stopped"), "{log}");
    assert!(start.elapsed() < Duration::from_secs(15));
    srv.restart();
    assert_reply(&srv.conn().c("GET k"), b"$1\r\nv\r\n", "after the restart");
}

/// OBJECT and MEMORY USAGE read the key through the read path: on a follower they see a
/// write made through the leader at once (the read is forwarded, linearizable).
#[test]
fn object_and_memory_read_through_a_follower() {
    let cluster = Cluster::start(3, &[]);
    let leader = cluster.wait_leader(&[1, 2, 3]);
    let follower = (1..=3).find(|id| *id != leader).unwrap_or(1);
    let mut w = cluster.conn(leader);
    let mut r = cluster.conn(follower);
    for round in 0..3 {
        assert_reply(&w.c(&format!("SET k {round}")), b"+OK\r\n", "SET");
        assert_reply(&r.c("OBJECT ENCODING k"), b"$3\r\nint\r\n", "int");
        assert_reply(&w.c("SET k value"), b"+OK\r\n", "SET");
        assert_reply(&r.c("OBJECT ENCODING k"), b"$6\r\nembstr\r\n", "embstr");
        assert_reply(&r.c("MEMORY USAGE k"), b":64\r\n", "MEMORY USAGE");
        assert_reply(&w.c("DEL k"), b":1\r\n", "DEL");
        assert_reply(&r.c("MEMORY USAGE k"), b"$-1\r\n", "gone");
    }
    // Inside MULTI they are refused while queueing, and EXEC aborts.
    assert_reply(&r.c("MULTI"), b"+OK\r\n", "MULTI");
    assert_reply(
        &r.c("OBJECT ENCODING k"),
        b"-ERR Command not allowed inside a transaction\r\n",
        "queued",
    );
    assert_reply(
        &r.c("EXEC"),
        b"-EXECABORT Transaction discarded because of previous errors.\r\n",
        "EXEC",
    );
}

/// One `field:value` of an INFO reply, as a number.
fn info_field(c: &mut Conn, field: &str) -> u64 {
    let info = String::from_utf8(as_bulk(&c.c("INFO stats")).expect("INFO")).expect("UTF-8");
    let line = info
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")));
    line.and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in {info}"))
}

/// CONFIG RESETSTAT zeroes INFO stats' counters; the slow log stays.
#[test]
fn config_resetstat_zeroes_the_counters() {
    let srv = Server::start();
    let mut c = srv.conn();
    c.c("CONFIG SET slowlog-log-slower-than 0");
    for i in 0..20 {
        c.c(&format!("SET k{i} v"));
        drop(srv.conn());
    }
    assert!(info_field(&mut c, "total_commands_processed") > 20);
    assert!(info_field(&mut c, "total_connections_received") > 20);
    assert!(info_field(&mut c, "raft_batched_commands") >= 20);
    assert_reply(&c.c("CONFIG RESETSTAT"), b"+OK\r\n", "RESETSTAT");
    // INFO itself is the one command counted since.
    assert_eq!(info_field(&mut c, "total_commands_processed"), 1);
    assert_eq!(info_field(&mut c, "total_connections_received"), 0);
    assert_eq!(info_field(&mut c, "raft_batched_commands"), 0);
    assert!(as_int(&c.c("SLOWLOG LEN")) > 20, "the slow log stays");
}
