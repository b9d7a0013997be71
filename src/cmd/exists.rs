//! `EXISTS key [key ...]`: how many of the keys exist (a repeated key counts each time).

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::{Command, Request};
use crate::resp::{Args, Reply};
use crate::state::Keyspace;

/// A parsed EXISTS.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exists {
    /// The keys.
    pub keys: Vec<Bytes>,
}

/// Parses EXISTS.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    Ok(Request::Read(Command::Exists(Exists { keys: args.rest() })))
}

impl Exists {
    /// Counts live keys.
    pub fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        Reply::Int(
            self.keys
                .iter()
                .filter(|k| ks.get(k, now).is_some())
                .count() as i64,
        )
    }
}
