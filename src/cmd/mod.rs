//! Commands: one Redis command (or family) per file, each shaped parse -> request -> reply.
//!
//! [`parse`] maps a request's arguments to a [`Request`] through the single dispatch
//! [`TABLE`], checking arity first with Redis's error texts. Replicated commands are
//! [`Command`] values: they travel inside log entries and are applied deterministically to
//! the [`Keyspace`] on every replica. Connection commands ([`ConnCmd`]) only touch the session.

pub mod blpop;
pub mod client;
pub mod command;
pub mod connection;
pub mod del;
pub mod eval;
pub mod evict;
pub mod exists;
pub mod expire;
pub mod expiry;
pub mod fencecheck;
pub mod fencedget;
pub mod fencedset;
pub mod get;
pub mod hash;
pub mod incr;
pub mod info;
pub mod keys;
pub mod list;
pub mod lock;
pub mod lockinfo;
pub mod multi;
pub mod publish;
pub mod raft;
pub mod renew;
pub mod script;
pub mod set;
pub mod subscribe;
pub mod ttl;
pub mod type_;
pub mod unlock;

use std::collections::HashMap;
use std::sync::LazyLock;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

pub use connection::ConnCmd;
pub use expiry::Expiry;

use crate::resp::{Args, Reply};
use crate::state::Keyspace;

/// The context a replicated command is applied in.
#[derive(Clone, Copy, Debug)]
pub struct Ctx {
    /// Cluster time of the entry, in ms.
    pub now: u64,
    /// The revision assigned to this command (its token if it grants a lock).
    pub revision: u64,
}

/// What a parsed request needs from the server.
#[derive(Debug)]
pub enum Request {
    /// A write: proposed through the Raft log.
    Write(Command),
    /// A linearizable read: served after a ReadIndex round.
    Read(Command),
    /// A connection-level command, handled by the session.
    Conn(ConnCmd),
    /// A cluster administration command (RAFT.*).
    Admin(raft::AdminCmd),
}

/// A replicated command, as stored in log entries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum Command {
    Get(get::Get),
    GetDel(get::GetDel),
    Set(set::Set),
    Del(del::Del),
    Exists(exists::Exists),
    Expire(expire::Expire),
    Persist(expire::Persist),
    Ttl(ttl::Ttl),
    Type(type_::Type),
    IncrBy(incr::IncrBy),
    Keys(keys::Keys),
    Scan(keys::Scan),
    DbSize(keys::DbSize),
    Lock(lock::Lock),
    Unlock(unlock::Unlock),
    Renew(renew::Renew),
    LockInfo(lockinfo::LockInfo),
    FencedSet(fencedset::FencedSet),
    FencedGet(fencedget::FencedGet),
    FenceCheck(fencecheck::FenceCheck),
    Evict(evict::Evict),
    Tick,
    HSet(hash::HSet),
    HDel(hash::HDel),
    HIncrBy(hash::HIncrBy),
    HRead(hash::HRead),
    Push(list::Push),
    Pop(list::Pop),
    BPop(blpop::BPop),
    LRead(list::LRead),
    Publish(publish::Publish),
    Eval(eval::Eval),
    EvalRo(eval::Eval),
    Script(script::Script),
    Exec(multi::Exec),
    Versions(multi::Versions),
}

