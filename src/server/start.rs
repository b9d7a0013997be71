//! Start-up and shutdown: [`Server::start`] opens storage, starts Raft, binds the ports and
//! spawns the server's tasks.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use openraft::async_runtime::watch::WatchReceiver;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::clients::Clients;
use super::forward::LeaderLink;
use super::handler::Handler;
use super::listen::{accept_loop, bind_client_port, Listeners};
use super::proposer::{Clock, Proposer};
use super::reader::Reader;
use super::stats::sample_stats;
use super::{acl, housekeeping, lockwait, metrics, popwait, save, Shared, Stats};
use crate::config::Config;
use crate::raft::auth::PeerAuth;
use crate::raft::node::{self, NodeSettings};
use crate::raft::service::Service;

/// Environment switch for openraft's `broadcast_submitted_on_append` (on unless this is "0");
/// a benchmark knob, see docs/performance.md.
pub const BROADCAST_SUBMITTED_ENV: &str = "PALISADE_BROADCAST_SUBMITTED";

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

/// How often [`Server::raft_stopped`] looks whether Raft has stopped: the most a fail-stop
/// waits after it.
const RAFT_STOPPED_POLL: Duration = Duration::from_millis(50);

/// A running server.
pub struct Server {
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    tasks: JoinSet<()>,
}

impl Server {
    /// Opens storage, starts Raft, binds the client port and starts serving.
    pub async fn start(config: Config) -> anyhow::Result<Server> {
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
        // Bind first: a port conflict should fail before Raft touches the data directory.
        let ports = Ports::bind(&config, &tls).await?;
        let node = node::start(&node_settings(&config, &tls)).await?;
        let shared = Self::shared(config, &node, &ports, tls, &output_limits)?;
        Self::serve(shared, node, ports)
    }
}

/// What Raft's node needs from the command line.
fn node_settings(config: &Config, tls: &Option<Arc<crate::tls::Tls>>) -> NodeSettings {
    NodeSettings {
        node_id: config.node_id,
        peer_addr: config.peer_addr(),
        dir: config.dir.clone(),
        snapshot_every: config.snapshot_every,
        peers: config.peers.clone(),
        join: config.join,
        lose_unsynced_writes: config.test_lose_unsynced_writes,
        broadcast_submitted: std::env::var(BROADCAST_SUBMITTED_ENV).map_or(true, |v| v != "0"),
        peer_auth: PeerAuth::new(config.cluster_secret.clone())
            .with_tls(tls.clone().filter(|_| config.tls_cluster)),
    }
}

/// Every port the node listens on, bound before Raft starts.
struct Ports {
    listeners: Listeners,
    metrics: Option<TcpListener>,
    peer: TcpListener,
}

impl Ports {
    async fn bind(config: &Config, tls: &Option<Arc<crate::tls::Tls>>) -> anyhow::Result<Ports> {
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
        let peer = TcpListener::bind((peer_bind.as_str(), config.peer_port))
            .await
            .with_context(|| format!("binding peer port {peer_bind}:{}", config.peer_port))?;
        Ok(Ports {
            listeners,
            metrics: metrics_listener,
            peer,
        })
    }
}

impl Server {
    /// The state every task and connection shares.
    fn shared(
        config: Config,
        node: &node::Node,
        ports: &Ports,
        tls: Option<Arc<crate::tls::Tls>>,
        output_limits: &crate::cmd::config::obuf::OutputLimits,
    ) -> anyhow::Result<Arc<Shared>> {
        let (acl, start_revision, apply_timing) = {
            let st = node
                .state
                .read()
                .map_err(|_| anyhow::anyhow!("state lock poisoned"))?;
            (
                st.acl.subscribe(),
                st.ks.revision(),
                st.apply_seconds.clone(),
            )
        };
        let addr = ports.listeners.addr()?;
        // CONFIG GET port: 0 when only TLS is served, as in Redis.
        let plain_port = match &ports.listeners.plain {
            Some(l) => l.local_addr()?.port(),
            None => 0,
        };
        let clock = Clock::with_fault(config.test_clock_offset_ms, config.test_clock_rate_ppm);
        let link = Arc::new(LeaderLink::new(node.raft.clone(), node.ctx.clone()));
        let timeout = Duration::from_millis(config.write_timeout_ms);
        let started_unix = unix_secs();
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
            state: node.state.clone(),
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
                output_limits,
            )),
            tls,
            slowlog: Default::default(),
            started_unix,
            saves: save::Saves::new(started_unix, start_revision),
            shutdown: tokio::sync::Notify::new(),
            acl,
            acl_log: Default::default(),
            announced: Default::default(),
            metrics: ports
                .metrics
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
        Ok(shared)
    }

    /// Starts the peer service and the server's tasks, then accepts clients.
    fn serve(shared: Arc<Shared>, node: node::Node, ports: Ports) -> anyhow::Result<Server> {
        let Ports {
            listeners,
            metrics: metrics_listener,
            peer: peer_listener,
        } = ports;
        let addr = shared.addr;
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
    ///
    /// It looks every [`RAFT_STOPPED_POLL`] rather than waiting for the metrics to change:
    /// openraft changes them on every append, commit and apply, and a waiter woken for each
    /// would cost the node a thread wake-up per write (issue 25).
    pub async fn raft_stopped(&self) -> String {
        let mut metrics = self.shared.raft.metrics();
        let mut tick = tokio::time::interval(RAFT_STOPPED_POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if let Err(fatal) = &metrics.borrow_watched().running_state {
                return fatal.to_string();
            }
            // One poll: ready with an error only once the core has dropped its sender.
            if let Some(Err(_)) = futures::FutureExt::now_or_never(metrics.changed()) {
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
