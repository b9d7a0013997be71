//! The peer wire protocol: length-delimited frames carrying postcard-encoded envelopes.
//!
//! Every request names the cluster and the target node; the receiver checks both, so a node
//! never joins or answers a foreign cluster, or a peer that has the wrong address for it.

use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use futures::{FutureExt, SinkExt, StreamExt};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, StreamAppendResult, VoteRequest,
    VoteResponse,
};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_util::codec::{Framed, LengthDelimitedCodec};

use super::network::PeerContext;
use super::{NodeId, SnapshotMeta, TypeConfig, Vote};
use crate::cmd::Command;
use crate::resp::Reply;

/// Largest peer frame (a snapshot chunk is at most a few MiB).
pub const MAX_FRAME: usize = 64 * 1024 * 1024;

/// Largest snapshot image a node sends or reassembles from a peer (2 GiB). The receiver
/// holds the whole image in memory (and its install writes it in one WriteBatch), so a peer
/// that keeps sending pieces is refused at this size with a message naming it, instead of
/// growing the buffer without end. An image is the encoded state machine, which every node
/// also holds in memory, so a cluster whose data outgrows it has outgrown its nodes.
pub const MAX_SNAPSHOT_IMAGE: u64 = 2 << 30;

/// The peer protocol this build speaks. Version 1 was the openraft 0.9 protocol, version 2
/// had no handshake (`super::auth`), version 3 lacked the command and reply tags added since
/// (blocking pops, sorted sets, GEO and more) and snapshot image format 5 (the `popq`
/// records), version 4 lacked tags 121-125 and 140 (conditional writes, shared locks and
/// semaphores, CLUSTER's slot reads) and the lock records' holder lists, version 5 lacked
/// tags 126-127 (MLOCK, MUNLOCK) and the lock records' MLOCK key lists; nodes of different
/// versions never form one cluster, and a peer of another version is refused in the
/// handshake with a message that names both.
pub const PROTOCOL_VERSION: u32 = 6;

/// One request from a peer.
#[derive(Debug, Serialize, Deserialize)]
pub struct Envelope {
    /// [`PROTOCOL_VERSION`] of the sender.
    pub proto: u32,
    /// The sender's cluster id.
    pub cluster_id: u64,
    /// The sender's node id.
    pub from: NodeId,
    /// The node the sender believes it is talking to.
    pub target: NodeId,
    /// The request.
    pub body: PeerRequest,
}

/// Requests between nodes.
#[derive(Debug, Serialize, Deserialize)]
pub enum PeerRequest {
    /// Raft AppendEntries (one request, one answer).
    Append(AppendEntriesRequest<TypeConfig>),
    /// Raft RequestVote.
    Vote(VoteRequest<TypeConfig>),
    /// Raft Pre-Vote: would the receiver grant this vote? Changes nothing on the receiver.
    PreVote(VoteRequest<TypeConfig>),
    /// Turns this connection into a pipelined append stream: after the answer
    /// ([`PeerResponse::StreamOpened`]), every frame the sender sends is an `Append`, and the
    /// receiver answers each with a [`PeerResponse::StreamItem`], in order, without waiting
    /// for the sender.
    OpenStream,
    /// A piece of a snapshot image, at `offset` (0 starts a new image on this connection).
    SnapshotChunk {
        /// Where this piece starts in the image.
        offset: u64,
        /// The bytes.
        data: Bytes,
    },
    /// The image sent on this connection is complete: install it.
    SnapshotDone {
        /// The sender's (the leader's) vote.
        vote: Vote,
        /// What the image holds.
        meta: SnapshotMeta,
        /// The image's length, checked against what arrived.
        len: u64,
    },
    /// Client commands forwarded from a follower to the leader.
    Forward {
        /// True for writes (proposed), false for linearizable reads.
        write: bool,
        /// The commands, in order.
        cmds: Vec<Command>,
        /// For each command, the ACL user of the client that sent it (None: the follower's
        /// own work). The leader checks each command against its user before running it.
        users: Vec<Option<String>>,
    },
    /// A RAFT.* admin command forwarded to the leader (raw arguments).
    Admin(Vec<Bytes>),
}

