//! The server: accept loop, per-connection sessions, write batching, read batching and
//! leader housekeeping, all sharing one [`Shared`].

pub mod acl;
pub mod admin;
pub mod clients;
pub mod cluster;
pub mod errors;
pub mod forward;
pub mod housekeeping;
pub mod lockwait;
pub mod metrics;
pub mod monitor;
pub mod popwait;
pub mod proposer;
pub mod reader;
pub mod replicas;
pub mod save;
pub mod session;
pub mod stream;

use openraft::async_runtime::watch::WatchReceiver;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use crate::cmd::info::InfoData;
use crate::cmd::{Command, ConnCmd, Request};
use crate::config::Config;
use crate::raft::auth::PeerAuth;
use crate::raft::node::{self, NodeSettings};
use crate::raft::service::{BoxFuture, ClientHandler, Service};
use crate::raft::Raft;
use crate::resp::Reply;
use crate::store::SmState;
use bytes::Bytes;
use clients::{ClientInfo, Clients};
use forward::LeaderLink;
use proposer::{Clock, Proposer};
use reader::Reader;
use stream::ClientStream;

/// Server-wide counters.
#[derive(Default)]
pub struct Stats {
    /// Connections accepted.
    pub connections: AtomicU64,
    /// Connections refused at maxclients.
    pub rejected: AtomicU64,
    /// Per-command and per-error counts (commandstats, errorstats), commands executed.
    pub calls: session::stats::CommandTable,
    /// Bytes to and from clients, and the instantaneous rates.
    pub traffic: session::stats::Traffic,
    /// The highest `used_memory` seen.
    pub memory_peak: AtomicU64,
    /// Subscribers closed at their output buffer limit (INFO
    /// `client_output_buffer_limit_disconnections`).
    pub output_limit_disconnections: AtomicU64,
    /// The most output pending for one client in this window and the last (INFO
    /// `client_recent_max_output_buffer`, which Redis also reports over recent seconds).
    pub output_peak: [AtomicU64; 2],
}

/// How often the instantaneous rates are sampled (Redis: every 100 ms, from serverCron).
const SAMPLE_EVERY: Duration = Duration::from_millis(100);
/// Samples per window of `client_recent_max_output_buffer` (5 s).
const OUTPUT_PEAK_SAMPLES: u32 = 50;
/// How long a TLS client may take to finish its handshake.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Redis 7's reply to a client from another host while protected mode is on.
pub const PROTECTED_MODE_DENIED: &str = "-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Setup a an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";

impl Stats {
    /// Resets what `CONFIG RESETSTAT` resets in Redis and this node counts outside the
    /// replicated state: commandstats, errorstats, `total_commands_processed`,
    /// `total_error_replies`, `total_connections_received`, `rejected_connections`, the
    /// byte counts, the instantaneous rates and the memory peak.
    pub fn reset(&self) {
        self.connections.store(0, Ordering::Relaxed);
        self.rejected.store(0, Ordering::Relaxed);
        self.calls.reset();
        self.traffic.reset();
        self.memory_peak.store(0, Ordering::Relaxed);
        self.output_limit_disconnections.store(0, Ordering::Relaxed);
    }

    /// Records `pending` bytes of output queued for one client.
    pub fn note_output(&self, pending: usize) {
        self.output_peak[0].fetch_max(pending as u64, Ordering::Relaxed);
    }

    /// The largest output pending for one client over the last few seconds.
    pub fn recent_max_output(&self) -> u64 {
        let [a, b] = &self.output_peak;
        a.load(Ordering::Relaxed).max(b.load(Ordering::Relaxed))
    }

    /// Starts a new window of the output peak: the current one becomes the last.
    fn rotate_output_peak(&self) {
        let now = self.output_peak[0].swap(0, Ordering::Relaxed);
        self.output_peak[1].store(now, Ordering::Relaxed);
    }

    /// Raises the memory peak to `used` if higher; returns the peak.
    fn note_memory(&self, used: u64) -> u64 {
        self.memory_peak
            .fetch_max(used, Ordering::Relaxed)
            .max(used)
    }
}

