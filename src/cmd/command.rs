//! `COMMAND`, `COMMAND COUNT`, `COMMAND INFO [name ...]`, `COMMAND LIST`, answered from the
//! command table (every file's `COMMANDS` rows, in registry order). `COMMAND DOCS` returns an
//! error, which redis-cli handles by falling back.

use super::connection::ConnCmd;
use super::registry::table;
use super::registry::{Spec, NO_KEYS};
use super::{lookup, Request};
use crate::resp::{Args, Reply};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[Spec::new(
    "command",
    -1,
    &["loading", "stale"],
    NO_KEYS,
    parse,
)];

fn info(spec: &Spec) -> Reply {
    Reply::Array(vec![
        Reply::text(spec.name),
        Reply::Int(spec.arity as i64),
        Reply::Set(
            spec.flags
                .iter()
                .map(|f| Reply::Simple((*f).into()))
                .collect(),
        ),
        Reply::Int(spec.first_key as i64),
        Reply::Int(spec.last_key as i64),
        Reply::Int(spec.step as i64),
        Reply::Set(vec![]),
        Reply::Array(vec![]),
        Reply::Array(vec![]),
        Reply::Array(vec![]),
    ])
}

/// Parses COMMAND and computes its reply (it depends only on the static table).
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    if args.remaining() == 0 {
        return Ok(Request::Conn(ConnCmd::Command(Reply::Array(
            table().iter().copied().map(info).collect(),
        ))));
    }
    let raw = args.arg()?;
    let sub = String::from_utf8_lossy(&raw).to_lowercase();
    let reply = match sub.as_str() {
        "count" if args.remaining() == 0 => Reply::Int(table().len() as i64),
        "list" => Reply::Array(table().iter().map(|s| Reply::text(s.name)).collect()),
        "info" => {
            let names = args.rest();
            if names.is_empty() {
                Reply::Array(table().iter().copied().map(info).collect())
            } else {
                Reply::Array(
                    names
                        .iter()
                        .map(|n| {
                            lookup(&String::from_utf8_lossy(n).to_lowercase())
                                .map_or(Reply::Nil, info)
                        })
                        .collect(),
                )
            }
        }
        "docs" => Reply::err("ERR COMMAND DOCS is not supported by Palisade"),
        "count" => {
            return Err(Reply::err(
                "ERR wrong number of arguments for 'command|count' command",
            ))
        }
        _ => {
            return Err(Reply::err(format!(
                "ERR unknown subcommand '{}'. Try COMMAND HELP.",
                String::from_utf8_lossy(&raw)
            )))
        }
    };
    Ok(Request::Conn(ConnCmd::Command(reply)))
}
