//! The registry of connected clients, for CLIENT LIST/INFO/KILL, CLIENT PAUSE and INFO's
//! clients section.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

pub use crate::cmd::client::KillFilter;

/// What CLIENT LIST shows about one connection.
#[derive(Debug, Clone)]
pub struct ClientInfo {
    /// Connection id.
    pub id: u64,
    /// Peer address.
    pub addr: SocketAddr,
    /// Local address.
    pub laddr: SocketAddr,
    /// CLIENT SETNAME.
    pub name: String,
    /// CLIENT SETINFO LIB-NAME.
    pub lib_name: String,
    /// CLIENT SETINFO LIB-VER.
    pub lib_ver: String,
    /// Protocol version.
    pub resp: u8,
    /// Connected at.
    pub since: Instant,
    /// Last command at.
    pub last: Instant,
    /// Last command name.
    pub cmd: String,
    /// Waiting in BLPOP/BRPOP for a push (CLIENT LIST `flags=b`, as Redis).
    pub blocked: bool,
    /// The ACL user the connection is authenticated as.
    pub user: String,
    /// Set by CLIENT KILL; the session closes at its next chance.
    pub killed: Arc<Killed>,
}

/// A connection's kill switch (CLIENT KILL).
#[derive(Debug, Default)]
pub struct Killed {
    /// Set once the client is to close.
    pub flag: AtomicBool,
    /// Wakes the session if it is waiting for input.
    pub notify: tokio::sync::Notify,
    /// CLIENT UNBLOCK ... ERROR (rather than TIMEOUT): set before `unblock` is notified.
    pub unblock_error: AtomicBool,
    /// Wakes the session out of a blocking command (CLIENT UNBLOCK). Notified with
    /// `notify_waiters`, so no permit is left for a later command.
    pub unblock: Arc<tokio::sync::Notify>,
}

/// A blocking command's wait for CLIENT UNBLOCK. Armed before the client is marked blocked,
/// so an UNBLOCK that sees the mark reaches it.
pub struct UnblockWait {
    switches: Arc<Killed>,
    notified: std::pin::Pin<Box<tokio::sync::futures::OwnedNotified>>,
}

impl UnblockWait {
    /// Arms the wait on a connection's switches.
    pub fn arm(switches: Arc<Killed>) -> UnblockWait {
        let mut notified = Box::pin(switches.unblock.clone().notified_owned());
        notified.as_mut().enable();
        UnblockWait { switches, notified }
    }

    /// Resolves when CLIENT UNBLOCK picks this client: true for `ERROR`, false for
    /// `TIMEOUT`.
    pub async fn wait(&mut self) -> bool {
        self.notified.as_mut().await;
        self.switches.unblock_error.load(Ordering::Acquire)
    }
}

impl Killed {
    /// True once CLIENT KILL chose this client.
    pub fn is_set(&self) -> bool {
        self.flag.load(Ordering::Acquire)
    }

    fn kill(&self) {
        self.flag.store(true, Ordering::Release);
        self.notify.notify_one();
    }
}

/// CLIENT PAUSE: until when, and whether reads wait too (`ALL`) or only writes (`WRITE`).
#[derive(Debug, Clone, Copy)]
struct Pause {
    until: Instant,
    all: bool,
}

impl ClientInfo {
    /// One CLIENT LIST line, with Redis's field names and order.
    pub fn line(&self) -> String {
        format!(
            "id={} addr={} laddr={} fd=0 name={} age={} idle={} flags={} db=0 sub=0 psub=0 ssub=0 multi=-1 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd={} user={} redir=-1 resp={} lib-name={} lib-ver={}",
            self.id,
            self.addr,
            self.laddr,
            self.name,
            self.since.elapsed().as_secs(),
            self.last.elapsed().as_secs(),
            if self.blocked { "b" } else { "N" },
            self.cmd,
            self.user,
            self.resp,
            self.lib_name,
            self.lib_ver
        )
    }
}

/// All connected clients.
#[derive(Default)]
pub struct Clients {
    map: Mutex<BTreeMap<u64, ClientInfo>>,
    /// Pub/sub subscriptions on this node: client id -> (channels, patterns).
    subs: Mutex<BTreeMap<u64, Subscriptions>>,
    /// CLIENT PAUSE in force on this node (None: none).
    pause: Mutex<Option<Pause>>,
    /// Woken by CLIENT UNPAUSE and by a new CLIENT PAUSE.
    pub pause_changed: tokio::sync::Notify,
    /// The sessions in MONITOR mode.
    pub monitors: super::monitor::Monitors,
}

