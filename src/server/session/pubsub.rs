//! A session's pub/sub state: its channels and patterns, the receiver of the local state
//! machine's events, and the Redis reply shapes (RESP3 pushes, RESP2 arrays).

use bytes::Bytes;
use tokio::sync::broadcast;

use crate::cmd::subscribe::SubCmd;
use crate::resp::Reply;
use crate::server::clients::Subscriptions;
use crate::state::{pattern, Event};

/// The subscriptions of one connection.
#[derive(Default)]
pub struct PubSub {
    subs: Subscriptions,
    rx: Option<broadcast::Receiver<Event>>,
}

/// Redis's error for a command other than the pub/sub ones in RESP2 subscribed mode.
pub fn not_allowed(name: &str) -> Reply {
    Reply::err(format!(
        "ERR Can't execute '{name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
    ))
}

/// Commands allowed in RESP2 subscribed mode.
pub fn allowed_when_subscribed(name: &str) -> bool {
    matches!(
        name,
        "subscribe" | "psubscribe" | "unsubscribe" | "punsubscribe" | "ping" | "quit" | "reset"
    )
}

impl PubSub {
    /// Number of channels plus patterns (the count in subscribe replies).
    pub fn count(&self) -> usize {
        self.subs.channels.len() + self.subs.patterns.len()
    }

    /// True while subscribed to anything.
    pub fn active(&self) -> bool {
        self.count() > 0
    }

    /// The current subscriptions (for the node-wide registry).
    pub fn subscriptions(&self) -> Subscriptions {
        self.subs.clone()
    }

    /// Applies a (P)(UN)SUBSCRIBE and returns its replies, one per name. `events` creates
    /// a receiver of the local events; it is taken before the first reply is sent, so every
    /// message published after the client sees the confirmation is delivered.
    pub fn apply(
        &mut self,
        cmd: SubCmd,
        events: impl FnOnce() -> Option<broadcast::Receiver<Event>>,
    ) -> Vec<Reply> {
        let kind = match (cmd.pattern, cmd.subscribe) {
            (false, true) => "subscribe",
            (true, true) => "psubscribe",
            (false, false) => "unsubscribe",
            (true, false) => "punsubscribe",
        };
        if cmd.subscribe && self.rx.is_none() {
            self.rx = events();
        }
        let names = if cmd.subscribe || !cmd.names.is_empty() {
            cmd.names
        } else {
            self.set(cmd.pattern).iter().cloned().collect()
        };
        let mut out = Vec::new();
        if names.is_empty() {
            out.push(Reply::Push(vec![
                Reply::text(kind),
                Reply::Nil,
                Reply::Int(0),
            ]));
        }
        for name in names {
            if cmd.subscribe {
                self.set_mut(cmd.pattern).insert(name.clone());
            } else {
                self.set_mut(cmd.pattern).remove(&name);
            }
            let count = self.count() as i64;
            out.push(Reply::Push(vec![
                Reply::text(kind),
                Reply::Bulk(name),
                Reply::Int(count),
            ]));
        }
        if !self.active() {
            self.rx = None;
        }
        out
    }

    fn set(&self, pattern: bool) -> &std::collections::BTreeSet<Bytes> {
        if pattern {
            &self.subs.patterns
        } else {
            &self.subs.channels
        }
    }

    fn set_mut(&mut self, pattern: bool) -> &mut std::collections::BTreeSet<Bytes> {
        if pattern {
            &mut self.subs.patterns
        } else {
            &mut self.subs.channels
        }
    }

    /// Drops every subscription (RESET).
    pub fn clear(&mut self) {
        *self = PubSub::default();
    }

    /// Waits for the next local event. Pending forever when not subscribed.
    pub async fn next_event(&mut self) -> Option<Event> {
        let Some(rx) = self.rx.as_mut() else {
            return std::future::pending().await;
        };
        match rx.recv().await {
            Ok(ev) => Some(ev),
            Err(broadcast::error::RecvError::Lagged(n)) => {
                tracing::warn!(lost = n, "subscriber fell behind; messages were dropped");
                None
            }
            Err(broadcast::error::RecvError::Closed) => {
                self.rx = None;
                None
            }
        }
    }

    /// The messages an event produces for this connection: `message` for a subscribed
    /// channel, then one `pmessage` per matching pattern, as Redis orders them.
    pub fn messages(&self, event: &Event) -> Vec<Reply> {
        let mut out = Vec::new();
        // Lock events become keyspace notifications; most subscribers want none, and their
        // channel names are only built for a connection that might.
        if matches!(event, Event::Lock { .. })
            && self.subs.patterns.is_empty()
            && !self.subs.channels.iter().any(|c| c.starts_with(b"__key"))
        {
            return out;
        }
        for (channel, message) in event.publications() {
            if self.subs.channels.contains(&channel) {
                out.push(Reply::Push(vec![
                    Reply::text("message"),
                    Reply::Bulk(channel.clone()),
                    Reply::Bulk(message.clone()),
                ]));
            }
            for p in &self.subs.patterns {
                if pattern::matches(p, &channel) {
                    out.push(Reply::Push(vec![
                        Reply::text("pmessage"),
                        Reply::Bulk(p.clone()),
                        Reply::Bulk(channel.clone()),
                        Reply::Bulk(message.clone()),
                    ]));
                }
            }
        }
        out
    }
}
