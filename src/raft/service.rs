//! Inbound peer traffic: Raft RPCs from other nodes, and client commands that followers
//! forward to this node while it leads.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use rocksdb::DB;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_util::codec::Framed;
use tracing::Instrument;

use super::network::PeerContext;
use super::protocol::{codec, Envelope, PeerRequest, PeerResponse};
use super::Raft;
use crate::cmd::Command;
use crate::resp::Reply;
use crate::store::schema;

/// A boxed future, for the handler's object-safe methods.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// What the server does with client work forwarded by followers.
pub trait ClientHandler: Send + Sync + 'static {
    /// Runs forwarded commands through this node's proposer (writes) or reader (reads).
    fn forward(&self, write: bool, cmds: Vec<Command>) -> BoxFuture<Vec<Reply>>;
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
                svc.serve_conn(stream, rx)
                    .instrument(tracing::debug_span!("peer", peer = %peer)),
            );
        }
    }

    async fn serve_conn(self, stream: TcpStream, mut stop: watch::Receiver<bool>) {
        let mut framed = Framed::new(stream, codec());
        loop {
            let frame = tokio::select! {
                f = framed.next() => f,
                _ = stop.changed() => return,
            };
            let Some(Ok(frame)) = frame else { return };
            let env: Envelope = match postcard::from_bytes(&frame) {
                Ok(e) => e,
                Err(e) => {
                    tracing::warn!(error = %e, "undecodable peer frame; closing");
                    return;
                }
            };
            if self.ctx.faults.is_dropped(env.from) {
                // Simulate a cut link: the request vanishes and the connection dies.
                return;
            }
            let resp = match self.check(&env) {
                Err(why) => PeerResponse::Rejected(why),
                Ok(()) => self.dispatch(env.body).await,
            };
            let bytes = match postcard::to_allocvec(&resp) {
                Ok(b) => b,
                Err(e) => {
                    tracing::error!(error = %e, "cannot encode peer response");
                    return;
                }
            };
            if framed.send(Bytes::from(bytes)).await.is_err() {
                return;
            }
        }
    }

    /// Checks the target node id and the cluster id; a joining node learns the cluster id
    /// from its first Raft contact.
    fn check(&self, env: &Envelope) -> Result<(), String> {
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
                PeerRequest::Append(_) | PeerRequest::Snapshot(_) | PeerRequest::Vote(_)
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

    async fn dispatch(&self, body: PeerRequest) -> PeerResponse {
        match body {
            PeerRequest::Append(rpc) => PeerResponse::Append(self.raft.append_entries(rpc).await),
            PeerRequest::Vote(rpc) => PeerResponse::Vote(self.raft.vote(rpc).await),
            PeerRequest::Snapshot(rpc) => {
                PeerResponse::Snapshot(self.raft.install_snapshot(rpc).await)
            }
            PeerRequest::Forward { write, cmds } => {
                PeerResponse::Forward(self.handler.forward(write, cmds).await)
            }
            PeerRequest::Admin(argv) => PeerResponse::Admin(self.handler.admin(argv).await),
        }
    }
}
