//! String edits and reads: `APPEND key value`, `SETRANGE key offset value`,
//! `INCRBYFLOAT key increment`, `STRLEN key`, `GETRANGE key start end` and its older name
//! `SUBSTR key start end`.
//!
//! Writes keep the key's TTL. A string is also a lock whose owner is its value, so a write
//! that changes the value gives the key a new token, as every string write does
//! ([`Keyspace::set_str`]).

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::algo::float80;
use crate::cmd::registry::flags::{READ, READ_FAST, WRITE, WRITE_GROW_FAST};
use crate::cmd::registry::{none, one, Replicated, Spec, Touches, ONE_KEY};
use crate::cmd::{Command, Ctx, Request};
use crate::resp::{Args, Reply};
use crate::state::{notify, Keyspace};

/// Redis's largest string (`proto-max-bulk-len`'s default). A constant, not the node's
/// CONFIG value: apply must decide the same on every replica.
pub const MAX_STRING: u64 = 512 * 1024 * 1024;

/// Redis's refusal of a string longer than [`MAX_STRING`].
pub const TOO_LONG: &str = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new("append", 3, WRITE_GROW_FAST, ONE_KEY, parse_write)
        .key_specs("RW,insert@i1/r0,1,0")
        .args("key:key value")
        .docs("Append a string to the value of a key", "2.0.0", "string"),
    Spec::new("setrange", 4, WRITE, ONE_KEY, parse_write)
        .key_specs("RW,update@i1/r0,1,0")
        .args("key:key offset:integer value")
        .docs(
            "Overwrite part of a string from an offset",
            "2.2.0",
            "string",
        ),
    Spec::new("incrbyfloat", 3, WRITE_GROW_FAST, ONE_KEY, parse_write)
        .key_specs("RW,access,update@i1/r0,1,0")
        .args("key:key increment:double")
        .docs(
            "Add a floating point amount to the number stored at a key",
            "2.6.0",
            "string",
        ),
    Spec::new("strlen", 2, READ_FAST, ONE_KEY, parse_read)
        .key_specs("RO@i1/r0,1,0")
        .args("key:key")
        .docs(
            "Return the length of the string stored at a key",
            "2.2.0",
            "string",
        ),
    Spec::new("getrange", 4, READ, ONE_KEY, parse_read)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key start:integer end:integer")
        .docs(
            "Return part of the string stored at a key",
            "2.4.0",
            "string",
        ),
    Spec::new("substr", 4, READ, ONE_KEY, parse_read)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key start:integer end:integer")
        .docs(
            "Return part of the string stored at a key (the older name of GETRANGE)",
            "1.0.0",
            "string",
        ),
];

/// What a string write does.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum StrWriteOp {
    /// APPEND value.
    Append(Bytes),
    /// SETRANGE offset value (offset already checked to be >= 0).
    SetRange(u64, Bytes),
    /// INCRBYFLOAT increment, as sent: Redis checks the key's type before the number.
    IncrByFloat(Bytes),
}

/// A string write.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StrWrite {
    /// The key.
    pub key: Bytes,
    /// What to do.
    pub op: StrWriteOp,
}

/// What a string read asks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum StrReadOp {
    /// STRLEN.
    Len,
    /// GETRANGE/SUBSTR start end.
    Range(i64, i64),
}

/// A string read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StrRead {
    /// The key.
    pub key: Bytes,
    /// What to read.
    pub op: StrReadOp,
}

/// Parses APPEND, SETRANGE and INCRBYFLOAT.
pub fn parse_write(args: &mut Args) -> Result<Request, Reply> {
    let name = args.name().to_string();
    let key = args.arg()?;
    let op = match name.as_str() {
        "append" => StrWriteOp::Append(args.arg()?),
        "setrange" => {
            let offset = args.next_i64()?;
            if offset < 0 {
                return Err(Reply::err("ERR offset is out of range"));
            }
            StrWriteOp::SetRange(offset as u64, args.arg()?)
        }
        _ => StrWriteOp::IncrByFloat(args.arg()?),
    };
    Ok(Request::Data(Command::StrWrite(StrWrite { key, op })))
}

/// Parses STRLEN, GETRANGE and SUBSTR.
pub fn parse_read(args: &mut Args) -> Result<Request, Reply> {
    let name = args.name().to_string();
    let key = args.arg()?;
    let op = if name == "strlen" {
        StrReadOp::Len
    } else {
        StrReadOp::Range(args.next_i64()?, args.next_i64()?)
    };
    Ok(Request::Data(Command::StrRead(StrRead { key, op })))
}

/// Stores `value` at `key`, keeping the key's TTL (a new key has none).
pub(crate) fn store_keep_ttl(ks: &mut Keyspace, key: &Bytes, value: Bytes, ctx: Ctx) {
    let expire_at = ks.get(key, ctx.now).and_then(|e| e.expire_at);
    ks.set_str(key.clone(), value, expire_at, ctx.revision, ctx.now);
}

/// Redis's `checkStringLength`: `len + extra` may not exceed `max`.
pub(crate) fn check_length(len: u64, extra: u64, max: u64) -> Result<(), Reply> {
    match len.checked_add(extra) {
        Some(total) if total <= max => Ok(()),
        _ => Err(Reply::err(TOO_LONG)),
    }
}

