//! Outbound Raft RPC over persistent TCP connections on the peer port.
//!
//! One client per target node keeps one connection open and reconnects after an error.
//! A test-only fault hook ([`Faults`]) can cut this node off from chosen peers in both
//! directions, which is how the partition tests isolate a single node.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;

use super::protocol::{Envelope, PeerConn, PeerError, PeerRequest, PeerResponse};
use super::{NodeId, TypeConfig};

/// How long a connection attempt to a peer may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

/// Peers this node must pretend it cannot reach (test-only fault injection).
#[derive(Debug, Default)]
pub struct Faults {
    dropped: RwLock<BTreeSet<NodeId>>,
    /// Extra latency added to every outbound peer RPC, in ms (0: none).
    delay_ms: AtomicU64,
}

impl Faults {
    /// True if traffic to or from `node` is being dropped.
    pub fn is_dropped(&self, node: NodeId) -> bool {
        self.dropped
            .read()
            .map(|d| d.contains(&node))
            .unwrap_or(false)
    }

    /// Replaces the set of cut-off peers (empty heals).
    pub fn set(&self, nodes: BTreeSet<NodeId>) {
        if let Ok(mut d) = self.dropped.write() {
            *d = nodes;
        }
    }

    /// Sets the latency added to every outbound peer RPC (0 removes it).
    pub fn set_delay_ms(&self, ms: u64) {
        self.delay_ms.store(ms, Ordering::Relaxed);
    }

    /// The latency added to every outbound peer RPC, in ms.
    pub fn delay_ms(&self) -> u64 {
        self.delay_ms.load(Ordering::Relaxed)
    }

    /// The cut-off peers.
    pub fn list(&self) -> Vec<NodeId> {
        self.dropped
            .read()
            .map(|d| d.iter().copied().collect())
            .unwrap_or_default()
    }
}

/// Identity and switches shared by the inbound service and all outbound clients.
#[derive(Debug)]
pub struct PeerContext {
    /// This node's id.
    pub node_id: NodeId,
    /// The cluster id; 0 until a joining node learns it from its first leader contact.
    pub cluster_id: AtomicU64,
    /// Fault injection.
    pub faults: Faults,
}

impl PeerContext {
    /// Builds an envelope from this node to `target`.
    pub fn envelope(&self, target: NodeId, body: PeerRequest) -> Envelope {
        Envelope {
            cluster_id: self.cluster_id.load(Ordering::Relaxed),
            from: self.node_id,
            target,
            body,
        }
    }
}

/// Creates clients for peers.
#[derive(Clone)]
pub struct PeerNetwork {
    /// Shared identity.
    pub ctx: Arc<PeerContext>,
}

/// A client for one peer.
pub struct PeerClient {
    target: NodeId,
    addr: String,
    ctx: Arc<PeerContext>,
    conn: Option<PeerConn>,
}

type RpcErr<E> = RPCError<NodeId, BasicNode, E>;

impl PeerClient {
    async fn call<E: std::error::Error>(
        &mut self,
        body: PeerRequest,
        ttl: Duration,
    ) -> Result<PeerResponse, RpcErr<E>> {
        if self.ctx.faults.is_dropped(self.target) {
            return Err(RPCError::Unreachable(Unreachable::new(&PeerError::Io(
                format!("fault injection: link to node {} cut", self.target),
            ))));
        }
        let delay = self.ctx.faults.delay_ms();
        if delay > 0 {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        let conn = match self.conn.as_mut() {
            Some(c) => c,
            None => {
                let c = PeerConn::connect(&self.addr, CONNECT_TIMEOUT.min(ttl))
                    .await
                    .map_err(|e| RPCError::Unreachable(Unreachable::new(&e)))?;
                self.conn.insert(c)
            }
        };
        let env = self.ctx.envelope(self.target, body);
        match conn.call(&env, ttl).await {
            Ok(resp) => Ok(resp),
            Err(e) => {
                // The stream's state is unknown after an error; start afresh next time.
                self.conn = None;
                Err(RPCError::Network(NetworkError::new(&e)))
            }
        }
    }

    fn unexpected<E: std::error::Error>(&self) -> RpcErr<E> {
        RPCError::Network(NetworkError::new(&PeerError::Io(
            "unexpected response type".into(),
        )))
    }
}

impl RaftNetworkFactory<TypeConfig> for PeerNetwork {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> Self::Network {
        PeerClient {
            target,
            addr: node.addr.clone(),
            ctx: self.ctx.clone(),
            conn: None,
        }
    }
}

impl RaftNetwork<TypeConfig> for PeerClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RpcErr<RaftError<NodeId>>> {
        match self
            .call(PeerRequest::Append(rpc), option.hard_ttl())
            .await?
        {
            PeerResponse::Append(Ok(r)) => Ok(r),
            PeerResponse::Append(Err(e)) => {
                Err(RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            _ => Err(self.unexpected()),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RpcErr<RaftError<NodeId, InstallSnapshotError>>>
    {
        match self
            .call(PeerRequest::Snapshot(rpc), option.hard_ttl())
            .await?
        {
            PeerResponse::Snapshot(Ok(r)) => Ok(r),
            PeerResponse::Snapshot(Err(e)) => {
                Err(RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            _ => Err(self.unexpected()),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RpcErr<RaftError<NodeId>>> {
        match self.call(PeerRequest::Vote(rpc), option.hard_ttl()).await? {
            PeerResponse::Vote(Ok(r)) => Ok(r),
            PeerResponse::Vote(Err(e)) => {
                Err(RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            _ => Err(self.unexpected()),
        }
    }
}
