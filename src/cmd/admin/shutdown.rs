//! `SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]`: a clean stop of this node, in the order
//! of every stop (docs/architecture.md, "Shutdown"). There is nothing to save: every
//! acknowledged write is already on disk, so SAVE and NOSAVE stop the same way, and no
//! shutdown ever waits (NOW and FORCE change nothing). The client gets no reply, as in Redis:
//! its connection closes.

use crate::cmd::connection::ConnCmd;
use crate::cmd::registry::{Spec, NO_KEYS};
use crate::cmd::Request;
use crate::resp::args::syntax_error;
use crate::resp::{Args, Reply};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[Spec::new(
    "shutdown",
    -1,
    &[
        "admin",
        "noscript",
        "loading",
        "stale",
        "no_multi",
        "allow_busy",
    ],
    NO_KEYS,
    parse,
)
.args("nosave_save@(NOSAVE|SAVE)? NOW? FORCE? ABORT?")
.docs(
    "Stop this node cleanly (every write is already on disk)",
    "1.0.0",
    "server",
)];

/// Parses SHUTDOWN with Redis 7's rules.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    let (mut save, mut nosave, mut other, mut abort) = (false, false, false, false);
    while args.remaining() > 0 {
        match args.next_keyword()?.as_str() {
            "SAVE" => save = true,
            "NOSAVE" => nosave = true,
            "NOW" | "FORCE" => other = true,
            "ABORT" => abort = true,
            _ => return Err(syntax_error()),
        }
    }
    if (save && nosave) || (abort && (save || nosave || other)) {
        return Err(syntax_error());
    }
    if abort {
        return Err(Reply::err("ERR No shutdown in progress."));
    }
    Ok(Request::Conn(ConnCmd::Shutdown))
}
