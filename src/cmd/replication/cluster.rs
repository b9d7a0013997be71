//! `CLUSTER INFO|SLOTS|SHARDS|NODES|MYID|MYSHARDID|KEYSLOT|COUNTKEYSINSLOT|GETKEYSINSLOT|HELP`,
//! `READONLY`, `READWRITE` and `ASKING`: the Redis Cluster facade of the one Raft group.
//!
//! Cluster-mode clients (redis-py `RedisCluster`, ioredis `Cluster`, redis-rs `cluster`) ask
//! `CLUSTER SLOTS` (or `SHARDS`, `NODES`) at start and route each key to the node that serves
//! its slot. Palisade's one group serves all 16384 slots: the Raft leader is listed as the
//! master and every other member as its replica, each with the client address it announces
//! (`--announce-ip`, `--announce-port`). Every node serves every key (a follower forwards
//! writes), so no reply ever says MOVED or ASK; READONLY, READWRITE and ASKING are accepted
//! and change nothing. Without a known leader the cluster is down, as Redis reports it:
//! `cluster_state:fail` and no slot served (SLOTS and SHARDS are empty).
//!
//! The replies are pure functions of a [`Topology`], which the server gathers (membership,
//! leader, announced addresses: `server::cluster`). KEYSLOT is Redis's CRC16 with its
//! `{hash tag}` rule; COUNTKEYSINSLOT and GETKEYSINSLOT are reads of the keyspace
//! ([`SlotKeys`]), served as every read is.

use std::fmt::Write;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use sha1::{Digest, Sha1};

use crate::cmd::connection::ConnCmd;
use crate::cmd::registry::{none, Replicated, Spec, Touches, NO_KEYS};
use crate::cmd::{Command, Request};
use crate::resp::{Args, Reply};
use crate::state::Keyspace;

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new("cluster", -2, &[], NO_KEYS, parse)
        .docs(
            "Describe the cluster: slots, nodes, key slots (one Raft group serves every slot)",
            "3.0.0",
            "cluster",
        )
        .subcommands(SUBCOMMANDS),
    Spec::new(
        "readonly",
        1,
        &["loading", "stale", "fast"],
        NO_KEYS,
        parse_flag,
    )
    .docs(
        "Allow reads from a replica node (every Palisade node already serves reads)",
        "3.0.0",
        "cluster",
    )
    .categories(&["connection"]),
    Spec::new(
        "readwrite",
        1,
        &["loading", "stale", "fast"],
        NO_KEYS,
        parse_flag,
    )
    .docs("Undo READONLY", "3.0.0", "cluster")
    .categories(&["connection"]),
    Spec::new("asking", 1, &["fast"], NO_KEYS, parse_flag)
        .docs(
            "Accept the next command for an importing slot (never needed with one group)",
            "3.0.0",
            "cluster",
        )
        .categories(&["connection"]),
];

/// CLUSTER's subcommands (`cluster|name`): Redis's facts (`scripts/command-args.py
/// --subcommands cluster`) and Palisade's own.
const SUBCOMMANDS: &[Spec] = &[
    Spec::new("countkeysinslot", 3, &["stale"], NO_KEYS, parse)
        .docs("Count the keys in a hash slot", "3.0.0", "cluster")
        .args("slot:integer"),
    Spec::new("getkeysinslot", 4, &["stale"], NO_KEYS, parse)
        .docs("List some keys of a hash slot", "3.0.0", "cluster")
        .args("slot:integer count:integer"),
    Spec::new("help", 2, &["loading", "stale"], NO_KEYS, parse).docs(
        "List the subcommands and what they take",
        "5.0.0",
        "cluster",
    ),
    Spec::new("info", 2, &["stale"], NO_KEYS, parse).docs(
        "Describe the cluster's state",
        "3.0.0",
        "cluster",
    ),
    Spec::new("keyslot", 3, &["stale"], NO_KEYS, parse)
        .docs("Report the hash slot of a key", "3.0.0", "cluster")
        .args("key"),
    Spec::new("myid", 2, &["stale"], NO_KEYS, parse).docs(
        "Report this node's id",
        "3.0.0",
        "cluster",
    ),
    Spec::new("myshardid", 2, &["loading", "stale"], NO_KEYS, parse).docs(
        "Report the id of this node's shard",
        "7.2.0",
        "cluster",
    ),
    Spec::new("nodes", 2, &["stale"], NO_KEYS, parse).docs(
        "Describe the nodes, one line each",
        "3.0.0",
        "cluster",
    ),
    Spec::new("shards", 2, &["stale"], NO_KEYS, parse).docs(
        "Describe the shard: its slots and nodes",
        "7.0.0",
        "cluster",
    ),
    Spec::new("slots", 2, &["stale"], NO_KEYS, parse).docs(
        "Map the slot ranges to their nodes",
        "3.0.0",
        "cluster",
    ),
];

