//! The conditional writes of Redis 8.4 and Valkey (`SET ... IFEQ|IFNE|IFDEQ|IFDNE`, `DELEX`,
//! `DIGEST`, `DELIFEQ`), checked against the replies their command pages and Redis's own
//! `unit/type/string.tcl` give. Redis 8.4 is not packaged here, so the expected replies are
//! written out from those documents rather than read from a live server.

use crate::common::*;

/// A transcript step: a command and the exact reply bytes it must get.
fn expect(c: &mut Conn, args: &[&str], want: &[u8]) {
    assert_reply(&c.cmd(args), want, &args.join(" "));
}

fn digest_of(c: &mut Conn, key: &str) -> String {
    let d = as_bulk(&c.cmd(&["DIGEST", key])).expect("a digest");
    String::from_utf8(d).expect("hex")
}

/// The digest plus one, written without leading zeros, as the Redis tests build a wrong one.
fn wrong_digest(d: &str) -> String {
    format!(
        "{:x}",
        u64::from_str_radix(d, 16).expect("hex").wrapping_add(1)
    )
}

const WRONGTYPE: &[u8] = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

#[test]
fn digest_is_xxh3_in_sixteen_lower_case_hex_digits() {
    let srv = Server::start();
    let mut c = srv.conn();
    expect(&mut c, &["SET", "key1", "Hello world"], b"+OK\r\n");
    // The example on the DIGEST command page.
    expect(&mut c, &["DIGEST", "key1"], b"$16\r\nb6acb9d84a38ff74\r\n");
    expect(&mut c, &["DIGEST", "missing"], b"$-1\r\n");
    expect(&mut c, &["RPUSH", "list", "a"], b":1\r\n");
    expect(&mut c, &["DIGEST", "list"], WRONGTYPE);
    expect(
        &mut c,
        &["DIGEST"],
        b"-ERR wrong number of arguments for 'digest' command\r\n",
    );
    // The same content gives the same digest on any key; other content another one.
    expect(&mut c, &["SET", "a", "identical"], b"+OK\r\n");
    expect(&mut c, &["SET", "b", "identical"], b"+OK\r\n");
    expect(&mut c, &["SET", "e", ""], b"+OK\r\n");
    let (da, db, de) = (
        digest_of(&mut c, "a"),
        digest_of(&mut c, "b"),
        digest_of(&mut c, "e"),
    );
    assert_eq!(da, db);
    assert_ne!(da, de);
    assert!(
        de.len() == 16
            && de
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    );
}

#[test]
fn set_conditions_follow_the_redis_8_4_command_page() {
    let srv = Server::start();
    let mut c = srv.conn();
    // IFEQ: set only on an equal value; a missing key is not created.
    expect(&mut c, &["SET", "k", "hello"], b"+OK\r\n");
    expect(
        &mut c,
        &["SET", "k", "world", "IFEQ", "different"],
        b"$-1\r\n",
    );
    expect(&mut c, &["GET", "k"], b"$5\r\nhello\r\n");
    expect(&mut c, &["SET", "k", "world", "ifeq", "hello"], b"+OK\r\n");
    expect(&mut c, &["GET", "k"], b"$5\r\nworld\r\n");
    expect(&mut c, &["SET", "absent", "v", "IFEQ", "x"], b"$-1\r\n");
    expect(&mut c, &["EXISTS", "absent"], b":0\r\n");
    // IFNE: set on a different value or a missing key.
    expect(&mut c, &["SET", "k", "again", "IFNE", "world"], b"$-1\r\n");
    expect(&mut c, &["SET", "k", "again", "IfNe", "other"], b"+OK\r\n");
    expect(&mut c, &["SET", "new", "v", "IFNE", "x"], b"+OK\r\n");
    expect(&mut c, &["GET", "new"], b"$1\r\nv\r\n");
    // IFDEQ / IFDNE compare the digest as a hex number.
    expect(&mut c, &["SET", "d", "hello"], b"+OK\r\n");
    let d = digest_of(&mut c, "d");
    let wrong = wrong_digest(&d);
    expect(&mut c, &["SET", "d", "world", "IFDEQ", &wrong], b"$-1\r\n");
    expect(&mut c, &["SET", "d", "world", "IFDNE", &d], b"$-1\r\n");
    expect(
        &mut c,
        &["SET", "d", "world", "IFDEQ", &d.to_uppercase()],
        b"+OK\r\n",
    );
    expect(&mut c, &["SET", "d", "hello", "IFDNE", &wrong], b"+OK\r\n");
    expect(
        &mut c,
        &["SET", "nod", "v", "IFDEQ", "1234567890"],
        b"$-1\r\n",
    );
    expect(&mut c, &["EXISTS", "nod"], b":0\r\n");
    expect(
        &mut c,
        &["SET", "nod", "v", "IFDNE", "1234567890"],
        b"+OK\r\n",
    );
    expect(
        &mut c,
        &["SET", "d", "x", "IFDEQ", "xyz"],
        b"-ERR digest must be a hexadecimal number of 1 to 16 digits\r\n",
    );
    // GET returns the old value whether or not the condition held.
    expect(&mut c, &["SET", "g", "hello"], b"+OK\r\n");
    expect(
        &mut c,
        &["SET", "g", "world", "IFEQ", "nope", "GET"],
        b"$5\r\nhello\r\n",
    );
    expect(&mut c, &["GET", "g"], b"$5\r\nhello\r\n");
    expect(
        &mut c,
        &["SET", "g", "world", "IFEQ", "hello", "GET"],
        b"$5\r\nhello\r\n",
    );
    expect(&mut c, &["GET", "g"], b"$5\r\nworld\r\n");
    expect(
        &mut c,
        &["SET", "gone", "v", "IFNE", "x", "GET"],
        b"$-1\r\n",
    );
    expect(&mut c, &["GET", "gone"], b"$1\r\nv\r\n");
    // The condition gates the expiry too.
    expect(&mut c, &["SET", "t", "hello"], b"+OK\r\n");
    expect(
        &mut c,
        &["SET", "t", "world", "IFEQ", "nope", "EX", "100"],
        b"$-1\r\n",
    );
    expect(&mut c, &["TTL", "t"], b":-1\r\n");
    expect(
        &mut c,
        &["SET", "t", "world", "IFEQ", "hello", "EX", "100"],
        b"+OK\r\n",
    );
    assert!((90..=100).contains(&as_int(&c.cmd(&["TTL", "t"]))));
    // Other types: WRONGTYPE for every condition, and nothing changes.
    expect(&mut c, &["HSET", "h", "f", "v"], b":1\r\n");
    for cond in ["IFEQ", "IFNE"] {
        expect(&mut c, &["SET", "h", "v", cond, "v"], WRONGTYPE);
    }
    for cond in ["IFDEQ", "IFDNE"] {
        expect(&mut c, &["SET", "h", "v", cond, "1234567890"], WRONGTYPE);
    }
    expect(&mut c, &["TYPE", "h"], b"+hash\r\n");
    // Conditions exclude each other and NX/XX; a condition needs its value.
    for bad in [
        &["SET", "k", "v", "NX", "IFEQ", "a"][..],
        &["SET", "k", "v", "IFEQ", "a", "XX"],
        &["SET", "k", "v", "IFEQ", "a", "IFNE", "b"],
        &["SET", "k", "v", "IFEQ"],
    ] {
        expect(&mut c, bad, b"-ERR syntax error\r\n");
    }
}

