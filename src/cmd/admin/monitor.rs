//! `MONITOR`: stream the commands this node's clients run, one line each.
//!
//! A line is what Redis 7.0's `replicationFeedMonitors` writes: a status reply
//! `+<unix secs>.<micros> [0 <client addr>] "arg" "arg" ...` with each argument quoted as
//! `sdscatrepr` does, in RESP2 and RESP3 alike. Per node: a MONITOR shows the commands that
//! this node's own clients send (those it forwards to the leader included), not the cluster's.
//! As in Redis, admin commands are not shown, nor commands refused before they ran (unknown,
//! wrong arity, NOAUTH, ACL, subscribed mode), and passwords show as `(redacted)`.

use std::time::Duration;

use bytes::Bytes;

use crate::cmd::registry::{line_spec, Spec, NO_KEYS};
use crate::cmd::{ConnCmd, Request};
use crate::resp::{Args, Reply};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[Spec::new(
    "monitor",
    1,
    &["admin", "noscript", "loading", "stale"],
    NO_KEYS,
    parse,
)
.docs(
    "Listen for all requests received by the server in real time",
    "1.0.0",
    "server",
)];

/// Redis's error for MONITOR inside MULTI (run by EXEC).
pub const IN_MULTI: &str = "ERR MONITOR isn't allowed for DENY BLOCKING client";

/// Redis's error for a command of a monitoring client that would touch the keyspace.
pub const NO_KEYSPACE: &str = "ERR Replica can't interact with the keyspace";

/// Parses MONITOR.
pub fn parse(_args: &mut Args) -> Result<Request, Reply> {
    Ok(Request::Conn(ConnCmd::Monitor))
}

/// True if a command line of `spec` is shown to monitors: Redis hides the commands (and
/// subcommands: their own rows) flagged `admin`.
pub fn shown(spec: &Spec, argv: &[Bytes]) -> bool {
    !spec.flags.contains(&"admin") && !line_spec(spec, argv).flags.contains(&"admin")
}

/// One monitor line for `argv` (already redacted) run at `now` (since the Unix epoch) by
/// the client at `addr`, with its `\r\n`.
pub fn line(now: Duration, addr: &str, argv: &[Bytes]) -> Bytes {
    let mut out = format!("+{}.{:06} [0 {addr}]", now.as_secs(), now.subsec_micros()).into_bytes();
    for arg in argv {
        out.push(b' ');
        repr(arg, &mut out);
    }
    out.extend_from_slice(b"\r\n");
    Bytes::from(out)
}

/// Appends `s` quoted as Redis's `sdscatrepr`.
fn repr(s: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &b in s {
        match b {
            b'\\' | b'"' => out.extend_from_slice(&[b'\\', b]),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x07 => out.extend_from_slice(b"\\a"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x20..=0x7e => out.push(b),
            _ => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_as_sdscatrepr() {
        let argv = [
            Bytes::from_static(b"SET"),
            Bytes::from_static(b"k"),
            Bytes::from_static(b"a\"b\\c\n\x01\xc3\xbf\x00\x7f e\r\t\x07\x08"),
        ];
        let l = line(Duration::new(1796193882, 255_011_999), "127.0.0.1:5", &argv);
        assert_eq!(
            &l[..],
            &b"+1796193882.255011 [0 127.0.0.1:5] \"SET\" \"k\" \"a\\\"b\\\\c\\n\\x01\\xc3\\xbf\\x00\\x7f e\\r\\t\\a\\b\"\r\n"[..]
        );
    }
}
