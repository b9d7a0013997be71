//! Inbound peer traffic: Raft RPCs from other nodes, and client commands that followers
//! forward to this node while it leads.

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::{FutureExt, SinkExt, StreamExt};
use rocksdb::DB;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_util::codec::Framed;
use tracing::Instrument;

use super::auth::HANDSHAKE_TIMEOUT;
use super::network::PeerContext;

/// The answer to a vote request while this node holds its votes after a restart.
const VOTE_HELD: &str = "restarted within a leader lease: not voting yet";
use super::protocol::{
    codec, Envelope, PeerFramed, PeerRequest, PeerResponse, MAX_SNAPSHOT_IMAGE, PROTOCOL_VERSION,
};
use super::{NodeId, Raft, Snapshot};
use crate::cmd::Command;
use crate::resp::Reply;
use crate::store::schema;

/// A boxed future, for the handler's object-safe methods.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// What the server does with client work forwarded by followers.
pub trait ClientHandler: Send + Sync + 'static {
    /// Runs forwarded commands through this node's proposer (writes) or reader (reads),
    /// each after checking it against the ACL user it was sent for (`users[i]` for
    /// `cmds[i]`; None: the follower's own work).
    fn forward(
        &self,
        write: bool,
        cmds: Vec<Command>,
        users: Vec<Option<String>>,
    ) -> BoxFuture<Vec<Reply>>;
    /// Runs a forwarded RAFT.* admin command.
    fn admin(&self, argv: Vec<Bytes>) -> BoxFuture<Reply>;
}

/// Most peer connections that may be in their handshake at once. Until a peer has proved
/// itself it costs a task and a socket; past this many, new connections are closed at once
/// (and logged as refusals) until some finish or time out.
pub const MAX_PENDING_HANDSHAKES: usize = 64;

/// A snapshot image being reassembled on one connection, never larger than `cap`.
#[derive(Debug)]
pub struct Reassembly {
    image: Vec<u8>,
    cap: u64,
}

impl Reassembly {
    /// An empty reassembly that refuses images over `cap` bytes.
    pub fn new(cap: u64) -> Reassembly {
        Reassembly {
            image: Vec::new(),
            cap,
        }
    }

    /// Adds the piece at `offset` (0 starts a new image); `Err` says why it is refused, and
    /// the image so far is dropped.
    pub fn add(&mut self, offset: u64, data: &[u8]) -> Result<(), String> {
        if offset == 0 {
            self.image = Vec::new();
        }
        let have = self.image.len() as u64;
        if offset != have {
            self.image = Vec::new();
            return Err(format!(
                "snapshot piece at {offset} does not follow the {have} bytes received"
            ));
        }
        if have.saturating_add(data.len() as u64) > self.cap {
            self.image = Vec::new();
            return Err(format!(
                "snapshot image larger than the {} bytes a node accepts",
                self.cap
            ));
        }
        self.image.extend_from_slice(data);
        Ok(())
    }

    /// Takes the whole image, which must be `len` bytes long.
    pub fn take(&mut self, len: u64) -> Result<Vec<u8>, String> {
        let data = std::mem::take(&mut self.image);
        if data.len() as u64 != len {
            return Err(format!(
                "snapshot image of {} bytes, announced {len}",
                data.len()
            ));
        }
        Ok(data)
    }
}

/// Everything the inbound service needs.
#[derive(Clone)]
pub struct Service {
    /// Raft handle.
    pub raft: Raft,
    /// Identity and faults.
    pub ctx: Arc<PeerContext>,
    /// The store, to persist a learned cluster id.
    pub db: Arc<DB>,
    /// Client work handler.
    pub handler: Arc<dyn ClientHandler>,
    /// Refused handshakes, for the log.
    pub refusals: Arc<Refusals>,
}

/// Logs refused peer handshakes: at WARN once per source address every
/// [`Refusals::EVERY`], so that a misconfigured node retrying many times a second is seen
/// without flooding the log; the rest at DEBUG. Also counts them.
#[derive(Debug, Default)]
pub struct Refusals {
    last: Mutex<HashMap<IpAddr, Instant>>,
    /// Handshakes refused since start.
    pub count: std::sync::atomic::AtomicU64,
}

