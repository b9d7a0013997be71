//! Sorted-set algebra: `ZINTER|ZUNION numkeys key [key ...] [WEIGHTS w ...]
//! [AGGREGATE SUM|MIN|MAX] [WITHSCORES]`, `ZDIFF numkeys key [key ...] [WITHSCORES]`,
//! `ZINTERSTORE|ZUNIONSTORE|ZDIFFSTORE dst numkeys key [key ...] [...]` and
//! `ZINTERCARD numkeys key [key ...] [LIMIT limit]`, as Redis 7.0's
//! `zunionInterDiffGenericCommand`: inputs are checked for type before the options are
//! parsed (so WRONGTYPE wins over a bad option), missing keys are empty, NaN products and
//! sums count as 0, and inter and union visit their inputs smallest first.
//!
//! Redis also accepts plain sets as inputs (every member scoring 1); see [`source`].

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::registry::{many, none, Replicated, Spec, Touches, NO_KEYS};
use crate::cmd::zset::{pair, parse_float, store};
use crate::cmd::{Command, Ctx, Request};
use crate::resp::args::{parse_i64, syntax_error, NOT_INTEGER};
use crate::resp::{Args, Reply};
use crate::state::{Keyspace, Value, ZSet};

const G: &str = "sorted-set";
const READ_MOVABLE: &[&str] = &["readonly", "movablekeys"];
const WRITE_MOVABLE: &[&str] = &["write", "denyoom", "movablekeys"];

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new("zinter", -3, READ_MOVABLE, NO_KEYS, parse_op)
        .key_specs("RO,access@i1/n0,1,1")
        .args("numkeys:integer key:key* WEIGHTS=weight:integer?* aggregate@AGGREGATE=(SUM|MIN|MAX)? WITHSCORES?").docs(
        "Return the intersection of sorted sets",
        "6.2.0",
        G,
    ),
    Spec::new("zunion", -3, READ_MOVABLE, NO_KEYS, parse_op)
        .key_specs("RO,access@i1/n0,1,1")
        .args("numkeys:integer key:key* WEIGHTS=weight:integer?* aggregate@AGGREGATE=(SUM|MIN|MAX)? WITHSCORES?").docs(
        "Return the union of sorted sets",
        "6.2.0",
        G,
    ),
    Spec::new("zdiff", -3, READ_MOVABLE, NO_KEYS, parse_op)
        .key_specs("RO,access@i1/n0,1,1")
        .args("numkeys:integer key:key* WITHSCORES?").docs(
        "Return the difference between the first sorted set and the others",
        "6.2.0",
        G,
    ),
    Spec::new("zinterstore", -4, WRITE_MOVABLE, (1, 1, 1), parse_store)
        .key_specs("OW,update@i1/r0,1,0 RO,access@i2/n0,1,1")
        .args("destination:key numkeys:integer key:key* WEIGHTS=weight:integer?* aggregate@AGGREGATE=(SUM|MIN|MAX)?").docs(
        "Store the intersection of sorted sets",
        "2.0.0",
        G,
    ),
    Spec::new("zunionstore", -4, WRITE_MOVABLE, (1, 1, 1), parse_store)
        .key_specs("OW,update@i1/r0,1,0 RO,access@i2/n0,1,1")
        .args("destination:key numkeys:integer key:key* WEIGHTS=weight:integer?* aggregate@AGGREGATE=(SUM|MIN|MAX)?").docs(
        "Store the union of sorted sets",
        "2.0.0",
        G,
    ),
    Spec::new("zdiffstore", -4, WRITE_MOVABLE, (1, 1, 1), parse_store)
        .key_specs("OW,update@i1/r0,1,0 RO,access@i2/n0,1,1")
        .args("destination:key numkeys:integer key:key*").docs(
        "Store the difference between the first sorted set and the others",
        "6.2.0",
        G,
    ),
    Spec::new("zintercard", -3, READ_MOVABLE, NO_KEYS, parse_op)
        .key_specs("RO,access@i1/n0,1,1")
        .args("numkeys:integer key:key* LIMIT=limit:integer?").docs(
        "Count the members of the intersection of sorted sets",
        "7.0.0",
        G,
    ),
];

/// Which operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SetOp {
    /// Intersection.
    Inter,
    /// Union.
    Union,
    /// Difference.
    Diff,
}

/// The operation's inputs and options, as given (options are parsed when applied, after
/// the inputs' types are checked, as Redis does).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpSpec {
    /// The operation.
    pub op: SetOp,
    /// The command's name (for its error texts).
    pub name: String,
    /// The input keys.
    pub keys: Vec<Bytes>,
    /// The arguments after the keys.
    pub opts: Vec<Bytes>,
    /// ZINTERCARD.
    pub card_only: bool,
    /// A store variant (no WITHSCORES).
    pub store: bool,
}

