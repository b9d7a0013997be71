//! Sorted sets, the single-key commands: `ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member
//! [score member ...]`, `ZINCRBY key increment member`, `ZREM key member [member ...]`,
//! `ZCARD key`, `ZSCORE key member`, `ZMSCORE key member [member ...]`, `ZRANK key member`,
//! `ZREVRANK key member`, `ZCOUNT key min max`, `ZLEXCOUNT key min max`,
//! `ZREMRANGEBYRANK key start stop`, `ZREMRANGEBYSCORE key min max`,
//! `ZREMRANGEBYLEX key min max`, `ZPOPMIN|ZPOPMAX key [count]`,
//! `ZMPOP numkeys key [key ...] MIN|MAX [COUNT count]`,
//! `ZRANDMEMBER key [count [WITHSCORES]]` and `ZSCAN key cursor [MATCH pattern] [COUNT n]`.
//!
//! Scores are replied as doubles ([`Reply::Double`]: a bulk string in RESP2, `,` in RESP3)
//! and WITHSCORES pairs as [`Reply::Pairs`], as Redis 7.0 does. The structure is
//! [`crate::state::ZSet`]; the range commands live in `zrange.rs`, the multi-key set
//! operations in `zsetop.rs`.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

pub use crate::algo::float::string2d as parse_float;
use crate::algo::float::strtod;
use crate::algo::rng::SplitMix64;
use crate::cmd::registry::flags::{READ, READ_FAST, WRITE_FAST, WRITE_GROW_FAST};
use crate::cmd::registry::{many, none, one, Replicated, Spec, Touches, NO_KEYS, ONE_KEY};
use crate::cmd::{Command, Ctx, Request};
use crate::resp::args::{parse_i64, syntax_error, NOT_INTEGER};
use crate::resp::{Args, Reply};
use crate::state::zset::{Float, LexBound, LexRange, ScoreBound, ScoreRange};
use crate::state::{notify, pattern, Event, Keyspace, Value, ZSet};

const G: &str = "sorted-set";
/// `write` alone (no `denyoom`, not fast).
pub const WRITE_SLOW: &[&str] = &["write"];
/// A write whose keys come from `numkeys`.
pub const WRITE_MOVABLE: &[&str] = &["write", "movablekeys"];

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new("zadd", -4, WRITE_GROW_FAST, ONE_KEY, parse_zadd)
        .key_specs("RW,update@i1/r0,1,0")
        .args("key:key condition@(NX|XX)? comparison@(GT|LT)? change@CH? increment@INCR? score_member@{score:double member}*").docs(
        "Add members to a sorted set, or update their scores",
        "1.2.0",
        G,
    ),
    Spec::new("zincrby", 4, WRITE_GROW_FAST, ONE_KEY, parse_zadd)
        .key_specs("RW,access,update@i1/r0,1,0")
        .args("key:key increment:integer member").docs(
        "Add to the score of a sorted-set member",
        "1.2.0",
        G,
    ),
    Spec::new("zrem", -3, WRITE_FAST, ONE_KEY, parse_zrem)
        .key_specs("RW,delete@i1/r0,1,0")
        .args("key:key member*").docs(
        "Remove members from a sorted set",
        "1.2.0",
        G,
    ),
    Spec::new("zcard", 2, READ_FAST, ONE_KEY, parse_read)
        .key_specs("RO@i1/r0,1,0")
        .args("key:key").docs(
        "Count the members of a sorted set",
        "1.2.0",
        G,
    ),
    Spec::new("zscore", 3, READ_FAST, ONE_KEY, parse_read)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key member").docs(
        "Return the score of a sorted-set member",
        "1.2.0",
        G,
    ),
    Spec::new("zmscore", -3, READ_FAST, ONE_KEY, parse_read)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key member*").docs(
        "Return the scores of several sorted-set members",
        "6.2.0",
        G,
    ),
    Spec::new("zrank", 3, READ_FAST, ONE_KEY, parse_read)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key member").docs(
        "Return a member's rank in a sorted set, lowest score first",
        "2.0.0",
        G,
    ),
    Spec::new("zrevrank", 3, READ_FAST, ONE_KEY, parse_read)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key member").docs(
        "Return a member's rank in a sorted set, highest score first",
        "2.0.0",
        G,
    ),
    Spec::new("zcount", 4, READ_FAST, ONE_KEY, parse_read)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key min:double max:double").docs(
        "Count the sorted-set members inside a score range",
        "2.0.0",
        G,
    ),
    Spec::new("zlexcount", 4, READ_FAST, ONE_KEY, parse_read)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key min max").docs(
        "Count the sorted-set members inside a lexicographic range",
        "2.8.9",
        G,
    ),
    Spec::new("zremrangebyrank", 4, WRITE_SLOW, ONE_KEY, parse_zremrange)
        .key_specs("RW,delete@i1/r0,1,0")
        .args("key:key start:integer stop:integer").docs(
        "Remove the sorted-set members inside a rank range",
        "2.0.0",
        G,
    ),
    Spec::new("zremrangebyscore", 4, WRITE_SLOW, ONE_KEY, parse_zremrange)
        .key_specs("RW,delete@i1/r0,1,0")
        .args("key:key min:double max:double").docs(
        "Remove the sorted-set members inside a score range",
        "1.2.0",
        G,
    ),
    Spec::new("zremrangebylex", 4, WRITE_SLOW, ONE_KEY, parse_zremrange)
        .key_specs("RW,delete@i1/r0,1,0")
        .args("key:key min max").docs(
        "Remove the sorted-set members inside a lexicographic range",
        "2.8.9",
        G,
    ),
    Spec::new("zpopmin", -2, WRITE_FAST, ONE_KEY, parse_zpop)
        .key_specs("RW,access,delete@i1/r0,1,0")
        .args("key:key count:integer?").docs(
        "Remove and return the lowest-scored members of a sorted set",
        "5.0.0",
        G,
    ),
    Spec::new("zpopmax", -2, WRITE_FAST, ONE_KEY, parse_zpop)
        .key_specs("RW,access,delete@i1/r0,1,0")
        .args("key:key count:integer?").docs(
        "Remove and return the highest-scored members of a sorted set",
        "5.0.0",
        G,
    ),
    Spec::new("zmpop", -4, WRITE_MOVABLE, NO_KEYS, parse_zmpop)
        .key_specs("RW,access,delete@i1/n0,1,1")
        .args("numkeys:integer key:key* where@(MIN|MAX) COUNT=count:integer?").docs(
        "Remove and return members from the first non-empty sorted set of several",
        "7.0.0",
        G,
    ),
    Spec::new("zrandmember", -2, READ, ONE_KEY, parse_read)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key options@{count:integer WITHSCORES?}?").docs(
        "Return random members of a sorted set",
        "6.2.0",
        G,
    ),
    Spec::new("zscan", -3, READ, ONE_KEY, parse_read)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key cursor:integer MATCH=pattern:pattern? COUNT=count:integer?").docs(
        "Iterate over the members and scores of a sorted set",
        "2.8.0",
        G,
    ),
];

