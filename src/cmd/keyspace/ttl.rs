//! `TTL key` and `PTTL key`: -2 if missing, -1 without a deadline, else the time left.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::registry::flags::READ_FAST;
use crate::cmd::registry::{none, one, Replicated, Spec, Touches, ONE_KEY};
use crate::cmd::{Command, Request};
use crate::resp::{Args, Reply};
use crate::state::Keyspace;

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new("ttl", 2, READ_FAST, ONE_KEY, parse)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key")
        .docs(
            "Return a key's remaining time to live in seconds",
            "1.0.0",
            "generic",
        ),
    Spec::new("pttl", 2, READ_FAST, ONE_KEY, parse)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key")
        .docs(
            "Return a key's remaining time to live in milliseconds",
            "2.6.0",
            "generic",
        ),
];

/// A parsed TTL or PTTL.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ttl {
    /// The key.
    pub key: Bytes,
    /// True for PTTL (milliseconds).
    pub millis: bool,
}

/// Parses TTL/PTTL.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    let millis = args.name() == "pttl";
    Ok(Request::Data(Command::Ttl(Ttl {
        key: args.arg()?,
        millis,
    })))
}

impl Replicated for Ttl {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["ttl", "pttl"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        true
    }

    /// Reads the remaining time; TTL rounds to the nearest second as Redis does.
    fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        match ks.get(&self.key, now) {
            None => Reply::Int(-2),
            Some(e) => match e.pttl(now) {
                -1 => Reply::Int(-1),
                ms if self.millis => Reply::Int(ms),
                ms => Reply::Int((ms + 500) / 1000),
            },
        }
    }
}
