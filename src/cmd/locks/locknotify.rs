//! `LOCKNOTIFY ON|OFF`: this connection (RESP3 only) is told, with a push, when a lease it
//! took is lost: it expired, or someone else (another connection, a `MUNLOCK` from
//! elsewhere) released it. The session keeps the watch; see `server::session::lost`.

use crate::cmd::connection::ConnCmd;
use crate::cmd::registry::flags::CONN;
use crate::cmd::registry::{Spec, NO_KEYS};
use crate::cmd::Request;
use crate::resp::args::syntax_error;
use crate::resp::{Args, Reply};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[Spec::new("locknotify", 2, CONN, NO_KEYS, parse)
    .args("(ON|OFF)")
    .palisade("Push a message to this connection when a lease it took is lost (RESP3)")];

/// Parses `LOCKNOTIFY ON|OFF`.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    let on = match args.next_keyword()?.as_str() {
        "ON" => true,
        "OFF" => false,
        _ => return Err(syntax_error()),
    };
    args.finish()?;
    Ok(Request::Conn(ConnCmd::LockNotify(on)))
}
