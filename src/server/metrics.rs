//! `--metrics-addr host:port`: Prometheus text at `/metrics` (404 elsewhere), every family
//! prefixed `palisade_` (docs/metrics.md lists them).
//!
//! The registry and the encoding are prometheus-client's. Three sources feed it, none of
//! them on the path of a command:
//! - the lock families are counted by [`count_events`] from the lock events this node's
//!   applied log produces (the same broadcast that pub/sub reads), so every lock kind that
//!   emits `Event::Lock` is counted without more code; the same task counts leader changes
//!   from Raft's metrics;
//! - the store's latency histograms (`palisade_raft_fsync_seconds`,
//!   `palisade_raft_apply_seconds`) are observed where the store syncs and applies;
//! - everything else (Raft's indexes, queued waiters, connections, commands, fenced
//!   refusals) is read at scrape time from figures the node keeps anyway ([`refresh`]).

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use openraft::async_runtime::watch::WatchReceiver;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::watch;

use super::Shared;
use crate::resp::Reply;
use crate::state::{Event, LockEventKind};
use crate::store::state_machine::EventReceiver;
use crate::store::Timing;

/// The errorstats prefix of a write refused for a lower fencing token (FENCEDSET,
/// FENCEDGET).
const FENCED_PREFIX: &str = "FENCED";
/// Most leases whose grant time is kept for the hold-time histogram (a u64 token and a u32
/// time, about 20 bytes each with the map's slack: 40 MB at the cap): grants past it are
/// still counted, but neither timed nor in `palisade_locks_held`.
const MAX_TIMED_LEASES: usize = 2_000_000;
/// How long a scraper may take to send its request's headers.
const HEADER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// The Content-Type of prometheus-client's text encoding (OpenMetrics 1.0).
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Every family this node exports, and the registry that encodes them.
pub struct Metrics {
    registry: Registry,
    lock: LockFamilies,
    raft: RaftFamilies,
    server: ServerFamilies,
}

/// The lock families, counted from applied lock events (and the waits of this node's
/// clients).
#[derive(Default)]
struct LockFamilies {
    grants: Counter,
    releases: Counter,
    expiries: Counter,
    renewals: Counter,
    held: Gauge,
    waiters: Gauge,
    fenced: Counter,
    hold_seconds: Seconds,
    wait_seconds: Seconds,
    events_lost: Counter,
}

/// A histogram of durations in seconds, 1 ms to about 9 minutes.
#[derive(Clone)]
struct Seconds(Histogram);

impl Default for Seconds {
    fn default() -> Self {
        Seconds(Histogram::new(exponential_buckets(0.001, 2.0, 20)))
    }
}

/// Raft's figures.
#[derive(Default)]
struct RaftFamilies {
    has_leader: Gauge,
    is_leader: Gauge,
    leader_changes: Counter,
    term: Gauge,
    last_log_index: Gauge,
    committed_index: Gauge,
    applied_index: Gauge,
    pending: Gauge,
    proposals: Counter,
    proposed_commands: Counter,
    applied_entries: Counter,
    applied_commands: Counter,
}

/// Connections and commands of this node.
#[derive(Default)]
struct ServerFamilies {
    connections: Counter,
    rejected: Counter,
    clients: Gauge,
    commands: Counter,
}

