//! `CLIENT SETNAME|GETNAME|ID|SETINFO|INFO|LIST|KILL|PAUSE|UNPAUSE|REPLY|NO-EVICT|GETREDIR|
//! HELP` (this node's clients). `CLIENT TRACKING` is refused: Palisade has no client-side
//! caching invalidation.

use bytes::Bytes;

use crate::cmd::connection::{invalid_client_name, valid_client_name, ConnCmd};
use crate::cmd::registry::{Spec, NO_KEYS};
use crate::cmd::Request;
use crate::resp::args::parse_i64;
use crate::resp::{Args, Reply};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[Spec::new("client", -2, &[], NO_KEYS, parse)
    .docs(
        "Subcommands that inspect or name the current connection",
        "2.4.0",
        "connection",
    )
    .subcommands(SUBCOMMANDS)];

/// CLIENT's subcommands (`client|name`): Redis's facts (`scripts/command-args.py
/// --subcommands client`) and Palisade's own.
const SUBCOMMANDS: &[Spec] = &[
    Spec::new("getname", 2, &["noscript", "loading", "stale"], NO_KEYS, parse)
        .docs("Read this connection's name", "2.6.9", "connection"),
    Spec::new("getredir", 2, &["noscript", "loading", "stale"], NO_KEYS, parse)
        .docs("Report where tracking notifications go (tracking is off)", "6.0.0", "connection"),
    Spec::new("help", 2, &["loading", "stale"], NO_KEYS, parse)
        .docs("List the subcommands and what they take", "5.0.0", "connection"),
    Spec::new("id", 2, &["noscript", "loading", "stale"], NO_KEYS, parse)
        .docs("Report this connection's id", "5.0.0", "connection"),
    Spec::new("info", 2, &["noscript", "loading", "stale"], NO_KEYS, parse)
        .docs("Describe this connection as one CLIENT LIST line", "6.2.0", "connection"),
    Spec::new("kill", -3, &["admin", "noscript", "loading", "stale"], NO_KEYS, parse)
        .docs("Close other clients' connections, by address or filter", "2.4.0", "connection")
        .args("filter@(ip:port:string|new-format@(ID=client-id:integer?|normal_master_slave_pubsub@TYPE=(NORMAL|MASTER|SLAVE|REPLICA|PUBSUB)?|USER=username?|ADDR=ip:port:string?|LADDR=ip:port:string?|SKIPME=yes/no?)*)"),
    Spec::new("list", -2, &["admin", "noscript", "loading", "stale"], NO_KEYS, parse)
        .docs("Describe the open connections, one line each", "2.4.0", "connection")
        .args("normal_master_replica_pubsub@TYPE=(NORMAL|MASTER|REPLICA|PUBSUB)? id@ID={client-id:integer*}?"),
    Spec::new("no-evict", 3, &["admin", "noscript", "loading", "stale"], NO_KEYS, parse)
        .docs("Exempt this connection from client eviction", "7.0.0", "connection")
        .args("enabled@(ON|OFF)"),
    Spec::new("pause", -3, &["admin", "noscript", "loading", "stale"], NO_KEYS, parse)
        .docs("Hold clients' commands for a while", "2.9.50", "connection")
        .args("timeout:integer mode@(WRITE|ALL)?"),
    Spec::new("reply", 3, &["noscript", "loading", "stale"], NO_KEYS, parse)
        .docs("Turn this connection's replies on, off, or off for one command", "3.2.0", "connection")
        .args("on_off_skip@(ON|OFF|SKIP)"),
    Spec::new("setinfo", -4, &["noscript", "loading", "stale"], NO_KEYS, parse)
        .docs("Record the client library's name or version", "7.2.0", "connection")
        .args("attr@(LIB-NAME=libname|LIB-VER=libver)"),
    Spec::new("setname", 3, &["noscript", "loading", "stale"], NO_KEYS, parse)
        .docs("Name this connection", "2.6.9", "connection")
        .args("connection-name"),
    Spec::new("tracking", -3, &["noscript", "loading", "stale"], NO_KEYS, parse)
        .docs("Turn client-side caching support on or off", "6.0.0", "connection")
        .args("status@(ON|OFF) REDIRECT=client-id:integer? PREFIX=prefix?*+ BCAST? OPTIN? OPTOUT? NOLOOP?"),
    Spec::new("unblock", -3, &["admin", "noscript", "loading", "stale"], NO_KEYS, parse)
        .docs("Wake a client waiting in a blocking command", "5.0.0", "connection")
        .args("client-id:integer timeout_error@(TIMEOUT|ERROR)?"),
    Spec::new("unpause", 2, &["admin", "noscript", "loading", "stale"], NO_KEYS, parse)
        .docs("Let paused clients' commands run again", "6.2.0", "connection"),
];

