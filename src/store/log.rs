//! The Raft log and vote in RocksDB (openraft 0.10 `RaftLogStorage`).
//!
//! Truncations, purges and votes are written with `sync = true`. Appends are written to
//! RocksDB at once (so that they are readable when `append` returns, as openraft requires)
//! but synced by a separate thread: it takes every append waiting for a sync, syncs the WAL
//! once for all of them (group commit), and only then tells openraft they are flushed. So an
//! entry is durable before openraft counts it, and an acknowledged write survives a crash.
//!
//! openraft 0.10 does not wait for that callback before it goes on: the leader replicates
//! what it has submitted while its own sync runs and counts itself toward the quorum only
//! once the callback has fired; a follower answers an append once its sync has. While one
//! sync runs, further appends queue behind it, and the next sync completes all of them.
//!
//! Every write runs on tokio's blocking pool ([`super::off_runtime`]), so a slow disk never
//! holds a worker thread of the runtime.

use std::fmt::Debug;
use std::io;
use std::ops::{Bound, RangeBounds};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use openraft::storage::{IOFlushed, RaftLogStorage};
use openraft::{LogState, OptionalSend, RaftLogReader};
use rocksdb::{Direction, IteratorMode, WriteBatch, WriteOptions, DB};

use super::schema::{
    cf, dec, enc, get_meta, index_key, read_err, write_err, AppliedMeta, Result, CF_LOG, CF_META,
    K_APPLIED, K_COMMITTED, K_PURGED, K_VOTE,
};
use crate::raft_types::{Entry, LogId, TypeConfig, Vote};

/// The log store; cheap to clone (it shares the database and the sync thread).
#[derive(Clone)]
pub struct LogStore {
    db: Arc<DB>,
    /// Appends written but not yet synced, for the sync thread.
    syncer: std::sync::mpsc::Sender<Waiting>,
    /// Counters of the sync thread, and its test-only delay.
    sync: Arc<SyncStats>,
    /// A purge waits until the state machine has applied what it removes (see
    /// [`LogStore::wait_applied`]). Off only for openraft's storage suite, which tests the
    /// log store without a state machine.
    purge_waits_for_applied: bool,
    /// `limited_get_log_entries` returns only the run of entries that begins exactly at the
    /// range's start (set on the readers openraft's replication uses, see `get_log_reader`).
    contiguous: bool,
}

/// How long a purge waits for the state machine to persist the entries it removes.
const PURGE_WAIT: Duration = Duration::from_secs(60);

fn synced() -> WriteOptions {
    let mut w = WriteOptions::default();
    w.set_sync(true);
    w
}

/// What the log's sync thread has done (INFO), and a test-only delay before each sync.
#[derive(Debug, Default)]
pub struct SyncStats {
    /// WAL syncs done for appends.
    pub syncs: AtomicU64,
    /// Appends those syncs completed (so `appends / syncs` appends share one sync).
    pub appends: AtomicU64,
    /// Entries those appends held.
    pub entries: AtomicU64,
    /// Test-only: sleep this long before each sync (`RAFT.FAULT SYNCDELAY`), so that a test
    /// can show replication overlapping a slow local sync.
    pub test_delay_ms: AtomicU64,
    /// How long each WAL sync took (`palisade_raft_fsync_seconds`).
    pub fsync_seconds: super::Timing,
}

/// One append waiting for the sync thread.
struct Waiting {
    callback: IOFlushed<TypeConfig>,
    entries: u64,
}

impl LogStore {
    /// Wraps an opened database. Fails only if the sync thread cannot be started.
    pub fn new(db: Arc<DB>) -> io::Result<Self> {
        let (syncer, rx) = std::sync::mpsc::channel::<Waiting>();
        let sync = Arc::new(SyncStats::default());
        // A weak handle: the database closes when the store is dropped, without waiting for
        // this thread, which ends when the last LogStore (the last sender) is dropped.
        let sync_db = Arc::downgrade(&db);
        let stats = sync.clone();
        std::thread::Builder::new()
            .name("palisade-wal-sync".into())
            .spawn(move || sync_loop(&sync_db, &rx, &stats))?;
        Ok(LogStore {
            db,
            syncer,
            sync,
            purge_waits_for_applied: true,
            contiguous: false,
        })
    }

    /// The sync thread's counters and test switch.
    pub fn sync_stats(&self) -> Arc<SyncStats> {
        self.sync.clone()
    }

    /// The same store, but purges do not wait for the state machine (openraft's storage
    /// suite purges logs that nothing has applied).
    #[cfg(test)]
    pub fn without_purge_guard(self) -> Self {
        LogStore {
            purge_waits_for_applied: false,
            ..self
        }
    }

