//! `BZPOPMIN key [key ...] timeout`, `BZPOPMAX key [key ...] timeout` and
//! `BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count]`.
//!
//! As with BLPOP (`blpop.rs`), apply never blocks: it pops from the first non-empty sorted
//! set or replies with a null array. A client's blocking pop is proposed wrapped in a
//! `popwait::PopWait`, which queues it in the replicated wait queue when there is nothing
//! to pop. Inside MULTI or a script it is one non-blocking attempt, as in Redis.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::blpop::parse_timeout;
use crate::cmd::registry::{many, none, Replicated, Spec, Touches, NO_KEYS};
use crate::cmd::zset::{parse_mpop_tail, PopForm, ZPop};
use crate::cmd::{Command, Ctx, Request};
use crate::resp::{Args, Reply};
use crate::state::Keyspace;

const BLOCKING_FAST: &[&str] = &["write", "noscript", "blocking", "fast"];
const BLOCKING_MOVABLE: &[&str] = &["write", "blocking", "movablekeys"];

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new("bzpopmin", -3, BLOCKING_FAST, (1, -2, 1), parse)
        .key_specs("RW,access,delete@i1/r-2,1,0")
        .args("key:key* timeout:double").docs(
        "Pop the lowest-scored member of the first non-empty sorted set, waiting while all are empty",
        "5.0.0",
        "sorted-set",
    ),
    Spec::new("bzpopmax", -3, BLOCKING_FAST, (1, -2, 1), parse)
        .key_specs("RW,access,delete@i1/r-2,1,0")
        .args("key:key* timeout:double").docs(
        "Pop the highest-scored member of the first non-empty sorted set, waiting while all are empty",
        "5.0.0",
        "sorted-set",
    ),
    Spec::new("bzmpop", -5, BLOCKING_MOVABLE, NO_KEYS, parse_bzmpop)
        .key_specs("RW,access,delete@i2/n0,1,1")
        .args("timeout:double numkeys:integer key:key* where@(MIN|MAX) COUNT=count:integer?").docs(
        "Pop members from the first non-empty sorted set of several, waiting while all are empty",
        "7.0.0",
        "sorted-set",
    ),
];

/// A blocking sorted-set pop.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BZPop {
    /// The pop: keys, end, count, reply shape (`One` for BZPOPMIN/BZPOPMAX: a flat
    /// `[key, member, score]`; `Multi` for BZMPOP).
    pub pop: ZPop,
    /// How long the session may block, in ms (0: forever).
    pub timeout_ms: u64,
}

/// Parses BZPOPMIN/BZPOPMAX.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    let max = args.name() == "bzpopmax";
    let mut keys = args.rest();
    let raw = keys.pop().unwrap_or_default();
    let timeout_ms = parse_timeout(&raw)?;
    Ok(Request::Data(Command::BZPop(BZPop {
        pop: ZPop {
            keys,
            max,
            count: 1,
            form: PopForm::One,
        },
        timeout_ms,
    })))
}

/// Parses BZMPOP.
pub fn parse_bzmpop(args: &mut Args) -> Result<Request, Reply> {
    let timeout_ms = parse_timeout(&args.arg()?)?;
    let (keys, max, count) = parse_mpop_tail(args)?;
    Ok(Request::Data(Command::BZPop(BZPop {
        pop: ZPop {
            keys,
            max,
            count,
            form: PopForm::Multi,
        },
        timeout_ms,
    })))
}

impl Replicated for BZPop {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((
            &["bzpopmin", "bzpopmax", "bzmpop"],
            many(self.keys()),
            none(),
        ))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// One attempt: the popped members, or a null array when every key is empty.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        if self.pop.form == PopForm::Multi {
            return self.pop.apply(ks, ctx);
        }
        let key = match self.pop.first_key(ks, ctx.now) {
            Err(e) => return e,
            Ok(None) => return Reply::NilArray,
            Ok(Some(k)) => k,
        };
        match self.pop.pop_from(ks, &key, ctx.now).pop() {
            Some((m, s)) => Reply::Array(vec![Reply::Bulk(key), Reply::Bulk(m), Reply::Double(s)]),
            None => Reply::NilArray,
        }
    }
}

impl BZPop {
    /// The keys the session waits on.
    pub fn keys(&self) -> &[Bytes] {
        &self.pop.keys
    }
}
