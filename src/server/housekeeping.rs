//! Leader-only background work: propose eviction of expired keys (expiry is replicated, never
//! local) and of locks whose queue or lock-delay is due and a tick entry about once a second while leases are live, which bounds how late
//! cluster time can run after a failover (docs/time-and-leases.md).

use openraft::async_runtime::watch::WatchReceiver;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::watch;

use super::reader::cluster_now;
use super::Shared;
use crate::cmd::evict::{Evict, Tick};
use crate::cmd::Command;

/// How often the leader looks for expired keys.
pub const SCAN_INTERVAL: Duration = Duration::from_millis(100);
/// Longest gap between stamped entries while any key has a TTL.
pub const TICK_INTERVAL_MS: u64 = 1000;
/// Most keys removed by one eviction entry.
pub const EVICT_BATCH: usize = 1000;
/// Most keys one sweep looks at (under the state's read lock): 1M keys are swept in about
/// 2.5 s, a keyspace of up to this many keys every scan interval.
pub const SWEEP_SCAN: usize = 40_000;

/// Runs until `stop` changes.
pub async fn run(shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let mut interval = tokio::time::interval(SCAN_INTERVAL);
    // Where the expiry sweep goes on from (leader-local; any node can restart it anywhere).
    let mut sweep: Option<Bytes> = None;
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            _ = stop.changed() => return,
        }
        let Some(cmd) = next_entry(&shared, &mut sweep) else {
            continue;
        };
        let rx = shared.proposer.submit(cmd);
        // Wait for it, so that at most one housekeeping entry is in flight.
        let _ =
            tokio::time::timeout(Duration::from_millis(shared.config.write_timeout_ms), rx).await;
    }
}

/// Decides what, if anything, the leader should propose now.
fn next_entry(shared: &Shared, sweep: &mut Option<Bytes>) -> Option<Command> {
    let metrics = shared.raft.metrics().borrow_watched().clone();
    if metrics.current_leader != Some(shared.config.node_id)
        || metrics.state != openraft::ServerState::Leader
    {
        return None;
    }
    let st = shared.state.read().ok()?;
    let now = cluster_now(&shared.raft, &st, &shared.clock);
    let (mut expired, next) = st
        .ks
        .expired_keys(now, sweep.as_ref(), EVICT_BATCH, SWEEP_SCAN);
    *sweep = next;
    // Locks with waiters or a lock-delay are looked at every interval, not once per sweep
    // of the whole keyspace: a free or expired one goes to its first waiter in this entry.
    for key in st.ks.locks_due(now, EVICT_BATCH) {
        if !expired.contains(&key) {
            expired.push(key);
        }
    }
    if !expired.is_empty() {
        return Some(Command::Evict(Evict { keys: expired }));
    }
    // A new leader (or restarted leader process) stamps an entry at once, so that its clock
    // offset is set and reads can use its own clock.
    let clock = st.ks.clock();
    if clock.term != metrics.current_term || clock.boot != shared.clock.boot {
        return Some(Command::Tick(Tick));
    }
    let idle = shared.clock.now_ms().saturating_sub(
        shared
            .proposer
            .stats
            .last_proposal_ms
            .load(Ordering::Relaxed),
    );
    (st.ks.volatile_len() > 0 && idle >= TICK_INTERVAL_MS).then_some(Command::Tick(Tick))
}
