//! `BLPOP key [key ...] timeout` and `BRPOP key [key ...] timeout`.
//!
//! Apply never blocks: it pops from the first non-empty list, or replies with a null array.
//! A client's blocking pop is proposed wrapped in a `popwait::PopWait`, which queues the
//! client in the replicated wait queue when there is nothing to pop; the queue is served in
//! arrival order as pushes arrive (`cmd::popwait`). Inside MULTI or a script the command
//! behaves as in Redis: one non-blocking attempt.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::list::{pop_n, End};
use crate::cmd::registry::flags::BLOCKING;
use crate::cmd::registry::{many, none, Replicated, Spec, Touches};
use crate::cmd::{Command, Ctx, Request};
use crate::resp::{Args, Reply};
use crate::state::Keyspace;

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new("blpop", -3, BLOCKING, (1, -2, 1), parse)
        .key_specs("RW,access,delete@i1/r-2,1,0")
        .args("key:key* timeout:double")
        .docs(
            "Pop from the head of the first non-empty list, waiting while all are empty",
            "2.0.0",
            "list",
        ),
    Spec::new("brpop", -3, BLOCKING, (1, -2, 1), parse)
        .key_specs("RW,access,delete@i1/r-2,1,0")
        .args("key:key* timeout:double")
        .docs(
            "Pop from the tail of the first non-empty list, waiting while all are empty",
            "2.0.0",
            "list",
        ),
];

/// A blocking pop.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BPop {
    /// The keys, tried in order.
    pub keys: Vec<Bytes>,
    /// Which end.
    pub end: End,
    /// How long the session may block, in ms (0: forever).
    pub timeout_ms: u64,
}

/// Parses a timeout in (fractional) seconds with Redis's error texts.
pub fn parse_timeout(raw: &[u8]) -> Result<u64, Reply> {
    let secs: f64 = std::str::from_utf8(raw)
        .ok()
        .map(str::trim)
        .filter(|s| !s.is_empty() && !s.eq_ignore_ascii_case("nan"))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| Reply::err("ERR timeout is not a float or out of range"))?;
    // Redis rounds up (`ceill`): 0.0001 s is 1 ms, not 0, which would mean "forever".
    let ms = (secs * 1000.0).ceil();
    // Redis casts to long long: infinities and overflow come out negative.
    if !(0.0..9.2e18).contains(&ms) {
        return Err(Reply::err("ERR timeout is negative"));
    }
    Ok(ms as u64)
}

/// Parses BLPOP/BRPOP.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    let end = if args.name() == "brpop" {
        End::Right
    } else {
        End::Left
    };
    let mut keys = args.rest();
    let raw = keys.pop().unwrap_or_default();
    let timeout_ms = parse_timeout(&raw)?;
    Ok(Request::Data(Command::BPop(BPop {
        keys,
        end,
        timeout_ms,
    })))
}

impl Replicated for BPop {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["blpop", "brpop"], many(&self.keys), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Pops from the first non-empty list: `[key, element]`, or a null array.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        for key in &self.keys {
            match ks.get_list(key, ctx.now) {
                Err(e) => return e.into(),
                Ok(Some(l)) if !l.is_empty() => {
                    if let Some(v) = pop_n(ks, key, self.end, 1, ctx.now).pop() {
                        return Reply::Array(vec![Reply::Bulk(key.clone()), Reply::Bulk(v)]);
                    }
                }
                Ok(_) => {}
            }
        }
        Reply::NilArray
    }
}
