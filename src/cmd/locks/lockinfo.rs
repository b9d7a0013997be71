//! `LOCKINFO key`: a map of owner, token and pttl (a flat array in RESP2), then `waiters`
//! (the queue length) and `delay` (the remaining lock-delay, ms) when they are not 0; nil
//! when the lock is free, nobody waits and no lock-delay runs. A lock without waiters or
//! delay answers exactly the three fields it always did.
//!
//! A key held by RLOCK or SEMACQUIRE answers `mode` (`shared` or `semaphore`), `limit` (a
//! semaphore's), `holders` (an array of maps of owner, token and pttl, in grant order), then
//! `waiters` when not 0. An exclusive lock keeps the reply above (its mode is `exclusive`:
//! the reply without a `mode` field).

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::registry::flags::READ_FAST;
use crate::cmd::registry::{none, one, Replicated, Spec, Touches, ONE_KEY};
use crate::cmd::{Command, Request};
use crate::resp::{Args, Reply};
use crate::state::{Holder, Keyspace, Mode, Value};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[Spec::new("lockinfo", 2, READ_FAST, ONE_KEY, parse)
    .key_specs("RO,access@i1/r0,1,0")
    .args("key:key")
    .palisade("Show a lock's owner, fencing token and remaining lease")];

/// A parsed LOCKINFO.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockInfo {
    /// The lock's key.
    pub key: Bytes,
}

/// Parses LOCKINFO.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    Ok(Request::Data(Command::LockInfo(LockInfo {
        key: args.arg()?,
    })))
}

impl Replicated for LockInfo {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["lockinfo"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        true
    }

    /// Describes the current holder, the queue length and the remaining lock-delay
    /// (WRONGTYPE for a hash or list: it is not a lock). A free lock with waiters or a
    /// running lock-delay has a nil owner and token and a pttl of -2.
    fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        let (waiters, delay) = ks.lock_queue(&self.key, now);
        let (owner, token, pttl) = match ks.get(&self.key, now) {
            Some(e) => {
                let Value::Str(owner) = &e.value else {
                    return Reply::err(crate::cmd::WRONGTYPE);
                };
                (
                    Reply::Bulk(owner.clone()),
                    Reply::Int(e.token as i64),
                    e.pttl(now),
                )
            }
            None => {
                if let Some((mode, holders)) = ks.lock_holders(&self.key, now) {
                    return holds_reply(mode, &holders, waiters, now);
                }
                if waiters == 0 && delay == 0 {
                    return Reply::Nil;
                }
                (Reply::Nil, Reply::Nil, -2)
            }
        };
        let mut fields = vec![
            (Reply::text("owner"), owner),
            (Reply::text("token"), token),
            (Reply::text("pttl"), Reply::Int(pttl)),
        ];
        if waiters > 0 {
            fields.push((Reply::text("waiters"), Reply::Int(waiters as i64)));
        }
        if delay > 0 {
            fields.push((Reply::text("delay"), Reply::Int(delay as i64)));
        }
        Reply::Map(fields)
    }
}

/// LOCKINFO of a key held by RLOCK or SEMACQUIRE.
fn holds_reply(mode: Mode, holders: &[&Holder], waiters: usize, now: u64) -> Reply {
    let mut fields = vec![(Reply::text("mode"), Reply::text(mode.name()))];
    if let Mode::Semaphore(n) = mode {
        fields.push((Reply::text("limit"), Reply::Int(i64::from(n))));
    }
    let list = holders
        .iter()
        .map(|h| {
            let pttl = h.expire_at.saturating_sub(now).min(i64::MAX as u64) as i64;
            Reply::Map(vec![
                (Reply::text("owner"), Reply::Bulk(h.owner.clone())),
                (Reply::text("token"), Reply::Int(h.token as i64)),
                (Reply::text("pttl"), Reply::Int(pttl)),
            ])
        })
        .collect();
    fields.push((Reply::text("holders"), Reply::Array(list)));
    if waiters > 0 {
        fields.push((Reply::text("waiters"), Reply::Int(waiters as i64)));
    }
    Reply::Map(fields)
}
