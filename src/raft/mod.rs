//! Raft glue: the openraft type configuration, the peer network and node start-up.

pub mod network;
pub mod node;
pub mod protocol;
pub mod service;

use std::io::Cursor;

use openraft::{BasicNode, TokioRuntime};
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

/// The replies of one batch, in command order.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BatchReply(pub Vec<Reply>);

openraft::declare_raft_types!(
    /// Palisade's openraft type configuration.
    pub TypeConfig:
        D = Batch,
        R = BatchReply,
        NodeId = u64,
        Node = BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = TokioRuntime,
);

/// The Raft handle.
pub type Raft = openraft::Raft<TypeConfig>;
/// Node id.
pub type NodeId = u64;
/// A storage error.
pub type StorageError = openraft::StorageError<NodeId>;
/// A log entry.
pub type Entry = openraft::Entry<TypeConfig>;
/// A log id.
pub type LogId = openraft::LogId<NodeId>;
