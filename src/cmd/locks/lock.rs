//! `LOCK key owner PX ms [WAIT ms] [DELAY ms]`: acquire a lease and get its fencing token.
//!
//! Replies with the token (an integer) or nil when another owner holds the lock. Locking
//! again with the same owner returns the same token and resets the TTL, which makes a retry
//! after a timed-out request safe. With `WAIT ms` the client joins the key's FIFO queue in
//! the replicated state and is answered when the lock is granted to it, or with nil after ms
//! (`WAIT 0`: for ever); the server's side of the wait is `server::session::lockwait`.
//! `DELAY ms` is the lease's lock-delay: if it *expires* (not on UNLOCK), nobody is granted
//! the key until the delay has passed on the cluster clock.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::registry::flags::WRITE;
use crate::cmd::registry::{none, one, Replicated, Spec, Touches, ONE_KEY};
use crate::cmd::{Command, Ctx, Request};
use crate::resp::args::{syntax_error, NOT_INTEGER};
use crate::resp::{Args, Reply};
use crate::state::{self, Acquired, Keyspace, WaiterId};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[Spec::new("lock", -5, WRITE, ONE_KEY, parse)
        .key_specs("RW,access,update@i1/r0,1,0")
        .args("key:key owner PX=milliseconds:integer WAIT=wait-milliseconds:integer? DELAY=delay-milliseconds:integer?")
    .palisade("Take a lock with a lease and return its fencing token")];

/// The reply of a LOCK whose client joined the queue. The session that sent it waits for the
/// grant; no client ever sees it (scripts and transactions send LOCK without a waiter).
pub const QUEUED: &str = "PALISADE-LOCK-QUEUED";

/// A LOCK without WAIT or DELAY.
///
/// Builds before the queue (commit e336a38 and older) also wrote WAIT into `wait_ms` and
/// retried on the server; their log entries and snapshots still hold it, and it is ignored:
/// such an entry is one attempt that does not wait, as it always was.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lock {
    /// The lock's key.
    pub key: Bytes,
    /// The owner: any string unique to the holder.
    pub owner: Bytes,
    /// Lease length in ms.
    pub ttl_ms: u64,
    /// Unused (see above); 0 in every entry this build writes.
    pub wait_ms: u64,
}

/// A LOCK with WAIT or DELAY (or with the server's `--lock-delay-ms` default).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Acquire {
    /// The lock's key.
    pub key: Bytes,
    /// The owner: any string unique to the holder.
    pub owner: Bytes,
    /// Lease length in ms.
    pub ttl_ms: u64,
    /// WAIT: how long to wait in the queue, in ms (`Some(0)`: for ever; `None`: no wait).
    pub wait_ms: Option<u64>,
    /// DELAY: the lease's lock-delay in ms (`None`: the server's default, filled in by the
    /// session before it proposes; absent in scripts, where it means none).
    pub delay_ms: Option<u64>,
    /// Who waits: set by the session that blocks for the answer. Without it (scripts,
    /// transactions) a LOCK never joins the queue.
    pub waiter: Option<WaiterId>,
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

/// Parses LOCK: PX first, then WAIT and DELAY in any order, each at most once.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    let key = args.arg()?;
    let owner = args.arg()?;
    let ttl_ms = parse_px(args, "lock")?;
    let (mut wait_ms, mut delay_ms) = (None, None);
    while args.remaining() > 0 {
        let slot = match args.next_keyword()?.as_str() {
            "WAIT" => &mut wait_ms,
            "DELAY" => &mut delay_ms,
            _ => return Err(syntax_error()),
        };
        if slot.is_some() {
            return Err(syntax_error());
        }
        *slot = Some(u64::try_from(args.next_i64()?).map_err(|_| Reply::err(NOT_INTEGER))?);
    }
    args.finish()?;
    let cmd = if wait_ms.is_none() && delay_ms.is_none() {
        Command::Lock(Lock {
            key,
            owner,
            ttl_ms,
            wait_ms: 0,
        })
    } else {
        Command::Acquire(Acquire {
            key,
            owner,
            ttl_ms,
            wait_ms,
            delay_ms,
            waiter: None,
        })
    };
    Ok(Request::Data(cmd))
}

/// The queue wait of a request with `waiter` and `WAIT wait_ms` applied at `now`: who
/// waits, and until when on the cluster clock (`None`: for ever, `WAIT 0`). No waiter (a
/// script, a transaction) or no WAIT: no wait.
pub fn queue_wait(
    waiter: Option<WaiterId>,
    wait_ms: Option<u64>,
    now: u64,
) -> Option<(WaiterId, Option<u64>)> {
    match (waiter, wait_ms) {
        (Some(id), Some(0)) => Some((id, None)),
        (Some(id), Some(ms)) => Some((id, Some(now.saturating_add(ms)))),
        _ => None,
    }
}

/// LOCK's reply for an outcome.
fn reply(outcome: Acquired) -> Reply {
    match outcome {
        Acquired::Granted(t) | Acquired::Held(t) => Reply::Int(t as i64),
        Acquired::Queued => Reply::Simple(QUEUED.into()),
        Acquired::Busy => Reply::Nil,
    }
}

impl Replicated for Lock {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["lock"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Grants the lock if it is free (and nobody is queued for it) or already held by this
    /// owner.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let a = state::Acquire {
            key: &self.key,
            owner: &self.owner,
            ttl_ms: self.ttl_ms,
            delay_ms: 0,
            wait: None,
        };
        reply(ks.lock_acquire(a, ctx.now, ctx.revision))
    }
}

impl Replicated for Acquire {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["lock"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// As [`Lock`], but a client with a waiter joins the queue when the lock is taken, and
    /// the lease gets its lock-delay.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let wait = queue_wait(self.waiter, self.wait_ms, ctx.now);
        let a = state::Acquire {
            key: &self.key,
            owner: &self.owner,
            ttl_ms: self.ttl_ms,
            delay_ms: self.delay_ms.unwrap_or(0),
            wait,
        };
        reply(ks.lock_acquire(a, ctx.now, ctx.revision))
    }
}
