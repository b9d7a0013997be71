//! `INCR key`, `DECR key`, `INCRBY key n`, `DECRBY key n`.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::registry::flags::WRITE_GROW_FAST;
use crate::cmd::registry::{none, one, Replicated, Spec, Touches, ONE_KEY};
use crate::cmd::{Command, Ctx, Request};
use crate::resp::args::{parse_i64, NOT_INTEGER};
use crate::resp::{Args, Reply};
use crate::state::Keyspace;

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new("incr", 2, WRITE_GROW_FAST, ONE_KEY, parse)
        .key_specs("RW,access,update@i1/r0,1,0")
        .args("key:key")
        .docs("Add one to the integer stored at a key", "1.0.0", "string"),
    Spec::new("decr", 2, WRITE_GROW_FAST, ONE_KEY, parse)
        .key_specs("RW,access,update@i1/r0,1,0")
        .args("key:key")
        .docs(
            "Subtract one from the integer stored at a key",
            "1.0.0",
            "string",
        ),
    Spec::new("incrby", 3, WRITE_GROW_FAST, ONE_KEY, parse)
        .key_specs("RW,access,update@i1/r0,1,0")
        .args("key:key increment:integer")
        .docs(
            "Add an amount to the integer stored at a key",
            "1.0.0",
            "string",
        ),
    Spec::new("decrby", 3, WRITE_GROW_FAST, ONE_KEY, parse)
        .key_specs("RW,access,update@i1/r0,1,0")
        .args("key:key decrement:integer")
        .docs(
            "Subtract an amount from the integer stored at a key",
            "1.0.0",
            "string",
        ),
];

/// Adds `by` to the integer stored at `key` (0 if missing), keeping its TTL.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IncrBy {
    /// The key.
    pub key: Bytes,
    /// The increment.
    pub by: i64,
}

/// Parses the whole family.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    let name = args.name().to_string();
    let key = args.arg()?;
    let by = match name.as_str() {
        "incr" => 1,
        "decr" => -1,
        "incrby" => args.next_i64()?,
        _ => {
            let n = args.next_i64()?;
            n.checked_neg()
                .ok_or_else(|| Reply::err("ERR decrement would overflow"))?
        }
    };
    Ok(Request::Data(Command::IncrBy(IncrBy { key, by })))
}

impl Replicated for IncrBy {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((
            &["incr", "incrby", "decr", "decrby"],
            one(&self.key),
            none(),
        ))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Applies the increment.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let (current, expire_at) = match ks.get_str(&self.key, ctx.now) {
            Err(e) => return e.into(),
            Ok(None) => (0, None),
            Ok(Some(v)) => match parse_i64(v) {
                Some(n) => (n, ks.get(&self.key, ctx.now).and_then(|e| e.expire_at)),
                None => return Reply::err(NOT_INTEGER),
            },
        };
        let Some(next) = current.checked_add(self.by) else {
            return Reply::err("ERR increment or decrement would overflow");
        };
        let value = Bytes::from(next.to_string());
        ks.set_str(self.key.clone(), value, expire_at, ctx.revision, ctx.now);
        // Redis signals `incrby` for INCR, DECR and DECRBY too.
        ks.notify(crate::state::notify::STRING, "incrby", &self.key);
        Reply::Int(next)
    }
}
