//! Session commands that wait inline: BLPOP/BRPOP, BLMOVE/BRPOPLPUSH and BLMPOP (retry on a
//! push to one of the keys, until the timeout) and the transaction commands (EXEC sends the queue as one replicated unit;
//! WATCH reads key versions).

use std::time::Duration;

use super::super::stream::ClientStream;
use bytes::Bytes;
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;

use super::txn::{exec_abort, Queued};
use super::{await_read, await_write, Session};
use crate::cmd::blpop::BPop;
use crate::cmd::lmove::LMPop;
use crate::cmd::multi::{Exec, TxnCmd, Versions};
use crate::cmd::{Command, ConnCmd, Request, Spec};
use crate::resp::{Args, Reply};
use crate::state::Event;

/// The keys a blocking command waits on and its timeout in ms (0: forever); `None` for a
/// command that does not block (including LMOVE, RPOPLPUSH and LMPOP).
pub fn wait_spec(cmd: &Command) -> Option<(&[Bytes], u64)> {
    match cmd {
        Command::BPop(p) => Some((&p.keys, p.timeout_ms)),
        Command::LMove(m) => m.timeout_ms.map(|t| (std::slice::from_ref(&m.src), t)),
        Command::LMPop(m) => m.timeout_ms.map(|t| (m.keys.as_slice(), t)),
        _ => None,
    }
}

/// The blocking command restricted to the keys `keep` accepts (in their order), or `None`
/// if it keeps none.
fn only_keys(cmd: &Command, keep: impl Fn(&[u8]) -> bool) -> Option<Command> {
    let filter = |keys: &[Bytes]| -> Option<Vec<Bytes>> {
        let kept: Vec<Bytes> = keys.iter().filter(|k| keep(k)).cloned().collect();
        (!kept.is_empty()).then_some(kept)
    };
    Some(match cmd {
        Command::BPop(p) => Command::BPop(BPop {
            keys: filter(&p.keys)?,
            ..p.clone()
        }),
        Command::LMPop(m) => Command::LMPop(LMPop {
            keys: filter(&m.keys)?,
            ..m.clone()
        }),
        Command::LMove(m) if keep(&m.src) => cmd.clone(),
        _ => return None,
    })
}

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
        let item = match (spec.parse)(&mut Args::new(argv)) {
            Err(e) => Queued::Failed(e),
            Ok(Request::Write(c)) => Queued::Cmd(self.as_user(self.shared.default_lock_delay(c))),
            Ok(Request::Read(c)) => Queued::Cmd(self.as_user(c)),
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
            Reply::Array(r) => r.into_iter(),
            other => return other,
        };
        let mut out = Vec::with_capacity(queue.len());
        for (name, item) in queue {
            let reply = match item {
                Queued::Cmd(Command::Publish(p)) => {
                    let r = replies.next().unwrap_or(Reply::Nil);
                    self.publish_count(r, &p.channel)
                }
                Queued::Cmd(_) => replies.next().unwrap_or(Reply::Nil),
                Queued::Conn(c) => self.conn(c),
                Queued::Failed(e) => e,
            };
            self.counts.inner_call(name, &reply);
            out.push(reply);
        }
        Reply::Array(out)
    }

    /// BLPOP/BRPOP/BLMOVE/BRPOPLPUSH/BLMPOP: pop now if possible; otherwise wait for a push
    /// to one of the keys to be applied on this node (from any client, script or node), then
    /// try again, until the timeout. An attempt that finds nothing replies a null (BLMOVE) or
    /// a null array; the timeout reply is a null array (`*-1`, or `_` in RESP3) for all.
    pub(super) async fn blocking_pop(&mut self, cmd: Command, stream: &mut ClientStream) -> Reply {
        let Some((keys, timeout_ms)) = wait_spec(&cmd).map(|(k, t)| (k.to_vec(), t)) else {
            return Reply::err("ERR internal: not a blocking command");
        };
        let until = (timeout_ms > 0).then(|| Instant::now() + Duration::from_millis(timeout_ms));
        // Subscribe before the first attempt, so a push applied after it is never missed.
        let Some(mut events) = self
            .shared
            .state
            .read()
            .ok()
            .map(|st| st.events.subscribe())
        else {
            return Reply::err("ERR internal: state lock poisoned");
        };
        let mut watch_peer = true;
        let shared = self.shared.clone();
        // Queue first (node-local FIFO, `server::listwait`): a client that finds others
        // already waiting on one of its keys waits for its turn instead of trying at once.
        let ticket = shared.list_waiters.join(&keys);
        let mut blocked = None;
        loop {
            // Try only the keys this client is first in line for: for the others, the
            // clients ahead take any element (in Redis those keys are empty for it).
            if let Some(attempt) = only_keys(&cmd, |k| ticket.is_head(k)) {
                let rx = self.shared.proposer.submit_as(self.user.clone(), attempt);
                let reply = await_write(rx, self.write_deadline()).await;
                if !matches!(reply, Reply::NilArray | Reply::Nil) {
                    // Dropping the ticket (here) lets the next client in line try.
                    return reply;
                }
            }
            // Nothing to pop: from now until it returns, the client is blocked (tests wait
            // for the mark instead of sleeping).
            blocked.get_or_insert_with(|| shared.clients.block(self.id));
            loop {
                let timeout = async {
                    match until {
                        Some(t) => tokio::time::sleep_until(t).await,
                        None => std::future::pending().await,
                    }
                };
                let mut probe = [0u8; 1];
                tokio::select! {
                    ev = events.recv() => match ev {
                        // Only the first client in the key's queue takes a push.
                        Ok(Event::Touched(k)) if keys.contains(&k) && ticket.is_head(&k) => break,
                        Ok(_) => {}
                        Err(RecvError::Lagged(_)) => break,
                        Err(RecvError::Closed) => return Reply::err("ERR server is shutting down"),
                    },
                    // A client ahead left: an element may be there for this one.
                    _ = ticket.turn.notified() => break,
                    _ = timeout => return Reply::NilArray,
                    _ = self.stop.changed() => return Reply::err("ERR server is shutting down"),
                    // Notice a client that hangs up while blocked (data means it is alive).
                    r = stream.peek(&mut probe), if watch_peer => match r {
                        Ok(0) | Err(_) => return Reply::NilArray,
                        Ok(_) => watch_peer = false,
                    },
                }
            }
        }
    }
}
