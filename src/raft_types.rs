//! The replicated log's vocabulary: the entry payload ([`Batch`]), its reply, and openraft's
//! type configuration with the aliases built on it. Both `raft` (the consensus glue) and
//! `store` (the log and the state machine) use them; `raft` uses `store`, and `store` uses
//! this module, not `raft`, so the two do not import each other (docs/architecture.md).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::cmd::Command;
use crate::resp::Reply;

/// One log entry's payload: commands that arrived together, from any connections, and the
/// proposing leader's monotonic timestamp (ms). Apply never reads a clock; it uses `ts`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Batch {
    /// Leader monotonic time in ms at proposal.
    pub ts: u64,
    /// Random id of the proposing leader process (its monotonic clock's origin).
    pub boot: u64,
    /// The commands, applied in order.
    pub cmds: Vec<Command>,
}

/// openraft logs entries with `Display`; a batch shows its size and stamp, not its contents.
impl fmt::Display for Batch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "batch(cmds={}, ts={})", self.cmds.len(), self.ts)
    }
}

/// The replies of one batch, in command order.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BatchReply(pub Vec<Reply>);

openraft::declare_raft_types!(
    /// Palisade's openraft type configuration. Everything not named here is openraft's
    /// default: `u64` terms, the "advanced" leader id (term, node id), `openraft::Entry`,
    /// tokio.
    pub TypeConfig:
        D = Batch,
        R = BatchReply,
        NodeId = u64,
        Node = openraft::BasicNode,
);

/// Node id.
pub type NodeId = u64;
/// A node's address record in the membership.
pub type Node = openraft::BasicNode;
/// A log entry.
pub type Entry = openraft::alias::EntryOf<TypeConfig>;
/// A log id.
pub type LogId = openraft::alias::LogIdOf<TypeConfig>;
/// A vote.
pub type Vote = openraft::alias::VoteOf<TypeConfig>;
/// The membership as of a log id.
pub type StoredMembership = openraft::alias::StoredMembershipOf<TypeConfig>;
/// A snapshot's metadata.
pub type SnapshotMeta = openraft::alias::SnapshotMetaOf<TypeConfig>;

/// A log id from a term, the leader's node id and an index.
pub fn log_id(term: u64, node_id: NodeId, index: u64) -> LogId {
    openraft::LogId::new(
        openraft::impls::leader_id_adv::LeaderId { term, node_id },
        index,
    )
}
/// A snapshot: its metadata and the encoded image (see `store::snapshot`).
pub type Snapshot = openraft::alias::SnapshotOf<TypeConfig, Vec<u8>>;
