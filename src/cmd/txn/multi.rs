//! Transactions: `MULTI`, `EXEC`, `DISCARD`, `WATCH key [key ...]`, `UNWATCH`.
//!
//! The session queues commands after MULTI; EXEC sends them as one [`Exec`] command, which
//! is one replicated unit: every replica applies all of them at once, or none when a watched
//! key changed. WATCH reads each key's `modified` revision (a linearizable read); EXEC
//! compares them at apply time, so the check and the writes are atomic.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::registry::flags::TXN;
use crate::cmd::registry::{many, none, Replicated, Spec, Touches, ALL_KEYS, NO_KEYS};
use crate::cmd::{Command, ConnCmd, Ctx, Request};
use crate::resp::{Args, Reply};
use crate::state::Keyspace;

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new("multi", 1, TXN, NO_KEYS, parse).docs(
        "Start queueing a transaction",
        "1.2.0",
        "transactions",
    ),
    Spec::new(
        "exec",
        1,
        &["noscript", "loading", "stale", "skip_slowlog"],
        NO_KEYS,
        parse,
    )
    .docs("Run the queued transaction", "1.2.0", "transactions"),
    Spec::new("discard", 1, TXN, NO_KEYS, parse).docs(
        "Drop the queued transaction",
        "2.0.0",
        "transactions",
    ),
    Spec::new("watch", -2, TXN, ALL_KEYS, parse)
        .key_specs("RO@i1/r-1,1,0")
        .args("key:key*")
        .docs(
            "Make the next EXEC fail if any of these keys changes",
            "2.2.0",
            "transactions",
        ),
    Spec::new("unwatch", 1, TXN, NO_KEYS, parse).docs(
        "Stop watching keys for the next EXEC",
        "2.2.0",
        "transactions",
    ),
];

/// Session-level transaction commands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnCmd {
    /// MULTI.
    Multi,
    /// EXEC.
    Exec,
    /// DISCARD.
    Discard,
    /// WATCH keys.
    Watch(Vec<Bytes>),
    /// UNWATCH.
    Unwatch,
}

/// Parses MULTI, EXEC, DISCARD, WATCH and UNWATCH.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    let cmd = match args.name() {
        "multi" => TxnCmd::Multi,
        "exec" => TxnCmd::Exec,
        "discard" => TxnCmd::Discard,
        "watch" => TxnCmd::Watch(args.rest()),
        _ => TxnCmd::Unwatch,
    };
    Ok(Request::Conn(ConnCmd::Txn(cmd)))
}

/// The `modified` revisions of keys, read for WATCH (nil for a missing key).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Versions {
    /// The keys.
    pub keys: Vec<Bytes>,
}

impl Replicated for Versions {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["watch"], many(&self.keys), none()))
    }

    fn is_read(&self) -> bool {
        true
    }

    /// Reads the versions at `now`.
    fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        Reply::Array(
            self.keys
                .iter()
                .map(|k| version(ks, k, now).map_or(Reply::Nil, |v| Reply::Int(v as i64)))
                .collect(),
        )
    }
}

fn version(ks: &Keyspace, key: &[u8], now: u64) -> Option<u64> {
    ks.get(key, now).map(|e| e.modified)
}

/// A transaction: watched keys with the versions seen at WATCH, and the queued commands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exec {
    /// Key and version (None: the key did not exist).
    pub watched: Vec<(Bytes, Option<u64>)>,
    /// The commands, in queue order. An EXEC inside an EXEC only arrives from a peer or a
    /// corrupt disk; its depth is bounded on decode (`resp::nesting`).
    #[serde(deserialize_with = "crate::resp::nesting::nested")]
    pub cmds: Vec<Command>,
}

impl Exec {
    fn unchanged(&self, ks: &Keyspace, now: u64) -> bool {
        self.watched.iter().all(|(k, v)| version(ks, k, now) == *v)
    }

    /// True when every queued command is a read (EXEC may then use the read path).
    pub fn is_read_only(&self) -> bool {
        self.cmds.iter().all(Command::is_read)
    }
}

impl Replicated for Exec {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["exec"], none(), none()))
    }

    fn is_read(&self) -> bool {
        self.is_read_only()
    }

    fn runs_script(&self) -> bool {
        self.cmds.iter().any(Command::runs_script)
    }

    fn resolve_absolute_time(&mut self, unix_now_ms: i64) {
        for c in &mut self.cmds {
            c.resolve_absolute_time(unix_now_ms);
        }
    }

    /// Applies every command (each write gets its own revision), or replies with a null
    /// array when a watched key changed.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        if !self.unchanged(ks, ctx.now) {
            return Reply::NilArray;
        }
        let mut replies = Vec::with_capacity(self.cmds.len());
        for (i, cmd) in self.cmds.iter().enumerate() {
            let revision = if i == 0 {
                ctx.revision
            } else {
                ks.bump_revision()
            };
            replies.push(cmd.apply(ks, Ctx { revision, ..ctx }));
        }
        Reply::Array(replies)
    }

    /// Answers a read-only transaction.
    fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        if !self.unchanged(ks, now) {
            return Reply::NilArray;
        }
        Reply::Array(self.cmds.iter().map(|c| c.query(ks, now)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::Command;

    /// Decoding bounds how deeply EXECs nest (`resp::nesting`): 100,000 EXECs inside each
    /// other, as a forwarded frame could hold them, overflowed the stack.
    #[test]
    fn deeply_nested_transactions_are_refused() {
        // Tag 34 (Exec), no watched keys, one command; the innermost EXEC is empty.
        let mut frame = [34u8, 0, 1].repeat(100_000);
        frame.extend([34, 0, 0]);
        assert!(postcard::from_bytes::<Command>(&frame).is_err());
        let shallow = [34u8, 0, 1, 34, 0, 0];
        assert!(matches!(
            postcard::from_bytes::<Command>(&shallow),
            Ok(Command::Exec(_))
        ));
    }
}