/// A parsed CLIENT subcommand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientCmd {
    /// CLIENT SETNAME (empty clears).
    SetName(Bytes),
    /// CLIENT GETNAME.
    GetName,
    /// CLIENT ID.
    Id,
    /// CLIENT SETINFO LIB-NAME|LIB-VER value.
    SetInfo {
        /// True for LIB-NAME, false for LIB-VER.
        lib_name: bool,
        /// The value.
        value: Bytes,
    },
    /// CLIENT INFO.
    Info,
    /// CLIENT LIST.
    List,
    /// CLIENT KILL: the filters, and whether it was the old `ip:port` form (reply OK or
    /// `No such client` instead of a count).
    Kill(KillFilter, bool),
    /// CLIENT PAUSE ms [WRITE|ALL].
    Pause {
        /// How long, in ms.
        ms: u64,
        /// ALL (the default) rather than WRITE.
        all: bool,
    },
    /// CLIENT UNPAUSE.
    Unpause,
    /// CLIENT REPLY ON|OFF|SKIP.
    Reply(ReplyMode),
    /// CLIENT UNBLOCK id [TIMEOUT|ERROR]: the client, and whether it gets an error.
    Unblock(u64, bool),
}

/// CLIENT REPLY's modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyMode {
    /// Replies again (and to this command).
    On,
    /// No replies from now on (not to this command either).
    Off,
    /// No reply to this command and the next.
    Skip,
}

/// The filters of CLIENT KILL (all given must match).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KillFilter {
    /// `ID`.
    pub id: Option<u64>,
    /// `ADDR ip:port` (also the old form's only argument).
    pub addr: Option<String>,
    /// `LADDR ip:port`.
    pub laddr: Option<String>,
    /// `USER name`.
    pub user: Option<String>,
    /// `TYPE`: `Some(true)` for pubsub clients only, `Some(false)` for normal ones only.
    pub pubsub: Option<bool>,
    /// A `TYPE` that no client of Palisade has (`master`, `replica`).
    pub no_type: bool,
    /// `SKIPME yes` (the default of the new form): the caller is spared.
    pub skipme: bool,
}

fn arity(sub: &str) -> Reply {
    Reply::err(format!(
        "ERR wrong number of arguments for 'client|{sub}' command"
    ))
}

