//! Hashes: `HSET key field value [field value ...]`, `HMSET` (same, replies +OK),
//! `HSETNX key field value`, `HGET key field`, `HMGET key field [field ...]`,
//! `HDEL key field [field ...]`, `HEXISTS key field`, `HINCRBY key field increment`,
//! `HLEN key`, `HGETALL key`, `HKEYS key`, `HVALS key`, `HSTRLEN key field`.
//!
//! Fields keep insertion order (see [`crate::state::Hash`]), so HGETALL replies match a
//! Redis small hash byte for byte.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::registry::flags::{READ, READ_FAST, WRITE_FAST, WRITE_GROW_FAST};
use crate::cmd::registry::{none, one, Replicated, Spec, Touches, ONE_KEY};
use crate::cmd::{wrong_arity, Command, Ctx, Request};
use crate::resp::args::{parse_i64, NOT_INTEGER};
use crate::resp::{Args, Reply};
use crate::state::{Hash, Keyspace, Value};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new("hset", -4, WRITE_GROW_FAST, ONE_KEY, parse_hset)
        .key_specs("RW,update@i1/r0,1,0")
        .args("key:key field_value@{field value}*")
        .docs("Store one or more fields of a hash", "2.0.0", "hash"),
    Spec::new("hmset", -4, WRITE_GROW_FAST, ONE_KEY, parse_hset)
        .key_specs("RW,update@i1/r0,1,0")
        .args("key:key field_value@{field value}*")
        .docs(
            "Store one or more fields of a hash (the older form of HSET)",
            "2.0.0",
            "hash",
        ),
    Spec::new("hsetnx", 4, WRITE_GROW_FAST, ONE_KEY, parse_hset)
        .key_specs("RW,insert@i1/r0,1,0")
        .args("key:key field value")
        .docs("Store a hash field only if it is absent", "2.0.0", "hash"),
    Spec::new("hget", 3, READ_FAST, ONE_KEY, parse_read)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key field")
        .docs("Return the value of one hash field", "2.0.0", "hash"),
    Spec::new("hmget", -3, READ_FAST, ONE_KEY, parse_read)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key field*")
        .docs("Return the values of several hash fields", "2.0.0", "hash"),
    Spec::new("hdel", -3, WRITE_FAST, ONE_KEY, parse_hdel)
        .key_specs("RW,delete@i1/r0,1,0")
        .args("key:key field*")
        .docs("Remove fields from a hash", "2.0.0", "hash"),
    Spec::new("hexists", 3, READ_FAST, ONE_KEY, parse_read)
        .key_specs("RO@i1/r0,1,0")
        .args("key:key field")
        .docs("Tell whether a hash field exists", "2.0.0", "hash"),
    Spec::new("hincrby", 4, WRITE_GROW_FAST, ONE_KEY, parse_hincrby)
        .key_specs("RW,access,update@i1/r0,1,0")
        .args("key:key field increment:integer")
        .docs("Add an integer to a hash field", "2.0.0", "hash"),
    Spec::new("hlen", 2, READ_FAST, ONE_KEY, parse_read)
        .key_specs("RO@i1/r0,1,0")
        .args("key:key")
        .docs("Count the fields of a hash", "2.0.0", "hash"),
    Spec::new("hgetall", 2, READ, ONE_KEY, parse_read)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key")
        .docs("Return every field and value of a hash", "2.0.0", "hash"),
    Spec::new("hkeys", 2, READ, ONE_KEY, parse_read)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key")
        .docs("Return every field name of a hash", "2.0.0", "hash"),
    Spec::new("hvals", 2, READ, ONE_KEY, parse_read)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key")
        .docs("Return every value of a hash", "2.0.0", "hash"),
    Spec::new("hstrlen", 3, READ_FAST, ONE_KEY, parse_read)
        .key_specs("RO@i1/r0,1,0")
        .args("key:key field")
        .docs("Return the length of a hash field's value", "3.2.0", "hash"),
];

/// Which reply an HSET-like command gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum HSetForm {
    /// HSET: the number of new fields.
    HSet,
    /// HMSET: +OK.
    HMSet,
    /// HSETNX: 1 if set, 0 if the field existed (and nothing changed).
    HSetNx,
}

