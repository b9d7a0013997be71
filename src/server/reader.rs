//! Linearizable reads: every read queued while a ReadIndex round runs is served by the next
//! round, so one round (and one quorum check) serves many reads (design.md §6).

use std::sync::{Arc, RwLock};

use tokio::sync::{mpsc, oneshot};

use super::proposer::Clock;
use crate::cmd::Command;
use crate::raft::Raft;
use crate::resp::Reply;
use crate::store::SmState;

struct Pending {
    cmd: Command,
    reply: oneshot::Sender<Reply>,
}

/// Handle for submitting reads.
#[derive(Clone)]
pub struct Reader {
    tx: mpsc::UnboundedSender<Pending>,
}

impl Reader {
    /// Starts the reader task.
    pub fn start(raft: Raft, state: Arc<RwLock<SmState>>, clock: Clock) -> Reader {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(rx, raft, state, clock));
        Reader { tx }
    }

    /// Queues a read; the receiver yields its reply.
    pub fn submit(&self, cmd: Command) -> oneshot::Receiver<Reply> {
        let (reply, rx) = oneshot::channel();
        let _ = self.tx.send(Pending { cmd, reply });
        rx
    }
}

/// Cluster time now, as the leader estimates it for reads (never ahead of the truth).
pub fn cluster_now(raft: &Raft, state: &SmState, clock: &Clock) -> u64 {
    let term = raft.metrics().borrow().current_term;
    state.ks.clock().estimate(term, clock.boot, clock.now_ms())
}

async fn run(
    mut rx: mpsc::UnboundedReceiver<Pending>,
    raft: Raft,
    state: Arc<RwLock<SmState>>,
    clock: Clock,
) {
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        while let Ok(p) = rx.try_recv() {
            batch.push(p);
        }
        match raft.ensure_linearizable().await {
            Ok(_) => {
                let Ok(st) = state.read() else {
                    for p in batch {
                        let _ = p
                            .reply
                            .send(Reply::err("ERR internal: state lock poisoned"));
                    }
                    continue;
                };
                let now = cluster_now(&raft, &st, &clock);
                for p in batch {
                    let _ = p.reply.send(p.cmd.query(&st.ks, now));
                }
            }
            Err(e) => {
                let reply = super::errors::read_error(&e);
                for p in batch {
                    let _ = p.reply.send(reply.clone());
                }
            }
        }
    }
}
