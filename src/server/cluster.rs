//! The group's topology for the CLUSTER facade (`cmd::cluster`): the members and the
//! leader from this node's Raft metrics, and the client address each member announces.
//!
//! The membership holds only peer addresses. A node's client address (`--announce-ip`,
//! `--announce-port`) travels in its `RAFT.INFO` (the `announce:` field), which any member
//! may ask of any other over the peer port, as followers already ask the leader for admin
//! commands: nothing new is replicated and no stored format changes. Answers are kept for
//! [`FRESH`], so that a client that refreshes its slot map in a loop does not turn each
//! refresh into a round of peer connections. A member that does not answer within [`ASK`]
//! is flagged `fail` and listed with the address last heard from it, or failing that its
//! peer host and port minus 10000 (the default offset). A leader that does not answer, or
//! this node leading without a recent quorum, counts as no leader: the cluster is down.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use openraft::async_runtime::watch::WatchReceiver;

use super::forward::Leader;
use super::Shared;
use crate::cmd::cluster::{node_name, ClusterNode, Topology};
use crate::config::PEER_PORT_OFFSET;
use crate::raft::NodeId;
use crate::resp::Reply;

/// The RAFT.INFO field that carries a node's announced client address (`ip:port`).
pub const ANNOUNCE_FIELD: &str = "announce:";

/// How long a member's answer is reused.
const FRESH: Duration = Duration::from_secs(2);
/// How long a member has to answer.
const ASK: Duration = Duration::from_millis(300);

/// How long a leader may go without a quorum's acknowledgement before it is reported as
/// no leader: the longest election timeout (`raft::node`), after which the others elect.
const QUORUM_STALE: Duration = Duration::from_millis(1000);

/// What each member last announced, by node id.
#[derive(Default)]
pub struct Announced {
    heard: Mutex<HashMap<NodeId, Heard>>,
}

#[derive(Clone)]
struct Heard {
    peer_addr: String,
    ip: String,
    port: u16,
    at: Instant,
}

/// A member as the membership lists it.
struct Member {
    id: NodeId,
    peer_addr: String,
}

/// The topology, after asking every member not heard from lately for its address.
pub async fn topology(shared: &Shared) -> Topology {
    let stale: Vec<Member> = members(shared)
        .into_iter()
        .filter(|m| m.id != shared.config.node_id && !heard_lately(shared, m))
        .collect();
    let asks = stale.iter().map(|m| ask(shared, m));
    let answers = futures::future::join_all(asks).await;
    let mut down = Vec::new();
    for (m, answer) in stale.iter().zip(answers) {
        match answer {
            Some((ip, port)) => remember(shared, m, ip, port),
            None => down.push(m.id),
        }
    }
    build(shared, &down)
}

/// The topology from what is known now, without asking anyone (inside EXEC, which cannot
/// wait): members not heard from lately count as reachable.
pub fn topology_now(shared: &Shared) -> Topology {
    build(shared, &[])
}

fn members(shared: &Shared) -> Vec<Member> {
    let metrics = shared.raft.metrics();
    let m = metrics.borrow_watched();
    m.membership_config
        .membership()
        .nodes()
        .map(|(id, node)| Member {
            id: *id,
            peer_addr: node.addr.clone(),
        })
        .collect()
}

fn heard_lately(shared: &Shared, m: &Member) -> bool {
    let Ok(heard) = shared.announced.heard.lock() else {
        return false;
    };
    heard
        .get(&m.id)
        .is_some_and(|h| h.peer_addr == m.peer_addr && h.at.elapsed() < FRESH)
}

fn remember(shared: &Shared, m: &Member, ip: String, port: u16) {
    if let Ok(mut heard) = shared.announced.heard.lock() {
        let peer_addr = m.peer_addr.clone();
        let at = Instant::now();
        heard.insert(
            m.id,
            Heard {
                peer_addr,
                ip,
                port,
                at,
            },
        );
    }
}

/// Asks member `m` for its RAFT.INFO and reads its announced address.
async fn ask(shared: &Shared, m: &Member) -> Option<(String, u16)> {
    let argv = vec![Bytes::from_static(b"RAFT.INFO")];
    match shared.link.ask(m.id, &m.peer_addr, argv, ASK).await {
        Ok(Reply::Verbatim(text)) => parse_announce(&text),
        Ok(Reply::Bulk(b)) => parse_announce(&String::from_utf8_lossy(&b)),
        Ok(_) => None,
        Err(e) => {
            tracing::debug!(node = m.id, error = %e, "member did not say its client address");
            None
        }
    }
}