/// One client's channels and patterns.
#[derive(Default, Debug, Clone)]
pub struct Subscriptions {
    /// Exact channels.
    pub channels: BTreeSet<Bytes>,
    /// Glob patterns.
    pub patterns: BTreeSet<Bytes>,
    /// Shard channels (SSUBSCRIBE), a namespace apart from `channels`.
    pub shard: BTreeSet<Bytes>,
}

impl Subscriptions {
    /// True when subscribed to nothing at all.
    pub fn is_empty(&self) -> bool {
        self.channels.is_empty() && self.patterns.is_empty() && self.shard.is_empty()
    }
}

impl Clients {
    /// Registers a connection.
    pub fn add(&self, info: ClientInfo) {
        if let Ok(mut m) = self.map.lock() {
            m.insert(info.id, info);
        }
    }

    /// Removes a connection (and its subscriptions).
    pub fn remove(&self, id: u64) {
        if let Ok(mut m) = self.map.lock() {
            m.remove(&id);
        }
        self.set_subscriptions(id, Subscriptions::default());
    }

    /// Records a client's current subscriptions (empty: none).
    pub fn set_subscriptions(&self, id: u64, subs: Subscriptions) {
        if let Ok(mut m) = self.subs.lock() {
            if subs.is_empty() {
                m.remove(&id);
            } else {
                m.insert(id, subs);
            }
        }
    }

    /// How many local receivers a message on `channel` has: one per client subscribed to
    /// the channel plus one per matching pattern of each client, as Redis counts for PUBLISH.
    pub fn receivers(&self, channel: &[u8]) -> i64 {
        let Ok(m) = self.subs.lock() else {
            return 0;
        };
        m.values()
            .map(|s| {
                let exact = s.channels.contains(channel) as i64;
                let by_pattern = s
                    .patterns
                    .iter()
                    .filter(|p| crate::state::pattern::matches(p, channel))
                    .count() as i64;
                exact + by_pattern
            })
            .sum()
    }

    /// Channels with a subscriber on this node, and distinct patterns subscribed to
    /// and shard channels with a subscriber (INFO `pubsub_channels`, `pubsub_patterns`,
    /// `pubsubshard_channels`).
    pub fn pubsub_counts(&self) -> (usize, usize, usize) {
        let (channels, patterns) = self.subscribed();
        (
            channels.len(),
            patterns.len(),
            self.shard_subscribed().len(),
        )
    }

    /// Every channel with a subscriber on this node, and every subscribed pattern, each once.
    pub fn subscribed(&self) -> (BTreeSet<Bytes>, BTreeSet<Bytes>) {
        let Ok(m) = self.subs.lock() else {
            return Default::default();
        };
        let channels = m
            .values()
            .flat_map(|s| s.channels.iter().cloned())
            .collect();
        let patterns = m
            .values()
            .flat_map(|s| s.patterns.iter().cloned())
            .collect();
        (channels, patterns)
    }

    /// Every shard channel with a subscriber on this node, each once (PUBSUB SHARDCHANNELS).
    pub fn shard_subscribed(&self) -> BTreeSet<Bytes> {
        self.subs.lock().map_or_else(
            |_| BTreeSet::new(),
            |m| m.values().flat_map(|s| s.shard.iter().cloned()).collect(),
        )
    }

    /// How many clients of this node subscribe to shard channel `channel` (SPUBLISH's
    /// receivers, PUBSUB SHARDNUMSUB).
    pub fn shard_subscribers(&self, channel: &[u8]) -> i64 {
        self.subs.lock().map_or(0, |m| {
            m.values().filter(|s| s.shard.contains(channel)).count() as i64
        })
    }

    /// How many clients of this node subscribe to `channel` itself (PUBSUB NUMSUB).
    pub fn subscribers(&self, channel: &[u8]) -> i64 {
        self.subs.lock().map_or(0, |m| {
            m.values().filter(|s| s.channels.contains(channel)).count() as i64
        })
    }

    /// Updates a connection's record.
    pub fn update(&self, id: u64, f: impl FnOnce(&mut ClientInfo)) {
        if let Ok(mut m) = self.map.lock() {
            if let Some(c) = m.get_mut(&id) {
                f(c);
            }
        }
    }