/// Redis's reply for a score argument that is not a double.
pub const NOT_FLOAT: &str = "ERR value is not a valid float";
/// Redis's reply for a bad score range.
pub const RANGE_NOT_FLOAT: &str = "ERR min or max is not a float";
/// Redis's reply for a bad lex range.
pub const RANGE_NOT_LEX: &str = "ERR min or max not valid string range item";
/// Redis's reply when an increment makes a NaN.
pub const NAN_SCORE: &str = "ERR resulting score is not a number (NaN)";

/// Parses a score-range bound: `(x` exclusive, else inclusive (as `zslParseRange`).
pub fn parse_score_bound(b: &[u8]) -> Option<ScoreBound> {
    match b.strip_prefix(b"(") {
        Some(rest) => {
            // strtod without string2d's checks: an empty rest is 0, overflow is inf.
            let s = std::str::from_utf8(rest).ok()?.trim_start();
            let v = if s.is_empty() { 0.0 } else { strtod(s)? };
            Some(ScoreBound {
                value: Float(v),
                exclusive: true,
            })
        }
        None => parse_float(b).map(|v| ScoreBound {
            value: Float(v),
            exclusive: false,
        }),
    }
}

/// Parses a score range, or Redis's error.
pub fn parse_score_range(min: &[u8], max: &[u8]) -> Result<ScoreRange, Reply> {
    match (parse_score_bound(min), parse_score_bound(max)) {
        (Some(min), Some(max)) => Ok(ScoreRange { min, max }),
        _ => Err(Reply::err(RANGE_NOT_FLOAT)),
    }
}

/// Parses a lex-range bound (`-`, `+`, `[m`, `(m`).
pub fn parse_lex_bound(b: &Bytes) -> Option<LexBound> {
    match b.first()? {
        b'-' if b.len() == 1 => Some(LexBound::Min),
        b'+' if b.len() == 1 => Some(LexBound::Max),
        b'[' => Some(LexBound::Incl(b.slice(1..))),
        b'(' => Some(LexBound::Excl(b.slice(1..))),
        _ => None,
    }
}

