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

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::oneshot;

use super::Shared;
use crate::cmd::list::End;
use crate::cmd::popwait::{wait_spec, PopCancel};
use crate::cmd::{Command, Request};
use crate::resp::Reply;
use crate::state::WaiterId;

/// How long a waiter that left is remembered, so that a reply served to it just before its
/// cancel applied can still be given back.
const GONE_FOR: Duration = Duration::from_secs(120);

struct Pending {
    cmd: Command,
    tx: oneshot::Sender<Reply>,
}

/// The clients of this node process that wait in a blocking pop.
pub struct PopWaiters {
    node: u64,
    boot: u64,
    next: AtomicU64,
    pending: Mutex<HashMap<u64, Pending>>,
    /// Waiters that left, with their command and when they left.
    gone: Mutex<HashMap<u64, (Command, Instant)>>,
}

impl PopWaiters {
    /// An empty registry for this node process.
    pub fn new(node: u64, boot: u64) -> PopWaiters {
        PopWaiters {
            node,
            boot,
            next: AtomicU64::new(1),
            pending: Mutex::new(HashMap::new()),
            gone: Mutex::new(HashMap::new()),
        }
    }

    /// Registers a waiter for the blocking `cmd`; the receiver gets its served reply.
    pub fn register(&self, cmd: Command) -> (WaiterId, oneshot::Receiver<Reply>) {
        let id = WaiterId {
            node: self.node,
            boot: self.boot,
            seq: self.next.fetch_add(1, Ordering::Relaxed),
        };
        let (tx, rx) = oneshot::channel();
        if let Ok(mut p) = self.pending.lock() {
            p.insert(id.seq, Pending { cmd, tx });
        }
        (id, rx)
    }

    /// Unregisters a waiter that stops waiting. False if a reply has already been handed
    /// to it (it is in the receiver).
    pub fn forget(&self, id: WaiterId) -> bool {
        let Some(p) = self.pending.lock().ok().and_then(|mut p| p.remove(&id.seq)) else {
            return false;
        };
        if let Ok(mut gone) = self.gone.lock() {
            let now = Instant::now();
            gone.retain(|_, (_, at)| now.duration_since(*at) < GONE_FOR);
            gone.insert(id.seq, (p.cmd, now));
        }
        true
    }

    /// Unregisters a waiter whose pop was answered at once (it never queued).
    pub fn discard(&self, id: WaiterId) {
        if let Ok(mut p) = self.pending.lock() {
            p.remove(&id.seq);
        }
    }

    /// The waiter's cancel applied before any serve: no reply will come for it.
    fn settled(&self, id: WaiterId) {
        if let Ok(mut gone) = self.gone.lock() {
            gone.remove(&id.seq);
        }
    }

    /// How many of this node's clients wait.
    pub fn len(&self) -> usize {
        self.pending.lock().map(|p| p.len()).unwrap_or(0)
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
    if id.node != w.node || id.boot != w.boot {
        return; // another node's or another process's waiter: not ours to act on
    }
    let reply: Reply = match postcard::from_bytes(encoded) {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(error = %e, "a served pop's reply does not decode");
            Reply::err("ERR internal: the served reply does not decode")
        }
    };
    let pending = w.pending.lock().ok().and_then(|mut p| p.remove(&id.seq));
    let unsent = match pending {
        Some(p) => match p.tx.send(reply) {
            Ok(()) => return,
            Err(reply) => Some((p.cmd, reply)),
        },
        None => {
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
/// event queue, so none can be trusted to come).
pub fn fail_all(shared: &Shared, why: &str) {
    let drained: Vec<Pending> = match shared.pop_waiters.pending.lock() {
        Ok(mut p) => p.drain().map(|(_, v)| v).collect(),
        Err(_) => return,
    };
    for p in drained {
        let _ = p.tx.send(Reply::err(format!("ERR {why}")));
    }
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
        Ok(Request::Write(c)) => Some(c),
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
        let argv = line
            .split(' ')
            .map(|s| Bytes::copy_from_slice(s.as_bytes()))
            .collect();
        match crate::cmd::parse(argv) {
            Ok(Request::Write(c)) => c,
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