#[test]
fn resp3_answers_a_failed_condition_with_null() {
    let srv = Server::start();
    let mut c = srv.conn();
    c.c("HELLO 3");
    expect(&mut c, &["SET", "k", "v", "IFEQ", "x"], b"_\r\n");
    expect(&mut c, &["DIGEST", "k"], b"_\r\n");
}

#[test]
fn delex_and_delifeq_delete_only_when_the_condition_holds() {
    let srv = Server::start();
    let mut c = srv.conn();
    // Without a condition DELEX removes a key of any type.
    expect(&mut c, &["SET", "s", "hello"], b"+OK\r\n");
    expect(&mut c, &["ZADD", "z", "1", "m"], b":1\r\n");
    expect(&mut c, &["DELEX", "s"], b":1\r\n");
    expect(&mut c, &["DELEX", "z"], b":1\r\n");
    expect(&mut c, &["DELEX", "z"], b":0\r\n");
    // IFEQ / IFNE.
    expect(&mut c, &["SET", "k", "hello"], b"+OK\r\n");
    expect(&mut c, &["DELEX", "k", "IFEQ", "world"], b":0\r\n");
    expect(&mut c, &["DELEX", "k", "IFNE", "hello"], b":0\r\n");
    expect(&mut c, &["GET", "k"], b"$5\r\nhello\r\n");
    expect(&mut c, &["DELEX", "k", "IFEQ", "hello"], b":1\r\n");
    expect(&mut c, &["EXISTS", "k"], b":0\r\n");
    expect(&mut c, &["SET", "k", "hello"], b"+OK\r\n");
    expect(&mut c, &["DELEX", "k", "IFNE", "world"], b":1\r\n");
    // IFDEQ / IFDNE.
    expect(&mut c, &["SET", "k", "hello"], b"+OK\r\n");
    let d = digest_of(&mut c, "k");
    let wrong = wrong_digest(&d);
    expect(&mut c, &["DELEX", "k", "IFDEQ", &wrong], b":0\r\n");
    expect(&mut c, &["DELEX", "k", "IFDNE", &d], b":0\r\n");
    expect(&mut c, &["DELEX", "k", "IFDEQ", &d], b":1\r\n");
    // A missing key is never deleted, whatever the condition.
    for (cond, v) in [
        ("IFEQ", "x"),
        ("IFNE", "x"),
        ("IFDEQ", "1234567890"),
        ("IFDNE", "1234567890"),
    ] {
        expect(&mut c, &["DELEX", "nokey", cond, v], b":0\r\n");
    }
    // A condition on another type is an error and deletes nothing.
    expect(&mut c, &["SADD", "set", "m"], b":1\r\n");
    expect(&mut c, &["DELEX", "set", "IFEQ", "m"], WRONGTYPE);
    expect(&mut c, &["EXISTS", "set"], b":1\r\n");
    // Argument errors as Redis's tests give them.
    expect(&mut c, &["DELEX", "nokey", "IFEQ"], b":0\r\n");
    expect(&mut c, &["SET", "k1", "x"], b"+OK\r\n");
    let arity = b"-ERR wrong number of arguments for 'delex' command\r\n";
    expect(&mut c, &["DELEX", "k1", "IFEQ"], arity);
    expect(&mut c, &["DELEX", "k1", "IFEQ", "x", "extra"], arity);
    for word in ["INVALID", "IF", "EQ"] {
        expect(
            &mut c,
            &["DELEX", "k1", word, "x"],
            b"-ERR Invalid condition. Use IFEQ, IFNE, IFDEQ or IFDNE\r\n",
        );
    }
    expect(&mut c, &["GET", "k1"], b"$1\r\nx\r\n");
    // Valkey's DELIFEQ: the transcript of its command page.
    expect(&mut c, &["SET", "mykey", "abc123"], b"+OK\r\n");
    expect(&mut c, &["DELIFEQ", "mykey", "abc123"], b":1\r\n");
    expect(&mut c, &["DELIFEQ", "mykey", "abc123"], b":0\r\n");
    expect(&mut c, &["SET", "mykey", "xyz789"], b"+OK\r\n");
    expect(&mut c, &["DELIFEQ", "mykey", "abc123"], b":0\r\n");
    expect(&mut c, &["DEL", "mykey"], b":1\r\n");
    expect(&mut c, &["SADD", "mykey", "somevalue"], b":1\r\n");
    expect(&mut c, &["DELIFEQ", "mykey", "somevalue"], WRONGTYPE);
}

