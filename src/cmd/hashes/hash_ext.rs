//! More hash commands: `HINCRBYFLOAT key field increment`, `HRANDFIELD key [count
//! [WITHVALUES]]` and `HSCAN key cursor [MATCH pattern] [COUNT count]`. (`HSTRLEN` is a
//! read op in `hash.rs`.)
//!
//! HINCRBYFLOAT computes in Redis's long double ([`crate::algo::float80`], shared with INCRBYFLOAT). HRANDFIELD is
//! deterministic: its generator is seeded from the keyspace's revision (the same on every
//! replica at the same log index) and the key. HSCAN of a hash Redis keeps as a listpack
//! (at most 128 fields, none longer than 64 bytes) replies everything at once with cursor
//! 0, exactly as Redis; a larger hash is paged by position in insertion order.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::algo::float80::{self, F80};
use crate::algo::rng::SplitMix64;
use crate::cmd::registry::flags::{READ, WRITE_GROW_FAST};
use crate::cmd::registry::{none, one, Replicated, Spec, Touches, ONE_KEY};
use crate::cmd::{Command, Ctx, Request};
use crate::resp::args::{parse_i64, syntax_error, NOT_INTEGER};
use crate::resp::{Args, Reply};
use crate::state::{notify, Hash, Keyspace, Value};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new(
        "hincrbyfloat",
        4,
        WRITE_GROW_FAST,
        ONE_KEY,
        parse_hincrbyfloat,
    )
    .key_specs("RW,access,update@i1/r0,1,0")
    .args("key:key field increment:double")
    .docs(
        "Add a floating-point number to a hash field",
        "2.6.0",
        "hash",
    ),
    Spec::new("hrandfield", -2, READ, ONE_KEY, parse_hrandfield)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key options@{count:integer WITHVALUES?}?")
        .docs("Return random fields of a hash", "6.2.0", "hash"),
    Spec::new("hscan", -3, READ, ONE_KEY, parse_hscan)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key cursor:integer MATCH=pattern:pattern? COUNT=count:integer?")
        .docs(
            "Walk the fields and values of a hash with a cursor",
            "2.8.0",
            "hash",
        ),
];

/// Hashes up to this many fields, each field and value up to [`LISTPACK_VALUE`] bytes, are
/// listpacks in Redis (hash-max-listpack-entries / -value): HSCAN returns them whole.
const LISTPACK_ENTRIES: usize = 128;
const LISTPACK_VALUE: usize = 64;

/// The most draws a negative HRANDFIELD count may ask for (Redis has no bound; a reply of
/// billions of elements would exhaust memory here).
pub const MAX_DRAWS: u64 = 1 << 24;

/// HINCRBYFLOAT. The increment stays as text and is parsed in apply (deterministically).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HIncrByFloat {
    /// The key.
    pub key: Bytes,
    /// The field.
    pub field: Bytes,
    /// The increment as given (already checked by the parser).
    pub by: Bytes,
}

/// HRANDFIELD (a read).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HRandField {
    /// The key.
    pub key: Bytes,
    /// None: one field (bulk). Positive: distinct fields; negative: draws with repeats.
    pub count: Option<i64>,
    /// Reply field/value pairs.
    pub with_values: bool,
}

/// HSCAN (a read). The options stay raw: Redis checks them only when the key exists.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HScan {
    /// The key.
    pub key: Bytes,
    /// The cursor.
    pub cursor: u64,
    /// `MATCH pattern`, `COUNT n`, as given.
    pub options: Vec<Bytes>,
}

/// An increment as Redis's `getLongDoubleFromObjectOrReply` reads it; HINCRBYFLOAT then
/// refuses infinities.
fn increment(raw: &[u8]) -> Result<F80, Reply> {
    match float80::parse(raw) {
        None => Err(Reply::err("ERR value is not a valid float")),
        Some(F80::Inf { .. }) => Err(Reply::err("ERR value is NaN or Infinity")),
        Some(v) => Ok(v),
    }
}

/// Parses HINCRBYFLOAT.
pub fn parse_hincrbyfloat(args: &mut Args) -> Result<Request, Reply> {
    let key = args.arg()?;
    let field = args.arg()?;
    let by = args.arg()?;
    increment(&by)?;
    Ok(Request::Data(Command::HIncrByFloat(HIncrByFloat {
        key,
        field,
        by,
    })))
}

