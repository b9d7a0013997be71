//! `DEBUG subcommand ...`: the few of Redis's debugging subcommands that cannot harm the
//! replicated state, and only where `enable-debug-command` allows it (`no` by default,
//! `yes`, or `local` for loopback clients), with Redis's refusal text.
//!
//! - `DEBUG SLEEP seconds` pauses this connection (Redis stops the whole server; here the
//!   others keep being served);
//! - `DEBUG OBJECT key` answers Redis's line for the value (`encoding` as `OBJECT ENCODING`
//!   says; the address and LRU fields are placeholders);
//! - `DEBUG SET-ACTIVE-EXPIRE 0|1` is accepted and changes nothing: expiry is replicated
//!   through the leader's eviction entries and is never turned off by one client;
//! - `DEBUG DIGEST` answers this node's digest of the whole replicated state (40 hex digits,
//!   `state::digest`; `RAFT.DIGEST` shows the same with its applied index, without the
//!   debug switch), and `DEBUG DIGEST-VALUE key [key ...]` the digest of each key's value
//!   (40 zeros for a missing key), as Redis does; both read this node's state, unforwarded;
//! - `DEBUG HELP` lists these; every other subcommand (`JMAP`, `RELOAD`, ...) is answered as
//!   an unknown one.

use bytes::Bytes;

use crate::cmd::config::help;
use crate::cmd::connection::ConnCmd;
use crate::cmd::registry::{Spec, NO_KEYS};
use crate::cmd::Request;
use crate::resp::{Args, Reply};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[Spec::new(
    "debug",
    -2,
    &["admin", "noscript", "loading", "stale"],
    NO_KEYS,
    parse,
)
.docs(
    "A few debugging helpers (SLEEP, OBJECT, DIGEST)",
    "1.0.0",
    "server",
)];

/// Redis's refusal while `enable-debug-command` does not allow the connection.
pub const NOT_ALLOWED: &str = "ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.";

const HELP: &[&str] = &[
    "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DIGEST",
    "    Output a hex signature representing the current DB content.",
    "DIGEST-VALUE <key> [<key> ...]",
    "    Output a hex signature of the values of all the specified keys.",
    "OBJECT <key>",
    "    Show low level info about `key` and associated value.",
    "SET-ACTIVE-EXPIRE <0|1>",
    "    Setting it to 0 disables expiring keys in background when they are not",
    "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
    "    default.",
    "SLEEP <seconds>",
    "    Stop the server for <seconds>. Decimals allowed.",
    "HELP",
    "    Prints this help.",
];

/// A parsed DEBUG (checked against `enable-debug-command` by the session).
#[derive(Debug, Clone, PartialEq)]
pub enum DebugCmd {
    /// A reply known at parse time (HELP, SET-ACTIVE-EXPIRE, errors).
    Reply(Reply),
    /// SLEEP, in seconds.
    Sleep(f64),
    /// OBJECT key.
    Object(Bytes),
    /// DIGEST: the digest of the whole replicated state.
    Digest,
    /// DIGEST-VALUE key [key ...]: the digest of each key's value.
    DigestValue(Vec<Bytes>),
}

/// Parses DEBUG.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    let raw = args.arg()?;
    let sub = String::from_utf8_lossy(&raw).to_lowercase();
    let rest = args.rest();
    let cmd = match (sub.as_str(), rest.as_slice()) {
        ("help", []) => DebugCmd::Reply(help(HELP)),
        // Redis reads the seconds with strtod: text that is no number sleeps 0 s.
        ("sleep", [secs]) => DebugCmd::Sleep(
            std::str::from_utf8(secs)
                .ok()
                .and_then(|s| s.trim().parse::<f64>().ok())
                .filter(|s| s.is_finite() && *s > 0.0)
                .unwrap_or(0.0),
        ),
        ("object", [key]) => DebugCmd::Object(key.clone()),
        ("set-active-expire", [_]) => DebugCmd::Reply(Reply::ok()),
        ("digest", []) => DebugCmd::Digest,
        ("digest-value", keys) => DebugCmd::DigestValue(keys.to_vec()),
        _ => DebugCmd::Reply(Reply::err(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try DEBUG HELP.",
            String::from_utf8_lossy(&raw)
        ))),
    };
    Ok(Request::Conn(ConnCmd::Debug(cmd)))
}

/// The reply of `DEBUG DIGEST` and `DEBUG DIGEST-VALUE` from this node's keyspace: status
/// replies of 40 hex digits, as Redis's (`None` for the other subcommands).
pub fn digest_reply(cmd: &DebugCmd, ks: &crate::state::Keyspace) -> Option<Reply> {
    let status = |d: Option<crate::state::digest::StateDigest>| {
        Reply::Simple(hex::encode(d.unwrap_or_default()))
    };
    match cmd {
        DebugCmd::Digest => Some(status(Some(ks.digest()))),
        DebugCmd::DigestValue(keys) => Some(Reply::Array(
            keys.iter().map(|k| status(ks.digest_value(k))).collect(),
        )),
        _ => None,
    }
}

/// Redis's `DEBUG OBJECT` line for a value of `encoding` whose serialized length is about
/// `len` bytes. The address and LRU clock are placeholders (Palisade tracks no access).
pub fn object_line(encoding: &str, len: usize) -> Reply {
    Reply::Simple(format!(
        "Value at:0x0 refcount:1 encoding:{encoding} serializedlength:{len} lru:0 lru_seconds_idle:0"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Keyspace;

    fn debug(line: &str) -> DebugCmd {
        match crate::cmd::parse(crate::cmd::test_argv(line)) {
            Ok(Request::Conn(ConnCmd::Debug(d))) => d,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn digest_and_digest_value_read_the_keyspace() {
        let mut ks = Keyspace::default();
        crate::cmd::run_line(&mut ks, "SET a v", 0);
        crate::cmd::run_line(&mut ks, "SET b v", 0);
        let Some(Reply::Simple(d)) = digest_reply(&debug("DEBUG DIGEST"), &ks) else {
            panic!("no digest")
        };
        assert_eq!(d, hex::encode(ks.digest()));
        assert_eq!(d.len(), 40);
        let Some(Reply::Array(v)) = digest_reply(&debug("debug digest-value a b nope"), &ks) else {
            panic!("no value digests")
        };
        assert_eq!(v.len(), 3);
        assert_eq!(v[0], v[1], "equal values, equal digests");
        assert_eq!(
            v[2],
            Reply::Simple("0".repeat(40)),
            "a missing key is zeros"
        );
        assert_eq!(digest_reply(&debug("DEBUG SLEEP 0"), &ks), None);
        assert!(matches!(debug("DEBUG DIGEST x"), DebugCmd::Reply(r) if r.is_error()));
    }
}
