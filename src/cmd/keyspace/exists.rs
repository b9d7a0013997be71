//! `EXISTS key [key ...]`: how many of the keys exist (a repeated key counts each time).

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::registry::flags::READ_FAST;
use crate::cmd::registry::{many, none, Replicated, Spec, Touches, ALL_KEYS};
use crate::cmd::{Command, Request};
use crate::resp::{Args, Reply};
use crate::state::Keyspace;

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[Spec::new("exists", -2, READ_FAST, ALL_KEYS, parse)
    .key_specs("RO@i1/r-1,1,0")
    .args("key:key*")
    .docs("Count how many of the given keys exist", "1.0.0", "generic")];

/// A parsed EXISTS.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exists {
    /// The keys.
    pub keys: Vec<Bytes>,
}

/// Parses EXISTS.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    Ok(Request::Data(Command::Exists(Exists { keys: args.rest() })))
}

impl Replicated for Exists {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["exists"], many(&self.keys), none()))
    }

    fn is_read(&self) -> bool {
        true
    }

    /// Counts live keys.
    fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        Reply::Int(
            self.keys
                .iter()
                .filter(|k| ks.get(k, now).is_some())
                .count() as i64,
        )
    }
}
