//! `MEMORY USAGE key [SAMPLES count]`, `MEMORY PURGE` and `MEMORY HELP`. USAGE reads the key
//! through the normal read path and estimates what Redis 7 would use for it (`object.rs`);
//! every element is counted, so SAMPLES changes nothing. DOCTOR, STATS and MALLOC-STATS are
//! not offered (INFO memory has the node's figures).

use crate::cmd::config::{help, sub_arity, subcommand, unknown_subcommand};
use crate::cmd::connection::ConnCmd;
use crate::cmd::object::{KeyQuery, Question};
use crate::cmd::registry::{Own, Spec, NO_KEYS};
use crate::cmd::Request;
use crate::resp::args::syntax_error;
use crate::resp::{Args, Reply};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[Spec::new("memory", -2, &[], NO_KEYS, parse)
    .docs(
        "Estimate the memory of a key's value as Redis would use it",
        "4.0.0",
        "server",
    )
    .subcommands(SUBCOMMANDS)
    .own(&[Own::NotInMulti])];

/// MEMORY's subcommands (`memory|name`): Redis's facts (`scripts/command-args.py
/// --subcommands memory`).
const SUBCOMMANDS: &[Spec] = &[
    Spec::new("help", 2, &["loading", "stale"], NO_KEYS, parse).docs(
        "List the subcommands and what they take",
        "4.0.0",
        "server",
    ),
    Spec::new("purge", 2, &[], NO_KEYS, parse).docs(
        "Ask the allocator to give memory back (nothing to do here)",
        "4.0.0",
        "server",
    ),
    Spec::new("usage", -3, &["readonly"], (2, 2, 1), parse)
        .docs(
            "Estimate the memory a key and its value would take in Redis",
            "4.0.0",
            "server",
        )
        .args("key:key SAMPLES=count:integer?")
        .key_specs("RO@i2/r0,1,0"),
];

const HELP: &[&str] = &[
    "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "PURGE",
    "    Attempt to purge dirty pages for reclamation by the allocator.",
    "USAGE <key> [SAMPLES <count>]",
    "    Return memory in bytes used by <key> and its value. Nested values are",
    "    sampled up to <count> times (default: 5, 0 means sample all).",
    "HELP",
    "    Prints this help.",
];

/// Parses MEMORY.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    let (raw, sub) = subcommand(args)?;
    let n = args.remaining();
    match (sub.as_str(), n) {
        ("usage", 1..) => {
            let key = args.arg()?;
            while args.remaining() > 0 {
                let opt = args.next_keyword()?;
                if opt != "SAMPLES" || args.remaining() == 0 {
                    return Err(syntax_error());
                }
                if args.next_i64()? < 0 {
                    return Err(syntax_error());
                }
            }
            let question = Question::Memory;
            Ok(Request::Conn(ConnCmd::KeyInfo(KeyQuery { key, question })))
        }
        ("purge", 0) => Ok(Request::Conn(ConnCmd::Command(Reply::ok()))),
        ("help", 0) => Ok(Request::Conn(ConnCmd::Command(help(HELP)))),
        ("usage" | "purge" | "help", _) => Err(sub_arity("memory", &sub)),
        _ => Err(unknown_subcommand(&raw, "MEMORY")),
    }
}
