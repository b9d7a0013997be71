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
        // The connection is taken out for the length of the exchange and put back only after
        // a whole answer arrived. openraft drops this future when its own timeout fires; a
        // connection left behind mid-exchange would hand the late answer to the next request
        // (a stale `Success` or `Conflict` attributed to a different range of the log).
        let mut conn = match self.conn.take() {
            Some(c) if !c.is_closed() => c,
            _ => PeerConn::connect(&self.addr, CONNECT_TIMEOUT.min(ttl))
                .await
                .map_err(|e| RPCError::Unreachable(Unreachable::new(&e)))?,
        };
        let env = self.ctx.envelope(self.target, body);
        match conn.call(&env, ttl).await {
            Ok(resp) => {
                self.conn = Some(conn);
                Ok(resp)
            }
            // The stream's state is unknown after an error; the next call connects afresh.
            Err(e) => Err(RPCError::Network(NetworkError::new(&e))),
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use bytes::Bytes;
    use futures::{SinkExt, StreamExt};
    use openraft::Vote;
    use tokio::net::TcpListener;
    use tokio_util::codec::Framed;

    use super::*;
    use crate::raft::protocol::codec;

    /// A peer that answers the first request it ever receives only after `late`, and every
    /// later request at once, each with the answer type its request expects.
    async fn peer_slow_on_first_request(late: Duration) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let first = Arc::new(AtomicBool::new(true));
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let first = first.clone();
                tokio::spawn(async move {
                    let mut framed = Framed::new(stream, codec());
                    while let Some(Ok(frame)) = framed.next().await {
                        let env: Envelope = postcard::from_bytes(&frame).expect("envelope");
                        if first.swap(false, Ordering::SeqCst) {
                            tokio::time::sleep(late).await;
                        }
                        let resp = match env.body {
                            PeerRequest::Vote(v) => PeerResponse::Vote(Ok(VoteResponse {
                                vote: v.vote,
                                vote_granted: false,
                                last_log_id: None,
                            })),
                            PeerRequest::Append(_) => {
                                PeerResponse::Append(Ok(AppendEntriesResponse::Success))
                            }
                            _ => PeerResponse::Rejected("unexpected in this test".into()),
                        };
                        let bytes = postcard::to_allocvec(&resp).expect("encode");
                        if framed.send(Bytes::from(bytes)).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        addr
    }

    #[tokio::test]
    async fn an_answer_that_arrives_after_the_caller_gave_up_is_not_taken_for_the_next_one() {
        let addr = peer_slow_on_first_request(Duration::from_millis(300)).await;
        let mut client = PeerClient {
            target: 2,
            addr,
            ctx: Arc::new(PeerContext {
                node_id: 1,
                cluster_id: AtomicU64::new(7),
                faults: Faults::default(),
            }),
            conn: None,
        };
        let option = || RPCOption::new(Duration::from_secs(2));

        // openraft wraps each RPC in its own timeout and drops the future when it fires.
        let vote = VoteRequest {
            vote: Vote::new(1, 1),
            last_log_id: None,
        };
        let gave_up =
            tokio::time::timeout(Duration::from_millis(50), client.vote(vote, option())).await;
        assert!(gave_up.is_err(), "the first answer should come too late");

        // The vote answer is still on its way; the next request must get its own answer.
        let append = AppendEntriesRequest {
            vote: Vote::new_committed(1, 1),
            prev_log_id: None,
            leader_commit: None,
            entries: vec![],
        };
        match client.append_entries(append, option()).await {
            Ok(AppendEntriesResponse::Success) => {}
            other => panic!("the append got someone else's answer: {other:?}"),
        }
    }
}