/// Sets fields of a hash, creating it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HSet {
    /// The key.
    pub key: Bytes,
    /// Field/value pairs, in argument order.
    pub pairs: Vec<(Bytes, Bytes)>,
    /// Reply shape.
    pub form: HSetForm,
}

/// Deletes fields; replies with how many existed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HDel {
    /// The key.
    pub key: Bytes,
    /// The fields.
    pub fields: Vec<Bytes>,
}

/// Adds to an integer field.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HIncrBy {
    /// The key.
    pub key: Bytes,
    /// The field.
    pub field: Bytes,
    /// The increment.
    pub by: i64,
}

/// A read of a hash.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum HReadOp {
    /// HGET.
    Get(Bytes),
    /// HMGET.
    MGet(Vec<Bytes>),
    /// HEXISTS.
    Exists(Bytes),
    /// HLEN.
    Len,
    /// HGETALL.
    GetAll,
    /// HKEYS.
    Keys,
    /// HVALS.
    Vals,
    /// HSTRLEN.
    StrLen(Bytes),
}

/// A read-only hash command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HRead {
    /// The key.
    pub key: Bytes,
    /// What to read.
    pub op: HReadOp,
}

/// Parses HSET, HMSET and HSETNX.
pub fn parse_hset(args: &mut Args) -> Result<Request, Reply> {
    let name = args.name().to_string();
    let key = args.arg()?;
    let rest = args.rest();
    if !rest.len().is_multiple_of(2) || (name == "hsetnx" && rest.len() != 2) {
        return Err(wrong_arity(&name));
    }
    let pairs = rest
        .chunks(2)
        .map(|p| (p[0].clone(), p[1].clone()))
        .collect();
    let form = match name.as_str() {
        "hmset" => HSetForm::HMSet,
        "hsetnx" => HSetForm::HSetNx,
        _ => HSetForm::HSet,
    };
    Ok(Request::Data(Command::HSet(HSet { key, pairs, form })))
}

/// Parses HDEL.
pub fn parse_hdel(args: &mut Args) -> Result<Request, Reply> {
    let key = args.arg()?;
    Ok(Request::Data(Command::HDel(HDel {
        key,
        fields: args.rest(),
    })))
}

/// Parses HINCRBY.
pub fn parse_hincrby(args: &mut Args) -> Result<Request, Reply> {
    let key = args.arg()?;
    let field = args.arg()?;
    let by = args.next_i64()?;
    Ok(Request::Data(Command::HIncrBy(HIncrBy { key, field, by })))
}

/// Parses the read-only hash commands.
pub fn parse_read(args: &mut Args) -> Result<Request, Reply> {
    let name = args.name().to_string();
    let key = args.arg()?;
    let op = match name.as_str() {
        "hget" => HReadOp::Get(args.arg()?),
        "hmget" => HReadOp::MGet(args.rest()),
        "hexists" => HReadOp::Exists(args.arg()?),
        "hlen" => HReadOp::Len,
        "hkeys" => HReadOp::Keys,
        "hvals" => HReadOp::Vals,
        "hstrlen" => HReadOp::StrLen(args.arg()?),
        _ => HReadOp::GetAll,
    };
    Ok(Request::Data(Command::HRead(HRead { key, op })))
}

fn is_hash(v: &Value) -> bool {
    matches!(v, Value::Hash(_))
}

fn new_hash() -> Value {
    Value::Hash(Box::default())
}

/// The hash inside a value returned by `value_mut` with `is_hash`.
fn as_hash(v: &mut Value) -> Option<&mut Hash> {
    match v {
        Value::Hash(h) => Some(h),
        _ => None,
    }
}