#[derive(Clone, Copy, PartialEq)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

struct Options {
    weights: Vec<f64>,
    aggregate: Aggregate,
    withscores: bool,
    limit: u64,
}

/// Parses `numkeys key [key ...] rest...` into the keys and the rest.
fn parse_keys(name: &str, args: &mut Args) -> Result<(Vec<Bytes>, Vec<Bytes>), Reply> {
    let n = parse_i64(&args.arg()?).ok_or_else(|| Reply::err(NOT_INTEGER))?;
    if n < 1 {
        return Err(Reply::err(format!(
            "ERR at least 1 input key is needed for '{name}' command"
        )));
    }
    if n as u64 > args.remaining() as u64 {
        return Err(syntax_error());
    }
    let mut rest = args.rest();
    let opts = rest.split_off(n as usize);
    Ok((rest, opts))
}

fn spec(name: &str, args: &mut Args, store: bool) -> Result<OpSpec, Reply> {
    let (keys, opts) = parse_keys(name, args)?;
    let op = match name {
        "zinter" | "zinterstore" | "zintercard" => SetOp::Inter,
        "zunion" | "zunionstore" => SetOp::Union,
        _ => SetOp::Diff,
    };
    Ok(OpSpec {
        op,
        name: name.to_string(),
        keys,
        opts,
        card_only: name == "zintercard",
        store,
    })
}

/// Parses ZINTER, ZUNION, ZDIFF and ZINTERCARD.
pub fn parse_op(args: &mut Args) -> Result<Request, Reply> {
    let name = args.name().to_string();
    Ok(Request::Data(Command::ZSetOp(ZSetOp(spec(
        &name, args, false,
    )?))))
}

/// Parses ZINTERSTORE, ZUNIONSTORE and ZDIFFSTORE.
pub fn parse_store(args: &mut Args) -> Result<Request, Reply> {
    let name = args.name().to_string();
    let dst = args.arg()?;
    let spec = spec(&name, args, true)?;
    Ok(Request::Data(Command::ZSetOpStore(ZSetOpStore {
        dst,
        spec,
    })))
}

/// The members and scores of an input value, or None for a type Redis refuses. Redis also
/// takes a plain set here (every member scoring 1): a `Value::Set` arm belongs here.
fn source(v: &Value) -> Option<Vec<(Bytes, f64)>> {
    match v {
        Value::ZSet(z) => Some(z.iter().map(|(m, s)| (m.clone(), s)).collect()),
        // Redis takes a plain set's members with score 1.
        Value::Set(s) => Some(s.iter().map(|m| (m.clone(), 1.0)).collect()),
        _ => None,
    }
}

impl OpSpec {
    fn options(&self) -> Result<Options, Reply> {
        let n = self.keys.len();
        let mut o = Options {
            weights: vec![1.0; n],
            aggregate: Aggregate::Sum,
            withscores: false,
            limit: 0,
        };
        let a = &self.opts;
        let mut j = 0;
        while j < a.len() {
            let left = a.len() - j;
            let word = a[j].to_ascii_uppercase();
            let algebra = self.op != SetOp::Diff && !self.card_only;
            match word.as_slice() {
                b"WEIGHTS" if algebra && left > n => {
                    for (w, raw) in o.weights.iter_mut().zip(&a[j + 1..]) {
                        *w = parse_float(raw)
                            .ok_or_else(|| Reply::err("ERR weight value is not a float"))?;
                    }
                    j += 1 + n;
                }
                b"AGGREGATE" if algebra && left >= 2 => {
                    o.aggregate = match a[j + 1].to_ascii_uppercase().as_slice() {
                        b"SUM" => Aggregate::Sum,
                        b"MIN" => Aggregate::Min,
                        b"MAX" => Aggregate::Max,
                        _ => return Err(syntax_error()),
                    };
                    j += 2;
                }
                b"WITHSCORES" if !self.store && !self.card_only => {
                    o.withscores = true;
                    j += 1;
                }
                b"LIMIT" if self.card_only && left >= 2 => {
                    const NEG: &str = "ERR LIMIT can't be negative";
                    let l = parse_i64(&a[j + 1]).ok_or_else(|| Reply::err(NEG))?;
                    if l < 0 {
                        return Err(Reply::err(NEG));
                    }
                    o.limit = l as u64;
                    j += 2;
                }
                _ => return Err(syntax_error()),
            }
        }
        Ok(o)
    }

