//! [`Shared`]: the state every task of the server shares, and its live settings.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::clients::Clients;
use super::forward::LeaderLink;
use super::proposer::{Clock, Proposer};
use super::reader::Reader;
use super::{cluster, lockwait, metrics, popwait, save, Stats};
use crate::cmd::Command;
use crate::config::Config;
use crate::raft::Raft;
use crate::resp::Reply;
use crate::store::SmState;

/// State shared by every task of the server.
pub struct Shared {
    /// Resolved configuration.
    pub config: Config,
    /// Peer connections refused in the handshake (shared with the peer service).
    pub peer_refusals: Arc<crate::raft::service::Refusals>,
    /// Raft handle.
    pub raft: Raft,
    /// The state machine's shared state.
    pub state: Arc<RwLock<SmState>>,
    /// Monotonic clock for leader timestamps.
    pub clock: Clock,
    /// Write batching.
    pub proposer: Proposer,
    /// Read batching.
    pub reader: Reader,
    /// Connected clients.
    pub clients: Clients,
    /// Counters.
    pub stats: Stats,
    /// Random id of this process (INFO run_id).
    pub run_id: String,
    /// Start time.
    pub started: Instant,
    /// The bound client address (the TLS one when the node serves TLS only).
    pub addr: SocketAddr,
    /// Client TLS and the peer port's mutual TLS, reloaded on SIGHUP (None: no TLS).
    pub tls: Option<Arc<crate::tls::Tls>>,
    /// The way to the leader (forwarding) and the peer identity.
    pub link: Arc<LeaderLink>,
    /// The store (INFO reads its memory figures).
    pub db: Arc<rocksdb::DB>,
    /// The log's sync counters (INFO) and test-only sync delay (RAFT.FAULT SYNCDELAY).
    pub sync: Arc<crate::store::log::SyncStats>,
    /// This node's clients waiting in a lock queue.
    pub waiters: lockwait::Waiters,
    /// This node's clients blocked in BLPOP and the other blocking pops (the queue itself is
    /// replicated: `state::popq`).
    pub pop_waiters: popwait::PopWaiters,
    /// CONFIG's parameters; the live ones are read from here, not from `config`.
    pub settings: crate::cmd::config::Store,
    /// Commands slower than `slowlog-log-slower-than`.
    pub slowlog: crate::cmd::slowlog::SlowLog,
    /// Unix time (seconds) at which the server started.
    pub started_unix: i64,
    /// SAVE/BGSAVE: the last snapshot asked for (LASTSAVE, INFO persistence).
    pub saves: save::Saves,
    /// Signalled by SHUTDOWN; [`super::Server::shutdown_requested`] waits for it.
    pub shutdown: tokio::sync::Notify,
    /// This node's applied ACL users ([`crate::store::SmState::acl`]).
    pub acl: watch::Receiver<Arc<crate::state::acl::Users>>,
    /// ACL LOG: this node's recent refusals.
    pub acl_log: crate::cmd::acl::log::Log,
    /// The client addresses other members announce (CLUSTER SLOTS, NODES, SHARDS).
    pub announced: cluster::Announced,
    /// The families `--metrics-addr` serves (None: metrics are off).
    pub metrics: Option<metrics::Metrics>,
}

impl Shared {
    /// A LOCK with the server's `--lock-delay-ms` where it gives no DELAY.
    pub fn with_default_delay(
        &self,
        mut lock: crate::cmd::lock::Acquire,
    ) -> crate::cmd::lock::Acquire {
        lock.delay_ms = lock.delay_ms.or(Some(self.lock_delay_ms()));
        lock
    }

    /// The default lock-delay now (`--lock-delay-ms`, or CONFIG SET lock-delay-ms).
    pub fn lock_delay_ms(&self) -> u64 {
        self.settings.live.lock_delay_ms.load(Ordering::Relaxed)
    }

    /// The client request limits now (flags, or CONFIG SET).
    pub fn limits(&self) -> crate::resp::Limits {
        let live = &self.settings.live;
        crate::resp::Limits {
            max_bulk_len: live.max_bulk_len.load(Ordering::Relaxed),
            max_multibulk_len: live.max_multibulk_len.load(Ordering::Relaxed),
            max_query_buffer: live.max_query_buffer.load(Ordering::Relaxed),
        }
    }

    /// The most clients at once now.
    pub fn maxclients(&self) -> usize {
        self.settings.live.maxclients.load(Ordering::Relaxed)
    }

    /// The password clients need now, if any (`requirepass ""` is none, as in Redis).
    pub fn requirepass(&self) -> Option<String> {
        Some(self.settings.value("requirepass")).filter(|p| !p.is_empty())
    }

    /// True if the default user can be used without a password: the one question
    /// protected mode asks about users (with ACL users, "the default user is `nopass`").
    pub fn default_user_needs_no_password(&self) -> bool {
        // As Redis: the default user is `nopass`; a password from `requirepass` or
        // ACL SETUSER lifts protected mode.
        self.user(crate::state::acl::DEFAULT_USER)
            .is_some_and(|u| u.nopass)
    }

    /// Protected mode as Redis 7: while it is on and the default user needs no password,
    /// only loopback clients are served. A node bound to loopback only gets no others.
    pub fn protected_mode_refuses(&self, peer: std::net::IpAddr) -> bool {
        let loopback = match peer {
            std::net::IpAddr::V6(v6) => v6
                .to_ipv4_mapped()
                .map_or(v6.is_loopback(), |v4| v4.is_loopback()),
            v4 => v4.is_loopback(),
        };
        self.settings.live.protected_mode.load(Ordering::Relaxed)
            && !loopback
            && self.default_user_needs_no_password()
    }

