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
//! Every synced write runs on tokio's blocking pool ([`super::off_runtime`]), so a slow disk
//! never holds a worker thread of the runtime; an unsynced one (an append, `committed`) runs
//! on the calling task unless the disk has lately been slow ([`super::quick_or_off_runtime`]).
//!
//! The most recently appended entries are also kept in memory ([`Recent`], shared by every
//! clone and reader of the store), so that replication and apply, which read an entry back
//! right after it was appended, do not read it from RocksDB and decode it again. The cache
//! only ever holds entries exactly as RocksDB holds them: what a truncation or purge removes
//! leaves the cache before it leaves RocksDB, and an append enters the cache only after it is
//! written. A read is served from the cache only when the cache covers all of it, otherwise
//! from RocksDB alone. What is written to RocksDB, and when it is synced, is unchanged.

use std::collections::VecDeque;
use std::fmt::Debug;
use std::io;
use std::ops::{Bound, RangeBounds};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use openraft::storage::{IOFlushed, RaftLogStorage};
use openraft::{EntryPayload, LogState, OptionalSend, RaftLogReader};
use rocksdb::{Direction, IteratorMode, WriteBatch, WriteOptions, DB};

use super::schema::{
    cf, dec, enc, get_meta, index_key, read_err, write_err, AppliedMeta, Result, CF_LOG, CF_META,
    K_APPLIED, K_COMMITTED, K_PURGED, K_VOTE,
};
use crate::cmd::Command;
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
    /// The recently appended entries, shared by every clone and reader.
    recent: Arc<Mutex<Recent>>,
}

/// At most this many entries are kept in [`Recent`] (unless `PALISADE_RECENT_LOG_ENTRIES`
/// says otherwise, see [`recent_max_entries`])...
const RECENT_MAX_ENTRIES: usize = 4096;

/// The bound on the cached entries: [`RECENT_MAX_ENTRIES`], or the environment variable
/// `PALISADE_RECENT_LOG_ENTRIES` (0 turns the cache off, so that a benchmark can compare both
/// on one binary). A value that is not a number is ignored with a warning.
fn recent_max_entries() -> usize {
    match std::env::var("PALISADE_RECENT_LOG_ENTRIES") {
        Err(_) => RECENT_MAX_ENTRIES,
        Ok(v) => v.trim().parse().unwrap_or_else(|_| {
            tracing::warn!(value = %v, "PALISADE_RECENT_LOG_ENTRIES is not a number: ignored");
            RECENT_MAX_ENTRIES
        }),
    }
}
/// ... and at most about this many bytes of memory ([`held_size`]).
const RECENT_MAX_BYTES: usize = 8 << 20;

/// What a decoded command holds on the heap beyond its slot in the batch and the bytes of its
/// arguments: the arguments' own allocations (jemalloc rounds each one up to its size class)
/// and their `Bytes` handles. Measured, not derived: a million-lock load (`LOCK` commands of
/// about 40 encoded bytes) held about 440 bytes per cached command, 176 of them the
/// command's slot (`size_of::<Command>()`); an estimate that counted the encoded size alone
/// let the cache hold about 90 MB under an 8 MiB bound. With this estimate the same load
/// leaves about 5 MB in the cache under that bound: it errs high (docs/performance.md).
const COMMAND_HEAP_OVERHEAD: usize = 224;

/// About how much memory `entry` takes in the cache once decoded, given its encoded size:
/// the entry itself, its batch's command slots (by capacity), and each command's arguments
/// ([`COMMAND_HEAP_OVERHEAD`] plus their encoded bytes).
fn held_size(entry: &Entry, encoded: usize) -> usize {
    let commands = match &entry.payload {
        EntryPayload::Normal(batch) => {
            batch.cmds.capacity() * std::mem::size_of::<Command>()
                + batch.cmds.len() * COMMAND_HEAP_OVERHEAD
        }
        EntryPayload::Blank | EntryPayload::Membership(_) => 0,
    };
    std::mem::size_of::<Entry>() + encoded + commands
}

/// The last appended entries, a run of consecutive indexes, each exactly as RocksDB holds it.
///
/// Mutations come only from the store's writer (openraft calls `append`, `truncate_after`
/// and `purge` one at a time); readers on other tasks only copy out of it.
#[derive(Debug)]
struct Recent {
    /// Consecutive entries, oldest first, each with the memory it takes ([`held_size`]).
    entries: VecDeque<(Entry, usize)>,
    /// The sum of the sizes in `entries`.
    bytes: usize,
    /// The bounds: the oldest entries leave first.
    max_entries: usize,
    max_bytes: usize,
    /// Reads served from here, and reads that went to RocksDB.
    hits: u64,
    misses: u64,
}

impl Default for Recent {
    fn default() -> Self {
        Recent {
            entries: VecDeque::new(),
            bytes: 0,
            max_entries: recent_max_entries(),
            max_bytes: RECENT_MAX_BYTES,
            hits: 0,
            misses: 0,
        }
    }
}

impl Recent {
    fn first(&self) -> Option<u64> {
        self.entries.front().map(|(e, _)| e.log_id.index)
    }

    /// The index after the last entry held.
    fn next(&self) -> Option<u64> {
        self.entries
            .back()
            .map(|(e, _)| e.log_id.index.saturating_add(1))
    }

    fn clear(&mut self) {
        self.entries.clear();
        self.bytes = 0;
    }

    /// Forgets every entry at index `from` or after it.
    fn remove_from(&mut self, from: u64) {
        while self
            .entries
            .back()
            .is_some_and(|(e, _)| e.log_id.index >= from)
        {
            if let Some((_, size)) = self.entries.pop_back() {
                self.bytes -= size;
            }
        }
    }

