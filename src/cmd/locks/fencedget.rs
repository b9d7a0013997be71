//! `FENCEDGET key token`: read the value and raise the key's fence to `token`.
//!
//! It goes through the log because it changes the fence: once a reader with token 34 has
//! read, a writer with token 33 can no longer write (timestamp ordering; see
//! docs/locks-and-fencing.md, "Read-modify-write needs fenced reads").

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::fencedset::{fenced, parse_token};
use crate::cmd::registry::flags::WRITE_FAST;
use crate::cmd::registry::{none, one, Replicated, Spec, Touches, ONE_KEY};
use crate::cmd::{Command, Ctx, Request};
use crate::resp::{Args, Reply};
use crate::state::Keyspace;

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[Spec::new("fencedget", 3, WRITE_FAST, ONE_KEY, parse)
    .key_specs("RW,access,update@i1/r0,1,0")
    .args("key:key token:integer")
    .palisade("Read a value and raise the key's fence to the reader's token")];

/// A parsed FENCEDGET.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FencedGet {
    /// The resource key.
    pub key: Bytes,
    /// The reader's fencing token.
    pub token: u64,
}

/// Parses FENCEDGET.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    let key = args.arg()?;
    let token = parse_token(args)?;
    Ok(Request::Data(Command::FencedGet(FencedGet { key, token })))
}

impl Replicated for FencedGet {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["fencedget"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Checks and raises the fence, then reads.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let highest = ks.fence(&self.key);
        if self.token < highest {
            return fenced(self.token, highest);
        }
        let value = match ks.get_str(&self.key, ctx.now) {
            Ok(v) => v.cloned(),
            Err(e) => return e.into(),
        };
        ks.raise_fence(&self.key, self.token);
        value.map_or(Reply::Nil, Reply::Bulk)
    }
}
