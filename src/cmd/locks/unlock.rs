//! `UNLOCK key owner`: 1 if released, 0 if the lock is not held by that owner.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::registry::flags::WRITE_FAST;
use crate::cmd::registry::{none, one, Replicated, Spec, Touches, ONE_KEY};
use crate::cmd::{Command, Ctx, Request};
use crate::resp::{Args, Reply};
use crate::state::Keyspace;

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[Spec::new("unlock", 3, WRITE_FAST, ONE_KEY, parse)
    .key_specs("RW,access,delete@i1/r0,1,0")
    .args("key:key owner")
    .palisade("Release a lock held by the given owner")];

/// A parsed UNLOCK.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unlock {
    /// The lock's key.
    pub key: Bytes,
    /// The owner releasing it.
    pub owner: Bytes,
}

/// Parses UNLOCK.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    Ok(Request::Data(Command::Unlock(Unlock {
        key: args.arg()?,
        owner: args.arg()?,
    })))
}

impl Replicated for Unlock {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["unlock"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Releases the lock if `owner` holds it, and grants it to the first waiter.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let released = ks.lock_release(&self.key, &self.owner, ctx.now, ctx.revision);
        Reply::Int(i64::from(released))
    }
}
