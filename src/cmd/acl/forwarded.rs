//! The leader's check of forwarded commands: a follower forwards replicated commands, not
//! command lines, so the leader checks what each command does (the commands it can come
//! from, its keys and channels) against the user the follower names.

use bytes::Bytes;

use super::check::{categories, key_access, noperm};
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
        C::Scan(_) => (&["scan"], none(), none()),
        C::DbSize(_) => (&["dbsize"], none(), none()),
        C::Lock(c) => (&["lock"], one(&c.key), none()),
        C::Acquire(c) => (&["lock"], one(&c.key), none()),
        C::Unlock(c) => (&["unlock"], one(&c.key), none()),
        C::Renew(c) => (&["renew"], one(&c.key), none()),
        C::LockInfo(c) => (&["lockinfo"], one(&c.key), none()),
        C::FencedSet(c) => (&["fencedset"], one(&c.key), none()),
        C::FencedGet(c) => (&["fencedget"], one(&c.key), none()),
        C::FenceCheck(c) => (&["fencecheck"], one(&c.key), none()),
        C::LockCancel(c) => (&["lock"], one(&c.key), none()),
        C::LockReleaseToken(c) => (&["unlock"], one(&c.key), none()),
        C::HSet(c) => (&["hset", "hmset", "hsetnx"], one(&c.key), none()),
        C::HDel(c) => (&["hdel"], one(&c.key), none()),
        C::HIncrBy(c) => (&["hincrby"], one(&c.key), none()),
        C::HRead(c) => (
            &[
                "hget", "hmget", "hexists", "hlen", "hgetall", "hkeys", "hvals",
            ],
            one(&c.key),
            none(),
        ),
        C::Push(c) => (&["lpush", "rpush", "lpushx", "rpushx"], one(&c.key), none()),
        C::Pop(c) => (&["lpop", "rpop"], one(&c.key), none()),
        C::LRead(c) => (&["llen", "lrange", "lindex"], one(&c.key), none()),
        C::BPop(c) => (&["blpop", "brpop"], many(&c.keys), none()),
        C::Publish(c) => (&["publish"], none(), vec![c.channel.as_ref()]),
        C::Versions(c) => (&["watch"], many(&c.keys), none()),
        C::Exec(_) => (&["exec"], none(), none()),
        C::Eval(c) => (&["eval", "evalsha"], many(&c.keys), none()),
        C::EvalRo(c) => (&["eval_ro", "evalsha_ro"], many(&c.0.keys), none()),
        C::EvalAs(c) if c.read_only => (&["eval_ro", "evalsha_ro"], many(&c.eval.keys), none()),
        C::EvalAs(c) => (&["eval", "evalsha"], many(&c.eval.keys), none()),
        C::Script(Script::Load(_)) => (&["script|load"], none(), none()),
        C::Script(Script::Exists(_)) => (&["script|exists"], none(), none()),
        C::Script(Script::Flush) => (&["script|flush"], none(), none()),
        C::Script(Script::Budget(_)) => (&["script|budget"], none(), none()),
        C::AclSetUser(_) => (&["acl|setuser"], none(), none()),
        C::AclDelUser(_) => (&["acl|deluser"], none(), none()),
        C::AclLoad(_) => (&["acl|load"], none(), none()),
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
    if let Command::EvalAs(e) = cmd {
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
        let access = key_access(spec);
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