/// The number of hash slots, as in Redis Cluster.
pub const SLOTS: u16 = 16384;

/// A CLUSTER subcommand the session answers from the cluster's topology.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterCmd {
    /// CLUSTER INFO.
    Info,
    /// CLUSTER SLOTS.
    Slots,
    /// CLUSTER SHARDS.
    Shards,
    /// CLUSTER NODES.
    Nodes,
    /// CLUSTER MYID.
    MyId,
    /// CLUSTER MYSHARDID.
    MyShardId,
}

/// One member of the group, as cluster clients see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNode {
    /// Raft node id.
    pub id: u64,
    /// The 40-hex node name ([`node_name`]).
    pub name: String,
    /// Announced client IP.
    pub ip: String,
    /// Announced client port.
    pub port: u16,
    /// Peer port (Redis's cluster bus port).
    pub cport: u16,
    /// Log index the node is known to hold (its replication offset).
    pub offset: u64,
    /// False if the node did not answer when asked: flagged `fail`, and left out of SLOTS.
    pub reachable: bool,
}

/// The group as one node sees it: what every CLUSTER reply is computed from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    /// This node's Raft id.
    pub me: u64,
    /// The leader's Raft id, if one is known.
    pub leader: Option<u64>,
    /// The Raft term (the config epoch clients see).
    pub epoch: u64,
    /// The cluster id (the shard id is derived from it).
    pub cluster_id: u64,
    /// Every member, voters and learners, by Raft id.
    pub nodes: Vec<ClusterNode>,
}

/// The stable 40-hex name of node `id` in cluster `cluster_id`: the same on every node and
/// across restarts, since both ids are stored.
pub fn node_name(cluster_id: u64, id: u64) -> String {
    hex::encode(Sha1::digest(format!(
        "palisade-node:{cluster_id:016x}:{id}"
    )))
}

/// The 40-hex shard id of the one group (CLUSTER MYSHARDID, SHARDS).
pub fn shard_name(cluster_id: u64) -> String {
    hex::encode(Sha1::digest(format!("palisade-shard:{cluster_id:016x}:0")))
}

/// The hash slot of `key`: CRC16 (XMODEM) modulo 16384 of the key, or of the part between
/// the first `{` and the next `}` when that part is not empty, as Redis computes it.
pub fn key_slot(key: &[u8]) -> u16 {
    redis_protocol::redis_keyslot(key) % SLOTS
}

/// Parses CLUSTER and its subcommands.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    let raw = args.arg()?;
    let sub = String::from_utf8_lossy(&raw).to_lowercase();
    let n = args.remaining();
    let arity = |want: usize| -> Result<(), Reply> {
        if n == want {
            Ok(())
        } else {
            Err(crate::cmd::wrong_arity(&format!("cluster|{sub}")))
        }
    };
    let topo = |c: ClusterCmd| Ok(Request::Conn(ConnCmd::Cluster(c)));
    match sub.as_str() {
        "info" => arity(0).and_then(|_| topo(ClusterCmd::Info)),
        "slots" => arity(0).and_then(|_| topo(ClusterCmd::Slots)),
        "shards" => arity(0).and_then(|_| topo(ClusterCmd::Shards)),
        "nodes" => arity(0).and_then(|_| topo(ClusterCmd::Nodes)),
        "myid" => arity(0).and_then(|_| topo(ClusterCmd::MyId)),
        "myshardid" => arity(0).and_then(|_| topo(ClusterCmd::MyShardId)),
        "keyslot" => {
            arity(1)?;
            let slot = key_slot(&args.arg()?);
            Ok(Request::Conn(ConnCmd::Command(Reply::Int(slot.into()))))
        }
        "countkeysinslot" => {
            arity(1)?;
            let slot = slot_arg(args.next_i64()?).ok_or_else(|| Reply::err("ERR Invalid slot"))?;
            Ok(Request::Data(Command::SlotKeys(SlotKeys {
                slot,
                count: None,
            })))
        }
        "getkeysinslot" => {
            arity(2)?;
            let (slot, count) = (args.next_i64()?, args.next_i64()?);
            match (slot_arg(slot), u64::try_from(count)) {
                (Some(slot), Ok(count)) => Ok(Request::Data(Command::SlotKeys(SlotKeys {
                    slot,
                    count: Some(count),
                }))),
                _ => Err(Reply::err("ERR Invalid slot or number of keys")),
            }
        }
        "help" => arity(0).map(|_| Request::Conn(ConnCmd::Command(help()))),
        _ => Err(Reply::err(format!(
            "ERR unknown subcommand '{}'. Try CLUSTER HELP.",
            String::from_utf8_lossy(&raw)
        ))),
    }
}

