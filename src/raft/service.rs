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
use super::protocol::{codec, Envelope, PeerFramed, PeerRequest, PeerResponse, PROTOCOL_VERSION};
use super::{Raft, Snapshot};
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
            let _ = stream.set_nodelay(true);
            let svc = self.clone();
            let rx = stop.clone();
            tokio::spawn(
                svc.serve_conn(stream, peer, rx)
                    .instrument(tracing::debug_span!("peer", peer = %peer)),
            );
        }
    }

    async fn serve_conn(
        self,
        stream: TcpStream,
        peer: SocketAddr,
        mut stop: watch::Receiver<bool>,
    ) {
        let auth = &self.ctx.auth;
        let handshake = async {
            let io = auth.accept_stream(stream).await?;
            let mut framed = Framed::new(io, codec());
            auth.accept(&mut framed, self.ctx.node_id).await?;
            Ok::<_, String>(framed)
        };
        let opened = tokio::select! {
            r = tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake) => match r {
                Ok(r) => r,
                Err(_) => Err(format!("no handshake within {HANDSHAKE_TIMEOUT:?}")),
            },
            _ = stop.changed() => return,
        };
        let mut framed = match opened {
            Ok(framed) => framed,
            Err(why) => {
                self.refusals.note(peer, &why);
                return;
            }
        };
        // A snapshot image being received on this connection.
        let mut image: Vec<u8> = Vec::new();
        loop {
            let frame = tokio::select! {
                f = framed.next() => f,
                _ = stop.changed() => return,
            };
            let Some(env) = self.receive(frame) else {
                return;
            };
            let resp = match self.check(&env) {
                Err(why) => PeerResponse::Rejected(why),
                Ok(()) => match env.body {
                    PeerRequest::OpenStream => {
                        if send(&mut framed, &PeerResponse::StreamOpened).await {
                            self.serve_stream(framed, stop).await;
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
    async fn serve_stream(&self, framed: PeerFramed, mut stop: watch::Receiver<bool>) {
        let (mut sink, mut source) = framed.split();
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        let reader = async {
            while let Some(env) = self.receive(source.next().await) {
                if let Err(why) = self.check(&env) {
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

    /// Checks the protocol version, the target node id and the cluster id; a joining node
    /// learns the cluster id from its first Raft contact.
    fn check(&self, env: &Envelope) -> Result<(), String> {
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

    async fn dispatch(&self, body: PeerRequest, image: &mut Vec<u8>) -> PeerResponse {
        let text = |e: &dyn std::fmt::Display| e.to_string();
        match body {
            PeerRequest::Append(rpc) => {
                PeerResponse::Append(self.raft.append_entries(rpc).await.map_err(|e| text(&e)))
            }
            PeerRequest::Vote(rpc) => {
                PeerResponse::Vote(self.raft.vote(rpc).await.map_err(|e| text(&e)))
            }
            PeerRequest::PreVote(rpc) => {
                PeerResponse::Vote(self.raft.pre_vote(rpc).await.map_err(|e| text(&e)))
            }
            PeerRequest::OpenStream => PeerResponse::Rejected("stream already open".into()),
            PeerRequest::SnapshotChunk { offset, data } => {
                if offset == 0 {
                    image.clear();
                }
                if offset != image.len() as u64 {
                    image.clear();
                    return PeerResponse::Rejected(format!(
                        "snapshot piece at {offset} does not follow the {} bytes received",
                        image.len()
                    ));
                }
                image.extend_from_slice(&data);
                PeerResponse::SnapshotChunk
            }
            PeerRequest::SnapshotDone { vote, meta, len } => {
                let data = std::mem::take(image);
                if data.len() as u64 != len {
                    return PeerResponse::Rejected(format!(
                        "snapshot image of {} bytes, announced {len}",
                        data.len()
                    ));
                }
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
