//! Session commands that wait inline: the blocking pops (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH,
//! BLMPOP, BZPOPMIN, BZPOPMAX, BZMPOP: a replicated wait queue, `cmd::popwait`) and the
//! transaction commands (EXEC sends the queue as one replicated unit; WATCH reads key
//! versions).

use std::time::Duration;

use std::sync::Arc;

use super::super::popwait;
use super::super::stream::ClientStream;
use super::super::Shared;
use super::blocked::{unblock_reply, wait_until, Wake};
use bytes::Bytes;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::txn::{exec_abort, Queued};
use super::{await_read, await_write, Session};
use crate::cmd::multi::{Exec, TxnCmd, Versions};
use crate::cmd::popwait::{PopWait, POP_QUEUED};
use crate::cmd::{Command, ConnCmd, Request, Spec};
use crate::resp::{Args, Reply};
use crate::state::WaiterId;

pub use crate::cmd::popwait::wait_spec;

/// Commands that run immediately even inside MULTI.
pub fn runs_inside_multi(name: &str) -> bool {
    matches!(
        name,
        "exec" | "discard" | "multi" | "watch" | "quit" | "reset"
    )
}

impl Session {
    pub(super) fn write_deadline(&self) -> Instant {
        Instant::now() + Duration::from_millis(self.shared.config.write_timeout_ms)
    }

    /// Queues a command inside MULTI. Unknown commands and wrong arity are reported now and
    /// doom the transaction; other argument errors are reported by EXEC, as in Redis.
    pub(super) fn queue(
        &mut self,
        resolved: Result<&'static Spec, Reply>,
        argv: Vec<Bytes>,
    ) -> Reply {
        let spec = match resolved {
            Ok(spec) => spec,
            Err(e) => {
                self.txn.dirty = true;
                return e;
            }
        };
        let name = super::stats::stat_name(spec.name, &argv);
        if self.shared.clients.monitors.active() && crate::cmd::monitor::shown(spec, &argv) {
            self.txn.monitored.push(argv.clone());
        }
        let item = match (spec.parse)(&mut Args::new(argv)) {
            Err(e) => Queued::Failed(e),
            Ok(Request::Data(c)) if c.is_read() => Queued::Cmd(self.as_user(c)),
            Ok(Request::Data(c)) => Queued::Cmd(self.as_user(self.shared.default_lock_delay(c))),
            // Redis queues it and refuses it when EXEC runs it.
            Ok(Request::Conn(ConnCmd::Sub(s))) if s.shard && s.subscribe => Queued::Failed(
                Reply::err("ERR SSUBSCRIBE isn't allowed for a DENY BLOCKING client"),
            ),
            Ok(Request::Conn(ConnCmd::Sub(_))) | Ok(Request::Admin(_)) => {
                self.txn.dirty = true;
                return Reply::err("ERR Command not allowed inside a transaction");
            }
            Ok(Request::Conn(c)) => Queued::Conn(c),
        };
        self.txn.push(name, item)
    }

    /// MULTI, EXEC, DISCARD, WATCH, UNWATCH.
    pub(super) async fn txn_cmd(&mut self, cmd: TxnCmd) -> Reply {
        match cmd {
            TxnCmd::Multi if self.txn.active() => Reply::err("ERR MULTI calls can not be nested"),
            TxnCmd::Multi => {
                self.txn.queue = Some(Vec::new());
                Reply::ok()
            }
            TxnCmd::Discard if !self.txn.active() => Reply::err("ERR DISCARD without MULTI"),
            TxnCmd::Discard => {
                self.txn.reset();
                Reply::ok()
            }
            TxnCmd::Exec if !self.txn.active() => Reply::err("ERR EXEC without MULTI"),
            TxnCmd::Exec => self.exec().await,
            TxnCmd::Watch(_) if self.txn.active() => {
                Reply::err("ERR WATCH inside MULTI is not allowed")
            }
            TxnCmd::Watch(keys) => self.watch(keys).await,
            TxnCmd::Unwatch => {
                self.txn.watched.clear();
                Reply::ok()
            }
        }
    }

    async fn watch(&mut self, keys: Vec<Bytes>) -> Reply {
        let versions = Command::Versions(Versions { keys: keys.clone() });
        let rx = self.shared.reader.submit_as(self.user.clone(), versions);
        match await_read(rx, self.write_deadline()).await {
            Reply::Array(versions) if versions.len() == keys.len() => {
                for (key, v) in keys.into_iter().zip(versions) {
                    if self.txn.watched.iter().any(|(k, _)| *k == key) {
                        continue;
                    }
                    let version = match v {
                        Reply::Int(n) => Some(n as u64),
                        _ => None,
                    };
                    self.txn.watched.push((key, version));
                }
                Reply::ok()
            }
            Reply::Error(e) => Reply::Error(e),
            _ => Reply::err("ERR internal: bad WATCH reply"),
        }
    }