/// The lock recipes the new commands exist for, on a Palisade lock: extend with
/// `SET key owner IFEQ owner PX ms`, release with `DELIFEQ` or `DELEX ... IFEQ`. A stale
/// owner can do neither, and the next grant still gets a higher token.
#[test]
fn conditional_writes_extend_and_release_palisade_locks_safely() {
    let srv = Server::start();
    let mut c = srv.conn();
    let t1 = as_int(&c.cmd(&["LOCK", "res", "A", "PX", "60000"]));
    expect(
        &mut c,
        &["SET", "res", "B", "IFEQ", "B", "PX", "60000"],
        b"$-1\r\n",
    );
    expect(&mut c, &["DELIFEQ", "res", "B"], b":0\r\n");
    expect(
        &mut c,
        &["SET", "res", "A", "IFEQ", "A", "PX", "90000"],
        b"+OK\r\n",
    );
    assert!(
        as_int(&c.cmd(&["PTTL", "res"])) > 60_000,
        "IFEQ extended the lease"
    );
    expect(&mut c, &["DELIFEQ", "res", "A"], b":1\r\n");
    let t2 = as_int(&c.cmd(&["LOCK", "res", "B", "PX", "60000"]));
    assert!(t2 > t1, "the next grant's token {t2} is above {t1}");
    expect(&mut c, &["DELEX", "res", "IFEQ", "A"], b":0\r\n");
    expect(&mut c, &["DELEX", "res", "IFEQ", "B"], b":1\r\n");
}

/// The writes go through the log: a follower sees them, and a condition evaluated on the
/// leader's state is what every replica applies.
#[test]
fn conditional_writes_replicate_to_followers() {
    let cluster = crate::common::cluster::Cluster::start(3, &[]);
    let leader = cluster.wait_leader(&[1, 2, 3]);
    let follower = [1, 2, 3]
        .into_iter()
        .find(|&n| n != leader)
        .expect("a follower");
    let mut f = cluster.conn(follower);
    // Through the follower (forwarded) and read back on every node.
    expect(&mut f, &["SET", "k", "v1"], b"+OK\r\n");
    expect(&mut f, &["SET", "k", "v2", "IFEQ", "v1"], b"+OK\r\n");
    expect(&mut f, &["SET", "k", "v3", "IFEQ", "v1"], b"$-1\r\n");
    expect(&mut f, &["SET", "gone", "x"], b"+OK\r\n");
    expect(&mut f, &["DELIFEQ", "gone", "x"], b":1\r\n");
    cluster.wait_converged(&[1, 2, 3]);
    for n in [1, 2, 3] {
        let mut c = cluster.conn(n);
        expect(&mut c, &["GET", "k"], b"$2\r\nv2\r\n");
        expect(&mut c, &["EXISTS", "gone"], b":0\r\n");
        expect(
            &mut c,
            &["DIGEST", "k"],
            &bulk_bytes(format!("{:016x}", xxh3(b"v2")).as_bytes()),
        );
    }
}

/// XXH3-64 as the server computes it; the documented example in the first test pins it to
/// Redis's function.
fn xxh3(v: &[u8]) -> u64 {
    palisade::cmd::cond::digest(v)
}
