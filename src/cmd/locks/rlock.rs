//! `RLOCK key owner PX ms [WAIT ms]`: a shared lock, and
//! `SEMACQUIRE key owner LIMIT n PX ms [WAIT ms]`: one of n permits.
//!
//! Both reply with a fencing token (an integer: the grant's own revision) or nil when the key
//! is taken. Any number of owners hold an RLOCK together, and at most n a semaphore; neither
//! is ever held beside an exclusive LOCK. Each holder has its own lease, token and expiry.
//! Asking again as a current holder returns its own token and resets its lease (as LOCK
//! does). `WAIT ms` joins the key's FIFO queue, shared with LOCK (`WAIT 0`: for ever); the
//! readers (permits) at the head of the queue are granted together. `UNLOCK`, `RENEW` and
//! `LOCKINFO` serve these holds too. A SEMACQUIRE whose LIMIT differs from the one the key is
//! held or awaited with is refused (`-ERR semaphore limit mismatch`), as is an RLOCK on a
//! semaphore or a SEMACQUIRE on a shared lock. See `state::locks`.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::lock::{parse_px, queue_wait, QUEUED};
use crate::cmd::registry::flags::WRITE;
use crate::cmd::registry::{none, one, Replicated, Spec, Touches, ONE_KEY};
use crate::cmd::{Command, Ctx, Request};
use crate::resp::args::{syntax_error, NOT_INTEGER};
use crate::resp::{Args, Reply};
use crate::state::{self, Acquired, Keyspace, Mode, WaiterId};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new("rlock", -5, WRITE, ONE_KEY, parse_rlock)
        .key_specs("RW,access,update@i1/r0,1,0")
        .args("key:key owner PX=milliseconds:integer WAIT=wait-milliseconds:integer?")
        .palisade("Take a shared lock with a lease and return its fencing token"),
    Spec::new("semacquire", -7, WRITE, ONE_KEY, parse_semacquire)
        .key_specs("RW,access,update@i1/r0,1,0")
        .args("key:key owner LIMIT=permits:integer PX=milliseconds:integer WAIT=wait-milliseconds:integer?")
        .palisade("Take one of a semaphore's permits and return its fencing token"),
];

/// The largest LIMIT a semaphore takes.
pub const MAX_LIMIT: i64 = 1 << 20;

/// An RLOCK or SEMACQUIRE.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hold {
    /// The lock's key.
    pub key: Bytes,
    /// The owner: any string unique to the holder.
    pub owner: Bytes,
    /// [`Mode::Shared`] (RLOCK) or [`Mode::Semaphore`] (SEMACQUIRE, with its LIMIT).
    pub mode: Mode,
    /// Lease length in ms.
    pub ttl_ms: u64,
    /// WAIT: how long to wait in the queue, in ms (`Some(0)`: for ever; `None`: no wait).
    pub wait_ms: Option<u64>,
    /// Who waits: set by the session that blocks for the answer. Without it (scripts,
    /// transactions) the request never joins the queue.
    pub waiter: Option<WaiterId>,
}

/// Parses the optional `WAIT ms` that ends both commands.
fn parse_wait(args: &mut Args) -> Result<Option<u64>, Reply> {
    let mut wait_ms = None;
    while args.remaining() > 0 {
        if args.next_keyword()? != "WAIT" || wait_ms.is_some() {
            return Err(syntax_error());
        }
        wait_ms = Some(u64::try_from(args.next_i64()?).map_err(|_| Reply::err(NOT_INTEGER))?);
    }
    args.finish()?;
    Ok(wait_ms)
}

/// Parses RLOCK.
pub fn parse_rlock(args: &mut Args) -> Result<Request, Reply> {
    let key = args.arg()?;
    let owner = args.arg()?;
    let ttl_ms = parse_px(args, "rlock")?;
    let wait_ms = parse_wait(args)?;
    Ok(Request::Data(Command::Hold(Hold {
        key,
        owner,
        mode: Mode::Shared,
        ttl_ms,
        wait_ms,
        waiter: None,
    })))
}

/// Parses SEMACQUIRE: LIMIT, then PX, then an optional WAIT.
pub fn parse_semacquire(args: &mut Args) -> Result<Request, Reply> {
    let key = args.arg()?;
    let owner = args.arg()?;
    if args.next_keyword()? != "LIMIT" {
        return Err(syntax_error());
    }
    let limit = match args.next_i64()? {
        n if (1..=MAX_LIMIT).contains(&n) => n as u32,
        _ => {
            return Err(Reply::err(format!(
                "ERR LIMIT must be between 1 and {MAX_LIMIT}"
            )))
        }
    };
    let ttl_ms = parse_px(args, "semacquire")?;
    let wait_ms = parse_wait(args)?;
    Ok(Request::Data(Command::Hold(Hold {
        key,
        owner,
        mode: Mode::Semaphore(limit),
        ttl_ms,
        wait_ms,
        waiter: None,
    })))
}

impl Replicated for Hold {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["rlock", "semacquire"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Grants a hold if the key admits it and nobody is queued for it (or the owner holds it
    /// already); a client with a waiter joins the queue otherwise.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let wait = queue_wait(self.waiter, self.wait_ms, ctx.now);
        let a = state::Acquire {
            key: &self.key,
            owner: &self.owner,
            ttl_ms: self.ttl_ms,
            delay_ms: 0,
            wait,
        };
        match ks.lock_acquire_kind(a, self.mode, ctx.now, ctx.revision) {
            Ok(Acquired::Granted(t) | Acquired::Held(t)) => Reply::Int(t as i64),
            Ok(Acquired::Queued) => Reply::Simple(QUEUED.into()),
            Ok(Acquired::Busy) => Reply::Nil,
            Err(e) => Reply::err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(words: &[&str]) -> Result<Request, Reply> {
        let argv: Vec<Bytes> = words
            .iter()
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect();
        let spec = crate::cmd::lookup(words[0]).expect("registered");
        (spec.parse)(&mut Args::new(argv))
    }

    #[test]
    fn parses_both_commands_and_refuses_bad_input() {
        let Ok(Request::Data(Command::Hold(h))) = parse(&["rlock", "k", "o", "PX", "100"]) else {
            panic!("rlock")
        };
        assert_eq!((h.mode, h.ttl_ms, h.wait_ms), (Mode::Shared, 100, None));
        let Ok(Request::Data(Command::Hold(h))) = parse(&[
            "semacquire",
            "k",
            "o",
            "LIMIT",
            "3",
            "PX",
            "100",
            "WAIT",
            "0",
        ]) else {
            panic!("semacquire")
        };
        assert_eq!((h.mode, h.wait_ms), (Mode::Semaphore(3), Some(0)));
        assert!(parse(&["semacquire", "k", "o", "LIMIT", "0", "PX", "100"]).is_err());
        assert!(parse(&["semacquire", "k", "o", "PX", "100", "LIMIT", "2"]).is_err());
        assert!(parse(&["rlock", "k", "o", "PX", "0"]).is_err());
        assert!(parse(&["rlock", "k", "o", "PX", "10", "WAIT", "1", "WAIT", "2"]).is_err());
        assert!(parse(&["rlock", "k", "o", "PX", "10", "WAIT", "-1"]).is_err());
    }
}
