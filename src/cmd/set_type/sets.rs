//! Sets: `SADD key member [member ...]`, `SREM key member [member ...]`, `SMEMBERS key`,
//! `SISMEMBER key member`, `SMISMEMBER key member [member ...]`, `SCARD key`,
//! `SPOP key [count]`, `SRANDMEMBER key [count]`, `SMOVE source destination member`,
//! `SINTER key [key ...]`, `SUNION`, `SDIFF`, `SINTERCARD numkeys key [key ...] [LIMIT n]`,
//! `SINTERSTORE destination key [key ...]`, `SUNIONSTORE`, `SDIFFSTORE`,
//! `SSCAN key cursor [MATCH pattern] [COUNT count]`.
//!
//! Members are kept in a deterministic container ([`crate::state::Set`]). Replies list them
//! the way Redis 7.0 does where Redis's order is reproducible: a set Redis would keep as an
//! intset (only canonical integers, at most 512 of them) in ascending numeric order; any
//! other set in its stored order, where Redis's hashtable order is unspecified anyway.
//!
//! Random draws are deterministic on every replica: SPOP seeds a small PRNG from the
//! command's revision (`ctx.revision`), SRANDMEMBER, a read, from the keyspace's current
//! revision, so the same read between two writes draws the same members.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::algo::rng::SplitMix64;
use crate::cmd::registry::flags::{READ, READ_FAST, WRITE, WRITE_FAST, WRITE_GROW_FAST};
use crate::cmd::registry::{
    many, none, one, Replicated, Spec, Touches, ALL_KEYS, NO_KEYS, ONE_KEY,
};
use crate::cmd::{wrong_arity, Command, Ctx, Request};
use crate::resp::args::{parse_i64, syntax_error, NOT_INTEGER};
use crate::resp::{Args, Reply};
use crate::state::{notify, pattern, Keyspace, Set, Value};

/// Redis's `set-max-intset-entries` default: a set of integers up to this size is an intset.
pub const INTSET_MAX_ENTRIES: usize = 512;

/// The largest count SRANDMEMBER with a negative count draws (Redis would try to answer up
/// to 2^63 draws; Palisade refuses counts it could not answer in bounded memory).
pub const MAX_DRAWS: u64 = 1 << 24;

