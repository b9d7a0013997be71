//! The server: accept loop, per-connection sessions, write batching, read batching and
//! leader housekeeping, all sharing one [`Shared`].

pub mod acl;
pub mod admin;
pub mod clients;
pub mod errors;
pub mod forward;
pub mod housekeeping;
pub mod lockwait;
pub mod proposer;
pub mod reader;
pub mod session;

use openraft::async_runtime::watch::WatchReceiver;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::cmd::info::InfoData;
use crate::cmd::Command;
use crate::config::Config;
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
}

/// How often the instantaneous rates are sampled (Redis: every 100 ms, from serverCron).
const SAMPLE_EVERY: Duration = Duration::from_millis(100);

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
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        let stats = &shared.stats;
        stats.traffic.sample(Instant::now(), stats.calls.executed());
        stats.note_memory(allocator_bytes().0);
    }
}

/// State shared by every task of the server.
pub struct Shared {
    /// Resolved configuration.
    pub config: Config,
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
    /// The bound client address.
    pub addr: SocketAddr,
    /// The way to the leader (forwarding) and the peer identity.
    pub link: Arc<LeaderLink>,
    /// The store (INFO reads its memory figures).
    pub db: Arc<rocksdb::DB>,
    /// The log's sync counters (INFO) and test-only sync delay (RAFT.FAULT SYNCDELAY).
    pub sync: Arc<crate::store::log::SyncStats>,
    /// This node's clients waiting in a lock queue.
    pub waiters: lockwait::Waiters,
    /// CONFIG's parameters; the live ones are read from here, not from `config`.
    pub settings: crate::cmd::config::Store,
    /// Commands slower than `slowlog-log-slower-than`.
    pub slowlog: crate::cmd::slowlog::SlowLog,
    /// Unix time (seconds) at which the server started (LASTSAVE).
    pub started_unix: i64,
    /// Signalled by SHUTDOWN; [`Server::shutdown_requested`] waits for it.
    pub shutdown: tokio::sync::Notify,
    /// This node's applied ACL users ([`crate::store::SmState::acl`]).
    pub acl: watch::Receiver<Arc<crate::state::acl::Users>>,
    /// ACL LOG: this node's recent refusals.
    pub acl_log: crate::cmd::acl::log::Log,
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
        vec![
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
        ]
    }

    /// Gathers INFO's fields.
    pub fn info(&self) -> InfoData {
        let m = self.raft.metrics().borrow_watched().clone();
        let (keyspace, revision, expired, applied, scripts) = match self.state.read() {
            Ok(st) => {
                let now = reader::cluster_now(&self.raft, &st, &self.clock);
                (
                    keyspace_figures(&st.ks, now),
                    st.ks.revision(),
                    st.expired_total,
                    (st.applied_entries, st.applied_commands),
                    st.ks.scripts().len(),
                )
            }
            Err(_) => ((0, 0, 0), 0, 0, (0, 0), 0),
        };
        let allocator = allocator_bytes();
        let rates = self.stats.traffic.rates();
        let sync = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
        let role = role_name(m.state);
        InfoData {
            version: env!("CARGO_PKG_VERSION"),
            run_id: self.run_id.clone(),
            tcp_port: self.addr.port(),
            process_id: std::process::id(),
            uptime_secs: self.started.elapsed().as_secs(),
            connected_clients: self.clients.len(),
            blocked_clients: self.clients.blocked(),
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
fn start_params(c: &Config, port: u16) -> Vec<(&'static str, String)> {
    let l = &c.limits;
    vec![
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
    ]
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
        };
        // Bind first: a port conflict should fail before Raft touches the data directory.
        let listener = TcpListener::bind((config.bind.as_str(), config.port))
            .await
            .with_context(|| format!("binding {}:{}", config.bind, config.port))?;
        let peer_listener = TcpListener::bind((config.bind.as_str(), config.peer_port))
            .await
            .with_context(|| format!("binding peer port {}:{}", config.bind, config.peer_port))?;
        let node = node::start(&settings).await?;
        let addr = listener.local_addr()?;
        let clock = Clock::with_fault(config.test_clock_offset_ms, config.test_clock_rate_ppm);
        let link = Arc::new(LeaderLink::new(node.raft.clone(), node.ctx.clone()));
        let acl = node
            .state
            .read()
            .map_err(|_| anyhow::anyhow!("state lock poisoned"))?
            .acl
            .subscribe();
        let timeout = Duration::from_millis(config.write_timeout_ms);
        let shared = Arc::new(Shared {
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
            settings: crate::cmd::config::Store::new(&start_params(&config, addr.port())),
            slowlog: Default::default(),
            started_unix: unix_secs(),
            shutdown: tokio::sync::Notify::new(),
            acl,
            acl_log: Default::default(),
            config,
        });
        // Subscribed before the first client connects, so that no grant to a waiter is missed.
        let lock_events = shared
            .state
            .read()
            .map_err(|_| anyhow::anyhow!("state lock poisoned"))?
            .waiter_grants
            .subscribe();
        let (stop, stop_rx) = watch::channel(false);
        let mut tasks = JoinSet::new();
        let service = Service {
            raft: node.raft,
            ctx: node.ctx,
            db: node.db,
            handler: Arc::new(Handler {
                shared: shared.clone(),
            }),
        };
        tasks.spawn(service.run(peer_listener, stop_rx.clone()));
        tasks.spawn(housekeeping::run(shared.clone(), stop_rx.clone()));
        tasks.spawn(sample_stats(shared.clone(), stop_rx.clone()));
        tasks.spawn(lockwait::run(shared.clone(), lock_events, stop_rx.clone()));
        tasks.spawn(acl::load_at_start(shared.clone(), stop_rx.clone()));
        tasks.spawn(accept_loop(shared.clone(), listener, stop_rx));
        tracing::info!(addr = %addr, node_id = shared.config.node_id, peer_port = shared.config.peer_port, dir = %shared.config.dir.display(), "palisade ready to accept connections");
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

    /// Installs the function that CONFIG SET loglevel calls to change the log filter.
    pub fn set_log_hook(&self, hook: crate::cmd::config::LogHook) {
        self.shared.settings.set_log_hook(hook);
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

async fn accept_loop(shared: Arc<Shared>, listener: TcpListener, mut stop: watch::Receiver<bool>) {
    let mut sessions = JoinSet::new();
    let mut next_id: u64 = 0;
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stop.changed() => break,
            Some(_) = sessions.join_next(), if !sessions.is_empty() => continue,
        };
        let (stream, peer) = match accepted {
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
                use tokio::io::AsyncWriteExt;
                let mut stream = stream;
                let _ = stream
                    .write_all(b"-ERR max number of clients reached\r\n")
                    .await;
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
        });
        let (sh, rx) = (shared.clone(), stop.clone());
        sessions.spawn(async move {
            session::serve(sh.clone(), stream, id, rx).await;
            sh.clients.remove(id);
        });
    }
    drop(listener);
    let drain = async { while sessions.join_next().await.is_some() {} };
    if tokio::time::timeout(Duration::from_secs(3), drain)
        .await
        .is_err()
    {
        sessions.abort_all();
    }
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
                        None if write => Ok(shared.proposer.submit(c)),
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
            match crate::cmd::raft::parse_argv(argv) {
                Ok(cmd) => admin::execute_local(&shared, cmd).await,
                Err(reply) => reply,
            }
        })
    }
}
