//! Sorted-set ranges: `ZRANGE key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset count]
//! [WITHSCORES]`, `ZREVRANGE key start stop [WITHSCORES]`, `ZRANGEBYSCORE key min max
//! [WITHSCORES] [LIMIT offset count]`, `ZREVRANGEBYSCORE key max min ...`, `ZRANGEBYLEX key
//! min max [LIMIT offset count]`, `ZREVRANGEBYLEX key max min ...` and `ZRANGESTORE dst src
//! min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]`, parsed as Redis 7.0's
//! `zrangeGenericCommand` does (same option rules, same error texts).

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::registry::flags::{READ, WRITE};
use crate::cmd::registry::{none, one, Replicated, Spec, Touches, ONE_KEY};
use crate::cmd::zset::{pair, parse_lex_range, parse_score_range, rank_span, store};
use crate::cmd::{Command, Ctx, Request};
use crate::resp::args::{parse_i64, syntax_error, NOT_INTEGER};
use crate::resp::{Args, Reply};
use crate::state::zset::{LexRange, ScoreRange};
use crate::state::{Keyspace, ZSet};

const G: &str = "sorted-set";

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new("zrange", -4, READ, ONE_KEY, parse_zrange)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key start stop sortby@(BYSCORE|BYLEX)? REV? offset_count@LIMIT={offset:integer count:integer}? WITHSCORES?").docs(
        "Return a range of sorted-set members, by rank, score or member",
        "1.2.0",
        G,
    ),
    Spec::new("zrevrange", -4, READ, ONE_KEY, parse_zrange)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key start:integer stop:integer WITHSCORES?").docs(
        "Return a range of sorted-set members by rank, highest score first",
        "1.2.0",
        G,
    ),
    Spec::new("zrangebyscore", -4, READ, ONE_KEY, parse_zrange)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key min:double max:double WITHSCORES? offset_count@LIMIT={offset:integer count:integer}?").docs(
        "Return the sorted-set members inside a score range",
        "1.0.5",
        G,
    ),
    Spec::new("zrevrangebyscore", -4, READ, ONE_KEY, parse_zrange)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key max:double min:double WITHSCORES? offset_count@LIMIT={offset:integer count:integer}?").docs(
        "Return the sorted-set members inside a score range, highest first",
        "2.2.0",
        G,
    ),
    Spec::new("zrangebylex", -4, READ, ONE_KEY, parse_zrange)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key min max offset_count@LIMIT={offset:integer count:integer}?").docs(
        "Return the sorted-set members inside a lexicographic range",
        "2.8.9",
        G,
    ),
    Spec::new("zrevrangebylex", -4, READ, ONE_KEY, parse_zrange)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key max min offset_count@LIMIT={offset:integer count:integer}?").docs(
        "Return the sorted-set members inside a lexicographic range, in reverse",
        "2.8.9",
        G,
    ),
    Spec::new("zrangestore", -5, WRITE, (1, 2, 1), parse_zrangestore)
        .key_specs("OW,update@i1/r0,1,0 RO,access@i2/r0,1,0")
        .args("dst:key src:key min max sortby@(BYSCORE|BYLEX)? REV? offset_count@LIMIT={offset:integer count:integer}?").docs(
        "Store a range of a sorted set in another key",
        "6.2.0",
        G,
    ),
];

/// What a range selects.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Selector {
    /// By rank: start, stop.
    Rank(i64, i64),
    /// By score.
    Score(ScoreRange),
    /// By member.
    Lex(LexRange),
}

/// A parsed range.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RangeSpec {
    /// What is selected.
    pub sel: Selector,
    /// Highest first.
    pub rev: bool,
    /// LIMIT offset count (BYSCORE and BYLEX only).
    pub limit: Option<(i64, i64)>,
    /// WITHSCORES.
    pub withscores: bool,
}

#[derive(PartialEq, Clone, Copy)]
enum Kind {
    Auto,
    Rank,
    Score,
    Lex,
}

