//! Linearizable reads: every read queued while one leadership check runs is served after the
//! next, so one check serves many reads. The check is a lease read, or a heartbeat round when
//! the quorum's last acknowledgement is too old (`raft::lease`; docs/architecture.md, "Reads").

use openraft::async_runtime::watch::WatchReceiver;
use std::sync::{Arc, RwLock};

use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::forward::{ForwardError, Leader, LeaderLink};

use super::proposer::Clock;
use crate::cmd::keys::{Keys, ScanCursors, KEYS_STEP};
use crate::cmd::Command;
use crate::raft::Raft;
use crate::resp::Reply;
use crate::store::SmState;

struct Pending {
    cmd: Command,
    /// The ACL user the read runs for (see `Proposer::submit_as`).
    user: Option<Arc<str>>,
    reply: oneshot::Sender<Reply>,
}

/// Handle for submitting reads.
#[derive(Clone)]
pub struct Reader {
    tx: mpsc::UnboundedSender<Pending>,
}

impl Reader {
    /// Starts the reader task.
    pub fn start(
        raft: Raft,
        state: Arc<RwLock<SmState>>,
        clock: Clock,
        link: Arc<LeaderLink>,
        timeout: Duration,
    ) -> Reader {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(rx, raft, state, clock, link, timeout));
        Reader { tx }
    }

    /// Queues one of the node's own reads; the receiver yields its reply.
    pub fn submit(&self, cmd: Command) -> oneshot::Receiver<Reply> {
        self.submit_as(None, cmd)
    }

    /// Queues a client's read, sent by ACL user `user` (see `Proposer::submit_as`).
    pub fn submit_as(&self, user: Option<Arc<str>>, cmd: Command) -> oneshot::Receiver<Reply> {
        let (reply, rx) = oneshot::channel();
        let _ = self.tx.send(Pending { cmd, user, reply });
        rx
    }
}

/// Cluster time now, as the leader estimates it for reads (never ahead of the truth).
pub fn cluster_now(raft: &Raft, state: &SmState, clock: &Clock) -> u64 {
    let term = raft.metrics().borrow_watched().current_term;
    state.ks.clock().estimate(term, clock.boot, clock.now_ms())
}

async fn run(
    mut rx: mpsc::UnboundedReceiver<Pending>,
    raft: Raft,
    state: Arc<RwLock<SmState>>,
    clock: Clock,
    link: Arc<LeaderLink>,
    timeout: Duration,
) {
    // The SCAN cursors this node handed out (module docs of cmd/keys.rs).
    let mut cursors = ScanCursors::default();
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        while let Ok(p) = rx.try_recv() {
            batch.push(p);
        }
        if link.leader() != Leader::Me {
            let cmds: Vec<Command> = batch.iter().map(|p| p.cmd.clone()).collect();
            let users: Vec<Option<String>> = batch
                .iter()
                .map(|p| p.user.as_deref().map(String::from))
                .collect();
            match link
                .forward(false, &cmds, &users, Instant::now() + timeout)
                .await
            {
                Ok(replies) => {
                    for (p, r) in batch.into_iter().zip(replies) {
                        let _ = p.reply.send(r);
                    }
                    continue;
                }
                Err(ForwardError::Failed(reply)) => {
                    for p in batch {
                        let _ = p.reply.send(reply.clone());
                    }
                    continue;
                }
                // Serve it here after all.
                Err(ForwardError::BecameLeader) => {}
            }
        }
        serve_local(&raft, &state, &clock, batch, timeout, &mut cursors).await;
    }
}

/// Leadership confirmed once for the batch (a lease read, or a ReadIndex round when the
/// quorum's last acknowledgement is too old: `raft::lease`), then every read of the batch
/// against the applied state.
async fn serve_local(
    raft: &Raft,
    state: &RwLock<SmState>,
    clock: &Clock,
    batch: Vec<Pending>,
    timeout: Duration,
    cursors: &mut ScanCursors,
) {
    let reply_all = |batch: Vec<Pending>, reply: Reply| {
        for p in batch {
            let _ = p.reply.send(reply.clone());
        }
    };
    // Bounded: a leader cut off from its quorum must answer with an error, not hang.
    match tokio::time::timeout(
        timeout,
        raft.ensure_linearizable(crate::raft::lease::read_option()),
    )
    .await
    {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return reply_all(batch, super::errors::read_error(&e)),
        Err(_) => {
            return reply_all(
                batch,
                Reply::err("CLUSTERDOWN no quorum: the leader could not confirm its leadership"),
            )
        }
    }
    let mut keys = Vec::new();
    let now = {
        let Ok(st) = state.read() else {
            return reply_all(batch, Reply::err("ERR internal: state lock poisoned"));
        };
        let now = cluster_now(raft, &st, clock);
        for p in batch {
            let reply = match &p.cmd {
                Command::Scan(scan) => scan.query_resumable(&st.ks, now, cursors),
                Command::Keys(k) => {
                    keys.push((k.clone(), p.reply));
                    continue;
                }
                // A client's read: its random draws are its own (cmd/draw.rs).
                cmd => crate::cmd::draw::fresh(|| cmd.query(&st.ks, now)),
            };
            let _ = p.reply.send(reply);
        }
        now
    };
    for (k, reply) in keys {
        let _ = reply.send(keys_in_steps(state, &k, now).await);
    }
}

/// A client's KEYS, [`KEYS_STEP`] keys per hold of the read lock, so that a large keyspace
/// does not stall writers (the applier waits for the write lock). Like SCAN, a key present
/// for the whole walk is listed; one written or deleted meanwhile may or may not be.
async fn keys_in_steps(state: &RwLock<SmState>, k: &Keys, now: u64) -> Reply {
    let mut out = Vec::new();
    let mut after = None;
    loop {
        let (part, last) = {
            let Ok(st) = state.read() else {
                return Reply::err("ERR internal: state lock poisoned");
            };
            k.part(&st.ks, now, after.as_ref(), KEYS_STEP)
        };
        out.extend(part);
        match last {
            Some(key) => after = Some(key),
            None => return Reply::Array(out),
        }
        tokio::task::yield_now().await;
    }
}
