//! The leader's check of forwarded commands: a follower forwards replicated commands, not
//! command lines, so the leader checks what each command does (the commands it can come
//! from, its keys and channels) against the user the follower names.

use bytes::Bytes;

use super::check::{categories, key_access, noperm, READ_ONLY};
use crate::cmd::acl::{EvalBounded, EvalMetered};
use crate::cmd::keyinfo::KeyRead;
use crate::cmd::registry::lookup;
use crate::cmd::script::Script;
use crate::cmd::Command;
use crate::resp::Reply;
use crate::state::acl::{Denied, Subject, User};

/// The command names a replicated command may have come from, its keys, and its channels:
/// what the leader checks a forwarded command against. `None` for the node's own commands
/// (expiry, ticks, queue purges), which no client can send.
type Touches<'a> = (&'static [&'static str], Vec<&'a [u8]>, Vec<&'a [u8]>);

fn one(k: &Bytes) -> Vec<&[u8]> {
    vec![k.as_ref()]
}

fn many(ks: &[Bytes]) -> Vec<&[u8]> {
    ks.iter().map(|k| k.as_ref()).collect()
}

fn forwarded_subject(cmd: &Command) -> Option<Touches<'_>> {
    use Command as C;
    let none = Vec::new;
    Some(match cmd {
        C::Get(c) => (&["get"], one(&c.key), none()),
        C::GetDel(c) => (&["getdel"], one(&c.key), none()),
        C::Set(c) => (&["set", "setnx", "setex", "psetex"], one(&c.key), none()),
        C::SetIf(c) => (&["set"], one(&c.set.key), none()),
        C::DelEx(c) => (&["delex", "delifeq"], one(&c.key), none()),
        C::Digest(c) => (&["digest"], one(&c.key), none()),
        C::Del(c) => (&["del", "unlink"], many(&c.keys), none()),
        C::Exists(c) => (&["exists"], many(&c.keys), none()),
        C::Expire(c) => (
            &["expire", "pexpire", "expireat", "pexpireat"],
            one(&c.key),
            none(),
        ),
        C::Persist(c) => (&["persist"], one(&c.key), none()),
        C::Ttl(c) => (&["ttl", "pttl"], one(&c.key), none()),
        C::Type(c) => (&["type"], one(&c.key), none()),
        C::IncrBy(c) => (&["incr", "incrby", "decr", "decrby"], one(&c.key), none()),
        C::Keys(_) => (&["keys"], none(), none()),
        C::SlotKeys(_) => (&["cluster"], none(), none()),
        C::Scan(_) => (&["scan"], none(), none()),
        C::DbSize(_) => (&["dbsize"], none(), none()),
        C::Lock(c) => (&["lock"], one(&c.key), none()),
        C::Acquire(c) => (&["lock"], one(&c.key), none()),
        C::Hold(c) => (&["rlock", "semacquire"], one(&c.key), none()),
        C::MLock(c) => (&["mlock"], many(&c.keys), none()),
        C::MUnlock(c) => (&["munlock"], many(&c.keys), none()),
        C::Unlock(c) => (&["unlock"], one(&c.key), none()),
        C::Renew(c) => (&["renew"], one(&c.key), none()),
        C::LockInfo(c) => (&["lockinfo"], one(&c.key), none()),
        C::FencedSet(c) => (&["fencedset"], one(&c.key), none()),
        C::FencedGet(c) => (&["fencedget"], one(&c.key), none()),
        C::FenceCheck(c) => (&["fencecheck"], one(&c.key), none()),
        C::LockCancel(c) => (&["lock"], one(&c.key), none()),
        C::LockReleaseToken(c) => (&["unlock"], one(&c.key), none()),
        C::LockReleaseGrant(c) => (&["unlock"], one(&c.key), none()),
        C::HSet(c) => (&["hset", "hmset", "hsetnx"], one(&c.key), none()),
        C::HDel(c) => (&["hdel"], one(&c.key), none()),
        C::HIncrBy(c) => (&["hincrby"], one(&c.key), none()),
        C::HRead(c) => (
            &[
                "hget", "hmget", "hexists", "hlen", "hgetall", "hkeys", "hvals", "hstrlen",
            ],
            one(&c.key),
            none(),
        ),
        C::Push(c) => (&["lpush", "rpush", "lpushx", "rpushx"], one(&c.key), none()),
        C::Pop(c) => (&["lpop", "rpop"], one(&c.key), none()),
        C::LRead(c) => (&["llen", "lrange", "lindex"], one(&c.key), none()),
        C::SAdd(c) => (&["sadd"], one(&c.key), none()),
        C::SRem(c) => (&["srem"], one(&c.key), none()),
        C::SPop(c) => (&["spop"], one(&c.key), none()),
        C::SMove(c) => (&["smove"], vec![c.src.as_ref(), c.dst.as_ref()], none()),
        C::SCombine(c) => (
            &["sinter", "sunion", "sdiff", "sintercard"],
            many(&c.keys),
            none(),
        ),
        C::SStore(c) => (
            &["sinterstore", "sunionstore", "sdiffstore"],
            std::iter::once(c.dst.as_ref())
                .chain(many(&c.keys))
                .collect(),
            none(),
        ),
        C::SRead(c) => (
            &[
                "smembers",
                "sismember",
                "smismember",
                "scard",
                "srandmember",
                "sscan",
            ],
            one(&c.key),
            none(),
        ),
        // `*` stands for the other keys BY and GET read (see `check::sort_keys`).
        C::Sort(c) => (
            if c.store.is_some() {
                &["sort"]
            } else {
                &["sort", "sort_ro"]
            },
            std::iter::once(c.key.as_ref())
                .chain(c.store.as_ref().map(|k| k.as_ref()))
                .chain(c.reaches_other_keys().then_some(&b"*"[..]))
                .collect(),
            none(),
        ),
        C::BPop(c) => (&["blpop", "brpop"], many(&c.keys), none()),
        C::LMove(c) if c.timeout_ms.is_some() => (
            &["blmove", "brpoplpush"],
            vec![c.src.as_ref(), c.dst.as_ref()],
            none(),
        ),
        C::LMove(c) => (
            &["lmove", "rpoplpush"],
            vec![c.src.as_ref(), c.dst.as_ref()],
            none(),
        ),
        C::LMPop(c) if c.timeout_ms.is_some() => (&["blmpop"], many(&c.keys), none()),
        C::LMPop(c) => (&["lmpop"], many(&c.keys), none()),
        C::LSet(c) => (&["lset"], one(&c.key), none()),
        C::LInsert(c) => (&["linsert"], one(&c.key), none()),
        C::LRem(c) => (&["lrem"], one(&c.key), none()),
        C::LTrim(c) => (&["ltrim"], one(&c.key), none()),
        C::LPos(c) => (&["lpos"], one(&c.key), none()),
        C::HIncrByFloat(c) => (&["hincrbyfloat"], one(&c.key), none()),
        C::HRandField(c) => (&["hrandfield"], one(&c.key), none()),
        C::HScan(c) => (&["hscan"], one(&c.key), none()),
        C::ZAdd(c) => (&["zadd", "zincrby", "geoadd"], one(&c.key), none()),
        C::GeoRead(c) => (&["geopos", "geodist", "geohash"], one(&c.key), none()),
        C::GeoSearch(c) => (
            &[
                "geosearch",
                "georadius",
                "georadiusbymember",
                "georadius_ro",
                "georadiusbymember_ro",
            ],
            one(&c.0.key),
            none(),
        ),
        C::GeoStore(c) => (
            &["geosearchstore", "georadius", "georadiusbymember"],
            std::iter::once(c.0.key.as_ref())
                .chain(c.0.dst.as_deref())
                .collect(),
            none(),
        ),
        C::BZPop(c) => (&["bzpopmin", "bzpopmax", "bzmpop"], many(c.keys()), none()),
        // A client's blocking pop, as its queued form: checked as the command itself.
        C::PopWait(c) => return forwarded_subject(&c.cmd),
        C::PopCancel(c) => (
            &[
                "blpop",
                "brpop",
                "blmove",
                "brpoplpush",
                "blmpop",
                "bzpopmin",
                "bzpopmax",
                "bzmpop",
            ],
            many(&c.keys),
            none(),
        ),
        C::ZRem(c) => (&["zrem"], one(&c.key), none()),
        C::ZRemRange(c) => (
            &["zremrangebyrank", "zremrangebyscore", "zremrangebylex"],
            one(&c.key),
            none(),
        ),
        C::ZPop(c) => (&["zpopmin", "zpopmax", "zmpop"], many(&c.keys), none()),
        C::ZRead(c) => (
            &[
                "zcard",
                "zscore",
                "zmscore",
                "zrank",
                "zrevrank",
                "zcount",
                "zlexcount",
                "zrandmember",
                "zscan",
            ],
            one(&c.key),
            none(),
        ),
        C::ZRange(c) => (
            &[
                "zrange",
                "zrevrange",
                "zrangebyscore",
                "zrevrangebyscore",
                "zrangebylex",
                "zrevrangebylex",
            ],
            one(&c.key),
            none(),
        ),
        C::ZRangeStore(c) => (
            &["zrangestore"],
            vec![c.dst.as_ref(), c.src.as_ref()],
            none(),
        ),
        C::ZSetOp(c) => (
            &["zinter", "zunion", "zdiff", "zintercard"],
            many(&c.0.keys),
            none(),
        ),
        C::ZSetOpStore(c) => (
            &["zinterstore", "zunionstore", "zdiffstore"],
            std::iter::once(c.dst.as_ref())
                .chain(many(&c.spec.keys))
                .collect(),
            none(),
        ),
        C::Publish(c) => (&["publish"], none(), vec![c.channel.as_ref()]),
        C::SPublish(c) => (&["spublish"], none(), vec![c.channel.as_ref()]),
        C::Versions(c) => (&["watch"], many(&c.keys), none()),
        C::Exec(_) => (&["exec"], none(), none()),
        C::Eval(c) => (&["eval", "evalsha"], many(&c.keys), none()),
        C::EvalRo(c) => (&["eval_ro", "evalsha_ro"], many(&c.0.keys), none()),
        C::EvalAs(c) if c.read_only => (&["eval_ro", "evalsha_ro"], many(&c.eval.keys), none()),
        C::EvalAs(c) => (&["eval", "evalsha"], many(&c.eval.keys), none()),
        C::EvalMetered(c) if c.0.read_only => {
            (&["eval_ro", "evalsha_ro"], many(&c.0.eval.keys), none())
        }
        C::EvalMetered(c) => (&["eval", "evalsha"], many(&c.0.eval.keys), none()),
        C::EvalBounded(c) if c.0.read_only => {
            (&["eval_ro", "evalsha_ro"], many(&c.0.eval.keys), none())
        }
        C::EvalBounded(c) => (&["eval", "evalsha"], many(&c.0.eval.keys), none()),
        C::Script(Script::Load(_)) => (&["script|load"], none(), none()),
        C::Script(Script::Exists(_)) => (&["script|exists"], none(), none()),
        C::Script(Script::Flush) => (&["script|flush"], none(), none()),
        C::Script(Script::Budget(_)) => (&["script|budget"], none(), none()),
        C::AclSetUser(_) => (&["acl|setuser"], none(), none()),
        C::AclDelUser(_) => (&["acl|deluser"], none(), none()),
        C::AclLoad(_) => (&["acl|load"], none(), none()),
        C::Rename(c) => (
            &["rename", "renamenx"],
            vec![&c.src[..], &c.dst[..]],
            none(),
        ),
        C::Copy(c) => (&["copy"], vec![&c.src[..], &c.dst[..]], none()),
        C::KeyRead(KeyRead::Random) => (&["randomkey"], none(), none()),
        C::KeyRead(KeyRead::Touch(keys)) => (&["touch"], many(keys), none()),
        C::KeyRead(KeyRead::ExpireTime(k, _)) => (&["expiretime", "pexpiretime"], one(k), none()),
        C::MGet(c) => (&["mget"], many(&c.keys), none()),
        C::MSet(c) => (
            &["mset", "msetnx"],
            c.pairs.iter().map(|(k, _)| k.as_ref()).collect(),
            none(),
        ),
        C::GetEx(c) => (&["getex"], one(&c.key), none()),
        C::GetSet(c) => (&["getset"], one(&c.key), none()),
        C::StrWrite(c) => (&["append", "setrange", "incrbyfloat"], one(&c.key), none()),
        C::StrRead(c) => (&["strlen", "getrange", "substr"], one(&c.key), none()),
        C::SetBit(c) => (&["setbit"], one(&c.key), none()),
        C::BitRead(c) => (&["getbit", "bitcount", "bitpos"], one(&c.key), none()),
        C::BitField(c) => (&["bitfield"], one(&c.key), none()),
        C::BitFieldRo(c) => (&["bitfield_ro", "bitfield"], one(&c.key), none()),
        C::BitOp(c) => (
            &["bitop"],
            std::iter::once(&c.dest)
                .chain(&c.keys)
                .map(|k| k.as_ref())
                .collect(),
            none(),
        ),
        C::Lcs(c) => (&["lcs"], vec![&c.a[..], &c.b[..]], none()),
        C::Flush(_) => (&["flushall", "flushdb"], none(), none()),
        C::Evict(_) | C::Tick(_) | C::LockPurge(_) => return None,
    })
}

