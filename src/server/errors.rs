//! The one place where Raft errors become RESP error replies.

use openraft::error::{CheckIsLeaderError, ClientWriteError, RaftError};

use crate::raft::NodeId;
use crate::resp::Reply;

/// Error reply for a failed `client_write`.
pub fn client_write_error(e: &ClientWriteError<NodeId, openraft::BasicNode>) -> Reply {
    match e {
        ClientWriteError::ForwardToLeader(f) => not_leader(f.leader_id),
        ClientWriteError::ChangeMembershipError(e) => {
            Reply::err(format!("ERR membership change failed: {e}"))
        }
    }
}

/// Error reply for a failed ReadIndex round.
pub fn read_error(e: &RaftError<NodeId, CheckIsLeaderError<NodeId, openraft::BasicNode>>) -> Reply {
    match e {
        RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f)) => not_leader(f.leader_id),
        RaftError::APIError(CheckIsLeaderError::QuorumNotEnough(_)) => {
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
