//! `ROLE`: every Palisade node answers as a Redis master with no replicas
//! (`master`, offset, `[]`), as INFO's `role:master` does: every node accepts writes, and a
//! follower forwards them to the Raft leader. The offset is the node's applied log index,
//! which only grows, as a master's replication offset does.

use crate::cmd::connection::ConnCmd;
use crate::cmd::registry::{Spec, NO_KEYS};
use crate::cmd::Request;
use crate::resp::{Args, Reply};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[Spec::new(
    "role",
    1,
    &["noscript", "loading", "stale", "fast"],
    NO_KEYS,
    parse,
)
.docs(
    "Return the role of the instance in the context of replication",
    "2.8.12",
    "server",
)
.categories(&["admin", "dangerous"])];

/// Parses ROLE.
pub fn parse(_: &mut Args) -> Result<Request, Reply> {
    Ok(Request::Conn(ConnCmd::Role))
}

/// ROLE's reply for a node that has applied the log up to `applied_index`.
pub fn reply(applied_index: u64) -> Reply {
    Reply::Array(vec![
        Reply::bulk("master"),
        Reply::Int(i64::try_from(applied_index).unwrap_or(i64::MAX)),
        Reply::Array(Vec::new()),
    ])
}