    /// Sends the queued commands as one [`Exec`] and merges the replies of the session-level
    /// items back in queue order.
    async fn exec(&mut self) -> Reply {
        let monitored = std::mem::take(&mut self.txn.monitored);
        let (queue, dirty, watched) = self.txn.reset();
        if dirty {
            return exec_abort();
        }
        let cmds: Vec<Command> = queue
            .iter()
            .filter_map(|(_, q)| match q {
                Queued::Cmd(c) => Some(c.clone()),
                _ => None,
            })
            .collect();
        let replicated = if cmds.is_empty() && watched.is_empty() {
            Reply::Array(vec![])
        } else {
            let exec = Exec { watched, cmds };
            let read_only = exec.is_read_only();
            let cmd = Command::Exec(exec);
            let user = self.user.clone();
            if read_only {
                await_read(
                    self.shared.reader.submit_as(user, cmd),
                    self.write_deadline(),
                )
                .await
            } else {
                await_write(
                    self.shared.proposer.submit_as(user, cmd),
                    self.write_deadline(),
                )
                .await
            }
        };
        let mut replies = match replicated {
            Reply::Array(r) => {
                // They ran: monitors see them before EXEC itself, as in Redis.
                for argv in &monitored {
                    self.feed_line(argv);
                }
                r.into_iter()
            }
            other => return other,
        };
        let mut out = Vec::with_capacity(queue.len());
        for (name, item) in queue {
            let reply = match item {
                Queued::Cmd(Command::Publish(p)) => {
                    let r = replies.next().unwrap_or(Reply::Nil);
                    self.publish_count(r, &p.channel, false)
                }
                Queued::Cmd(Command::SPublish(p)) => {
                    let r = replies.next().unwrap_or(Reply::Nil);
                    self.publish_count(r, &p.channel, true)
                }
                Queued::Cmd(_) => replies.next().unwrap_or(Reply::Nil),
                Queued::Conn(c) => super::conn::execute(self, c),
                Queued::Failed(e) => e,
            };
            self.counts.inner_call(name, &reply);
            out.push(reply);
        }
        Reply::Array(out)
    }

    /// BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP, BZPOPMIN, BZPOPMAX and BZMPOP: proposed with
    /// this client as a waiter, so that it pops at once if it can and otherwise joins the
    /// replicated queue of each key (`cmd::popwait`): the cluster serves its waiters
    /// first-come, first-served, whichever node they are connected to. The client then waits
    /// for its node to hand it the served reply, or for its timeout (a null array, `*-1` or
    /// `_` in RESP3), and leaves the queue through the log when it stops waiting.
    pub(super) async fn blocking_pop(&mut self, cmd: Command, stream: &mut ClientStream) -> Reply {
        let Some((_, timeout_ms, _)) = wait_spec(&cmd) else {
            return Reply::err("ERR internal: not a blocking command");
        };
        let until = wait_until(timeout_ms);
        let shared = self.shared.clone();
        let (id, mut served) = shared.pop_waiters.register(cmd.clone());
        let wait = Command::PopWait(PopWait {
            waiter: id,
            cmd: Box::new(cmd.clone()),
        });
        let reply = await_write(
            shared.proposer.submit_as(self.user.clone(), wait),
            self.write_deadline(),
        )
        .await;
        match &reply {
            Reply::Simple(s) if s == POP_QUEUED => shared.pop_waiters.mark_queued(id),
            // An error may be an unknown outcome (the entry may have queued the waiter, and
            // it may even have been served since): leave the queue, or take the reply.
            Reply::Error(_) => return stop_waiting(&shared, &cmd, id, served, reply).await,
            // Popped at once.
            _ => {
                shared.pop_waiters.discard(id);
                return reply;
            }
        }
        // Queued: blocked until it returns.
        let (wake, _blocked) = self
            .block_on(&shared.clients, &mut served, until, stream)
            .await;
        match wake {
            Wake::Answer(r) => {
                r.unwrap_or_else(|_| Reply::err("ERR internal: the pop waiter was dropped"))
            }
            Wake::Timeout => stop_waiting(&shared, &cmd, id, served, Reply::NilArray).await,
            Wake::Unblocked(error) => {
                stop_waiting(&shared, &cmd, id, served, unblock_reply(error)).await
            }
            // CLIENT KILL or a hang-up: the connection closes unanswered.
            Wake::Gone => unanswered(&shared, &cmd, id, served, Reply::NilArray).await,
            Wake::Shutdown => {
                let down = Reply::err("ERR server is shutting down");
                unanswered(&shared, &cmd, id, served, down).await
            }
        }
    }
}

/// The client stops waiting and will not read its reply: it leaves the queue, and a reply
/// served to it meanwhile is given back. It gets `otherwise`.
async fn unanswered(
    shared: &Arc<Shared>,
    cmd: &Command,
    id: WaiterId,
    served: oneshot::Receiver<Reply>,
    otherwise: Reply,
) -> Reply {
    let reply = stop_waiting(shared, cmd, id, served, otherwise.clone()).await;
    if reply != otherwise {
        popwait::give_back_now(shared, cmd, &reply);
    }
    otherwise
}

/// The client stops waiting: if it was still waiting, it leaves the queue through the log
/// and gets `otherwise`; if a reply was served to it meanwhile, it gets that.
async fn stop_waiting(
    shared: &Arc<Shared>,
    cmd: &Command,
    id: WaiterId,
    served: oneshot::Receiver<Reply>,
    otherwise: Reply,
) -> Reply {
    if shared.pop_waiters.forget(id) {
        popwait::cancel(shared, cmd, id);
        return otherwise;
    }
    // Handed over just now: the reply is on its way.
    served.await.unwrap_or(otherwise)
}
