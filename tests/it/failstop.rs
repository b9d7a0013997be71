//! Fail-stop and bounded peer input (docs/reliability.md, "Fail-stop and bounded peer
//! input"): a node whose Raft stops on a bad snapshot image or forged snapshot metadata
//! exits non-zero with the reason in its log, instead of answering clients with a dead Raft;
//! a peer of another protocol version is refused in the handshake with both versions named;
//! a peer speaks only for the node it authenticated as; and idle connections that never
//! finish the handshake are capped.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use openraft::raft::VoteRequest;
use palisade::raft::auth::{Handshake, Hello, PeerAuth};
use palisade::raft::protocol::{
    codec, Envelope, PeerFramed, PeerIo, PeerRequest, PeerResponse, PROTOCOL_VERSION,
};
use palisade::raft::service::MAX_PENDING_HANDSHAKES;
use palisade::raft::{log_id, SnapshotMeta, StoredMembership, Vote};
use palisade::store::snapshot::{Header, IMAGE_FORMAT};
use tokio_util::codec::Framed;

use crate::common::*;

/// The node's peer port and cluster id (a one-node server's peer port is on loopback and
/// needs no secret).
fn peer_of(srv: &Server) -> (String, u64) {
    let mut c = srv.conn();
    let port = String::from_utf8_lossy(&c.c("CONFIG GET peer-port")).into_owned();
    let port = port
        .lines()
        .nth(4)
        .expect("CONFIG GET peer-port")
        .to_string();
    let info = String::from_utf8_lossy(&c.c("RAFT.INFO")).into_owned();
    let cluster = info_field(&info, "cluster_id").expect("RAFT.INFO cluster_id");
    let cluster = u64::from_str_radix(&cluster, 16).expect("hex cluster id");
    (format!("127.0.0.1:{port}"), cluster)
}

/// A peer connection to node 1 at `addr`, opened as node `from` (no secret).
async fn open_as(addr: &str, cluster_id: u64, from: u64) -> PeerFramed {
    peer::open_as(addr, &PeerAuth::default(), cluster_id, from, 1).await
}

/// Sends `body` as node `from` to node 1 and returns the answer.
async fn call(
    framed: &mut PeerFramed,
    cluster_id: u64,
    from: u64,
    body: PeerRequest,
) -> PeerResponse {
    peer::call(framed, cluster_id, (from, 1), body).await
}

/// A snapshot image (header only, no keys) at `last_applied` with `membership`.
fn image(last_applied: u64, membership: &StoredMembership) -> Vec<u8> {
    let header = Header {
        format: IMAGE_FORMAT,
        last_applied: Some(log_id(5, 2, last_applied)),
        membership: membership.clone(),
        revision: 1,
        clock: Default::default(),
        scripts: BTreeMap::new(),
        script_budget: 0,
    };
    let header = postcard::to_allocvec(&header).expect("encode header");
    let mut out = (header.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(&header);
    out.push(0);
    out
}

/// Sends `data` as a snapshot image with `meta`, as a leader of term 5 (node 2) would.
fn send_snapshot(srv: &Server, data: Vec<u8>, meta: SnapshotMeta) {
    let (addr, cluster_id) = peer_of(srv);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let mut framed = open_as(&addr, cluster_id, 2).await;
        let len = data.len() as u64;
        let chunk = PeerRequest::SnapshotChunk {
            offset: 0,
            data: Bytes::from(data),
        };
        let got = call(&mut framed, cluster_id, 2, chunk).await;
        assert!(matches!(got, PeerResponse::SnapshotChunk), "{got:?}");
        let done = PeerRequest::SnapshotDone {
            vote: Vote::new_committed(5, 2),
            meta,
            len,
        };
        // The answer, if any, is an error; the node is on its way out.
        let env = Envelope {
            proto: PROTOCOL_VERSION,
            cluster_id,
            from: 2,
            target: 1,
            body: done,
        };
        let bytes = postcard::to_allocvec(&env).expect("encode");
        framed.send(Bytes::from(bytes)).await.expect("send");
        let _ = tokio::time::timeout(Duration::from_secs(5), framed.next()).await;
    });
}

/// The node exits by itself, non-zero, and its log says why.
#[track_caller]
fn assert_fail_stop(srv: &mut Server, why: &str) {
    let status = srv.wait_exit(Duration::from_secs(20)).unwrap_or_else(|| {
        panic!(
            "the node is still running; log:\n{}",
            tail(&srv.log_path(), 30)
        )
    });
    let log = std::fs::read_to_string(srv.log_path()).unwrap_or_default();
    assert!(!status.success(), "exit status {status}; log:\n{log}");
    assert_eq!(status.code(), Some(70), "exit status {status}; log:\n{log}");
    assert!(log.contains("raft stopped"), "log:\n{log}");
    assert!(log.contains(why), "no {why:?} in the log:\n{log}");
}

fn membership() -> StoredMembership {
    let m = openraft::Membership::new_with_defaults(vec![BTreeSet::from([1u64, 2])], []);
    StoredMembership::new(Some(log_id(5, 2, 1)), m)
}

/// Metadata that does not describe its image (a forged `SnapshotDone`): the node must not
/// install one under the other, and must not live on with its Raft stopped.
#[test]
fn a_forged_snapshot_meta_stops_the_node_with_a_clear_error() {
    let mut srv = Server::start();
    assert_eq!(srv.conn().c("SET a 1"), b"+OK\r\n");
    let meta = SnapshotMeta {
        last_log_id: Some(log_id(5, 2, 2000)),
        last_membership: membership(),
    };
    send_snapshot(&srv, image(1000, &membership()), meta);
    assert_fail_stop(&mut srv, "but its metadata says");
}

