//! Forwarding from a follower to the leader over the peer port, so that a client connected to
//! any node sees identical semantics. Commands are forwarded batch by batch, in order, and
//! the leader runs them through its own proposer or reader.

use openraft::async_runtime::watch::WatchReceiver;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use crate::cmd::Command;
use crate::raft::network::{PeerContext, CONNECT_TIMEOUT};
use crate::raft::protocol::{PeerConn, PeerError, PeerRequest, PeerResponse};
use crate::raft::{NodeId, Raft};
use crate::resp::Reply;

/// Who leads, from this node's point of view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Leader {
    /// This node.
    Me,
    /// Another node, with its peer address.
    Other(NodeId, String),
    /// No leader is known (election in progress, or no quorum).
    Unknown,
}

/// Why forwarding did not produce replies.
#[derive(Debug)]
pub enum ForwardError {
    /// This node became the leader; run the work locally.
    BecameLeader,
    /// The error reply every command of the batch gets.
    Failed(Reply),
}

/// Connections to the leader, reused across batches.
pub struct LeaderLink {
    raft: Raft,
    ctx: Arc<PeerContext>,
    idle: Mutex<Vec<(String, PeerConn)>>,
}

/// Pause between attempts while there is no reachable leader.
const RETRY: Duration = Duration::from_millis(25);

impl LeaderLink {
    /// Creates the link.
    pub fn new(raft: Raft, ctx: Arc<PeerContext>) -> LeaderLink {
        LeaderLink {
            raft,
            ctx,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// This node's id.
    pub fn node_id(&self) -> NodeId {
        self.ctx.node_id
    }

    /// The current leader as this node knows it.
    pub fn leader(&self) -> Leader {
        // Borrowed, not cloned: this runs once per batch on the proposer and reader paths.
        let metrics = self.raft.metrics();
        let m = metrics.borrow_watched();
        match m.current_leader {
            Some(id) if id == self.ctx.node_id && m.state == openraft::ServerState::Leader => {
                Leader::Me
            }
            Some(id) if id == self.ctx.node_id => Leader::Unknown,
            Some(id) => match m.membership_config.membership().get_node(&id) {
                Some(node) => Leader::Other(id, node.addr.clone()),
                None => Leader::Unknown,
            },
            None => Leader::Unknown,
        }
    }

    fn take_conn(&self, addr: &str) -> Option<PeerConn> {
        let mut idle = self.idle.lock().ok()?;
        while let Some(pos) = idle.iter().position(|(a, _)| a == addr) {
            let (_, mut conn) = idle.swap_remove(pos);
            if !conn.is_closed() {
                return Some(conn);
            }
        }
        None
    }

    fn put_conn(&self, addr: String, conn: PeerConn) {
        if let Ok(mut idle) = self.idle.lock() {
            if idle.len() < 8 {
                idle.push((addr, conn));
            }
        }
    }

    /// Sends `body` to the leader and returns its response. Retries while no leader is
    /// known or it cannot be reached (nothing was sent); a failure after sending is final for
    /// writes (`retry_after_send` false), because the outcome is unknown.
    async fn call(
        &self,
        body: impl Fn() -> PeerRequest,
        deadline: Instant,
        retry_after_send: bool,
    ) -> Result<PeerResponse, ForwardError> {
        let mut last = "no leader".to_string();
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Err(ForwardError::Failed(Reply::err(format!(
                    "CLUSTERDOWN {last}"
                ))));
            }
            let (id, addr) = match self.leader() {
                Leader::Me => return Err(ForwardError::BecameLeader),
                Leader::Unknown => {
                    last = "no leader".into();
                    tokio::time::sleep(RETRY).await;
                    continue;
                }
                Leader::Other(id, addr) => (id, addr),
            };
            if self.ctx.faults.is_dropped(id) {
                last = format!("leader {id} unreachable");
                tokio::time::sleep(RETRY).await;
                continue;
            }
            let mut conn = match self.take_conn(&addr) {
                Some(c) => c,
                None => match PeerConn::connect(
                    &addr,
                    CONNECT_TIMEOUT.min(deadline - now),
                    &self.ctx,
                    id,
                )
                .await
                {
                    Ok(c) => c,
                    Err(e) => {
                        last = format!("leader {id} unreachable: {e}");
                        tokio::time::sleep(RETRY).await;
                        continue;
                    }
                },
            };
            let env = self.ctx.envelope(id, body());
            match conn
                .call(&env, deadline.saturating_duration_since(Instant::now()))
                .await
            {
                Ok(resp) => {
                    self.put_conn(addr, conn);
                    return Ok(resp);
                }
                Err(PeerError::Rejected(why)) => {
                    return Err(ForwardError::Failed(Reply::err(format!(
                        "ERR leader {id} refused forwarded request: {why}"
                    ))))
                }
                Err(e) if retry_after_send => {
                    last = format!("leader {id}: {e}");
                    tokio::time::sleep(RETRY).await;
                }
                Err(e) => {
                    tracing::warn!(leader = id, error = %e, "forwarded write lost its connection");
                    return Err(ForwardError::Failed(Reply::err(
                        "TRYAGAIN write outcome unknown: connection to the leader failed",
                    )));
                }
            }
        }
    }

