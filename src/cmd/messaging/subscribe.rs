//! Pub/sub subscriptions: `SUBSCRIBE channel [channel ...]`, `UNSUBSCRIBE [channel ...]`,
//! `PSUBSCRIBE pattern [pattern ...]`, `PUNSUBSCRIBE [pattern ...]`,
//! `SSUBSCRIBE shardchannel [shardchannel ...]`, `SUNSUBSCRIBE [shardchannel ...]`.
//!
//! Shard channels are a namespace of their own, as in a non-cluster Redis 7.0: they receive
//! only SPUBLISH (`spublish.rs`), and their replies count the shard subscriptions apart.
//!
//! Subscriptions belong to the connection and its node; the session delivers the `Publish`
//! events that the local state machine emits (see `publish.rs`).

use bytes::Bytes;

use crate::cmd::keyspec::Channels;
use crate::cmd::registry::flags::PUBSUB;
use crate::cmd::registry::{Spec, ALL_KEYS, NO_KEYS};
use crate::cmd::{ConnCmd, Request};
use crate::resp::{Args, Reply};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new("subscribe", -2, PUBSUB, NO_KEYS, parse)
        .channels(Channels::ALL)
        .args("channel*")
        .docs(
            "Receive the messages published to channels",
            "2.0.0",
            "pubsub",
        ),
    Spec::new("psubscribe", -2, PUBSUB, NO_KEYS, parse)
        .channels(Channels::PATTERNS)
        .args("{pattern:pattern}*")
        .docs(
            "Receive the messages published to channels matching patterns",
            "2.0.0",
            "pubsub",
        ),
    Spec::new("unsubscribe", -1, PUBSUB, NO_KEYS, parse)
        .args("channel?*")
        .docs("Stop receiving the messages of channels", "2.0.0", "pubsub"),
    Spec::new("punsubscribe", -1, PUBSUB, NO_KEYS, parse)
        .args("pattern:pattern?*")
        .docs(
            "Stop receiving the messages of channel patterns",
            "2.0.0",
            "pubsub",
        ),
    // The shard channels sit in key positions (`not_key` key specs in Redis).
    Spec::new("ssubscribe", -2, PUBSUB, ALL_KEYS, parse)
        .key_specs("not_key@i1/r-1,1,0")
        .channels(Channels::ALL)
        .args("shardchannel*")
        .docs(
            "Receive the messages posted to shard channels",
            "7.0.0",
            "pubsub",
        ),
    Spec::new("sunsubscribe", -1, PUBSUB, ALL_KEYS, parse)
        .key_specs("not_key@i1/r-1,1,0")
        .args("shardchannel?*")
        .docs(
            "Stop receiving the messages of shard channels",
            "7.0.0",
            "pubsub",
        ),
];

/// A subscription change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubCmd {
    /// Patterns (PSUBSCRIBE/PUNSUBSCRIBE) rather than channels.
    pub pattern: bool,
    /// Shard channels (SSUBSCRIBE/SUNSUBSCRIBE) rather than channels.
    pub shard: bool,
    /// Subscribe (true) or unsubscribe.
    pub subscribe: bool,
    /// Channels or patterns; empty for "all" when unsubscribing.
    pub names: Vec<Bytes>,
}

/// Parses the six commands.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    let name = args.name().to_string();
    Ok(Request::Conn(ConnCmd::Sub(SubCmd {
        pattern: name.starts_with('p'),
        shard: matches!(name.as_str(), "ssubscribe" | "sunsubscribe"),
        subscribe: !name.contains("unsub"),
        names: args.rest(),
    })))
}