/// Samples the instantaneous rates and the memory peak every 100 ms, until `stop`.
async fn sample_stats(shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(SAMPLE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut samples = 0u32;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        let stats = &shared.stats;
        stats.traffic.sample(Instant::now(), stats.calls.executed());
        stats.note_memory(allocator_bytes().0);
        samples += 1;
        if samples.is_multiple_of(OUTPUT_PEAK_SAMPLES) {
            stats.rotate_output_peak();
        }
    }
}

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
    /// Signalled by SHUTDOWN; [`Server::shutdown_requested`] waits for it.
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

/// Environment switch for openraft's `broadcast_submitted_on_append` (on unless this is "0");
/// a benchmark knob, see docs/performance.md.
pub const BROADCAST_SUBMITTED_ENV: &str = "PALISADE_BROADCAST_SUBMITTED";

/// The INFO/RAFT.INFO name of a Raft server state.
pub fn role_name(state: openraft::ServerState) -> &'static str {
    match state {
        openraft::ServerState::Leader => "leader",
        openraft::ServerState::Candidate => "candidate",
        openraft::ServerState::Learner => "learner",
        _ => "follower",
    }
}

impl Shared {
    /// The last log index applied to the state machine. openraft's metrics learn it only
    /// after the state machine has answered the entry's writers, so a client that reads INFO
    /// right after a write could see an older index there; the state's own is never behind
    /// a reply.
    pub fn applied_index(&self, m: &openraft::RaftMetrics<crate::raft::TypeConfig>) -> u64 {
        let metric = m.last_applied.map(|l| l.index).unwrap_or(0);
        let state = self
            .state
            .read()
            .ok()
            .and_then(|st| st.last_applied.map(|l| l.index))
            .unwrap_or(0);
        metric.max(state)
    }

    /// CONFIG RESETSTAT: zeroes the counters that INFO shows (connections, commandstats and
    /// errorstats, byte counts and rates, expired keys and the write path's `raft_*`
    /// counters), as Redis does for its own. The slow log stays, as in Redis.
    pub fn reset_stats(&self) {
        let zero = |c: &AtomicU64| c.store(0, Ordering::Relaxed);
        // Connections, commandstats, errorstats, byte counts, rates and the memory peak.
        self.stats.reset();
        zero(&self.proposer.stats.batches);
        zero(&self.proposer.stats.commands);
        zero(&self.sync.syncs);
        zero(&self.sync.appends);
        zero(&self.sync.entries);
        if let Ok(mut st) = self.state.write() {
            st.expired_total = 0;
            st.applied_entries = 0;
            st.applied_commands = 0;
        }
    }

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

