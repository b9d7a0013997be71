//! `LOCKINFO key`: a map of owner, token and pttl (a flat array in RESP2), or nil.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::registry::flags::READ_FAST;
use super::registry::{Replicated, Spec, ONE_KEY};
use super::{Command, Request};
use crate::resp::{Args, Reply};
use crate::state::{Keyspace, Value};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[Spec::new("lockinfo", 2, READ_FAST, ONE_KEY, parse)
    .palisade("Show a lock's owner, fencing token and remaining lease")];

/// A parsed LOCKINFO.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockInfo {
    /// The lock's key.
    pub key: Bytes,
}

/// Parses LOCKINFO.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    Ok(Request::Read(Command::LockInfo(LockInfo {
        key: args.arg()?,
    })))
}

impl Replicated for LockInfo {
    fn is_read(&self) -> bool {
        true
    }

    /// Describes the current holder (WRONGTYPE for a hash or list: it is not a lock).
    fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        match ks.get(&self.key, now) {
            Some(e) => {
                let Value::Str(owner) = &e.value else {
                    return Reply::err(super::WRONGTYPE);
                };
                Reply::Map(vec![
                    (Reply::text("owner"), Reply::Bulk(owner.clone())),
                    (Reply::text("token"), Reply::Int(e.token as i64)),
                    (Reply::text("pttl"), Reply::Int(e.pttl(now))),
                ])
            }
            None => Reply::Nil,
        }
    }
}
