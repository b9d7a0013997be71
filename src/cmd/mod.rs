//! Commands: one Redis command (or family) per file, each shaped parse -> request -> reply.
//!
//! [`parse`] maps a request's arguments to a [`Request`] through the dispatch table, checking
//! arity first with Redis's error texts. Replicated commands are [`Command`] values: they
//! travel inside log entries and are applied deterministically to the [`Keyspace`] on every
//! replica. Connection commands ([`ConnCmd`]) only touch the session.
//!
//! Each command file declares its table rows (`COMMANDS`) and implements [`Replicated`] for
//! what it stores in the log; the `commands!` list below joins the files and gives every
//! stored type a stable tag ([`registry`]). The files sit in one folder per family
//! (`string/`, `lists/`, `locks/`, `admin/`, ...); each file is re-exported here, so its path
//! stays `crate::cmd::<file>`. Adding a command: write its file in its family's folder (see
//! `string/get.rs`), add its `mod` line to the family's `mod.rs`, its name to the family's
//! `pub use` line below, and its line in the list, with the next unused tag
//! (docs/adding-a-command.md).

pub mod acl;
pub mod admin;
pub mod argdoc;
pub mod bitmaps;
pub mod conn;
pub mod geospatial;
pub mod hashes;
pub mod keyspace;
pub mod keyspec;
pub mod lists;
pub mod locks;
pub mod messaging;
pub mod registry;
pub mod replication;
pub mod scripting;
pub mod set_type;
pub mod string;
pub mod txn;
pub mod zsets;

// Every command file stays reachable as `crate::cmd::<file>`, whatever its family folder.
pub use admin::{
    command, config, debug, info, latency, lolwut, memory, monitor, save, shutdown, slowlog, time,
};
pub use bitmaps::{bitfield, bitops};
pub use conn::{client, connection};
pub use geospatial::{geo, geosearch};
pub use hashes::{hash, hash_ext};
pub use keyspace::{
    del, draw, exists, expire, expiry, flush, keyinfo, keys, object, rename, sort, swapdb, ttl,
    type_,
};
pub use lists::{blpop, ledit, list, lmove, popwait};
pub use locks::{
    evict, fencecheck, fencedget, fencedset, lock, lockinfo, locknotify, lockwait, mlock, renew,
    rlock, unlock,
};
pub use messaging::{publish, pubsub, spublish, subscribe};
pub use replication::{cluster, raft, role, wait};
pub use scripting::{eval, script};
pub use set_type::sets;
pub use string::{cond, get, getex, incr, lcs, mget, set, strings};
pub use txn::multi;
pub use zsets::{bzpop, zrange, zset, zsetop};

pub use connection::ConnCmd;
pub use expiry::Expiry;
pub use registry::{lookup, parse, resolve, unknown_command, wrong_arity, Own, Replicated, Spec};

use crate::resp::Reply;
use crate::state::{self, Keyspace};

