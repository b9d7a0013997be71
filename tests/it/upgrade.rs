//! Data written by the release on openraft 0.9 (on-disk format 1) opens under this build,
//! is upgraded to format 2 once, and reads exactly as it was written: values, locks and their
//! tokens, fences that outlived their values, the script cache; new tokens stay above the
//! old ones. The fixture is a real data directory written by that release
//! (scripts/make-format1-fixture.sh shows how, and what it wrote).

use std::path::PathBuf;

use sha1::{Digest, Sha1};

use crate::common::{as_int, assert_reply, decode2, lock, tail, Server};

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/format1-datadir")
}

/// LOCKINFO's owner and token, from its RESP2 array (owner, token, pttl as field pairs).
fn lockinfo(reply: &[u8]) -> (String, i64) {
    use redis_protocol::resp2::types::OwnedFrame;
    let OwnedFrame::Array(items) = decode2(reply) else {
        panic!("LOCKINFO: not an array: {}", String::from_utf8_lossy(reply));
    };
    let mut owner = None;
    let mut token = None;
    for pair in items.chunks(2) {
        match (&pair[0], &pair[1]) {
            (OwnedFrame::BulkString(k), OwnedFrame::BulkString(v)) if k == b"owner" => {
                owner = Some(String::from_utf8_lossy(v).into_owned())
            }
            (OwnedFrame::BulkString(k), OwnedFrame::Integer(t)) if k == b"token" => {
                token = Some(*t)
            }
            _ => {}
        }
    }
    (owner.expect("owner"), token.expect("token"))
}

#[test]
fn a_data_directory_written_on_openraft_0_9_opens_upgrades_once_and_reads_the_same() {
    let mut s = Server::start_on_copy_of(&fixture(), &[]);
    let mut c = s.conn();

    assert_reply(&c.c("GET plain"), b"$2\r\nv1\r\n", "GET plain");
    assert_reply(&c.c("GET counter"), b"$2\r\n50\r\n", "the 50 INCRs");
    assert_reply(
        &c.c("HGETALL h"),
        b"*4\r\n$1\r\nf\r\n$1\r\n1\r\n$1\r\ng\r\n$1\r\n2\r\n",
        "HGETALL h",
    );
    assert_reply(
        &c.c("LRANGE l 0 -1"),
        b"*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n",
        "LRANGE l",
    );
    let (owner, old_token) = lockinfo(&c.c("LOCKINFO lk"));
    assert_eq!(owner, "owner1");
    assert!(old_token > 0);
    // Fences outlive values, across the upgrade too.
    assert_reply(
        &c.c("FENCEDSET fenced z 99"),
        b"-FENCED token 99 is lower than 100\r\n",
        "the fence on a live key",
    );
    assert_reply(
        &c.c("FENCEDSET gone z 99"),
        b"-FENCED token 99 is lower than 100\r\n",
        "the fence of a deleted key",
    );
    let sha = hex::encode(Sha1::digest(b"return 'from-format-1'"));
    assert_reply(
        &c.c(&format!("EVALSHA {sha} 0")),
        b"$13\r\nfrom-format-1\r\n",
        "the cached script",
    );
    // Tokens are revisions, and the revision survived: the fixture's 60 entries held more
    // than 50 commands after the lock was granted.
    let new_token = lock(&mut c, "fresh", "o", 60_000).expect("a new lock");
    assert!(
        new_token > old_token + 50,
        "new token {new_token} is not above the old revision (lock token {old_token} + 50 INCRs)"
    );
    assert!(
        tail(&s.log_path(), 200).contains("upgraded the on-disk format"),
        "no upgrade logged"
    );

    // The upgrade ran once: the second start reads format 2 and logs no upgrade.
    s.restart();
    let mut c = s.conn();
    let (owner, token) = lockinfo(&c.c("LOCKINFO lk"));
    assert_eq!((owner.as_str(), token), ("owner1", old_token));
    assert_eq!(
        lock(&mut c, "fresh", "o", 60_000),
        Some(new_token),
        "re-locking by the same owner keeps its token"
    );
    assert_eq!(as_int(&c.c("EXISTS plain counter h l")), 4);
    let log = tail(&s.log_path(), 400);
    assert_eq!(
        log.matches("upgraded the on-disk format").count(),
        1,
        "the upgrade ran more than once:\n{log}"
    );
}