    /// Gathers INFO's fields.
    pub fn info(&self) -> InfoData {
        let m = self.raft.metrics().borrow_watched().clone();
        let (keyspace, revision, expired, applied, scripts) = match self.state.read() {
            Ok(st) => {
                let now = reader::cluster_now(&self.raft, &st, &self.clock);
                (
                    keyspace_figures(&st.ks, now),
                    (st.ks.revision(), st.ks.pop_waiter_count()),
                    st.expired_total,
                    (st.applied_entries, st.applied_commands),
                    st.ks.scripts().len(),
                )
            }
            Err(_) => ((0, 0, 0), (0, 0), 0, (0, 0), 0),
        };
        let (revision, pop_waiters) = revision;
        let allocator = allocator_bytes();
        let rates = self.stats.traffic.rates();
        let sync = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
        let role = role_name(m.state);
        InfoData {
            rdb: crate::cmd::info::Rdb {
                changes_since_last_save: revision
                    .saturating_sub(self.saves.revision_at_save.load(Ordering::Relaxed)),
                bgsave_in_progress: self.saves.in_progress.load(Ordering::Relaxed),
                last_save_time: self.saves.last_save.load(Ordering::Relaxed),
                last_bgsave_failed: self.saves.last_failed.load(Ordering::Relaxed),
            },
            version: env!("CARGO_PKG_VERSION"),
            run_id: self.run_id.clone(),
            tcp_port: self.addr.port(),
            process_id: std::process::id(),
            uptime_secs: self.started.elapsed().as_secs(),
            connected_clients: self.clients.len(),
            blocked_clients: self.clients.blocked(),
            client_recent_max_output_buffer: self.stats.recent_max_output(),
            output_limit_disconnections: self
                .stats
                .output_limit_disconnections
                .load(Ordering::Relaxed),
            maxclients: self.maxclients(),
            used_memory_rss: rss_bytes(),
            allocator,
            used_memory_peak: self.stats.note_memory(allocator.0),
            db_memory: crate::store::schema::memory_usage(&self.db),
            total_connections: self.stats.connections.load(Ordering::Relaxed),
            total_commands: self.stats.calls.executed(),
            rates: (rates.ops, rates.input_kbps, rates.output_kbps),
            net_bytes: (
                self.stats.traffic.input.load(Ordering::Relaxed),
                self.stats.traffic.output.load(Ordering::Relaxed),
            ),
            total_error_replies: self.stats.calls.error_replies(),
            pubsub: self.clients.pubsub_counts(),
            commandstats: self.stats.calls.commands(),
            errorstats: self.stats.calls.errors(),
            cpu: cpu_times(),
            cached_scripts: scripts,
            rejected_connections: self.stats.rejected.load(Ordering::Relaxed),
            expired_keys: expired,
            batches_proposed: self.proposer.stats.batches.load(Ordering::Relaxed),
            batched_commands: self.proposer.stats.commands.load(Ordering::Relaxed),
            log_syncs: (
                sync(&self.sync.syncs),
                sync(&self.sync.appends),
                sync(&self.sync.entries),
            ),
            applied,
            keys: keyspace.0,
            expires: keyspace.1,
            avg_ttl: keyspace.2,
            revision,
            pop_waiters,
            node_id: self.config.node_id,
            role,
            leader_id: m.current_leader,
            term: m.current_term,
            // Applied entries are committed, whatever the metrics have caught up with.
            commit_index: m
                .local_committed
                .map(|l| l.index)
                .unwrap_or(0)
                .max(self.applied_index(&m)),
            applied_index: self.applied_index(&m),
            last_log_index: m.last_log_index.unwrap_or(0),
            snapshot_index: m.snapshot.map(|s| s.index).unwrap_or(0),
            peer_handshakes_refused: self.peer_refusals.count.load(Ordering::Relaxed),
            members: m.membership_config.membership().voter_ids().collect(),
            dir: self.config.dir.display().to_string(),
        }
    }
}

/// Live keys at `now`, how many of them have a TTL, and the mean remaining TTL of those in
/// ms (INFO keyspace). One pass over the keys, only when some have a TTL.
fn keyspace_figures(ks: &crate::state::Keyspace, now: u64) -> (usize, usize, u64) {
    if ks.volatile_len() == 0 {
        return (ks.live_len(now), 0, 0);
    }
    let (mut keys, mut expires, mut ttl_sum) = (0usize, 0usize, 0u128);
    for (_, e) in ks.live_keys(now) {
        keys += 1;
        if let Some(at) = e.expire_at {
            expires += 1;
            ttl_sum += u128::from(at.saturating_sub(now));
        }
    }
    let avg = ttl_sum.checked_div(expires as u128).unwrap_or(0);
    (keys, expires, avg as u64)
}

/// This process's CPU time and that of its waited-for children, from getrusage(2).
#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
fn cpu_times() -> crate::cmd::info::CpuTimes {
    /// `struct rusage` on 64-bit Linux: two `struct timeval` (i64 seconds, i64 µs), then
    /// 14 longs this code does not read.
    #[repr(C)]
    struct Rusage {
        utime: [i64; 2],
        stime: [i64; 2],
        #[allow(dead_code)] // getrusage fills it; nothing reads it
        rest: [i64; 14],
    }
    extern "C" {
        fn getrusage(who: std::ffi::c_int, usage: *mut Rusage) -> std::ffi::c_int;
    }
    const RUSAGE_SELF: std::ffi::c_int = 0;
    const RUSAGE_CHILDREN: std::ffi::c_int = -1;
    let usage = |who| {
        let mut u = Rusage {
            utime: [0; 2],
            stime: [0; 2],
            rest: [0; 14],
        };
        // SAFETY: `u` is a valid, writable `struct rusage` for this target, and getrusage
        // writes nothing else.
        let ok = unsafe { getrusage(who, &mut u) } == 0;
        let us = |tv: [i64; 2]| (tv[0].max(0) as u64) * 1_000_000 + tv[1].max(0) as u64;
        if ok {
            (us(u.stime), us(u.utime))
        } else {
            (0, 0)
        }
    };
    let (sys_us, user_us) = usage(RUSAGE_SELF);
    let (children_sys_us, children_user_us) = usage(RUSAGE_CHILDREN);
    crate::cmd::info::CpuTimes {
        sys_us,
        user_us,
        children_sys_us,
        children_user_us,
    }
}