fn slot_arg(n: i64) -> Option<u16> {
    u16::try_from(n).ok().filter(|s| *s < SLOTS)
}

/// Parses READONLY, READWRITE and ASKING: accepted, and nothing changes (every node serves
/// reads as it does without them, and no slot is ever importing).
pub fn parse_flag(_: &mut Args) -> Result<Request, Reply> {
    Ok(Request::Conn(ConnCmd::Command(Reply::ok())))
}

fn help() -> Reply {
    const LINES: &[&str] = &[
        "CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "COUNTKEYSINSLOT <slot>",
        "    Return the number of keys in <slot>.",
        "GETKEYSINSLOT <slot> <count>",
        "    Return key names stored by this node in a slot.",
        "INFO",
        "    Return information about the cluster.",
        "KEYSLOT <key>",
        "    Return the hash slot for <key>.",
        "MYID",
        "    Return the node id.",
        "MYSHARDID",
        "    Return the node's shard id.",
        "NODES",
        "    Return cluster configuration seen by node. Output format:",
        "    <id> <ip:port@bus-port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
        "SHARDS",
        "    Return information about slot range mappings and the nodes associated with them.",
        "SLOTS",
        "    Return information about slots range mappings. Each range is made of:",
        "    start, end, master and replicas IP addresses, ports and ids",
        "HELP",
        "    Print this help.",
    ];
    Reply::Array(LINES.iter().map(|l| Reply::Simple((*l).into())).collect())
}

impl Topology {
    fn node(&self, id: u64) -> Option<&ClusterNode> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// The master (the leader) first, then the replicas in id order.
    fn ordered(&self) -> Vec<&ClusterNode> {
        let mut out: Vec<&ClusterNode> =
            self.leader.and_then(|l| self.node(l)).into_iter().collect();
        out.extend(self.nodes.iter().filter(|n| Some(n.id) != self.leader));
        out
    }

    /// The reply to `cmd`.
    pub fn reply(&self, cmd: ClusterCmd) -> Reply {
        match cmd {
            ClusterCmd::Info => Reply::Verbatim(self.info()),
            ClusterCmd::Slots => self.slots(),
            ClusterCmd::Shards => self.shards(),
            ClusterCmd::Nodes => Reply::Verbatim(self.nodes_text()),
            ClusterCmd::MyId => Reply::bulk(node_name(self.cluster_id, self.me)),
            ClusterCmd::MyShardId => Reply::bulk(shard_name(self.cluster_id)),
        }
    }

    /// CLUSTER INFO, in Redis's fields and order.
    pub fn info(&self) -> String {
        let served = if self.leader.is_some() { SLOTS } else { 0 };
        let fields: [(&str, String); 13] = [
            ("cluster_enabled", "1".into()),
            (
                "cluster_state",
                if self.leader.is_some() { "ok" } else { "fail" }.into(),
            ),
            ("cluster_slots_assigned", SLOTS.to_string()),
            ("cluster_slots_ok", served.to_string()),
            ("cluster_slots_pfail", "0".into()),
            ("cluster_slots_fail", (SLOTS - served).to_string()),
            ("cluster_known_nodes", self.nodes.len().to_string()),
            ("cluster_size", "1".into()),
            ("cluster_current_epoch", self.epoch.to_string()),
            ("cluster_my_epoch", self.epoch.to_string()),
            ("cluster_stats_messages_sent", "0".into()),
            ("cluster_stats_messages_received", "0".into()),
            ("total_cluster_links_buffer_limit_exceeded", "0".into()),
        ];
        let mut out = String::new();
        for (k, v) in fields {
            let _ = write!(out, "{k}:{v}\r\n");
        }
        out
    }

