//! Starting the Raft node: configuration, storage, identity, and first-boot bootstrap.
//!
//! On first boot a node with no `--peers` forms a one-node cluster; nodes started with the
//! same `--peers` list form that cluster (each calls `initialize` with the same membership,
//! which openraft accepts). A node started with `--join` waits, uninitialized, until a leader
//! adds it (RAFT.NODE ADD) and it learns the cluster id from the leader's first contact.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use anyhow::{bail, Context};
use openraft::{BasicNode, Config, SnapshotPolicy};
use rocksdb::DB;

use super::auth::PeerAuth;
use super::network::{Faults, PeerContext, PeerNetwork};
use super::{lease, NodeId, Raft, StoredMembership};
use crate::store::log::SyncStats;
use crate::store::{self, schema, SmState};

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
    /// Initial members (empty: this node alone).
    pub peers: BTreeMap<NodeId, String>,
    /// Start uninitialized and wait to be added to an existing cluster.
    pub join: bool,
    /// Test-only: unsynced writes stay in process memory (a kill -9 loses them).
    pub lose_unsynced_writes: bool,
    /// openraft's `broadcast_submitted_on_append` (replicate as soon as an append is
    /// submitted, before the next message is drained). On by default: it measured 5-8 %
    /// more lock cycles at 1, 16 and 64 clients (docs/performance.md).
    pub broadcast_submitted: bool,
    /// What this node proves and demands in the peer handshake.
    pub peer_auth: PeerAuth,
}

/// A started node.
pub struct Node {
    /// The Raft handle.
    pub raft: Raft,
    /// The state machine's shared state (the read path).
    pub state: Arc<RwLock<SmState>>,
    /// The store (shared with Raft).
    pub db: Arc<DB>,
    /// Identity and fault switches shared with the peer transport.
    pub ctx: Arc<PeerContext>,
    /// The log's sync counters (INFO) and its test-only delay switch.
    pub sync: Arc<SyncStats>,
}

/// FNV-1a: a stable hash, so every node derives the same cluster id from the same list.
fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ *b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The cluster id for a first boot.
fn initial_cluster_id(settings: &NodeSettings) -> u64 {
    if settings.peers.is_empty() {
        return rand::random::<u64>() | 1;
    }
    peers_cluster_id(&settings.peers)
}

/// The cluster id of a cluster bootstrapped from `--peers`: a hash of the list, so that every
/// member computes the same one. Anyone who knows the list can compute it too: it keeps
/// clusters apart, it is no credential (the peer handshake's secret is).
pub fn peers_cluster_id(peers: &BTreeMap<NodeId, String>) -> u64 {
    let canonical: Vec<String> = peers
        .iter()
        .map(|(id, addr)| format!("{id}={addr}"))
        .collect();
    fnv1a(canonical.join(",").as_bytes()) | 1
}

/// The Raft timing and snapshot configuration.
fn raft_config(settings: &NodeSettings) -> anyhow::Result<Arc<Config>> {
    let config = Config {
        cluster_name: "palisade".into(),
        heartbeat_interval: 100,
        // No heartbeat to a follower that acknowledged an append sent within the last 100 ms:
        // that answer proved as much (and extended the lease from its send time). The longest
        // gap, 100 + 100 ms plus one 20 ms tick, stays well inside the 500 ms election timeout
        // (openraft's validate checks it); ReadIndex rounds bypass the suppression.
        heartbeat_min_interval: Some(100),
        election_timeout_min: 500,
        election_timeout_max: lease::ELECTION_TIMEOUT_MAX_MS,
        // Elections start once `start` has decided whether this node must wait out a lease
        // first (`raft::lease`).
        enable_elect: false,
        install_snapshot_timeout: 2000,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(settings.snapshot_every),
        // Entries kept behind a snapshot, for followers that are only slightly behind.
        max_in_snapshot_log_to_keep: settings.snapshot_every.min(1000),
        // A restarted leader must win an election again. Restoring leadership from disk
        // would trust a state machine that is persisted without a sync, and a `committed`
        // that is saved without one (openraft's docs name exactly this combination).
        enable_leader_restore: Some(false),
        // A node that was cut off asks whether it could win before it raises its term, so
        // rejoining does not depose a healthy leader.
        enable_pre_vote: Some(true),
        broadcast_submitted_on_append: Some(settings.broadcast_submitted),
        ..Default::default()
    };
    Ok(Arc::new(config.validate().context("raft config")?))
}