    /// Forgets every entry at index `upto` or before it.
    fn remove_upto(&mut self, upto: u64) {
        while self
            .entries
            .front()
            .is_some_and(|(e, _)| e.log_id.index <= upto)
        {
            self.pop_front();
        }
    }

    fn pop_front(&mut self) {
        if let Some((_, size)) = self.entries.pop_front() {
            self.bytes -= size;
        }
    }

    /// Adds `entry`, just written at its index, after the entries held; if it does not follow
    /// them, it starts a new run. Then drops the oldest entries over the bounds.
    fn push(&mut self, entry: Entry, size: usize) {
        if self.next().is_some_and(|n| n != entry.log_id.index) {
            self.clear();
        }
        self.entries.push_back((entry, size));
        self.bytes += size;
        while self.entries.len() > self.max_entries || self.bytes > self.max_bytes {
            self.pop_front();
        }
    }

    /// The entries `start..end`, if all of them are held (and the range is not empty).
    fn get(&mut self, start: u64, end: Option<u64>) -> Option<Vec<Entry>> {
        let hit = match (self.first(), self.next(), end) {
            (Some(first), Some(next), Some(end)) => first <= start && start < end && end <= next,
            _ => false,
        };
        if !hit {
            self.misses += 1;
            return None;
        }
        self.hits += 1;
        let first = self.first()?;
        let from = usize::try_from(start - first).ok()?;
        let n = usize::try_from(end? - start).ok()?;
        Some(
            self.entries
                .range(from..from + n)
                .map(|(e, _)| e.clone())
                .collect(),
        )
    }
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
            recent: Arc::default(),
        })
    }

    /// The cache of recent entries. A panic while it was held (none is expected) may have
    /// left it half-changed, so then it starts again empty: every read goes to RocksDB.
    fn recent(&self) -> MutexGuard<'_, Recent> {
        match self.recent.lock() {
            Ok(g) => g,
            Err(poisoned) => {
                let mut g = poisoned.into_inner();
                g.clear();
                self.recent.clear_poison();
                g
            }
        }
    }

    /// The same store with other bounds on its cache of recent entries (tests: to make it
    /// evict often).
    #[cfg(test)]
    fn with_recent_limits(self, max_entries: usize, max_bytes: usize) -> Self {
        {
            let mut r = self.recent();
            r.max_entries = max_entries;
            r.max_bytes = max_bytes;
        }
        self
    }

    /// How many entries the cache of recent entries holds, and their [`held_size`] in all.
    #[cfg(test)]
    fn recent_held(&self) -> (usize, usize) {
        let r = self.recent();
        (r.entries.len(), r.bytes)
    }

    /// How many reads the cache of recent entries served, and how many went to RocksDB.
    pub fn recent_reads(&self) -> (u64, u64) {
        let r = self.recent();
        (r.hits, r.misses)
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

    /// Writes `wb` (synced if asked): a synced write on the blocking pool (see
    /// [`super::off_runtime`]), an unsynced one where [`super::quick_or_off_runtime`] says.
    async fn write_off_runtime(&self, wb: WriteBatch, sync: bool) -> Result<()> {
        let db = self.db.clone();
        if !sync {
            return super::quick_or_off_runtime(move || {
                db.write_opt(wb, &WriteOptions::default())
                    .map_err(write_err)
            })
            .await;
        }
        super::off_runtime(move || db.write_opt(wb, &synced()).map_err(write_err)).await
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
    /// exactly at the range's start (nothing if the start is not there). From the cache of
    /// recent entries when it holds the whole range (then it is one contiguous run).
    fn read_range<RB: RangeBounds<u64>>(&self, range: RB, contiguous: bool) -> Result<Vec<Entry>> {
        let start = match range.start_bound() {
            Bound::Included(x) => *x,
            Bound::Excluded(x) => x.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(x) => x.checked_add(1),
            Bound::Excluded(x) => Some(*x),
            Bound::Unbounded => None,
        };
        if let Some(entries) = self.recent().get(start, end) {
            return Ok(entries);
        }
        self.read_db(range, start, contiguous)
    }

    /// [`Self::read_range`] from RocksDB alone.
    fn read_db<RB: RangeBounds<u64>>(
        &self,
        range: RB,
        start: u64,
        contiguous: bool,
    ) -> Result<Vec<Entry>> {
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
        let mut written = Vec::new();
        for entry in entries {
            let bytes = enc(&entry)?;
            wb.put_cf(log, index_key(entry.log_id.index), &bytes);
            let size = held_size(&entry, bytes.len());
            written.push((entry, size));
        }
        let n = written.len() as u64;
        // What these entries overwrite leaves the cache before RocksDB changes.
        if let Some((first, _)) = written.first() {
            self.recent().remove_from(first.log_id.index);
        }
        // Written now (readable at once), synced by the sync thread before `callback` runs.
        if let Err(e) = self.write_off_runtime(wb, false).await {
            callback.io_completed(Err(io::Error::new(e.kind(), e.to_string())));
            return Err(e);
        }
        {
            let mut recent = self.recent();
            for (entry, size) in written {
                recent.push(entry, size);
            }
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
        self.recent().remove_from(from);
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
        self.recent().remove_upto(log_id.index);
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

#[cfg(test)]
mod tests;

/// What a read of just-appended entries costs from the cache and from RocksDB (run by hand:
/// `cargo test --release --lib store::log::cost -- --ignored --nocapture`; it prints, it does
/// not assert, so it is ignored by default).
#[cfg(test)]
mod cost;