/// Elsewhere the CPU figures are zero.
#[cfg(not(all(target_os = "linux", target_pointer_width = "64")))]
fn cpu_times() -> crate::cmd::info::CpuTimes {
    crate::cmd::info::CpuTimes::default()
}

/// jemalloc's figures: bytes the program holds, and bytes of resident pages jemalloc maps.
/// Both are 0 in a program whose global allocator is not jemalloc (the library's unit tests).
fn allocator_bytes() -> (u64, u64) {
    use tikv_jemalloc_ctl::{epoch, stats};
    if epoch::advance().is_err() {
        return (0, 0);
    }
    let allocated = stats::allocated::read().unwrap_or(0);
    let resident = stats::resident::read().unwrap_or(0);
    (allocated as u64, resident as u64)
}

/// Resident set size from /proc (0 where unavailable).
fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .map(|pages| pages * 4096)
        .unwrap_or(0)
}

/// Seconds since the Unix epoch (0 if the clock is before it).
fn unix_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// The CONFIG values the node starts with: its settings under their parameter names.
fn start_params(
    c: &Config,
    port: u16,
    output_limits: &crate::cmd::config::obuf::OutputLimits,
) -> Vec<(&'static str, String)> {
    let l = &c.limits;
    let mut params = vec![
        ("bind", c.bind.clone()),
        ("port", port.to_string()),
        ("dir", c.dir.display().to_string()),
        ("requirepass", c.requirepass.clone().unwrap_or_default()),
        (
            "aclfile",
            c.aclfile
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
        ),
        ("maxclients", c.maxclients.to_string()),
        ("proto-max-bulk-len", l.max_bulk_len.to_string()),
        ("client-query-buffer-limit", l.max_query_buffer.to_string()),
        ("max-multibulk-len", l.max_multibulk_len.to_string()),
        (
            "loglevel",
            crate::cmd::config::redis_log_level(&c.log_level).into(),
        ),
        ("lock-delay-ms", c.lock_delay_ms.to_string()),
        ("write-timeout-ms", c.write_timeout_ms.to_string()),
        ("node-id", c.node_id.to_string()),
        ("peer-port", c.peer_port.to_string()),
        ("snapshot-every", c.snapshot_every.to_string()),
        ("protected-mode", yes_no(c.protected_mode).into()),
        ("timeout", c.timeout.to_string()),
        ("client-output-buffer-limit", output_limits.to_string()),
        ("tls-cluster", yes_no(c.tls_cluster).into()),
        (
            "notify-keyspace-events",
            crate::state::notify::parse_flags(&c.notify_keyspace_events)
                .map(crate::state::notify::flags_to_string)
                .unwrap_or_default(),
        ),
        ("enable-debug-command", c.enable_debug_command.word().into()),
    ];
    if let Some(t) = &c.tls {
        let path = |p: &std::path::Path| p.display().to_string();
        params.extend([
            ("tls-port", t.port.to_string()),
            ("tls-cert-file", path(&t.files.cert)),
            ("tls-key-file", path(&t.files.key)),
            (
                "tls-ca-cert-file",
                t.files.ca.as_deref().map(path).unwrap_or_default(),
            ),
            ("tls-auth-clients", t.auth_clients.word().into()),
        ]);
    }
    params
}

fn yes_no(on: bool) -> &'static str {
    if on {
        "yes"
    } else {
        "no"
    }
}

fn random_run_id() -> String {
    use rand::Rng;
    let mut rng = rand::thread_rng();
    (0..40)
        .map(|_| std::char::from_digit(rng.gen_range(0..16), 16).unwrap_or('0'))
        .collect()
}

/// A running server.
pub struct Server {
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    tasks: JoinSet<()>,
}