/// Responses between nodes. Raft errors travel as text: the only ones a receiver returns
/// are fatal (it is shutting down), and the sender treats them as an unreachable peer.
#[derive(Debug, Serialize, Deserialize)]
pub enum PeerResponse {
    /// AppendEntries result.
    Append(Result<AppendEntriesResponse<TypeConfig>, String>),
    /// Vote or Pre-Vote result.
    Vote(Result<VoteResponse<TypeConfig>, String>),
    /// The connection is now an append stream.
    StreamOpened,
    /// The result of one append on a stream, in request order.
    StreamItem(Result<StreamAppendResult<TypeConfig>, String>),
    /// A snapshot piece was stored.
    SnapshotChunk,
    /// The snapshot install result.
    Snapshot(Result<SnapshotResponse<TypeConfig>, String>),
    /// Replies to forwarded commands, in order.
    Forward(Vec<Reply>),
    /// Reply to a forwarded admin command.
    Admin(Reply),
    /// The request was refused (wrong cluster, wrong target, not ready).
    Rejected(String),
}

/// Peer I/O failures.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// Could not connect; nothing was sent.
    #[error("connect to {addr} failed: {reason}")]
    Connect {
        /// Peer address.
        addr: String,
        /// Why.
        reason: String,
    },
    /// The request may have been sent, but no valid answer arrived.
    #[error("peer i/o: {0}")]
    Io(String),
    /// The peer refused the request.
    #[error("peer rejected the request: {0}")]
    Rejected(String),
}

/// A peer connection's byte stream: plain TCP, or TLS over it.
pub trait PeerIo: AsyncRead + AsyncWrite + Send + Sync + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Sync + Unpin> PeerIo for T {}

/// The framed peer stream.
pub type PeerFramed = Framed<Box<dyn PeerIo>, LengthDelimitedCodec>;

/// A persistent connection to one peer; one request at a time.
pub struct PeerConn {
    framed: PeerFramed,
}

/// The frame codec both sides use.
pub fn codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .max_frame_length(MAX_FRAME)
        .new_codec()
}

impl PeerConn {
    /// Connects to node `target` at `addr` and runs the handshake, all within `timeout`.
    pub async fn connect(
        addr: &str,
        timeout: Duration,
        ctx: &PeerContext,
        target: NodeId,
    ) -> Result<PeerConn, PeerError> {
        let fail = |reason: String| PeerError::Connect {
            addr: addr.to_string(),
            reason,
        };
        let open = async {
            let stream = TcpStream::connect(addr)
                .await
                .map_err(|e| fail(e.to_string()))?;
            let _ = stream.set_nodelay(true);
            let io = ctx.auth.connect_stream(stream).await?;
            let mut framed = Framed::new(io, codec());
            let cluster_id = ctx.cluster_id.load(Ordering::Relaxed);
            ctx.auth
                .open(&mut framed, cluster_id, ctx.node_id, target)
                .await?;
            Ok(PeerConn { framed })
        };
        tokio::time::timeout(timeout, open)
            .await
            .map_err(|_| fail("timed out".into()))?
    }

    /// The framed stream, for a connection that leaves request-response (an append stream).
    pub fn into_framed(self) -> PeerFramed {
        self.framed
    }

    /// True if the peer has closed this (idle) connection: reusing it would turn a dead
    /// connection into a request of unknown outcome, so callers check before sending.
    pub fn is_closed(&mut self) -> bool {
        // Anything but "nothing yet" is the end: a close, an error, or an unsolicited frame
        // on an idle connection (the stream is out of step).
        self.framed.next().now_or_never().is_some()
    }

    /// Sends one request and waits for its response within `timeout`.
    pub async fn call(
        &mut self,
        env: &Envelope,
        timeout: Duration,
    ) -> Result<PeerResponse, PeerError> {
        let bytes =
            postcard::to_allocvec(env).map_err(|e| PeerError::Io(format!("encode: {e}")))?;
        let exchange = async {
            self.framed
                .send(Bytes::from(bytes))
                .await
                .map_err(|e| PeerError::Io(e.to_string()))?;
            match self.framed.next().await {
                Some(Ok(frame)) => postcard::from_bytes::<PeerResponse>(&frame)
                    .map_err(|e| PeerError::Io(format!("decode: {e}"))),
                Some(Err(e)) => Err(PeerError::Io(e.to_string())),
                None => Err(PeerError::Io("connection closed".into())),
            }
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(Ok(PeerResponse::Rejected(why))) => Err(PeerError::Rejected(why)),
            Ok(r) => r,
            Err(_) => Err(PeerError::Io(format!("no answer within {timeout:?}"))),
        }
    }
}