    /// The pubsub class of `client-output-buffer-limit` now: hard and soft limits in bytes
    /// (0: none) and the soft limit's seconds.
    pub fn pubsub_output_limit(&self) -> crate::cmd::config::obuf::ClassLimit {
        let [hard, soft, secs] = &self.settings.live.pubsub_limit;
        crate::cmd::config::obuf::ClassLimit {
            hard: hard.load(Ordering::Relaxed),
            soft: soft.load(Ordering::Relaxed),
            soft_secs: secs.load(Ordering::Relaxed),
        }
    }

    /// `timeout` now: how long a normal client may stay idle (None: forever).
    pub fn idle_timeout(&self) -> Option<Duration> {
        let secs = self.settings.live.timeout_secs.load(Ordering::Relaxed);
        (secs > 0).then(|| Duration::from_secs(secs))
    }

    /// A client's write with the server's default lock-delay applied to a LOCK (a no-op
    /// for every other command, and while the default is 0).
    pub fn default_lock_delay(&self, cmd: Command) -> Command {
        match cmd {
            Command::Lock(l) if self.lock_delay_ms() > 0 => {
                Command::Acquire(crate::cmd::lock::Acquire {
                    key: l.key,
                    owner: l.owner,
                    ttl_ms: l.ttl_ms,
                    wait_ms: None,
                    delay_ms: Some(self.lock_delay_ms()),
                    waiter: None,
                })
            }
            Command::Acquire(a) => Command::Acquire(self.with_default_delay(a)),
            other => other,
        }
    }
}

impl Shared {
    /// CONFIG REWRITE: writes the current settings into the `--config` file.
    pub fn rewrite_config(&self) -> Reply {
        let Some(path) = &self.config.config_file else {
            return Reply::err("ERR The server is running without a config file");
        };
        match crate::config::rewrite(path, &self.file_values()) {
            Ok(()) => Reply::ok(),
            Err(e) => {
                tracing::warn!(error = %e, path = %path.display(), "CONFIG REWRITE failed");
                Reply::err(format!("ERR Rewriting config file: {e}"))
            }
        }
    }

    /// Every setting of the file under its key, with its current value (None: unset). The
    /// live ones come from CONFIG, the others are what the node started with.
    fn file_values(&self) -> Vec<(&'static str, Option<toml::Value>)> {
        use toml::Value::{Boolean, Integer, String as Text};
        let c = &self.config;
        let v = |name: &str| self.settings.value(name);
        let int = |name: &str| Some(Integer(v(name).parse().unwrap_or(0)));
        let peers = c.peers.iter().map(|(id, a)| format!("{id}={a}"));
        let peers = peers.collect::<Vec<_>>().join(",");
        let derived_peer_port = c.port.wrapping_add(crate::config::PEER_PORT_OFFSET);
        let log_level = crate::cmd::config::palisade_log_level(&v("loglevel"));
        let log_level = if crate::cmd::config::redis_log_level(&c.log_level) == v("loglevel") {
            c.log_level.clone()
        } else {
            log_level.to_string()
        };
        let mut values = vec![
            ("bind", Some(Text(c.bind.clone()))),
            ("port", Some(Integer(c.port.into()))),
            ("dir", Some(Text(c.dir.display().to_string()))),
            ("requirepass", self.requirepass().map(Text)),
            (
                "aclfile",
                c.aclfile.as_ref().map(|p| Text(p.display().to_string())),
            ),
            ("node-id", Some(Integer(c.node_id as i64))),
            (
                "peer-port",
                (c.peer_port != derived_peer_port).then_some(Integer(c.peer_port.into())),
            ),
            ("peers", (!peers.is_empty()).then_some(Text(peers))),
            ("maxclients", int("maxclients")),
            ("proto-max-bulk-len", int("proto-max-bulk-len")),
            ("max-multibulk-len", int("max-multibulk-len")),
            (
                "client-query-buffer-limit",
                int("client-query-buffer-limit"),
            ),
            ("write-timeout-ms", Some(Integer(c.write_timeout_ms as i64))),
            ("snapshot-every", Some(Integer(c.snapshot_every as i64))),
            ("lock-delay-ms", int("lock-delay-ms")),
            ("log-level", Some(Text(log_level))),
            ("join", Some(Boolean(c.join))),
            ("protected-mode", Some(Text(v("protected-mode")))),
            ("timeout", int("timeout")),
            (
                "client-output-buffer-limit",
                Some(v("client-output-buffer-limit"))
                    .filter(|l| l != crate::cmd::config::DEFAULT_OUTPUT_LIMITS)
                    .map(Text),
            ),
            ("tls-cluster", Some(Text(v("tls-cluster")))),
            (
                "notify-keyspace-events",
                Some(Text(v("notify-keyspace-events"))),
            ),
            (
                "enable-debug-command",
                Some(Text(c.enable_debug_command.word().into())),
            ),
            ("metrics-addr", c.metrics_addr.clone().map(Text)),
        ];
        let tls = c.tls.as_ref();
        let path = |p: &std::path::Path| Text(p.display().to_string());
        values.extend([
            ("tls-port", tls.map(|t| Integer(t.port.into()))),
            ("tls-cert-file", tls.map(|t| path(&t.files.cert))),
            ("tls-key-file", tls.map(|t| path(&t.files.key))),
            (
                "tls-ca-cert-file",
                tls.and_then(|t| t.files.ca.as_deref().map(path)),
            ),
            (
                "tls-auth-clients",
                tls.map(|t| Text(t.auth_clients.word().into())),
            ),
        ]);
        values
    }
}
