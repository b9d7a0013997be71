//! `DEL key [key ...]` and `UNLINK key [key ...]` (identical here: removal is O(1) per key).

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::registry::flags::WRITE_FAST;
use crate::cmd::registry::{many, none, Replicated, Spec, Touches, ALL_KEYS};
use crate::cmd::{Command, Ctx, Request};
use crate::resp::{Args, Reply};
use crate::state::Keyspace;

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new("del", -2, &["write"], ALL_KEYS, parse)
        .key_specs("RM,delete@i1/r-1,1,0")
        .args("key:key*")
        .docs("Remove keys and count how many existed", "1.0.0", "generic"),
    Spec::new("unlink", -2, WRITE_FAST, ALL_KEYS, parse)
        .key_specs("RM,delete@i1/r-1,1,0")
        .args("key:key*")
        .docs(
            "Remove keys and count how many existed (the same as DEL here)",
            "4.0.0",
            "generic",
        ),
];

/// Deletes keys; replies with how many existed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Del {
    /// The keys.
    pub keys: Vec<Bytes>,
}

/// Parses DEL/UNLINK.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    Ok(Request::Data(Command::Del(Del { keys: args.rest() })))
}

impl Replicated for Del {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["del", "unlink"], many(&self.keys), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Applies the deletion. Fences are untouched: they outlive the value.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let mut removed = 0;
        for k in &self.keys {
            if ks.remove(k, ctx.now).is_some() {
                ks.notify(crate::state::notify::GENERIC, "del", k);
                removed += 1;
            }
        }
        Reply::Int(removed)
    }
}
