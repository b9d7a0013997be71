//! `GETEX key [EX seconds|PX ms|EXAT unix-s|PXAT unix-ms|PERSIST]` and
//! `GETSET key value`.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::registry::flags::{WRITE_FAST, WRITE_GROW_FAST};
use crate::cmd::registry::{none, one, Replicated, Spec, Touches, ONE_KEY};
use crate::cmd::{Command, Ctx, Expiry, Request};
use crate::resp::args::{syntax_error, NOT_INTEGER};
use crate::resp::{Args, Reply};
use crate::state::{notify, Keyspace};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new("getex", -2, WRITE_FAST, ONE_KEY, parse_getex)
        .key_specs("RW,access,update@i1/r0,1,0")
        .args("key:key expiration@(EX=seconds:integer|PX=milliseconds:integer|EXAT=unix-time-seconds:unix-time|PXAT=unix-time-milliseconds:unix-time|PERSIST)?").docs(
        "Return the string stored at a key and change or remove its expiry",
        "6.2.0",
        "string",
    ),
    Spec::new("getset", 3, WRITE_GROW_FAST, ONE_KEY, parse_getset)
        .key_specs("RW,access,update@i1/r0,1,0")
        .args("key:key value").docs(
        "Store a string at a key and return the old one",
        "1.0.0",
        "string",
    ),
];

/// What GETEX does to the key's TTL.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum GetExTtl {
    /// No option: a plain read.
    Keep,
    /// PERSIST: drop the TTL.
    Persist,
    /// EX/PX/EXAT/PXAT.
    Set(Expiry),
    /// The time was not an integer. Redis reports it only for an existing string key,
    /// so the error is decided at apply.
    NotInteger,
    /// The time was out of range (same: reported only for an existing string key).
    Invalid,
}

/// GETEX.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GetEx {
    /// The key.
    pub key: Bytes,
    /// The TTL change.
    pub ttl: GetExTtl,
}

/// GETSET: stores the value (dropping any TTL) and replies with the old one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GetSet {
    /// The key.
    pub key: Bytes,
    /// The new value.
    pub value: Bytes,
}

/// Parses GETEX's options as Redis's `parseExtendedStringArgumentsOrReply` does: one of
/// EX/PX/EXAT/PXAT (repeating the same one keeps the last) or PERSIST.
pub fn parse_getex(args: &mut Args) -> Result<Request, Reply> {
    let key = args.arg()?;
    let mut persist = false;
    let mut unit: Option<(&'static str, Bytes)> = None;
    while args.remaining() > 0 {
        let opt = args.next_keyword()?;
        let has_next = args.remaining() > 0;
        let word = ["EX", "PX", "EXAT", "PXAT"].into_iter().find(|w| *w == opt);
        match word {
            Some(w) if has_next && !persist && unit.as_ref().is_none_or(|(u, _)| *u == w) => {
                unit = Some((w, args.arg()?));
            }
            None if opt == "PERSIST" && unit.is_none() => persist = true,
            _ => return Err(syntax_error()),
        }
    }
    let ttl = match unit {
        None if persist => GetExTtl::Persist,
        None => GetExTtl::Keep,
        Some((w, raw)) => match Expiry::parse(w, &raw, "getex") {
            Ok(e) => GetExTtl::Set(e),
            Err(e) if e == Reply::err(NOT_INTEGER) => GetExTtl::NotInteger,
            Err(_) => GetExTtl::Invalid,
        },
    };
    Ok(Request::Data(Command::GetEx(GetEx { key, ttl })))
}

/// Parses GETSET.
pub fn parse_getset(args: &mut Args) -> Result<Request, Reply> {
    let (key, value) = (args.arg()?, args.arg()?);
    Ok(Request::Data(Command::GetSet(GetSet { key, value })))
}

impl Replicated for GetEx {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["getex"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    fn resolve_absolute_time(&mut self, unix_now_ms: i64) {
        if let GetExTtl::Set(e) = &mut self.ttl {
            e.resolve(unix_now_ms);
        }
    }

    /// Replies with the value and applies the TTL change; a deadline already past deletes
    /// the key, as Redis does.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let value = match ks.get_str(&self.key, ctx.now) {
            Err(e) => return e.into(),
            Ok(None) => return Reply::Nil,
            Ok(Some(v)) => v.clone(),
        };
        match self.ttl {
            GetExTtl::Keep => {}
            GetExTtl::NotInteger => return Reply::err(NOT_INTEGER),
            GetExTtl::Invalid => return Reply::err("ERR invalid expire time in 'getex' command"),
            GetExTtl::Persist => {
                if ks
                    .get(&self.key, ctx.now)
                    .is_some_and(|e| e.expire_at.is_some())
                {
                    ks.set_expire(&self.key, None, ctx.now);
                    ks.notify(notify::GENERIC, "persist", &self.key);
                }
            }
            GetExTtl::Set(e) => {
                let at = e.deadline(ctx.now);
                if at <= ctx.now {
                    ks.remove(&self.key, ctx.now);
                    ks.notify(notify::GENERIC, "del", &self.key);
                } else {
                    ks.set_expire(&self.key, Some(at), ctx.now);
                    ks.notify(notify::GENERIC, "expire", &self.key);
                }
            }
        }
        Reply::Bulk(value)
    }
}

impl Replicated for GetSet {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["getset"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Stores the value without a TTL and replies with the old value.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let old = match ks.get_str(&self.key, ctx.now) {
            Err(e) => return e.into(),
            Ok(v) => v.cloned(),
        };
        ks.set_str(
            self.key.clone(),
            self.value.clone(),
            None,
            ctx.revision,
            ctx.now,
        );
        ks.notify(notify::STRING, "set", &self.key);
        old.map_or(Reply::Nil, Reply::Bulk)
    }
}