/// Key positions of `SMOVE source destination member`.
const TWO_KEYS: (i32, i32, i32) = (1, 2, 1);

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new("sadd", -3, WRITE_GROW_FAST, ONE_KEY, parse_sadd)
        .key_specs("RW,insert@i1/r0,1,0")
        .args("key:key member*")
        .docs("Add members to a set", "1.0.0", "set"),
    Spec::new("srem", -3, WRITE_FAST, ONE_KEY, parse_srem)
        .key_specs("RW,delete@i1/r0,1,0")
        .args("key:key member*")
        .docs("Remove members from a set", "1.0.0", "set"),
    Spec::new("smembers", 2, READ, ONE_KEY, parse_read)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key")
        .docs("Return every member of a set", "1.0.0", "set"),
    Spec::new("sismember", 3, READ_FAST, ONE_KEY, parse_read)
        .key_specs("RO@i1/r0,1,0")
        .args("key:key member")
        .docs("Tell whether a value is a member of a set", "1.0.0", "set"),
    Spec::new("smismember", -3, READ_FAST, ONE_KEY, parse_read)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key member*")
        .docs(
            "Tell for each of several values whether it is a member of a set",
            "6.2.0",
            "set",
        ),
    Spec::new("scard", 2, READ_FAST, ONE_KEY, parse_read)
        .key_specs("RO@i1/r0,1,0")
        .args("key:key")
        .docs("Count the members of a set", "1.0.0", "set"),
    Spec::new("spop", -2, WRITE_FAST, ONE_KEY, parse_spop)
        .key_specs("RW,access,delete@i1/r0,1,0")
        .args("key:key count:integer?")
        .docs("Remove and return random members of a set", "1.0.0", "set"),
    Spec::new("srandmember", -2, READ, ONE_KEY, parse_read)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key count:integer?")
        .docs(
            "Return random members of a set without removing them",
            "1.0.0",
            "set",
        ),
    Spec::new("smove", 4, WRITE_FAST, TWO_KEYS, parse_smove)
        .key_specs("RW,access,delete@i1/r0,1,0 RW,insert@i2/r0,1,0")
        .args("source:key destination:key member")
        .docs("Move a member from one set to another", "1.0.0", "set"),
    Spec::new("sinter", -2, READ, ALL_KEYS, parse_combine)
        .key_specs("RO,access@i1/r-1,1,0")
        .args("key:key*")
        .docs("Return the intersection of sets", "1.0.0", "set"),
    Spec::new(
        "sintercard",
        -3,
        &["readonly", "movablekeys"],
        NO_KEYS,
        parse_sintercard,
    )
    .key_specs("RO,access@i1/n0,1,1")
    .args("numkeys:integer key:key* LIMIT=limit:integer?")
    .docs(
        "Count the members of the intersection of sets",
        "7.0.0",
        "set",
    ),
    Spec::new("sinterstore", -3, WRITE, ALL_KEYS, parse_store)
        .key_specs("RW,update@i1/r0,1,0 RO,access@i2/r-1,1,0")
        .args("destination:key key:key*")
        .docs("Store the intersection of sets in a key", "1.0.0", "set"),
    Spec::new("sunion", -2, READ, ALL_KEYS, parse_combine)
        .key_specs("RO,access@i1/r-1,1,0")
        .args("key:key*")
        .docs("Return the union of sets", "1.0.0", "set"),
    Spec::new("sunionstore", -3, WRITE, ALL_KEYS, parse_store)
        .key_specs("OW,update@i1/r0,1,0 RO,access@i2/r-1,1,0")
        .args("destination:key key:key*")
        .docs("Store the union of sets in a key", "1.0.0", "set"),
    Spec::new("sdiff", -2, READ, ALL_KEYS, parse_combine)
        .key_specs("RO,access@i1/r-1,1,0")
        .args("key:key*")
        .docs(
            "Return the members of the first set that are in none of the others",
            "1.0.0",
            "set",
        ),
    Spec::new("sdiffstore", -3, WRITE, ALL_KEYS, parse_store)
        .key_specs("OW,update@i1/r0,1,0 RO,access@i2/r-1,1,0")
        .args("destination:key key:key*")
        .docs("Store the difference of sets in a key", "1.0.0", "set"),
    Spec::new("sscan", -3, READ, ONE_KEY, parse_read)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key cursor:integer MATCH=pattern:pattern? COUNT=count:integer?")
        .docs(
            "Walk the members of a set a few at a time with a cursor",
            "2.8.0",
            "set",
        ),
];

/// SADD: adds members, creating the set; replies with how many were new.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SAdd {
    /// The key.
    pub key: Bytes,
    /// The members, in argument order.
    pub members: Vec<Bytes>,
}

/// SREM: removes members; replies with how many were there. An emptied set is removed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SRem {
    /// The key.
    pub key: Bytes,
    /// The members.
    pub members: Vec<Bytes>,
}

/// SPOP: removes and returns random members.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SPop {
    /// The key.
    pub key: Bytes,
    /// With a count the reply is a set (empty for a missing key), else one member or nil.
    pub count: Option<u64>,
}

/// SMOVE: moves one member from `src` to `dst`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SMove {
    /// The source key.
    pub src: Bytes,
    /// The destination key.
    pub dst: Bytes,
    /// The member.
    pub member: Bytes,
}

/// Which combination of sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SetOp {
    /// Members in every set.
    Inter,
    /// Members in any set.
    Union,
    /// Members of the first set in none of the others.
    Diff,
}

/// SINTER, SUNION, SDIFF and SINTERCARD: a read of several sets.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SCombine {
    /// The operation.
    pub op: SetOp,
    /// The keys (a missing key is an empty set).
    pub keys: Vec<Bytes>,
    /// SINTERCARD: reply with the cardinality only, counting up to this limit (0: no limit).
    pub card_limit: Option<u64>,
}

/// SINTERSTORE, SUNIONSTORE, SDIFFSTORE: stores the combination in `dst` (an empty result
/// deletes it); replies with its size.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SStore {
    /// The operation.
    pub op: SetOp,
    /// The destination key.
    pub dst: Bytes,
    /// The source keys.
    pub keys: Vec<Bytes>,
}

