//! The stored and replicated encoding of every command is pinned: each row of
//! `tests/fixtures/commands.golden` is a recipe (a command line, or `@name` for a command no
//! client can send) and the postcard bytes that log entries and snapshots written by
//! commit 2e66ffe hold for it. Every row must encode to exactly those bytes and decode back
//! to an equal command. A failure here means the on-disk and wire format changed: that needs
//! a format version and an upgrade step (docs/storage.md), never a re-blessed fixture.
//!
//! Commands now carry explicit tags (src/cmd/registry.rs), equal to the variant positions
//! postcard used before; this test is what shows the bytes did not move.
//!
//! The fixture was generated once, from the code before commands had explicit tags, with
//! `PALISADE_BLESS_GOLDEN=1 cargo test --release --test it golden`. Adding a command adds
//! rows (bless, then check that only new rows appeared: `git diff` shows it); never edit one.
//!
//! One row's recipe was renamed, its bytes unchanged: `LOCK l owner PX 1000 WAIT 50` parsed
//! to that `Lock` until WAIT became a queue (it now parses to an `Acquire`, a row of its own),
//! so the old bytes are pinned as `@lock-wait-v1`.

use std::collections::BTreeSet;
use std::path::PathBuf;

use bytes::Bytes;
use palisade::cmd::evict::{Evict, Tick};
use palisade::cmd::lock::{Acquire, Lock};
use palisade::cmd::lockwait::{LockCancel, LockPurge, LockReleaseGrant, LockReleaseToken};
use palisade::cmd::multi::{Exec, Versions};
use palisade::cmd::popwait::{PopCancel, PopWait};
use palisade::cmd::{Command, Request};
use palisade::raft::Batch;
use palisade::state::WaiterId;

