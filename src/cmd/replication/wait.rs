//! `WAIT numreplicas timeout`: how many other voters are known to hold the Raft log up to
//! the commit index (every acknowledged write is committed, so at least a quorum already
//! does), waiting up to `timeout` ms for `numreplicas` of them. The session runs it (see
//! `server::replicas`): on the leader from openraft's replication progress, on a follower
//! by asking the leader. A timeout of 0 (forever in Redis), or one above the node's
//! `write-timeout-ms`, waits that long at most.

use crate::cmd::connection::ConnCmd;
use crate::cmd::registry::{Own, Spec, NO_KEYS};
use crate::cmd::Request;
use crate::resp::args::{parse_i64, NOT_INTEGER};
use crate::resp::{Args, Reply};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[Spec::new("wait", 3, &["noscript"], NO_KEYS, parse)
        .args("numreplicas:integer timeout:integer").docs(
    "Wait for the synchronous replication of all the write commands sent in the context of the current connection",
    "3.0.0",
    "generic",
)
.categories(&["connection"])
.own(&[Own::ForwardsArgv])];

/// A parsed WAIT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wait {
    /// How many other voters to wait for.
    pub numreplicas: i64,
    /// How long to wait, in ms (0: as long as allowed).
    pub timeout_ms: u64,
}

/// Parses WAIT with Redis's error texts, the replica count first.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    let numreplicas = parse_i64(&args.arg()?).ok_or_else(|| Reply::err(NOT_INTEGER))?;
    let timeout = parse_i64(&args.arg()?)
        .ok_or_else(|| Reply::err("ERR timeout is not an integer or out of range"))?;
    if timeout < 0 {
        return Err(Reply::err("ERR timeout is negative"));
    }
    Ok(Request::Conn(ConnCmd::Wait(Wait {
        numreplicas,
        timeout_ms: timeout as u64,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_line(line: &str) -> Result<Request, Reply> {
        parse(&mut Args::new(crate::cmd::test_argv(line)))
    }

    #[test]
    fn errors_match_redis() {
        assert_eq!(parse_line("wait x 1").err(), Some(Reply::err(NOT_INTEGER)));
        assert_eq!(
            parse_line("wait 1 1.5").err(),
            Some(Reply::err("ERR timeout is not an integer or out of range"))
        );
        assert_eq!(
            parse_line("wait -1 -1").err(),
            Some(Reply::err("ERR timeout is negative"))
        );
        assert!(matches!(
            parse_line("wait 2 0"),
            Ok(Request::Conn(ConnCmd::Wait(Wait {
                numreplicas: 2,
                timeout_ms: 0
            })))
        ));
    }
}
