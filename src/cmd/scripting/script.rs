//! `SCRIPT LOAD script`, `SCRIPT EXISTS sha1 [sha1 ...]`, `SCRIPT FLUSH [ASYNC|SYNC]`,
//! `SCRIPT KILL`, and Palisade's `SCRIPT BUDGET [instructions]`.
//!
//! The cache is replicated state: LOAD and FLUSH go through the log, so a script loaded
//! before a failover is still there after it. `SCRIPT BUDGET n` sets the instruction budget
//! of every script cluster-wide (0 restores the default); without an argument it returns
//! the current budget. The budget is replicated so that every replica aborts a runaway
//! script at the same instruction.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::registry::{none, Replicated, Spec, Touches, NO_KEYS, PALISADE_SINCE};
use crate::cmd::{Command, Ctx, Request};
use crate::resp::args::NOT_INTEGER;
use crate::resp::{Args, Reply};
use crate::state::scripts::sha1_hex;
use crate::state::Keyspace;

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[Spec::new("script", -2, &["noscript"], NO_KEYS, parse)
    .docs(
        "Manage the script cache (LOAD, EXISTS, FLUSH, KILL, BUDGET)",
        "2.6.0",
        "scripting",
    )
    .subcommands(SUBCOMMANDS)];

/// SCRIPT's subcommands (`script|name`): Redis's facts (`scripts/command-args.py
/// --subcommands script`) and Palisade's own.
const SUBCOMMANDS: &[Spec] = &[
    Spec::new("budget", -2, &["noscript"], NO_KEYS, parse)
        .docs(
            "Read or set the Lua instruction budget of every script run",
            PALISADE_SINCE,
            "scripting",
        )
        .args("instructions:integer?"),
    Spec::new("exists", -3, &["noscript"], NO_KEYS, parse)
        .docs(
            "Tell which of the given SHA1 digests are cached scripts",
            "2.6.0",
            "scripting",
        )
        .args("sha1*"),
    Spec::new("flush", -2, &["noscript"], NO_KEYS, parse)
        .docs("Empty the script cache", "2.6.0", "scripting")
        .args("(ASYNC|SYNC)?"),
    Spec::new("help", 2, &["loading", "stale"], NO_KEYS, parse).docs(
        "List the subcommands and what they take",
        "5.0.0",
        "scripting",
    ),
    Spec::new("kill", 2, &["noscript", "allow_busy"], NO_KEYS, parse).docs(
        "Stop the running script, if it has not written",
        "2.6.0",
        "scripting",
    ),
    Spec::new("load", 3, &["noscript", "stale"], NO_KEYS, parse)
        .docs(
            "Cache a script and return its SHA1 digest",
            "2.6.0",
            "scripting",
        )
        .args("script"),
];

/// A SCRIPT subcommand that goes through the log or the read path.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Script {
    /// SCRIPT LOAD.
    Load(Bytes),
    /// SCRIPT EXISTS.
    Exists(Vec<String>),
    /// SCRIPT FLUSH.
    Flush,
    /// SCRIPT BUDGET (no argument: read it).
    Budget(Option<u64>),
}

/// Parses SCRIPT.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    let raw = args.arg()?;
    let sub = String::from_utf8_lossy(&raw).to_lowercase();
    let arity = |name: &str| {
        Reply::err(format!(
            "ERR wrong number of arguments for 'script|{name}' command"
        ))
    };
    match sub.as_str() {
        "load" if args.remaining() == 1 => {
            Ok(Request::Data(Command::Script(Script::Load(args.arg()?))))
        }
        "load" => Err(arity("load")),
        "exists" if args.remaining() > 0 => {
            let shas = args
                .rest()
                .iter()
                .map(|s| String::from_utf8_lossy(s).to_ascii_lowercase())
                .collect();
            Ok(Request::Data(Command::Script(Script::Exists(shas))))
        }
        "exists" => Err(arity("exists")),
        "flush" => {
            if args.remaining() > 1 {
                return Err(arity("flush"));
            }
            if args.remaining() == 1 {
                let mode = args.next_keyword()?;
                if mode != "ASYNC" && mode != "SYNC" {
                    return Err(Reply::err(
                        "ERR SCRIPT FLUSH only support SYNC|ASYNC option",
                    ));
                }
            }
            Ok(Request::Data(Command::Script(Script::Flush)))
        }
        "kill" if args.remaining() == 0 => {
            Err(Reply::err("NOTBUSY No scripts in execution right now."))
        }
        "kill" => Err(arity("kill")),
        "budget" => match args.remaining() {
            0 => Ok(Request::Data(Command::Script(Script::Budget(None)))),
            1 => {
                let n = u64::try_from(args.next_i64()?).map_err(|_| Reply::err(NOT_INTEGER))?;
                Ok(Request::Data(Command::Script(Script::Budget(Some(n)))))
            }
            _ => Err(arity("budget")),
        },
        _ => Err(Reply::err(format!(
            "ERR unknown subcommand '{}'. Try SCRIPT HELP.",
            String::from_utf8_lossy(&raw)
        ))),
    }
}

impl Replicated for Script {
    fn forwarded(&self) -> Option<Touches<'_>> {
        match self {
            Script::Load(_) => Some((&["script|load"], none(), none())),
            Script::Exists(_) => Some((&["script|exists"], none(), none())),
            Script::Flush => Some((&["script|flush"], none(), none())),
            Script::Budget(_) => Some((&["script|budget"], none(), none())),
        }
    }

    fn is_read(&self) -> bool {
        matches!(self, Script::Exists(_) | Script::Budget(None))
    }

    /// Applies LOAD, FLUSH or BUDGET.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        match self {
            Script::Load(body) => {
                let sha = sha1_hex(body);
                ks.cache_script(sha.clone(), body.clone());
                Reply::bulk(sha)
            }
            Script::Flush => {
                ks.flush_scripts();
                Reply::ok()
            }
            Script::Budget(Some(n)) => {
                ks.set_script_budget(*n);
                Reply::ok()
            }
            read => read.query(ks, ctx.now),
        }
    }

    /// Answers EXISTS and BUDGET.
    fn query(&self, ks: &Keyspace, _now: u64) -> Reply {
        match self {
            Script::Exists(shas) => Reply::Array(
                shas.iter()
                    .map(|s| Reply::Int(ks.script(s).is_some() as i64))
                    .collect(),
            ),
            Script::Budget(_) => Reply::Int(ks.script_budget() as i64),
            _ => Reply::err("ERR internal: write command routed as a read"),
        }
    }
}