/// The `announce:ip:port` field of a RAFT.INFO text.
fn parse_announce(text: &str) -> Option<(String, u16)> {
    let value = text
        .lines()
        .find_map(|l| l.strip_prefix(ANNOUNCE_FIELD))?
        .trim();
    let (ip, port) = value.rsplit_once(':')?;
    Some((ip.to_string(), port.parse().ok()?))
}

/// Host and port of a `host:port` peer address.
fn split(addr: &str) -> (String, u16) {
    match addr.rsplit_once(':') {
        Some((host, port)) => (host.to_string(), port.parse().unwrap_or(0)),
        None => (addr.to_string(), 0),
    }
}

/// An unspecified bind address (`0.0.0.0`, `::`) is no address to give a client: the
/// peer host stands in for it.
fn usable_ip(ip: String, peer_host: &str) -> String {
    match ip.parse::<std::net::IpAddr>() {
        Ok(a) if a.is_unspecified() => peer_host.to_string(),
        _ => ip,
    }
}

fn build(shared: &Shared, down: &[NodeId]) -> Topology {
    let me = shared.config.node_id;
    let cluster_id = shared.link.cluster_id();
    let leader = match shared.link.leader() {
        Leader::Me => Some(me),
        Leader::Other(id, _) => Some(id),
        Leader::Unknown => None,
    };
    let m = shared.raft.metrics().borrow_watched().clone();
    // A leader that did not answer is no leader to give clients; nor is this node when a
    // quorum has not acknowledged it lately (a leader cut off from the others keeps its
    // role until it hears of a higher term).
    let quorum_fresh = m
        .last_quorum_acked
        .is_none_or(|t| openraft::Instant::elapsed(&*t) < QUORUM_STALE);
    let leader = leader
        .filter(|l| !down.contains(l))
        .filter(|l| *l != me || quorum_fresh);
    let applied = shared.applied_index(&m);
    let heard = shared
        .announced
        .heard
        .lock()
        .map(|h| h.clone())
        .unwrap_or_default();
    let nodes = members(shared)
        .into_iter()
        .map(|member| {
            let (peer_host, cport) = split(&member.peer_addr);
            let (ip, port) = if member.id == me {
                shared.config.announce(shared.addr)
            } else if let Some(h) = heard.get(&member.id) {
                (h.ip.clone(), h.port)
            } else {
                (peer_host.clone(), cport.wrapping_sub(PEER_PORT_OFFSET))
            };
            // The leader knows how far each member's log reaches; others know their own.
            let offset = match &m.replication {
                Some(repl) => repl.get(&member.id).copied().flatten().map(|l| l.index),
                None => None,
            };
            ClusterNode {
                id: member.id,
                name: node_name(cluster_id, member.id),
                ip: usable_ip(ip, &peer_host),
                port,
                cport,
                offset: if member.id == me {
                    applied
                } else {
                    offset.unwrap_or(0)
                },
                reachable: !down.contains(&member.id),
            }
        })
        .collect();
    Topology {
        me,
        leader,
        epoch: m.current_term,
        cluster_id,
        nodes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn announce_field_and_addresses() {
        let text = "node_id:2\r\ncluster_id:00ff\r\nannounce:10.0.0.2:7002\r\nrole:follower\r\n";
        assert_eq!(parse_announce(text), Some(("10.0.0.2".into(), 7002)));
        assert_eq!(
            parse_announce("announce:::1:6379\r\n"),
            Some(("::1".into(), 6379))
        );
        assert_eq!(parse_announce("node_id:2\r\n"), None);
        assert_eq!(parse_announce("announce:x:port\r\n"), None);
        assert_eq!(split("127.0.0.1:17001"), ("127.0.0.1".into(), 17001));
        assert_eq!(usable_ip("0.0.0.0".into(), "10.1.1.1"), "10.1.1.1");
        assert_eq!(usable_ip("10.2.2.2".into(), "10.1.1.1"), "10.2.2.2");
    }
}