/// A read of one set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SReadOp {
    /// SMEMBERS.
    Members,
    /// SISMEMBER.
    IsMember(Bytes),
    /// SMISMEMBER.
    MIsMember(Vec<Bytes>),
    /// SCARD.
    Card,
    /// SRANDMEMBER, with its count if given.
    RandMember(Option<i64>),
    /// SSCAN: the cursor and the unparsed options (Redis reads them only once it has found
    /// the key, so a missing key answers an empty scan even for bad options).
    Scan(u64, Vec<Bytes>),
}

/// A read-only command on one set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SRead {
    /// The key.
    pub key: Bytes,
    /// What to read.
    pub op: SReadOp,
}

/// Parses SADD.
pub fn parse_sadd(args: &mut Args) -> Result<Request, Reply> {
    let key = args.arg()?;
    Ok(Request::Data(Command::SAdd(SAdd {
        key,
        members: args.rest(),
    })))
}

/// Parses SREM.
pub fn parse_srem(args: &mut Args) -> Result<Request, Reply> {
    let key = args.arg()?;
    Ok(Request::Data(Command::SRem(SRem {
        key,
        members: args.rest(),
    })))
}

/// Parses SPOP: a count must be a non-negative integer, and only one may follow the key.
pub fn parse_spop(args: &mut Args) -> Result<Request, Reply> {
    let key = args.arg()?;
    let count = match args.remaining() {
        0 => None,
        1 => match parse_i64(&args.arg()?) {
            Some(n) if n >= 0 => Some(n as u64),
            _ => return Err(Reply::err("ERR value is out of range, must be positive")),
        },
        _ => return Err(syntax_error()),
    };
    Ok(Request::Data(Command::SPop(SPop { key, count })))
}

/// Parses SMOVE.
pub fn parse_smove(args: &mut Args) -> Result<Request, Reply> {
    let src = args.arg()?;
    let dst = args.arg()?;
    let member = args.arg()?;
    Ok(Request::Data(Command::SMove(SMove { src, dst, member })))
}

fn op_of(name: &str) -> SetOp {
    if name.starts_with("sinter") {
        SetOp::Inter
    } else if name.starts_with("sunion") {
        SetOp::Union
    } else {
        SetOp::Diff
    }
}

/// Parses SINTER, SUNION and SDIFF.
pub fn parse_combine(args: &mut Args) -> Result<Request, Reply> {
    let op = op_of(args.name());
    Ok(Request::Data(Command::SCombine(SCombine {
        op,
        keys: args.rest(),
        card_limit: None,
    })))
}

