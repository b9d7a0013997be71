//! `TYPE key`: the type name as a status reply, or `none`.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::registry::flags::READ_FAST;
use crate::cmd::registry::{none, one, Replicated, Spec, Touches, ONE_KEY};
use crate::cmd::{Command, Request};
use crate::resp::{Args, Reply};
use crate::state::Keyspace;

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[Spec::new("type", 2, READ_FAST, ONE_KEY, parse)
    .key_specs("RO@i1/r0,1,0")
    .args("key:key")
    .docs(
        "Return the type of the value stored at a key",
        "1.0.0",
        "generic",
    )];

/// A parsed TYPE.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Type {
    /// The key.
    pub key: Bytes,
}

/// Parses TYPE.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    Ok(Request::Data(Command::Type(Type { key: args.arg()? })))
}

impl Replicated for Type {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["type"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        true
    }

    /// Reads the type.
    fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        Reply::Simple(
            ks.get(&self.key, now)
                .map_or("none", |e| e.value.type_name())
                .into(),
        )
    }
}