impl Refusals {
    /// How often one source's refusals are logged at WARN.
    pub const EVERY: Duration = Duration::from_secs(10);

    fn note(&self, peer: SocketAddr, why: &str) {
        self.count.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let loud = match self.last.lock() {
            Ok(mut last) => {
                if last.len() > 4096 {
                    last.retain(|_, t| now.duration_since(*t) < Self::EVERY);
                }
                match last.get(&peer.ip()) {
                    Some(t) if now.duration_since(*t) < Self::EVERY => false,
                    _ => {
                        last.insert(peer.ip(), now);
                        true
                    }
                }
            }
            Err(_) => true,
        };
        if loud {
            tracing::warn!(%peer, why, "peer connection refused in the handshake");
        } else {
            tracing::debug!(%peer, why, "peer connection refused in the handshake");
        }
    }
}

impl Service {
    /// Accepts peer connections until `stop` changes.
    pub async fn run(self, listener: TcpListener, mut stop: watch::Receiver<bool>) {
        let handshakes = Arc::new(tokio::sync::Semaphore::new(MAX_PENDING_HANDSHAKES));
        loop {
            let (stream, peer) = tokio::select! {
                a = listener.accept() => match a {
                    Ok(x) => x,
                    Err(e) => {
                        tracing::warn!(error = %e, "peer accept failed");
                        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                        continue;
                    }
                },
                _ = stop.changed() => return,
            };
            let Ok(permit) = handshakes.clone().try_acquire_owned() else {
                let why = format!("{MAX_PENDING_HANDSHAKES} peer connections already in their handshake; closing a new one");
                self.refusals.note(peer, &why);
                continue;
            };
            let _ = stream.set_nodelay(true);
            let svc = self.clone();
            let rx = stop.clone();
            tokio::spawn(
                svc.serve_conn(stream, peer, rx, permit)
                    .instrument(tracing::debug_span!("peer", peer = %peer)),
            );
        }
    }