impl Server {
    /// Opens storage, starts Raft, binds the client port and starts serving.
    pub async fn start(config: Config) -> anyhow::Result<Server> {
        let settings = NodeSettings {
            node_id: config.node_id,
            peer_addr: config.peer_addr(),
            dir: config.dir.clone(),
            snapshot_every: config.snapshot_every,
            peers: config.peers.clone(),
            join: config.join,
            lose_unsynced_writes: config.test_lose_unsynced_writes,
            broadcast_submitted: std::env::var(BROADCAST_SUBMITTED_ENV).map_or(true, |v| v != "0"),
            peer_auth: PeerAuth::default(),
        };
        let output_limits = crate::cmd::config::obuf::OutputLimits::default()
            .with(
                config
                    .client_output_buffer_limit
                    .as_deref()
                    .unwrap_or(crate::cmd::config::DEFAULT_OUTPUT_LIMITS),
            )
            .map_err(|e| anyhow::anyhow!("--client-output-buffer-limit: {e}"))?;
        let tls = match &config.tls {
            Some(t) => Some(Arc::new(crate::tls::Tls::load(
                t.files.clone(),
                t.auth_clients,
            )?)),
            None => None,
        };
        let mut settings = settings;
        settings.peer_auth = PeerAuth::new(config.cluster_secret.clone())
            .with_tls(tls.clone().filter(|_| config.tls_cluster));
        // Bind first: a port conflict should fail before Raft touches the data directory.
        let listeners = Listeners {
            plain: bind_client_port(&config.bind, config.port).await?,
            tls: match (&tls, &config.tls) {
                (Some(tls), Some(t)) => bind_client_port(&config.bind, t.port)
                    .await?
                    .map(|l| (l, tls.clone())),
                _ => None,
            },
        };
        let metrics_listener = match &config.metrics_addr {
            Some(addr) => Some(metrics::bind(addr).await?),
            None => None,
        };
        let peer_bind = config.peer_bind()?;
        if peer_bind != config.bind {
            tracing::warn!(
                peer_bind,
                peer_port = config.peer_port,
                "no --cluster-secret or --tls-cluster: the peer port listens on loopback only, so this node cannot be joined by others; set a cluster secret to form a cluster"
            );
        }
        let peer_listener = TcpListener::bind((peer_bind.as_str(), config.peer_port))
            .await
            .with_context(|| format!("binding peer port {peer_bind}:{}", config.peer_port))?;
        let node = node::start(&settings).await?;
        let addr = listeners.addr()?;
        // CONFIG GET port: 0 when only TLS is served, as in Redis.
        let plain_port = match &listeners.plain {
            Some(l) => l.local_addr()?.port(),
            None => 0,
        };
        let clock = Clock::with_fault(config.test_clock_offset_ms, config.test_clock_rate_ppm);
        let link = Arc::new(LeaderLink::new(node.raft.clone(), node.ctx.clone()));
        let acl = node
            .state
            .read()
            .map_err(|_| anyhow::anyhow!("state lock poisoned"))?
            .acl
            .subscribe();
        let timeout = Duration::from_millis(config.write_timeout_ms);
        let started_unix = unix_secs();
        let (start_revision, apply_timing) = {
            let st = node
                .state
                .read()
                .map_err(|_| anyhow::anyhow!("state lock poisoned"))?;
            (st.ks.revision(), st.apply_seconds.clone())
        };
        let shared = Arc::new(Shared {
            peer_refusals: Default::default(),
            proposer: Proposer::start(node.raft.clone(), clock, link.clone(), timeout),
            reader: Reader::start(
                node.raft.clone(),
                node.state.clone(),
                clock,
                link.clone(),
                timeout,
            ),
            raft: node.raft.clone(),
            state: node.state,
            clock,
            clients: Clients::default(),
            stats: Stats::default(),
            run_id: random_run_id(),
            started: Instant::now(),
            addr,
            link,
            db: node.db.clone(),
            sync: node.sync.clone(),
            waiters: lockwait::Waiters::new(config.node_id, clock.boot),
            pop_waiters: popwait::PopWaiters::new(config.node_id, clock.boot),
            settings: crate::cmd::config::Store::new(&start_params(
                &config,
                plain_port,
                &output_limits,
            )),
            tls,
            slowlog: Default::default(),
            started_unix,
            saves: save::Saves::new(started_unix, start_revision),
            shutdown: tokio::sync::Notify::new(),
            acl,
            acl_log: Default::default(),
            announced: Default::default(),
            metrics: metrics_listener
                .is_some()
                .then(|| metrics::Metrics::new(&node.sync.fsync_seconds, &apply_timing)),
            config,
        });
        // Apply records the keyspace notifications CONFIG's notify-keyspace-events asks for.
        shared
            .state
            .write()
            .map_err(|_| anyhow::anyhow!("state lock poisoned"))?
            .notify_flags = shared.settings.live.notify_flags.clone();
        // Subscribed before the first client connects, so that no grant to a waiter is missed.
        let lock_events = shared
            .state
            .read()
            .map_err(|_| anyhow::anyhow!("state lock poisoned"))?
            .waiter_grants
            .subscribe();
        let (stop, stop_rx) = watch::channel(false);
        let mut tasks = JoinSet::new();
        if let Some(listener) = metrics_listener {
            let events = shared
                .state
                .read()
                .map_err(|_| anyhow::anyhow!("state lock poisoned"))?
                .events
                .subscribe();
            tasks.spawn(metrics::count_events(
                shared.clone(),
                events,
                stop_rx.clone(),
            ));
            tasks.spawn(metrics::serve(shared.clone(), listener, stop_rx.clone()));
        }
        let service = Service {
            raft: node.raft,
            ctx: node.ctx,
            db: node.db,
            handler: Arc::new(Handler {
                shared: shared.clone(),
            }),
            refusals: shared.peer_refusals.clone(),
        };
        tasks.spawn(service.run(peer_listener, stop_rx.clone()));
        tasks.spawn(housekeeping::run(shared.clone(), stop_rx.clone()));
        tasks.spawn(sample_stats(shared.clone(), stop_rx.clone()));
        tasks.spawn(lockwait::run(shared.clone(), lock_events, stop_rx.clone()));
        let tls_addr = listeners.tls_addr();
        tasks.spawn(acl::load_at_start(shared.clone(), stop_rx.clone()));
        tasks.spawn(accept_loop(shared.clone(), listeners, stop_rx));
        tracing::info!(addr = %addr, tls_addr = ?tls_addr, node_id = shared.config.node_id, peer_port = shared.config.peer_port, dir = %shared.config.dir.display(), "palisade ready to accept connections");
        Ok(Server {
            shared,
            stop,
            tasks,
        })
    }

