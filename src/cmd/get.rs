//! `GET key` and `GETDEL key`.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::{Command, Ctx, Request};
use crate::resp::{Args, Reply};
use crate::state::Keyspace;

/// `GET key`: the value, or nil.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Get {
    /// The key.
    pub key: Bytes,
}

/// Parses GET.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    Ok(Request::Read(Command::Get(Get { key: args.arg()? })))
}

impl Get {
    /// Reads the key at cluster time `now`.
    pub fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        match ks.get_str(&self.key, now) {
            Ok(v) => v.cloned().map_or(Reply::Nil, Reply::Bulk),
            Err(e) => e,
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
    Ok(Request::Write(Command::GetDel(GetDel { key: args.arg()? })))
}

impl GetDel {
    /// Applies GETDEL.
    pub fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        match ks.get_str(&self.key, ctx.now) {
            Ok(Some(v)) => {
                let v = v.clone();
                ks.remove(&self.key, ctx.now);
                Reply::Bulk(v)
            }
            Ok(None) => Reply::Nil,
            Err(e) => e,
        }
    }
}