/// Parses a lex range, or Redis's error.
pub fn parse_lex_range(min: &Bytes, max: &Bytes) -> Result<LexRange, Reply> {
    match (parse_lex_bound(min), parse_lex_bound(max)) {
        (Some(min), Some(max)) => Ok(LexRange { min, max }),
        _ => Err(Reply::err(RANGE_NOT_LEX)),
    }
}

fn long(b: &[u8]) -> Result<i64, Reply> {
    parse_i64(b).ok_or_else(|| Reply::err(NOT_INTEGER))
}

fn is_zset(v: &Value) -> bool {
    matches!(v, Value::ZSet(_))
}

fn new_zset() -> Value {
    Value::ZSet(Box::default())
}

/// The sorted set at `key` for change, created if `create` (WRONGTYPE for another type).
pub fn zset_mut<'a>(
    ks: &'a mut Keyspace,
    key: &Bytes,
    now: u64,
    create: bool,
) -> Result<Option<&'a mut ZSet>, Reply> {
    let empty = create.then_some(new_zset as fn() -> Value);
    match ks.value_mut(key, now, is_zset, empty) {
        Err(e) => Err(e.into()),
        Ok(Some(Value::ZSet(z))) => Ok(Some(z)),
        Ok(_) => Ok(None),
    }
}

/// Replaces `key` with `z` (deleting it if `z` is empty), with Redis's notifications
/// (`event`, e.g. `"zrangestore"`, or `del`); replies with the size.
pub fn store(ks: &mut Keyspace, key: &Bytes, z: ZSet, ctx: Ctx, event: &'static str) -> Reply {
    let n = z.len() as i64;
    let value = Value::ZSet(Box::new(z));
    if ks.store_result(key, value, ctx.revision, ctx.now, (notify::ZSET, event)) {
        ks.emit(Event::Touched(key.clone()));
    }
    Reply::Int(n)
}

/// A member and its score, as a reply pair.
pub fn pair(m: &Bytes, s: f64) -> (Reply, Reply) {
    (Reply::Bulk(m.clone()), Reply::Double(s))
}

/// ZADD and ZINCRBY.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZAdd {
    /// The key.
    pub key: Bytes,
    /// Score/member pairs, in argument order.
    pub pairs: Vec<(Float, Bytes)>,
    /// NX: only add new members.
    pub nx: bool,
    /// XX: only update existing members.
    pub xx: bool,
    /// GT: only update to a greater score.
    pub gt: bool,
    /// LT: only update to a lower score.
    pub lt: bool,
    /// CH: count changed members too.
    pub ch: bool,
    /// INCR (and ZINCRBY): add to the score, reply with the new score.
    pub incr: bool,
}

