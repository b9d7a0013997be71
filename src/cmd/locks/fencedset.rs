//! `FENCEDSET key value token [PX ms]`: write only if `token` is not lower than the highest
//! token this key has accepted. Replies `+OK` or `-FENCED token <t> is lower than <highest>`.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::registry::flags::WRITE;
use crate::cmd::registry::{none, one, Replicated, Spec, Touches, ONE_KEY};
use crate::cmd::{Command, Ctx, Request};
use crate::resp::args::{syntax_error, NOT_INTEGER};
use crate::resp::{Args, Reply};
use crate::state::Keyspace;

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[Spec::new("fencedset", -4, WRITE, ONE_KEY, parse)
    .key_specs("RW,update@i1/r0,1,0")
    .args("key:key value token:integer PX=milliseconds:integer?")
    .palisade("Write a value unless a higher fencing token has been seen for the key")];

/// A parsed FENCEDSET.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FencedSet {
    /// The resource key.
    pub key: Bytes,
    /// The value to write.
    pub value: Bytes,
    /// The writer's fencing token.
    pub token: u64,
    /// Optional TTL in ms for the value (the fence itself never expires).
    pub ttl_ms: Option<u64>,
}

/// Parses a non-negative token.
pub fn parse_token(args: &mut Args) -> Result<u64, Reply> {
    u64::try_from(args.next_i64()?).map_err(|_| Reply::err(NOT_INTEGER))
}

/// The error a stale token gets.
pub fn fenced(token: u64, highest: u64) -> Reply {
    Reply::err(format!("FENCED token {token} is lower than {highest}"))
}

/// Parses FENCEDSET.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    let key = args.arg()?;
    let value = args.arg()?;
    let token = parse_token(args)?;
    let mut ttl_ms = None;
    if args.remaining() > 0 {
        if args.next_keyword()? != "PX" {
            return Err(syntax_error());
        }
        match args.next_i64()? {
            ms if ms > 0 => ttl_ms = Some(ms as u64),
            _ => return Err(Reply::err("ERR invalid expire time in 'fencedset' command")),
        }
    }
    args.finish()?;
    Ok(Request::Data(Command::FencedSet(FencedSet {
        key,
        value,
        token,
        ttl_ms,
    })))
}

impl Replicated for FencedSet {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["fencedset"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Checks the fence, raises it and writes.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let highest = ks.fence(&self.key);
        if self.token < highest {
            return fenced(self.token, highest);
        }
        if let Err(e) = ks.get_str(&self.key, ctx.now) {
            return e.into();
        }
        ks.raise_fence(&self.key, self.token);
        let expire_at = self.ttl_ms.map(|ms| ctx.now.saturating_add(ms));
        ks.set_str(
            self.key.clone(),
            self.value.clone(),
            expire_at,
            ctx.revision,
            ctx.now,
        );
        Reply::ok()
    }
}
