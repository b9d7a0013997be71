//! The conditional writes of Redis 8.4 and Valkey: `SET ... IFEQ|IFNE|IFDEQ|IFDNE v`,
//! `DELEX key [IFEQ|IFNE|IFDEQ|IFDNE v]`, `DELIFEQ key value` (Valkey), and `DIGEST key`, the
//! XXH3-64 of a string value as 16 lower-case hex digits.
//!
//! A condition compares the key's current string value, or its digest, with the argument,
//! in the state machine, so the comparison and the write are one log entry. A missing key
//! equals nothing: `IFEQ`/`IFDEQ` fail on it and `IFNE`/`IFDNE` pass. A key of another type
//! is `WRONGTYPE`. Digest arguments are hexadecimal numbers of 1 to 16 digits in either case
//! (`00ab` and `AB` are the same digest), as Redis compares them.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::registry::flags::{READ_FAST, WRITE_FAST};
use crate::cmd::registry::{none, one, wrong_arity, Replicated, Spec, Touches, ONE_KEY};
use crate::cmd::set::{Set, SetForm};
use crate::cmd::{Command, Ctx, Request};
use crate::resp::args::syntax_error;
use crate::resp::{Args, Reply};
use crate::state::Keyspace;

/// This file's rows of the command table (SET's conditions are parsed by `set.rs`).
pub static COMMANDS: &[Spec] = &[
    Spec::new("delex", -2, WRITE_FAST, ONE_KEY, parse_delex)
        .key_specs("RW,access,delete@i1/r0,1,0")
        .args("key:key condition@(IFEQ=ifeq-value|IFNE=ifne-value|IFDEQ=ifeq-digest|IFDNE=ifne-digest)?").docs(
        "Remove a key, optionally only if its value or digest matches a condition",
        "8.4.0",
        "string",
    ),
    Spec::new("delifeq", 3, WRITE_FAST, ONE_KEY, parse_delifeq)
        .key_specs("RW,access,delete@i1/r0,1,0")
        .args("key:key value").docs(
        "Remove a key only if it holds the given string (Valkey)",
        "9.0.0",
        "string",
    ),
    Spec::new("digest", 2, READ_FAST, ONE_KEY, parse_digest)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key").docs(
        "Return the XXH3 digest of a string value as 16 hex digits",
        "8.4.0",
        "string",
    ),
];

/// The error for a condition word DELEX does not know.
const INVALID_CONDITION: &str = "ERR Invalid condition. Use IFEQ, IFNE, IFDEQ or IFDNE";
/// The error for a digest argument that is not 1 to 16 hex digits.
const INVALID_DIGEST: &str = "ERR digest must be a hexadecimal number of 1 to 16 digits";

/// A condition on the key's current value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Cond {
    /// `IFEQ v`: the value is exactly `v`.
    Eq(Bytes),
    /// `IFNE v`: the value is not `v`, or there is no value.
    Ne(Bytes),
    /// `IFDEQ d`: the value's digest is `d`.
    DigestEq(u64),
    /// `IFDNE d`: the value's digest is not `d`, or there is no value.
    DigestNe(u64),
}

/// XXH3-64 (seed 0) of `value`: what DIGEST reports and IFDEQ/IFDNE compare.
pub fn digest(value: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(value)
}

/// Parses a digest argument: 1 to 16 hex digits, either case.
fn parse_digest_arg(raw: &[u8]) -> Result<u64, Reply> {
    let text = std::str::from_utf8(raw).map_err(|_| Reply::err(INVALID_DIGEST))?;
    if text.is_empty() || text.len() > 16 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Reply::err(INVALID_DIGEST));
    }
    u64::from_str_radix(text, 16).map_err(|_| Reply::err(INVALID_DIGEST))
}

impl Cond {
    /// The condition named by `word` (any case) with argument `arg`; `Ok(None)` if `word`
    /// names no condition.
    pub fn parse(word: &[u8], arg: Bytes) -> Result<Option<Cond>, Reply> {
        let word = word.to_ascii_uppercase();
        Ok(Some(match word.as_slice() {
            b"IFEQ" => Cond::Eq(arg),
            b"IFNE" => Cond::Ne(arg),
            b"IFDEQ" => Cond::DigestEq(parse_digest_arg(&arg)?),
            b"IFDNE" => Cond::DigestNe(parse_digest_arg(&arg)?),
            _ => return Ok(None),
        }))
    }

    /// True if `word` (any case) names a condition.
    pub fn is_word(word: &[u8]) -> bool {
        ["IFEQ", "IFNE", "IFDEQ", "IFDNE"]
            .iter()
            .any(|w| word.eq_ignore_ascii_case(w.as_bytes()))
    }

    /// Whether the condition holds for `key` at `now`: `WRONGTYPE` for a key that is not a
    /// string.
    pub fn holds(&self, ks: &Keyspace, key: &[u8], now: u64) -> Result<bool, Reply> {
        let current = ks.get_str(key, now).map_err(Reply::from)?;
        Ok(match (self, current) {
            (Cond::Eq(v), Some(cur)) => cur == v,
            (Cond::Ne(v), Some(cur)) => cur != v,
            (Cond::DigestEq(d), Some(cur)) => digest(cur) == *d,
            (Cond::DigestNe(d), Some(cur)) => digest(cur) != *d,
            (Cond::Eq(_) | Cond::DigestEq(_), None) => false,
            (Cond::Ne(_) | Cond::DigestNe(_), None) => true,
        })
    }
}

