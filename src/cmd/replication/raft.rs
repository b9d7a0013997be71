//! Cluster administration under the `RAFT.` prefix (never a Redis command name):
//! `RAFT.INFO`, `RAFT.DIGEST`, `RAFT.NODE ADD id host:peerport`, `RAFT.NODE REMOVE id`,
//! `RAFT.CLUSTER INIT`, and the test-only `RAFT.FAULT DROP id [id ...]` / `RAFT.FAULT HEAL`,
//! `RAFT.FAULT DELAY ms`, `RAFT.FAULT SYNCDELAY ms`.

use crate::cmd::registry::{Own, Spec, NO_KEYS};
use crate::cmd::Request;
use crate::resp::args::syntax_error;
use crate::resp::{Args, Reply};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new(
        "raft.info",
        1,
        &["admin", "loading", "stale"],
        NO_KEYS,
        parse,
    )
    .palisade("Show this node's view of the Raft cluster"),
    Spec::new(
        "raft.digest",
        1,
        &["admin", "loading", "stale"],
        NO_KEYS,
        parse,
    )
    .palisade("Show this node's digest of the replicated state and its applied index"),
    Spec::new("raft.node", -3, &["admin"], NO_KEYS, parse)
        .args("(ADD={id:integer address}|REMOVE=id:integer)")
        .palisade("Add a node to the cluster or remove one")
        .own(&[Own::ForwardsArgv]),
    Spec::new("raft.cluster", -2, &["admin"], NO_KEYS, parse)
        .args("INIT")
        .palisade("Initialize this node as a new one-node cluster")
        .own(&[Own::ForwardsArgv]),
    Spec::new("raft.fault", -2, &["admin"], NO_KEYS, parse)
        .args("(DROP=id:integer*|DELAY=milliseconds:integer|SYNCDELAY=milliseconds:integer|HEAL)")
        .palisade("Inject network faults between nodes (for tests)")
        .own(&[Own::ForwardsArgv]),
];

/// A parsed admin command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminCmd {
    /// Cluster status of this node.
    Info,
    /// This node's digest of the replicated state, with the applied index it was taken at
    /// (answered locally, never forwarded: it is for comparing nodes).
    Digest,
    /// Add a node: as a learner, promoted to voter once it has caught up.
    NodeAdd {
        /// The new node's id.
        id: u64,
        /// Its peer address.
        addr: String,
    },
    /// Remove a voter.
    NodeRemove {
        /// The node's id.
        id: u64,
    },
    /// Initialize this (uninitialized) node as a one-node cluster.
    ClusterInit,
    /// Cut this node's links to the listed peers (empty heals).
    Fault(Vec<u64>),
    /// Delay this node's outbound peer RPCs by this many ms (0 heals).
    FaultDelay(u64),
    /// Delay each of this node's Raft log syncs by this many ms (0 heals).
    FaultSyncDelay(u64),
}

impl AdminCmd {
    /// True if the command must run on the leader.
    pub fn needs_leader(&self) -> bool {
        matches!(self, AdminCmd::NodeAdd { .. } | AdminCmd::NodeRemove { .. })
    }
}

fn node_id(args: &mut Args) -> Result<u64, Reply> {
    match args.next_i64()? {
        n if n > 0 => Ok(n as u64),
        _ => Err(Reply::err("ERR node id must be a positive integer")),
    }
}

/// Parses any `RAFT.*` command.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    let cmd = match args.name() {
        "raft.info" => AdminCmd::Info,
        "raft.digest" => AdminCmd::Digest,
        "raft.node" => match args.next_keyword()?.as_str() {
            "ADD" => {
                let id = node_id(args)?;
                let addr = String::from_utf8_lossy(&args.arg()?).into_owned();
                if !addr.contains(':') {
                    return Err(Reply::err("ERR the address must be host:peerport"));
                }
                AdminCmd::NodeAdd { id, addr }
            }
            "REMOVE" => AdminCmd::NodeRemove { id: node_id(args)? },
            _ => return Err(syntax_error()),
        },
        "raft.cluster" => match args.next_keyword()?.as_str() {
            "INIT" => AdminCmd::ClusterInit,
            _ => return Err(syntax_error()),
        },
        _ => match args.next_keyword()?.as_str() {
            "DROP" => {
                let mut ids = Vec::new();
                while args.remaining() > 0 {
                    ids.push(node_id(args)?);
                }
                if ids.is_empty() {
                    return Err(syntax_error());
                }
                AdminCmd::Fault(ids)
            }
            "HEAL" => AdminCmd::Fault(Vec::new()),
            word @ ("DELAY" | "SYNCDELAY") => match args.next_i64()? {
                ms if ms >= 0 && word == "DELAY" => AdminCmd::FaultDelay(ms as u64),
                ms if ms >= 0 => AdminCmd::FaultSyncDelay(ms as u64),
                _ => return Err(Reply::err("ERR delay must be a non-negative integer")),
            },
            _ => return Err(syntax_error()),
        },
    };
    args.finish()?;
    Ok(Request::Admin(cmd))
}

/// RAFT.DIGEST's reply: a map (a flat array in RESP2) of `applied_index` (the log index of
/// the last entry the state reflects) and `digest` (40 hex digits, see `state::digest`).
/// Two nodes that show the same applied index must show the same digest.
pub fn digest_reply(applied_index: u64, digest: &crate::state::digest::StateDigest) -> Reply {
    Reply::Map(vec![
        (
            Reply::bulk("applied_index"),
            Reply::Int(applied_index as i64),
        ),
        (Reply::bulk("digest"), Reply::bulk(hex::encode(digest))),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_line(line: &str) -> Result<Request, Reply> {
        crate::cmd::parse(crate::cmd::test_argv(line))
    }

    #[test]
    fn raft_digest_parses_and_is_answered_locally() {
        let Ok(Request::Admin(cmd)) = parse_line("RAFT.DIGEST") else {
            panic!("not an admin command")
        };
        assert_eq!(cmd, AdminCmd::Digest);
        assert!(!cmd.needs_leader(), "RAFT.DIGEST must not be forwarded");
        assert!(parse_line("RAFT.DIGEST x").is_err());
        let reply = digest_reply(7, &[0xab; 20]);
        assert_eq!(
            reply,
            Reply::Map(vec![
                (Reply::bulk("applied_index"), Reply::Int(7)),
                (Reply::bulk("digest"), Reply::bulk("ab".repeat(20))),
            ])
        );
    }
}
