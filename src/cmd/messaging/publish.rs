//! `PUBLISH channel message`.
//!
//! PUBLISH is a replicated write: apply records a `Publish` event, and every node delivers
//! it to its own subscribers once the entry is applied there, so each subscriber anywhere
//! receives it exactly once. Apply cannot know who is subscribed (that is local, not
//! replicated), so it replies 0; the session replaces that with the number of receivers on
//! its node, which is what Redis Cluster's PUBLISH returns. A PUBLISH called from a script
//! returns 0 to the script.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::keyspec::Channels;
use crate::cmd::registry::{none, Own, Replicated, Spec, Touches, NO_KEYS};
use crate::cmd::{Command, Ctx, Request};
use crate::resp::{Args, Reply};
use crate::state::{Event, Keyspace};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[Spec::new(
    "publish",
    3,
    &["pubsub", "loading", "stale", "fast"],
    NO_KEYS,
    parse,
)
.channels(Channels::FIRST)
.args("channel message")
.docs(
    "Send a message to the subscribers of a channel",
    "2.0.0",
    "pubsub",
)
.own(&[Own::MayReplicate])];

/// A parsed PUBLISH.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Publish {
    /// The channel.
    pub channel: Bytes,
    /// The message.
    pub message: Bytes,
}

/// Parses PUBLISH.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    Ok(Request::Data(Command::Publish(Publish {
        channel: args.arg()?,
        message: args.arg()?,
    })))
}

impl Replicated for Publish {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["publish"], none(), vec![self.channel.as_ref()]))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Records the message for delivery.
    fn apply(&self, ks: &mut Keyspace, _ctx: Ctx) -> Reply {
        ks.emit(Event::Publish {
            channel: self.channel.clone(),
            message: self.message.clone(),
        });
        Reply::Int(0)
    }
}
