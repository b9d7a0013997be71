//! `RENEW key owner PX ms`: extend a held lease; the token, or nil if the lock was lost.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::lock::parse_px;
use crate::cmd::registry::flags::WRITE_FAST;
use crate::cmd::registry::{none, one, Replicated, Spec, Touches, ONE_KEY};
use crate::cmd::{Command, Ctx, Request};
use crate::resp::{Args, Reply};
use crate::state::Keyspace;

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[Spec::new("renew", 5, WRITE_FAST, ONE_KEY, parse)
    .key_specs("RW,access,update@i1/r0,1,0")
    .args("key:key owner PX=milliseconds:integer")
    .palisade("Extend the lease of a lock held by the given owner")];

/// A parsed RENEW.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Renew {
    /// The lock's key.
    pub key: Bytes,
    /// The owner renewing it.
    pub owner: Bytes,
    /// New lease length in ms, from now.
    pub ttl_ms: u64,
}

/// Parses RENEW.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    let key = args.arg()?;
    let owner = args.arg()?;
    let ttl_ms = parse_px(args, "renew")?;
    args.finish()?;
    Ok(Request::Data(Command::Renew(Renew { key, owner, ttl_ms })))
}

impl Replicated for Renew {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["renew"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Extends the lease if `owner` still holds it.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        match ks.lock_renew(&self.key, &self.owner, self.ttl_ms, ctx.now, ctx.revision) {
            Some(token) => Reply::Int(token as i64),
            None => Reply::Nil,
        }
    }
}