impl Metrics {
    /// The families, with the store's timings (the log's syncs, the state machine's runs).
    pub fn new(fsync: &Timing, apply: &Timing) -> Metrics {
        let (lock, raft, server) = (
            LockFamilies::default(),
            RaftFamilies::default(),
            ServerFamilies::default(),
        );
        let mut r = Registry::with_prefix("palisade");
        let l = &lock;
        r.register(
            "lock_grants",
            "Locks granted (at once or to a waiter) by entries this node applied",
            l.grants.clone(),
        );
        r.register(
            "lock_releases",
            "Locks released by their holder (UNLOCK), or given back because the waiter had gone",
            l.releases.clone(),
        );
        r.register(
            "lock_expiries",
            "Leases that expired while held",
            l.expiries.clone(),
        );
        r.register(
            "lock_renewals",
            "Leases renewed (RENEW, or LOCK again by the holder)",
            l.renewals.clone(),
        );
        r.register(
            "locks_held",
            "Locks held, of those granted since this process started",
            l.held.clone(),
        );
        r.register(
            "lock_waiters",
            "Waiters queued for locks (replicated queues)",
            l.waiters.clone(),
        );
        r.register("fenced_rejections", "Writes refused for a fencing token lower than the key's highest (FENCED replies to this node's clients)", l.fenced.clone());
        r.register(
            "lock_hold_seconds",
            "Time from a grant to its release or expiry",
            l.hold_seconds.0.clone(),
        );
        r.register(
            "lock_acquire_wait_seconds",
            "LOCK ... WAIT on this node: time from the request to the grant",
            l.wait_seconds.0.clone(),
        );
        r.register(
            "metrics_events_lost",
            "Applied events the metrics task missed (it fell behind)",
            l.events_lost.clone(),
        );
        let f = &raft;
        r.register(
            "raft_has_leader",
            "1 if this node knows a leader",
            f.has_leader.clone(),
        );
        r.register(
            "raft_is_leader",
            "1 if this node is the leader",
            f.is_leader.clone(),
        );
        r.register(
            "raft_leader_changes",
            "Times this node saw a new leader",
            f.leader_changes.clone(),
        );
        r.register("raft_term", "Current Raft term", f.term.clone());
        r.register(
            "raft_last_log_index",
            "Last index in this node's log",
            f.last_log_index.clone(),
        );
        r.register(
            "raft_committed_index",
            "Last index this node knows committed",
            f.committed_index.clone(),
        );
        r.register(
            "raft_applied_index",
            "Last index this node applied",
            f.applied_index.clone(),
        );
        r.register(
            "raft_pending_entries",
            "Entries in this node's log not yet applied",
            f.pending.clone(),
        );
        r.register(
            "raft_proposals",
            "Batches of client commands this node proposed (leader)",
            f.proposals.clone(),
        );
        r.register(
            "raft_proposed_commands",
            "Client commands in those batches",
            f.proposed_commands.clone(),
        );
        r.register(
            "raft_applied_entries",
            "Client entries (batches) applied by this process",
            f.applied_entries.clone(),
        );
        r.register(
            "raft_applied_commands",
            "Commands in those entries",
            f.applied_commands.clone(),
        );
        r.register(
            "raft_fsync_seconds",
            "Time of each sync of the Raft log's WAL",
            fsync.0.clone(),
        );
        r.register(
            "raft_apply_seconds",
            "Time to apply and persist each run of entries",
            apply.0.clone(),
        );
        let s = &server;
        r.register(
            "connections_received",
            "Client connections accepted",
            s.connections.clone(),
        );
        r.register(
            "connections_rejected",
            "Client connections refused at maxclients",
            s.rejected.clone(),
        );
        r.register(
            "connected_clients",
            "Client connections open",
            s.clients.clone(),
        );
        r.register(
            "commands_processed",
            "Commands executed for clients",
            s.commands.clone(),
        );
        Metrics {
            registry: r,
            lock,
            raft,
            server,
        }
    }

    /// Records a `LOCK ... WAIT` of this node's client that ended with a grant.
    pub fn lock_waited(&self, started: Instant, reply: &Reply) {
        if matches!(reply, Reply::Int(_) | Reply::Array(_)) {
            self.lock
                .wait_seconds
                .0
                .observe(started.elapsed().as_secs_f64());
        }
    }

    /// The text exposition, after reading the scrape-time figures.
    fn encode(&self, shared: &Shared) -> Result<String, std::fmt::Error> {
        refresh(self, shared);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

/// A counter set to a figure kept elsewhere.
fn set(c: &Counter, v: u64) {
    c.inner().store(v, Ordering::Relaxed);
}

fn gauge(g: &Gauge, v: u64) {
    g.set(i64::try_from(v).unwrap_or(i64::MAX));
}

/// Reads the figures that are exported as they stand at scrape time.
fn refresh(m: &Metrics, shared: &Shared) {
    let rm = shared.raft.metrics().borrow_watched().clone();
    let f = &m.raft;
    gauge(&f.has_leader, u64::from(rm.current_leader.is_some()));
    gauge(
        &f.is_leader,
        u64::from(rm.state == openraft::ServerState::Leader),
    );
    gauge(&f.term, rm.current_term);
    let last_log = rm.last_log_index.unwrap_or(0);
    let applied = rm.last_applied.map_or(0, |l| l.index);
    gauge(&f.last_log_index, last_log);
    gauge(
        &f.committed_index,
        rm.local_committed.map_or(0, |l| l.index),
    );
    gauge(&f.applied_index, applied);
    gauge(&f.pending, last_log.saturating_sub(applied));
    let p = &shared.proposer.stats;
    set(&f.proposals, p.batches.load(Ordering::Relaxed));
    set(&f.proposed_commands, p.commands.load(Ordering::Relaxed));
    if let Ok(st) = shared.state.read() {
        set(&f.applied_entries, st.applied_entries);
        set(&f.applied_commands, st.applied_commands);
        let queued: usize = st.ks.lock_metas().values().map(|m| m.queue.len()).sum();
        gauge(&m.lock.waiters, queued as u64);
    }
    let stats = &shared.stats;
    let fenced = stats
        .calls
        .errors()
        .into_iter()
        .find(|(p, _)| p == FENCED_PREFIX);
    set(&m.lock.fenced, fenced.map_or(0, |(_, n)| n));
    let s = &m.server;
    set(&s.connections, stats.connections.load(Ordering::Relaxed));
    set(&s.rejected, stats.rejected.load(Ordering::Relaxed));
    set(&s.commands, stats.calls.executed());
    gauge(&s.clients, shared.clients.len() as u64);
}

/// Binds `--metrics-addr`; the error names the flag.
pub async fn bind(addr: &str) -> anyhow::Result<TcpListener> {
    use anyhow::Context;
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding --metrics-addr {addr}"))
}

/// Serves `/metrics` on `listener` until `stop`.
pub async fn serve(shared: Arc<Shared>, listener: TcpListener, mut stop: watch::Receiver<bool>) {
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "metrics: accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = stop.changed() => return,
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let shared = shared.clone();
                async move { Ok::<_, Infallible>(respond(&shared, &req)) }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            // A client that never finishes its request headers is dropped, not kept for ever.
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(io, service);
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "metrics: connection ended with an error");
            }
        });
    }
}

