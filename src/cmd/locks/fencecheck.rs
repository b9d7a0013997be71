//! `FENCECHECK key token`: 1 if `token` belongs to the current live holder of lock `key`.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::registry::flags::READ_FAST;
use crate::cmd::registry::{none, one, Replicated, Spec, Touches, ONE_KEY};
use crate::cmd::{fencedset::parse_token, Command, Request};
use crate::resp::{Args, Reply};
use crate::state::Keyspace;

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[Spec::new("fencecheck", 3, READ_FAST, ONE_KEY, parse)
    .key_specs("RO,access@i1/r0,1,0")
    .args("key:key token:integer")
    .palisade("Tell whether a token belongs to the current holder of a lock")];

/// A parsed FENCECHECK.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FenceCheck {
    /// The lock's key.
    pub key: Bytes,
    /// The token to check.
    pub token: u64,
}

/// Parses FENCECHECK.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    let key = args.arg()?;
    let token = parse_token(args)?;
    Ok(Request::Data(Command::FenceCheck(FenceCheck {
        key,
        token,
    })))
}

impl Replicated for FenceCheck {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["fencecheck"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        true
    }

    /// Compares with the live holder's token.
    fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        Reply::Int(
            ks.get(&self.key, now)
                .is_some_and(|e| e.token == self.token) as i64,
        )
    }
}
