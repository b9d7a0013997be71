//! `TIME` (this node's wall clock, as two bulk strings: Unix seconds and microseconds) and
//! `LASTSAVE` (the Unix time at which this node started: every acknowledged write is already
//! on disk, and no SAVE ever runs, so the start is the last "save" Redis would report).

use crate::cmd::connection::ConnCmd;
use crate::cmd::registry::{Spec, NO_KEYS};
use crate::cmd::Request;
use crate::resp::{Args, Reply};

const FLAGS: &[&str] = &["loading", "stale", "fast"];

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new("time", 1, FLAGS, NO_KEYS, parse_time).docs(
        "Report this node's clock as Unix seconds and microseconds",
        "2.6.0",
        "server",
    ),
    Spec::new("lastsave", 1, FLAGS, NO_KEYS, parse_lastsave)
        .docs(
            "Report when the data was last saved (every write is saved before its reply)",
            "1.0.0",
            "server",
        )
        .categories(&["admin", "dangerous"]),
];

/// Parses TIME.
pub fn parse_time(_: &mut Args) -> Result<Request, Reply> {
    Ok(Request::Conn(ConnCmd::Time))
}

/// Parses LASTSAVE.
pub fn parse_lastsave(_: &mut Args) -> Result<Request, Reply> {
    Ok(Request::Conn(ConnCmd::LastSave))
}

/// TIME's reply for a time since the Unix epoch.
pub fn reply(since_epoch: std::time::Duration) -> Reply {
    Reply::Array(vec![
        Reply::text(&since_epoch.as_secs().to_string()),
        Reply::text(&since_epoch.subsec_micros().to_string()),
    ])
}
