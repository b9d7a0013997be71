//! The peer port's authentication: a process that knows the peer list (and so the cluster
//! id) but not the cluster secret can neither vote, append, forward nor admin; a node with
//! the wrong secret is kept out while the others serve; and a node will not open its peer
//! port to the network without a secret.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use openraft::raft::{AppendEntriesRequest, VoteRequest};
use palisade::raft::auth::PeerAuth;
use palisade::raft::protocol::{codec, Envelope, PeerIo, PeerRequest, PROTOCOL_VERSION};
use palisade::raft::Vote;
use tokio_util::codec::Framed;

use crate::common::cluster::Cluster;
use crate::common::tls::TestPki;
use crate::common::*;

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

/// Every kind of request an intruder could send, as node `from` with the cluster's real id.
fn intruder_requests(cluster_id: u64, from: u64, target: u64) -> Vec<(&'static str, Envelope)> {
    let env = |body| Envelope {
        proto: PROTOCOL_VERSION,
        cluster_id,
        from,
        target,
        body,
    };
    let big_term = Vote::new(1_000, from);
    let set = match palisade::cmd::parse(vec![b("SET"), b("pwned"), b("1")]) {
        Ok(palisade::cmd::Request::Data(c)) => c,
        other => panic!("SET: {other:?}"),
    };
    vec![
        (
            "vote",
            env(PeerRequest::Vote(VoteRequest::new(big_term, None))),
        ),
        (
            "pre-vote",
            env(PeerRequest::PreVote(VoteRequest::new(big_term, None))),
        ),
        (
            "append",
            env(PeerRequest::Append(AppendEntriesRequest {
                vote: Vote::new_committed(1_000, from),
                prev_log_id: None,
                leader_commit: None,
                entries: vec![],
            })),
        ),
        ("open stream", env(PeerRequest::OpenStream)),
        (
            "snapshot chunk",
            env(PeerRequest::SnapshotChunk {
                offset: 0,
                data: Bytes::from_static(b"image"),
            }),
        ),
        (
            "forward",
            env(PeerRequest::Forward {
                write: true,
                cmds: vec![set],
                users: vec![None],
            }),
        ),
        (
            "admin",
            env(PeerRequest::Admin(vec![
                b("RAFT.NODE"),
                b("REMOVE"),
                b(&target.to_string()),
            ])),
        ),
    ]
}

/// Connects to `addr`, optionally runs the handshake with `auth`, sends `env` and returns
/// what came back: `None` if the connection closed without an answer.
async fn try_request(addr: &str, auth: Option<&PeerAuth>, env: &Envelope) -> Option<Vec<u8>> {
    let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let io: Box<dyn PeerIo> = Box::new(stream);
    let mut framed = Framed::new(io, codec());
    if let Some(auth) = auth {
        if let Err(e) = auth
            .open(&mut framed, env.cluster_id, env.from, env.target)
            .await
        {
            // Refused, as it must be; carry on as an intruder that ignores the refusal.
            assert!(
                e.to_string().contains("secret"),
                "refusal names the secret: {e}"
            );
        }
    }
    let bytes = postcard::to_allocvec(env).expect("encode");
    if framed.send(Bytes::from(bytes)).await.is_err() {
        return None;
    }
    match tokio::time::timeout(Duration::from_secs(3), framed.next()).await {
        Ok(Some(Ok(frame))) => Some(frame.to_vec()),
        Ok(_) => None,
        Err(_) => panic!("the node neither answered nor closed within 3 s"),
    }
}

/// Node `id`'s leader, term and voters (RAFT.INFO), each present and not empty.
fn raft_state(cluster: &Cluster, id: u64) -> (String, String, String) {
    let field = |f: &str| {
        let v = cluster.info(id, f).unwrap_or_default();
        assert!(!v.is_empty(), "node {id} has no {f}");
        v
    };
    (field("leader_id"), field("term"), field("voters"))
}

