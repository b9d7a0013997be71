//! A session's pub/sub state: its channels and patterns, the receiver of the local state
//! machine's events, the Redis reply shapes (RESP3 pushes, RESP2 arrays), and the output
//! buffer limit of the pubsub class.

use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::broadcast;
use tokio::time::Instant;

use crate::cmd::config::obuf::ClassLimit;
use crate::cmd::subscribe::SubCmd;
use crate::resp::Reply;
use crate::server::clients::Subscriptions;
use crate::state::{pattern, Event};
use crate::store::state_machine::EventReceiver;

/// The subscriptions of one connection.
#[derive(Default)]
pub struct PubSub {
    subs: Subscriptions,
    rx: Option<EventReceiver>,
    /// `LOCKNOTIFY`: the leases this connection watches.
    pub lost: super::lost::LostLocks,
    /// Since when the pending output has been above the soft limit.
    soft_since: Option<Instant>,
}

/// Which limit a subscriber's pending output passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverLimit {
    /// Above the hard limit.
    Hard,
    /// Above the soft limit for longer than its seconds.
    Soft,
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
        "subscribe"
            | "psubscribe"
            | "ssubscribe"
            | "unsubscribe"
            | "punsubscribe"
            | "sunsubscribe"
            | "ping"
            | "quit"
            | "reset"
    )
}

impl PubSub {
    /// Number of channels plus patterns (the count in (P)(UN)SUBSCRIBE replies).
    pub fn count(&self) -> usize {
        self.subs.channels.len() + self.subs.patterns.len()
    }

    /// The count in S(UN)SUBSCRIBE replies: shard channels are counted apart, as in Redis.
    fn count_of(&self, shard: bool) -> usize {
        if shard {
            self.subs.shard.len()
        } else {
            self.count()
        }
    }

    /// True while subscribed to anything, shard channels included.
    pub fn active(&self) -> bool {
        !self.subs.is_empty()
    }

    /// The current subscriptions (for the node-wide registry).
    pub fn subscriptions(&self) -> Subscriptions {
        self.subs.clone()
    }

    /// Applies a (P|S)(UN)SUBSCRIBE and returns its replies, one per name. `events` creates
    /// a receiver of the local events; it is taken before the first reply is sent, so every
    /// message published after the client sees the confirmation is delivered.
    pub fn apply(
        &mut self,
        cmd: SubCmd,
        events: impl FnOnce() -> Option<EventReceiver>,
    ) -> Vec<Reply> {
        let kind = match (cmd.pattern, cmd.shard, cmd.subscribe) {
            (true, _, true) => "psubscribe",
            (true, _, false) => "punsubscribe",
            (false, true, true) => "ssubscribe",
            (false, true, false) => "sunsubscribe",
            (false, false, true) => "subscribe",
            (false, false, false) => "unsubscribe",
        };
        let which = (cmd.pattern, cmd.shard);
        if cmd.subscribe && self.rx.is_none() {
            self.rx = events();
        }
        let names = if cmd.subscribe || !cmd.names.is_empty() {
            cmd.names
        } else {
            self.set(which).iter().cloned().collect()
        };
        let mut out = Vec::new();
        if names.is_empty() {
            out.push(Reply::Push(vec![
                Reply::text(kind),
                Reply::Nil,
                Reply::Int(self.count_of(cmd.shard) as i64),
            ]));
        }
        for name in names {
            if cmd.subscribe {
                self.set_mut(which).insert(name.clone());
            } else {
                self.set_mut(which).remove(&name);
            }
            let count = self.count_of(cmd.shard) as i64;
            out.push(Reply::Push(vec![
                Reply::text(kind),
                Reply::Bulk(name),
                Reply::Int(count),
            ]));
        }
        if !self.active() && !self.lost.on() {
            self.rx = None;
        }
        out
    }

    /// `LOCKNOTIFY ON|OFF`: watches this connection's leases (events from `events` while on).
    pub fn lock_notify(&mut self, on: bool, events: impl FnOnce() -> Option<EventReceiver>) {
        self.lost.set(on);
        if on && self.rx.is_none() {
            self.rx = events();
        }
        if !on && !self.active() {
            self.rx = None;
        }
    }