impl Command {
    /// Applies a write at `ctx`. Reads reaching here (they should not) are answered too.
    pub fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        match self {
            Command::GetDel(c) => c.apply(ks, ctx),
            Command::Set(c) => c.apply(ks, ctx),
            Command::Del(c) => c.apply(ks, ctx),
            Command::Expire(c) => c.apply(ks, ctx),
            Command::Persist(c) => c.apply(ks, ctx),
            Command::IncrBy(c) => c.apply(ks, ctx),
            Command::Lock(c) => c.apply(ks, ctx),
            Command::Unlock(c) => c.apply(ks, ctx),
            Command::Renew(c) => c.apply(ks, ctx),
            Command::FencedSet(c) => c.apply(ks, ctx),
            Command::FencedGet(c) => c.apply(ks, ctx),
            Command::Evict(c) => c.apply(ks, ctx),
            Command::Tick => Reply::ok(),
            Command::HSet(c) => c.apply(ks, ctx),
            Command::HDel(c) => c.apply(ks, ctx),
            Command::HIncrBy(c) => c.apply(ks, ctx),
            Command::Push(c) => c.apply(ks, ctx),
            Command::Pop(c) => c.apply(ks, ctx),
            Command::BPop(c) => c.apply(ks, ctx),
            Command::Publish(c) => c.apply(ks, ctx),
            Command::Eval(c) => c.apply(ks, ctx),
            Command::Script(c) => c.apply(ks, ctx),
            Command::Exec(c) => c.apply(ks, ctx),
            read => read.query(ks, ctx.now),
        }
    }

    /// Answers a read at cluster time `now`.
    pub fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        match self {
            Command::Get(c) => c.query(ks, now),
            Command::Exists(c) => c.query(ks, now),
            Command::Ttl(c) => c.query(ks, now),
            Command::Type(c) => c.query(ks, now),
            Command::Keys(c) => c.query(ks, now),
            Command::Scan(c) => c.query(ks, now),
            Command::DbSize(c) => c.query(ks, now),
            Command::LockInfo(c) => c.query(ks, now),
            Command::FenceCheck(c) => c.query(ks, now),
            Command::HRead(c) => c.query(ks, now),
            Command::LRead(c) => c.query(ks, now),
            Command::EvalRo(c) => c.query(ks, now),
            Command::Script(c) => c.query(ks, now),
            Command::Exec(c) => c.query(ks, now),
            Command::Versions(c) => c.query(ks, now),
            _ => Reply::err("ERR internal: write command routed as a read"),
        }
    }

    /// True for commands answered by [`Command::query`] (they never change state).
    pub fn is_read(&self) -> bool {
        match self {
            Command::Get(_)
            | Command::Exists(_)
            | Command::Ttl(_)
            | Command::Type(_)
            | Command::Keys(_)
            | Command::Scan(_)
            | Command::DbSize(_)
            | Command::LockInfo(_)
            | Command::FenceCheck(_)
            | Command::HRead(_)
            | Command::LRead(_)
            | Command::EvalRo(_)
            | Command::Versions(_)
            | Command::Script(script::Script::Exists(_) | script::Script::Budget(None)) => true,
            Command::Exec(e) => e.is_read_only(),
            _ => false,
        }
    }

    /// Replaces absolute Unix times (EXAT, PXAT, EXPIREAT, PEXPIREAT) with relative TTLs.
    /// Called on the leader when the command is proposed (docs/time-and-leases.md,
    /// "Absolute expiry times").
    pub fn resolve_absolute_time(&mut self, unix_now_ms: i64) {
        match self {
            Command::Set(set::Set {
                ttl: set::TtlMode::Set(e),
                ..
            }) => e.resolve(unix_now_ms),
            Command::Expire(expire::Expire { when, .. }) => when.resolve(unix_now_ms),
            Command::Exec(e) => {
                for c in &mut e.cmds {
                    c.resolve_absolute_time(unix_now_ms);
                }
            }
            _ => {}
        }
    }
}

/// One row of the command table (also what COMMAND INFO reports).
pub struct Spec {
    /// Lower-case name.
    pub name: &'static str,
    /// Redis arity: positive means exactly, negative means at least.
    pub arity: i32,
    /// Redis command flags.
    pub flags: &'static [&'static str],
    /// First key position (0: none).
    pub first_key: i32,
    /// Last key position (-1: the last argument).
    pub last_key: i32,
    /// Step between keys.
    pub step: i32,
    /// The parser.
    pub parse: fn(&mut Args) -> Result<Request, Reply>,
}

