//! `LATENCY LATEST|HISTORY event|RESET [event ...]|DOCTOR|GRAPH event|HISTOGRAM [cmd ...]|HELP`:
//! Palisade keeps no latency samples (`latency-monitor-threshold` is 0 and fixed), so every
//! subcommand answers as Redis does with monitoring off: no events, nothing reset, no samples.
//! `SLOWLOG` records slow commands.

use crate::cmd::config::{help, sub_arity, subcommand, unknown_subcommand};
use crate::cmd::connection::ConnCmd;
use crate::cmd::registry::{Spec, NO_KEYS};
use crate::cmd::Request;
use crate::resp::{Args, Reply};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[Spec::new("latency", -2, &[], NO_KEYS, parse)
    .docs(
        "Latency monitoring (off in Palisade: no samples are kept)",
        "2.8.13",
        "server",
    )
    .subcommands(SUBCOMMANDS)];

/// LATENCY's subcommands (`latency|name`): Redis's facts (`scripts/command-args.py
/// --subcommands latency`).
const SUBCOMMANDS: &[Spec] = &[
    Spec::new(
        "doctor",
        2,
        &["admin", "noscript", "loading", "stale"],
        NO_KEYS,
        parse,
    )
    .docs(
        "Report on latency (monitoring is off in Palisade)",
        "2.8.13",
        "server",
    ),
    Spec::new("help", 2, &["loading", "stale"], NO_KEYS, parse).docs(
        "List the subcommands and what they take",
        "2.8.13",
        "server",
    ),
    Spec::new(
        "histogram",
        -2,
        &["admin", "noscript", "loading", "stale"],
        NO_KEYS,
        parse,
    )
    .docs("Report per-command latency histograms", "7.0.0", "server")
    .args("command?*"),
    Spec::new(
        "latest",
        2,
        &["admin", "noscript", "loading", "stale"],
        NO_KEYS,
        parse,
    )
    .docs(
        "Report the latest latency spikes (none: monitoring is off)",
        "2.8.13",
        "server",
    ),
    Spec::new(
        "reset",
        -2,
        &["admin", "noscript", "loading", "stale"],
        NO_KEYS,
        parse,
    )
    .docs(
        "Clear the latency spikes of some or all events",
        "2.8.13",
        "server",
    )
    .args("event?*"),
];

const HELP: &[&str] = &[
    "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DOCTOR",
    "    Return a human readable latency analysis report.",
    "GRAPH <event>",
    "    Return an ASCII latency graph for the <event> class.",
    "HISTORY <event>",
    "    Return time-latency samples for the <event> class.",
    "LATEST",
    "    Return the latest latency samples for all events.",
    "RESET [<event> ...]",
    "    Reset latency data of one or more <event> classes.",
    "    (default: reset all data for all event classes)",
    "HISTOGRAM [COMMAND ...]",
    "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
    "    If no commands are specified then all histograms are replied.",
    "HELP",
    "    Prints this help.",
];

/// LATENCY DOCTOR's report.
pub const DOCTOR: &str = "Latency monitoring is not available in this Palisade node: it keeps \
no latency samples (latency-monitor-threshold is 0 and cannot be changed). SLOWLOG GET lists \
the commands slower than slowlog-log-slower-than, and INFO stats counts the write path.\n";

/// Parses LATENCY and answers it (the answers never change).
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    let (raw, sub) = subcommand(args)?;
    let n = args.remaining();
    let reply = match (sub.as_str(), n) {
        ("latest", 0) | ("history", 1) => Reply::Array(vec![]),
        ("reset", _) => Reply::Int(0),
        ("doctor", 0) => Reply::Verbatim(DOCTOR.into()),
        ("histogram", _) => Reply::Map(vec![]),
        ("graph", 1) => {
            return Err(Reply::err(format!(
                "ERR No samples available for event '{}'",
                String::from_utf8_lossy(&args.arg()?)
            )))
        }
        ("help", 0) => help(HELP),
        ("latest" | "history" | "doctor" | "graph" | "help", _) => {
            return Err(sub_arity("latency", &sub))
        }
        _ => return Err(unknown_subcommand(&raw, "LATENCY")),
    };
    Ok(Request::Conn(ConnCmd::Command(reply)))
}