    /// The shared database handle.
    pub fn db(&self) -> &Arc<DB> {
        &self.db
    }

    async fn put_meta_synced<T: serde::Serialize>(&self, key: &[u8], v: &T) -> Result<()> {
        let mut wb = WriteBatch::default();
        wb.put_cf(cf(&self.db, CF_META)?, key, enc(v)?);
        self.write_off_runtime(wb, true).await
    }

    /// Writes `wb` (synced if asked) on the blocking pool (see [`super::off_runtime`]).
    async fn write_off_runtime(&self, wb: WriteBatch, sync: bool) -> Result<()> {
        let db = self.db.clone();
        super::off_runtime(move || {
            let opts = if sync {
                synced()
            } else {
                WriteOptions::default()
            };
            db.write_opt(wb, &opts).map_err(write_err)
        })
        .await
    }

    /// Waits until the state machine has persisted `index` as applied.
    ///
    /// openraft 0.9 hands a received snapshot to the state-machine task and, without waiting
    /// for it to be installed, purges the log the snapshot covers. A crash in between left
    /// the log purged past the persisted state machine, and the node could never start again
    /// (`LogIndexNotFound` while re-applying; found by the chaos suite's snapshot-crash
    /// fault). The state machine writes `last_applied` to this same database, so a purge
    /// waits here until what it removes is covered on disk.
    async fn wait_applied(&self, index: u64) -> Result<()> {
        let deadline = Instant::now() + PURGE_WAIT;
        loop {
            let meta: Option<AppliedMeta> = get_meta(&self.db, K_APPLIED)?;
            if meta
                .and_then(|m| m.last_applied)
                .is_some_and(|a| a.index >= index)
            {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let msg = format!("purge up to {index}: the state machine has not applied it");
                return Err(io::Error::new(io::ErrorKind::TimedOut, msg));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    fn last_entry_log_id(&self) -> Result<Option<LogId>> {
        let mut it = self
            .db
            .iterator_cf(cf(&self.db, CF_LOG)?, IteratorMode::End);
        match it.next() {
            None => Ok(None),
            Some(item) => {
                let (_, v) = item.map_err(read_err)?;
                let e: Entry = dec(&v)?;
                Ok(Some(e.log_id))
            }
        }
    }
}

/// Syncs the WAL for every append waiting, one sync for all of them, then reports them flushed.
fn sync_loop(db: &std::sync::Weak<DB>, rx: &std::sync::mpsc::Receiver<Waiting>, stats: &SyncStats) {
    while let Ok(first) = rx.recv() {
        let mut waiting = vec![first];
        waiting.extend(rx.try_iter());
        // After taking the batch: an append that arrives during the delay waits for the next
        // round, so every append sees the whole delay.
        let delay = stats.test_delay_ms.load(Ordering::Relaxed);
        if delay > 0 {
            std::thread::sleep(Duration::from_millis(delay));
        }
        let started = Instant::now();
        let res = match db.upgrade() {
            Some(db) => db.flush_wal(true).map_err(|e| e.to_string()),
            None => Err("the database is closed".to_string()),
        };
        stats.fsync_seconds.since(started);
        if let Err(e) = &res {
            tracing::error!(error = %e, "syncing the Raft log failed");
        }
        stats.syncs.fetch_add(1, Ordering::Relaxed);
        stats
            .appends
            .fetch_add(waiting.len() as u64, Ordering::Relaxed);
        let entries: u64 = waiting.iter().map(|w| w.entries).sum();
        stats.entries.fetch_add(entries, Ordering::Relaxed);
        for w in waiting {
            let io = match &res {
                Ok(()) => Ok(()),
                Err(e) => Err(io::Error::other(e.clone())),
            };
            w.callback.io_completed(io);
        }
    }
}

impl LogStore {
    /// The entries of `range` that the log holds; with `contiguous`, only the run that begins
    /// exactly at the range's start (nothing if the start is not there).
    fn read_range<RB: RangeBounds<u64>>(&self, range: RB, contiguous: bool) -> Result<Vec<Entry>> {
        let start = match range.start_bound() {
            Bound::Included(x) => *x,
            Bound::Excluded(x) => x.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let key = index_key(start);
        let it = self.db.iterator_cf(
            cf(&self.db, CF_LOG)?,
            IteratorMode::From(&key, Direction::Forward),
        );
        let mut out = Vec::new();
        let mut want = start;
        for item in it {
            let (k, v) = item.map_err(read_err)?;
            let idx = super::schema::decode_u64(&k).unwrap_or(u64::MAX);
            if !range.contains(&idx) || (contiguous && idx != want) {
                break;
            }
            out.push(dec(&v)?);
            want = idx.saturating_add(1);
        }
        Ok(out)
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>> {
        self.read_range(range, false)
    }

    /// Replication reads through this method. A RocksDB seek lands on the first key at or
    /// after the start; if the start was purged meanwhile (a leader purges while a
    /// replication stream is about to read), that key is later, and openraft (0.9 and 0.10
    /// alike) would send those entries after a `prev_log_id` they do not follow. Under 0.9 a
    /// follower appended them and its log had a hole it could never apply across (bug 1's
    /// second path, found by the chaos soaks). So the replication reader answers only with
    /// entries that begin exactly at the start; openraft takes an empty answer for a
    /// heartbeat and decides again.
    async fn limited_get_log_entries(&mut self, start: u64, end: u64) -> Result<Vec<Entry>> {
        let out = self.read_range(start..end, self.contiguous)?;
        if out.is_empty() && start < end {
            tracing::warn!(
                start,
                end,
                "replication read from a purged index: sending nothing"
            );
        }
        Ok(out)
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>> {
        get_meta(&self.db, K_VOTE)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>> {
        let last_purged = get_meta::<Option<LogId>>(&self.db, K_PURGED)?.flatten();
        let last = self.last_entry_log_id()?.or(last_purged);
        Ok(LogState {
            last_purged_log_id: last_purged,
            last_log_id: last,
        })
    }

    /// The reader replication uses: contiguous reads (see `limited_get_log_entries`).
    async fn get_log_reader(&mut self) -> Self::LogReader {
        LogStore {
            contiguous: true,
            ..self.clone()
        }
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<()> {
        self.put_meta_synced(K_VOTE, vote).await
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<()> {
        // Not synced: a lost `committed` only means entries are re-applied after the next
        // commit, never that an uncommitted entry is applied. (Leader restore, which would
        // trust a stale state machine, is off: see `raft::node`.)
        let mut wb = WriteBatch::default();
        wb.put_cf(cf(&self.db, CF_META)?, K_COMMITTED, enc(&committed)?);
        self.write_off_runtime(wb, false).await
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>> {
        Ok(get_meta::<Option<LogId>>(&self.db, K_COMMITTED)?.flatten())
    }

    async fn append<I>(&mut self, entries: I, callback: IOFlushed<TypeConfig>) -> Result<()>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let log = cf(&self.db, CF_LOG)?;
        let mut wb = WriteBatch::default();
        let mut n = 0;
        for entry in entries {
            wb.put_cf(log, index_key(entry.log_id.index), enc(&entry)?);
            n += 1;
        }
        // Written now (readable at once), synced by the sync thread before `callback` runs.
        if let Err(e) = self.write_off_runtime(wb, false).await {
            callback.io_completed(Err(io::Error::new(e.kind(), e.to_string())));
            return Err(e);
        }
        let waiting = Waiting {
            callback,
            entries: n,
        };
        if let Err(std::sync::mpsc::SendError(w)) = self.syncer.send(waiting) {
            let msg = "the WAL sync thread has stopped";
            w.callback.io_completed(Err(io::Error::other(msg)));
            return Err(io::Error::other(msg));
        }
        Ok(())
    }

    /// Removes every entry after `last` (all of them for `None`); `last` itself stays.
    async fn truncate_after(&mut self, last: Option<LogId>) -> Result<()> {
        let from = last.map_or(0, |l| l.index.saturating_add(1));
        tracing::info!(after = ?last, from, "truncating the log (conflicting entries)");
        let mut wb = WriteBatch::default();
        wb.delete_range_cf(cf(&self.db, CF_LOG)?, index_key(from), index_key(u64::MAX));
        wb.delete_cf(cf(&self.db, CF_LOG)?, index_key(u64::MAX));
        self.write_off_runtime(wb, true).await
    }

    async fn purge(&mut self, log_id: LogId) -> Result<()> {
        if self.purge_waits_for_applied {
            self.wait_applied(log_id.index).await?;
        }
        tracing::debug!(upto = %log_id, "purging the log");
        let mut wb = WriteBatch::default();
        wb.put_cf(cf(&self.db, CF_META)?, K_PURGED, enc(&Some(log_id))?);
        wb.delete_range_cf(
            cf(&self.db, CF_LOG)?,
            index_key(0),
            index_key(log_id.index.saturating_add(1)),
        );
        self.write_off_runtime(wb, true).await
    }
}
