//! Server-wide counters (INFO stats, commandstats, errorstats) and their 100 ms sampler.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::info::allocator_bytes;
use super::{session, Shared};

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
    pub(super) fn note_memory(&self, used: u64) -> u64 {
        self.memory_peak
            .fetch_max(used, Ordering::Relaxed)
            .max(used)
    }
}

/// Samples the instantaneous rates and the memory peak every 100 ms, until `stop`.
pub(super) async fn sample_stats(shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
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

impl Shared {
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
}
