//! Starting the Raft node: configuration, storage, and first-boot initialization.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use anyhow::Context;
use openraft::{BasicNode, Config, SnapshotPolicy};

use super::network::PeerNetwork;
use super::{NodeId, Raft};
use crate::store::{self, SmState};

/// Settings the node needs from the server configuration.
#[derive(Debug, Clone)]
pub struct NodeSettings {
    /// This node's id.
    pub node_id: NodeId,
    /// Address peers use to reach this node.
    pub peer_addr: String,
    /// Data directory.
    pub dir: std::path::PathBuf,
    /// Take a snapshot after this many applied entries.
    pub snapshot_every: u64,
}

/// A started node: the Raft handle and the shared state-machine view.
pub struct Node {
    /// The Raft handle.
    pub raft: Raft,
    /// The state machine's shared state (the read path).
    pub state: Arc<RwLock<SmState>>,
}

/// Opens storage, starts Raft and, on first boot of a one-node cluster, initializes it.
pub async fn start(settings: &NodeSettings) -> anyhow::Result<Node> {
    std::fs::create_dir_all(&settings.dir)
        .with_context(|| format!("creating data directory {}", settings.dir.display()))?;
    let (log, sm) = store::open(&settings.dir, settings.node_id)
        .with_context(|| format!("opening store in {}", settings.dir.display()))?;
    let state = sm.shared();
    let config = Config {
        cluster_name: "palisade".into(),
        heartbeat_interval: 100,
        election_timeout_min: 300,
        election_timeout_max: 600,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(settings.snapshot_every),
        max_in_snapshot_log_to_keep: 1000,
        ..Default::default()
    };
    let config = Arc::new(config.validate().context("raft config")?);
    let raft = Raft::new(settings.node_id, config, PeerNetwork, log, sm)
        .await
        .context("starting raft")?;
    if !raft.is_initialized().await.context("raft state")? {
        let members = BTreeMap::from([(settings.node_id, BasicNode::new(&settings.peer_addr))]);
        raft.initialize(members)
            .await
            .context("initializing one-node cluster")?;
        tracing::info!(
            node_id = settings.node_id,
            "initialized a new one-node cluster"
        );
    }
    Ok(Node { raft, state })
}