/// Parses SINTERCARD, with Redis's texts for a bad `numkeys` or LIMIT.
pub fn parse_sintercard(args: &mut Args) -> Result<Request, Reply> {
    let numkeys = match parse_i64(&args.arg()?) {
        Some(n) if n >= 1 => n as u64,
        _ => return Err(Reply::err("ERR numkeys should be greater than 0")),
    };
    if numkeys > args.remaining() as u64 {
        return Err(Reply::err(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    let keys: Vec<Bytes> = (0..numkeys).map(|_| args.arg()).collect::<Result<_, _>>()?;
    let mut limit = 0;
    while args.remaining() > 0 {
        let opt = args.next_keyword()?;
        if opt != "LIMIT" || args.remaining() == 0 {
            return Err(syntax_error());
        }
        limit = match parse_i64(&args.arg()?) {
            Some(n) if n >= 0 => n as u64,
            _ => return Err(Reply::err("ERR LIMIT can't be negative")),
        };
    }
    Ok(Request::Data(Command::SCombine(SCombine {
        op: SetOp::Inter,
        keys,
        card_limit: Some(limit),
    })))
}

/// Parses SINTERSTORE, SUNIONSTORE and SDIFFSTORE.
pub fn parse_store(args: &mut Args) -> Result<Request, Reply> {
    let op = op_of(args.name());
    let dst = args.arg()?;
    Ok(Request::Data(Command::SStore(SStore {
        op,
        dst,
        keys: args.rest(),
    })))
}

/// Redis's SCAN cursor parsing (`strtoul`): an optional sign and decimal digits, a negative
/// value wrapping around, nothing else (not even a leading space); the empty string is 0.
pub fn parse_cursor(raw: &[u8]) -> Option<u64> {
    let (neg, digits) = match raw.first() {
        Some(b'-') => (true, &raw[1..]),
        Some(b'+') => (false, &raw[1..]),
        _ => (false, raw),
    };
    if raw.is_empty() {
        return Some(0);
    }
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(if neg { n.wrapping_neg() } else { n })
}

/// Parses the read-only one-set commands.
pub fn parse_read(args: &mut Args) -> Result<Request, Reply> {
    let name = args.name().to_string();
    let key = args.arg()?;
    let op = match name.as_str() {
        "smembers" => SReadOp::Members,
        "sismember" => SReadOp::IsMember(args.arg()?),
        "smismember" => SReadOp::MIsMember(args.rest()),
        "scard" => SReadOp::Card,
        "srandmember" => match args.remaining() {
            0 => SReadOp::RandMember(None),
            1 => {
                let n = args.next_i64()?;
                if n == i64::MIN {
                    return Err(Reply::err(format!(
                        "ERR value is out of range, value must between {} and {}",
                        -i64::MAX,
                        i64::MAX
                    )));
                }
                if n < 0 && n.unsigned_abs() > MAX_DRAWS {
                    return Err(Reply::err(format!(
                        "ERR value is out of range, Palisade draws at most {MAX_DRAWS} members"
                    )));
                }
                SReadOp::RandMember(Some(n))
            }
            _ => return Err(syntax_error()),
        },
        "sscan" => {
            let cursor =
                parse_cursor(&args.arg()?).ok_or_else(|| Reply::err("ERR invalid cursor"))?;
            SReadOp::Scan(cursor, args.rest())
        }
        _ => return Err(wrong_arity(&name)),
    };
    Ok(Request::Data(Command::SRead(SRead { key, op })))
}

fn is_set(v: &Value) -> bool {
    matches!(v, Value::Set(_))
}

fn new_set() -> Value {
    Value::Set(Box::default())
}

/// True if Redis 7.0 would keep these members as an intset: all canonical 64-bit integers,
/// and at most [`INTSET_MAX_ENTRIES`] of them (judged on the current members: Redis never
/// converts a hashtable back, which only changes an order Redis leaves unspecified).
pub fn is_intset<'a>(members: impl ExactSizeIterator<Item = &'a Bytes>) -> bool {
    let mut members = members;
    members.len() <= INTSET_MAX_ENTRIES && members.all(|m| parse_i64(m).is_some())
}

/// The members in the order Redis 7.0 lists them: ascending for an intset, else stored order.
pub fn redis_order(set: &Set) -> Vec<&Bytes> {
    let mut out: Vec<&Bytes> = set.iter().collect();
    if is_intset(set.iter()) {
        out.sort_by_key(|m| parse_i64(m).unwrap_or(0));
    }
    out
}

/// A set reply (RESP3 `~`, an array in RESP2) in Redis's order.
fn set_reply(set: &Set) -> Reply {
    Reply::Set(
        redis_order(set)
            .into_iter()
            .cloned()
            .map(Reply::Bulk)
            .collect(),
    )
}

/// The generator of SPOP and SRANDMEMBER: SplitMix64 seeded from a revision (xored with a
/// fixed salt), so every replica that applies the same command draws the same members.
fn draw(seed: u64) -> SplitMix64 {
    SplitMix64::new(seed ^ 0x5EED_5E75_0000_0000)
}

/// The set at `key` for change (must exist and be a set), or None.
fn set_mut<'a>(ks: &'a mut Keyspace, key: &Bytes, now: u64) -> Option<&'a mut Set> {
    match ks.value_mut(key, now, is_set, None) {
        Ok(Some(Value::Set(s))) => Some(s),
        _ => None,
    }
}

impl Replicated for SAdd {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["sadd"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Adds the members; replies with how many were new.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let set = match ks.value_mut(&self.key, ctx.now, is_set, Some(new_set)) {
            Err(e) => return e.into(),
            Ok(Some(Value::Set(s))) => s,
            Ok(_) => return Reply::err("ERR internal: set missing"),
        };
        let added = self
            .members
            .iter()
            .filter(|m| set.insert((*m).clone()))
            .count();
        if added > 0 {
            ks.notify(notify::SET, "sadd", &self.key);
        }
        Reply::Int(added as i64)
    }
}

impl Replicated for SRem {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["srem"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Removes the members; an emptied set is removed.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        match ks.get_set(&self.key, ctx.now) {
            Err(e) => return e.into(),
            Ok(None) => return Reply::Int(0),
            Ok(Some(s)) if !self.members.iter().any(|m| s.contains(m)) => return Reply::Int(0),
            Ok(Some(_)) => {}
        }
        let mut removed = 0;
        if let Some(set) = set_mut(ks, &self.key, ctx.now) {
            for m in &self.members {
                removed += i64::from(set.swap_remove(m));
            }
        }
        ks.notify(notify::SET, "srem", &self.key);
        ks.drop_if_empty(&self.key, ctx.now);
        Reply::Int(removed)
    }
}