    /// The set that `(pattern, shard)` names.
    fn set(&self, (pattern, shard): (bool, bool)) -> &std::collections::BTreeSet<Bytes> {
        match (pattern, shard) {
            (true, _) => &self.subs.patterns,
            (false, true) => &self.subs.shard,
            (false, false) => &self.subs.channels,
        }
    }

    fn set_mut(
        &mut self,
        (pattern, shard): (bool, bool),
    ) -> &mut std::collections::BTreeSet<Bytes> {
        match (pattern, shard) {
            (true, _) => &mut self.subs.patterns,
            (false, true) => &mut self.subs.shard,
            (false, false) => &mut self.subs.channels,
        }
    }

    /// Drops every subscription (RESET).
    pub fn clear(&mut self) {
        *self = PubSub::default();
    }

    /// Waits for the next local event. Pending forever when not subscribed. `Err(n)`: this
    /// connection fell `n` events behind the node's event queue, so they are lost to it.
    pub async fn next_event(&mut self) -> Result<Arc<Event>, u64> {
        loop {
            let Some(rx) = self.rx.as_mut() else {
                return std::future::pending().await;
            };
            match rx.recv().await {
                Ok(ev) => return Ok(ev),
                Err(broadcast::error::RecvError::Lagged(n)) => return Err(n),
                Err(broadcast::error::RecvError::Closed) => self.rx = None,
            }
        }
    }

    /// Checks `pending` bytes of output against the pubsub class's `limit` at `now`, as
    /// Redis does each time it queues output: above the hard limit at once, above the soft
    /// limit once it has stayed above it for more than its seconds.
    pub fn over_limit(
        &mut self,
        pending: usize,
        limit: ClassLimit,
        now: Instant,
    ) -> Option<OverLimit> {
        let pending = pending as u64;
        if limit.hard > 0 && pending > limit.hard {
            return Some(OverLimit::Hard);
        }
        if limit.soft == 0 || pending <= limit.soft {
            self.soft_since = None;
            return None;
        }
        let since = *self.soft_since.get_or_insert(now);
        (now.duration_since(since).as_secs() > limit.soft_secs).then_some(OverLimit::Soft)
    }

    /// The messages an event produces for this connection: `message` for a subscribed
    /// channel, then one `pmessage` per matching pattern, as Redis orders them; `smessage`
    /// for a shard channel's.
    pub fn messages(&mut self, event: &Event) -> Vec<Reply> {
        let mut out = Vec::new();
        out.extend(self.lost.push(event));
        if let Event::ShardPublish { channel, message } = event {
            if self.subs.shard.contains(channel) {
                out.push(Reply::Push(vec![
                    Reply::text("smessage"),
                    Reply::Bulk(channel.clone()),
                    Reply::Bulk(message.clone()),
                ]));
            }
            return out;
        }
        // Lock events become keyspace notifications; most subscribers want none, and their
        // channel names are only built for a connection that might.
        if matches!(event, Event::Lock { .. } | Event::Notify { .. })
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn hard_at_once_soft_after_its_seconds() {
        let limit = ClassLimit {
            hard: 100,
            soft: 10,
            soft_secs: 2,
        };
        let mut p = PubSub::default();
        let t0 = Instant::now();
        assert_eq!(p.over_limit(101, limit, t0), Some(OverLimit::Hard));
        assert_eq!(p.over_limit(11, limit, t0), None);
        assert_eq!(p.over_limit(50, limit, t0 + Duration::from_secs(2)), None);
        assert_eq!(
            p.over_limit(50, limit, t0 + Duration::from_secs(3)),
            Some(OverLimit::Soft)
        );
        // Falling under the soft limit starts the clock again.
        assert_eq!(p.over_limit(10, limit, t0 + Duration::from_secs(3)), None);
        assert_eq!(p.over_limit(11, limit, t0 + Duration::from_secs(4)), None);
        // Zero: no limit.
        let none = ClassLimit {
            hard: 0,
            soft: 0,
            soft_secs: 0,
        };
        assert_eq!(p.over_limit(usize::MAX, none, t0), None);
    }
}
