//! `LOLWUT [VERSION version] [...]`: Redis draws computer art for its versions 5 and 6 and
//! otherwise prints its version; Palisade prints its own version for every request (a
//! verbatim string in RESP3, a bulk string in RESP2, as Redis 7.0 replies).

use crate::cmd::connection::ConnCmd;
use crate::cmd::registry::{Spec, NO_KEYS};
use crate::cmd::Request;
use crate::resp::args::NOT_INTEGER;
use crate::resp::{args::parse_i64, Args, Reply};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new("lolwut", -1, &["readonly", "fast"], NO_KEYS, parse)
        .args("VERSION=version:integer?")
        .docs(
            "Display some computer art and the Redis version",
            "5.0.0",
            "server",
        ),
];

/// The text LOLWUT replies.
pub fn text() -> String {
    format!("Palisade ver. {}\n", env!("CARGO_PKG_VERSION"))
}

/// Parses LOLWUT: a `VERSION` given must be an integer (Redis's only error); other
/// arguments are ignored, as Redis's plain version reply ignores them.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    let rest = args.rest();
    if rest.len() >= 2 && rest[0].eq_ignore_ascii_case(b"version") && parse_i64(&rest[1]).is_none()
    {
        return Err(Reply::err(NOT_INTEGER));
    }
    // A reply known at parse time, answered like COMMAND's (also from scripts).
    Ok(Request::Conn(ConnCmd::Command(Reply::Verbatim(text()))))
}