/// Checks a command that a follower forwarded on behalf of `user` (the leader's check, so
/// that forwarding is no way around ACLs). The command passes if the user may run one of
/// the commands it can come from, on its keys and channels: a command that one of the
/// user's allowed commands can produce grants nothing new. A transaction passes if each
/// command in it does; a script must run as the same user.
pub fn check_forwarded(user: &User, name: &str, cmd: &Command) -> Result<(), Reply> {
    if let Command::Exec(exec) = cmd {
        for c in &exec.cmds {
            check_forwarded(user, name, c)?;
        }
    }
    if let Command::EvalAs(e)
    | Command::EvalMetered(EvalMetered(e))
    | Command::EvalBounded(EvalBounded(e)) = cmd
    {
        if e.user != name {
            return Err(Reply::err(
                "NOPERM a forwarded script must run as the connection's user",
            ));
        }
    }
    let Some((names, keys, channels)) = forwarded_subject(cmd) else {
        return Err(Reply::err(
            "NOPERM this command is the server's own and cannot be forwarded for a user",
        ));
    };
    let mut last = Denied::Command;
    for full in names {
        // `cmd|sub` for a container's subcommand.
        let (cmd_name, sub) = match full.split_once('|') {
            Some((c, s)) => (c, Some(s)),
            None => (*full, None),
        };
        let Some(spec) = lookup(cmd_name) else {
            continue;
        };
        // A BITFIELD of GETs reads its key, as BITFIELD_RO does (see `check::subject`).
        let access = match cmd {
            Command::BitFieldRo(_) => READ_ONLY,
            _ => key_access(spec),
        };
        let subject = Subject {
            name: spec.name,
            sub,
            categories: categories(spec, sub),
            keys: keys.iter().map(|k| (*k, access)).collect(),
            channels: channels.iter().map(|c| (*c, false)).collect(),
        };
        match user.check(&subject) {
            Ok(()) => return Ok(()),
            // A command the user may run, on a key or channel it may not: that is the reason.
            Err(d) if last == Denied::Command => last = d,
            Err(_) => {}
        }
    }
    Err(noperm(last, names.first().copied().unwrap_or("")))
}
