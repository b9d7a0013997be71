//! `SPUBLISH shardchannel message`.
//!
//! Palisade is not a Redis Cluster, so like a non-cluster Redis 7.0 its shard channels are
//! one more channel namespace beside the ordinary one: a message SPUBLISHed reaches the
//! connections that SSUBSCRIBEd to its channel (as `smessage`), never SUBSCRIBErs or
//! patterns. It is replicated like PUBLISH (`publish.rs`): apply records a `ShardPublish`
//! event that every node delivers to its own shard subscribers, and the session replaces
//! apply's 0 with the number of receivers on its node.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::keyspec::Channels;
use crate::cmd::registry::{none, Own, Replicated, Spec, Touches, ONE_KEY};
use crate::cmd::{Command, Ctx, Request};
use crate::resp::{Args, Reply};
use crate::state::{Event, Keyspace};

/// This file's rows of the command table (the channel is a `not_key` key, as in Redis).
pub static COMMANDS: &[Spec] = &[Spec::new(
    "spublish",
    3,
    &["pubsub", "loading", "stale", "fast"],
    ONE_KEY,
    parse,
)
.key_specs("not_key@i1/r0,1,0")
.channels(Channels::FIRST)
.args("shardchannel message")
.docs("Post a message to a shard channel", "7.0.0", "pubsub")
.own(&[Own::MayReplicate])];

/// A parsed SPUBLISH.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SPublish {
    /// The shard channel.
    pub channel: Bytes,
    /// The message.
    pub message: Bytes,
}

/// Parses SPUBLISH.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    Ok(Request::Data(Command::SPublish(SPublish {
        channel: args.arg()?,
        message: args.arg()?,
    })))
}

impl Replicated for SPublish {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["spublish"], none(), vec![self.channel.as_ref()]))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Records the message for delivery to shard subscribers.
    fn apply(&self, ks: &mut Keyspace, _ctx: Ctx) -> Reply {
        ks.emit(Event::ShardPublish {
            channel: self.channel.clone(),
            message: self.message.clone(),
        });
        Reply::Int(0)
    }
}