const W: &[&str] = &["write", "denyoom"];
const WF: &[&str] = &["write", "fast"];
const R: &[&str] = &["readonly", "fast"];
const RS: &[&str] = &["readonly"];
const C: &[&str] = &["fast", "loading", "stale"];
const CN: &[&str] = &["noscript", "loading", "stale", "fast", "no_auth"];
const WM: &[&str] = &["write", "denyoom", "fast"];
const BLOCK: &[&str] = &["write", "noscript", "blocking"];
const PUBSUB: &[&str] = &["pubsub", "noscript", "loading", "stale"];
const TXN: &[&str] = &["noscript", "loading", "stale", "fast", "allow_busy"];
const SCRIPTING: &[&str] = &["noscript", "skip_monitor", "stale"];

macro_rules! spec {
    ($name:expr, $arity:expr, $flags:expr, $first:expr, $last:expr, $step:expr, $parse:expr) => {
        Spec {
            name: $name,
            arity: $arity,
            flags: $flags,
            first_key: $first,
            last_key: $last,
            step: $step,
            parse: $parse,
        }
    };
}

/// The single dispatch table.
pub static TABLE: &[Spec] = &[
    spec!("ping", -1, C, 0, 0, 0, connection::parse_ping),
    spec!("echo", 2, C, 0, 0, 0, connection::parse_echo),
    spec!("hello", -1, CN, 0, 0, 0, connection::parse_hello),
    spec!("auth", -2, CN, 0, 0, 0, connection::parse_auth),
    spec!("select", 2, C, 0, 0, 0, connection::parse_select),
    spec!("quit", -1, CN, 0, 0, 0, connection::parse_quit),
    spec!("reset", 1, CN, 0, 0, 0, connection::parse_reset),
    spec!("client", -2, &["sentinel"], 0, 0, 0, client::parse),
    spec!(
        "command",
        -1,
        &["loading", "stale"],
        0,
        0,
        0,
        command::parse
    ),
    spec!("info", -1, &["loading", "stale"], 0, 0, 0, info::parse),
    spec!("get", 2, R, 1, 1, 1, get::parse),
    spec!("getdel", 2, WF, 1, 1, 1, get::parse_getdel),
    spec!("set", -3, W, 1, 1, 1, set::parse),
    spec!(
        "setnx",
        3,
        &["write", "denyoom", "fast"],
        1,
        1,
        1,
        set::parse_setnx
    ),
    spec!("setex", 4, W, 1, 1, 1, set::parse_setex),
    spec!("psetex", 4, W, 1, 1, 1, set::parse_setex),
    spec!("del", -2, &["write"], 1, -1, 1, del::parse),
    spec!("unlink", -2, WF, 1, -1, 1, del::parse),
    spec!("exists", -2, R, 1, -1, 1, exists::parse),
    spec!("expire", -3, WF, 1, 1, 1, expire::parse),
    spec!("pexpire", -3, WF, 1, 1, 1, expire::parse),
    spec!("expireat", -3, WF, 1, 1, 1, expire::parse),
    spec!("pexpireat", -3, WF, 1, 1, 1, expire::parse),
    spec!("persist", 2, WF, 1, 1, 1, expire::parse_persist),
    spec!("ttl", 2, R, 1, 1, 1, ttl::parse),
    spec!("pttl", 2, R, 1, 1, 1, ttl::parse),
    spec!("type", 2, R, 1, 1, 1, type_::parse),
    spec!(
        "incr",
        2,
        &["write", "denyoom", "fast"],
        1,
        1,
        1,
        incr::parse
    ),
    spec!(
        "decr",
        2,
        &["write", "denyoom", "fast"],
        1,
        1,
        1,
        incr::parse
    ),
    spec!(
        "incrby",
        3,
        &["write", "denyoom", "fast"],
        1,
        1,
        1,
        incr::parse
    ),
    spec!(
        "decrby",
        3,
        &["write", "denyoom", "fast"],
        1,
        1,
        1,
        incr::parse
    ),
    spec!("dbsize", 1, R, 0, 0, 0, keys::parse_dbsize),
    spec!("keys", 2, RS, 0, 0, 0, keys::parse),
    spec!("scan", -2, RS, 0, 0, 0, keys::parse_scan),
    spec!("lock", -5, W, 1, 1, 1, lock::parse),
    spec!("unlock", 3, WF, 1, 1, 1, unlock::parse),
    spec!("renew", 5, WF, 1, 1, 1, renew::parse),
    spec!("lockinfo", 2, R, 1, 1, 1, lockinfo::parse),
    spec!("fencedset", -4, W, 1, 1, 1, fencedset::parse),
    spec!("fencedget", 3, WF, 1, 1, 1, fencedget::parse),
    spec!("fencecheck", 3, R, 1, 1, 1, fencecheck::parse),
    spec!("hset", -4, WM, 1, 1, 1, hash::parse_hset),
    spec!("hmset", -4, WM, 1, 1, 1, hash::parse_hset),
    spec!("hsetnx", 4, WM, 1, 1, 1, hash::parse_hset),
    spec!("hget", 3, R, 1, 1, 1, hash::parse_read),
    spec!("hmget", -3, R, 1, 1, 1, hash::parse_read),
    spec!("hdel", -3, WF, 1, 1, 1, hash::parse_hdel),
    spec!("hexists", 3, R, 1, 1, 1, hash::parse_read),
    spec!("hincrby", 4, WM, 1, 1, 1, hash::parse_hincrby),
    spec!("hlen", 2, R, 1, 1, 1, hash::parse_read),
    spec!("hgetall", 2, RS, 1, 1, 1, hash::parse_read),
    spec!("hkeys", 2, RS, 1, 1, 1, hash::parse_read),
    spec!("hvals", 2, RS, 1, 1, 1, hash::parse_read),
    spec!("lpush", -3, WM, 1, 1, 1, list::parse_push),
    spec!("rpush", -3, WM, 1, 1, 1, list::parse_push),
    spec!("lpushx", -3, WM, 1, 1, 1, list::parse_push),
    spec!("rpushx", -3, WM, 1, 1, 1, list::parse_push),
    spec!("lpop", -2, WF, 1, 1, 1, list::parse_pop),
    spec!("rpop", -2, WF, 1, 1, 1, list::parse_pop),
    spec!("llen", 2, R, 1, 1, 1, list::parse_read),
    spec!("lrange", 4, RS, 1, 1, 1, list::parse_read),
    spec!("lindex", 3, RS, 1, 1, 1, list::parse_read),
    spec!("blpop", -3, BLOCK, 1, -2, 1, blpop::parse),
    spec!("brpop", -3, BLOCK, 1, -2, 1, blpop::parse),
    spec!(
        "publish",
        3,
        &["pubsub", "loading", "stale", "fast"],
        0,
        0,
        0,
        publish::parse
    ),
    spec!("subscribe", -2, PUBSUB, 0, 0, 0, subscribe::parse),
    spec!("psubscribe", -2, PUBSUB, 0, 0, 0, subscribe::parse),
    spec!("unsubscribe", -1, PUBSUB, 0, 0, 0, subscribe::parse),
    spec!("punsubscribe", -1, PUBSUB, 0, 0, 0, subscribe::parse),
    spec!("multi", 1, TXN, 0, 0, 0, multi::parse),
    spec!(
        "exec",
        1,
        &["noscript", "loading", "stale", "skip_slowlog"],
        0,
        0,
        0,
        multi::parse
    ),
    spec!("discard", 1, TXN, 0, 0, 0, multi::parse),
    spec!("watch", -2, TXN, 1, -1, 1, multi::parse),
    spec!("unwatch", 1, TXN, 0, 0, 0, multi::parse),
    spec!("eval", -3, SCRIPTING, 0, 0, 0, eval::parse),
    spec!("evalsha", -3, SCRIPTING, 0, 0, 0, eval::parse),
    spec!("eval_ro", -3, SCRIPTING, 0, 0, 0, eval::parse),
    spec!("evalsha_ro", -3, SCRIPTING, 0, 0, 0, eval::parse),
    spec!("script", -2, &["noscript"], 0, 0, 0, script::parse),
    spec!(
        "raft.info",
        1,
        &["admin", "loading", "stale"],
        0,
        0,
        0,
        raft::parse
    ),
    spec!("raft.node", -3, &["admin"], 0, 0, 0, raft::parse),
    spec!("raft.cluster", -2, &["admin"], 0, 0, 0, raft::parse),
    spec!("raft.fault", -2, &["admin"], 0, 0, 0, raft::parse),
];

