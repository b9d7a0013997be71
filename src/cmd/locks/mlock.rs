//! `MLOCK owner PX ms [WAIT ms] KEYS n key [key ...]`: exclusive leases on several keys,
//! all granted in one log entry or none, and
//! `MUNLOCK owner KEYS n key [key ...]`: releases those the owner holds.
//!
//! MLOCK replies with an array of fencing tokens, one per key in the order given (each the
//! revision of its own grant; a key the owner already held keeps its token and gets a new
//! lease), or nil when a key is taken. `WAIT ms` joins every key's FIFO queue at once and
//! is answered when all the keys can be granted together (`WAIT 0`: for ever); two MLOCKs
//! waiting on overlapping keys never deadlock (see `state::mlocks`). The leases are
//! independent afterwards: UNLOCK, RENEW and LOCKINFO work on each key. MUNLOCK replies with
//! the number of keys it released.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::lock::{queue_wait, QUEUED};
use crate::cmd::registry::{many, none, Replicated, Spec, Touches, NO_KEYS};
use crate::cmd::{Command, Ctx, Request};
use crate::resp::args::{syntax_error, NOT_INTEGER};
use crate::resp::{Args, Reply};
use crate::state::{Keyspace, MultiAcquire, MultiAcquired, WaiterId};

/// This file's rows of the command table. The keys follow `KEYS n` (Redis's movable keys):
/// COMMAND GETKEYS and ACL find them with [`key_args`].
pub static COMMANDS: &[Spec] = &[
    Spec::new(
        "mlock",
        -6,
        &["write", "denyoom", "movablekeys"],
        NO_KEYS,
        parse_mlock,
    )
        .key_specs("RW,access,update@kKEYS,2/n0,1,1")
        .args("owner PX=milliseconds:integer WAIT=wait-milliseconds:integer? KEYS=numkeys:integer key:key*")
    .palisade("Take locks on several keys at once, all or none, and return their fencing tokens"),
    Spec::new(
        "munlock",
        -5,
        &["write", "fast", "movablekeys"],
        NO_KEYS,
        parse_munlock,
    )
        .key_specs("RW,access,delete@kKEYS,2/n0,1,1")
        .args("owner KEYS=numkeys:integer key:key*")
    .palisade("Release the locks an owner holds on several keys"),
];

/// The most keys one MLOCK takes (a queued MLOCK's record lists its keys under each key).
pub const MAX_KEYS: usize = 128;
/// The most bytes an MLOCK's keys may have together: a queued MLOCK's key list is kept in
/// every one of its keys' records, so this bounds what one waiter adds to the state.
pub const MAX_KEY_BYTES: usize = 16 * 1024;

/// An MLOCK.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MLock {
    /// The owner: any string unique to the holder.
    pub owner: Bytes,
    /// The keys, distinct, in the command's order.
    pub keys: Vec<Bytes>,
    /// Lease length in ms, for every key.
    pub ttl_ms: u64,
    /// WAIT: how long to wait in the queues, in ms (`Some(0)`: for ever; `None`: no wait).
    pub wait_ms: Option<u64>,
    /// Who waits: set by the session that blocks for the answer. Without it (scripts,
    /// transactions) the request never joins the queues.
    pub waiter: Option<WaiterId>,
}

/// An MUNLOCK.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MUnlock {
    /// The owner releasing the keys.
    pub owner: Bytes,
    /// The keys.
    pub keys: Vec<Bytes>,
}

/// The keys of an MLOCK or MUNLOCK line (`argv[0]` is the command): the `n` words after
/// `KEYS n`, found past the owner and the option pairs. Empty if the line has none.
pub fn key_args(argv: &[Bytes]) -> &[Bytes] {
    let mut i = 2;
    while i + 1 < argv.len() {
        if argv[i].eq_ignore_ascii_case(b"KEYS") {
            let n = std::str::from_utf8(&argv[i + 1])
                .ok()
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap_or(0);
            let from = (i + 2).min(argv.len());
            let to = from.saturating_add(n).min(argv.len());
            return &argv[from..to];
        }
        i += 2;
    }
    &[]
}

