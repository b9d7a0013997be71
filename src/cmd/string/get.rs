//! `GET key` and `GETDEL key`.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::registry::flags::{READ_FAST, WRITE_FAST};
use crate::cmd::registry::{none, one, Replicated, Spec, Touches, ONE_KEY};
use crate::cmd::{Command, Ctx, Request};
use crate::resp::{Args, Reply};
use crate::state::Keyspace;

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new("get", 2, READ_FAST, ONE_KEY, parse)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key")
        .docs("Return the string stored at a key", "1.0.0", "string"),
    Spec::new("getdel", 2, WRITE_FAST, ONE_KEY, parse_getdel)
        .key_specs("RW,access,delete@i1/r0,1,0")
        .args("key:key")
        .docs(
            "Return the string stored at a key and remove the key",
            "6.2.0",
            "string",
        ),
];

/// `GET key`: the value, or nil.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Get {
    /// The key.
    pub key: Bytes,
}

/// Parses GET.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    Ok(Request::Data(Command::Get(Get { key: args.arg()? })))
}

impl Replicated for Get {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["get"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        true
    }

    /// Reads the key at cluster time `now`.
    fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        match ks.get_str(&self.key, now) {
            Ok(v) => v.cloned().map_or(Reply::Nil, Reply::Bulk),
            Err(e) => e.into(),
        }
    }
}

/// `GETDEL key`: the value (or nil), and the key is deleted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GetDel {
    /// The key.
    pub key: Bytes,
}

/// Parses GETDEL.
pub fn parse_getdel(args: &mut Args) -> Result<Request, Reply> {
    Ok(Request::Data(Command::GetDel(GetDel { key: args.arg()? })))
}

impl Replicated for GetDel {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["getdel"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Applies GETDEL.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        match ks.get_str(&self.key, ctx.now) {
            Ok(Some(v)) => {
                let v = v.clone();
                ks.remove(&self.key, ctx.now);
                ks.notify(crate::state::notify::GENERIC, "del", &self.key);
                Reply::Bulk(v)
            }
            Ok(None) => Reply::Nil,
            Err(e) => e.into(),
        }
    }
}
