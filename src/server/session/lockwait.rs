//! `LOCK ... WAIT`: the session joins the key's queue through the log and blocks until the
//! node's waiter task hands it the grant (see `server::lockwait`), the wait runs out, or the
//! client hangs up.

use std::time::Duration;

use super::super::stream::ClientStream;
use tokio::time::Instant;

use super::{await_write, Session};
use crate::cmd::lock::{Acquire, QUEUED};
use crate::cmd::Command;
use crate::resp::Reply;
use crate::server::clients::UnblockWait;
use crate::server::lockwait::{cancel, release};

impl Session {
    /// Proposes the LOCK with this session as its waiter, and waits for the answer.
    pub(super) async fn lock_wait(
        &mut self,
        mut lock: Acquire,
        stream: &mut ClientStream,
    ) -> Reply {
        let shared = self.shared.clone();
        let key = lock.key.clone();
        let (id, mut granted) = shared.waiters.register(key.clone(), lock.owner.clone());
        lock.waiter = Some(id);
        let until = match lock.wait_ms {
            Some(ms) if ms > 0 => Some(Instant::now() + Duration::from_millis(ms)),
            _ => None,
        };
        let reply = await_write(
            shared
                .proposer
                .submit_as(self.user.clone(), Command::Acquire(lock)),
            self.write_deadline(),
        )
        .await;
        match &reply {
            Reply::Simple(s) if s == QUEUED => {}
            Reply::Int(_) | Reply::Nil => {
                shared.waiters.forget(id);
                return reply;
            }
            // An error, or an unknown outcome: the LOCK may have been queued all the same.
            _ => {
                if shared.waiters.forget(id) {
                    cancel(&shared, key, id);
                } else if let Ok(token) = granted.try_recv() {
                    release(&shared, key, token);
                }
                return reply;
            }
        }
        let mut unblock = UnblockWait::arm(self.killed.clone());
        // In the queue: blocked (CLIENT LIST `flags=b`, INFO blocked_clients) until it returns.
        let _blocked = shared.clients.block(self.id);
        let mut watch_peer = true;
        let mut probe = [0u8; 1];
        loop {
            let timeout = async {
                match until {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                token = &mut granted => return match token {
                    Ok(t) => Reply::Int(t as i64),
                    Err(_) => Reply::err("ERR internal: the lock waiter was dropped"),
                },
                error = unblock.wait() => {
                    if shared.waiters.forget(id) {
                        cancel(&shared, key, id);
                        return match super::blocking::unblock_reply(error) {
                            Reply::NilArray => Reply::Nil,
                            error => error,
                        };
                    }
                    // Granted just now: the token is on its way.
                    return match granted.await {
                        Ok(t) => Reply::Int(t as i64),
                        Err(_) => Reply::Nil,
                    };
                }
                _ = timeout => {
                    if shared.waiters.forget(id) {
                        cancel(&shared, key, id);
                        return Reply::Nil;
                    }
                    // Granted just now: the token is on its way.
                    return match granted.await {
                        Ok(t) => Reply::Int(t as i64),
                        Err(_) => Reply::Nil,
                    };
                }
                _ = self.stop.changed() => {
                    if shared.waiters.forget(id) {
                        cancel(&shared, key, id);
                    }
                    return Reply::err("ERR server is shutting down");
                }
                // Notice a client that hangs up while it waits (data means it is alive).
                r = stream.peek(&mut probe), if watch_peer => match r {
                    Ok(0) | Err(_) => {
                        if shared.waiters.forget(id) {
                            cancel(&shared, key, id);
                        } else if let Ok(token) = granted.await {
                            // Granted to a connection that has closed: released at once.
                            release(&shared, key, token);
                        }
                        return Reply::Nil;
                    }
                    Ok(_) => watch_peer = false,
                },
            }
        }
    }
}