/// Parses ZADD and ZINCRBY.
pub fn parse_zadd(args: &mut Args) -> Result<Request, Reply> {
    let incrby = args.name() == "zincrby";
    let key = args.arg()?;
    let mut z = ZAdd {
        key,
        pairs: Vec::new(),
        nx: false,
        xx: false,
        gt: false,
        lt: false,
        ch: false,
        incr: incrby,
    };
    let mut rest = args.rest();
    if !incrby {
        let mut flags = 0;
        for a in &rest {
            match a.to_ascii_uppercase().as_slice() {
                b"NX" => z.nx = true,
                b"XX" => z.xx = true,
                b"GT" => z.gt = true,
                b"LT" => z.lt = true,
                b"CH" => z.ch = true,
                b"INCR" => z.incr = true,
                _ => break,
            }
            flags += 1;
        }
        rest.drain(..flags);
    }
    if rest.is_empty() || !rest.len().is_multiple_of(2) {
        return Err(syntax_error());
    }
    if z.nx && z.xx {
        return Err(Reply::err(
            "ERR XX and NX options at the same time are not compatible",
        ));
    }
    if ((z.gt || z.lt) && z.nx) || (z.gt && z.lt) {
        return Err(Reply::err(
            "ERR GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if z.incr && rest.len() > 2 {
        return Err(Reply::err(
            "ERR INCR option supports a single increment-element pair",
        ));
    }
    for p in rest.chunks(2) {
        let score = parse_float(&p[0]).ok_or_else(|| Reply::err(NOT_FLOAT))?;
        z.pairs.push((Float(score), p[1].clone()));
    }
    Ok(Request::Data(Command::ZAdd(z)))
}

impl Replicated for ZAdd {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["zadd", "zincrby", "geoadd"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Applies the additions (zsetAdd's rules, one pair at a time).
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let exists = match ks.get_zset(&self.key, ctx.now) {
            Err(e) => return e.into(),
            Ok(z) => z.is_some(),
        };
        if !exists && self.xx {
            return if self.incr { Reply::Nil } else { Reply::Int(0) };
        }
        let z = match zset_mut(ks, &self.key, ctx.now, true) {
            Err(e) => return e,
            Ok(Some(z)) => z,
            Ok(None) => return Reply::err("ERR internal: sorted set missing"),
        };
        let (mut added, mut updated, mut processed) = (0, 0, 0);
        let mut last = 0.0;
        let mut nan = false;
        for (Float(score), member) in &self.pairs {
            let mut score = *score;
            match z.score(member) {
                Some(_) if self.nx => continue,
                Some(cur) => {
                    if self.incr {
                        score += cur;
                        if score.is_nan() {
                            nan = true;
                            break;
                        }
                    }
                    if (self.lt && score >= cur) || (self.gt && score <= cur) {
                        continue;
                    }
                    last = score;
                    processed += 1;
                    if score != cur {
                        z.insert(member.clone(), score);
                        updated += 1;
                    }
                }
                None if self.xx => continue,
                None => {
                    z.insert(member.clone(), score);
                    added += 1;
                    processed += 1;
                    last = score;
                }
            }
        }
        if added > 0 || updated > 0 {
            let event = if self.incr { "zincr" } else { "zadd" };
            ks.notify(notify::ZSET, event, &self.key);
        }
        ks.drop_if_empty(&self.key, ctx.now);
        if added > 0 {
            // Wakes clients blocked in BZPOPMIN/BZPOPMAX/BZMPOP on the key.
            ks.emit(Event::Touched(self.key.clone()));
        }
        if nan {
            return Reply::err(NAN_SCORE);
        }
        match (self.incr, processed > 0) {
            (true, true) => Reply::Double(last),
            (true, false) => Reply::Nil,
            (false, _) if self.ch => Reply::Int(added + updated),
            (false, _) => Reply::Int(added),
        }
    }
}

/// ZREM.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZRem {
    /// The key.
    pub key: Bytes,
    /// The members.
    pub members: Vec<Bytes>,
}

/// Parses ZREM.
pub fn parse_zrem(args: &mut Args) -> Result<Request, Reply> {
    let key = args.arg()?;
    Ok(Request::Data(Command::ZRem(ZRem {
        key,
        members: args.rest(),
    })))
}

impl Replicated for ZRem {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["zrem"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Removes the members; an emptied set is removed.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        match ks.get_zset(&self.key, ctx.now) {
            Err(e) => return e.into(),
            Ok(None) => return Reply::Int(0),
            Ok(Some(z)) if !self.members.iter().any(|m| z.score(m).is_some()) => {
                return Reply::Int(0)
            }
            Ok(Some(_)) => {}
        }
        let mut removed = 0;
        if let Ok(Some(z)) = zset_mut(ks, &self.key, ctx.now, false) {
            for m in &self.members {
                removed += i64::from(z.remove(m).is_some());
            }
        }
        ks.notify(notify::ZSET, "zrem", &self.key);
        ks.drop_if_empty(&self.key, ctx.now);
        Reply::Int(removed)
    }
}

/// Which members ZREMRANGEBY* removes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RemRange {
    /// By rank (start, stop; negative counts from the end).
    Rank(i64, i64),
    /// By score.
    Score(ScoreRange),
    /// By member.
    Lex(LexRange),
}

/// ZREMRANGEBYRANK, ZREMRANGEBYSCORE and ZREMRANGEBYLEX.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZRemRange {
    /// The key.
    pub key: Bytes,
    /// The range.
    pub range: RemRange,
}

/// Parses ZREMRANGEBY*.
pub fn parse_zremrange(args: &mut Args) -> Result<Request, Reply> {
    let name = args.name().to_string();
    let key = args.arg()?;
    let (min, max) = (args.arg()?, args.arg()?);
    let range = match name.as_str() {
        "zremrangebyrank" => RemRange::Rank(long(&min)?, long(&max)?),
        "zremrangebyscore" => RemRange::Score(parse_score_range(&min, &max)?),
        _ => RemRange::Lex(parse_lex_range(&min, &max)?),
    };
    Ok(Request::Data(Command::ZRemRange(ZRemRange { key, range })))
}

/// Redis's rank-range clamp: the first and last index inside `0..len`, or None if empty.
pub fn rank_span(start: i64, stop: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let mut start = if start < 0 { len + start } else { start };
    let mut stop = if stop < 0 { len + stop } else { stop };
    start = start.max(0);
    if start > stop || start >= len {
        return None;
    }
    stop = stop.min(len - 1);
    Some((start as usize, stop as usize))
}