/// Parses `KEYS n key [key ...]`, which ends both commands: n distinct keys, no more.
fn parse_keys(args: &mut Args) -> Result<Vec<Bytes>, Reply> {
    let n = args.next_i64()?;
    if n <= 0 {
        return Err(Reply::err("ERR numkeys should be greater than 0"));
    }
    let n = n as usize;
    if n > args.remaining() {
        return Err(Reply::err(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    if n > MAX_KEYS {
        return Err(Reply::err(format!(
            "ERR too many keys: at most {MAX_KEYS} per command"
        )));
    }
    let keys: Vec<Bytes> = (0..n).map(|_| args.arg()).collect::<Result<_, _>>()?;
    args.finish()?;
    if keys.iter().map(Bytes::len).sum::<usize>() > MAX_KEY_BYTES {
        return Err(Reply::err(format!(
            "ERR the keys are too long: at most {MAX_KEY_BYTES} bytes together"
        )));
    }
    let mut sorted: Vec<&Bytes> = keys.iter().collect();
    sorted.sort();
    if sorted.windows(2).any(|w| w[0] == w[1]) {
        return Err(Reply::err("ERR the same key appears twice"));
    }
    Ok(keys)
}

/// Parses MLOCK: `PX ms` and an optional `WAIT ms` in either order, then `KEYS n ...`.
pub fn parse_mlock(args: &mut Args) -> Result<Request, Reply> {
    let owner = args.arg()?;
    let (mut ttl_ms, mut wait_ms) = (None, None);
    loop {
        match args.next_keyword()?.as_str() {
            "PX" if ttl_ms.is_none() => {
                ttl_ms = Some(match args.next_i64()? {
                    ms if ms > 0 => ms as u64,
                    _ => return Err(Reply::err("ERR invalid expire time in 'mlock' command")),
                })
            }
            "WAIT" if wait_ms.is_none() => {
                wait_ms =
                    Some(u64::try_from(args.next_i64()?).map_err(|_| Reply::err(NOT_INTEGER))?)
            }
            "KEYS" => break,
            _ => return Err(syntax_error()),
        }
    }
    let Some(ttl_ms) = ttl_ms else {
        return Err(syntax_error());
    };
    let keys = parse_keys(args)?;
    Ok(Request::Data(Command::MLock(MLock {
        owner,
        keys,
        ttl_ms,
        wait_ms,
        waiter: None,
    })))
}

/// Parses MUNLOCK.
pub fn parse_munlock(args: &mut Args) -> Result<Request, Reply> {
    let owner = args.arg()?;
    if args.next_keyword()? != "KEYS" {
        return Err(syntax_error());
    }
    let keys = parse_keys(args)?;
    Ok(Request::Data(Command::MUnlock(MUnlock { owner, keys })))
}

/// The reply for the tokens of a granted MLOCK.
pub fn tokens_reply(tokens: &[u64]) -> Reply {
    Reply::Array(tokens.iter().map(|&t| Reply::Int(t as i64)).collect())
}

impl Replicated for MLock {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["mlock"], many(&self.keys), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Grants every key if all are free (or the owner's) and nobody else waits for them; a
    /// client with a waiter joins every key's queue otherwise.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let wait = queue_wait(self.waiter, self.wait_ms, ctx.now);
        let a = MultiAcquire {
            keys: &self.keys,
            owner: &self.owner,
            ttl_ms: self.ttl_ms,
            wait,
        };
        match ks.lock_acquire_all(a, ctx.now, ctx.revision) {
            MultiAcquired::Granted(tokens) => tokens_reply(&tokens),
            MultiAcquired::Queued => Reply::Simple(QUEUED.into()),
            MultiAcquired::Busy => Reply::Nil,
        }
    }
}

impl Replicated for MUnlock {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["munlock"], many(&self.keys), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Releases each key the owner holds and grants it to its first waiter.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let n = ks.lock_release_all(&self.keys, &self.owner, ctx.now, ctx.revision);
        Reply::Int(n as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<Bytes> {
        words
            .iter()
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect()
    }

    fn parse(words: &[&str]) -> Result<Request, Reply> {
        let spec = crate::cmd::lookup(words[0]).expect("registered");
        (spec.parse)(&mut Args::new(argv(words)))
    }

    #[test]
    fn parses_both_commands_and_refuses_bad_input() {
        let Ok(Request::Data(Command::MLock(m))) = parse(&[
            "mlock", "o", "PX", "100", "WAIT", "0", "KEYS", "2", "a", "b",
        ]) else {
            panic!("mlock")
        };
        assert_eq!((m.ttl_ms, m.wait_ms, m.keys.len()), (100, Some(0), 2));
        let Ok(Request::Data(Command::MLock(m))) =
            parse(&["mlock", "o", "wait", "5", "px", "10", "keys", "1", "a"])
        else {
            panic!("options in either order")
        };
        assert_eq!((m.ttl_ms, m.wait_ms), (10, Some(5)));
        let Ok(Request::Data(Command::MUnlock(u))) =
            parse(&["munlock", "o", "KEYS", "2", "a", "b"])
        else {
            panic!("munlock")
        };
        assert_eq!(u.keys, argv(&["a", "b"]));
        for bad in [
            &["mlock", "o", "PX", "100", "KEYS", "2", "a"][..],
            &["mlock", "o", "PX", "100", "KEYS", "1", "a", "b"],
            &["mlock", "o", "PX", "100", "KEYS", "0"],
            &["mlock", "o", "PX", "100", "KEYS", "2", "a", "a"],
            &["mlock", "o", "PX", "0", "KEYS", "1", "a"],
            &["mlock", "o", "WAIT", "1", "KEYS", "1", "a"],
            &["mlock", "o", "PX", "1", "PX", "2", "KEYS", "1", "a"],
            &["mlock", "o", "PX", "1", "WAIT", "-1", "KEYS", "1", "a"],
            &["mlock", "o", "PX", "1", "KEYS", "x", "a"],
            &["munlock", "o", "KEYS", "1", "a", "b"],
            &["munlock", "o", "PX", "1", "a"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?} parsed");
        }
        let many: Vec<String> = (0..=MAX_KEYS).map(|i| format!("k{i}")).collect();
        let mut line = vec!["mlock", "o", "PX", "10", "KEYS"];
        let n = many.len().to_string();
        line.push(&n);
        line.extend(many.iter().map(String::as_str));
        assert!(parse(&line).is_err(), "more than MAX_KEYS");
        let long = "k".repeat(MAX_KEY_BYTES / 2 + 1);
        assert!(
            parse(&[
                "mlock",
                "o",
                "PX",
                "10",
                "KEYS",
                "2",
                &long,
                &format!("{long}2")
            ])
            .is_err(),
            "keys over MAX_KEY_BYTES together"
        );
        let fits = "k".repeat(MAX_KEY_BYTES / 2 - 1);
        assert!(parse(&[
            "mlock",
            "o",
            "PX",
            "10",
            "KEYS",
            "2",
            &fits,
            &format!("{fits}2")
        ])
        .is_ok());
    }

    #[test]
    fn key_args_finds_the_keys_after_any_options() {
        let line = argv(&["mlock", "o", "PX", "1", "WAIT", "2", "KEYS", "2", "a", "b"]);
        assert_eq!(key_args(&line), &argv(&["a", "b"])[..]);
        let line = argv(&["munlock", "o", "keys", "1", "a"]);
        assert_eq!(key_args(&line), &argv(&["a"])[..]);
        assert!(key_args(&argv(&["mlock", "o", "PX", "1"])).is_empty());
        // A count beyond the line names the keys there are.
        let line = argv(&["munlock", "o", "KEYS", "9", "a"]);
        assert_eq!(key_args(&line), &argv(&["a"])[..]);
    }
}