impl StrWrite {
    fn append(&self, ks: &mut Keyspace, ctx: Ctx, tail: &Bytes) -> Result<Reply, Reply> {
        let old = ks.get_str(&self.key, ctx.now)?.cloned();
        let value = match old {
            None => tail.clone(),
            Some(old) => {
                check_length(old.len() as u64, tail.len() as u64, MAX_STRING)?;
                let mut v = Vec::with_capacity(old.len() + tail.len());
                v.extend_from_slice(&old);
                v.extend_from_slice(tail);
                Bytes::from(v)
            }
        };
        let len = value.len() as i64;
        store_keep_ttl(ks, &self.key, value, ctx);
        ks.notify(notify::STRING, "append", &self.key);
        Ok(Reply::Int(len))
    }

    fn set_range(
        &self,
        ks: &mut Keyspace,
        ctx: Ctx,
        offset: u64,
        part: &Bytes,
    ) -> Result<Reply, Reply> {
        let old = ks.get_str(&self.key, ctx.now)?.cloned();
        if part.is_empty() {
            return Ok(Reply::Int(old.map_or(0, |o| o.len() as i64)));
        }
        check_length(offset, part.len() as u64, MAX_STRING)?;
        let mut v = old.map(|o| o.to_vec()).unwrap_or_default();
        let end = offset as usize + part.len();
        if v.len() < end {
            v.resize(end, 0);
        }
        v[offset as usize..end].copy_from_slice(part);
        let len = v.len() as i64;
        store_keep_ttl(ks, &self.key, Bytes::from(v), ctx);
        ks.notify(notify::STRING, "setrange", &self.key);
        Ok(Reply::Int(len))
    }

    fn incr_by_float(&self, ks: &mut Keyspace, ctx: Ctx, by: &Bytes) -> Result<Reply, Reply> {
        let not_float = || Reply::err("ERR value is not a valid float");
        let current = match ks.get_str(&self.key, ctx.now)? {
            None => float80::parse(b"0"),
            Some(v) => float80::parse(v),
        }
        .ok_or_else(not_float)?;
        let by = float80::parse(by).ok_or_else(not_float)?;
        let next = float80::add(current, by)
            .ok_or_else(|| Reply::err("ERR increment would produce NaN or Infinity"))?;
        let text = Bytes::from(float80::format(next));
        store_keep_ttl(ks, &self.key, text.clone(), ctx);
        ks.notify(notify::STRING, "incrbyfloat", &self.key);
        Ok(Reply::Bulk(text))
    }
}

impl Replicated for StrWrite {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((
            &["append", "setrange", "incrbyfloat"],
            one(&self.key),
            none(),
        ))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Applies the write.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let r = match &self.op {
            StrWriteOp::Append(tail) => self.append(ks, ctx, tail),
            StrWriteOp::SetRange(offset, part) => self.set_range(ks, ctx, *offset, part),
            StrWriteOp::IncrByFloat(by) => self.incr_by_float(ks, ctx, by),
        };
        r.unwrap_or_else(|e| e)
    }
}

/// Redis's GETRANGE on a string of `len` bytes: the byte range, or None for an empty reply.
pub(crate) fn byte_range(len: usize, mut start: i64, mut end: i64) -> Option<(usize, usize)> {
    let n = len as i64;
    if start < 0 && end < 0 && start > end {
        return None;
    }
    if start < 0 {
        start += n;
    }
    if end < 0 {
        end += n;
    }
    start = start.max(0);
    end = end.max(0);
    if end >= n {
        end = n - 1;
    }
    if start > end || n == 0 {
        return None;
    }
    Some((start as usize, end as usize))
}

impl Replicated for StrRead {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["strlen", "getrange", "substr"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        true
    }

    /// Answers the read at `now`.
    fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        let value = match ks.get_str(&self.key, now) {
            Err(e) => return e.into(),
            Ok(v) => v,
        };
        match (&self.op, value) {
            (StrReadOp::Len, v) => Reply::Int(v.map_or(0, |v| v.len() as i64)),
            (StrReadOp::Range(..), None) => Reply::bulk(Bytes::new()),
            (StrReadOp::Range(start, end), Some(v)) => match byte_range(v.len(), *start, *end) {
                None => Reply::bulk(Bytes::new()),
                Some((s, e)) => Reply::Bulk(v.slice(s..=e)),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_length_limit_matches_redis_check() {
        assert!(check_length(10, 5, 15).is_ok());
        assert_eq!(check_length(10, 6, 15), Err(Reply::err(TOO_LONG)));
        assert_eq!(
            check_length(u64::MAX, 1, MAX_STRING),
            Err(Reply::err(TOO_LONG))
        );
        assert!(check_length(MAX_STRING - 1, 1, MAX_STRING).is_ok());
    }

    #[test]
    fn ranges_follow_getrange() {
        assert_eq!(byte_range(10, 0, -1), Some((0, 9)));
        assert_eq!(byte_range(10, -3, -1), Some((7, 9)));
        assert_eq!(byte_range(10, -1, -3), None);
        assert_eq!(byte_range(10, 5, 100), Some((5, 9)));
        assert_eq!(byte_range(10, 11, 12), None);
        assert_eq!(byte_range(0, 0, -1), None);
        assert_eq!(byte_range(10, -100, 2), Some((0, 2)));
    }
}
