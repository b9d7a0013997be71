//! Blocking pops served first-come, first-served across the cluster: the log entries of the
//! replicated wait queue (`state::popq`) and the serving step apply runs after every
//! top-level command.
//!
//! A client's BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP, BZPOPMIN, BZPOPMAX or BZMPOP is
//! proposed as a [`PopWait`] naming the client's waiter (its node, that node's boot id and a
//! number). Apply tries the pop once; if every key is empty, the waiter joins the queue of
//! each key and the reply is [`POP_QUEUED`], which the session never shows: it blocks until
//! its node hands it a served reply. Inside MULTI or a script a blocking pop is one plain
//! attempt, as in Redis, and never queues.
//!
//! After each top-level command, [`serve_ready`] serves the keys that command left data in:
//! each waiter in queue order, skipping those of the other type (a BLPOP waiter on a key that
//! now holds a sorted set keeps waiting, as in Redis 7.0) and those whose deadline has passed,
//! runs its own command restricted to that key, so a served BLMOVE pushes onto its
//! destination, which can serve that key's waiters in turn. Every replica serves the same
//! waiters the same elements.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::blpop::BPop;
use crate::cmd::bzpop::BZPop;
use crate::cmd::lmove::LMPop;
use crate::cmd::registry::{many, none, Replicated, Spec, Touches};
use crate::cmd::{Command, Ctx};
use crate::resp::Reply;
use crate::state::{Event, Keyspace, PopKind, PopWaiter, Value, WaiterId};

/// No client can send these: the session builds them from the blocking commands.
pub static COMMANDS: &[Spec] = &[];

/// The reply of a [`PopWait`] that queued its waiter (never shown to a client).
pub const POP_QUEUED: &str = "PALISADE-POP-QUEUED";

/// A blocking pop by a client that waits for an element if none is there.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PopWait {
    /// Who waits.
    pub waiter: WaiterId,
    /// The blocking command (BPop, a blocking LMove or LMPop, BZPop) with its timeout.
    pub cmd: Box<Command>,
}

/// A waiter leaves the queues of its keys without being served (its wait ran out on its
/// node, or its client hung up).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PopCancel {
    /// The keys it waits on.
    pub keys: Vec<Bytes>,
    /// The waiter.
    pub waiter: WaiterId,
}

/// The keys a blocking command waits on, its timeout in ms (0: for ever) and what it pops;
/// `None` for anything else (LMOVE, RPOPLPUSH and LMPOP never block).
pub fn wait_spec(cmd: &Command) -> Option<(&[Bytes], u64, PopKind)> {
    match cmd {
        Command::BPop(p) => Some((&p.keys, p.timeout_ms, PopKind::List)),
        Command::LMove(m) => m
            .timeout_ms
            .map(|t| (std::slice::from_ref(&m.src), t, PopKind::List)),
        Command::LMPop(m) => m.timeout_ms.map(|t| (m.keys.as_slice(), t, PopKind::List)),
        Command::BZPop(z) => Some((z.keys(), z.timeout_ms, PopKind::ZSet)),
        _ => None,
    }
}

/// The blocking command restricted to `key` (the one a push made ready), or `None` if it
/// does not wait on it.
pub fn restrict(cmd: &Command, key: &Bytes) -> Option<Command> {
    let only = |keys: &[Bytes]| keys.contains(key).then(|| vec![key.clone()]);
    Some(match cmd {
        Command::BPop(p) => Command::BPop(BPop {
            keys: only(&p.keys)?,
            ..p.clone()
        }),
        Command::LMPop(m) => Command::LMPop(LMPop {
            keys: only(&m.keys)?,
            ..m.clone()
        }),
        Command::LMove(m) if m.src == *key => cmd.clone(),
        Command::BZPop(z) => {
            let mut z: BZPop = z.clone();
            z.pop.keys = only(&z.pop.keys)?;
            Command::BZPop(z)
        }
        _ => return None,
    })
}

/// True for the reply of an attempt that found nothing to pop.
fn found_nothing(reply: &Reply) -> bool {
    matches!(reply, Reply::Nil | Reply::NilArray)
}

impl Replicated for PopWait {
    // A client's blocking pop, as its queued form: checked as the command itself.
    fn forwarded(&self) -> Option<Touches<'_>> {
        self.cmd.forwarded()
    }

    fn is_read(&self) -> bool {
        false
    }

    /// The pop's reply if there was something to pop (or an error such as WRONGTYPE);
    /// otherwise [`POP_QUEUED`], with the waiter at the end of each key's queue.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let Some((keys, timeout_ms, kind)) = wait_spec(&self.cmd) else {
            return Reply::err("ERR internal: not a blocking pop");
        };
        let keys = keys.to_vec();
        let reply = self.cmd.apply(ks, ctx);
        if !found_nothing(&reply) {
            return reply;
        }
        let Ok(cmd) = postcard::to_allocvec(&*self.cmd) else {
            return Reply::err("ERR internal: cannot encode a blocking pop");
        };
        ks.pop_enqueue(PopWaiter {
            id: self.waiter,
            kind,
            deadline: (timeout_ms > 0).then(|| ctx.now.saturating_add(timeout_ms)),
            cmd: Bytes::from(cmd),
            keys,
        });
        Reply::Simple(POP_QUEUED.into())
    }
}