impl Replicated for HSet {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["hset", "hmset", "hsetnx"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Applies the write.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        if self.form == HSetForm::HSetNx {
            match ks.get_hash(&self.key, ctx.now) {
                Err(e) => return e.into(),
                Ok(Some(h)) if self.pairs.iter().any(|(f, _)| h.contains_key(f)) => {
                    return Reply::Int(0)
                }
                Ok(_) => {}
            }
        }
        let hash = match ks.value_mut(&self.key, ctx.now, is_hash, Some(new_hash)) {
            Err(e) => return e.into(),
            Ok(v) => v.and_then(as_hash),
        };
        let Some(hash) = hash else {
            return Reply::err("ERR internal: hash missing");
        };
        let mut added = 0;
        for (f, v) in &self.pairs {
            if hash.insert(f.clone(), v.clone()).is_none() {
                added += 1;
            }
        }
        ks.notify(crate::state::notify::HASH, "hset", &self.key);
        match self.form {
            HSetForm::HSet => Reply::Int(added),
            HSetForm::HMSet => Reply::ok(),
            HSetForm::HSetNx => Reply::Int(1),
        }
    }
}

impl Replicated for HDel {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["hdel"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Applies the deletion; an emptied hash is removed.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        match ks.get_hash(&self.key, ctx.now) {
            Err(e) => return e.into(),
            Ok(None) => return Reply::Int(0),
            Ok(Some(h)) if !self.fields.iter().any(|f| h.contains_key(f)) => return Reply::Int(0),
            Ok(Some(_)) => {}
        }
        let mut removed = 0;
        if let Ok(Some(hash)) = ks
            .value_mut(&self.key, ctx.now, is_hash, None)
            .map(|v| v.and_then(as_hash))
        {
            for f in &self.fields {
                if hash.shift_remove(f).is_some() {
                    removed += 1;
                }
            }
        }
        if removed > 0 {
            ks.notify(crate::state::notify::HASH, "hdel", &self.key);
        }
        ks.drop_if_empty(&self.key, ctx.now);
        Reply::Int(removed)
    }
}

impl Replicated for HIncrBy {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["hincrby"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Applies the increment.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let current = match ks.get_hash(&self.key, ctx.now) {
            Err(e) => return e.into(),
            Ok(h) => h.and_then(|h| h.get(&self.field)),
        };
        let current = match current {
            None => 0,
            Some(v) => match parse_i64(v) {
                Some(n) => n,
                None => return Reply::err("ERR hash value is not an integer"),
            },
        };
        let Some(next) = current.checked_add(self.by) else {
            return Reply::err("ERR increment or decrement would overflow");
        };
        match ks.value_mut(&self.key, ctx.now, is_hash, Some(new_hash)) {
            Ok(Some(Value::Hash(h))) => {
                h.insert(self.field.clone(), Bytes::from(next.to_string()));
                ks.notify(crate::state::notify::HASH, "hincrby", &self.key);
                Reply::Int(next)
            }
            Err(e) => e.into(),
            Ok(_) => Reply::err(NOT_INTEGER),
        }
    }
}

impl Replicated for HRead {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((
            &[
                "hget", "hmget", "hexists", "hlen", "hgetall", "hkeys", "hvals", "hstrlen",
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
        let empty = Hash::default();
        let hash = match ks.get_hash(&self.key, now) {
            Err(e) => return e.into(),
            Ok(h) => h.unwrap_or(&empty),
        };
        let value = |f: &Bytes| hash.get(f).cloned().map_or(Reply::Nil, Reply::Bulk);
        match &self.op {
            HReadOp::Get(f) => value(f),
            HReadOp::MGet(fs) => Reply::Array(fs.iter().map(value).collect()),
            HReadOp::Exists(f) => Reply::Int(hash.contains_key(f) as i64),
            HReadOp::Len => Reply::Int(hash.len() as i64),
            HReadOp::GetAll => Reply::Map(
                hash.iter()
                    .map(|(f, v)| (Reply::Bulk(f.clone()), Reply::Bulk(v.clone())))
                    .collect(),
            ),
            HReadOp::Keys => Reply::Array(hash.keys().cloned().map(Reply::Bulk).collect()),
            HReadOp::Vals => Reply::Array(hash.values().cloned().map(Reply::Bulk).collect()),
            HReadOp::StrLen(f) => Reply::Int(hash.get(f).map_or(0, |v| v.len() as i64)),
        }
    }
}