static BY_NAME: LazyLock<HashMap<&'static str, &'static Spec>> =
    LazyLock::new(|| TABLE.iter().map(|s| (s.name, s)).collect());

/// Looks up a command by lower-case name.
pub fn lookup(name: &str) -> Option<&'static Spec> {
    BY_NAME.get(name).copied()
}

/// Redis's unknown-command error, with the first arguments quoted as Redis quotes them.
pub fn unknown_command(argv: &[Bytes]) -> Reply {
    let mut args = String::new();
    for a in argv.iter().skip(1) {
        if args.len() >= 128 {
            break;
        }
        let room = 128 - args.len();
        let text = String::from_utf8_lossy(a);
        let cut: String = text.chars().take(room).collect();
        args.push_str(&format!("'{cut}' "));
    }
    let name: String = String::from_utf8_lossy(&argv[0])
        .chars()
        .take(128)
        .collect();
    Reply::err(format!(
        "ERR unknown command '{name}', with args beginning with: {args}"
    ))
}

/// Redis's wrong-arity error.
pub fn wrong_arity(name: &str) -> Reply {
    Reply::err(format!(
        "ERR wrong number of arguments for '{name}' command"
    ))
}

/// Parses one request (`argv` is non-empty).
pub fn parse(argv: Vec<Bytes>) -> Result<Request, Reply> {
    let spec = resolve(&argv)?;
    (spec.parse)(&mut Args::new(argv))
}