    async fn serve_conn(
        self,
        stream: TcpStream,
        peer: SocketAddr,
        mut stop: watch::Receiver<bool>,
        handshake_slot: tokio::sync::OwnedSemaphorePermit,
    ) {
        let auth = &self.ctx.auth;
        let handshake = async {
            let io = auth.accept_stream(stream).await?;
            let mut framed = Framed::new(io, codec());
            let hello = auth.accept(&mut framed, self.ctx.node_id).await?;
            Ok::<_, String>((framed, hello.from))
        };
        let opened = tokio::select! {
            r = tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake) => match r {
                Ok(r) => r,
                Err(_) => Err(format!("no handshake within {HANDSHAKE_TIMEOUT:?}")),
            },
            _ = stop.changed() => return,
        };
        drop(handshake_slot);
        let (mut framed, peer_id) = match opened {
            Ok(opened) => opened,
            Err(why) => {
                self.refusals.note(peer, &why);
                return;
            }
        };
        // A snapshot image being received on this connection.
        let mut image = Reassembly::new(MAX_SNAPSHOT_IMAGE);
        loop {
            let frame = tokio::select! {
                f = framed.next() => f,
                _ = stop.changed() => return,
            };
            let Some(env) = self.receive(frame) else {
                return;
            };
            let resp = match self.check(&env, peer_id) {
                Err(why) => PeerResponse::Rejected(why),
                Ok(()) => match env.body {
                    PeerRequest::OpenStream => {
                        if send(&mut framed, &PeerResponse::StreamOpened).await {
                            self.serve_stream(framed, peer_id, stop).await;
                        }
                        return;
                    }
                    body => self.dispatch(body, &mut image).await,
                },
            };
            if !send(&mut framed, &resp).await {
                return;
            }
        }
    }

    /// Decodes a received frame; `None` ends the connection (closed, undecodable, or cut by
    /// fault injection, which makes the request vanish as on a cut link).
    fn receive(&self, frame: Option<Result<bytes::BytesMut, std::io::Error>>) -> Option<Envelope> {
        let frame = frame?.ok()?;
        let env: Envelope = match postcard::from_bytes(&frame) {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(error = %e, "undecodable peer frame (a node of another version?); closing");
                return None;
            }
        };
        (!self.ctx.faults.is_dropped(env.from)).then_some(env)
    }

    /// An append stream: requests go to Raft as they arrive, answers come back in order as
    /// Raft gives them (each once the entries are synced). Ends with the connection, or when
    /// Raft ends the stream (a conflict, a higher vote, shutdown).
    async fn serve_stream(
        &self,
        framed: PeerFramed,
        peer_id: NodeId,
        mut stop: watch::Receiver<bool>,
    ) {
        let (mut sink, mut source) = framed.split();
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        let reader = async {
            while let Some(env) = self.receive(source.next().await) {
                if let Err(why) = self.check(&env, peer_id) {
                    tracing::warn!(why, from = env.from, "append stream refused");
                    return;
                }
                let PeerRequest::Append(rpc) = env.body else {
                    tracing::warn!(
                        from = env.from,
                        "not an append on an append stream; closing"
                    );
                    return;
                };
                if tx.send(rpc).await.is_err() {
                    return;
                }
            }
        };
        let requests =
            futures::stream::unfold(
                rx,
                |mut rx| async move { rx.recv().await.map(|rpc| (rpc, rx)) },
            );
        let answers = self.raft.stream_append(requests);
        let writer = async {
            futures::pin_mut!(answers);
            // The answers that are ready together go out with one flush.
            while let Some(mut item) = answers.next().await {
                loop {
                    let last = !matches!(item, Ok(Ok(_)));
                    let resp = PeerResponse::StreamItem(item.map_err(|f| f.to_string()));
                    if !feed(&mut sink, &resp).await {
                        return;
                    }
                    if last {
                        let _ = sink.flush().await;
                        return;
                    }
                    match answers.next().now_or_never() {
                        Some(Some(more)) => item = more,
                        Some(None) => {
                            let _ = sink.flush().await;
                            return;
                        }
                        None => break,
                    }
                }
                if sink.flush().await.is_err() {
                    return;
                }
            }
        };
        tokio::select! {
            _ = reader => {}
            _ = writer => {}
            _ = stop.changed() => {}
        }
    }

    /// Checks the protocol version, the sender (the node the connection's handshake was
    /// made by, `peer_id`), the target node id and the cluster id; a joining node learns the
    /// cluster id from its first Raft contact.
    fn check(&self, env: &Envelope, peer_id: NodeId) -> Result<(), String> {
        if env.from != peer_id {
            return Err(format!(
                "a frame from node {} on a connection that node {peer_id} opened: a peer speaks only for the node it authenticated as",
                env.from
            ));
        }
        if env.proto != PROTOCOL_VERSION {
            return Err(format!(
                "peer protocol version {} from node {}, this node speaks {PROTOCOL_VERSION}: nodes of different Palisade versions cannot form one cluster",
                env.proto, env.from
            ));
        }
        if env.target != self.ctx.node_id {
            return Err(format!(
                "this is node {}, not node {}",
                self.ctx.node_id, env.target
            ));
        }
        let mine = self.ctx.cluster_id.load(Ordering::Relaxed);
        if mine == 0
            && env.cluster_id != 0
            && matches!(
                env.body,
                PeerRequest::Append(_)
                    | PeerRequest::OpenStream
                    | PeerRequest::SnapshotChunk { .. }
                    | PeerRequest::SnapshotDone { .. }
                    | PeerRequest::Vote(_)
                    | PeerRequest::PreVote(_)
            )
        {
            if let Err(e) = schema::put_cluster_id(&self.db, env.cluster_id) {
                return Err(format!("cannot persist cluster id: {e}"));
            }
            self.ctx.cluster_id.store(env.cluster_id, Ordering::Relaxed);
            tracing::info!(
                cluster_id = env.cluster_id,
                from = env.from,
                "joined cluster"
            );
            return Ok(());
        }
        if env.cluster_id != mine {
            return Err(format!("cluster id mismatch: this node is in cluster {mine:016x}, the request is for {:016x}", env.cluster_id));
        }
        Ok(())
    }

    async fn dispatch(&self, body: PeerRequest, image: &mut Reassembly) -> PeerResponse {
        let text = |e: &dyn std::fmt::Display| e.to_string();
        match body {
            PeerRequest::Append(rpc) => {
                PeerResponse::Append(self.raft.append_entries(rpc).await.map_err(|e| text(&e)))
            }
            // A restarted node does not vote until a lease it may have granted is over.
            PeerRequest::Vote(_) | PeerRequest::PreVote(_) if self.ctx.vote_hold.holds() => {
                PeerResponse::Vote(Err(VOTE_HELD.into()))
            }
            PeerRequest::Vote(rpc) => {
                PeerResponse::Vote(self.raft.vote(rpc).await.map_err(|e| text(&e)))
            }
            PeerRequest::PreVote(rpc) => {
                PeerResponse::Vote(self.raft.pre_vote(rpc).await.map_err(|e| text(&e)))
            }
            PeerRequest::OpenStream => PeerResponse::Rejected("stream already open".into()),
            PeerRequest::SnapshotChunk { offset, data } => match image.add(offset, &data) {
                Ok(()) => PeerResponse::SnapshotChunk,
                Err(why) => {
                    tracing::warn!(why, "snapshot piece refused");
                    PeerResponse::Rejected(why)
                }
            },
            PeerRequest::SnapshotDone { vote, meta, len } => {
                let data = match image.take(len) {
                    Ok(data) => data,
                    Err(why) => return PeerResponse::Rejected(why),
                };
                let snapshot = Snapshot {
                    meta,
                    snapshot: data,
                };
                PeerResponse::Snapshot(
                    self.raft
                        .install_full_snapshot(vote, snapshot)
                        .await
                        .map_err(|e| text(&e)),
                )
            }
            PeerRequest::Forward { write, cmds, users } => {
                PeerResponse::Forward(self.handler.forward(write, cmds, users).await)
            }
            PeerRequest::Admin(argv) => PeerResponse::Admin(self.handler.admin(argv).await),
        }
    }
}