    /// Marks client `id` as blocked until the returned guard is dropped.
    pub fn block(&self, id: u64) -> Blocked<'_> {
        self.update(id, |c| c.blocked = true);
        Blocked { clients: self, id }
    }

    /// CLIENT UNBLOCK: wakes client `id` out of its blocking command, as if it timed out or
    /// (`error`) with an UNBLOCKED error. False if it is not blocked.
    pub fn unblock(&self, id: u64, error: bool) -> bool {
        let Some(k) = self
            .map
            .lock()
            .ok()
            .and_then(|m| m.get(&id).filter(|c| c.blocked).map(|c| c.killed.clone()))
        else {
            return false;
        };
        k.unblock_error.store(error, Ordering::Release);
        k.unblock.notify_waiters();
        true
    }

    /// Number of connections.
    pub fn len(&self) -> usize {
        self.map.lock().map(|m| m.len()).unwrap_or(0)
    }

    /// Connected clients waiting in a blocking command (BLPOP, BRPOP, `LOCK ... WAIT`).
    pub fn blocked(&self) -> usize {
        self.map
            .lock()
            .map(|m| m.values().filter(|c| c.blocked).count())
            .unwrap_or(0)
    }

    /// True when no client is connected.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Kills the clients matching `f` (`me`: the caller); returns how many.
    pub fn kill(&self, f: &KillFilter, me: u64) -> usize {
        if f.no_type {
            return 0;
        }
        let subscribed: BTreeSet<u64> = self
            .subs
            .lock()
            .map(|m| m.keys().copied().collect())
            .unwrap_or_default();
        let Ok(m) = self.map.lock() else { return 0 };
        let mut n = 0;
        // A client killed before is as good as gone (Redis frees it at once): not counted
        // again while its session winds down.
        for c in m.values().filter(|c| !c.killed.is_set()) {
            let matches = f.id.is_none_or(|id| id == c.id)
                && f.addr.as_ref().is_none_or(|a| *a == c.addr.to_string())
                && f.laddr.as_ref().is_none_or(|a| *a == c.laddr.to_string())
                && f.user.as_ref().is_none_or(|u| *u == c.user)
                && f.pubsub.is_none_or(|p| p == subscribed.contains(&c.id))
                && !(f.skipme && c.id == me);
            if matches {
                c.killed.kill();
                n += 1;
            }
        }
        n
    }

    /// The kill switch of client `id` (a fresh one if it is not registered).
    pub fn killed(&self, id: u64) -> Arc<Killed> {
        self.map
            .lock()
            .ok()
            .and_then(|m| m.get(&id).map(|c| c.killed.clone()))
            .unwrap_or_default()
    }

    /// CLIENT PAUSE: commands (`all`) or writes wait until `until` or CLIENT UNPAUSE. A
    /// pause in force is only ever extended, and an `ALL` one is not narrowed to `WRITE`
    /// while it lasts, as in Redis.
    pub fn pause(&self, until: Instant, all: bool) {
        if let Ok(mut p) = self.pause.lock() {
            let now = Instant::now();
            *p = Some(match *p {
                Some(old) if old.until > now => Pause {
                    until: old.until.max(until),
                    all: old.all || all,
                },
                _ => Pause { until, all },
            });
        }
        self.pause_changed.notify_waiters();
    }

    /// CLIENT UNPAUSE.
    pub fn unpause(&self) {
        if let Ok(mut p) = self.pause.lock() {
            *p = None;
        }
        self.pause_changed.notify_waiters();
    }

    /// Until when a command must wait (`write`: it may change the data), or None.
    pub fn paused_until(&self, write: bool) -> Option<Instant> {
        let p = (*self.pause.lock().ok()?)?;
        (p.until > Instant::now() && (p.all || write)).then_some(p.until)
    }

    /// One connection's line.
    pub fn line(&self, id: u64) -> String {
        self.map
            .lock()
            .ok()
            .and_then(|m| m.get(&id).map(ClientInfo::line))
            .unwrap_or_default()
    }

    /// All lines, each ending in a newline.
    pub fn list(&self) -> String {
        self.map
            .lock()
            .map(|m| m.values().map(|c| c.line() + "\n").collect())
            .unwrap_or_default()
    }
}

/// A client's blocked mark (see [`Clients::block`]); dropping it clears the mark, on every
/// way out of the blocking command.
pub struct Blocked<'a> {
    clients: &'a Clients,
    id: u64,
}

impl Drop for Blocked<'_> {
    fn drop(&mut self) {
        self.clients.update(self.id, |c| c.blocked = false);
    }
}
