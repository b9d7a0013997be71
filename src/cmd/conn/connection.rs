//! Connection commands: `PING [msg]`, `ECHO msg`, `HELLO [2|3 [AUTH u p] [SETNAME n]]`,
//! `AUTH [user] pass`, `SELECT db`, `QUIT`, `RESET`, plus the commands that touch only the
//! session and server metadata, never the replicated state (CLIENT, COMMAND, INFO, CONFIG,
//! SLOWLOG, ...): [`ConnCmd`] is what the session runs for all of them.

use bytes::Bytes;

use crate::cmd::registry::flags::{CONN, CONN_NO_AUTH};
use crate::cmd::registry::{Spec, NO_KEYS};
use crate::cmd::{client::ClientCmd, Request};
use crate::resp::args::{parse_i64, syntax_error};
use crate::resp::{Args, Reply};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new("ping", -1, &["fast"], NO_KEYS, parse_ping)
        .args("message?").docs(
        "Check that the server answers, optionally echoing a message",
        "1.0.0",
        "connection",
    ),
    Spec::new("echo", 2, CONN, NO_KEYS, parse_echo)
        .args("message").docs(
        "Reply with the given message",
        "1.0.0",
        "connection",
    ),
    Spec::new("hello", -1, CONN_NO_AUTH, NO_KEYS, parse_hello)
        .args("arguments@{protover:integer username_password@AUTH={username password}? SETNAME=clientname?}?").docs(
        "Choose the protocol version, optionally authenticating and naming the connection",
        "6.0.0",
        "connection",
    ),
    Spec::new("auth", -2, CONN_NO_AUTH, NO_KEYS, parse_auth)
        .args("username? password").docs(
        "Authenticate the connection",
        "1.0.0",
        "connection",
    ),
    Spec::new("select", 2, CONN, NO_KEYS, parse_select)
        .args("index:integer").docs(
        "Choose the connection's database (Palisade has only database 0)",
        "1.0.0",
        "connection",
    ),
    Spec::new("quit", -1, CONN_NO_AUTH, NO_KEYS, parse_quit).docs(
        "Close the connection once the reply is sent",
        "1.0.0",
        "connection",
    ),
    Spec::new("reset", 1, CONN_NO_AUTH, NO_KEYS, parse_reset).docs(
        "Return the connection to its initial state",
        "6.2.0",
        "connection",
    ),
];

/// A parsed connection-level command.
#[derive(Debug, Clone, PartialEq)]
pub enum ConnCmd {
    /// PING with an optional message.
    Ping(Option<Bytes>),
    /// ECHO.
    Echo(Bytes),
    /// HELLO.
    Hello(Hello),
    /// AUTH with optional user name.
    Auth {
        /// User name (`default` if not given).
        user: Option<Bytes>,
        /// Password.
        pass: Bytes,
    },
    /// SELECT; only database 0 exists.
    Select(i64),
    /// QUIT.
    Quit,
    /// RESET.
    Reset,
    /// CLIENT subcommands.
    Client(ClientCmd),
    /// A reply known when parsing: COMMAND's subcommands (answered from the command table)
    /// and LOLWUT.
    Command(Reply),
    /// ROLE (the node's applied index is its offset).
    Role,
    /// CLUSTER subcommands answered from the group's topology.
    Cluster(crate::cmd::cluster::ClusterCmd),
    /// WAIT (run by the session: it may block, and asks the leader).
    Wait(crate::cmd::wait::Wait),
    /// INFO with the requested sections (lower-case).
    Info(Vec<String>),
    /// MULTI, EXEC, DISCARD, WATCH, UNWATCH.
    Txn(crate::cmd::multi::TxnCmd),
    /// (P|S)SUBSCRIBE, (P|S)UNSUBSCRIBE.
    Sub(crate::cmd::subscribe::SubCmd),
    /// MONITOR (the session streams this node's commands).
    Monitor,
    /// PUBSUB subcommands (this node's subscriptions).
    PubSub(crate::cmd::pubsub::PubSubCmd),
    /// CONFIG subcommands.
    Config(crate::cmd::config::ConfigCmd),
    /// TIME.
    Time,
    /// LASTSAVE.
    LastSave,
    /// SAVE, BGSAVE, BGREWRITEAOF.
    Save(crate::cmd::save::SaveCmd),
    /// DEBUG (allowed by `enable-debug-command`).
    Debug(crate::cmd::debug::DebugCmd),
    /// SLOWLOG subcommands.
    Slowlog(crate::cmd::slowlog::SlowlogCmd),
    /// SHUTDOWN (any options: there is nothing to save).
    Shutdown,
    /// ACL subcommands answered from this node's applied users.
    Acl(crate::cmd::acl::AclCmd),
    /// OBJECT ENCODING|FREQ|IDLETIME|REFCOUNT and MEMORY USAGE: questions about a key that
    /// the session answers after reading it.
    KeyInfo(crate::cmd::object::KeyQuery),
    /// LOCKNOTIFY ON|OFF: push lost leases to this connection.
    LockNotify(bool),
}