/// Parses `min max [options]` as `zrangeGenericCommand` does, for the command `name`.
fn parse_spec(name: &str, args: &mut Args, store: bool) -> Result<RangeSpec, Reply> {
    let (mut kind, mut rev) = match name {
        "zrange" | "zrangestore" => (Kind::Auto, None),
        "zrevrange" => (Kind::Rank, Some(true)),
        "zrangebyscore" => (Kind::Score, Some(false)),
        "zrevrangebyscore" => (Kind::Score, Some(true)),
        "zrangebylex" => (Kind::Lex, Some(false)),
        _ => (Kind::Lex, Some(true)),
    };
    let (mut min, mut max) = (args.arg()?, args.arg()?);
    let opts = args.rest();
    let (mut withscores, mut limit) = (false, None);
    let mut j = 0;
    while j < opts.len() {
        let word = opts[j].to_ascii_uppercase();
        let left = opts.len() - j - 1;
        match word.as_slice() {
            b"WITHSCORES" if !store => withscores = true,
            b"LIMIT" if left >= 2 => {
                let off = parse_i64(&opts[j + 1]).ok_or_else(|| Reply::err(NOT_INTEGER))?;
                let cnt = parse_i64(&opts[j + 2]).ok_or_else(|| Reply::err(NOT_INTEGER))?;
                limit = Some((off, cnt));
                j += 2;
            }
            b"REV" if rev.is_none() => rev = Some(true),
            b"BYLEX" if kind == Kind::Auto => kind = Kind::Lex,
            b"BYSCORE" if kind == Kind::Auto => kind = Kind::Score,
            _ => return Err(syntax_error()),
        }
        j += 1;
    }
    let rev = rev.unwrap_or(false);
    if kind == Kind::Auto {
        kind = Kind::Rank;
    }
    if limit.is_some() && kind == Kind::Rank {
        return Err(Reply::err(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if withscores && kind == Kind::Lex {
        return Err(Reply::err(
            "ERR syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    if rev && kind != Kind::Rank {
        std::mem::swap(&mut min, &mut max);
    }
    let sel = match kind {
        Kind::Score => Selector::Score(parse_score_range(&min, &max)?),
        Kind::Lex => Selector::Lex(parse_lex_range(&min, &max)?),
        _ => {
            let start = parse_i64(&min).ok_or_else(|| Reply::err(NOT_INTEGER))?;
            let stop = parse_i64(&max).ok_or_else(|| Reply::err(NOT_INTEGER))?;
            Selector::Rank(start, stop)
        }
    };
    Ok(RangeSpec {
        sel,
        rev,
        limit,
        withscores,
    })
}

impl RangeSpec {
    /// The selected members and scores, in reply order.
    pub fn select<'a>(&self, z: &'a ZSet) -> Vec<(&'a Bytes, f64)> {
        let mut items: Vec<(&Bytes, f64)> = match &self.sel {
            Selector::Rank(a, b) => {
                let Some((a, b)) = rank_span(*a, *b, z.len()) else {
                    return Vec::new();
                };
                let n = b - a + 1;
                return if self.rev {
                    z.iter().rev().skip(a).take(n).collect()
                } else {
                    z.iter().skip(a).take(n).collect()
                };
            }
            Selector::Score(r) => z.by_score(r),
            Selector::Lex(r) => z.by_lex(r),
        };
        if self.rev {
            items.reverse();
        }
        if let Some((off, cnt)) = self.limit {
            // Redis: a negative offset selects nothing, a negative count means all.
            if off < 0 {
                return Vec::new();
            }
            let it = items.into_iter().skip(off as usize);
            items = if cnt < 0 {
                it.collect()
            } else {
                it.take(cnt as usize).collect()
            };
        }
        items
    }
}

/// A range read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZRange {
    /// The key.
    pub key: Bytes,
    /// The range.
    pub spec: RangeSpec,
}

/// Parses the ZRANGE family.
pub fn parse_zrange(args: &mut Args) -> Result<Request, Reply> {
    let name = args.name().to_string();
    let key = args.arg()?;
    let spec = parse_spec(&name, args, false)?;
    Ok(Request::Data(Command::ZRange(ZRange { key, spec })))
}

impl Replicated for ZRange {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((
            &[
                "zrange",
                "zrevrange",
                "zrangebyscore",
                "zrevrangebyscore",
                "zrangebylex",
                "zrevrangebylex",
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
        let z = match ks.get_zset(&self.key, now) {
            Err(e) => return e.into(),
            Ok(None) => return Reply::Array(vec![]),
            Ok(Some(z)) => z,
        };
        let items = self.spec.select(z);
        if self.spec.withscores {
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
}

/// ZRANGESTORE.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZRangeStore {
    /// The destination.
    pub dst: Bytes,
    /// The source.
    pub src: Bytes,
    /// The range.
    pub spec: RangeSpec,
}

/// Parses ZRANGESTORE.
pub fn parse_zrangestore(args: &mut Args) -> Result<Request, Reply> {
    let dst = args.arg()?;
    let src = args.arg()?;
    let spec = parse_spec("zrangestore", args, true)?;
    Ok(Request::Data(Command::ZRangeStore(ZRangeStore {
        dst,
        src,
        spec,
    })))
}

impl Replicated for ZRangeStore {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((
            &["zrangestore"],
            vec![self.dst.as_ref(), self.src.as_ref()],
            none(),
        ))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Stores the range (an empty one deletes the destination).
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let z: ZSet = match ks.get_zset(&self.src, ctx.now) {
            Err(e) => return e.into(),
            Ok(None) => ZSet::default(),
            Ok(Some(z)) => self
                .spec
                .select(z)
                .into_iter()
                .map(|(m, s)| (m.clone(), s))
                .collect(),
        };
        store(ks, &self.dst, z, ctx, "zrangestore")
    }
}