    /// The bound client address.
    pub fn addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// Rereads the TLS certificate, key and CA files (SIGHUP): new handshakes use them,
    /// live connections keep theirs. A bad file keeps the old configuration and is logged.
    pub fn reload_tls(&self) {
        let Some(tls) = &self.shared.tls else {
            tracing::info!("SIGHUP: no TLS configured, nothing to reload");
            return;
        };
        match tls.reload() {
            Ok(()) => {
                tracing::info!(cert = %tls.files().cert.display(), "TLS certificates reloaded")
            }
            Err(e) => {
                tracing::error!(error = %e, "TLS reload failed; keeping the old certificates")
            }
        }
    }

    /// Installs the function that CONFIG SET loglevel calls to change the log filter.
    pub fn set_log_hook(&self, hook: crate::cmd::config::LogHook) {
        self.shared.settings.set_log_hook(hook);
    }

    /// Returns, with the reason, once Raft has stopped by itself: a storage error, a bad
    /// snapshot image or metadata, a panic in its core. Such a node can neither commit nor
    /// apply, so it must not go on answering clients (fail-stop, docs/reliability.md).
    pub async fn raft_stopped(&self) -> String {
        let mut metrics = self.shared.raft.metrics();
        loop {
            let state = metrics.borrow_watched().running_state.clone();
            if let Err(fatal) = state {
                return fatal.to_string();
            }
            if metrics.changed().await.is_err() {
                return "the Raft core task ended".into();
            }
        }
    }

    /// Returns when a client has asked this node to stop (SHUTDOWN).
    pub async fn shutdown_requested(&self) {
        self.shared.shutdown.notified().await
    }

