//! `SLOWLOG GET [count]`, `SLOWLOG LEN`, `SLOWLOG RESET`, `SLOWLOG HELP`, and the log itself:
//! commands slower than `slowlog-log-slower-than` µs, the newest `slowlog-max-len` of them.
//!
//! A command's time is measured from when the session dispatches it to when its reply is
//! ready: for a write that includes the Raft round and the fsync, for a read the ReadIndex
//! round, because that is the command's execution here (Redis counts only the time in its
//! event loop). Commands that wait by design (BLPOP, `LOCK ... WAIT`, EXEC) are not timed,
//! as Redis does not count blocking time.

use std::collections::VecDeque;
use std::sync::Mutex;

use bytes::Bytes;

use crate::cmd::config::{help, sub_arity, subcommand, unknown_subcommand};
use crate::cmd::connection::ConnCmd;
use crate::cmd::registry::{Spec, NO_KEYS};
use crate::cmd::Request;
use crate::resp::args::parse_i64;
use crate::resp::{Args, Reply};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[Spec::new("slowlog", -2, &[], NO_KEYS, parse)
    .docs("Read or reset the log of slow commands", "2.2.12", "server")
    .subcommands(SUBCOMMANDS)];

/// SLOWLOG's subcommands (`slowlog|name`): Redis's facts (`scripts/command-args.py
/// --subcommands slowlog`).
const SUBCOMMANDS: &[Spec] = &[
    Spec::new("get", -2, &["admin", "loading", "stale"], NO_KEYS, parse)
        .docs(
            "Read the newest entries of the slow log",
            "2.2.12",
            "server",
        )
        .args("count:integer?"),
    Spec::new("help", 2, &["loading", "stale"], NO_KEYS, parse).docs(
        "List the subcommands and what they take",
        "6.2.0",
        "server",
    ),
    Spec::new("len", 2, &["admin", "loading", "stale"], NO_KEYS, parse).docs(
        "Count the entries of the slow log",
        "2.2.12",
        "server",
    ),
    Spec::new("reset", 2, &["admin", "loading", "stale"], NO_KEYS, parse).docs(
        "Empty the slow log",
        "2.2.12",
        "server",
    ),
];

/// A parsed SLOWLOG subcommand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlowlogCmd {
    /// SLOWLOG GET: at most this many entries, newest first (None: all).
    Get(Option<usize>),
    /// SLOWLOG LEN.
    Len,
    /// SLOWLOG RESET.
    Reset,
}

const HELP: &[&str] = &[
    "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET [<count>]",
    "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
    "    Entries are made of:",
    "    id, timestamp, time in microseconds, arguments array, client IP and port,",
    "    client name",
    "LEN",
    "    Return the length of the slowlog.",
    "RESET",
    "    Reset the slowlog.",
    "HELP",
    "    Prints this help.",
];

/// Parses SLOWLOG.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    let (raw, sub) = subcommand(args)?;
    let n = args.remaining();
    let cmd = match (sub.as_str(), n) {
        ("get", 0) => SlowlogCmd::Get(Some(10)),
        ("get", 1) => match parse_i64(&args.arg()?) {
            Some(-1) => SlowlogCmd::Get(None),
            Some(c) if c >= 0 => SlowlogCmd::Get(Some(usize::try_from(c).unwrap_or(usize::MAX))),
            _ => {
                return Err(Reply::err(
                    "ERR count should be greater than or equal to -1",
                ))
            }
        },
        ("len", 0) => SlowlogCmd::Len,
        ("reset", 0) => SlowlogCmd::Reset,
        ("help", 0) => return Ok(Request::Conn(ConnCmd::Command(help(HELP)))),
        ("get" | "len" | "reset" | "help", _) => return Err(sub_arity("slowlog", &sub)),
        _ => return Err(unknown_subcommand(&raw, "SLOWLOG")),
    };
    Ok(Request::Conn(ConnCmd::Slowlog(cmd)))
}

/// Redis keeps at most this many arguments of a command...
const MAX_ARGC: usize = 32;
/// ...and at most this many bytes of each.
const MAX_STRING: usize = 128;

