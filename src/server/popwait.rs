//! The node's side of the blocked-pop queue: which of its clients wait in a blocking pop,
//! and the hand-over of their served replies.
//!
//! A blocking pop registers a waiter here before its [`PopWait`] entry is proposed. The state
//! machine serves queued waiters inside apply, on every node, and records an
//! [`Event::Served`](crate::state::Event::Served) naming the waiter; the waiter task of the
//! waiter's node (`lockwait::run`) passes it to [`deliver`], which hands the reply to the
//! session. A client that stops waiting (timeout, hang-up, CLIENT UNBLOCK, shutdown) leaves
//! the registry first and then the replicated queue through a [`PopCancel`] entry. If it was
//! served in between, nobody is there to take the reply: the popped elements are given back,
//! pushed onto the end they were popped from (a sorted set's members are added back with
//! their scores unless the member is there again), so an element is never lost to a client
//! that had gone. A BLMOVE's element has already reached its destination and stays there.
//! A queued waiter that disappears from the replicated queues without a reply (its node
//! installed a snapshot covering the serve) is failed with an error ([`fail_lost`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::oneshot;

use super::waiters::{self, Registry, Unanswered};
use super::Shared;
use crate::cmd::list::End;
use crate::cmd::popwait::{wait_spec, PopCancel};
use crate::cmd::{Command, Request};
use crate::resp::Reply;
use crate::state::WaiterId;

/// How long a waiter that left is remembered, so that a reply served to it just before its
/// cancel applied can still be given back.
const GONE_FOR: Duration = Duration::from_secs(120);

/// The locked registry of blocked pops.
type Table = waiters::Table<Command, Reply>;

/// The clients of this node process that wait in a blocking pop: each waiter's data is its
/// blocking command, its outcome the served reply.
pub struct PopWaiters {
    registry: Registry<Command, Reply>,
    /// Waiters that left, with their command and when they left.
    gone: Mutex<HashMap<u64, (Command, Instant)>>,
}

impl PopWaiters {
    /// An empty registry for this node process.
    pub fn new(node: u64, boot: u64) -> PopWaiters {
        PopWaiters {
            registry: Registry::new(node, boot),
            gone: Mutex::new(HashMap::new()),
        }
    }

    /// Registers a waiter for the blocking `cmd`; the receiver gets its served reply.
    pub fn register(&self, cmd: Command) -> (WaiterId, oneshot::Receiver<Reply>) {
        self.registry.register(cmd)
    }

    /// Unregisters a waiter that stops waiting. False if a reply has already been handed
    /// to it (it is in the receiver).
    pub fn forget(&self, id: WaiterId) -> bool {
        let Some(cmd) = self.registry.forget(id) else {
            return false;
        };
        self.remember_gone(id, cmd);
        true
    }

    /// Remembers a waiter that left, so that a serve to it is given back.
    fn remember_gone(&self, id: WaiterId, cmd: Command) {
        if let Ok(mut gone) = self.gone.lock() {
            let now = Instant::now();
            gone.retain(|_, (_, at)| now.duration_since(*at) < GONE_FOR);
            gone.insert(id.seq, (cmd, now));
        }
    }

    /// Notes that the waiter's entry queued it.
    pub fn mark_queued(&self, id: WaiterId) {
        self.registry.mark_queued(id);
    }

    /// Unregisters a waiter whose pop was answered at once (it never queued).
    pub fn discard(&self, id: WaiterId) {
        self.registry.forget(id);
    }

    /// The waiter's cancel applied before any serve: no reply will come for it.
    fn settled(&self, id: WaiterId) {
        if let Ok(mut gone) = self.gone.lock() {
            gone.remove(&id.seq);
        }
    }

    /// Unregisters `ids` as gone (see [`PopWaiters::forget`]) and answers each with `error`;
    /// each leaves its queues through the log.
    fn fail(&self, shared: &Arc<Shared>, t: &mut Table, ids: Vec<WaiterId>, error: &str) {
        for id in ids {
            // Remembered as gone before it is answered: a serve to it is given back.
            let Some(cmd) = t.get(id.seq).cloned() else {
                continue;
            };
            self.remember_gone(id, cmd.clone());
            cancel(shared, &cmd, id);
            let _ = t.answer(id.seq, Reply::err(error));
        }
    }

    /// How many of this node's clients wait.
    pub fn len(&self) -> usize {
        self.registry.len()
    }