/// A parsed HELLO.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Hello {
    /// Requested protocol version, if given.
    pub proto: Option<u8>,
    /// AUTH user pass.
    pub auth: Option<(Bytes, Bytes)>,
    /// SETNAME name.
    pub setname: Option<Bytes>,
}

/// Parses PING.
pub fn parse_ping(args: &mut Args) -> Result<Request, Reply> {
    if args.remaining() > 1 {
        return Err(crate::cmd::wrong_arity("ping"));
    }
    let msg = if args.remaining() == 1 {
        Some(args.arg()?)
    } else {
        None
    };
    Ok(Request::Conn(ConnCmd::Ping(msg)))
}

/// Parses ECHO.
pub fn parse_echo(args: &mut Args) -> Result<Request, Reply> {
    Ok(Request::Conn(ConnCmd::Echo(args.arg()?)))
}

/// Parses HELLO with Redis 7's error texts.
pub fn parse_hello(args: &mut Args) -> Result<Request, Reply> {
    let mut hello = Hello::default();
    if args.remaining() > 0 {
        let v = parse_i64(&args.arg()?)
            .ok_or_else(|| Reply::err("ERR Protocol version is not an integer or out of range"))?;
        if !(2..=3).contains(&v) {
            return Err(Reply::err("NOPROTO unsupported protocol version"));
        }
        hello.proto = Some(v as u8);
    }
    while args.remaining() > 0 {
        let opt = args.arg()?;
        let more = args.remaining();
        if opt.eq_ignore_ascii_case(b"AUTH") && more >= 2 {
            hello.auth = Some((args.arg()?, args.arg()?));
        } else if opt.eq_ignore_ascii_case(b"SETNAME") && more >= 1 {
            hello.setname = Some(args.arg()?);
        } else {
            return Err(Reply::err(format!(
                "ERR Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(&opt)
            )));
        }
    }
    Ok(Request::Conn(ConnCmd::Hello(hello)))
}

/// Parses AUTH.
pub fn parse_auth(args: &mut Args) -> Result<Request, Reply> {
    match args.remaining() {
        1 => Ok(Request::Conn(ConnCmd::Auth {
            user: None,
            pass: args.arg()?,
        })),
        2 => Ok(Request::Conn(ConnCmd::Auth {
            user: Some(args.arg()?),
            pass: args.arg()?,
        })),
        _ => Err(syntax_error()),
    }
}

/// Parses SELECT.
pub fn parse_select(args: &mut Args) -> Result<Request, Reply> {
    Ok(Request::Conn(ConnCmd::Select(args.next_i64()?)))
}

/// Parses QUIT (extra arguments are ignored, as in Redis).
pub fn parse_quit(_: &mut Args) -> Result<Request, Reply> {
    Ok(Request::Conn(ConnCmd::Quit))
}

/// Parses RESET.
pub fn parse_reset(_: &mut Args) -> Result<Request, Reply> {
    Ok(Request::Conn(ConnCmd::Reset))
}

/// Validates a client name as Redis does (printable ASCII, no spaces).
pub fn valid_client_name(name: &[u8]) -> bool {
    name.iter().all(|&c| (b'!'..=b'~').contains(&c))
}

/// The error for an invalid client name.
pub fn invalid_client_name() -> Reply {
    Reply::err("ERR Client names cannot contain spaces, newlines or special characters.")
}