impl Replicated for PopCancel {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((
            &[
                "blpop",
                "brpop",
                "blmove",
                "brpoplpush",
                "blmpop",
                "bzpopmin",
                "bzpopmax",
                "bzmpop",
            ],
            many(&self.keys),
            none(),
        ))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// 1 if the waiter was still queued (it is not served now), else 0.
    fn apply(&self, ks: &mut Keyspace, _ctx: Ctx) -> Reply {
        Reply::Int(i64::from(ks.pop_cancel(&self.keys, self.waiter)))
    }
}

/// What `key` holds for a waiter at `now`: the kind of a non-empty list or sorted set.
fn holds(ks: &Keyspace, key: &[u8], now: u64) -> Option<PopKind> {
    match &ks.get(key, now)?.value {
        Value::List(l) if !l.is_empty() => Some(PopKind::List),
        Value::ZSet(z) if !z.is_empty() => Some(PopKind::ZSet),
        _ => None,
    }
}

/// Serves the waiters of every key a command made ready, at cluster time `now`. Each
/// served pop is a write of its own, with its own revision.
pub fn serve_ready(ks: &mut Keyspace, now: u64) {
    while let Some(key) = ks.next_ready() {
        serve_key(ks, &key, now);
    }
}

/// Serves `key`'s waiters in queue order while it holds data of their kind.
fn serve_key(ks: &mut Keyspace, key: &Bytes, now: u64) {
    let Some(queue) = ks.pop_queue(key) else {
        return;
    };
    let waiters: Vec<PopWaiter> = queue.iter().cloned().collect();
    for w in waiters {
        if w.expired(now) {
            // Its client has stopped waiting (its cancel is on the way, or was lost).
            ks.pop_remove(&w.keys, w.id);
            continue;
        }
        let Some(kind) = holds(ks, key, now) else {
            return;
        };
        if kind != w.kind {
            continue;
        }
        let cmd = postcard::from_bytes::<Command>(&w.cmd)
            .ok()
            .and_then(|c| restrict(&c, key));
        let Some(cmd) = cmd else {
            tracing::error!(key = %String::from_utf8_lossy(key), "dropping a blocked-pop waiter whose command does not decode");
            ks.pop_remove(&w.keys, w.id);
            continue;
        };
        let revision = ks.bump_revision();
        let reply = cmd.apply(ks, Ctx { now, revision });
        if found_nothing(&reply) {
            return;
        }
        ks.pop_remove(&w.keys, w.id);
        match postcard::to_allocvec(&reply) {
            Ok(encoded) => ks.emit(Event::Served {
                waiter: w.id,
                reply: Bytes::from(encoded),
            }),
            Err(e) => tracing::error!(error = %e, "cannot encode a served pop's reply"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::{parse, run_line, Request};

    fn id(node: u64, seq: u64) -> WaiterId {
        WaiterId { node, boot: 1, seq }
    }

    /// Applies `line` (a blocking command) as waiter `w`, as the session proposes it.
    fn block(ks: &mut Keyspace, line: &str, w: WaiterId, now: u64) -> Reply {
        let argv = crate::cmd::test_argv(line);
        let Ok(Request::Data(cmd)) = parse(argv) else {
            panic!("{line} does not parse as a write");
        };
        let revision = ks.bump_revision();
        let reply = Command::PopWait(PopWait {
            waiter: w,
            cmd: Box::new(cmd),
        })
        .apply(ks, Ctx { now, revision });
        serve_ready(ks, now);
        reply
    }

    /// Applies a plain command line, then serves, as `apply_batch` does.
    fn run(ks: &mut Keyspace, line: &str, now: u64) -> Reply {
        let r = run_line(ks, line, now);
        serve_ready(ks, now);
        r
    }

    /// The served waiters and their replies, in the order they were served.
    fn served(ks: &mut Keyspace) -> Vec<(u64, Reply)> {
        ks.take_events()
            .into_iter()
            .filter_map(|e| match e {
                Event::Served { waiter, reply } => {
                    Some((waiter.seq, postcard::from_bytes(&reply).unwrap()))
                }
                _ => None,
            })
            .collect()
    }

    fn arr(items: &[&'static str]) -> Reply {
        Reply::Array(items.iter().map(|s| Reply::bulk(*s)).collect())
    }

    #[test]
    fn waiters_are_served_in_arrival_order_whatever_their_node() {
        let mut ks = Keyspace::default();
        let queued = Reply::Simple(POP_QUEUED.into());
        assert_eq!(block(&mut ks, "BLPOP q 0", id(3, 1), 0), queued);
        assert_eq!(block(&mut ks, "BRPOP other q 0", id(1, 2), 0), queued);
        assert_eq!(
            block(&mut ks, "BLMPOP 0 1 q LEFT COUNT 5", id(2, 3), 0),
            queued
        );
        ks.take_events();
        assert_eq!(run(&mut ks, "RPUSH q a b", 1), Reply::Int(2));
        assert_eq!(
            served(&mut ks),
            vec![(1, arr(&["q", "a"])), (2, arr(&["q", "b"]))]
        );
        assert_eq!(ks.pop_waiter_count(), 1, "the BLMPOP still waits");
        run(&mut ks, "RPUSH q c d e", 2);
        assert_eq!(
            served(&mut ks),
            vec![(
                3,
                Reply::Array(vec![Reply::bulk("q"), arr(&["c", "d", "e"])])
            )]
        );
        assert!(ks.pop_queue(b"q").is_none() && ks.pop_queue(b"other").is_none());
        // With data there, a blocking pop takes it at once and queues nothing.
        run(&mut ks, "RPUSH q x", 3);
        assert_eq!(block(&mut ks, "BLPOP q 0", id(1, 4), 3), arr(&["q", "x"]));
        assert_eq!(ks.pop_waiter_count(), 0);
    }

    #[test]
    fn a_transaction_that_pushes_and_pops_again_serves_nobody() {
        let mut ks = Keyspace::default();
        block(&mut ks, "BLPOP q 0", id(1, 1), 0);
        let push = parse(vec![
            Bytes::from_static(b"RPUSH"),
            Bytes::from_static(b"q"),
            Bytes::from_static(b"a"),
        ]);
        let pop = parse(vec![Bytes::from_static(b"LPOP"), Bytes::from_static(b"q")]);
        let (Ok(Request::Data(push)), Ok(Request::Data(pop))) = (push, pop) else {
            panic!()
        };
        let exec = Command::Exec(crate::cmd::multi::Exec {
            watched: vec![],
            cmds: vec![push, pop],
        });
        let revision = ks.bump_revision();
        exec.apply(&mut ks, Ctx { now: 1, revision });
        serve_ready(&mut ks, 1);
        assert!(served(&mut ks).is_empty());
        assert_eq!(ks.pop_waiter_count(), 1, "still waiting");
    }

    #[test]
    fn kinds_deadlines_and_moves() {
        let mut ks = Keyspace::default();
        // 1 waits on a list until 100, 2 pops sorted sets, 3 moves from k to d, 4 waits on d.
        block(&mut ks, "BLPOP k 0.1", id(1, 1), 0);
        block(&mut ks, "BZPOPMIN k 0", id(1, 2), 0);
        block(&mut ks, "BLMOVE k d LEFT RIGHT 0", id(1, 3), 0);
        block(&mut ks, "BRPOP d 0", id(1, 4), 0);
        ks.take_events();
        // A sorted set serves the BZPOPMIN only; the list waiters keep waiting.
        run(&mut ks, "ZADD k 2 m", 50);
        assert_eq!(
            served(&mut ks),
            vec![(
                2,
                Reply::Array(vec![Reply::bulk("k"), Reply::bulk("m"), Reply::Double(2.0)])
            )]
        );
        // At 200 waiter 1's deadline has passed: the BLMOVE is served, and its push onto
        // `d` serves the BRPOP there.
        run(&mut ks, "LPUSH k e", 200);
        assert_eq!(
            served(&mut ks),
            vec![(3, Reply::bulk("e")), (4, arr(&["d", "e"]))]
        );
        assert_eq!(ks.pop_waiter_count(), 0);
        assert_eq!(run(&mut ks, "EXISTS k d", 200), Reply::Int(0));
    }

    #[test]
    fn a_cancelled_waiter_is_not_served() {
        let mut ks = Keyspace::default();
        block(&mut ks, "BLPOP a b 0", id(1, 1), 0);
        let cancel = PopCancel {
            keys: vec![Bytes::from_static(b"a"), Bytes::from_static(b"b")],
            waiter: id(1, 1),
        };
        let ctx = Ctx {
            now: 1,
            revision: ks.bump_revision(),
        };
        assert_eq!(cancel.apply(&mut ks, ctx), Reply::Int(1));
        assert_eq!(cancel.apply(&mut ks, ctx), Reply::Int(0));
        ks.take_events();
        run(&mut ks, "RPUSH b x", 2);
        assert!(served(&mut ks).is_empty());
        assert_eq!(run(&mut ks, "LLEN b", 2), Reply::Int(1));
    }
}