/// The same image, with its own last log id but another membership in the metadata.
#[test]
fn a_snapshot_meta_with_another_membership_stops_the_node() {
    let mut srv = Server::start();
    let other = StoredMembership::new(
        Some(log_id(5, 2, 1)),
        openraft::Membership::new_with_defaults(vec![BTreeSet::from([2u64])], []),
    );
    let meta = SnapshotMeta {
        last_log_id: Some(log_id(5, 2, 2000)),
        last_membership: other,
    };
    send_snapshot(&srv, image(2000, &membership()), meta);
    assert_fail_stop(&mut srv, "is not its metadata's");
}

/// An image that does not decode stops the node the same way.
#[test]
fn a_corrupt_snapshot_image_stops_the_node_with_a_clear_error() {
    let mut srv = Server::start();
    let meta = SnapshotMeta {
        last_log_id: Some(log_id(5, 2, 2000)),
        last_membership: membership(),
    };
    let mut data = image(2000, &membership());
    data.truncate(data.len() - 1);
    send_snapshot(&srv, data, meta);
    assert_fail_stop(&mut srv, "bad snapshot image");
}

/// A peer of another protocol version is refused in the handshake, and the refusal (sent to
/// it and logged) names both versions.
#[test]
fn a_peer_of_another_protocol_version_is_refused_naming_both() {
    let srv = Server::start();
    let (addr, cluster_id) = peer_of(&srv);
    let old = PROTOCOL_VERSION - 1;
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let why = rt.block_on(async {
        let stream = tokio::net::TcpStream::connect(&addr)
            .await
            .expect("connect");
        let io: Box<dyn PeerIo> = Box::new(stream);
        let mut framed = Framed::new(io, codec());
        let hello = Hello {
            proto: old,
            cluster_id,
            from: 2,
            target: 1,
            nonce: [7; 32],
        };
        let bytes = postcard::to_allocvec(&hello).expect("encode");
        framed.send(Bytes::from(bytes)).await.expect("send");
        let frame = tokio::time::timeout(Duration::from_secs(5), framed.next())
            .await
            .expect("an answer")
            .expect("a frame")
            .expect("a frame");
        match postcard::from_bytes::<Handshake>(&frame).expect("a handshake frame") {
            Handshake::Refused(why) => why,
            other => panic!("not refused: {other:?}"),
        }
    });
    let want =
        format!("peer protocol version {old} from node 2, this node speaks {PROTOCOL_VERSION}");
    assert!(why.contains(&want), "{why}");
    wait_for(Duration::from_secs(5), "the refusal in the log", || {
        let log = std::fs::read_to_string(srv.log_path()).unwrap_or_default();
        log.contains(&want).then_some(())
    });
}

/// A connection opened as node 2 cannot carry a frame that claims node 3.
#[test]
fn a_peer_speaks_only_for_the_node_it_authenticated_as() {
    let srv = Server::start();
    let (addr, cluster_id) = peer_of(&srv);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let mut framed = open_as(&addr, cluster_id, 2).await;
        // A pre-vote changes nothing on the receiver: as itself, node 2 gets an answer.
        let pre_vote = |from| PeerRequest::PreVote(VoteRequest::new(Vote::new(9, from), None));
        let got = call(&mut framed, cluster_id, 2, pre_vote(2)).await;
        assert!(matches!(got, PeerResponse::Vote(_)), "{got:?}");
        let got = call(&mut framed, cluster_id, 3, pre_vote(3)).await;
        match got {
            PeerResponse::Rejected(why) => assert!(
                why.contains("a frame from node 3 on a connection that node 2 opened"),
                "{why}"
            ),
            other => panic!("a frame claiming node 3 was served: {other:?}"),
        }
    });
}

/// Connections that never finish their handshake are capped: past the cap a new one is
/// closed at once (not after the handshake timeout) and logged; once they are gone, a peer
/// gets in again.
#[test]
fn connections_stuck_before_the_handshake_are_capped() {
    let srv = Server::start();
    let (addr, cluster_id) = peer_of(&srv);
    let idle: Vec<std::net::TcpStream> = (0..MAX_PENDING_HANDSHAKES)
        .map(|_| std::net::TcpStream::connect(&addr).expect("connect"))
        .collect();
    let mut extra = std::net::TcpStream::connect(&addr).expect("connect");
    extra
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let start = Instant::now();
    let mut buf = [0u8; 16];
    let n = extra.read(&mut buf).unwrap_or(0);
    assert_eq!(n, 0, "the connection over the cap got bytes");
    assert!(
        start.elapsed() < Duration::from_millis(1500),
        "the connection over the cap was closed only after {:?}",
        start.elapsed()
    );
    wait_for(Duration::from_secs(5), "the cap in the log", || {
        let log = std::fs::read_to_string(srv.log_path()).unwrap_or_default();
        log.contains("already in their handshake").then_some(())
    });
    drop(idle);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    wait_for(Duration::from_secs(10), "a handshake after the cap", || {
        rt.block_on(async {
            let stream = tokio::net::TcpStream::connect(&addr).await.ok()?;
            let io: Box<dyn PeerIo> = Box::new(stream);
            let mut framed = Framed::new(io, codec());
            PeerAuth::default()
                .open(&mut framed, cluster_id, 2, 1)
                .await
                .ok()
        })
    });
}