impl Replicated for SPop {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["spop"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Pops random members, drawn from `ctx.revision`.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let len = match ks.get_set(&self.key, ctx.now) {
            Err(e) => return e.into(),
            Ok(None) if self.count.is_some() => return Reply::Set(vec![]),
            Ok(None) => return Reply::Nil,
            Ok(Some(s)) => s.len(),
        };
        let mut draw = draw(ctx.revision);
        match self.count {
            Some(0) => Reply::Set(vec![]),
            // The whole set: Redis replies as SMEMBERS would, then deletes the key.
            Some(n) if n >= len as u64 => {
                let reply = match ks.get_set(&self.key, ctx.now) {
                    Ok(Some(s)) => set_reply(s),
                    _ => Reply::Set(vec![]),
                };
                ks.notify(notify::SET, "spop", &self.key);
                ks.remove(&self.key, ctx.now);
                ks.notify(notify::GENERIC, "del", &self.key);
                reply
            }
            count => {
                let k = count.unwrap_or(1) as usize;
                let mut picks = draw.distinct(len, k);
                let mut out = Vec::with_capacity(k);
                if let Some(set) = set_mut(ks, &self.key, ctx.now) {
                    // Remove from the highest index down, so that each `swap_remove` moves a
                    // member that was not drawn (or was already taken) into the gap.
                    let members: Vec<Bytes> = picks
                        .iter()
                        .filter_map(|&i| set.get_index(i).cloned())
                        .collect();
                    picks.sort_unstable_by(|a, b| b.cmp(a));
                    for i in picks {
                        set.swap_remove_index(i);
                    }
                    out = members;
                }
                ks.notify(notify::SET, "spop", &self.key);
                ks.drop_if_empty(&self.key, ctx.now);
                match count {
                    None => out.pop().map_or(Reply::Nil, Reply::Bulk),
                    Some(_) => Reply::Set(out.into_iter().map(Reply::Bulk).collect()),
                }
            }
        }
    }
}

impl Replicated for SMove {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((
            &["smove"],
            vec![self.src.as_ref(), self.dst.as_ref()],
            none(),
        ))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Moves the member, as Redis checks: a missing source is 0 whatever the destination.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let has = match ks.get_set(&self.src, ctx.now) {
            Err(e) => return e.into(),
            Ok(None) => return Reply::Int(0),
            Ok(Some(s)) => s.contains(&self.member),
        };
        if let Err(e) = ks.get_set(&self.dst, ctx.now) {
            return e.into();
        }
        if self.src == self.dst || !has {
            return Reply::Int(i64::from(has));
        }
        if let Some(set) = set_mut(ks, &self.src, ctx.now) {
            set.swap_remove(&self.member);
        }
        ks.notify(notify::SET, "srem", &self.src);
        ks.drop_if_empty(&self.src, ctx.now);
        match ks.value_mut(&self.dst, ctx.now, is_set, Some(new_set)) {
            Ok(Some(Value::Set(s))) => {
                if s.insert(self.member.clone()) {
                    ks.notify(notify::SET, "sadd", &self.dst);
                }
                Reply::Int(1)
            }
            Err(e) => e.into(),
            Ok(_) => Reply::err("ERR internal: set missing"),
        }
    }
}

/// The sets at `keys` (None for a missing key), or WRONGTYPE if any key holds another type
/// (every key is checked, as Redis does, even after a missing one).
fn sets_at<'a>(ks: &'a Keyspace, keys: &[Bytes], now: u64) -> Result<Vec<Option<&'a Set>>, Reply> {
    keys.iter()
        .map(|k| ks.get_set(k, now).map_err(Reply::from))
        .collect()
}

