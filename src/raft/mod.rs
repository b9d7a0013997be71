//! Raft glue: the Raft handle, the peer network and node start-up. The type configuration
//! and the log's entry types sit below both this module and `store` (`crate::raft_types`).
//!
//! openraft is pinned to an exact alpha (`=0.10.0-alpha.37`): see docs/architecture.md for
//! why, and for how to move the pin.

pub mod auth;
pub mod lease;
pub mod network;
pub mod node;
pub mod pipeline;
pub mod protocol;
pub mod service;

pub use crate::raft_types::{
    log_id, Batch, BatchReply, Entry, LogId, Node, NodeId, Snapshot, SnapshotMeta,
    StoredMembership, TypeConfig, Vote,
};

/// The Raft handle.
pub type Raft = openraft::Raft<TypeConfig, crate::store::StateMachine>;