impl Replicated for ZRemRange {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((
            &["zremrangebyrank", "zremrangebyscore", "zremrangebylex"],
            one(&self.key),
            none(),
        ))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Removes the range; an emptied set is removed.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let doomed: Vec<Bytes> = match ks.get_zset(&self.key, ctx.now) {
            Err(e) => return e.into(),
            Ok(None) => return Reply::Int(0),
            Ok(Some(z)) => match &self.range {
                RemRange::Rank(a, b) => match rank_span(*a, *b, z.len()) {
                    None => Vec::new(),
                    Some((a, b)) => z
                        .iter()
                        .skip(a)
                        .take(b - a + 1)
                        .map(|(m, _)| m.clone())
                        .collect(),
                },
                RemRange::Score(r) => z.by_score(r).into_iter().map(|(m, _)| m.clone()).collect(),
                RemRange::Lex(r) => z.by_lex(r).into_iter().map(|(m, _)| m.clone()).collect(),
            },
        };
        if doomed.is_empty() {
            return Reply::Int(0);
        }
        if let Ok(Some(z)) = zset_mut(ks, &self.key, ctx.now, false) {
            for m in &doomed {
                z.remove(m);
            }
        }
        let event = match self.range {
            RemRange::Rank(..) => "zremrangebyrank",
            RemRange::Score(_) => "zremrangebyscore",
            RemRange::Lex(_) => "zremrangebylex",
        };
        ks.notify(notify::ZSET, event, &self.key);
        ks.drop_if_empty(&self.key, ctx.now);
        Reply::Int(doomed.len() as i64)
    }
}

/// Which reply a pop gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PopForm {
    /// ZPOPMIN/ZPOPMAX without a count: a flat [member, score] (or an empty array).
    One,
    /// ZPOPMIN/ZPOPMAX with a count: pairs (nested in RESP3).
    Count,
    /// ZMPOP: [key, [[member, score], ...]] or a null array.
    Multi,
}

/// ZPOPMIN, ZPOPMAX and ZMPOP.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZPop {
    /// The keys, tried in order (one for ZPOPMIN/ZPOPMAX).
    pub keys: Vec<Bytes>,
    /// True to pop the highest scores.
    pub max: bool,
    /// How many to pop.
    pub count: u64,
    /// The reply shape.
    pub form: PopForm,
}

/// Parses ZPOPMIN and ZPOPMAX.
pub fn parse_zpop(args: &mut Args) -> Result<Request, Reply> {
    let max = args.name() == "zpopmax";
    let key = args.arg()?;
    let count = match args.remaining() {
        0 => None,
        1 => match parse_i64(&args.arg()?) {
            Some(n) if n >= 0 => Some(n as u64),
            _ => return Err(Reply::err("ERR value is out of range, must be positive")),
        },
        _ => return Err(syntax_error()),
    };
    Ok(Request::Data(Command::ZPop(ZPop {
        keys: vec![key],
        max,
        count: count.unwrap_or(1),
        form: if count.is_some() {
            PopForm::Count
        } else {
            PopForm::One
        },
    })))
}

/// Parses `numkeys key [key ...] MIN|MAX [COUNT count]` (ZMPOP and BZMPOP after the timeout).
pub fn parse_mpop_tail(args: &mut Args) -> Result<(Vec<Bytes>, bool, u64), Reply> {
    const NUMKEYS: &str = "ERR numkeys should be greater than 0";
    let n = parse_i64(&args.arg()?).ok_or_else(|| Reply::err(NUMKEYS))?;
    if n < 1 {
        return Err(Reply::err(NUMKEYS));
    }
    if n as u64 >= args.remaining() as u64 {
        return Err(syntax_error());
    }
    let keys: Vec<Bytes> = (0..n).map(|_| args.arg()).collect::<Result<_, _>>()?;
    let max = match args.next_keyword()?.as_str() {
        "MIN" => false,
        "MAX" => true,
        _ => return Err(syntax_error()),
    };
    let mut count = None;
    while args.remaining() > 0 {
        let opt = args.next_keyword()?;
        if opt == "COUNT" && count.is_none() && args.remaining() > 0 {
            const COUNT: &str = "ERR count should be greater than 0";
            let c = parse_i64(&args.arg()?).ok_or_else(|| Reply::err(COUNT))?;
            if c < 1 {
                return Err(Reply::err(COUNT));
            }
            count = Some(c as u64);
        } else {
            return Err(syntax_error());
        }
    }
    Ok((keys, max, count.unwrap_or(1)))
}