/// Every recipe, in fixture order. Together they cover every command and every variant of
/// the enums inside commands (TTL modes, reply forms, read ops, sources, subcommands).
const RECIPES: &[&str] = &[
    "GET k",
    "GETDEL k",
    "SET k v",
    "SET k v NX GET KEEPTTL",
    "SET k v XX PX 100",
    "SET k v EXAT 2000000000",
    "SETNX k v",
    "PSETEX k 250 v",
    "DEL a b",
    "EXISTS a b",
    "EXPIRE k 10 NX",
    "PEXPIREAT k 5000 GT",
    "EXPIRE k 10 XX LT",
    "PERSIST k",
    "TTL k",
    "PTTL k",
    "TYPE k",
    "INCRBY k -5",
    "DECR k",
    "KEYS a*",
    "SCAN 5 MATCH a* COUNT 20 TYPE string",
    "SCAN 0",
    "DBSIZE",
    "@lock-wait-v1",
    "LOCK l owner PX 1000",
    "UNLOCK l owner",
    "RENEW l owner PX 2000",
    "LOCKINFO l",
    "FENCEDSET r v 7 PX 100",
    "FENCEDSET r v 7",
    "FENCEDGET r 7",
    "FENCECHECK l 7",
    "@evict",
    "@tick",
    "HSET h f v g w",
    "HMSET h f v",
    "HSETNX h f v",
    "HDEL h f g",
    "HINCRBY h f -3",
    "HGET h f",
    "HMGET h f g",
    "HEXISTS h f",
    "HLEN h",
    "HGETALL h",
    "HKEYS h",
    "HVALS h",
    "LPUSH l a b",
    "RPUSHX l a",
    "LPOP l",
    "RPOP l 3",
    "BLPOP a b 1.5",
    "BRPOP a 0",
    "LLEN l",
    "LRANGE l 0 -1",
    "LINDEX l -2",
    "PUBLISH ch msg",
    "SPUBLISH ch msg",
    "EVAL return(1) 1 k a",
    "EVALSHA 0123456789ABCDEF0123456789abcdef01234567 0",
    "EVAL_RO return(1) 0",
    "EVALSHA_RO 0123456789abcdef0123456789abcdef01234567 1 k",
    "SCRIPT LOAD return(1)",
    "SCRIPT EXISTS a b",
    "SCRIPT FLUSH",
    "SCRIPT BUDGET 100",
    "SCRIPT BUDGET",
    "@exec",
    "@versions",
    "LOCK l owner PX 1000 WAIT 50",
    "LOCK l owner PX 1000 DELAY 20 WAIT 0",
    "@acquire-waiter",
    "@lock-cancel",
    "@lock-release-token",
    "@lock-purge",
    "ACL SETUSER alice on >pw ~lock:* %R~r:* &ch +@read -get +config|get",
    "ACL DELUSER a b",
    "@acl-load",
    "@eval-as",
    "@eval-ro-as",
    "@eval-metered",
    "@eval-ro-metered",
    "RENAME a b",
    "RENAMENX a b",
    "COPY a b REPLACE",
    "RANDOMKEY",
    "TOUCH a b",
    "EXPIRETIME k",
    "PEXPIRETIME k",
    "MGET a b",
    "MSET a 1 b 2",
    "MSETNX a 1",
    "GETEX k",
    "GETEX k PERSIST",
    "GETEX k EX 10",
    "GETEX k PXAT 5000",
    "GETEX k EX x",
    "GETEX k EX 0",
    "GETSET k v",
    "APPEND k v",
    "SETRANGE k 3 v",
    "INCRBYFLOAT k 1.5",
    "STRLEN k",
    "GETRANGE k 0 -1",
    "SETBIT k 7 1",
    "GETBIT k 7",
    "BITCOUNT k",
    "BITCOUNT k 0 -1 BIT",
    "BITPOS k 1 0",
    "BITOP AND d a b",
    "BITOP OR d a",
    "BITOP XOR d a b",
    "BITOP NOT d a",
    "BITFIELD k SET u8 #1 200 OVERFLOW SAT INCRBY i5 3 -100 OVERFLOW FAIL SET i64 0 -1 GET u4 0",
    "BITFIELD_RO k GET i64 0 GET u63 #2",
    "LCS a b IDX",
    "SADD s a b",
    "SREM s a",
    "SPOP s",
    "SPOP s 2",
    "SMOVE a b m",
    "SINTER a b",
    "SUNION a b",
    "SDIFF a b",
    "SINTERCARD 2 a b LIMIT 3",
    "SINTERSTORE d a b",
    "SUNIONSTORE d a b",
    "SDIFFSTORE d a",
    "SMEMBERS s",
    "SISMEMBER s m",
    "SMISMEMBER s m n",
    "SCARD s",
    "SRANDMEMBER s",
    "SRANDMEMBER s -3",
    "SSCAN s 0 MATCH a* COUNT 5",
    "SORT k BY w_* LIMIT 0 10 GET # GET h_*->f DESC ALPHA STORE d",
    "SORT_RO k",
    "LMOVE a b LEFT RIGHT",
    "BLMOVE a b RIGHT LEFT 1.5",
    "RPOPLPUSH a b",
    "BRPOPLPUSH a b 0",
    "LMPOP 2 a b RIGHT COUNT 3",
    "BLMPOP 0.5 1 a LEFT",
    "LSET l -1 v",
    "LINSERT l BEFORE p v",
    "LINSERT l AFTER p v",
    "LREM l -2 v",
    "LTRIM l 1 -1",
    "LPOS l v",
    "LPOS l v RANK -2 COUNT 0 MAXLEN 10",
    "HSTRLEN h f",
    "HINCRBYFLOAT h f 1.5",
    "HRANDFIELD h",
    "HRANDFIELD h -5 WITHVALUES",
    "HSCAN h 0 MATCH f* COUNT 5",
    "ZADD z NX CH 1.5 a -inf b",
    "ZINCRBY z 2 a",
    "ZREM z a b",
    "ZREMRANGEBYRANK z 0 -1",
    "ZREMRANGEBYSCORE z (1 +inf",
    "ZREMRANGEBYLEX z [a -",
    "ZPOPMIN z",
    "ZPOPMAX z 3",
    "ZMPOP 2 a b MAX COUNT 2",
    "ZCARD z",
    "ZSCORE z m",
    "ZMSCORE z m n",
    "ZRANK z m",
    "ZREVRANK z m",
    "ZCOUNT z -inf (2",
    "ZLEXCOUNT z (a +",
    "ZRANDMEMBER z",
    "ZRANDMEMBER z -3 WITHSCORES",
    "ZSCAN z 0 MATCH a* COUNT 5",
    "ZRANGE z 0 -1 WITHSCORES",
    "ZRANGE z (1 5 BYSCORE REV LIMIT 1 2",
    "ZRANGEBYLEX z [a (c",
    "ZRANGESTORE d z 0 1",
    "ZUNION 2 a b WEIGHTS 1 2 AGGREGATE MAX WITHSCORES",
    "ZINTERCARD 2 a b LIMIT 3",
    "ZDIFFSTORE d 2 a b",
    "BZPOPMIN a b 1.5",
    "BZMPOP 0 2 a b MIN COUNT 3",
    "FLUSHALL",
    "@pop-wait",
    "@pop-wait-zset",
    "@pop-cancel",
    "GEOADD g XX CH 13.361389 38.115556 Palermo",
    "GEOPOS g a b",
    "GEOHASH g a",
    "GEODIST g a b km",
    "GEOSEARCH g FROMLONLAT 15 37 BYBOX 400 200 km ASC COUNT 2 WITHDIST",
    "GEORADIUSBYMEMBER_RO g a 10 mi",
    "GEOSEARCHSTORE d g FROMMEMBER a BYRADIUS 1 km STOREDIST",
    "GEORADIUS g 15 37 200 km STORE d",
    "@lock-release-grant",
    "@eval-bounded",
    "@eval-ro-bounded",
    "SET k v IFEQ old GET PX 100",
    "SET k v IFDNE 00ab",
    "DELEX k IFDEQ b6acb9d84a38ff74",
    "DELEX k",
    "DELIFEQ k v",
    "DIGEST k",
    "CLUSTER GETKEYSINSLOT 42 10",
    "CLUSTER COUNTKEYSINSLOT 16383",
    "RLOCK k o PX 100 WAIT 5",
    "SEMACQUIRE k o LIMIT 3 PX 100",
    "MLOCK o PX 100 WAIT 5 KEYS 2 a b",
    "MUNLOCK o KEYS 2 a b",
];

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/commands.golden")
}

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