/// One slow command.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Unique, increasing id.
    pub id: u64,
    /// Unix time (seconds) at which it was logged.
    pub unix_secs: i64,
    /// How long it took, in µs.
    pub micros: u64,
    /// Its arguments, shortened as Redis shortens them.
    pub argv: Vec<Bytes>,
    /// The client's `ip:port`.
    pub addr: String,
    /// The client's name ("" when it has none).
    pub name: Bytes,
}

/// The slow log of this node.
#[derive(Debug, Default)]
pub struct SlowLog {
    inner: Mutex<(VecDeque<Entry>, u64)>,
}

/// The arguments of a command as the slow log keeps them: at most 32, the last of which
/// says how many more there were, each cut to 128 bytes plus how many more there were.
pub fn shorten(argv: &[Bytes]) -> Vec<Bytes> {
    let keep = if argv.len() > MAX_ARGC {
        MAX_ARGC - 1
    } else {
        argv.len()
    };
    let mut out: Vec<Bytes> = argv[..keep]
        .iter()
        .map(|a| {
            if a.len() <= MAX_STRING {
                return a.clone();
            }
            let mut cut = a[..MAX_STRING].to_vec();
            cut.extend_from_slice(format!("... ({} more bytes)", a.len() - MAX_STRING).as_bytes());
            Bytes::from(cut)
        })
        .collect();
    if argv.len() > MAX_ARGC {
        let more = format!("... ({} more arguments)", argv.len() - keep);
        out.push(Bytes::from(more));
    }
    out
}

impl SlowLog {
    /// Adds an entry (its id is assigned here) and keeps the newest `max_len`.
    pub fn push(&self, mut entry: Entry, max_len: usize) {
        let Ok(mut g) = self.inner.lock() else {
            return;
        };
        let (entries, next_id) = &mut *g;
        entry.id = *next_id;
        *next_id += 1;
        entries.push_front(entry);
        entries.truncate(max_len);
    }

    /// Answers SLOWLOG GET, LEN or RESET.
    pub fn run(&self, cmd: SlowlogCmd) -> Reply {
        let Ok(mut g) = self.inner.lock() else {
            return Reply::err("ERR internal: slow log unavailable");
        };
        let entries = &mut g.0;
        match cmd {
            SlowlogCmd::Len => Reply::Int(entries.len() as i64),
            SlowlogCmd::Reset => {
                entries.clear();
                Reply::ok()
            }
            SlowlogCmd::Get(n) => Reply::Array(
                entries
                    .iter()
                    .take(n.unwrap_or(usize::MAX))
                    .map(|e| {
                        Reply::Array(vec![
                            Reply::Int(e.id as i64),
                            Reply::Int(e.unix_secs),
                            Reply::Int(e.micros as i64),
                            Reply::Array(e.argv.iter().cloned().map(Reply::Bulk).collect()),
                            Reply::text(&e.addr),
                            Reply::Bulk(e.name.clone()),
                        ])
                    })
                    .collect(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(arg: &str) -> Entry {
        Entry {
            id: 0,
            unix_secs: 1,
            micros: 2,
            argv: vec![Bytes::copy_from_slice(arg.as_bytes())],
            addr: "a:1".into(),
            name: Bytes::new(),
        }
    }

    #[test]
    fn keeps_the_newest_and_numbers_them() {
        let log = SlowLog::default();
        for a in ["a", "b", "c"] {
            log.push(entry(a), 2);
        }
        assert_eq!(log.run(SlowlogCmd::Len), Reply::Int(2));
        let Reply::Array(got) = log.run(SlowlogCmd::Get(Some(1))) else {
            panic!()
        };
        let Reply::Array(first) = &got[0] else {
            panic!()
        };
        assert_eq!(first[0], Reply::Int(2));
        assert_eq!(first[3], Reply::Array(vec![Reply::text("c")]));
        assert_eq!(log.run(SlowlogCmd::Reset), Reply::ok());
        assert_eq!(log.run(SlowlogCmd::Len), Reply::Int(0));
    }

    #[test]
    fn shortens_as_redis() {
        let long = Bytes::from(vec![b'x'; 130]);
        let got = shorten(&[long]);
        assert_eq!(got[0].len(), 128 + "... (2 more bytes)".len());
        let many: Vec<Bytes> = (0..40).map(|i| Bytes::from(i.to_string())).collect();
        let got = shorten(&many);
        assert_eq!(got.len(), 32);
        assert_eq!(got[31], Bytes::from("... (9 more arguments)"));
    }
}