/// Looks the command up and checks its arity, as Redis does before anything else (even
/// before authentication): unknown commands and wrong arity are reported first.
pub fn resolve(argv: &[Bytes]) -> Result<&'static Spec, Reply> {
    let name = String::from_utf8_lossy(&argv[0]).to_lowercase();
    let Some(spec) = lookup(&name) else {
        return Err(unknown_command(argv));
    };
    let argc = argv.len() as i32;
    if (spec.arity > 0 && argc != spec.arity) || argc < -spec.arity {
        return Err(wrong_arity(spec.name));
    }
    Ok(spec)
}

impl Spec {
    /// True for commands allowed before authentication.
    pub fn no_auth(&self) -> bool {
        self.flags.contains(&"no_auth")
    }
}

/// Test helper: parses a space-separated command line and applies (or queries) it as the
/// next write, at cluster time `now`.
#[cfg(test)]
pub(crate) fn run_line(ks: &mut Keyspace, line: &str, now: u64) -> Reply {
    let argv = line
        .split(' ')
        .map(|w| Bytes::copy_from_slice(w.as_bytes()))
        .collect();
    let rev = ks.bump_revision();
    match parse(argv) {
        Ok(Request::Write(c)) => c.apply(ks, Ctx { now, revision: rev }),
        Ok(Request::Read(c)) => c.query(ks, now),
        Ok(Request::Conn(_) | Request::Admin(_)) => panic!("not a data command"),
        Err(e) => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<Bytes> {
        s.split(' ')
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect()
    }

    fn apply(ks: &mut Keyspace, line: &str, now: u64) -> Reply {
        run_line(ks, line, now)
    }

    #[test]
    fn unknown_command_text_matches_redis() {
        assert_eq!(
            unknown_command(&argv("FOO a b")),
            Reply::err("ERR unknown command 'FOO', with args beginning with: 'a' 'b' ")
        );
        assert_eq!(
            unknown_command(&argv("FOO")),
            Reply::err("ERR unknown command 'FOO', with args beginning with: ")
        );
    }

    #[test]
    fn set_option_rules() {
        let mut ks = Keyspace::default();
        assert_eq!(
            apply(&mut ks, "SET k v nx xx", 0),
            Reply::err("ERR syntax error")
        );
        assert_eq!(
            apply(&mut ks, "SET k v EX 10 PX 10", 0),
            Reply::err("ERR syntax error")
        );
        assert_eq!(
            apply(&mut ks, "SET k v KEEPTTL EX 10", 0),
            Reply::err("ERR syntax error")
        );
        assert_eq!(
            apply(&mut ks, "SET k v px 0", 0),
            Reply::err("ERR invalid expire time in 'set' command")
        );
        assert_eq!(apply(&mut ks, "set k v Px 100 nX", 0), Reply::ok());
        assert_eq!(apply(&mut ks, "SET k w NX", 0), Reply::Nil);
        assert_eq!(apply(&mut ks, "SET k w NX GET", 0), Reply::bulk("v"));
        assert_eq!(apply(&mut ks, "SET k w KEEPTTL GET", 10), Reply::bulk("v"));
        assert_eq!(apply(&mut ks, "PTTL k", 10), Reply::Int(90));
        assert_eq!(apply(&mut ks, "GET k", 100), Reply::Nil);
        assert_eq!(apply(&mut ks, "SET k", 0), wrong_arity("set"));
    }

    #[test]
    fn lock_family_and_fences() {
        let mut ks = Keyspace::default();
        let Reply::Int(t1) = apply(&mut ks, "LOCK l A PX 1000", 0) else {
            panic!()
        };
        assert_eq!(apply(&mut ks, "LOCK l A PX 1000", 10), Reply::Int(t1));
        assert_eq!(apply(&mut ks, "LOCK l B PX 1000", 20), Reply::Nil);
        assert_eq!(apply(&mut ks, "UNLOCK l B", 20), Reply::Int(0));
        assert_eq!(
            apply(&mut ks, "FENCECHECK l 1", 20),
            Reply::Int((t1 == 1) as i64)
        );
        let Reply::Int(t2) = apply(&mut ks, "LOCK l B PX 1000", 2000) else {
            panic!()
        };
        assert!(t2 > t1);
        assert_eq!(apply(&mut ks, "RENEW l A PX 1000", 2000), Reply::Nil);
        assert_eq!(
            apply(&mut ks, &format!("FENCEDSET r b {t2}"), 2000),
            Reply::ok()
        );
        assert_eq!(
            apply(&mut ks, &format!("FENCEDSET r a {t1}"), 2000),
            Reply::err(format!("FENCED token {t1} is lower than {t2}"))
        );
        assert_eq!(apply(&mut ks, "DEL r", 2000), Reply::Int(1));
        assert!(apply(&mut ks, &format!("FENCEDGET r {t1}"), 2000).is_error());
        assert_eq!(
            apply(&mut ks, &format!("FENCEDGET r {t2}"), 2000),
            Reply::Nil
        );
    }

    #[test]
    fn set_nx_px_is_a_lock() {
        let mut ks = Keyspace::default();
        assert_eq!(apply(&mut ks, "SET res tok123 NX PX 5000", 0), Reply::ok());
        let Reply::Int(t) = apply(&mut ks, "LOCK res tok123 PX 5000", 1) else {
            panic!()
        };
        assert_eq!(t, 1);
        assert_eq!(apply(&mut ks, "LOCK res other PX 5000", 1), Reply::Nil);
    }

    #[test]
    fn expire_conditions() {
        let mut ks = Keyspace::default();
        apply(&mut ks, "SET k v", 0);
        assert_eq!(apply(&mut ks, "EXPIRE k 10 XX", 0), Reply::Int(0));
        assert_eq!(apply(&mut ks, "EXPIRE k 10 GT", 0), Reply::Int(0));
        assert_eq!(apply(&mut ks, "EXPIRE k 10 NX", 0), Reply::Int(1));
        assert_eq!(apply(&mut ks, "EXPIRE k 5 GT", 0), Reply::Int(0));
        assert_eq!(apply(&mut ks, "EXPIRE k 5 LT", 0), Reply::Int(1));
        assert_eq!(apply(&mut ks, "TTL k", 0), Reply::Int(5));
        assert_eq!(
            apply(&mut ks, "EXPIRE k 5 NX XX", 0),
            Reply::err("ERR NX and XX, GT or LT options at the same time are not compatible")
        );
        assert_eq!(apply(&mut ks, "EXPIRE k -1", 0), Reply::Int(1));
        assert_eq!(apply(&mut ks, "EXISTS k", 0), Reply::Int(0));
    }
}
