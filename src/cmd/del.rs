//! `DEL key [key ...]` and `UNLINK key [key ...]` (identical here: removal is O(1) per key).

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::{Command, Ctx, Request};
use crate::resp::{Args, Reply};
use crate::state::Keyspace;

/// Deletes keys; replies with how many existed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Del {
    /// The keys.
    pub keys: Vec<Bytes>,
}

/// Parses DEL/UNLINK.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    Ok(Request::Write(Command::Del(Del { keys: args.rest() })))
}

impl Del {
    /// Applies the deletion. Fences are untouched: they outlive the value.
    pub fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        Reply::Int(
            self.keys
                .iter()
                .filter(|k| ks.remove(k, ctx.now).is_some())
                .count() as i64,
        )
    }
}