/// Encodes and sends one response; false if the connection is done.
async fn send<S>(sink: &mut S, resp: &PeerResponse) -> bool
where
    S: futures::Sink<Bytes> + Unpin,
{
    feed(sink, resp).await && sink.flush().await.is_ok()
}

/// Encodes and queues one response (sent at the next flush, or when the buffer fills);
/// false if the connection is done.
async fn feed<S>(sink: &mut S, resp: &PeerResponse) -> bool
where
    S: futures::Sink<Bytes> + Unpin,
{
    match postcard::to_allocvec(resp) {
        Ok(b) => sink.feed(Bytes::from(b)).await.is_ok(),
        Err(e) => {
            tracing::error!(error = %e, "cannot encode peer response");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A peer that keeps sending pieces is refused at the cap, with a message naming it, and
    /// the buffer is dropped; an image up to the cap goes through.
    #[test]
    fn a_reassembly_is_refused_past_its_cap() {
        let mut r = Reassembly::new(10);
        r.add(0, b"01234").expect("first piece");
        r.add(5, b"56789").expect("up to the cap");
        assert_eq!(r.take(10).expect("whole image"), b"0123456789");
        r.add(0, b"0123456789").expect("a new image");
        let why = r.add(10, b"x").expect_err("past the cap");
        assert!(why.contains("larger than the 10 bytes"), "{why}");
        assert_eq!(r.image.capacity(), 0, "the refused image is dropped");
        let why = r.add(5, b"x").expect_err("does not follow");
        assert!(why.contains("does not follow the 0 bytes"), "{why}");
        r.add(0, b"abc").expect("restart");
        let why = r.take(4).expect_err("announced length differs");
        assert!(why.contains("of 3 bytes, announced 4"), "{why}");
    }
}