fn parsed(line: &str) -> Command {
    match palisade::cmd::parse(line.split(' ').map(b).collect()) {
        Ok(Request::Data(c)) => c,
        other => panic!("{line}: not a replicated command: {other:?}"),
    }
}

fn waiter() -> WaiterId {
    WaiterId {
        node: 3,
        boot: 0xabcd,
        seq: 9,
    }
}

/// The command a recipe stands for.
fn command(recipe: &str) -> Command {
    match recipe {
        "@evict" => Command::Evict(Evict {
            keys: vec![b("a"), b("b")],
        }),
        "@tick" => Command::Tick(Tick),
        // Before the lock queue, `LOCK l owner PX 1000 WAIT 50` parsed to this (the server
        // retried it); entries that hold it still decode to it, and apply it without waiting.
        "@lock-wait-v1" => Command::Lock(Lock {
            key: b("l"),
            owner: b("owner"),
            ttl_ms: 1000,
            wait_ms: 50,
        }),
        "@acquire-waiter" => Command::Acquire(Acquire {
            key: b("l"),
            owner: b("owner"),
            ttl_ms: 1000,
            wait_ms: Some(50),
            delay_ms: Some(0),
            waiter: Some(waiter()),
        }),
        "@lock-cancel" => Command::LockCancel(LockCancel {
            key: b("l"),
            waiter: waiter(),
        }),
        "@lock-release-token" => Command::LockReleaseToken(LockReleaseToken {
            key: b("l"),
            token: 300,
        }),
        "@lock-purge" => Command::LockPurge(LockPurge { node: 2, boot: 77 }),
        "@lock-release-grant" => Command::LockReleaseGrant(LockReleaseGrant {
            key: b("l"),
            token: 300,
            owner: b("owner"),
            waiter: waiter(),
        }),
        "@versions" => Command::Versions(Versions {
            keys: vec![b("a"), b("b")],
        }),
        "@exec" => Command::Exec(Exec {
            watched: vec![(b("k"), Some(3)), (b("m"), None)],
            cmds: vec![parsed("SET k v"), parsed("GET k")],
        }),
        "@acl-load" => {
            let file = "user bob on #0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef ~k* &c -@all +get\nuser default on nopass ~* &* +@all\n";
            let users = palisade::state::acl::parse_file(file, &palisade::cmd::acl::TableCatalog)
                .expect("the recipe's ACL file");
            Command::AclLoad(palisade::cmd::acl::AclLoad {
                users: users.into_iter().collect(),
            })
        }
        // What builds before metering wrote (tag 43); `wrap` now makes the bounded form.
        "@eval-as" => unmetered(palisade::cmd::acl::EvalAs::wrap(
            "alice",
            parsed("EVAL return(1) 1 k a"),
        )),
        "@eval-ro-as" => unmetered(palisade::cmd::acl::EvalAs::wrap(
            "bob",
            parsed("EVAL_RO return(1) 0"),
        )),
        // What builds before library charges wrote (tag 105).
        "@eval-metered" => metered(palisade::cmd::acl::EvalAs::wrap(
            "alice",
            parsed("EVAL return(1) 1 k a"),
        )),
        "@eval-ro-metered" => metered(palisade::cmd::acl::EvalAs::wrap(
            "bob",
            parsed("EVAL_RO return(1) 0"),
        )),
        "@eval-bounded" => {
            palisade::cmd::acl::EvalAs::wrap("alice", parsed("EVAL return(1) 1 k a"))
        }
        "@eval-ro-bounded" => {
            palisade::cmd::acl::EvalAs::wrap("bob", parsed("EVAL_RO return(1) 0"))
        }
        "@pop-wait" => Command::PopWait(PopWait {
            waiter: waiter(),
            cmd: Box::new(parsed("BLMOVE a b LEFT RIGHT 2")),
        }),
        "@pop-wait-zset" => Command::PopWait(PopWait {
            waiter: waiter(),
            cmd: Box::new(parsed("BZMPOP 0 2 a b MAX COUNT 2")),
        }),
        "@pop-cancel" => Command::PopCancel(PopCancel {
            keys: vec![b("a"), b("b")],
            waiter: waiter(),
        }),
        line => parsed(line),
    }
}

