//! `SAVE`, `BGSAVE [SCHEDULE]`, `BGREWRITEAOF`: a Raft snapshot of this node (every write is
//! already on disk before its reply; a snapshot compacts the log). `LASTSAVE` (in
//! `time.rs`) then reports the time of the last snapshot this node completed.
//!
//! `SAVE` replies once the snapshot covers every entry applied when it was asked for;
//! `BGSAVE` and `BGREWRITEAOF` reply at once with Redis's texts and the snapshot is built in
//! the background (src/server/save.rs).

use crate::cmd::connection::ConnCmd;
use crate::cmd::registry::{Spec, NO_KEYS};
use crate::cmd::Request;
use crate::resp::{Args, Reply};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new(
        "save",
        1,
        &["admin", "noscript", "no_async_loading", "no_multi"],
        NO_KEYS,
        parse_save,
    )
    .docs(
        "Take a Raft snapshot of this node and wait for it",
        "1.0.0",
        "server",
    ),
    Spec::new(
        "bgsave",
        -1,
        &["admin", "noscript", "no_async_loading"],
        NO_KEYS,
        parse_bgsave,
    )
    .args("SCHEDULE?")
    .docs(
        "Take a Raft snapshot of this node in the background",
        "1.0.0",
        "server",
    ),
    Spec::new(
        "bgrewriteaof",
        1,
        &["admin", "noscript", "no_async_loading"],
        NO_KEYS,
        parse_bgrewriteaof,
    )
    .docs(
        "Compact this node's log with a Raft snapshot in the background",
        "1.0.0",
        "server",
    ),
];

/// What was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaveCmd {
    /// SAVE: wait for the snapshot.
    Save,
    /// BGSAVE, with SCHEDULE or not.
    BgSave {
        /// SCHEDULE: a save in progress is not an error.
        schedule: bool,
    },
    /// BGREWRITEAOF.
    BgRewriteAof,
}

/// Parses SAVE.
pub fn parse_save(_: &mut Args) -> Result<Request, Reply> {
    Ok(Request::Conn(ConnCmd::Save(SaveCmd::Save)))
}

/// Parses BGSAVE [SCHEDULE].
pub fn parse_bgsave(args: &mut Args) -> Result<Request, Reply> {
    let schedule = match args.rest().as_slice() {
        [] => false,
        [s] if s.eq_ignore_ascii_case(b"schedule") => true,
        _ => return Err(crate::resp::args::syntax_error()),
    };
    Ok(Request::Conn(ConnCmd::Save(SaveCmd::BgSave { schedule })))
}

/// Parses BGREWRITEAOF.
pub fn parse_bgrewriteaof(_: &mut Args) -> Result<Request, Reply> {
    Ok(Request::Conn(ConnCmd::Save(SaveCmd::BgRewriteAof)))
}
