//! The peer wire protocol: length-delimited frames carrying postcard-encoded envelopes.
//!
//! Every request names the cluster and the target node; the receiver checks both, so a node
//! never joins or answers a foreign cluster, or a peer that has the wrong address for it.

use std::time::Duration;

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::{Deserialize, Serialize};
use tokio::net::TcpStream;
use tokio_util::codec::{Framed, LengthDelimitedCodec};

use super::{NodeId, TypeConfig};
use crate::cmd::Command;
use crate::resp::Reply;

/// Largest peer frame (a snapshot chunk is at most a few MiB).
pub const MAX_FRAME: usize = 64 * 1024 * 1024;

/// One request from a peer.
#[derive(Debug, Serialize, Deserialize)]
pub struct Envelope {
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
    /// Raft AppendEntries.
    Append(AppendEntriesRequest<TypeConfig>),
    /// Raft RequestVote.
    Vote(VoteRequest<NodeId>),
    /// Raft InstallSnapshot (one chunk).
    Snapshot(InstallSnapshotRequest<TypeConfig>),
    /// Client commands forwarded from a follower to the leader.
    Forward {
        /// True for writes (proposed), false for linearizable reads.
        write: bool,
        /// The commands, in order.
        cmds: Vec<Command>,
    },
    /// A RAFT.* admin command forwarded to the leader (raw arguments).
    Admin(Vec<Bytes>),
}

/// Responses between nodes.
#[derive(Debug, Serialize, Deserialize)]
pub enum PeerResponse {
    /// AppendEntries result.
    Append(Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>),
    /// Vote result.
    Vote(Result<VoteResponse<NodeId>, RaftError<NodeId>>),
    /// InstallSnapshot result.
    Snapshot(Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>),
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

/// A persistent connection to one peer; one request at a time.
pub struct PeerConn {
    framed: Framed<TcpStream, LengthDelimitedCodec>,
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