/// The page for one request: the exposition at `/metrics`, 404 elsewhere.
fn respond<B>(shared: &Shared, req: &Request<B>) -> Response<Full<Bytes>> {
    let page = match (req.uri().path(), &shared.metrics) {
        ("/metrics", Some(m)) => m.encode(shared).ok(),
        _ => None,
    };
    let response = match page {
        Some(text) => Response::builder()
            .header(hyper::header::CONTENT_TYPE, CONTENT_TYPE)
            .body(Full::new(Bytes::from(text))),
        None => Response::builder()
            .status(StatusCode::NOT_FOUND)
            .body(Full::new(Bytes::from_static(b"not found; try /metrics\n"))),
    };
    response.unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}

/// Counts the lock events of this node's applied log and the leader changes it sees, until
/// `stop`. `events` is subscribed before the first client connects.
pub async fn count_events(
    shared: Arc<Shared>,
    mut events: EventReceiver,
    mut stop: watch::Receiver<bool>,
) {
    let Some(m) = shared.metrics.as_ref() else {
        return;
    };
    let mut raft = shared.raft.metrics();
    let mut leader = raft.borrow_watched().current_leader;
    if leader.is_some() {
        m.raft.leader_changes.inc();
    }
    let mut leases = Leases::default();
    loop {
        tokio::select! {
            event = events.recv() => match event.as_deref() {
                Ok(Event::Lock { kind, token, .. }) => leases.note(&m.lock, *kind, *token),
                Ok(_) => {}
                Err(RecvError::Lagged(n)) => {
                    m.lock.events_lost.inc_by(*n);
                }
                Err(RecvError::Closed) => return,
            },
            changed = raft.changed() => {
                if changed.is_err() {
                    return;
                }
                let now = raft.borrow_watched().current_leader;
                if now.is_some() && now != leader {
                    m.raft.leader_changes.inc();
                }
                leader = now.or(leader);
            }
            _ = stop.changed() => return,
        }
    }
}

/// When each lease this process saw granted began, by token (for the hold time).
struct Leases {
    /// Grant times in ms since `base` (u32: a lease held past 49 days is timed as 49 days).
    granted: HashMap<u64, u32>,
    base: Instant,
}

impl Default for Leases {
    fn default() -> Self {
        Leases {
            granted: HashMap::new(),
            base: Instant::now(),
        }
    }
}

impl Leases {
    /// Counts one lock event.
    fn note(&mut self, f: &LockFamilies, kind: LockEventKind, token: u64) {
        match kind {
            LockEventKind::Granted => {
                f.grants.inc();
                if self.granted.len() < MAX_TIMED_LEASES {
                    self.granted.insert(token, self.now_ms());
                }
            }
            LockEventKind::Released => {
                f.releases.inc();
                self.end(f, token);
            }
            LockEventKind::Expired => {
                f.expiries.inc();
                self.end(f, token);
            }
            LockEventKind::Renewed => {
                f.renewals.inc();
            }
        }
        f.held.set(self.granted.len() as i64);
    }

    /// A lease ended: its hold time, if its grant was seen.
    fn end(&mut self, f: &LockFamilies, token: u64) {
        if let Some(at) = self.granted.remove(&token) {
            let held_ms = self.now_ms().saturating_sub(at);
            f.hold_seconds.0.observe(f64::from(held_ms) / 1000.0);
        }
    }

    /// Ms since `base`, saturating.
    fn now_ms(&self) -> u32 {
        u32::try_from(self.base.elapsed().as_millis()).unwrap_or(u32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_events_move_the_counters_and_the_hold_time() {
        let m = Metrics::new(&Timing::default(), &Timing::default());
        let mut leases = Leases::default();
        leases.note(&m.lock, LockEventKind::Granted, 5);
        leases.note(&m.lock, LockEventKind::Granted, 6);
        leases.note(&m.lock, LockEventKind::Renewed, 5);
        assert_eq!(m.lock.held.get(), 2);
        leases.note(&m.lock, LockEventKind::Released, 5);
        leases.note(&m.lock, LockEventKind::Expired, 6);
        // A lease granted before this process started: counted, not timed.
        leases.note(&m.lock, LockEventKind::Released, 1);
        assert_eq!(m.lock.grants.get(), 2);
        assert_eq!(m.lock.releases.get(), 2);
        assert_eq!(m.lock.expiries.get(), 1);
        assert_eq!(m.lock.renewals.get(), 1);
        assert_eq!(m.lock.held.get(), 0);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &m.registry).unwrap();
        assert!(
            text.contains("palisade_lock_hold_seconds_count 2\n"),
            "{text}"
        );
        assert!(text.contains("palisade_lock_grants_total 2\n"), "{text}");
    }
}