    /// CLUSTER SLOTS: one range, 0-16383, served by the leader and its reachable replicas;
    /// empty while no leader is known.
    pub fn slots(&self) -> Reply {
        if self.leader.is_none() {
            return Reply::Array(Vec::new());
        }
        let mut range = vec![Reply::Int(0), Reply::Int(i64::from(SLOTS - 1))];
        for n in self.ordered() {
            if n.reachable || Some(n.id) == self.leader {
                range.push(Reply::Array(vec![
                    Reply::text(&n.ip),
                    Reply::Int(n.port.into()),
                    Reply::text(&n.name),
                    Reply::Map(Vec::new()),
                ]));
            }
        }
        Reply::Array(vec![Reply::Array(range)])
    }

    /// CLUSTER SHARDS: one shard with every slot and every node; empty while no leader is
    /// known.
    pub fn shards(&self) -> Reply {
        if self.leader.is_none() {
            return Reply::Array(Vec::new());
        }
        let nodes = self
            .ordered()
            .into_iter()
            .map(|n| {
                let role = if Some(n.id) == self.leader {
                    "master"
                } else {
                    "replica"
                };
                let health = if n.reachable { "online" } else { "failed" };
                let offset = i64::try_from(n.offset).unwrap_or(i64::MAX);
                Reply::Map(vec![
                    (Reply::text("id"), Reply::text(&n.name)),
                    (Reply::text("port"), Reply::Int(n.port.into())),
                    (Reply::text("ip"), Reply::text(&n.ip)),
                    (Reply::text("endpoint"), Reply::text(&n.ip)),
                    (Reply::text("role"), Reply::text(role)),
                    (Reply::text("replication-offset"), Reply::Int(offset)),
                    (Reply::text("health"), Reply::text(health)),
                ])
            })
            .collect();
        let slots = Reply::Array(vec![Reply::Int(0), Reply::Int(i64::from(SLOTS - 1))]);
        Reply::Array(vec![Reply::Map(vec![
            (Reply::text("slots"), slots),
            (Reply::text("nodes"), Reply::Array(nodes)),
        ])])
    }

    /// CLUSTER NODES: one line per member, Redis's format; the leader holds 0-16383 and the
    /// others are its replicas (every node a master without slots while no leader is known).
    pub fn nodes_text(&self) -> String {
        let mut out = String::new();
        let master = self.leader.map(|l| node_name(self.cluster_id, l));
        for n in self.ordered() {
            let is_master = Some(n.id) == self.leader || self.leader.is_none();
            let mut flags = Vec::new();
            if n.id == self.me {
                flags.push("myself");
            }
            flags.push(if is_master { "master" } else { "slave" });
            if !n.reachable {
                flags.push("fail");
            }
            let of = match (&master, is_master) {
                (Some(m), false) => m.as_str(),
                _ => "-",
            };
            let link = if n.reachable {
                "connected"
            } else {
                "disconnected"
            };
            let _ = write!(
                out,
                "{} {}:{}@{} {} {of} 0 0 {} {link}",
                n.name,
                n.ip,
                n.port,
                n.cport,
                flags.join(","),
                self.epoch
            );
            if Some(n.id) == self.leader {
                let _ = write!(out, " 0-{}", SLOTS - 1);
            }
            out.push('\n');
        }
        out
    }
}

/// CLUSTER COUNTKEYSINSLOT (no `count`) and CLUSTER GETKEYSINSLOT: a read of the keyspace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotKeys {
    /// The hash slot.
    pub slot: u16,
    /// GETKEYSINSLOT's most keys to return; None for COUNTKEYSINSLOT.
    pub count: Option<u64>,
}

impl Replicated for SlotKeys {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["cluster"], none(), none()))
    }

    fn is_read(&self) -> bool {
        true
    }

    /// Walks the live keys (in their sorted order, so every replica answers the same).
    fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        let keys = ks
            .live_keys(now)
            .map(|(k, _)| k)
            .filter(|k| key_slot(k) == self.slot);
        match self.count {
            None => Reply::Int(keys.count() as i64),
            Some(n) => Reply::Array(
                keys.take(usize::try_from(n).unwrap_or(usize::MAX))
                    .map(|k| Reply::Bulk(Bytes::clone(k)))
                    .collect(),
            ),
        }
    }
}

#[cfg(test)]
mod tests;