    /// Ordered shutdown: stop accepting, close sessions (their in-flight commands finish or
    /// time out), stop background tasks, then shut Raft down, which closes the store.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        let drain = async { while self.tasks.join_next().await.is_some() {} };
        if tokio::time::timeout(Duration::from_secs(5), drain)
            .await
            .is_err()
        {
            tracing::warn!("background tasks did not stop within 5s");
            self.tasks.abort_all();
        }
        if let Err(e) = self.shared.raft.shutdown().await {
            tracing::error!(error = %e, "raft shutdown failed");
        }
        tracing::info!("palisade stopped");
    }
}

/// The client listeners: the plain port and the TLS port, either of which may be off.
struct Listeners {
    plain: Option<TcpListener>,
    tls: Option<(TcpListener, Arc<crate::tls::Tls>)>,
}

/// Binds a client port (None for port 0, which Redis reads as "do not listen").
async fn bind_client_port(bind: &str, port: u16) -> anyhow::Result<Option<TcpListener>> {
    if port == 0 {
        return Ok(None);
    }
    let l = TcpListener::bind((bind, port))
        .await
        .with_context(|| format!("binding {bind}:{port}"))?;
    Ok(Some(l))
}

impl Listeners {
    /// The plain address, or the TLS one when only TLS is served.
    fn addr(&self) -> anyhow::Result<SocketAddr> {
        match (&self.plain, &self.tls) {
            (Some(l), _) | (None, Some((l, _))) => Ok(l.local_addr()?),
            (None, None) => anyhow::bail!("no client port to listen on"),
        }
    }

    fn tls_addr(&self) -> Option<SocketAddr> {
        self.tls.as_ref().and_then(|(l, _)| l.local_addr().ok())
    }

    /// The next connection on either port, with the TLS handshake still to do for the TLS
    /// port's.
    async fn accept(&self) -> std::io::Result<(TcpStream, SocketAddr, Option<TlsAcceptor>)> {
        let plain = async {
            match &self.plain {
                Some(l) => l.accept().await,
                None => std::future::pending().await,
            }
        };
        let tls = async {
            match &self.tls {
                Some((l, tls)) => l
                    .accept()
                    .await
                    .map(|(s, a)| (s, a, TlsAcceptor::from(tls.clients()))),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            a = plain => a.map(|(s, a)| (s, a, None)),
            a = tls => a.map(|(s, a, t)| (s, a, Some(t))),
        }
    }
}

async fn accept_loop(shared: Arc<Shared>, listeners: Listeners, mut stop: watch::Receiver<bool>) {
    let mut sessions = JoinSet::new();
    let mut next_id: u64 = 0;
    loop {
        let accepted = tokio::select! {
            a = listeners.accept() => a,
            _ = stop.changed() => break,
            Some(_) = sessions.join_next(), if !sessions.is_empty() => continue,
        };
        let (stream, peer, tls) = match accepted {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if shared.clients.len() >= shared.maxclients() {
            shared.stats.rejected.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(async move {
                if let Some(mut stream) = open_stream(stream, tls).await {
                    use tokio::io::AsyncWriteExt;
                    let _ = stream
                        .write_all(b"-ERR max number of clients reached\r\n")
                        .await;
                    let _ = stream.flush().await;
                }
            });
            continue;
        }
        let _ = stream.set_nodelay(true);
        next_id += 1;
        let id = next_id;
        shared.stats.connections.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let laddr = stream.local_addr().unwrap_or(shared.addr);
        shared.clients.add(ClientInfo {
            id,
            addr: peer,
            laddr,
            name: String::new(),
            lib_name: String::new(),
            lib_ver: String::new(),
            resp: 2,
            since: now,
            last: now,
            cmd: "NULL".into(),
            blocked: false,
            user: crate::state::acl::DEFAULT_USER.into(),
            killed: Default::default(),
        });
        let (sh, rx) = (shared.clone(), stop.clone());
        sessions.spawn(async move {
            if let Some(stream) = open_stream(stream, tls).await {
                if sh.protected_mode_refuses(peer.ip()) {
                    deny(&sh, stream, peer).await;
                } else {
                    session::serve(sh.clone(), stream, id, rx).await;
                }
            }
            sh.clients.remove(id);
        });
    }
    drop(listeners);
    let drain = async { while sessions.join_next().await.is_some() {} };
    if tokio::time::timeout(Duration::from_secs(3), drain)
        .await
        .is_err()
    {
        sessions.abort_all();
    }
}

/// The client's stream: the socket itself, or the socket after a TLS handshake (None if
/// the handshake failed or took too long, which is logged).
async fn open_stream(stream: TcpStream, tls: Option<TlsAcceptor>) -> Option<ClientStream> {
    let Some(acceptor) = tls else {
        return Some(ClientStream::Plain(stream));
    };
    let peer = stream.peer_addr().ok();
    match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(s)) => Some(ClientStream::Tls(Box::new(s))),
        Ok(Err(e)) => {
            tracing::info!(peer = ?peer, error = %e, "TLS handshake failed");
            None
        }
        Err(_) => {
            tracing::info!(peer = ?peer, "TLS handshake timed out");
            None
        }
    }
}