/// Combines the sets: the result in the order Redis builds it (the smallest set's order
/// for an intersection, the first set's for a difference, argument order for a union).
/// `limit` stops an intersection early (SINTERCARD; 0 is no limit).
fn combine(op: SetOp, sets: &[Option<&Set>], limit: u64) -> Set {
    static EMPTY: std::sync::LazyLock<Set> = std::sync::LazyLock::new(Set::new);
    fn get<'a>(s: &Option<&'a Set>) -> &'a Set {
        s.unwrap_or(&EMPTY)
    }
    match op {
        SetOp::Inter => {
            if sets.iter().any(|s| s.is_none_or(|s| s.is_empty())) {
                return Set::new();
            }
            let mut order: Vec<&Set> = sets.iter().map(get).collect();
            order.sort_by_key(|s| s.len());
            let mut out = Set::new();
            for m in order[0] {
                if order[1..].iter().all(|s| s.contains(m)) {
                    out.insert(m.clone());
                    if limit > 0 && out.len() as u64 >= limit {
                        break;
                    }
                }
            }
            out
        }
        SetOp::Union => sets.iter().flat_map(|s| get(s).iter().cloned()).collect(),
        SetOp::Diff => {
            let Some(first) = sets.first() else {
                return Set::new();
            };
            get(first)
                .iter()
                .filter(|m| !sets[1..].iter().any(|s| get(s).contains(*m)))
                .cloned()
                .collect()
        }
    }
}

impl Replicated for SCombine {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((
            &["sinter", "sunion", "sdiff", "sintercard"],
            many(&self.keys),
            none(),
        ))
    }

    fn is_read(&self) -> bool {
        true
    }

    /// Answers SINTER, SUNION, SDIFF (a set reply) or SINTERCARD (a count).
    fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        let sets = match sets_at(ks, &self.keys, now) {
            Ok(s) => s,
            Err(e) => return e,
        };
        let out = combine(self.op, &sets, self.card_limit.unwrap_or(0));
        match self.card_limit {
            Some(_) => Reply::Int(out.len() as i64),
            None => set_reply(&out),
        }
    }
}

impl Replicated for SStore {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((
            &["sinterstore", "sunionstore", "sdiffstore"],
            std::iter::once(self.dst.as_ref())
                .chain(many(&self.keys))
                .collect(),
            none(),
        ))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Stores the result in `dst` (replacing whatever it held, TTL included), or deletes
    /// `dst` when the result is empty.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let out = match sets_at(ks, &self.keys, ctx.now) {
            Ok(sets) => combine(self.op, &sets, 0),
            Err(e) => return e,
        };
        let len = out.len() as i64;
        let event = match self.op {
            SetOp::Inter => "sinterstore",
            SetOp::Union => "sunionstore",
            SetOp::Diff => "sdiffstore",
        };
        let value = Value::Set(Box::new(out));
        ks.store_result(
            &self.dst,
            value,
            ctx.revision,
            ctx.now,
            (notify::SET, event),
        );
        Reply::Int(len)
    }
}

/// SSCAN's options, read as Redis reads them once the key is found.
fn scan_options(opts: &[Bytes]) -> Result<(Option<&Bytes>, usize), Reply> {
    let (mut pat, mut count) = (None, 10usize);
    let mut i = 0;
    while i < opts.len() {
        let word = String::from_utf8_lossy(&opts[i]).to_ascii_lowercase();
        let Some(value) = opts.get(i + 1) else {
            return Err(syntax_error());
        };
        match word.as_str() {
            "count" => {
                let n = parse_i64(value).ok_or_else(|| Reply::err(NOT_INTEGER))?;
                if n < 1 {
                    return Err(syntax_error());
                }
                count = usize::try_from(n).unwrap_or(usize::MAX);
            }
            "match" => pat = Some(value),
            _ => return Err(syntax_error()),
        }
        i += 2;
    }
    Ok((pat.filter(|p| p.as_ref() != b"*"), count))
}

