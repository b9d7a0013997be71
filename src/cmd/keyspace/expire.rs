//! `EXPIRE`/`PEXPIRE key ttl [NX|XX|GT|LT]`, `EXPIREAT`/`PEXPIREAT key time [NX|XX|GT|LT]`,
//! and `PERSIST key`.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::registry::flags::WRITE_FAST;
use crate::cmd::registry::{none, one, Replicated, Spec, Touches, ONE_KEY};
use crate::cmd::{Command, Ctx, Expiry, Request};
use crate::resp::{Args, Reply};
use crate::state::Keyspace;

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new("expire", -3, WRITE_FAST, ONE_KEY, parse)
        .key_specs("RW,update@i1/r0,1,0")
        .args("key:key seconds:integer condition@(NX|XX|GT|LT)?")
        .docs("Give a key a time to live in seconds", "1.0.0", "generic"),
    Spec::new("pexpire", -3, WRITE_FAST, ONE_KEY, parse)
        .key_specs("RW,update@i1/r0,1,0")
        .args("key:key milliseconds:integer condition@(NX|XX|GT|LT)?")
        .docs(
            "Give a key a time to live in milliseconds",
            "2.6.0",
            "generic",
        ),
    Spec::new("expireat", -3, WRITE_FAST, ONE_KEY, parse)
        .key_specs("RW,update@i1/r0,1,0")
        .args("key:key unix-time-seconds:unix-time condition@(NX|XX|GT|LT)?")
        .docs(
            "Make a key expire at a Unix time in seconds",
            "1.2.0",
            "generic",
        ),
    Spec::new("pexpireat", -3, WRITE_FAST, ONE_KEY, parse)
        .key_specs("RW,update@i1/r0,1,0")
        .args("key:key unix-time-milliseconds:unix-time condition@(NX|XX|GT|LT)?")
        .docs(
            "Make a key expire at a Unix time in milliseconds",
            "2.6.0",
            "generic",
        ),
    Spec::new("persist", 2, WRITE_FAST, ONE_KEY, parse_persist)
        .key_specs("RW,update@i1/r0,1,0")
        .args("key:key")
        .docs("Clear a key's time to live", "2.2.0", "generic"),
];

/// The Redis 7 condition flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cond {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

/// A parsed EXPIRE-family command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expire {
    /// The key.
    pub key: Bytes,
    /// The new deadline (absolute forms are resolved on the leader).
    pub when: Expiry,
    /// NX/XX/GT/LT.
    pub cond: Cond,
}

/// Parses EXPIRE, PEXPIRE, EXPIREAT and PEXPIREAT.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    let name = args.name().to_string();
    let key = args.arg()?;
    let raw = args.arg()?;
    let mut cond = Cond::default();
    while args.remaining() > 0 {
        let opt = args.arg()?;
        match String::from_utf8_lossy(&opt).to_ascii_uppercase().as_str() {
            "NX" => cond.nx = true,
            "XX" => cond.xx = true,
            "GT" => cond.gt = true,
            "LT" => cond.lt = true,
            _ => {
                return Err(Reply::err(format!(
                    "ERR Unsupported option {}",
                    String::from_utf8_lossy(&opt)
                )))
            }
        }
    }
    if cond.nx && (cond.xx || cond.gt || cond.lt) {
        return Err(Reply::err(
            "ERR NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if cond.gt && cond.lt {
        return Err(Reply::err(
            "ERR GT and LT options at the same time are not compatible",
        ));
    }
    let n = crate::resp::args::parse_i64(&raw)
        .ok_or_else(|| Reply::err(crate::resp::args::NOT_INTEGER))?;
    let invalid = || Reply::err(format!("ERR invalid expire time in '{name}' command"));
    let seconds = !name.starts_with('p');
    let ms = if seconds {
        n.checked_mul(1000).ok_or_else(invalid)?
    } else {
        n
    };
    // Redis adds the base time (now, or 0 for the AT forms) and rejects an overflowing sum.
    let base = if name.ends_with("at") {
        0
    } else {
        crate::cmd::expiry::unix_now_ms()
    };
    let ms = if ms > i64::MAX - base {
        return Err(invalid());
    } else {
        ms
    };
    let when = if name.ends_with("at") {
        Expiry::At(ms)
    } else {
        Expiry::In(ms)
    };
    Ok(Request::Data(Command::Expire(Expire { key, when, cond })))
}

impl Replicated for Expire {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((
            &["expire", "pexpire", "expireat", "pexpireat"],
            one(&self.key),
            none(),
        ))
    }

    fn is_read(&self) -> bool {
        false
    }

    fn resolve_absolute_time(&mut self, unix_now_ms: i64) {
        self.when.resolve(unix_now_ms);
    }

    /// Applies the new deadline, or deletes the key if it is already in the past.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let Some(entry) = ks.get(&self.key, ctx.now) else {
            return Reply::Int(0);
        };
        let Expiry::In(rel) = self.when else {
            return Reply::err("ERR internal: unresolved absolute expire time");
        };
        let when = ctx.now as i64 + rel;
        let current = entry.expire_at.map(|at| at as i64);
        let c = self.cond;
        let refused = (c.nx && current.is_some())
            || (c.xx && current.is_none())
            || (c.gt && current.is_none_or(|cur| when <= cur))
            || (c.lt && current.is_some_and(|cur| when >= cur));
        if refused {
            return Reply::Int(0);
        }
        if when <= ctx.now as i64 {
            ks.remove(&self.key, ctx.now);
            ks.notify(crate::state::notify::GENERIC, "del", &self.key);
        } else {
            ks.set_expire(&self.key, Some(when as u64), ctx.now);
            ks.notify(crate::state::notify::GENERIC, "expire", &self.key);
        }
        Reply::Int(1)
    }
}

/// `PERSIST key`: removes the deadline; 1 if there was one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Persist {
    /// The key.
    pub key: Bytes,
}

/// Parses PERSIST.
pub fn parse_persist(args: &mut Args) -> Result<Request, Reply> {
    Ok(Request::Data(Command::Persist(Persist {
        key: args.arg()?,
    })))
}

impl Replicated for Persist {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["persist"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Applies PERSIST.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        match ks.get(&self.key, ctx.now) {
            Some(e) if e.expire_at.is_some() => {
                let done = ks.set_expire(&self.key, None, ctx.now);
                if done {
                    ks.notify(crate::state::notify::GENERIC, "persist", &self.key);
                }
                Reply::Int(done as i64)
            }
            _ => Reply::Int(0),
        }
    }
}