/// Parses ZMPOP.
pub fn parse_zmpop(args: &mut Args) -> Result<Request, Reply> {
    let (keys, max, count) = parse_mpop_tail(args)?;
    Ok(Request::Data(Command::ZPop(ZPop {
        keys,
        max,
        count,
        form: PopForm::Multi,
    })))
}

impl ZPop {
    /// The first key holding a sorted set, or WRONGTYPE for a key of another type met first.
    pub fn first_key(&self, ks: &Keyspace, now: u64) -> Result<Option<Bytes>, Reply> {
        for k in &self.keys {
            match ks.get_zset(k, now) {
                Err(e) => return Err(e.into()),
                Ok(Some(_)) => return Ok(Some(k.clone())),
                Ok(None) => {}
            }
        }
        Ok(None)
    }

    /// Pops from `key` (a live sorted set): the members and scores, in pop order.
    pub fn pop_from(&self, ks: &mut Keyspace, key: &Bytes, now: u64) -> Vec<(Bytes, f64)> {
        let mut out = Vec::new();
        if let Ok(Some(z)) = zset_mut(ks, key, now, false) {
            let n = (self.count as usize).min(z.len());
            let picked: Vec<(Bytes, f64)> = if self.max {
                z.iter()
                    .rev()
                    .take(n)
                    .map(|(m, s)| (m.clone(), s))
                    .collect()
            } else {
                z.iter().take(n).map(|(m, s)| (m.clone(), s)).collect()
            };
            for (m, _) in &picked {
                z.remove(m);
            }
            out = picked;
        }
        if !out.is_empty() {
            let event = if self.max { "zpopmax" } else { "zpopmin" };
            ks.notify(notify::ZSET, event, key);
        }
        ks.drop_if_empty(key, now);
        out
    }
}

impl Replicated for ZPop {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["zpopmin", "zpopmax", "zmpop"], many(&self.keys), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Pops from the first non-empty key.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let key = match self.first_key(ks, ctx.now) {
            Err(e) => return e,
            Ok(_) if self.count == 0 => return Reply::Array(vec![]),
            Ok(None) if self.form == PopForm::Multi => return Reply::NilArray,
            Ok(None) => return Reply::Array(vec![]),
            Ok(Some(k)) => k,
        };
        let popped = self.pop_from(ks, &key, ctx.now);
        let pairs: Vec<(Reply, Reply)> = popped.iter().map(|(m, s)| pair(m, *s)).collect();
        match self.form {
            PopForm::One => Reply::Array(pairs.into_iter().flat_map(|(m, s)| [m, s]).collect()),
            PopForm::Count => Reply::Pairs(pairs),
            PopForm::Multi => Reply::Array(vec![
                Reply::Bulk(key),
                Reply::Array(
                    pairs
                        .into_iter()
                        .map(|(m, s)| Reply::Array(vec![m, s]))
                        .collect(),
                ),
            ]),
        }
    }
}

/// A read of one sorted set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ZReadOp {
    /// ZCARD.
    Card,
    /// ZSCORE.
    Score(Bytes),
    /// ZMSCORE.
    MScore(Vec<Bytes>),
    /// ZRANK (false) or ZREVRANK (true).
    Rank(Bytes, bool),
    /// ZCOUNT.
    Count(ScoreRange),
    /// ZLEXCOUNT.
    LexCount(LexRange),
    /// ZRANDMEMBER without a count.
    RandOne,
    /// ZRANDMEMBER with a count (negative: repeats allowed) and WITHSCORES.
    Rand(i64, bool),
    /// ZSCAN: cursor, then the options (parsed at query time: Redis checks the key's type
    /// before it parses them).
    Scan(u64, Vec<Bytes>),
}

/// A read-only single-key sorted-set command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZRead {
    /// The key.
    pub key: Bytes,
    /// What to read.
    pub op: ZReadOp,
}

/// Parses the single-key reads.
pub fn parse_read(args: &mut Args) -> Result<Request, Reply> {
    let name = args.name().to_string();
    let key = args.arg()?;
    let op = match name.as_str() {
        "zcard" => ZReadOp::Card,
        "zscore" => ZReadOp::Score(args.arg()?),
        "zmscore" => ZReadOp::MScore(args.rest()),
        "zrank" => ZReadOp::Rank(args.arg()?, false),
        "zrevrank" => ZReadOp::Rank(args.arg()?, true),
        "zcount" => ZReadOp::Count(parse_score_range(&args.arg()?, &args.arg()?)?),
        "zlexcount" => ZReadOp::LexCount(parse_lex_range(&args.arg()?, &args.arg()?)?),
        "zrandmember" => parse_rand(args)?,
        _ => {
            let c = args.arg()?;
            let cursor = std::str::from_utf8(&c)
                .ok()
                .and_then(|s| s.parse::<u64>().ok())
                .ok_or_else(|| Reply::err("ERR invalid cursor"))?;
            ZReadOp::Scan(cursor, args.rest())
        }
    };
    Ok(Request::Data(Command::ZRead(ZRead { key, op })))
}