/// A member's place in the SSCAN walk of a large set: a fixed hash (FNV-1a), never 0 (0 is
/// the cursor that starts and ends a walk). Members are visited in increasing place, so a
/// member present for the whole walk is returned exactly once, whatever else changes.
pub fn scan_place(m: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in m {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h.max(1)
}

/// SSCAN: an intset-sized set is returned whole with cursor 0 (as Redis does for its compact
/// encodings); a larger one is walked in [`scan_place`] order, at least `count` members per
/// call (more for a big set, so that a walk takes at most about 64 calls).
fn sscan(set: &Set, cursor: u64, pat: Option<&Bytes>, count: usize) -> Reply {
    let matching = |m: &&Bytes| pat.is_none_or(|p| pattern::matches(p, m));
    let (next, members): (u64, Vec<&Bytes>) = if is_intset(set.iter()) {
        (0, redis_order(set).into_iter().filter(matching).collect())
    } else {
        let batch = count.max(set.len() / 64);
        let mut rest: Vec<(u64, &Bytes)> = set
            .iter()
            .map(|m| (scan_place(m), m))
            .filter(|(p, _)| *p >= cursor)
            .collect();
        rest.sort_unstable();
        // Members sharing a place go in the same call.
        let mut take = batch.min(rest.len());
        while take < rest.len() && take > 0 && rest[take].0 == rest[take - 1].0 {
            take += 1;
        }
        let next = rest.get(take).map_or(0, |(p, _)| *p);
        let taken = rest[..take].iter().map(|(_, m)| *m).filter(matching);
        (next, taken.collect())
    };
    Reply::Array(vec![
        Reply::bulk(next.to_string()),
        Reply::Array(members.into_iter().cloned().map(Reply::Bulk).collect()),
    ])
}

/// SRANDMEMBER with a count, drawn from `seed`.
fn srandmember(set: &Set, count: i64, seed: u64) -> Reply {
    let mut draw = draw(seed);
    let len = set.len();
    let bulk = |i: usize| set.get_index(i).cloned().map_or(Reply::Nil, Reply::Bulk);
    if count < 0 {
        let n = count.unsigned_abs() as usize;
        return Reply::Array((0..n).map(|_| bulk(draw.below(len))).collect());
    }
    if count as u64 >= len as u64 {
        // The whole set, as an array (Redis 7.0 answers `*`, not `~`, here).
        return Reply::Array(
            redis_order(set)
                .into_iter()
                .cloned()
                .map(Reply::Bulk)
                .collect(),
        );
    }
    Reply::Array(
        draw.distinct(len, count as usize)
            .into_iter()
            .map(bulk)
            .collect(),
    )
}

impl Replicated for SRead {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((
            &[
                "smembers",
                "sismember",
                "smismember",
                "scard",
                "srandmember",
                "sscan",
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
        let set = match ks.get_set(&self.key, now) {
            Err(e) => return e.into(),
            Ok(s) => s,
        };
        let empty = Set::new();
        let s = set.unwrap_or(&empty);
        match &self.op {
            SReadOp::Members => set_reply(s),
            SReadOp::IsMember(m) => Reply::Int(i64::from(s.contains(m))),
            SReadOp::MIsMember(ms) => Reply::Array(
                ms.iter()
                    .map(|m| Reply::Int(i64::from(s.contains(m))))
                    .collect(),
            ),
            SReadOp::Card => Reply::Int(s.len() as i64),
            SReadOp::RandMember(None) => {
                if s.is_empty() {
                    return Reply::Nil;
                }
                let i = draw(crate::cmd::draw::seed(ks)).below(s.len());
                s.get_index(i).cloned().map_or(Reply::Nil, Reply::Bulk)
            }
            SReadOp::RandMember(Some(n)) => {
                if s.is_empty() || *n == 0 {
                    return Reply::Array(vec![]);
                }
                srandmember(s, *n, crate::cmd::draw::seed(ks))
            }
            SReadOp::Scan(cursor, opts) => {
                if set.is_none() {
                    return Reply::Array(vec![Reply::bulk("0"), Reply::Array(vec![])]);
                }
                match scan_options(opts) {
                    Ok((pat, count)) => sscan(s, *cursor, pat, count),
                    Err(e) => e,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::run_line;

    fn bulks(v: &[&str]) -> Vec<Reply> {
        v.iter().map(|s| Reply::bulk(s.to_string())).collect()
    }

    fn members(r: Reply) -> Vec<Bytes> {
        let (Reply::Set(items) | Reply::Array(items)) = r else {
            panic!("not a collection: {r:?}")
        };
        items
            .into_iter()
            .map(|i| match i {
                Reply::Bulk(b) => b,
                other => panic!("not a bulk: {other:?}"),
            })
            .collect()
    }

    #[test]
    fn intsets_list_in_numeric_order_other_sets_in_stored_order() {
        let mut ks = Keyspace::default();
        assert_eq!(run_line(&mut ks, "SADD i 10 -3 2 2", 0), Reply::Int(3));
        assert_eq!(
            run_line(&mut ks, "SMEMBERS i", 0),
            Reply::Set(bulks(&["-3", "2", "10"]))
        );
        run_line(&mut ks, "SADD s b a 1", 0);
        assert_eq!(
            run_line(&mut ks, "SMEMBERS s", 0),
            Reply::Set(bulks(&["b", "a", "1"]))
        );
        // "01" is not a canonical integer: the set is no intset.
        run_line(&mut ks, "SADD j 3 01", 0);
        assert_eq!(
            run_line(&mut ks, "SMEMBERS j", 0),
            Reply::Set(bulks(&["3", "01"]))
        );
    }

    #[test]
    fn draws_are_distinct_in_range_and_reproducible() {
        for (n, k) in [(1, 1), (5, 3), (100, 100), (1000, 7)] {
            let a = draw(9).distinct(n, k);
            assert_eq!(a, draw(9).distinct(n, k));
            let set: std::collections::BTreeSet<usize> = a.iter().copied().collect();
            assert_eq!(set.len(), k, "{n} {k}");
            assert!(a.iter().all(|&i| i < n));
        }
    }

    #[test]
    fn spop_removes_what_it_returns_and_the_key_when_emptied() {
        let mut ks = Keyspace::default();
        run_line(&mut ks, "SADD s a b c d e", 0);
        let popped = members(run_line(&mut ks, "SPOP s 3", 0));
        assert_eq!(popped.len(), 3);
        let left = members(run_line(&mut ks, "SMEMBERS s", 0));
        assert_eq!(left.len(), 2);
        assert!(popped.iter().all(|p| !left.contains(p)));
        let Reply::Bulk(one) = run_line(&mut ks, "SPOP s", 0) else {
            panic!()
        };
        assert!(left.contains(&one));
        assert_eq!(members(run_line(&mut ks, "SPOP s 5", 0)).len(), 1);
        assert_eq!(run_line(&mut ks, "EXISTS s", 0), Reply::Int(0));
    }

    /// Two replicas applying the same commands draw the same members and keep the same set.
    #[test]
    fn replicas_draw_the_same_members() {
        let mut a = Keyspace::default();
        run_line(&mut a, "SADD s a b c d e f g h", 0);
        let mut b = a.clone();
        for line in ["SPOP s 3", "SPOP s", "SRANDMEMBER s 2", "SRANDMEMBER s -5"] {
            assert_eq!(
                run_line(&mut a, line, 0),
                run_line(&mut b, line, 0),
                "{line}"
            );
        }
        assert_eq!(
            run_line(&mut a, "SMEMBERS s", 0),
            run_line(&mut b, "SMEMBERS s", 0)
        );
    }

    #[test]
    fn sscan_walks_a_large_set_once_despite_changes() {
        let mut ks = Keyspace::default();
        let all: Vec<String> = (0..700).map(|i| format!("m{i}")).collect();
        run_line(&mut ks, &format!("SADD s {}", all.join(" ")), 0);
        let mut seen = std::collections::BTreeSet::new();
        let mut cursor = "0".to_string();
        let mut calls = 0;
        loop {
            let Reply::Array(parts) = run_line(&mut ks, &format!("SSCAN s {cursor} COUNT 5"), 0)
            else {
                panic!()
            };
            let [Reply::Bulk(next), list] = &parts[..] else {
                panic!()
            };
            for m in members(list.clone()) {
                assert!(seen.insert(m), "a member returned twice");
            }
            // Churn: members added and removed during the walk.
            run_line(&mut ks, &format!("SADD s x{calls}"), 0);
            run_line(&mut ks, &format!("SREM s x{calls}"), 0);
            calls += 1;
            cursor = String::from_utf8(next.to_vec()).unwrap();
            if cursor == "0" {
                break;
            }
        }
        for m in &all {
            assert!(seen.contains(m.as_bytes()), "{m} missed");
        }
        assert!(calls < 200, "{calls} calls");
    }

    #[test]
    fn cursors_parse_like_strtoul() {
        assert_eq!(parse_cursor(b"0"), Some(0));
        assert_eq!(parse_cursor(b""), Some(0));
        assert_eq!(parse_cursor(b"-1"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"+7"), Some(7));
        assert_eq!(parse_cursor(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"18446744073709551616"), None);
        assert_eq!(parse_cursor(b" 1"), None);
        assert_eq!(parse_cursor(b"-"), None);
        assert_eq!(parse_cursor(b"1x"), None);
    }
}
