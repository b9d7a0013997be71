//! `LOCK key owner PX ms [WAIT ms]`: acquire a lease and get its fencing token.
//!
//! Replies with the token (an integer) or nil when another owner holds the lock. Locking
//! again with the same owner returns the same token and resets the TTL, which makes a retry
//! after a timed-out request safe. WAIT is handled by the server, which retries until the
//! lock is granted or the wait elapses.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::registry::flags::WRITE;
use super::registry::{Replicated, Spec, ONE_KEY};
use super::{Command, Ctx, Request};
use crate::resp::args::{syntax_error, NOT_INTEGER};
use crate::resp::{Args, Reply};
use crate::state::{Entry, Keyspace, Value};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[Spec::new("lock", -5, WRITE, ONE_KEY, parse)
    .palisade("Take a lock with a lease and return its fencing token")];

/// A parsed LOCK.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lock {
    /// The lock's key.
    pub key: Bytes,
    /// The owner: any string unique to the holder.
    pub owner: Bytes,
    /// Lease length in ms.
    pub ttl_ms: u64,
    /// How long to wait for the lock, in ms (0: do not wait).
    pub wait_ms: u64,
}

/// Parses `PX ms` for LOCK and RENEW.
pub fn parse_px(args: &mut Args, cmd: &str) -> Result<u64, Reply> {
    if args.next_keyword()? != "PX" {
        return Err(syntax_error());
    }
    match args.next_i64()? {
        ms if ms > 0 => Ok(ms as u64),
        _ => Err(Reply::err(format!(
            "ERR invalid expire time in '{cmd}' command"
        ))),
    }
}

/// Parses LOCK.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    let key = args.arg()?;
    let owner = args.arg()?;
    let ttl_ms = parse_px(args, "lock")?;
    let mut wait_ms = 0;
    if args.remaining() > 0 {
        if args.next_keyword()? != "WAIT" {
            return Err(syntax_error());
        }
        wait_ms = u64::try_from(args.next_i64()?).map_err(|_| Reply::err(NOT_INTEGER))?;
    }
    args.finish()?;
    Ok(Request::Write(Command::Lock(Lock {
        key,
        owner,
        ttl_ms,
        wait_ms,
    })))
}

impl Replicated for Lock {
    fn is_read(&self) -> bool {
        false
    }

    /// Grants the lock if it is free or already held by this owner.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let expire_at = Some(ctx.now.saturating_add(self.ttl_ms));
        match ks.get(&self.key, ctx.now) {
            Some(Entry {
                value: Value::Str(v),
                token,
                ..
            }) if *v == self.owner => {
                let token = *token;
                ks.set_expire(&self.key, expire_at, ctx.now);
                Reply::Int(token as i64)
            }
            Some(_) => Reply::Nil,
            None => {
                let entry = Entry {
                    value: Value::Str(self.owner.clone()),
                    expire_at,
                    token: ctx.revision,
                    modified: 0,
                };
                ks.insert(self.key.clone(), entry);
                Reply::Int(ctx.revision as i64)
            }
        }
    }
}