#[test]
fn an_intruder_that_knows_the_peer_list_but_not_the_secret_changes_nothing() {
    let cluster = Cluster::start(3, &[]);
    let leader = cluster.wait_leader(&[1, 2, 3]);
    let before: Vec<_> = (1..=3).map(|id| raft_state(&cluster, id)).collect();
    let peers: BTreeMap<u64, String> = (1..=3).map(|id| (id, cluster.peer_addr(id))).collect();
    let cluster_id = palisade::raft::node::peers_cluster_id(&peers);
    // The intruder computed the real cluster id from the peer list.
    assert_eq!(
        cluster.info(1, "cluster_id"),
        Some(format!("{cluster_id:016x}"))
    );
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let wrong = PeerAuth::new(Some(b"not-the-cluster-secret".to_vec()));
    let none = PeerAuth::new(None);
    let mut tried = 0;
    for target in 1..=3u64 {
        // The intruder claims to be another member, as it would.
        let from = if target == 1 { 2 } else { 1 };
        for (what, env) in intruder_requests(cluster_id, from, target) {
            for (how, auth) in [
                ("without a handshake", None),
                ("after a handshake with a wrong secret", Some(&wrong)),
                ("after a handshake with no secret", Some(&none)),
            ] {
                let answer = rt.block_on(try_request(&cluster.peer_addr(target), auth, &env));
                tried += 1;
                // Without a handshake the node's only possible answer would be a handshake
                // refusal; with one, the refusal came before and the connection is closed.
                if let Some(frame) = answer {
                    let text = String::from_utf8_lossy(&frame).into_owned();
                    assert!(
                        postcard::from_bytes::<palisade::raft::protocol::PeerResponse>(&frame)
                            .map(|r| matches!(
                                r,
                                palisade::raft::protocol::PeerResponse::Rejected(_)
                            ))
                            .unwrap_or(true),
                        "node {target} answered a {what} {how}: {text:?}"
                    );
                }
            }
        }
    }
    assert_eq!(tried, 3 * 7 * 3);
    // Nothing changed: no key written, same leader, term and members everywhere.
    for id in 1..=3 {
        assert_eq!(
            cluster.conn(id).c("GET pwned"),
            b"$-1\r\n",
            "the forwarded SET reached node {id}'s state"
        );
    }
    let after: Vec<_> = (1..=3).map(|id| raft_state(&cluster, id)).collect();
    assert_eq!(before, after, "raft state changed under the intruder");
    assert_eq!(cluster.wait_leader(&[1, 2, 3]), leader);
    let logs: String = (1..=3)
        .map(|id| std::fs::read_to_string(cluster.log(id)).unwrap_or_default())
        .collect();
    assert!(
        logs.contains("peer connection refused in the handshake"),
        "the refusals are logged:\n{}",
        cluster.logs()
    );
}

#[test]
fn a_node_with_the_wrong_secret_is_kept_out_while_the_others_serve_writes() {
    let mut cluster = Cluster::start(3, &[]);
    let leader = cluster.wait_leader(&[1, 2, 3]);
    let outsider = if leader == 3 { 1 } else { 3 };
    let insiders: Vec<u64> = (1..=3).filter(|id| *id != outsider).collect();
    cluster.kill9(outsider);
    cluster.set_node_extra(
        outsider,
        &["--cluster-secret", "a-different-cluster-secret"],
    );
    cluster.restart(outsider);

    // The other two keep serving writes, and the outsider's failed elections do not disturb
    // them: they never hear its votes.
    let term_before = raft_state(&cluster, insiders[0]).1;
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut c = cluster.conn(leader);
    let mut i = 0;
    while Instant::now() < deadline {
        i += 1;
        assert_eq!(c.c(&format!("SET out:{i} {i}")), b"+OK\r\n", "write {i}");
    }
    assert!(i > 20, "only {i} writes in 3 s");
    assert_eq!(
        raft_state(&cluster, insiders[0]).1,
        term_before,
        "the outsider disturbed the term"
    );
    for id in &insiders {
        assert_eq!(cluster.info_u64(*id, "leader_id"), leader);
    }
    // The outsider has none of those writes and cannot reach a leader.
    let mut o = cluster.conn(outsider);
    let got = o.c("GET out:1");
    assert!(
        got.starts_with(b"-"),
        "the outsider answered {}",
        show(&got)
    );
    let outsider_log = std::fs::read_to_string(cluster.log(outsider)).unwrap_or_default();
    assert!(
        outsider_log.contains("wrong cluster secret"),
        "the outsider's log says why:\n{}",
        tail(&cluster.log(outsider), 20)
    );
    let insider_logs: String = insiders
        .iter()
        .map(|id| std::fs::read_to_string(cluster.log(*id)).unwrap_or_default())
        .collect();
    assert!(
        insider_logs.contains("wrong cluster secret"),
        "{}",
        cluster.logs()
    );
    // And INFO counts the refusals.
    let refused: u64 = insiders
        .iter()
        .map(|id| {
            let info = String::from_utf8_lossy(&cluster.conn(*id).c("INFO raft")).into_owned();
            info.lines()
                .find_map(|l| l.strip_prefix("raft_peer_handshakes_refused:"))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .expect("INFO raft has raft_peer_handshakes_refused")
        })
        .sum();
    assert!(refused > 0, "no refusal counted");

    // With the right secret it catches up: the secret was the only thing keeping it out.
    cluster.kill9(outsider);
    cluster.set_node_extra(outsider, &[]);
    cluster.restart(outsider);
    wait_for(Duration::from_secs(10), "the outsider to catch up", || {
        let v = as_bulk(&cluster.conn(outsider).c(&format!("GET out:{i}")))?;
        (v == i.to_string().into_bytes()).then_some(())
    });
}

/// Runs the binary with `args` and expects it to exit at once with an error naming `want`.
fn refused(args: &[&str], want: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_palisade"))
        .args(["--port", &port, "--dir"])
        .arg(dir.path())
        .args(args)
        .output()
        .expect("run palisade");
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{args:?} started:\n{text}");
    assert!(text.contains(want), "{args:?}: {text}");
}

