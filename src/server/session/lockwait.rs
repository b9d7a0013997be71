//! `LOCK ... WAIT` (and RLOCK, SEMACQUIRE, MLOCK): the session joins the key's queue (an
//! MLOCK every key's) through the log and blocks until the node's waiter task hands it the
//! grant (see `server::lockwait`), the wait runs out, the client hangs up or is killed, or
//! CLIENT UNBLOCK ends it.

use super::super::stream::ClientStream;
use bytes::Bytes;
use tokio::sync::oneshot;

use super::blocked::{unblock_reply, wait_until, Wake};
use super::{await_write, Session};
use crate::cmd::lock::{Acquire, QUEUED};
use crate::cmd::mlock::{tokens_reply, MLock};
use crate::cmd::rlock::Hold;
use crate::cmd::Command;
use crate::resp::Reply;
use crate::server::lockwait::{cancel, end_wait, release, Ended, Outcome};
use crate::state::WaiterId;

/// What a waiter whose place in the queue was lost is told (its outcome is unknown to its
/// node; a retry of the same LOCK is safe).
const LOST: &str =
    "ERR the lock wait lost its place in the queue (its node installed a snapshot); retry";

/// The reply for a grant's tokens: a token, or an MLOCK's array of them.
fn grant_reply(tokens: &[u64], multi: bool) -> Reply {
    match (tokens, multi) {
        ([t], false) => Reply::Int(*t as i64),
        (ts, _) => tokens_reply(ts),
    }
}

/// The reply for what the waiter task handed over.
fn outcome_reply(outcome: Result<Outcome, oneshot::error::RecvError>, multi: bool) -> Reply {
    match outcome {
        Ok(Some(ts)) => grant_reply(&ts, multi),
        Ok(None) => Reply::err(LOST),
        Err(_) => Reply::err("ERR internal: the lock waiter was dropped"),
    }
}

/// A request that waits in a key's lock queue: LOCK, RLOCK and SEMACQUIRE, or MLOCK in
/// several keys' queues.
pub(in crate::server) enum Queued {
    /// `LOCK ... WAIT`.
    Exclusive(Acquire),
    /// `RLOCK ... WAIT` or `SEMACQUIRE ... WAIT`.
    Hold(Hold),
    /// `MLOCK ... WAIT`.
    Multi(MLock),
}

impl Queued {
    /// True for a command that waits in a lock queue: one with WAIT.
    pub(in crate::server) fn waits(c: &Command) -> bool {
        match c {
            Command::Acquire(a) => a.wait_ms.is_some(),
            Command::Hold(h) => h.wait_ms.is_some(),
            Command::MLock(m) => m.wait_ms.is_some(),
            _ => false,
        }
    }

    /// The wait of a command [`Queued::waits`] accepts (a LOCK gets the server's default
    /// lock-delay if it names none).
    pub(in crate::server) fn take(c: Command, shared: &crate::server::Shared) -> Option<Queued> {
        match c {
            Command::Acquire(a) => Some(Queued::Exclusive(shared.with_default_delay(a))),
            Command::Hold(h) => Some(Queued::Hold(h)),
            Command::MLock(m) => Some(Queued::Multi(m)),
            _ => None,
        }
    }

    fn keys(&self) -> Vec<Bytes> {
        match self {
            Queued::Exclusive(a) => vec![a.key.clone()],
            Queued::Hold(h) => vec![h.key.clone()],
            Queued::Multi(m) => m.keys.clone(),
        }
    }

    fn owner(&self) -> &Bytes {
        match self {
            Queued::Exclusive(a) => &a.owner,
            Queued::Hold(h) => &h.owner,
            Queued::Multi(m) => &m.owner,
        }
    }

    fn wait_ms(&self) -> Option<u64> {
        match self {
            Queued::Exclusive(a) => a.wait_ms,
            Queued::Hold(h) => h.wait_ms,
            Queued::Multi(m) => m.wait_ms,
        }
    }

    /// The command to propose, with `id` as its waiter.
    fn into_command(self, id: WaiterId) -> Command {
        match self {
            Queued::Exclusive(mut a) => {
                a.waiter = Some(id);
                Command::Acquire(a)
            }
            Queued::Hold(mut h) => {
                h.waiter = Some(id);
                Command::Hold(h)
            }
            Queued::Multi(mut m) => {
                m.waiter = Some(id);
                Command::MLock(m)
            }
        }
    }
}

