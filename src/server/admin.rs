//! RAFT.* administration: cluster status, membership changes (run on the leader; a follower
//! forwards them), and the test-only fault switch.

use openraft::async_runtime::watch::WatchReceiver;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::time::Duration;

use bytes::Bytes;
use openraft::ChangeMembers;

use crate::raft::Node as BasicNode;
use tokio::time::Instant;

use super::forward::{ForwardError, Leader};
use super::Shared;
use crate::cmd::raft::AdminCmd;
use crate::resp::Reply;

/// How long a membership change may take (a new learner must catch up first).
pub const MEMBERSHIP_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs an admin command; `argv` is kept for forwarding to the leader.
pub async fn execute(shared: &Shared, cmd: AdminCmd, argv: Vec<Bytes>) -> Reply {
    if cmd.needs_leader() && shared.link.leader() != Leader::Me {
        return match shared
            .link
            .admin(argv, Instant::now() + MEMBERSHIP_TIMEOUT)
            .await
        {
            Ok(reply) => reply,
            Err(ForwardError::Failed(reply)) => reply,
            Err(ForwardError::BecameLeader) => Box::pin(execute_local(shared, cmd)).await,
        };
    }
    execute_local(shared, cmd).await
}

/// Runs an admin command on this node.
pub async fn execute_local(shared: &Shared, cmd: AdminCmd) -> Reply {
    match cmd {
        AdminCmd::Info => Reply::Verbatim(info(shared)),
        AdminCmd::Digest => with_applied_state(shared, |ks, applied| {
            crate::cmd::raft::digest_reply(applied, &ks.digest())
        }),
        AdminCmd::NodeAdd { id, addr } => node_add(shared, id, addr).await,
        AdminCmd::NodeRemove { id } => {
            match shared
                .raft
                .change_membership(ChangeMembers::RemoveVoters(BTreeSet::from([id])), false)
                .await
            {
                Ok(_) => Reply::ok(),
                Err(e) => Reply::err(format!("ERR removing node {id}: {e}")),
            }
        }
        AdminCmd::ClusterInit => {
            let members = BTreeMap::from([(
                shared.config.node_id,
                BasicNode::new(shared.config.peer_addr()),
            )]);
            match shared.raft.initialize(members).await {
                Ok(()) => Reply::ok(),
                Err(e) => Reply::err(format!("ERR {e}")),
            }
        }
        AdminCmd::Fault(ids) => {
            if !shared.config.fault_injection {
                return Reply::err("ERR RAFT.FAULT is disabled; start the node with --enable-fault-injection (tests only)");
            }
            if ids.is_empty() {
                // HEAL clears every fault, the delays included.
                shared.link.faults().set_delay_ms(0);
                shared
                    .sync
                    .test_delay_ms
                    .store(0, std::sync::atomic::Ordering::Relaxed);
            }
            shared.link.faults().set(ids.into_iter().collect());
            Reply::ok()
        }
        AdminCmd::FaultDelay(ms) => {
            if !shared.config.fault_injection {
                return Reply::err("ERR RAFT.FAULT is disabled; start the node with --enable-fault-injection (tests only)");
            }
            shared.link.faults().set_delay_ms(ms);
            Reply::ok()
        }
        AdminCmd::FaultSyncDelay(ms) => {
            if !shared.config.fault_injection {
                return Reply::err("ERR RAFT.FAULT is disabled; start the node with --enable-fault-injection (tests only)");
            }
            shared
                .sync
                .test_delay_ms
                .store(ms, std::sync::atomic::Ordering::Relaxed);
            Reply::ok()
        }
    }
}

/// Answers `f` from this node's applied state (its keyspace and the index of the last
/// applied entry), both read under the state lock so that they belong together.
pub fn with_applied_state(
    shared: &Shared,
    f: impl FnOnce(&crate::state::Keyspace, u64) -> Reply,
) -> Reply {
    match shared.state.read() {
        Ok(st) => f(&st.ks, st.last_applied.map_or(0, |l| l.index)),
        Err(_) => Reply::err("ERR state machine lock poisoned"),
    }
}

async fn node_add(shared: &Shared, id: u64, addr: String) -> Reply {
    // Blocking: returns once the learner has caught up with the leader's log.
    if let Err(e) = shared
        .raft
        .add_learner(id, BasicNode::new(&addr), true)
        .await
    {
        return Reply::err(format!("ERR adding node {id} as a learner: {e}"));
    }
    match shared
        .raft
        .change_membership(ChangeMembers::AddVoterIds(BTreeSet::from([id])), false)
        .await
    {
        Ok(_) => Reply::ok(),
        Err(e) => Reply::err(format!("ERR promoting node {id} to voter: {e}")),
    }
}

/// RAFT.INFO: `field:value` lines, plus one `peer_N:` line per replication target on the leader.
fn info(shared: &Shared) -> String {
    let m = shared.raft.metrics().borrow_watched().clone();
    let membership = m.membership_config.membership();
    let voters: Vec<String> = membership.voter_ids().map(|v| v.to_string()).collect();
    let learners: Vec<String> = membership.learner_ids().map(|v| v.to_string()).collect();
    let last_log = m.last_log_index.unwrap_or(0);
    let mut out = String::new();
    let _ = write!(out, "node_id:{}\r\n", shared.config.node_id);
    let _ = write!(out, "cluster_id:{:016x}\r\n", shared.link.cluster_id());
    let (ip, port) = shared.config.announce(shared.addr);
    let _ = write!(out, "{}{ip}:{port}\r\n", super::cluster::ANNOUNCE_FIELD);
    let _ = write!(out, "role:{}\r\n", super::role_name(m.state));
    let _ = write!(
        out,
        "leader_id:{}\r\n",
        m.current_leader.map(|l| l.to_string()).unwrap_or_default()
    );
    let _ = write!(out, "term:{}\r\n", m.current_term);
    let _ = write!(out, "last_log_index:{last_log}\r\n");
    let _ = write!(out, "applied_index:{}\r\n", shared.applied_index(&m));
    let _ = write!(
        out,
        "snapshot_index:{}\r\n",
        m.snapshot.map(|l| l.index).unwrap_or(0)
    );
    let _ = write!(
        out,
        "purged_index:{}\r\n",
        m.purged.map(|l| l.index).unwrap_or(0)
    );
    let _ = write!(out, "voters:{}\r\n", voters.join(","));
    let _ = write!(out, "learners:{}\r\n", learners.join(","));
    if let Some(ms) = m
        .last_quorum_acked
        .map(|t| openraft::Instant::elapsed(&*t).as_millis())
    {
        let _ = write!(out, "millis_since_quorum_ack:{ms}\r\n");
    }
    if let Some(repl) = &m.replication {
        for (id, matched) in repl.iter() {
            let matched = matched.map(|l| l.index).unwrap_or(0);
            let _ = write!(
                out,
                "peer_{id}:matched={matched},lag={}\r\n",
                last_log.saturating_sub(matched)
            );
        }
    }
    let faults = shared.link.faults().list();
    if !faults.is_empty() {
        let _ = write!(
            out,
            "fault_dropped:{}\r\n",
            faults
                .iter()
                .map(|f| f.to_string())
                .collect::<Vec<_>>()
                .join(",")
        );
    }
    out
}