#[test]
fn the_peer_port_is_not_opened_to_the_network_without_a_secret() {
    let peers = format!("1=127.0.0.1:{},2=192.0.2.1:1", free_port());
    refused(
        &["--bind", "0.0.0.0", "--peers", &peers],
        "refusing to open the peer port on 0.0.0.0",
    );
    refused(
        &["--bind", "0.0.0.0", "--join"],
        "refusing to open the peer port on 0.0.0.0",
    );
    refused(
        &["--bind", "0.0.0.0", "--cluster-secret", "short"],
        "it must have at least 16",
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("secret");
    std::fs::write(&file, "a-long-enough-cluster-secret\n").expect("write");
    let file = file.to_str().expect("utf-8 path");
    refused(
        &[
            "--cluster-secret",
            "a-long-enough-cluster-secret",
            "--cluster-secret-file",
            file,
        ],
        "not both",
    );
    // With a secret from a file it starts on every address.
    let srv = Server::start_bound("0.0.0.0", true, &["--cluster-secret-file", file]);
    assert_eq!(srv.conn().c("PING"), b"+PONG\r\n");
    let log = std::fs::read_to_string(srv.log_path()).unwrap_or_default();
    assert!(!log.contains("listens on loopback only"), "{log}");
    // A node alone without a secret serves clients on every address, its peer port on
    // loopback only, and says so.
    let alone = Server::start_bound("0.0.0.0", true, &[]);
    assert_eq!(alone.conn().c("PING"), b"+PONG\r\n");
    let log = std::fs::read_to_string(alone.log_path()).unwrap_or_default();
    assert!(
        log.contains("peer_bind=\"127.0.0.1\"") || log.contains("peer_bind=127.0.0.1"),
        "{log}"
    );
}

/// The flags for mutual TLS between nodes with certificate `stem` of `pki`.
fn tls_flags(pki: &TestPki, stem: &str) -> Vec<String> {
    vec![
        "--tls-cluster".into(),
        "yes".into(),
        "--tls-cert-file".into(),
        pki.arg(&format!("{stem}.crt")),
        "--tls-key-file".into(),
        pki.arg(&format!("{stem}.key")),
        "--tls-ca-cert-file".into(),
        pki.arg("ca.crt"),
    ]
}

#[test]
fn with_tls_cluster_only_nodes_with_a_certificate_of_the_cluster_ca_take_part() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = TestPki::new(dir.path());
    // Per-node flags, so that one node's certificate can be swapped. No cluster secret:
    // TLS alone authenticates the peers.
    let node_extra = (1..=3u64).map(|id| (id, tls_flags(&pki, "node"))).collect();
    let mut cluster = Cluster::start_with(3, &[], node_extra);
    let leader = cluster.wait_leader(&[1, 2, 3]);
    assert_eq!(cluster.conn(leader).c("SET t 1"), b"+OK\r\n");
    let follower = if leader == 1 { 2 } else { 1 };
    assert_eq!(
        as_bulk(&cluster.conn(follower).c("GET t")),
        Some(b"1".to_vec())
    );

    // A peer without TLS gets nowhere: its frames are not even a TLS hello.
    let peers: BTreeMap<u64, String> = (1..=3).map(|id| (id, cluster.peer_addr(id))).collect();
    let cluster_id = palisade::raft::node::peers_cluster_id(&peers);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    for (what, env) in intruder_requests(cluster_id, 2, 1) {
        let answer = rt.block_on(try_request(&cluster.peer_addr(1), None, &env));
        assert!(answer.is_none(), "a plain {what} got an answer");
    }

    // A node whose certificate another CA signed is kept out; the others serve.
    let outsider = if leader == 3 { 1 } else { 3 };
    cluster.kill9(outsider);
    let mut stranger = tls_flags(&pki, "stranger");
    // It still trusts the cluster CA: the members are the ones that refuse it.
    stranger[7] = pki.arg("ca.crt");
    let stranger: Vec<&str> = stranger.iter().map(String::as_str).collect();
    cluster.set_node_extra(outsider, &stranger);
    cluster.restart(outsider);
    let mut c = cluster.conn(leader);
    for i in 0..50 {
        assert_eq!(c.c(&format!("SET s:{i} {i}")), b"+OK\r\n", "write {i}");
    }
    let got = cluster.conn(outsider).c("GET s:49");
    assert!(
        got.starts_with(b"-"),
        "the outsider answered {}",
        show(&got)
    );
    assert!(
        (1..=3).filter(|id| *id != outsider).any(|id| {
            std::fs::read_to_string(cluster.log(id))
                .unwrap_or_default()
                .contains("TLS handshake failed")
        }),
        "a member logs the refused certificate:\n{}",
        cluster.logs()
    );

    // With the cluster's certificate it catches up.
    cluster.kill9(outsider);
    let flags = tls_flags(&pki, "node");
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    cluster.set_node_extra(outsider, &flags);
    cluster.restart(outsider);
    wait_for(Duration::from_secs(10), "the outsider to catch up", || {
        let v = as_bulk(&cluster.conn(outsider).c("GET s:49"))?;
        (v == b"49").then_some(())
    });
}