/// Parses CLIENT.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    let raw = args.arg()?;
    let sub = String::from_utf8_lossy(&raw).to_lowercase();
    let n = args.remaining();
    let cmd = match (sub.as_str(), n) {
        ("setname", 1) => {
            let name = args.arg()?;
            if !valid_client_name(&name) {
                return Err(invalid_client_name());
            }
            ClientCmd::SetName(name)
        }
        ("getname", 0) => ClientCmd::GetName,
        ("id", 0) => ClientCmd::Id,
        ("info", 0) => ClientCmd::Info,
        ("list", _) => ClientCmd::List,
        ("setinfo", 2) => {
            let attr = args.next_keyword()?;
            let value = args.arg()?;
            let lib_name = match attr.as_str() {
                "LIB-NAME" => true,
                "LIB-VER" => false,
                _ => {
                    return Err(Reply::err(format!(
                        "ERR Unrecognized option '{}'",
                        String::from_utf8_lossy(&value)
                    )))
                }
            };
            if !valid_client_name(&value) {
                return Err(Reply::err(format!(
                    "ERR {} cannot contain spaces, newlines or special characters.",
                    attr
                )));
            }
            ClientCmd::SetInfo { lib_name, value }
        }
        ("kill", 1) => ClientCmd::Kill(
            KillFilter {
                addr: Some(String::from_utf8_lossy(&args.arg()?).into_owned()),
                ..Default::default()
            },
            true,
        ),
        ("kill", n) if n >= 2 => ClientCmd::Kill(kill_filters(args)?, false),
        ("pause" | "unblock", n) if n > 2 => {
            return Err(Reply::err(format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try CLIENT HELP.",
                String::from_utf8_lossy(&raw)
            )))
        }
        ("pause", 1 | 2) => {
            let ms = args.arg()?;
            let ms = match parse_i64(&ms) {
                None => return Err(Reply::err("ERR timeout is not an integer or out of range")),
                Some(n) if n < 0 => return Err(Reply::err("ERR timeout is negative")),
                Some(n) => n as u64,
            };
            let all = match args.rest().first() {
                None => true,
                Some(m) if m.eq_ignore_ascii_case(b"all") => true,
                Some(m) if m.eq_ignore_ascii_case(b"write") => false,
                Some(_) => return Err(Reply::err("ERR CLIENT PAUSE mode must be WRITE or ALL")),
            };
            ClientCmd::Pause { ms, all }
        }
        ("unpause", 0) => ClientCmd::Unpause,
        ("unblock", 1 | 2) => {
            let id = parse_i64(&args.arg()?)
                .ok_or_else(|| Reply::err("ERR value is not an integer or out of range"))?;
            let error = match args.rest().first() {
                None => false,
                Some(m) if m.eq_ignore_ascii_case(b"timeout") => false,
                Some(m) if m.eq_ignore_ascii_case(b"error") => true,
                Some(_) => {
                    return Err(Reply::err(
                        "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR",
                    ))
                }
            };
            // A negative id names no client (Redis reads it as unsigned: none matches).
            ClientCmd::Unblock(u64::try_from(id).unwrap_or(u64::MAX), error)
        }
        ("reply", 1) => {
            let mode = args.arg()?;
            ClientCmd::Reply(match mode.to_ascii_lowercase().as_slice() {
                b"on" => ReplyMode::On,
                b"off" => ReplyMode::Off,
                b"skip" => ReplyMode::Skip,
                _ => return Err(crate::resp::args::syntax_error()),
            })
        }
        ("no-evict", 1) => {
            let v = args.arg()?;
            if v.eq_ignore_ascii_case(b"on") || v.eq_ignore_ascii_case(b"off") {
                // Accepted: Palisade never evicts clients for memory.
                return Ok(Request::Conn(ConnCmd::Command(Reply::ok())));
            }
            return Err(crate::resp::args::syntax_error());
        }
        ("getredir", 0) => return Ok(Request::Conn(ConnCmd::Command(Reply::Int(-1)))),
        ("tracking", n) if n >= 1 => {
            return Err(Reply::err(
                "ERR CLIENT TRACKING is not supported by Palisade (no client-side caching)",
            ))
        }
        ("help", 0) => {
            let lines = [
                "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "GETNAME",
                "GETREDIR",
                "ID",
                "INFO",
                "KILL <ip:port>",
                "KILL <option> <value> [<option> <value> [...]]",
                "    Options: ID, ADDR, LADDR, USER, TYPE normal|pubsub|master|replica, SKIPME yes|no.",
                "LIST",
                "NO-EVICT (ON|OFF)",
                "PAUSE <timeout> [WRITE|ALL]",
                "REPLY (ON|OFF|SKIP)",
                "SETINFO <LIB-NAME|LIB-VER> <value>",
                "SETNAME <name>",
                "UNBLOCK <clientid> [TIMEOUT|ERROR]",
                "UNPAUSE",
                "HELP",
            ];
            return Ok(Request::Conn(ConnCmd::Command(Reply::Array(
                lines.iter().map(|l| Reply::Simple((*l).into())).collect(),
            ))));
        }
        (
            "setname" | "getname" | "id" | "info" | "setinfo" | "help" | "kill" | "pause"
            | "unpause" | "reply" | "no-evict" | "getredir" | "tracking" | "unblock",
            _,
        ) => return Err(arity(&sub)),
        _ => {
            return Err(Reply::err(format!(
                "ERR unknown subcommand '{}'. Try CLIENT HELP.",
                String::from_utf8_lossy(&raw)
            )))
        }
    };
    Ok(Request::Conn(ConnCmd::Client(cmd)))
}

/// The new form of CLIENT KILL: `option value` pairs, with Redis's error texts.
fn kill_filters(args: &mut Args) -> Result<KillFilter, Reply> {
    let rest = args.rest();
    let mut f = KillFilter {
        skipme: true,
        ..Default::default()
    };
    let text = |b: &Bytes| String::from_utf8_lossy(b).into_owned();
    let mut i = 0;
    while i < rest.len() {
        let Some(value) = rest.get(i + 1) else {
            return Err(crate::resp::args::syntax_error());
        };
        match rest[i].to_ascii_lowercase().as_slice() {
            b"id" => match parse_i64(value) {
                Some(n) if n >= 1 => f.id = Some(n as u64),
                _ => return Err(Reply::err("ERR client-id should be greater than 0")),
            },
            b"addr" => f.addr = Some(text(value)),
            b"laddr" => f.laddr = Some(text(value)),
            b"user" => f.user = Some(text(value)),
            b"type" => match value.to_ascii_lowercase().as_slice() {
                b"normal" => f.pubsub = Some(false),
                b"pubsub" => f.pubsub = Some(true),
                b"master" | b"replica" | b"slave" => f.no_type = true,
                _ => {
                    return Err(Reply::err(format!(
                        "ERR Unknown client type '{}'",
                        text(value)
                    )))
                }
            },
            b"skipme" => match value.to_ascii_lowercase().as_slice() {
                b"yes" => f.skipme = true,
                b"no" => f.skipme = false,
                _ => return Err(crate::resp::args::syntax_error()),
            },
            _ => return Err(crate::resp::args::syntax_error()),
        }
        i += 2;
    }
    Ok(f)
}