/// The `EvalAs` (tag 43) inside a script command `wrap` made.
fn unmetered(cmd: Command) -> Command {
    match cmd {
        Command::EvalBounded(m) => Command::EvalAs(m.0),
        other => panic!("test bug: not a wrapped script: {other:?}"),
    }
}

/// The `EvalMetered` (tag 105) of a script command `wrap` made.
fn metered(cmd: Command) -> Command {
    match cmd {
        Command::EvalBounded(m) => Command::EvalMetered(palisade::cmd::acl::EvalMetered(m.0)),
        other => panic!("test bug: not a wrapped script: {other:?}"),
    }
}

/// A log entry's payload holding several commands, pinned as a whole as well.
fn batch() -> Batch {
    Batch {
        ts: 123_456,
        boot: 0xfeed_beef,
        cmds: ["SET k v NX PX 100", "@tick", "GET k", "@exec"]
            .into_iter()
            .map(command)
            .collect(),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn rows() -> Vec<(String, String)> {
    let mut rows: Vec<(String, String)> = RECIPES
        .iter()
        .map(|r| {
            let bytes = postcard::to_allocvec(&command(r)).expect("encode");
            (r.to_string(), hex(&bytes))
        })
        .collect();
    let bytes = postcard::to_allocvec(&batch()).expect("encode");
    rows.push(("@batch".into(), hex(&bytes)));
    rows
}

fn read_fixture() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(fixture()).expect("tests/fixtures/commands.golden");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (recipe, hex) = l.split_once('\t').expect("recipe<TAB>hex");
            (recipe.to_string(), hex.to_string())
        })
        .collect()
}

/// A new command must add a row: every registered tag has a recipe.
#[test]
fn every_tag_has_a_row() {
    let covered: BTreeSet<u32> = RECIPES.iter().map(|r| command(r).tag()).collect();
    let all: BTreeSet<u32> = Command::TAGS.iter().map(|t| t.0).collect();
    assert_eq!(
        covered, all,
        "tags without a recipe in RECIPES and the fixture"
    );
}

#[test]
fn every_command_encodes_and_decodes_exactly_as_the_golden_fixture() {
    if std::env::var_os("PALISADE_BLESS_GOLDEN").is_some() {
        let mut text = String::from(
            "# Golden postcard encodings of replicated commands: recipe<TAB>hex.\n\
             # Checked by tests/it/golden.rs; rows are never edited, only added.\n",
        );
        for (recipe, hex) in rows() {
            text.push_str(&format!("{recipe}\t{hex}\n"));
        }
        std::fs::write(fixture(), text).expect("write the fixture");
    }
    let golden = read_fixture();
    let now = rows();
    assert_eq!(
        golden.iter().map(|r| &r.0).collect::<Vec<_>>(),
        now.iter().map(|r| &r.0).collect::<Vec<_>>(),
        "the recipes differ from the fixture's"
    );
    for ((recipe, want), (_, got)) in golden.iter().zip(&now) {
        assert_eq!(got, want, "{recipe}: encodes differently");
        let bytes = unhex(want);
        if recipe == "@batch" {
            let back: Batch = postcard::from_bytes(&bytes).expect("decode the batch");
            assert_eq!(back, batch(), "@batch decodes differently");
        } else {
            let back: Command = postcard::from_bytes(&bytes)
                .unwrap_or_else(|e| panic!("{recipe}: does not decode: {e}"));
            assert_eq!(back, command(recipe), "{recipe}: decodes differently");
        }
    }
}

/// Garbage never panics: an unknown tag and every truncation of every row are errors.
#[test]
fn an_unknown_tag_or_truncated_bytes_decode_to_an_error() {
    let unused = Command::TAGS.iter().map(|t| t.0).max().unwrap_or(0) + 1;
    for tag in [unused as u8, 100, 127] {
        assert!(
            postcard::from_bytes::<Command>(&[tag, 1, b'k']).is_err(),
            "tag {tag}"
        );
    }
    // A varint tag that overflows u32.
    assert!(postcard::from_bytes::<Command>(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01]).is_err());
    for (recipe, hex) in read_fixture() {
        let bytes = unhex(&hex);
        for cut in 0..bytes.len() {
            let _ = postcard::from_bytes::<Command>(&bytes[..cut]);
            let _ = postcard::from_bytes::<Batch>(&bytes[..cut]);
        }
        assert!(!bytes.is_empty(), "{recipe}");
    }
}
