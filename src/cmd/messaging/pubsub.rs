//! `PUBSUB CHANNELS [pattern]`, `PUBSUB NUMSUB [channel ...]`, `PUBSUB NUMPAT`,
//! `PUBSUB SHARDCHANNELS [pattern]`, `PUBSUB SHARDNUMSUB [channel ...]`, `PUBSUB HELP`.
//!
//! Subscriptions belong to a connection and its node, so these count the subscribers of the
//! node that answers (as PUBLISH's reply does); SHARDCHANNELS and SHARDNUMSUB those of the
//! shard channels (SSUBSCRIBE), counted apart.

use bytes::Bytes;

use crate::cmd::config::{help, sub_arity, subcommand, unknown_subcommand};
use crate::cmd::connection::ConnCmd;
use crate::cmd::registry::flags::PUBSUB;
use crate::cmd::registry::{Spec, NO_KEYS};
use crate::cmd::Request;
use crate::resp::{Args, Reply};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[Spec::new("pubsub", -2, PUBSUB, NO_KEYS, parse)
    .docs("A container for Pub/Sub commands", "2.8.0", "pubsub")
    .subcommands(SUBCOMMANDS)];

/// PUBSUB's subcommands (`pubsub|name`): Redis's facts (`scripts/command-args.py
/// --subcommands pubsub`).
const SUBCOMMANDS: &[Spec] = &[
    Spec::new(
        "channels",
        -2,
        &["pubsub", "loading", "stale"],
        NO_KEYS,
        parse,
    )
    .docs("List the channels with subscribers", "2.8.0", "pubsub")
    .args("pattern:pattern?"),
    Spec::new("help", 2, &["loading", "stale"], NO_KEYS, parse)
        .docs("List the subcommands and what they take", "6.2.0", "pubsub")
        .categories(&[]),
    Spec::new("numpat", 2, &["pubsub", "loading", "stale"], NO_KEYS, parse).docs(
        "Count the subscribed patterns",
        "2.8.0",
        "pubsub",
    ),
    Spec::new(
        "numsub",
        -2,
        &["pubsub", "loading", "stale"],
        NO_KEYS,
        parse,
    )
    .docs("Count each channel's subscribers", "2.8.0", "pubsub")
    .args("channel?*"),
    Spec::new(
        "shardchannels",
        -2,
        &["pubsub", "loading", "stale"],
        NO_KEYS,
        parse,
    )
    .docs(
        "List the shard channels with subscribers",
        "7.0.0",
        "pubsub",
    )
    .args("pattern:pattern?"),
    Spec::new(
        "shardnumsub",
        -2,
        &["pubsub", "loading", "stale"],
        NO_KEYS,
        parse,
    )
    .docs("Count each shard channel's subscribers", "7.0.0", "pubsub")
    .args("shardchannel?*"),
];

/// A parsed PUBSUB subcommand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PubSubCmd {
    /// CHANNELS: the channels with at least one subscriber, matching the pattern if given.
    Channels(Option<Bytes>),
    /// NUMSUB: each channel's number of (non-pattern) subscribers.
    NumSub(Vec<Bytes>),
    /// NUMPAT: the number of distinct subscribed patterns.
    NumPat,
    /// SHARDCHANNELS: the shard channels with at least one subscriber, matching the pattern
    /// if given.
    ShardChannels(Option<Bytes>),
    /// SHARDNUMSUB: each shard channel's number of subscribers.
    ShardNumSub(Vec<Bytes>),
}

const HELP: &[&str] = &[
    "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CHANNELS [<pattern>]",
    "    Return the currently active channels matching a <pattern> (default: '*').",
    "NUMPAT",
    "    Return number of subscriptions to patterns.",
    "NUMSUB [<channel> ...]",
    "    Return the number of subscribers for the specified channels, excluding",
    "    pattern subscriptions(default: no channels).",
    "SHARDCHANNELS [<pattern>]",
    "    Return the currently active shard level channels matching a <pattern> (default: '*').",
    "SHARDNUMSUB [<shardchannel> ...]",
    "    Return the number of subscribers for the specified shard level channel(s)",
    "HELP",
    "    Prints this help.",
];

/// Redis's reply when CHANNELS or SHARDCHANNELS gets more than one pattern.
fn too_many(raw: &[u8]) -> Reply {
    Reply::err(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try PUBSUB HELP.",
        String::from_utf8_lossy(raw)
    ))
}

/// Parses PUBSUB.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    let (raw, sub) = subcommand(args)?;
    let n = args.remaining();
    let cmd = match (sub.as_str(), n) {
        ("channels", 0) => PubSubCmd::Channels(None),
        ("channels", 1) => PubSubCmd::Channels(Some(args.arg()?)),
        ("shardchannels", 0) => PubSubCmd::ShardChannels(None),
        ("shardchannels", 1) => PubSubCmd::ShardChannels(Some(args.arg()?)),
        ("channels" | "shardchannels", _) => return Err(too_many(&raw)),
        ("numsub", _) => PubSubCmd::NumSub(args.rest()),
        ("shardnumsub", _) => PubSubCmd::ShardNumSub(args.rest()),
        ("numpat", 0) => PubSubCmd::NumPat,
        ("help", 0) => return Ok(Request::Conn(ConnCmd::Command(help(HELP)))),
        ("numpat" | "help", _) => return Err(sub_arity("pubsub", &sub)),
        _ => return Err(unknown_subcommand(&raw, "PUBSUB")),
    };
    Ok(Request::Conn(ConnCmd::PubSub(cmd)))
}

/// Each channel followed by its count: a flat array in RESP3 too, as Redis 7 replies.
pub fn counts(channels: Vec<Bytes>, count: impl Fn(&[u8]) -> i64) -> Reply {
    Reply::Array(
        channels
            .into_iter()
            .flat_map(|c| {
                let n = count(&c);
                [Reply::Bulk(c), Reply::Int(n)]
            })
            .collect(),
    )
}
