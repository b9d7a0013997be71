//! What apply reports to the local node: [`Event`]s, delivered after the batch is durable.

use bytes::Bytes;

use super::Keyspace;
use crate::state::locks::{lock_notifications, LockEventKind, WaiterId};

/// Something apply wants the local node to observe after the batch is durable: an output of
/// the state machine (delivery to subscribers, wake-ups), never an input to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A message published to a channel.
    Publish {
        /// The channel.
        channel: Bytes,
        /// The message.
        message: Bytes,
    },
    /// A message published to a shard channel (SPUBLISH): delivered to shard subscribers
    /// only, a namespace apart from [`Event::Publish`]'s channels.
    ShardPublish {
        /// The shard channel.
        channel: Bytes,
        /// The message.
        message: Bytes,
    },
    /// A key was given data that blocked pops may take (a push, a move, a store): it makes
    /// the key ready for serving ([`super::popq`]). Consumed inside apply, never delivered.
    Touched(Bytes),
    /// A lock was granted, released, renewed or lost (keyspace notifications; a grant to a
    /// waiter also names it, so that its node can answer it).
    Lock {
        /// What happened.
        kind: LockEventKind,
        /// The lock's key.
        key: Bytes,
        /// The lease's fencing token.
        token: u64,
        /// The lease's owner.
        owner: Bytes,
        /// The waiter granted the lock (grants from the queue only).
        waiter: Option<WaiterId>,
    },
    /// A client blocked in a pop was served ([`super::popq`]): its node hands it the reply.
    Served {
        /// The waiter.
        waiter: WaiterId,
        /// The reply, encoded by the `cmd` layer.
        reply: Bytes,
    },
    /// A keyspace notification ([`Keyspace::notify`]), for the channels chosen when it was
    /// recorded.
    Notify {
        /// Redis's event name (`set`, `del`, `expired`, ...).
        event: &'static str,
        /// The key.
        key: Bytes,
        /// Publish on `__keyspace@0__:<key>`.
        keyspace: bool,
        /// Publish on `__keyevent@0__:<event>`.
        keyevent: bool,
    },
}

impl Event {
    /// The pub/sub messages the event stands for: (channel, message) pairs.
    pub fn publications(&self) -> Vec<(Bytes, Bytes)> {
        match self {
            Event::Publish { channel, message } => vec![(channel.clone(), message.clone())],
            Event::Touched(_) | Event::Served { .. } | Event::ShardPublish { .. } => Vec::new(),
            Event::Lock {
                kind,
                key,
                token,
                owner,
                ..
            } => lock_notifications(*kind, key, *token, owner).to_vec(),
            Event::Notify {
                event,
                key,
                keyspace,
                keyevent,
            } => {
                let mut out = Vec::with_capacity(2);
                if *keyspace {
                    let mut channel = b"__keyspace@0__:".to_vec();
                    channel.extend_from_slice(key);
                    out.push((Bytes::from(channel), Bytes::from_static(event.as_bytes())));
                }
                if *keyevent {
                    out.push((Bytes::from(format!("__keyevent@0__:{event}")), key.clone()));
                }
                out
            }
        }
    }
}

impl Keyspace {
    /// Records an event for the local node (delivered after the batch is persisted).
    pub fn emit(&mut self, event: Event) {
        if let Event::Touched(key) = &event {
            self.mark_ready(key);
            return;
        }
        self.events.push(event);
    }

    /// Takes the events recorded since the last call.
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }
}
