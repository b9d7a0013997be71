//! The virtual cluster clock (docs/time-and-leases.md, "Cluster time").
//!
//! Each log entry carries the proposing leader's monotonic timestamp. Within one term,
//! cluster time is that timestamp plus the term's offset. When the first entry of a new term
//! is applied, the offset is chosen so that cluster time continues from the last value the
//! previous leader stamped: it never jumps at a failover, so a lease can be late but never
//! early. A leader process that restarts may keep its term (a one-node cluster re-elects
//! itself in the same term), so the offset is keyed by (term, boot id of the leader process),
//! not by term alone: a new process's monotonic clock starts from zero.

use serde::{Deserialize, Serialize};

/// Replicated clock state; part of every snapshot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterClock {
    /// Term of the last entry that carried a timestamp.
    pub term: u64,
    /// Boot id of the leader process that stamped it.
    pub boot: u64,
    /// Cluster time minus leader timestamp, for `term`.
    pub offset: i64,
    /// Cluster time (ms) of the last applied entry.
    pub now: u64,
}

impl ClusterClock {
    /// Advances the clock for an entry of `term` stamped `leader_ts` by the leader process
    /// `boot`; returns its cluster time.
    pub fn advance(&mut self, term: u64, boot: u64, leader_ts: u64) -> u64 {
        if term != self.term || boot != self.boot {
            self.term = term;
            self.boot = boot;
            self.offset = self.now as i64 - leader_ts as i64;
        }
        let t = (leader_ts as i64 + self.offset).max(0) as u64;
        // Within a term the leader's clock is monotonic; the max() only guards a restarted
        // leader process that somehow kept its term.
        self.now = self.now.max(t);
        self.now
    }

    /// The leader's estimate of cluster time now, for serving reads.
    ///
    /// Only valid on the leader of `term` with its own monotonic `leader_now`; before the
    /// leader's first stamped entry is applied it is conservatively the last applied time.
    pub fn estimate(&self, term: u64, boot: u64, leader_now: u64) -> u64 {
        if term == self.term && boot == self.boot {
            self.now
                .max((leader_now as i64 + self.offset).max(0) as u64)
        } else {
            self.now
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continues_across_terms_without_jumping() {
        let mut c = ClusterClock::default();
        assert_eq!(c.advance(1, 7, 1000), 0);
        assert_eq!(c.advance(1, 7, 1500), 500);
        // New leader whose monotonic clock reads 10: cluster time continues at 500.
        assert_eq!(c.advance(2, 8, 10), 500);
        assert_eq!(c.advance(2, 8, 110), 600);
        // New leader whose clock reads far ahead: no forward jump either.
        assert_eq!(c.advance(3, 9, 1_000_000), 600);
        assert_eq!(c.estimate(3, 9, 1_000_050), 650);
        assert_eq!(c.estimate(4, 9, 5), 600);
        // The same term from a restarted process (new boot id, clock from zero): no freeze.
        assert_eq!(c.advance(3, 10, 5), 600);
        assert_eq!(c.advance(3, 10, 105), 700);
    }
}