fn parse_rand(args: &mut Args) -> Result<ZReadOp, Reply> {
    if args.remaining() == 0 {
        return Ok(ZReadOp::RandOne);
    }
    let n = long(&args.arg()?)?;
    if n == i64::MIN {
        return Err(Reply::err(
            // Redis's text, typo included.
            "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        ));
    }
    let withscores = match args.remaining() {
        0 => false,
        1 if args.next_keyword()? == "WITHSCORES" => true,
        _ => return Err(syntax_error()),
    };
    if withscores && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&n) {
        return Err(Reply::err("ERR value is out of range"));
    }
    Ok(ZReadOp::Rand(n, withscores))
}

/// ZRANDMEMBER's generator: SplitMix64 seeded from the keyspace's revision (xored with the
/// golden ratio), so every replica draws the same members; it picks with
/// [`SplitMix64::below_mod`].
fn rng(seed: u64) -> SplitMix64 {
    SplitMix64::new(seed ^ crate::algo::rng::GOLDEN)
}

fn members_reply(items: Vec<(&Bytes, f64)>, withscores: bool) -> Reply {
    if withscores {
        Reply::Pairs(items.into_iter().map(|(m, s)| pair(m, s)).collect())
    } else {
        Reply::Array(
            items
                .into_iter()
                .map(|(m, _)| Reply::Bulk(m.clone()))
                .collect(),
        )
    }
}

fn rand_members(z: &ZSet, n: i64, withscores: bool, seed: u64) -> Reply {
    let all: Vec<(&Bytes, f64)> = z.iter().collect();
    let mut rng = rng(seed);
    let picked: Vec<(&Bytes, f64)> = if n < 0 {
        (0..n.unsigned_abs())
            .map(|_| all[rng.below_mod(all.len())])
            .collect()
    } else if n as usize >= all.len() {
        // The whole set, highest score first, as Redis replies it.
        all.into_iter().rev().collect()
    } else {
        // A partial Fisher-Yates shuffle: `n` distinct members in random order.
        let mut pool = all;
        for i in 0..n as usize {
            let j = i + rng.below_mod(pool.len() - i);
            pool.swap(i, j);
        }
        pool.truncate(n as usize);
        pool
    };
    members_reply(picked, withscores)
}

/// ZSCAN: a small set (Redis's listpack) is returned whole with cursor 0; a larger one in
/// steps of COUNT members, in score order, the cursor being the next position.
fn scan(z: &ZSet, cursor: u64, opts: &[Bytes]) -> Reply {
    let mut count = 10usize;
    let mut pat: Option<&Bytes> = None;
    let mut i = 0;
    while i < opts.len() {
        let word = opts[i].to_ascii_uppercase();
        let value = opts.get(i + 1);
        match (word.as_slice(), value) {
            (b"COUNT", Some(v)) => match parse_i64(v) {
                None => return Reply::err(NOT_INTEGER),
                Some(n) if n < 1 => return Reply::err("ERR syntax error"),
                Some(n) => count = n as usize,
            },
            (b"MATCH", Some(v)) => pat = Some(v),
            _ => return Reply::err("ERR syntax error"),
        }
        i += 2;
    }
    let small = z.len() <= 128 && z.iter().all(|(m, _)| m.len() <= 64);
    let (from, take) = if small {
        (0, z.len())
    } else {
        (cursor as usize, count)
    };
    let window: Vec<(&Bytes, f64)> = z.iter().skip(from).take(take).collect();
    let next = if small || from + take >= z.len() {
        0
    } else {
        from + take
    };
    let mut items = Vec::new();
    for (m, s) in window {
        if pat.is_none_or(|p| pattern::matches(p, m)) {
            items.push(Reply::Bulk(m.clone()));
            items.push(Reply::bulk(crate::resp::frame::format_double(s)));
        }
    }
    Reply::Array(vec![Reply::text(&next.to_string()), Reply::Array(items)])
}

impl Replicated for ZRead {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((
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
            one(&self.key),
            none(),
        ))
    }

    fn is_read(&self) -> bool {
        true
    }

    /// Answers the read at `now`.
    fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        let empty = ZSet::default();
        let z = match ks.get_zset(&self.key, now) {
            Err(e) => return e.into(),
            Ok(None) => match &self.op {
                ZReadOp::RandOne => return Reply::Nil,
                ZReadOp::Rand(..) => return Reply::Array(vec![]),
                ZReadOp::Scan(..) => {
                    return Reply::Array(vec![Reply::text("0"), Reply::Array(vec![])])
                }
                _ => &empty,
            },
            Ok(Some(z)) => z,
        };
        let score = |m: &Bytes| z.score(m).map_or(Reply::Nil, Reply::Double);
        match &self.op {
            ZReadOp::Card => Reply::Int(z.len() as i64),
            ZReadOp::Score(m) => score(m),
            ZReadOp::MScore(ms) => Reply::Array(ms.iter().map(score).collect()),
            ZReadOp::Rank(m, rev) => match z.rank(m) {
                None => Reply::Nil,
                Some(r) if *rev => Reply::Int((z.len() - 1 - r) as i64),
                Some(r) => Reply::Int(r as i64),
            },
            ZReadOp::Count(r) => Reply::Int(z.by_score(r).len() as i64),
            ZReadOp::LexCount(r) => Reply::Int(z.by_lex(r).len() as i64),
            ZReadOp::RandOne => {
                let mut rng = rng(crate::cmd::draw::seed(ks));
                let i = rng.below_mod(z.len().max(1));
                z.iter()
                    .nth(i)
                    .map_or(Reply::Nil, |(m, _)| Reply::Bulk(m.clone()))
            }
            ZReadOp::Rand(n, ws) => rand_members(z, *n, *ws, crate::cmd::draw::seed(ks)),
            ZReadOp::Scan(cursor, opts) => scan(z, *cursor, opts),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::run_line;

    #[test]
    fn floats_parse_like_string2d() {
        assert_eq!(parse_float(b"1.5"), Some(1.5));
        assert_eq!(parse_float(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_float(b"+Inf"), Some(f64::INFINITY));
        assert_eq!(parse_float(b"1e400"), None);
        assert_eq!(parse_float(b"1e-400"), None);
        assert_eq!(parse_float(b"nan"), None);
        assert_eq!(parse_float(b" 1"), None);
        assert_eq!(parse_float(b"1 "), None);
        assert_eq!(parse_float(b""), None);
        assert_eq!(parse_float(b"0"), Some(0.0));
        assert_eq!(parse_float(b".5"), Some(0.5));
        let b = parse_score_bound(b"(").unwrap();
        assert!(b.exclusive && b.value.0 == 0.0);
    }

    #[test]
    fn zadd_options() {
        let mut ks = Keyspace::default();
        assert_eq!(run_line(&mut ks, "ZADD z 1 a 2 b", 0), Reply::Int(2));
        assert_eq!(run_line(&mut ks, "ZADD z XX CH 5 a 3 c", 0), Reply::Int(1));
        assert_eq!(run_line(&mut ks, "ZADD z GT CH 1 a", 0), Reply::Int(0));
        assert_eq!(run_line(&mut ks, "ZADD z INCR 1 a", 0), Reply::Double(6.0));
        assert_eq!(run_line(&mut ks, "ZADD z NX INCR 1 a", 0), Reply::Nil);
        assert_eq!(run_line(&mut ks, "ZADD z 2 b 2", 0), syntax_error());
        assert_eq!(
            run_line(&mut ks, "ZADD z INCR inf x", 0),
            Reply::Double(f64::INFINITY)
        );
        assert_eq!(
            run_line(&mut ks, "ZINCRBY z -inf x", 0),
            Reply::err(NAN_SCORE)
        );
        assert_eq!(run_line(&mut ks, "ZCARD z", 0), Reply::Int(3));
        assert_eq!(run_line(&mut ks, "ZREM z a b x", 0), Reply::Int(3));
        assert_eq!(run_line(&mut ks, "EXISTS z", 0), Reply::Int(0));
    }

    #[test]
    fn random_draws_are_deterministic() {
        let mut a = Keyspace::default();
        run_line(&mut a, "ZADD z 1 a 2 b 3 c 4 d 5 e", 0);
        let b = a.clone();
        let line = "ZRANDMEMBER z -7";
        let mut a2 = a.clone();
        let mut b2 = b.clone();
        assert_eq!(run_line(&mut a2, line, 0), run_line(&mut b2, line, 0));
        let Reply::Array(items) = run_line(&mut a2, "ZRANDMEMBER z 3", 0) else {
            panic!()
        };
        let mut names: Vec<_> = items.iter().map(|r| format!("{r:?}")).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 3);
    }
}
