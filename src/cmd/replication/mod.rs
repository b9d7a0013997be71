//! Cluster and replication commands (CLUSTER, RAFT.*, ROLE, WAIT).

pub mod cluster;
pub mod raft;
pub mod role;
pub mod wait;
