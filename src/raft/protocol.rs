//! The peer wire protocol: length-delimited frames carrying postcard-encoded envelopes.
//!
//! Every request names the cluster and the target node; the receiver checks both, so a node
//! never joins or answers a foreign cluster, or a peer that has the wrong address for it.

use std::time::Duration;

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, StreamAppendResult, VoteRequest,
    VoteResponse,
};
use serde::{Deserialize, Serialize};
use tokio::net::TcpStream;
use tokio_util::codec::{Framed, LengthDelimitedCodec};

use super::{NodeId, SnapshotMeta, TypeConfig, Vote};
use crate::cmd::Command;
use crate::resp::Reply;

/// Largest peer frame (a snapshot chunk is at most a few MiB).
pub const MAX_FRAME: usize = 64 * 1024 * 1024;

/// The peer protocol this build speaks. Version 1 was the openraft 0.9 protocol; nodes of
/// different versions never form one cluster, and a frame of another version is refused
/// with a message that names both.
pub const PROTOCOL_VERSION: u32 = 2;

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

/// The framed peer stream.
pub type PeerFramed = Framed<TcpStream, LengthDelimitedCodec>;

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
    /// Connects within `timeout`.
    pub async fn connect(addr: &str, timeout: Duration) -> Result<PeerConn, PeerError> {
        let fail = |reason: String| PeerError::Connect {
            addr: addr.to_string(),
            reason,
        };
        let stream = tokio::time::timeout(timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| fail("timed out".into()))?
            .map_err(|e| fail(e.to_string()))?;
        let _ = stream.set_nodelay(true);
        Ok(PeerConn {
            framed: Framed::new(stream, codec()),
        })
    }

    /// The framed stream, for a connection that leaves request-response (an append stream).
    pub fn into_framed(self) -> PeerFramed {
        self.framed
    }

    /// True if the peer has closed this (idle) connection: reusing it would turn a dead
    /// connection into a request of unknown outcome, so callers check before sending.
    pub fn is_closed(&self) -> bool {
        let mut probe = [0u8; 1];
        match self.framed.get_ref().try_read(&mut probe) {
            Ok(0) => true,
            // Unsolicited bytes on an idle connection mean the stream is out of step.
            Ok(_) => true,
            Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
        }
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