    /// True if none of this node's clients wait.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Hands a served reply to its waiter. If the waiter is this process's but has gone, the
/// popped elements are given back through the log.
pub fn deliver(shared: &Arc<Shared>, id: WaiterId, encoded: &Bytes) {
    let w = &shared.pop_waiters;
    if !w.registry.ours(id) {
        return; // another node's or another process's waiter: not ours to act on
    }
    let reply: Reply = match postcard::from_bytes(encoded) {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(error = %e, "a served pop's reply does not decode");
            Reply::err("ERR internal: the served reply does not decode")
        }
    };
    let unsent = match w.registry.answer(id, reply) {
        Ok(_) => return,
        Err(Unanswered::Dropped(cmd, reply)) => Some((cmd, reply)),
        Err(Unanswered::NotWaiting(reply)) => {
            let gone = w.gone.lock().ok().and_then(|mut g| g.remove(&id.seq));
            gone.map(|(cmd, _)| (cmd, reply))
        }
    };
    match unsent.and_then(|(cmd, reply)| give_back(&cmd, &reply)) {
        Some(back) => {
            tracing::info!(
                waiter = id.seq,
                "giving back elements served to a client that had stopped waiting"
            );
            drop(shared.proposer.submit(back));
        }
        None => tracing::debug!(
            waiter = id.seq,
            "a served pop reached no client and has nothing to give back"
        ),
    }
}

/// Gives back what `reply` (served for `cmd`) popped: its client is gone unanswered.
pub fn give_back_now(shared: &Shared, cmd: &Command, reply: &Reply) {
    if let Some(back) = give_back(cmd, reply) {
        drop(shared.proposer.submit(back));
    }
}

/// Answers every registered waiter with an error (served replies were lost to a lagging
/// event queue, so none can be trusted to come). Each also leaves its queues through the log
/// and is remembered as gone, so that a serve to it, before or after, is given back: a
/// failed waiter left queued would take elements that no client receives.
pub fn fail_all(shared: &Arc<Shared>, why: &str) {
    let w = &shared.pop_waiters;
    let Some(mut t) = w.registry.table() else {
        return;
    };
    let all = t.seqs().into_iter().map(|seq| t.id(seq)).collect();
    w.fail(shared, &mut t, all, &format!("ERR {why}"));
}

/// Fails the queued waiters that have been missing from the replicated queues for
/// [`waiters::LOST_AFTER`] checks with no reply handed to them. That happens when the node
/// installed a snapshot that covers the entry that served them (their reply, an event of
/// that entry, was never produced here), or when their node's old process was purged by
/// mistake: without this, a client waiting for ever would never be answered.
pub fn fail_lost(shared: &Arc<Shared>) {
    let w = &shared.pop_waiters;
    let Ok(st) = shared.state.read() else {
        return;
    };
    let Some(mut t) = w.registry.table() else {
        return;
    };
    let lost = t.missing(|id, cmd| {
        let keys = wait_spec(cmd).map(|(k, _, _)| k).unwrap_or_default();
        keys.iter().any(|k| {
            st.ks
                .pop_queue(k)
                .is_some_and(|q| q.iter().any(|x| x.id == id))
        })
    });
    drop(st);
    for id in &lost {
        tracing::warn!(waiter = id.seq, "a blocked pop is in no queue and no reply reached it (a snapshot install covered its serve?); failing it");
    }
    // As if its client stopped waiting: if it is in fact still queued (or its entry is yet
    // to apply here), the cancel takes it out, and a serve before that is given back.
    w.fail(
        shared,
        &mut t,
        lost,
        "ERR the blocked pop lost its place in the queue (its node installed a snapshot); retry",
    );
}

/// Proposes that `id` leave its keys' queues; if that applies before any serve, the
/// waiter is settled (nothing will need giving back).
pub fn cancel(shared: &Arc<Shared>, cmd: &Command, id: WaiterId) {
    let Some((keys, _, _)) = wait_spec(cmd) else {
        return;
    };
    let keys = keys.to_vec();
    let shared = shared.clone();
    tokio::spawn(async move {
        let rx = shared
            .proposer
            .submit(Command::PopCancel(PopCancel { keys, waiter: id }));
        let timeout = Duration::from_millis(shared.config.write_timeout_ms);
        if let Ok(Ok(Reply::Int(1))) = tokio::time::timeout(timeout, rx).await {
            shared.pop_waiters.settled(id);
        }
    });
}