/// Parses HRANDFIELD with Redis's checks and texts.
pub fn parse_hrandfield(args: &mut Args) -> Result<Request, Reply> {
    let key = args.arg()?;
    let mut count = None;
    let mut with_values = false;
    if args.remaining() > 0 {
        let n = parse_i64(&args.arg()?).ok_or_else(|| Reply::err(NOT_INTEGER))?;
        if n == i64::MIN {
            return Err(Reply::err(
                "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
            ));
        }
        let rest = args.rest();
        match rest.as_slice() {
            [] => {}
            [w] if w.eq_ignore_ascii_case(b"withvalues") => {
                with_values = true;
                if !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&n) {
                    return Err(Reply::err("ERR value is out of range"));
                }
            }
            _ => return Err(syntax_error()),
        }
        if n < 0 && n.unsigned_abs() > MAX_DRAWS {
            return Err(Reply::err("ERR value is out of range"));
        }
        count = Some(n);
    }
    Ok(Request::Data(Command::HRandField(HRandField {
        key,
        count,
        with_values,
    })))
}

/// Redis's SCAN cursor: `strtoul` over the whole argument (so `-1` wraps, and an empty
/// cursor is 0); a leading space or an overflow is an invalid cursor.
pub fn parse_cursor(raw: &[u8]) -> Result<u64, Reply> {
    let invalid = || Reply::err("ERR invalid cursor");
    if raw.is_empty() {
        return Ok(0);
    }
    let (neg, digits) = match raw[0] {
        b'-' => (true, &raw[1..]),
        b'+' => (false, &raw[1..]),
        _ => (false, raw),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(invalid());
    }
    let mut v: u64 = 0;
    for d in digits {
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add((d - b'0') as u64))
            .ok_or_else(invalid)?;
    }
    Ok(if neg { v.wrapping_neg() } else { v })
}

/// Parses HSCAN.
pub fn parse_hscan(args: &mut Args) -> Result<Request, Reply> {
    let key = args.arg()?;
    let cursor = parse_cursor(&args.arg()?)?;
    Ok(Request::Data(Command::HScan(HScan {
        key,
        cursor,
        options: args.rest(),
    })))
}

fn is_hash(v: &Value) -> bool {
    matches!(v, Value::Hash(_))
}

fn new_hash() -> Value {
    Value::Hash(Box::default())
}

impl Replicated for HIncrByFloat {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["hincrbyfloat"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Adds in long double; stores and replies the sum in Redis's `%.17Lf` form.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let by = match increment(&self.by) {
            Ok(v) => v,
            Err(e) => return e,
        };
        let current = match ks.get_hash(&self.key, ctx.now) {
            Err(e) => return e.into(),
            Ok(h) => h.and_then(|h| h.get(&self.field)),
        };
        let current = match current {
            None => float80::parse(b"0"),
            Some(v) => float80::parse(v),
        };
        let Some(current) = current else {
            return Reply::err("ERR hash value is not a float");
        };
        let Some(sum) = float80::add(current, by) else {
            return Reply::err("ERR increment would produce NaN or Infinity");
        };
        let text = Bytes::from(float80::format(sum));
        match ks.value_mut(&self.key, ctx.now, is_hash, Some(new_hash)) {
            Ok(Some(Value::Hash(h))) => {
                h.insert(self.field.clone(), text.clone());
                ks.notify(notify::HASH, "hincrbyfloat", &self.key);
                Reply::Bulk(text)
            }
            Err(e) => e.into(),
            Ok(_) => Reply::err("ERR internal: hash missing"),
        }
    }
}