    /// Computes the result, or the reply Redis gives instead.
    fn compute(&self, ks: &Keyspace, now: u64) -> Result<(ZSet, Options, usize), Reply> {
        let mut inputs = Vec::with_capacity(self.keys.len());
        for k in &self.keys {
            match ks.get(k, now) {
                None => inputs.push(Vec::new()),
                Some(e) => match source(&e.value) {
                    Some(items) => inputs.push(items),
                    None => return Err(Reply::err(crate::cmd::WRONGTYPE)),
                },
            }
        }
        let o = self.options()?;
        let mut srcs: Vec<(Vec<(Bytes, f64)>, f64)> =
            inputs.into_iter().zip(o.weights.iter().copied()).collect();
        if self.op != SetOp::Diff {
            // Smallest first (a stable sort: equal sizes keep argument order).
            srcs.sort_by_key(|(items, _)| items.len());
        }
        let lookup: Vec<ZSet> = srcs
            .iter()
            .map(|(items, _)| items.iter().cloned().collect())
            .collect();
        let agg = |acc: &mut f64, v: f64| match o.aggregate {
            Aggregate::Sum => {
                *acc += v;
                if acc.is_nan() {
                    *acc = 0.0;
                }
            }
            Aggregate::Min => {
                if v < *acc {
                    *acc = v;
                }
            }
            Aggregate::Max => {
                if v > *acc {
                    *acc = v;
                }
            }
        };
        let mut out = ZSet::default();
        let mut card = 0usize;
        match self.op {
            SetOp::Inter => {
                let (first, w0) = &srcs[0];
                'members: for (m, s) in first {
                    let mut score = w0 * s;
                    if score.is_nan() {
                        score = 0.0;
                    }
                    for (i, (_, w)) in srcs.iter().enumerate().skip(1) {
                        match lookup[i].score(m) {
                            Some(v) => agg(&mut score, v * w),
                            None => continue 'members,
                        }
                    }
                    if self.card_only {
                        card += 1;
                        if o.limit > 0 && card as u64 >= o.limit {
                            break;
                        }
                    } else {
                        out.insert(m.clone(), score);
                    }
                }
            }
            SetOp::Union => {
                let mut acc: std::collections::BTreeMap<Bytes, f64> = Default::default();
                for (items, w) in &srcs {
                    for (m, s) in items {
                        let mut score = w * s;
                        if score.is_nan() {
                            score = 0.0;
                        }
                        match acc.get_mut(m) {
                            Some(cur) => agg(cur, score),
                            None => {
                                acc.insert(m.clone(), score);
                            }
                        }
                    }
                }
                out = acc.into_iter().collect();
            }
            SetOp::Diff => {
                for (m, s) in &srcs[0].0 {
                    if !lookup[1..].iter().any(|z| z.score(m).is_some()) {
                        out.insert(m.clone(), *s);
                    }
                }
            }
        }
        Ok((out, o, card))
    }
}

/// ZINTER, ZUNION, ZDIFF and ZINTERCARD.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZSetOp(pub OpSpec);

impl Replicated for ZSetOp {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((
            &["zinter", "zunion", "zdiff", "zintercard"],
            many(&self.0.keys),
            none(),
        ))
    }

    fn is_read(&self) -> bool {
        true
    }

    /// Answers the read at `now`.
    fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        let (z, o, card) = match self.0.compute(ks, now) {
            Err(e) => return e,
            Ok(r) => r,
        };
        if self.0.card_only {
            return Reply::Int(card as i64);
        }
        if o.withscores {
            Reply::Pairs(z.iter().map(|(m, s)| pair(m, s)).collect())
        } else {
            Reply::Array(z.iter().map(|(m, _)| Reply::Bulk(m.clone())).collect())
        }
    }
}

/// ZINTERSTORE, ZUNIONSTORE and ZDIFFSTORE.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZSetOpStore {
    /// The destination.
    pub dst: Bytes,
    /// The operation.
    pub spec: OpSpec,
}

impl Replicated for ZSetOpStore {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((
            &["zinterstore", "zunionstore", "zdiffstore"],
            std::iter::once(self.dst.as_ref())
                .chain(many(&self.spec.keys))
                .collect(),
            none(),
        ))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Stores the result (an empty one deletes the destination).
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        match self.spec.compute(ks, ctx.now) {
            Err(e) => e,
            Ok((z, _, _)) => {
                let event = match self.spec.op {
                    SetOp::Inter => "zinterstore",
                    SetOp::Union => "zunionstore",
                    SetOp::Diff => "zdiffstore",
                };
                store(ks, &self.dst, z, ctx, event)
            }
        }
    }
}
