//! Lease reads, and the rule at start-up that keeps them safe across a restart.
//!
//! A linearizable read needs proof that no other leader can have committed a write this
//! leader has not seen. ReadIndex gets it with one heartbeat round per batch of reads. A lease
//! read takes it from the quorum's last acknowledgement instead: openraft records, for each
//! append or heartbeat a quorum answered, the time the leader *sent* it. A follower that
//! accepted that message refuses every vote, its own candidacy included, for one
//! [`LEADER_LEASE`] measured from when it received it, later than the send. So while a
//! quorum's acknowledgement is younger than [`LEASE_READ_AGE`] (half the lease), no quorum can
//! have elected another leader, and the leader reads its applied state at once. Otherwise it
//! sends a heartbeat and waits for the quorum, as ReadIndex does.
//!
//! **The clock bound.** The argument compares intervals on different machines' monotonic
//! clocks: it holds while no follower's clock runs more than twice as fast as the leader's
//! over one lease (a second). Wall-clock jumps, NTP steps and a paused process do not matter:
//! only the rate of `CLOCK_MONOTONIC` does, and real clocks differ by parts per million.
//!
//! **Restarts.** A follower's lease lives in memory. A node that acknowledged a heartbeat,
//! crashed and came back at once would grant a vote with no lease, and a quorum could elect
//! another leader inside the old one's lease. So a node that restarts as a member of a
//! cluster of several voters neither answers vote requests ([`VoteHold`]) nor campaigns for
//! one [`LEADER_LEASE`] after it starts. A new node, a node that joins, and a one-voter
//! cluster (whose leader needs no acknowledgement) start at once.
//!
//! `PALISADE_READ_INDEX=1` in a node's environment makes every read use ReadIndex (for
//! comparisons; the restart rule stays).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use openraft::LinearizerOption;

/// openraft's `election_timeout_max`, in milliseconds. openraft 0.10 uses it as the leader
/// lease too.
pub const ELECTION_TIMEOUT_MAX_MS: u64 = 1000;

/// How long a follower refuses votes after it last heard from its leader (openraft's
/// `leader_lease`, which is `election_timeout_max`).
pub const LEADER_LEASE: Duration = Duration::from_millis(ELECTION_TIMEOUT_MAX_MS);

/// The oldest quorum acknowledgement a lease read accepts: half the lease, the margin for
/// clock rates (module docs).
pub const LEASE_READ_AGE: Duration = Duration::from_millis(ELECTION_TIMEOUT_MAX_MS / 2);

/// Test-only: a restarted node holds its votes this many milliseconds instead of one lease,
/// so that a test on a loaded machine surely reaches it inside the hold.
pub const TEST_VOTE_HOLD_ENV: &str = "PALISADE_TEST_VOTE_HOLD_MS";

/// How long a restarted node holds its votes: one [`LEADER_LEASE`], or what
/// [`TEST_VOTE_HOLD_ENV`] says when it is set and longer.
pub fn restart_hold() -> Duration {
    std::env::var(TEST_VOTE_HOLD_ENV)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map(Duration::from_millis)
        .map_or(LEADER_LEASE, |d| d.max(LEADER_LEASE))
}

/// How a read confirms this node's leadership: a lease read, or ReadIndex when
/// `PALISADE_READ_INDEX` is set to anything but `0`.
pub fn read_option() -> LinearizerOption {
    let read_index = std::env::var("PALISADE_READ_INDEX").is_ok_and(|v| v != "0");
    if read_index {
        openraft::ReadPolicy::ReadIndex.into()
    } else {
        LinearizerOption::new(Some(LEASE_READ_AGE), true)
    }
}

/// Until when this node refuses to vote (module docs, "Restarts").
#[derive(Debug)]
pub struct VoteHold {
    until: Mutex<Option<Instant>>,
}

impl Default for VoteHold {
    /// No hold.
    fn default() -> Self {
        VoteHold {
            until: Mutex::new(None),
        }
    }
}

impl VoteHold {
    /// Holds votes for `d` from now.
    pub fn for_duration(d: Duration) -> Self {
        VoteHold {
            until: Mutex::new(Some(Instant::now() + d)),
        }
    }

    /// Ends the hold now.
    pub fn release(&self) {
        *self.lock() = None;
    }

    /// The hold's end, if it is still on.
    pub fn until(&self) -> Option<Instant> {
        let mut until = self.lock();
        if until.is_some_and(|t| Instant::now() >= t) {
            *until = None;
        }
        *until
    }

    /// Whether a vote request must be refused now.
    pub fn holds(&self) -> bool {
        self.until().is_some()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        // A plain value: a panic elsewhere cannot leave it half-written.
        self.until.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hold_ends_at_its_time_or_when_released() {
        assert!(!VoteHold::default().holds());
        let h = VoteHold::for_duration(Duration::from_millis(30));
        assert!(h.holds());
        std::thread::sleep(Duration::from_millis(40));
        assert!(!h.holds());
        let h = VoteHold::for_duration(Duration::from_secs(60));
        assert!(h.holds());
        h.release();
        assert!(!h.holds());
    }
}
