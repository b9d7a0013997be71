//! `COMMAND`, `COMMAND COUNT`, `COMMAND INFO [name ...]`, `COMMAND LIST` and
//! `COMMAND DOCS [name ...]`, answered from the command table (every file's `COMMANDS` rows,
//! in registry order).
//!
//! COMMAND DOCS has Redis 7's shape, a map from command name to a map of `summary`, `since`
//! and `group` (flattened to arrays in RESP2), taken from the same rows as COMMAND INFO.
//! It leaves out what Redis adds (complexity, history, arguments, subcommands); redis-cli,
//! which reads it at start for its help and hints, does without them. Unknown names are
//! left out of the reply, as in Redis.

use bytes::Bytes;

use super::connection::ConnCmd;
use super::registry::table;
use super::registry::{Spec, NO_KEYS};
use super::{lookup, Request};
use crate::resp::{Args, Reply};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new("command", -1, &["loading", "stale"], NO_KEYS, parse).docs(
        "Describe the commands this server knows",
        "2.8.13",
        "server",
    ),
];

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

/// One command's COMMAND DOCS entry: its name and the map of its docs.
fn docs(spec: &Spec) -> (Reply, Reply) {
    let fields = [
        ("summary", spec.summary),
        ("since", spec.since),
        ("group", spec.group),
    ];
    let map = fields
        .iter()
        .map(|(k, v)| (Reply::text(k), Reply::text(v)))
        .collect();
    (Reply::text(spec.name), Reply::Map(map))
}

/// The rows of the named commands (`None` for an unknown name, looked up in any case), or
/// every row when no name is given: what COMMAND INFO and COMMAND DOCS report.
fn rows(names: &[Bytes]) -> Vec<Option<&'static Spec>> {
    if names.is_empty() {
        return table().iter().copied().map(Some).collect();
    }
    names
        .iter()
        .map(|n| lookup(&String::from_utf8_lossy(n).to_lowercase()))
        .collect()
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
        "info" => Reply::Array(
            rows(&args.rest())
                .into_iter()
                .map(|s| s.map_or(Reply::Nil, info))
                .collect(),
        ),
        "docs" => Reply::Map(rows(&args.rest()).into_iter().flatten().map(docs).collect()),
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