/// Lets this node vote and campaign: at once, unless it restarted as one of several voters;
/// then only when one leader lease has passed since it started (`raft::lease`, "Restarts").
async fn hold_after_restart(
    raft: &Raft,
    ctx: &Arc<PeerContext>,
    restarted: bool,
) -> anyhow::Result<()> {
    // From Raft's own state (its metrics may not be filled in yet): the most voters of the
    // committed and the effective membership.
    let voters = raft
        .with_raft_state(|st| {
            let m = &st.membership_state;
            let count = |c: &StoredMembership| c.membership().voter_ids().count();
            count(m.committed()).max(count(m.effective()))
        })
        .await
        .context("raft state")?;
    let until = match ctx.vote_hold.until() {
        Some(until) if restarted && voters > 1 => until,
        _ => {
            ctx.vote_hold.release();
            raft.runtime_config().elect(true);
            return Ok(());
        }
    };
    tracing::info!(
        hold_ms = lease::restart_hold().as_millis() as u64,
        "restarted: no votes and no candidacy until a lease this node may have granted is over"
    );
    let raft = raft.clone();
    tokio::spawn(async move {
        tokio::time::sleep_until(until.into()).await;
        raft.runtime_config().elect(true);
    });
    Ok(())
}

/// Opens storage, starts Raft and bootstraps a new cluster on first boot.
pub async fn start(settings: &NodeSettings) -> anyhow::Result<Node> {
    std::fs::create_dir_all(&settings.dir)
        .with_context(|| format!("creating data directory {}", settings.dir.display()))?;
    let (log, sm) = store::open_with(
        &settings.dir,
        settings.node_id,
        settings.lose_unsynced_writes,
    )
    .with_context(|| format!("opening store in {}", settings.dir.display()))?;
    let db = log.db().clone();
    let sync = log.sync_stats();
    let state = sm.shared();
    let stored = schema::cluster_id(&db)?;
    let ctx = Arc::new(PeerContext {
        node_id: settings.node_id,
        cluster_id: AtomicU64::new(stored.unwrap_or(0)),
        faults: Faults::default(),
        auth: settings.peer_auth.clone(),
        appends: Default::default(),
        // Held from the start; released below unless this is a restart (`raft::lease`).
        vote_hold: lease::VoteHold::for_duration(lease::restart_hold()),
    });
    let network = PeerNetwork { ctx: ctx.clone() };
    let raft = Raft::new(settings.node_id, raft_config(settings)?, network, log, sm)
        .await
        .context("starting raft")?;
    let restarted = raft.is_initialized().await.context("raft state")?;
    hold_after_restart(&raft, &ctx, restarted).await?;
    if restarted {
        if stored.is_none() {
            let id = rand::random::<u64>() | 1;
            schema::put_cluster_id(&db, id)?;
            ctx.cluster_id.store(id, Ordering::Relaxed);
        }
    } else if settings.join {
        tracing::info!(
            node_id = settings.node_id,
            "waiting to be added to a cluster (RAFT.NODE ADD on the leader)"
        );
    } else {
        let members: BTreeMap<NodeId, BasicNode> = if settings.peers.is_empty() {
            BTreeMap::from([(settings.node_id, BasicNode::new(&settings.peer_addr))])
        } else {
            settings
                .peers
                .iter()
                .map(|(id, addr)| (*id, BasicNode::new(addr)))
                .collect()
        };
        if !members.contains_key(&settings.node_id) {
            bail!("--peers does not list node {}; start it with --join to add it to a running cluster", settings.node_id);
        }
        let id = stored.unwrap_or_else(|| initial_cluster_id(settings));
        schema::put_cluster_id(&db, id)?;
        ctx.cluster_id.store(id, Ordering::Relaxed);
        match raft.initialize(members.clone()).await {
            Ok(()) => {
                tracing::info!(node_id = settings.node_id, members = ?members.keys().collect::<Vec<_>>(), cluster_id = id, "bootstrapped a new cluster")
            }
            // Another member may have replicated to us first; that is the same cluster.
            Err(e) => tracing::info!(error = %e, "cluster already initialized by a peer"),
        }
    }
    Ok(Node {
        raft,
        state,
        db,
        ctx,
        sync,
    })
}
