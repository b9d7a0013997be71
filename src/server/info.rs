//! INFO's figures: [`Shared::info`] gathers them from Raft, the state machine, the store
//! and the process.

use std::sync::atomic::Ordering;

use openraft::async_runtime::watch::WatchReceiver;

use super::{reader, Shared};
use crate::cmd::info::InfoData;

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
            peer_appends: {
                let a = self.link.append_stats();
                (
                    a.sent.load(Ordering::Relaxed),
                    a.coalesced.load(Ordering::Relaxed),
                )
            },
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
pub(super) fn allocator_bytes() -> (u64, u64) {
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