/// The write that gives back what `reply` (served for `cmd`) popped, if anything.
fn give_back(cmd: &Command, reply: &Reply) -> Option<Command> {
    let Reply::Array(items) = reply else {
        return None; // BLMOVE: the element is on its destination already
    };
    let line: Vec<Bytes> = match (cmd, items.as_slice()) {
        (Command::BPop(p), [Reply::Bulk(key), Reply::Bulk(v)]) => {
            vec![push_name(p.end), key.clone(), v.clone()]
        }
        (Command::LMPop(m), [Reply::Bulk(key), Reply::Array(vs)]) => {
            // Pushing them in reverse restores their order at that end.
            let mut line = vec![push_name(m.end), key.clone()];
            line.extend(vs.iter().rev().filter_map(|v| match v {
                Reply::Bulk(b) => Some(b.clone()),
                _ => None,
            }));
            line
        }
        (Command::BZPop(_), [Reply::Bulk(key), Reply::Bulk(m), Reply::Double(s)]) => {
            zadd_nx(key, &[(m.clone(), *s)])
        }
        (Command::BZPop(_), [Reply::Bulk(key), Reply::Array(pairs)]) => {
            let members: Vec<(Bytes, f64)> = pairs
                .iter()
                .filter_map(|p| match p {
                    Reply::Array(mv) => match mv.as_slice() {
                        [Reply::Bulk(m), Reply::Double(s)] => Some((m.clone(), *s)),
                        _ => None,
                    },
                    _ => None,
                })
                .collect();
            zadd_nx(key, &members)
        }
        _ => return None,
    };
    match crate::cmd::parse(line) {
        Ok(Request::Data(c)) => Some(c),
        _ => None,
    }
}

fn push_name(end: End) -> Bytes {
    Bytes::from_static(match end {
        End::Left => b"LPUSH",
        End::Right => b"RPUSH",
    })
}

fn zadd_nx(key: &Bytes, members: &[(Bytes, f64)]) -> Vec<Bytes> {
    let mut line = vec![
        Bytes::from_static(b"ZADD"),
        key.clone(),
        Bytes::from_static(b"NX"),
    ];
    for (m, s) in members {
        line.push(Bytes::from(crate::resp::frame::format_double(*s)));
        line.push(m.clone());
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(line: &str) -> Command {
        let argv = crate::cmd::test_argv(line);
        match crate::cmd::parse(argv) {
            Ok(Request::Data(c)) => c,
            _ => panic!("{line}"),
        }
    }

    fn bulk(s: &'static str) -> Reply {
        Reply::bulk(s)
    }

    #[test]
    fn given_back_elements_return_to_the_end_they_left() {
        let back = give_back(
            &cmd("BRPOP a b 0"),
            &Reply::Array(vec![bulk("b"), bulk("x")]),
        );
        assert_eq!(back, Some(cmd("RPUSH b x")));
        let back = give_back(
            &cmd("BLMPOP 0 1 q LEFT COUNT 3"),
            &Reply::Array(vec![bulk("q"), Reply::Array(vec![bulk("1"), bulk("2")])]),
        );
        assert_eq!(back, Some(cmd("LPUSH q 2 1")));
        let back = give_back(
            &cmd("BZPOPMAX z 0"),
            &Reply::Array(vec![bulk("z"), bulk("m"), Reply::Double(1.5)]),
        );
        assert_eq!(back, Some(cmd("ZADD z NX 1.5 m")));
        let back = give_back(
            &cmd("BZMPOP 0 1 z MIN COUNT 2"),
            &Reply::Array(vec![
                bulk("z"),
                Reply::Array(vec![
                    Reply::Array(vec![bulk("a"), Reply::Double(1.0)]),
                    Reply::Array(vec![bulk("b"), Reply::Double(2.0)]),
                ]),
            ]),
        );
        assert_eq!(back, Some(cmd("ZADD z NX 1 a 2 b")));
        assert_eq!(give_back(&cmd("BLMOVE a b LEFT LEFT 0"), &bulk("x")), None);
    }

    #[test]
    fn a_forgotten_waiter_is_remembered_until_settled() {
        let w = PopWaiters::new(1, 9);
        let (id, _rx) = w.register(cmd("BLPOP k 0"));
        assert_eq!(w.len(), 1);
        assert!(w.forget(id));
        assert!(!w.forget(id), "only once");
        assert!(w.is_empty());
        assert!(w.gone.lock().unwrap().contains_key(&id.seq));
        w.settled(id);
        assert!(w.gone.lock().unwrap().is_empty());
    }
}
