//! The one place where Raft errors become RESP error replies.

use openraft::error::{ClientWriteError, LinearizableReadError, RaftError};

use crate::raft::{NodeId, TypeConfig};
use crate::resp::Reply;

/// Error reply for a failed `client_write`.
pub fn client_write_error(e: &ClientWriteError<TypeConfig>) -> Reply {
    match e {
        ClientWriteError::ForwardToLeader(f) => not_leader(f.leader_id),
        // This node dropped its copy of the entry on a leader change; it may still have
        // committed through the new leader, so the outcome is unknown, not "failed".
        ClientWriteError::LogEntryDiscarded(_) => {
            Reply::err("TRYAGAIN write outcome unknown: a leader change interrupted it")
        }
        ClientWriteError::ChangeMembershipError(e) => {
            Reply::err(format!("ERR membership change failed: {e}"))
        }
        ClientWriteError::PreconditionFailed(e) => Reply::err(format!("TRYAGAIN {e}")),
    }
}

/// Error reply for a failed ReadIndex round.
pub fn read_error(e: &RaftError<TypeConfig, LinearizableReadError<TypeConfig>>) -> Reply {
    match e {
        RaftError::APIError(LinearizableReadError::ForwardToLeader(f)) => not_leader(f.leader_id),
        RaftError::APIError(LinearizableReadError::QuorumNotEnough(_)) => {
            Reply::err("CLUSTERDOWN no quorum")
        }
        RaftError::Fatal(f) => Reply::err(format!("ERR raft stopped: {f}")),
    }
}

/// This node is not the leader; forwarding arrives with the cluster issue.
pub fn not_leader(leader: Option<NodeId>) -> Reply {
    match leader {
        Some(id) => Reply::err(format!("TRYAGAIN not the leader; node {id} is")),
        None => Reply::err("CLUSTERDOWN no leader"),
    }
}

/// The reply for a write whose deadline passed before its outcome was known.
pub fn write_timeout() -> Reply {
    Reply::err("TIMEOUT write outcome unknown after the write deadline; retrying LOCK with the same owner is safe")
}
