//! `MGET key [key ...]`, `MSET key value [key value ...]` and
//! `MSETNX key value [key value ...]`.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::registry::flags::{READ_FAST, WRITE};
use crate::cmd::registry::{many, none, Replicated, Spec, Touches, ALL_KEYS};
use crate::cmd::{wrong_arity, Command, Ctx, Request};
use crate::resp::{Args, Reply};
use crate::state::{notify, Keyspace, Value};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new("mget", -2, READ_FAST, ALL_KEYS, parse_mget)
        .key_specs("RO,access@i1/r-1,1,0")
        .args("key:key*")
        .docs("Return the values of several keys", "1.0.0", "string"),
    Spec::new("mset", -3, WRITE, (1, -1, 2), parse_mset)
        .key_specs("OW,update@i1/r-1,2,0")
        .args("key_value@{key:key value}*")
        .docs("Store several strings at once", "1.0.1", "string"),
    Spec::new("msetnx", -3, WRITE, (1, -1, 2), parse_mset)
        .key_specs("OW,insert@i1/r-1,2,0")
        .args("key_value@{key:key value}*")
        .docs(
            "Store several strings only if none of the keys exists",
            "1.0.1",
            "string",
        ),
];

/// MGET: each key's string value, nil for a missing key or another type.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MGet {
    /// The keys.
    pub keys: Vec<Bytes>,
}

/// MSET or MSETNX.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MSet {
    /// Key/value pairs, in argument order (a repeated key ends with its last value).
    pub pairs: Vec<(Bytes, Bytes)>,
    /// MSETNX: set nothing if any key exists; replies 1/0.
    pub nx: bool,
}

/// Parses MGET.
pub fn parse_mget(args: &mut Args) -> Result<Request, Reply> {
    Ok(Request::Data(Command::MGet(MGet { keys: args.rest() })))
}

/// Parses MSET and MSETNX.
pub fn parse_mset(args: &mut Args) -> Result<Request, Reply> {
    let name = args.name().to_string();
    let rest = args.rest();
    if !rest.len().is_multiple_of(2) {
        return Err(wrong_arity(&name));
    }
    let pairs = rest
        .chunks(2)
        .map(|p| (p[0].clone(), p[1].clone()))
        .collect();
    Ok(Request::Data(Command::MSet(MSet {
        pairs,
        nx: name == "msetnx",
    })))
}

impl Replicated for MGet {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["mget"], many(&self.keys), none()))
    }

    fn is_read(&self) -> bool {
        true
    }

    /// Reads every key at `now`.
    fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        Reply::Array(
            self.keys
                .iter()
                .map(|k| match ks.get(k, now).map(|e| &e.value) {
                    Some(Value::Str(v)) => Reply::Bulk(v.clone()),
                    _ => Reply::Nil,
                })
                .collect(),
        )
    }
}

impl Replicated for MSet {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((
            &["mset", "msetnx"],
            self.pairs.iter().map(|(k, _)| k.as_ref()).collect(),
            none(),
        ))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Stores every pair without a TTL, as SET does.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        if self.nx && self.pairs.iter().any(|(k, _)| ks.get(k, ctx.now).is_some()) {
            return Reply::Int(0);
        }
        for (k, v) in &self.pairs {
            ks.set_str(k.clone(), v.clone(), None, ctx.revision, ctx.now);
            ks.notify(notify::STRING, "set", k);
        }
        if self.nx {
            Reply::Int(1)
        } else {
            Reply::ok()
        }
    }
}