/// HRANDFIELD's generator: SplitMix64 seeded from the revision and the key (FNV-style), so
/// draws are the same on every replica.
fn rng(revision: u64, key: &[u8]) -> SplitMix64 {
    let mut seed = revision ^ crate::algo::rng::GOLDEN;
    for &b in key {
        seed = (seed ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    SplitMix64::new(seed)
}

impl HRandField {
    fn reply(&self, hash: &Hash, picks: impl Iterator<Item = usize>) -> Reply {
        let entry = |i: usize| hash.get_index(i).map(|(f, v)| (f.clone(), v.clone()));
        if self.with_values {
            Reply::Pairs(
                picks
                    .filter_map(entry)
                    .map(|(f, v)| (Reply::Bulk(f), Reply::Bulk(v)))
                    .collect(),
            )
        } else {
            Reply::Array(
                picks
                    .filter_map(entry)
                    .map(|(f, _)| Reply::Bulk(f))
                    .collect(),
            )
        }
    }
}

impl Replicated for HRandField {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["hrandfield"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        true
    }

    /// Random fields: Redis's cases (whole hash when the count covers it, distinct fields in
    /// hash order for a smaller positive count, independent draws for a negative one).
    fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        let hash = match ks.get_hash(&self.key, now) {
            Err(e) => return e.into(),
            Ok(None) if self.count.is_some() => return Reply::Array(vec![]),
            Ok(None) => return Reply::Nil,
            Ok(Some(h)) => h,
        };
        let mut rng = rng(crate::cmd::draw::seed(ks), &self.key);
        let len = hash.len();
        match self.count {
            None => hash
                .get_index(rng.below(len.max(1)))
                .map_or(Reply::Nil, |(f, _)| Reply::Bulk(f.clone())),
            Some(0) => Reply::Array(vec![]),
            Some(n) if n < 0 => {
                let draws: Vec<usize> = (0..n.unsigned_abs()).map(|_| rng.below(len)).collect();
                self.reply(hash, draws.into_iter())
            }
            Some(n) if n as u64 >= len as u64 => self.reply(hash, 0..len),
            Some(n) => {
                // Selection sampling (Knuth's algorithm S): n distinct indexes, in order.
                let mut want = n as usize;
                let mut picks = Vec::with_capacity(want);
                for i in 0..len {
                    if want == 0 {
                        break;
                    }
                    if rng.below(len - i) < want {
                        picks.push(i);
                        want -= 1;
                    }
                }
                self.reply(hash, picks.into_iter())
            }
        }
    }
}

impl Replicated for HScan {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["hscan"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        true
    }

    /// `[next-cursor, [field, value, ...]]`.
    fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        let empty = || Reply::Array(vec![Reply::text("0"), Reply::Array(vec![])]);
        let hash = match ks.get_hash(&self.key, now) {
            Err(e) => return e.into(),
            Ok(None) => return empty(),
            Ok(Some(h)) => h,
        };
        let mut pattern: Option<&Bytes> = None;
        let mut count = 10usize;
        let mut i = 0;
        while i < self.options.len() {
            let opt = &self.options[i];
            let more = i + 1 < self.options.len();
            if opt.eq_ignore_ascii_case(b"count") && more {
                let Some(n) = parse_i64(&self.options[i + 1]) else {
                    return Reply::err(NOT_INTEGER);
                };
                if n < 1 {
                    return syntax_error();
                }
                count = n as usize;
            } else if opt.eq_ignore_ascii_case(b"match") && more {
                let p = &self.options[i + 1];
                pattern = (p.as_ref() != b"*").then_some(p);
            } else {
                return syntax_error();
            }
            i += 2;
        }
        let listpack = hash.len() <= LISTPACK_ENTRIES
            && hash
                .iter()
                .all(|(f, v)| f.len() <= LISTPACK_VALUE && v.len() <= LISTPACK_VALUE);
        let (start, end) = if listpack {
            (0, hash.len())
        } else {
            let start = (self.cursor as usize).min(hash.len());
            (start, start.saturating_add(count).min(hash.len()))
        };
        let next = if end >= hash.len() { 0 } else { end };
        let mut out = Vec::new();
        for i in start..end {
            let Some((f, v)) = hash.get_index(i) else {
                break;
            };
            if pattern.is_none_or(|p| crate::state::pattern::matches(p, f)) {
                out.push(Reply::Bulk(f.clone()));
                out.push(Reply::Bulk(v.clone()));
            }
        }
        Reply::Array(vec![Reply::text(&next.to_string()), Reply::Array(out)])
    }
}

#[cfg(test)]
mod tests {
    use crate::cmd::run_line;
    use crate::resp::Reply;
    use crate::state::Keyspace;

    #[test]
    fn hrandfield_is_repeatable_at_one_revision() {
        let mut ks = Keyspace::default();
        run_line(&mut ks, "HSET h a 1 b 2 c 3 d 4 e 5", 0);
        let q = |ks: &Keyspace| {
            crate::cmd::parse(
                "HRANDFIELD h -20"
                    .split(' ')
                    .map(bytes::Bytes::from)
                    .collect(),
            )
            .map(|r| match r {
                crate::cmd::Request::Data(c) if c.is_read() => c.query(ks, 0),
                _ => Reply::Nil,
            })
            .unwrap_or(Reply::Nil)
        };
        let first = q(&ks);
        assert_eq!(first, q(&ks));
        let Reply::Array(items) = first else { panic!() };
        assert_eq!(items.len(), 20);
    }

    #[test]
    fn hrandfield_positive_count_is_distinct() {
        let mut ks = Keyspace::default();
        run_line(&mut ks, "HSET h a 1 b 2 c 3 d 4 e 5", 0);
        let Reply::Array(items) = run_line(&mut ks, "HRANDFIELD h 3", 0) else {
            panic!()
        };
        assert_eq!(items.len(), 3);
        let mut d = items.clone();
        d.dedup();
        assert_eq!(d.len(), 3);
    }
}
