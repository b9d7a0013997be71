//! Speaking the peer protocol from a test, as another node (or an impostor) would: open an
//! authenticated connection, send one request, read the answer.

use std::time::Duration;

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use palisade::raft::auth::PeerAuth;
use palisade::raft::protocol::{
    codec, Envelope, PeerFramed, PeerIo, PeerRequest, PeerResponse, PROTOCOL_VERSION,
};
use tokio_util::codec::Framed;

/// A peer connection to node `target` at `addr`, opened as node `from` with `auth`.
pub async fn open_as(
    addr: &str,
    auth: &PeerAuth,
    cluster_id: u64,
    from: u64,
    target: u64,
) -> PeerFramed {
    let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let io: Box<dyn PeerIo> = Box::new(stream);
    let mut framed = Framed::new(io, codec());
    auth.open(&mut framed, cluster_id, from, target)
        .await
        .expect("handshake");
    framed
}

/// Sends `body` from node `from` to node `target` and returns the answer (within 10 s).
pub async fn call(
    framed: &mut PeerFramed,
    cluster_id: u64,
    (from, target): (u64, u64),
    body: PeerRequest,
) -> PeerResponse {
    let env = Envelope {
        proto: PROTOCOL_VERSION,
        cluster_id,
        from,
        target,
        body,
    };
    let bytes = postcard::to_allocvec(&env).expect("encode");
    framed.send(Bytes::from(bytes)).await.expect("send");
    let frame = tokio::time::timeout(Duration::from_secs(10), framed.next())
        .await
        .expect("an answer within 10 s")
        .expect("an answer, not a close")
        .expect("a frame");
    postcard::from_bytes(&frame).expect("a peer response")
}
