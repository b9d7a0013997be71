//! `SWAPDB index1 index2`: Palisade has one database, so only `SWAPDB 0 0` (a no-op) is
//! accepted; any other index is out of range, with the texts of a Redis started with
//! `databases 1`.

use crate::cmd::connection::ConnCmd;
use crate::cmd::registry::{Spec, NO_KEYS};
use crate::cmd::Request;
use crate::resp::args::parse_i64;
use crate::resp::{Args, Reply};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[Spec::new("swapdb", 3, &["write", "fast"], NO_KEYS, parse)
    .args("index1:integer index2:integer")
    .docs(
        "Swap two databases (Palisade has only database 0)",
        "4.0.0",
        "server",
    )
    .categories(&["keyspace", "dangerous"])];

/// Parses SWAPDB and answers it (it never touches the data).
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    let first = parse_i64(&args.arg()?);
    let second = parse_i64(&args.arg()?);
    let reply = match (first, second) {
        (None, _) => Reply::err("ERR invalid first DB index"),
        (_, None) => Reply::err("ERR invalid second DB index"),
        (Some(0), Some(0)) => Reply::ok(),
        _ => Reply::err("ERR DB index is out of range"),
    };
    match reply {
        Reply::Error(_) => Err(reply),
        ok => Ok(Request::Conn(ConnCmd::Command(ok))),
    }
}