    /// Forwards a batch of commands, each with the ACL user it runs for; replies come back
    /// in order.
    pub async fn forward(
        &self,
        write: bool,
        cmds: &[Command],
        users: &[Option<String>],
        deadline: Instant,
    ) -> Result<Vec<Reply>, ForwardError> {
        let n = cmds.len();
        let resp = self
            .call(
                || PeerRequest::Forward {
                    write,
                    cmds: cmds.to_vec(),
                    users: users.to_vec(),
                },
                deadline,
                !write,
            )
            .await?;
        match resp {
            PeerResponse::Forward(replies) if replies.len() == n => Ok(replies),
            _ => Err(ForwardError::Failed(Reply::err(
                "ERR internal: bad forwarded reply",
            ))),
        }
    }

    /// Forwards a RAFT.* admin command to the leader.
    pub async fn admin(&self, argv: Vec<Bytes>, deadline: Instant) -> Result<Reply, ForwardError> {
        match self
            .call(|| PeerRequest::Admin(argv.clone()), deadline, false)
            .await?
        {
            PeerResponse::Admin(reply) => Ok(reply),
            _ => Err(ForwardError::Failed(Reply::err(
                "ERR internal: bad forwarded reply",
            ))),
        }
    }

    /// Runs the admin command `argv` on node `id` at peer address `addr` (any member, not
    /// only the leader), on a connection of its own, within `timeout`.
    pub async fn ask(
        &self,
        id: NodeId,
        addr: &str,
        argv: Vec<Bytes>,
        timeout: Duration,
    ) -> Result<Reply, String> {
        if self.ctx.faults.is_dropped(id) {
            return Err(format!("node {id} unreachable (fault injection)"));
        }
        let deadline = Instant::now() + timeout;
        let mut conn = PeerConn::connect(addr, timeout, &self.ctx, id)
            .await
            .map_err(|e| e.to_string())?;
        let env = self.ctx.envelope(id, PeerRequest::Admin(argv));
        let left = deadline.saturating_duration_since(Instant::now());
        match conn.call(&env, left).await.map_err(|e| e.to_string())? {
            PeerResponse::Admin(reply) => Ok(reply),
            _ => Err("unexpected peer response".into()),
        }
    }

    /// The fault-injection switches shared with the peer transport.
    pub fn faults(&self) -> &crate::raft::network::Faults {
        &self.ctx.faults
    }

    /// This node's append stream counters.
    pub fn append_stats(&self) -> &crate::raft::network::AppendStats {
        &self.ctx.appends
    }

    /// The cluster id (for RAFT.INFO).
    pub fn cluster_id(&self) -> u64 {
        self.ctx.cluster_id.load(Ordering::Relaxed)
    }
}