/// Protected mode's refusal: Redis's text, then the connection closes. Counted as a
/// rejected connection, as Redis counts it.
async fn deny(shared: &Shared, mut stream: ClientStream, peer: SocketAddr) {
    use tokio::io::AsyncWriteExt;
    shared.stats.rejected.fetch_add(1, Ordering::Relaxed);
    tracing::info!(peer = %peer, "protected mode: refused a client from another host");
    let _ = stream.write_all(PROTECTED_MODE_DENIED.as_bytes()).await;
    let _ = stream.flush().await;
    let _ = stream.shutdown().await;
    // Closing with the client's request still unread would send a reset, which can reach
    // the client before the text does; take what it sent (a little, briefly) first.
    let drain = async {
        use tokio::io::AsyncReadExt;
        let mut buf = [0u8; 4096];
        for _ in 0..16 {
            if !matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), drain).await;
}

/// Runs client work that followers forward to this node.
struct Handler {
    shared: Arc<Shared>,
}

impl ClientHandler for Handler {
    fn forward(
        &self,
        write: bool,
        cmds: Vec<Command>,
        users: Vec<Option<String>>,
    ) -> BoxFuture<Vec<Reply>> {
        let shared = self.shared.clone();
        Box::pin(async move {
            if users.len() != cmds.len() {
                let bad = Reply::err("ERR internal: a forwarded batch without its users");
                return vec![bad; cmds.len()];
            }
            let deadline =
                tokio::time::Instant::now() + Duration::from_millis(shared.config.write_timeout_ms);
            // Each command is checked against its user here, on the leader, before it runs:
            // forwarding is no way around ACLs.
            let receivers: Vec<_> = cmds
                .into_iter()
                .zip(users)
                .map(
                    |(c, user)| match shared.check_forwarded(user.as_deref(), &c) {
                        Some(refused) => Err(refused),
                        None if write => Ok(shared.proposer.submit_forwarded(c)),
                        None => Ok(shared.reader.submit(c)),
                    },
                )
                .collect();
            let mut replies = Vec::with_capacity(receivers.len());
            for rx in receivers {
                let rx = match rx {
                    Ok(rx) => rx,
                    Err(refused) => {
                        replies.push(refused);
                        continue;
                    }
                };
                replies.push(match tokio::time::timeout_at(deadline, rx).await {
                    Ok(Ok(r)) => r,
                    Ok(Err(_)) => {
                        Reply::err("TRYAGAIN the leader stopped while serving a forwarded command")
                    }
                    Err(_) if write => errors::write_timeout(),
                    Err(_) => Reply::err("TIMEOUT read did not complete before the deadline"),
                });
            }
            replies
        })
    }

    fn admin(&self, argv: Vec<Bytes>) -> BoxFuture<Reply> {
        let shared = self.shared.clone();
        Box::pin(async move {
            // A follower forwards RAFT.* admin commands and WAIT (see `replicas`).
            match crate::cmd::parse(argv) {
                Ok(Request::Admin(cmd)) => admin::execute_local(&shared, cmd).await,
                Ok(Request::Conn(ConnCmd::Wait(w))) => replicas::wait_local(&shared, w).await,
                Ok(_) => Reply::err("ERR not an admin command"),
                Err(reply) => reply,
            }
        })
    }
}