// The registry. One line per command file, in the order COMMAND lists their commands; each
// type a file stores in the log gets a tag, which never changes once released (the log and
// snapshots hold it). New tags take the next unused number, wherever the line goes.
registry::commands! {
    connection: [],
    client: [],
    command: [],
    info: [],
    config: [],
    acl: [
        40 => AclSetUser(AclSetUser),
        41 => AclDelUser(AclDelUser),
        42 => AclLoad(AclLoad),
        43 => EvalAs(EvalAs),
        105 => EvalMetered(EvalMetered),
        116 => EvalBounded(EvalBounded),
    ],
    time: [],
    slowlog: [],
    latency: [],
    role: [],
    cluster: [140 => SlotKeys(SlotKeys)],
    lolwut: [],
    locknotify: [],
    wait: [],
    swapdb: [],
    flush: [95 => Flush(Flush)],
    save: [],
    debug: [],
    shutdown: [],
    memory: [],
    object: [],
    get: [0 => Get(Get), 1 => GetDel(GetDel)],
    set: [2 => Set(Set)],
    cond: [121 => SetIf(SetIf), 122 => DelEx(DelEx), 123 => Digest(Digest)],
    del: [3 => Del(Del)],
    exists: [4 => Exists(Exists)],
    expire: [5 => Expire(Expire), 6 => Persist(Persist)],
    ttl: [7 => Ttl(Ttl)],
    type_: [8 => Type(Type)],
    incr: [9 => IncrBy(IncrBy)],
    keys: [10 => Keys(Keys), 11 => Scan(Scan), 12 => DbSize(DbSize)],
    rename: [44 => Rename(Rename), 45 => Copy(Copy)],
    keyinfo: [46 => KeyRead(KeyRead)],
    mget: [47 => MGet(MGet), 48 => MSet(MSet)],
    getex: [49 => GetEx(GetEx), 50 => GetSet(GetSet)],
    strings: [51 => StrWrite(StrWrite), 52 => StrRead(StrRead)],
    bitops: [53 => SetBit(SetBit), 54 => BitRead(BitRead), 55 => BitOp(BitOp)],
    bitfield: [108 => BitField(BitField), 109 => BitFieldRo(BitFieldRo)],
    lcs: [56 => Lcs(Lcs)],
    lock: [13 => Lock(Lock), 36 => Acquire(Acquire)],
    rlock: [125 => Hold(Hold)],
    mlock: [126 => MLock(MLock), 127 => MUnlock(MUnlock)],
    unlock: [14 => Unlock(Unlock)],
    renew: [15 => Renew(Renew)],
    lockinfo: [16 => LockInfo(LockInfo)],
    fencedset: [17 => FencedSet(FencedSet)],
    fencedget: [18 => FencedGet(FencedGet)],
    fencecheck: [19 => FenceCheck(FenceCheck)],
    evict: [20 => Evict(Evict), 21 => Tick(Tick)],
    lockwait: [
        37 => LockCancel(LockCancel),
        38 => LockReleaseToken(LockReleaseToken),
        39 => LockPurge(LockPurge),
        120 => LockReleaseGrant(LockReleaseGrant),
    ],
    hash: [22 => HSet(HSet), 23 => HDel(HDel), 24 => HIncrBy(HIncrBy), 25 => HRead(HRead)],
    hash_ext: [92 => HIncrByFloat(HIncrByFloat), 93 => HRandField(HRandField), 94 => HScan(HScan)],
    list: [26 => Push(Push), 27 => Pop(Pop), 29 => LRead(LRead)],
    blpop: [28 => BPop(BPop)],
    sets: [
        60 => SAdd(SAdd),
        61 => SRem(SRem),
        62 => SPop(SPop),
        63 => SMove(SMove),
        64 => SCombine(SCombine),
        65 => SStore(SStore),
        66 => SRead(SRead),
    ],
    sort: [67 => Sort(Sort)],
    lmove: [85 => LMove(LMove), 86 => LMPop(LMPop)],
    ledit: [87 => LSet(LSet), 88 => LInsert(LInsert), 89 => LRem(LRem), 90 => LTrim(LTrim), 91 => LPos(LPos)],
    zset: [
        70 => ZAdd(ZAdd),
        71 => ZRem(ZRem),
        72 => ZRemRange(ZRemRange),
        73 => ZPop(ZPop),
        74 => ZRead(ZRead),
    ],
    zrange: [75 => ZRange(ZRange), 76 => ZRangeStore(ZRangeStore)],
    zsetop: [77 => ZSetOp(ZSetOp), 78 => ZSetOpStore(ZSetOpStore)],
    geo: [110 => GeoRead(GeoRead)],
    geosearch: [111 => GeoSearch(GeoSearch), 112 => GeoStore(GeoStore)],
    bzpop: [79 => BZPop(BZPop)],
    popwait: [106 => PopWait(PopWait), 107 => PopCancel(PopCancel)],
    publish: [30 => Publish(Publish)],
    spublish: [115 => SPublish(SPublish)],
    subscribe: [],
    monitor: [],
    pubsub: [],
    multi: [34 => Exec(Exec), 35 => Versions(Versions)],
    eval: [31 => Eval(Eval), 32 => EvalRo(EvalRo)],
    script: [33 => Script(Script)],
    raft: [],
}

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
    /// A data command. A write (`!is_read()`) is proposed through the Raft log; a read
    /// (`is_read()`, declared once on its log type) is served linearizably after a
    /// ReadIndex round.
    Data(Command),
    /// A connection-level command, handled by the session.
    Conn(ConnCmd),
    /// A cluster administration command (RAFT.*).
    Admin(raft::AdminCmd),
}

impl Command {
    /// Applies a write at `ctx`. Reads reaching here (they should not) are answered too.
    pub fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        self.behaviour().apply(ks, ctx)
    }

    /// Answers a read at cluster time `now`.
    pub fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        self.behaviour().query(ks, now)
    }

    /// True for commands answered by [`Command::query`] (they never change state).
    pub fn is_read(&self) -> bool {
        self.behaviour().is_read()
    }

    /// What the leader checks this command against when a follower forwards it
    /// ([`Replicated::forwarded`]).
    pub fn forwarded(&self) -> Option<registry::Touches<'_>> {
        self.behaviour().forwarded()
    }

    /// The flags of the keys [`Command::forwarded`] names, where its type says them
    /// ([`Replicated::key_flags`]).
    pub fn key_flags(&self) -> Option<Vec<keyspec::KeyFlags>> {
        self.behaviour().key_flags()
    }

    /// Replaces absolute Unix times (EXAT, PXAT, EXPIREAT, PEXPIREAT) with relative TTLs.
    /// Called on the leader when the command is proposed (docs/time-and-leases.md,
    /// "Absolute expiry times").
    pub fn resolve_absolute_time(&mut self, unix_now_ms: i64) {
        self.behaviour_mut().resolve_absolute_time(unix_now_ms)
    }

    /// True if applying it runs a script ([`Replicated::runs_script`]).
    pub fn runs_script(&self) -> bool {
        self.behaviour().runs_script()
    }
}

/// Redis's reply for an operation on a key of another type.
pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// The one place where the keyspace's refusals become Redis's reply texts.
impl From<state::Error> for Reply {
    fn from(e: state::Error) -> Reply {
        match e {
            state::Error::WrongType => Reply::err(WRONGTYPE),
        }
    }
}

/// A command line for tests: `line`'s words, split at single spaces.
#[cfg(test)]
pub(crate) fn test_argv(line: &str) -> Vec<bytes::Bytes> {
    line.split(' ')
        .map(|w| bytes::Bytes::copy_from_slice(w.as_bytes()))
        .collect()
}

/// Test helper: parses a space-separated command line and applies (or queries) it as the
/// next write, at cluster time `now`.
#[cfg(test)]
pub(crate) fn run_line(ks: &mut Keyspace, line: &str, now: u64) -> Reply {
    let argv = test_argv(line);
    let rev = ks.bump_revision();
    match parse(argv) {
        Ok(Request::Data(c)) if c.is_read() => c.query(ks, now),
        Ok(Request::Data(c)) => c.apply(ks, Ctx { now, revision: rev }),
        Ok(Request::Conn(_) | Request::Admin(_)) => panic!("not a data command"),
        Err(e) => e,
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    use super::test_argv as argv;

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