/// One waiter's identity, for leaving the queue or giving a grant back.
struct Ticket {
    /// Its keys: one, or an MLOCK's (which leaves all its queues by any one of them).
    keys: Vec<Bytes>,
    owner: Bytes,
    id: WaiterId,
    /// An MLOCK: answered with an array.
    multi: bool,
}

impl Ticket {
    /// Proposes leaving the queue (every queue of an MLOCK).
    fn cancel(&self, shared: &crate::server::Shared) {
        if let Some(key) = self.keys.first() {
            cancel(shared, key.clone(), self.id);
        }
    }

    /// Gives back a grant that reached no client: each key's lease.
    fn give_back(&self, shared: &std::sync::Arc<crate::server::Shared>, tokens: Vec<u64>) {
        for (key, token) in self.keys.iter().zip(tokens) {
            release(shared, key.clone(), token, self.owner.clone(), self.id);
        }
    }
}

impl Session {
    /// Proposes the LOCK (RLOCK, SEMACQUIRE) with this session as its waiter, and waits
    /// for the answer.
    pub(super) async fn lock_wait(&mut self, lock: Queued, stream: &mut ClientStream) -> Reply {
        let shared = self.shared.clone();
        let (id, mut granted) = shared.waiters.register(lock.keys(), lock.owner().clone());
        let t = Ticket {
            keys: lock.keys(),
            owner: lock.owner().clone(),
            id,
            multi: matches!(lock, Queued::Multi(_)),
        };
        let until = lock.wait_ms().and_then(wait_until);
        let reply = await_write(
            shared
                .proposer
                .submit_as(self.user.clone(), lock.into_command(id)),
            self.write_deadline(),
        )
        .await;
        match &reply {
            Reply::Simple(s) if s == QUEUED => shared.waiters.mark_queued(id),
            Reply::Int(_) | Reply::Nil | Reply::Array(_) => {
                shared.waiters.forget(id);
                return reply;
            }
            // An error, or an unknown outcome: the LOCK may have been queued all the same.
            _ => {
                leave(&shared, &t, granted).await;
                return reply;
            }
        }
        // In the queue: blocked until it returns.
        let (wake, _blocked) = self
            .block_on(&shared.clients, &mut granted, until, stream)
            .await;
        match wake {
            Wake::Answer(outcome) => outcome_reply(outcome, t.multi),
            Wake::Unblocked(error) => {
                let free = match unblock_reply(error) {
                    Reply::NilArray => Reply::Nil,
                    error => error,
                };
                stop_waiting(&shared, &t, granted, free).await
            }
            Wake::Timeout => stop_waiting(&shared, &t, granted, Reply::Nil).await,
            // CLIENT KILL or a hang-up: the connection closes unanswered; a grant is given
            // back.
            Wake::Gone => {
                leave(&shared, &t, granted).await;
                Reply::Nil
            }
            Wake::Shutdown => {
                leave(&shared, &t, granted).await;
                Reply::err("ERR server is shutting down")
            }
        }
    }
}

/// Stops a wait its client ended (timeout, CLIENT UNBLOCK): the token if the waiter was
/// granted or its owner holds the lock, else `free` (and the waiter leaves the queue).
async fn stop_waiting(
    shared: &std::sync::Arc<crate::server::Shared>,
    t: &Ticket,
    granted: oneshot::Receiver<Outcome>,
    free: Reply,
) -> Reply {
    match end_wait(shared, t.id) {
        // Granted just now: the token is on its way.
        Ended::Delivered => outcome_reply(granted.await, t.multi),
        Ended::Held(tokens) => {
            // Still queued if the owner holds the lock through another connection.
            t.cancel(shared);
            grant_reply(&tokens, t.multi)
        }
        Ended::Free => {
            t.cancel(shared);
            free
        }
    }
}

/// Stops waiting with no client to answer: leaves the queue, or gives back a grant that has
/// already been handed over (it is on its way: the waiter task sends as it unregisters).
async fn leave(
    shared: &std::sync::Arc<crate::server::Shared>,
    t: &Ticket,
    granted: oneshot::Receiver<Outcome>,
) {
    if shared.waiters.forget(t.id) {
        t.cancel(shared);
    } else if let Ok(Some(tokens)) = granted.await {
        // Granted to a connection that has closed: released at once.
        t.give_back(shared, tokens);
    }
}