/// `SET key value IFEQ|IFNE|IFDEQ|IFDNE v [GET] [expiry]`: a SET that applies only when
/// the condition holds. Its own log type, so that plain SET entries keep their bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetIf {
    /// The SET (never NX or XX: those exclude a condition).
    pub set: Set,
    /// The condition.
    pub cond: Cond,
}

impl Replicated for SetIf {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["set"], one(&self.set.key), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    fn resolve_absolute_time(&mut self, unix_now_ms: i64) {
        self.set.resolve_absolute_time(unix_now_ms);
    }

    /// Applies the SET if the condition holds; otherwise nil (or the old value with GET).
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        match self.cond.holds(ks, &self.set.key, ctx.now) {
            Err(e) => e,
            Ok(true) => self.set.apply(ks, ctx),
            Ok(false) if self.set.get => match ks.get_str(&self.set.key, ctx.now) {
                Ok(v) => v.cloned().map_or(Reply::Nil, Reply::Bulk),
                Err(e) => e.into(),
            },
            Ok(false) => match self.set.form {
                SetForm::Set => Reply::Nil,
                SetForm::SetNx => Reply::Int(0),
            },
        }
    }
}

/// When DELEX deletes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DelWhen {
    /// No condition: a DEL of one key of any type.
    Always,
    /// When the condition holds (the key must be a string).
    If(Cond),
    /// `DELEX key IFEQ` without its value: Redis answers 0 for a missing key and an arity
    /// error otherwise, and so do we.
    MissingValue,
}

/// `DELEX key [cond v]` and `DELIFEQ key value`: 1 if the key was removed, else 0.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DelEx {
    /// The key.
    pub key: Bytes,
    /// When to delete.
    pub when: DelWhen,
}

/// Parses `DELEX key [IFEQ|IFNE|IFDEQ|IFDNE v]`.
pub fn parse_delex(args: &mut Args) -> Result<Request, Reply> {
    let key = args.arg()?;
    let when = match args.remaining() {
        0 => DelWhen::Always,
        1 => {
            let word = args.arg()?;
            if !Cond::is_word(&word) {
                return Err(Reply::err(INVALID_CONDITION));
            }
            DelWhen::MissingValue
        }
        2 => {
            let word = args.arg()?;
            let value = args.arg()?;
            match Cond::parse(&word, value)? {
                Some(cond) => DelWhen::If(cond),
                None => return Err(Reply::err(INVALID_CONDITION)),
            }
        }
        _ => return Err(wrong_arity("delex")),
    };
    Ok(Request::Data(Command::DelEx(DelEx { key, when })))
}

/// Parses Valkey's `DELIFEQ key value` (the same entry as `DELEX key IFEQ value`).
pub fn parse_delifeq(args: &mut Args) -> Result<Request, Reply> {
    let key = args.arg()?;
    let value = args.arg()?;
    Ok(Request::Data(Command::DelEx(DelEx {
        key,
        when: DelWhen::If(Cond::Eq(value)),
    })))
}

impl Replicated for DelEx {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["delex", "delifeq"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Removes the key if it exists and the condition holds. Fences are untouched, as DEL.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let remove = match &self.when {
            DelWhen::Always => true,
            DelWhen::MissingValue => {
                if ks.get(&self.key, ctx.now).is_none() {
                    return Reply::Int(0);
                }
                return wrong_arity("delex");
            }
            DelWhen::If(cond) => {
                if ks.get(&self.key, ctx.now).is_none() {
                    return Reply::Int(0);
                }
                match cond.holds(ks, &self.key, ctx.now) {
                    Ok(holds) => holds,
                    Err(e) => return e,
                }
            }
        };
        if remove && ks.remove(&self.key, ctx.now).is_some() {
            ks.notify(crate::state::notify::GENERIC, "del", &self.key);
            Reply::Int(1)
        } else {
            Reply::Int(0)
        }
    }
}

/// `DIGEST key`: the value's XXH3-64 as 16 lower-case hex digits, nil if absent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Digest {
    /// The key.
    pub key: Bytes,
}

/// Parses DIGEST.
pub fn parse_digest(args: &mut Args) -> Result<Request, Reply> {
    Ok(Request::Data(Command::Digest(Digest { key: args.arg()? })))
}

impl Replicated for Digest {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["digest"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        true
    }

    fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        match ks.get_str(&self.key, now) {
            Ok(Some(v)) => Reply::Bulk(Bytes::from(format!("{:016x}", digest(v)))),
            Ok(None) => Reply::Nil,
            Err(e) => e.into(),
        }
    }
}

/// Parses the condition after a SET option word, or a syntax error if it is missing.
pub fn parse_set_cond(word: &[u8], args: &mut Args) -> Result<Cond, Reply> {
    if args.remaining() == 0 {
        return Err(syntax_error());
    }
    Cond::parse(word, args.arg()?)?.ok_or_else(syntax_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_matches_the_redis_documentation_example() {
        // redis.io's DIGEST page: SET key1 "Hello world"; DIGEST key1 -> "b6acb9d84a38ff74".
        assert_eq!(
            format!("{:016x}", digest(b"Hello world")),
            "b6acb9d84a38ff74"
        );
    }

    #[test]
    fn digest_arguments_are_hex_numbers_in_either_case() {
        assert_eq!(parse_digest_arg(b"00ab").ok(), Some(0xab));
        assert_eq!(parse_digest_arg(b"AB").ok(), Some(0xab));
        assert_eq!(parse_digest_arg(b"ffffffffffffffff").ok(), Some(u64::MAX));
        for bad in [&b""[..], b"xyz", b"1ffffffffffffffff", b"-1", b"0x12"] {
            assert!(parse_digest_arg(bad).is_err(), "{bad:?}");
        }
    }
}
