//! Outbound Raft RPC over persistent TCP connections on the peer port.
//!
//! One client per target node keeps one connection open and reconnects after an error, and
//! one more for its append streams, which a stream that ended cleanly leaves to the next.
//! A test-only fault hook ([`Faults`]) can cut this node off from chosen peers in both
//! directions, which is how the partition tests isolate a single node.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use openraft::base::{BoxFuture, BoxStream};
use openraft::error::{NetworkError, RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::{RPCOption, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, StreamAppendResult, VoteRequest,
    VoteResponse,
};
use openraft::{OptionalSend, RaftNetworkV2};

use super::auth::PeerAuth;
use super::protocol::{
    Envelope, PeerConn, PeerError, PeerRequest, PeerResponse, MAX_SNAPSHOT_IMAGE, PROTOCOL_VERSION,
};
use super::{Node, NodeId, Snapshot, TypeConfig, Vote};

/// How long a connection attempt to a peer may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

/// Snapshot images travel in pieces of at most this size.
pub const SNAPSHOT_CHUNK: usize = 4 << 20;

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

/// Counters of the append streams' requests (INFO raft), for all peers together.
#[derive(Debug, Default)]
pub struct AppendStats {
    /// AppendEntries requests sent on append streams (each gets one answer).
    pub sent: AtomicU64,
    /// Commit-only requests not sent because the next request of their stream covered them
    /// (`raft::pipeline`'s coalescing).
    pub coalesced: AtomicU64,
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
    /// The peer handshake's secret.
    pub auth: PeerAuth,
    /// Append stream counters.
    pub appends: AppendStats,
    /// Vote requests are refused while this holds (after a restart, see `raft::lease`).
    pub vote_hold: super::lease::VoteHold,
}

impl PeerContext {
    /// Builds an envelope from this node to `target`.
    pub fn envelope(&self, target: NodeId, body: PeerRequest) -> Envelope {
        Envelope {
            proto: PROTOCOL_VERSION,
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
    pub(super) target: NodeId,
    pub(super) addr: String,
    pub(super) ctx: Arc<PeerContext>,
    conn: Option<PeerConn>,
    /// The connection of the last append stream that ended cleanly, for the next one.
    pub(super) idle_stream: super::pipeline::IdleStream,
    /// Failed append-stream opens in a row, and when the last one failed.
    pub(super) open_failures: (u32, Option<tokio::time::Instant>),
}

/// An outbound RPC error.
pub(super) type RpcErr = RPCError<TypeConfig>;

pub(super) fn unreachable(e: &PeerError) -> RpcErr {
    RPCError::Unreachable(Unreachable::new(e))
}

pub(super) fn network_err(e: &PeerError) -> RpcErr {
    RPCError::Network(NetworkError::new(e))
}

/// A Raft error the peer reported (it is shutting down): back off as from an unreachable peer.
pub(super) fn remote_failed(why: String) -> RpcErr {
    unreachable(&PeerError::Io(format!("peer failed: {why}")))
}

impl PeerClient {
    /// The link to the target is cut by fault injection.
    pub(super) fn cut(&self) -> Option<PeerError> {
        self.ctx
            .faults
            .is_dropped(self.target)
            .then(|| PeerError::Io(format!("fault injection: link to node {} cut", self.target)))
    }

    async fn call(&mut self, body: PeerRequest, ttl: Duration) -> Result<PeerResponse, RpcErr> {
        if let Some(e) = self.cut() {
            return Err(unreachable(&e));
        }
        let delay = self.ctx.faults.delay_ms();
        if delay > 0 {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        // The connection is taken out for the length of the exchange and put back only after
        // a whole answer arrived. openraft drops this future when its own timeout fires; a
        // connection left behind mid-exchange would hand the late answer to the next request
        // (a stale `Success` or `Conflict` attributed to a different range of the log).
        let idle = self
            .conn
            .take()
            .and_then(|mut c| (!c.is_closed()).then_some(c));
        let mut conn = match idle {
            Some(c) => c,
            None => PeerConn::connect(&self.addr, CONNECT_TIMEOUT.min(ttl), &self.ctx, self.target)
                .await
                .map_err(|e| unreachable(&e))?,
        };
        let env = self.ctx.envelope(self.target, body);
        match conn.call(&env, ttl).await {
            Ok(resp) => {
                self.conn = Some(conn);
                Ok(resp)
            }
            // The stream's state is unknown after an error; the next call connects afresh.
            Err(e) => Err(network_err(&e)),
        }
    }

    fn unexpected(&self) -> RpcErr {
        network_err(&PeerError::Io("unexpected response type".into()))
    }

    async fn vote_call(
        &mut self,
        body: PeerRequest,
        ttl: Duration,
    ) -> Result<VoteResponse<TypeConfig>, RpcErr> {
        match self.call(body, ttl).await? {
            PeerResponse::Vote(Ok(r)) => Ok(r),
            PeerResponse::Vote(Err(why)) => Err(remote_failed(why)),
            _ => Err(self.unexpected()),
        }
    }

    /// Sends a whole snapshot image in pieces on one connection, then asks for the install.
    async fn send_snapshot(
        &mut self,
        vote: Vote,
        snapshot: Snapshot,
        ttl: Duration,
        chunk: usize,
    ) -> Result<SnapshotResponse<TypeConfig>, RpcErr> {
        let data = Bytes::from(snapshot.snapshot);
        if data.len() as u64 > MAX_SNAPSHOT_IMAGE {
            // A follower would refuse it at the cap; say why here instead of sending it.
            let why = format!(
                "snapshot image of {} bytes is over the {MAX_SNAPSHOT_IMAGE} bytes a node accepts; node {} cannot catch up from it",
                data.len(),
                self.target
            );
            tracing::error!(why, "snapshot not sent");
            return Err(unreachable(&PeerError::Io(why)));
        }
        let mut offset = 0;
        while offset < data.len() {
            let end = (offset + chunk).min(data.len());
            let body = PeerRequest::SnapshotChunk {
                offset: offset as u64,
                data: data.slice(offset..end),
            };
            match self.call(body, ttl).await? {
                PeerResponse::SnapshotChunk => offset = end,
                _ => return Err(self.unexpected()),
            }
        }
        let done = PeerRequest::SnapshotDone {
            vote,
            meta: snapshot.meta,
            len: data.len() as u64,
        };
        match self.call(done, ttl).await? {
            PeerResponse::Snapshot(Ok(r)) => Ok(r),
            PeerResponse::Snapshot(Err(why)) => Err(remote_failed(why)),
            _ => Err(self.unexpected()),
        }
    }
}

impl RaftNetworkFactory<TypeConfig> for PeerNetwork {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &Node) -> Self::Network {
        PeerClient {
            target,
            addr: node.addr.clone(),
            ctx: self.ctx.clone(),
            conn: None,
            idle_stream: Default::default(),
            open_failures: (0, None),
        }
    }
}

impl RaftNetworkV2<TypeConfig> for PeerClient {
    type SnapshotData = Vec<u8>;

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<TypeConfig>, RpcErr> {
        match self
            .call(PeerRequest::Append(rpc), option.soft_ttl())
            .await?
        {
            PeerResponse::Append(Ok(r)) => Ok(r),
            PeerResponse::Append(Err(why)) => Err(remote_failed(why)),
            _ => Err(self.unexpected()),
        }
    }

    fn stream_append<'s, S>(
        &'s mut self,
        input: S,
        option: RPCOption,
    ) -> BoxFuture<'s, Result<BoxStream<'s, Result<StreamAppendResult<TypeConfig>, RpcErr>>, RpcErr>>
    where
        S: Stream<Item = AppendEntriesRequest<TypeConfig>> + OptionalSend + Unpin + 'static,
    {
        Box::pin(async move {
            let stream = super::pipeline::open(self, input, option.soft_ttl()).await?;
            Ok(Box::pin(stream) as BoxStream<'s, _>)
        })
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RpcErr> {
        self.vote_call(PeerRequest::Vote(rpc), option.soft_ttl())
            .await
    }

    async fn pre_vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RpcErr> {
        self.vote_call(PeerRequest::PreVote(rpc), option.soft_ttl())
            .await
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: Snapshot,
        cancel: impl Future<Output = ReplicationClosed> + OptionalSend + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<TypeConfig>, StreamingError<TypeConfig>> {
        let chunk = option
            .snapshot_chunk_size()
            .unwrap_or(SNAPSHOT_CHUNK)
            .clamp(64 << 10, SNAPSHOT_CHUNK);
        let send = self.send_snapshot(vote, snapshot, option.hard_ttl(), chunk);
        tokio::select! {
            closed = cancel => Err(StreamingError::Closed(closed)),
            res = send => res.map_err(|e| match e {
                RPCError::Timeout(t) => StreamingError::Timeout(t),
                RPCError::Unreachable(u) => StreamingError::Unreachable(u),
                RPCError::Network(n) => StreamingError::Network(n),
                RPCError::RemoteError(r) => StreamingError::Network(NetworkError::new(&r)),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use futures::{SinkExt, StreamExt};
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
                    let io: Box<dyn crate::raft::protocol::PeerIo> = Box::new(stream);
                    let mut framed = Framed::new(io, codec());
                    if PeerAuth::default().accept(&mut framed, 2).await.is_err() {
                        return;
                    }
                    while let Some(Ok(frame)) = framed.next().await {
                        let env: Envelope = postcard::from_bytes(&frame).expect("envelope");
                        if first.swap(false, Ordering::SeqCst) {
                            tokio::time::sleep(late).await;
                        }
                        let resp = match env.body {
                            PeerRequest::Vote(v) => {
                                PeerResponse::Vote(Ok(VoteResponse::new(v.vote, None, false)))
                            }
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
        let mut client = client_for(addr);
        let option = || RPCOption::new(Duration::from_secs(2));

        // openraft wraps each RPC in its own timeout and drops the future when it fires.
        let vote = VoteRequest::new(Vote::new(1, 1), None);
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

    fn client_for(addr: String) -> PeerClient {
        PeerClient {
            target: 2,
            addr,
            ctx: Arc::new(PeerContext {
                node_id: 1,
                cluster_id: AtomicU64::new(7),
                faults: Faults::default(),
                auth: PeerAuth::default(),
                appends: AppendStats::default(),
                vote_hold: Default::default(),
            }),
            conn: None,
            idle_stream: Default::default(),
            open_failures: (0, None),
        }
    }

    /// A peer that serves append streams and counts the connections it accepts. It answers
    /// each append with the append's own `prev_log_id` (so a test sees whose answer it got),
    /// the first append it ever receives only after `late`, and closes each connection after
    /// its first answer if `close_after_answer`.
    async fn stream_peer(late: Duration, close_after_answer: bool) -> (String, Arc<AtomicU64>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let accepted = Arc::new(AtomicU64::new(0));
        let counter = accepted.clone();
        let first = Arc::new(AtomicBool::new(true));
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                let first = first.clone();
                tokio::spawn(async move {
                    let io: Box<dyn crate::raft::protocol::PeerIo> = Box::new(stream);
                    let mut framed = Framed::new(io, codec());
                    if PeerAuth::default().accept(&mut framed, 2).await.is_err() {
                        return;
                    }
                    while let Some(Ok(frame)) = framed.next().await {
                        let env: Envelope = postcard::from_bytes(&frame).expect("envelope");
                        let (resp, answer) = match env.body {
                            PeerRequest::OpenStream => (PeerResponse::StreamOpened, false),
                            PeerRequest::Append(rpc) => {
                                if first.swap(false, Ordering::SeqCst) {
                                    tokio::time::sleep(late).await;
                                }
                                (PeerResponse::StreamItem(Ok(Ok(rpc.prev_log_id))), true)
                            }
                            _ => (PeerResponse::Rejected("unexpected".into()), false),
                        };
                        let bytes = postcard::to_allocvec(&resp).expect("encode");
                        if framed.send(Bytes::from(bytes)).await.is_err()
                            || (answer && close_after_answer)
                        {
                            return;
                        }
                    }
                });
            }
        });
        (addr, accepted)
    }

    /// Sends one heartbeat-like stream (one append whose `prev_log_id` has `index`), as
    /// openraft's heartbeat worker does, and reads the stream to its end.
    async fn one_append_stream(
        client: &mut PeerClient,
        index: u64,
    ) -> Vec<Result<StreamAppendResult<TypeConfig>, RpcErr>> {
        let req = AppendEntriesRequest {
            vote: Vote::new_committed(1, 1),
            prev_log_id: Some(crate::raft::log_id(1, 1, index)),
            leader_commit: None,
            entries: vec![],
        };
        let input = Box::pin(futures::stream::once(async move { req }));
        match client
            .stream_append(input, RPCOption::new(Duration::from_secs(2)))
            .await
        {
            Ok(out) => out.collect().await,
            Err(e) => vec![Err(e)],
        }
    }

    /// The one answer of a one-append stream: the index it echoes.
    fn answered_index(items: &[Result<StreamAppendResult<TypeConfig>, RpcErr>]) -> Option<u64> {
        match items {
            [Ok(Ok(Some(id)))] => Some(id.index),
            _ => None,
        }
    }

    #[tokio::test]
    async fn append_streams_that_end_cleanly_reuse_one_connection() {
        let (addr, accepted) = stream_peer(Duration::ZERO, false).await;
        let mut client = client_for(addr);
        for i in 1..=5 {
            let items = one_append_stream(&mut client, i).await;
            assert_eq!(answered_index(&items), Some(i), "stream {i}: {items:?}");
        }
        assert_eq!(
            accepted.load(Ordering::SeqCst),
            1,
            "one connection for all five streams"
        );
    }

    #[tokio::test]
    async fn an_append_stream_dropped_before_its_answer_does_not_leave_its_connection_behind() {
        let (addr, accepted) = stream_peer(Duration::from_millis(300), false).await;
        let mut client = client_for(addr);
        // openraft's heartbeat worker wraps each stream in its own timeout and drops it.
        let gave_up =
            tokio::time::timeout(Duration::from_millis(50), one_append_stream(&mut client, 1))
                .await;
        assert!(gave_up.is_err(), "the first answer should come too late");
        // The first answer is still on its way; the next stream must get its own.
        let items = one_append_stream(&mut client, 2).await;
        assert_eq!(answered_index(&items), Some(2), "{items:?}");
        let items = one_append_stream(&mut client, 3).await;
        assert_eq!(answered_index(&items), Some(3), "{items:?}");
        assert_eq!(
            accepted.load(Ordering::SeqCst),
            2,
            "a new connection after the dropped stream, then reuse"
        );
    }

    #[tokio::test]
    async fn a_cut_link_closes_the_idle_stream_connection() {
        let (addr, accepted) = stream_peer(Duration::ZERO, false).await;
        let mut client = client_for(addr);
        assert_eq!(
            answered_index(&one_append_stream(&mut client, 1).await),
            Some(1)
        );
        client.ctx.faults.set(BTreeSet::from([2]));
        let items = one_append_stream(&mut client, 2).await;
        assert!(
            matches!(items.as_slice(), [Err(RPCError::Unreachable(_))]),
            "{items:?}"
        );
        client.ctx.faults.set(BTreeSet::new());
        // The open after a failed one waits out its backoff (10 ms), then connects afresh.
        assert_eq!(
            answered_index(&one_append_stream(&mut client, 3).await),
            Some(3)
        );
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_stream_connection_the_peer_closed_is_not_reused() {
        let (addr, accepted) = stream_peer(Duration::ZERO, true).await;
        let mut client = client_for(addr);
        for i in 1..=3 {
            // Time for the close to arrive before the next stream looks at the connection.
            tokio::time::sleep(Duration::from_millis(200)).await;
            let items = one_append_stream(&mut client, i).await;
            assert_eq!(answered_index(&items), Some(i), "stream {i}: {items:?}");
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 3);
    }
}
