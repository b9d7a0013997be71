//! RocksDB storage: one instance holds the vote, the log and the state machine, so that one
//! WAL orders all of them.

pub mod lock_model;
pub mod log;
pub mod schema;
pub mod snapshot;
pub mod state_machine;
pub mod upgrade;

#[cfg(test)]
mod digest_tests;

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

pub use log::LogStore;
pub use state_machine::{SmState, StateMachine};

/// Runs a blocking storage call (a RocksDB write, a sync, work under the state lock) on
/// tokio's blocking pool. A slow or stalled disk then holds a blocking thread, never one of
/// the few worker threads that run the timers, the client sessions and Raft itself, so
/// every client still gets its reply or its deadline error.
pub(crate) async fn off_runtime<T, F>(f: F) -> io::Result<T>
where
    F: FnOnce() -> io::Result<T> + Send + 'static,
    T: Send + 'static,
{
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| io::Error::other(format!("storage task failed: {e}")))?
}

/// An unsynced storage call slower than this marks the disk as slow ([`quick_or_off_runtime`]).
/// It is wall time, so it also counts the time the thread was preempted: with three nodes on
/// two cores, 2 or 3 ms were common without any slow disk, and a 2 ms limit sent every call
/// to the blocking pool most of the time. A RocksDB write stall waits far longer than this.
const SLOW_CALL: Duration = Duration::from_millis(20);
/// How long, after a slow call, unsynced storage calls go to the blocking pool.
const SLOW_HOLD: Duration = Duration::from_secs(2);

/// Whether unsynced storage calls may run on the calling task: not for [`SLOW_HOLD`] after
/// one took longer than [`SLOW_CALL`].
struct DiskPace {
    /// Until when (in [`process_ms`]) calls go to the blocking pool.
    slow_until_ms: AtomicU64,
}

impl DiskPace {
    const fn new() -> Self {
        DiskPace {
            slow_until_ms: AtomicU64::new(0),
        }
    }

    fn is_slow(&self) -> bool {
        process_ms() < self.slow_until_ms.load(Ordering::Relaxed)
    }

    /// Notes how long a call took; true if that newly marked the disk as slow.
    fn record(&self, took: Duration) -> bool {
        if took <= SLOW_CALL {
            return false;
        }
        let now = process_ms();
        self.slow_until_ms
            .swap(now + SLOW_HOLD.as_millis() as u64, Ordering::Relaxed)
            <= now
    }
}

/// The node's pace (one per process: a process is one node, and tests only lose speed).
static PACE: DiskPace = DiskPace::new();

/// Milliseconds since the first call, on a monotonic clock.
fn process_ms() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// Runs a short storage call that does not sync (an unsynced RocksDB write, which lands in
/// the memtable and the page cache) on the calling task, and so saves the two thread
/// wake-ups of a trip to the blocking pool (issue 25: a write paid three such trips per
/// node). Such a call blocks only when RocksDB stalls writes behind a slow disk: once one
/// has taken longer than [`SLOW_CALL`], every such call goes to the blocking pool
/// ([`off_runtime`]) for [`SLOW_HOLD`], so a stalling disk holds at most the one call per
/// worker thread that found it slow. Syncs always run off the runtime.
pub(crate) async fn quick_or_off_runtime<T, F>(f: F) -> io::Result<T>
where
    F: FnOnce() -> io::Result<T> + Send + 'static,
    T: Send + 'static,
{
    paced(&PACE, f).await
}

async fn paced<T, F>(pace: &DiskPace, f: F) -> io::Result<T>
where
    F: FnOnce() -> io::Result<T> + Send + 'static,
    T: Send + 'static,
{
    if pace.is_slow() {
        return off_runtime(f).await;
    }
    let started = Instant::now();
    let out = f();
    let took = started.elapsed();
    if pace.record(took) {
        tracing::info!(
            took_ms = took.as_millis() as u64,
            "a storage write was slow; writes run on the blocking pool for a while"
        );
    }
    out
}

/// A latency histogram of the store (seconds): the log's syncs and the state machine's
/// applied runs, which `--metrics-addr` exports. Its buckets run from 50 µs to about 1.6 s.
#[derive(Clone, Debug)]
pub struct Timing(pub prometheus_client::metrics::histogram::Histogram);

impl Default for Timing {
    fn default() -> Self {
        use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
        Timing(Histogram::new(exponential_buckets(0.000_05, 2.0, 16)))
    }
}

impl Timing {
    /// Records the time since `start`.
    pub fn since(&self, start: std::time::Instant) {
        self.0.observe(start.elapsed().as_secs_f64());
    }
}

/// Errors opening the store that a caller may want to tell apart.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// RocksDB, decoding, or the format check failed.
    #[error(transparent)]
    Storage(#[from] io::Error),
    /// The log was purged past what the state machine persisted: the entries in between
    /// are gone, so the state cannot be rebuilt from this directory.
    #[error("the log is purged up to index {purged} but the state machine is only at {applied:?}; this directory cannot be replayed: remove the node, wipe the directory and add it again under a new id")]
    PurgedPastApplied {
        /// Last purged log index.
        purged: u64,
        /// Persisted last-applied index.
        applied: Option<u64>,
    },
    /// The directory belongs to another node.
    #[error("data directory belongs to node {found}, not node {wanted}; a wiped node must rejoin under a new id")]
    NodeId {
        /// Id persisted in the directory.
        found: u64,
        /// Id configured.
        wanted: u64,
    },
}

/// Opens (or creates) the store in `dir`, checking the format version and that the directory
/// belongs to `node_id` (persisting it on first open).
pub fn open(dir: &Path, node_id: u64) -> Result<(LogStore, StateMachine), StoreError> {
    open_with(dir, node_id, false)
}

/// [`open`]; with `lose_unsynced_writes` (tests only), writes that are not yet synced stay in
/// this process's memory, so that a kill -9 loses them as a power cut would (see
/// [`schema::open_db_with`]).
pub fn open_with(
    dir: &Path,
    node_id: u64,
    lose_unsynced_writes: bool,
) -> Result<(LogStore, StateMachine), StoreError> {
    let db = Arc::new(schema::open_db_with(dir, lose_unsynced_writes)?);
    match schema::node_id(&db)? {
        Some(found) if found != node_id => {
            return Err(StoreError::NodeId {
                found,
                wanted: node_id,
            })
        }
        Some(_) => {}
        None => {
            let meta = schema::cf(&db, schema::CF_META)?;
            db.put_cf(meta, schema::K_NODE_ID, node_id.to_be_bytes())
                .map_err(schema::write_err)?;
        }
    }
    let purged =
        schema::get_meta::<Option<crate::raft_types::LogId>>(&db, schema::K_PURGED)?.flatten();
    let applied = schema::get_meta::<schema::AppliedMeta>(&db, schema::K_APPLIED)?
        .and_then(|m| m.last_applied);
    if let Some(p) = purged {
        if applied.map(|a| a.index) < Some(p.index) {
            return Err(StoreError::PurgedPastApplied {
                purged: p.index,
                applied: applied.map(|a| a.index),
            });
        }
    }
    let sm = StateMachine::open(db.clone())?;
    Ok((LogStore::new(db)?, sm))
}

#[cfg(test)]
mod pace_tests {
    use super::*;

    /// A quick call runs on the calling thread; one slower than [`SLOW_CALL`] sends the
    /// next calls to the blocking pool (another thread) until [`SLOW_HOLD`] has passed.
    #[tokio::test(flavor = "current_thread")]
    async fn a_slow_storage_call_sends_the_next_ones_to_the_blocking_pool() {
        static LOCAL: DiskPace = DiskPace::new();
        let here = std::thread::current().id();
        let on = || Ok(std::thread::current().id());
        assert_eq!(
            paced(&LOCAL, on).await.unwrap(),
            here,
            "a quick call runs in place"
        );
        assert!(!LOCAL.is_slow());
        let slow = move || {
            std::thread::sleep(SLOW_CALL + Duration::from_millis(5));
            Ok(std::thread::current().id())
        };
        assert_eq!(
            paced(&LOCAL, slow).await.unwrap(),
            here,
            "found slow in place"
        );
        assert!(LOCAL.is_slow());
        assert_ne!(
            paced(&LOCAL, on).await.unwrap(),
            here,
            "then off the runtime"
        );
        // Marked again while slow: not newly slow.
        assert!(!LOCAL.record(SLOW_CALL * 2));
        assert!(!LOCAL.record(SLOW_CALL));
        // The hold ends.
        LOCAL.slow_until_ms.store(process_ms(), Ordering::Relaxed);
        assert!(!LOCAL.is_slow());
        assert_eq!(paced(&LOCAL, on).await.unwrap(), here, "in place again");
    }
}

#[cfg(test)]
mod tests {
    use openraft::testing::log::{StoreBuilder, Suite};
    use openraft::{ErrorSubject, ErrorVerb};
    use tempfile::TempDir;

    use super::*;
    use crate::raft_types::{log_id, Entry, TypeConfig};

    type StorageError = openraft::StorageError<TypeConfig>;

    struct Builder;

    impl StoreBuilder<TypeConfig, LogStore, StateMachine, TempDir> for Builder {
        async fn build(&self) -> Result<(TempDir, LogStore, StateMachine), StorageError> {
            let err = |e: io::Error| {
                StorageError::from_io_error(ErrorSubject::Store, ErrorVerb::Write, e)
            };
            let dir = tempfile::tempdir().map_err(err)?;
            let (log, sm) = open(dir.path(), 1).map_err(|e| err(io::Error::other(e)))?;
            Ok((dir, log.without_purge_guard(), sm))
        }
    }

    /// openraft's storage conformance suite against the RocksDB store.
    #[tokio::test]
    async fn openraft_storage_suite() -> Result<(), StorageError> {
        Suite::test_all(Builder).await
    }

    /// Entries as openraft's apply stream carries them (no client waiting on any).
    fn stream(
        entries: Vec<Entry>,
    ) -> impl futures::Stream<Item = io::Result<openraft::storage::EntryResponder<TypeConfig>>> + Unpin
    {
        futures::stream::iter(entries.into_iter().map(|e| Ok((e, None))))
    }

    /// openraft 0.9 purges the log a received snapshot covers without waiting for the state
    /// machine to install it; a crash in between made the node unable to start (found by the
    /// chaos suite's snapshot-crash fault). The purge must wait for the state machine.
    #[tokio::test]
    async fn purge_waits_until_the_state_machine_has_applied_what_it_removes() {
        use openraft::storage::RaftLogStorage;

        let dir = tempfile::tempdir().unwrap();
        let (log, _sm) = open(dir.path(), 1).unwrap();
        let id = |i| log_id(1, 1, i);
        let mut purger = log.clone();
        let purge = tokio::spawn(async move { purger.purge(id(3)).await });
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        assert!(!purge.is_finished(), "purged past the state machine");
        let applied = schema::AppliedMeta {
            last_applied: Some(id(3)),
            ..Default::default()
        };
        let db = log.db();
        let meta = schema::cf(db, schema::CF_META).unwrap();
        db.put_cf(meta, schema::K_APPLIED, schema::enc(&applied).unwrap())
            .unwrap();
        purge.await.unwrap().unwrap();
        let state = log.clone().get_log_state().await.unwrap();
        assert_eq!(state.last_purged_log_id, Some(id(3)));
    }

    /// A read that starts at a purged index returns nothing, never the entries after the
    /// purge point: openraft 0.9's replication sends what a read returns after the
    /// `prev_log_id` it asked from, so later entries would land on a follower out of place
    /// (bug 1's second path: a hole in the follower's log, found by the chaos soak).
    #[tokio::test]
    async fn a_read_from_a_purged_index_returns_nothing_not_later_entries() {
        use openraft::storage::{RaftLogReader, RaftLogStorage};
        use openraft::EntryPayload;

        let dir = tempfile::tempdir().unwrap();
        let (log, _sm) = open(dir.path(), 1).unwrap();
        let mut log = log.without_purge_guard();
        let id = |i| log_id(1, 1, i);
        // Written the way `append` writes them (its flush callback cannot be built here).
        let cf_log = schema::cf(log.db(), schema::CF_LOG).unwrap();
        for i in 1..=10 {
            let e = Entry {
                log_id: id(i),
                payload: EntryPayload::Blank,
            };
            log.db()
                .put_cf(cf_log, schema::index_key(i), schema::enc(&e).unwrap())
                .unwrap();
        }
        let mut reader = log.get_log_reader().await;
        let indexes = |v: Vec<Entry>| v.iter().map(|e| e.log_id.index).collect::<Vec<_>>();
        let got = reader.limited_get_log_entries(3, 6).await.unwrap();
        assert_eq!(indexes(got), [3, 4, 5]);

        log.purge(id(6)).await.unwrap();
        assert!(
            reader
                .limited_get_log_entries(3, 9)
                .await
                .unwrap()
                .is_empty(),
            "a replication read from purged index 3 handed out later entries"
        );
        let got = reader.limited_get_log_entries(7, 11).await.unwrap();
        assert_eq!(indexes(got), [7, 8, 9, 10]);
        // Other reads keep openraft's contract: what the log holds of the range.
        let got = reader.try_get_log_entries(3..9).await.unwrap();
        assert_eq!(indexes(got), [7, 8]);
    }

    /// The persisted last-applied index of the store in `dir`'s open database.
    fn persisted_applied(db: &rocksdb::DB) -> Option<u64> {
        schema::get_meta::<schema::AppliedMeta>(db, schema::K_APPLIED)
            .unwrap()
            .and_then(|m| m.last_applied)
            .map(|l| l.index)
    }

    /// The state machine never moves backwards, whatever it is asked: an entry it already
    /// applied is skipped, and a snapshot older than its state is not installed. Either would
    /// put `last_applied` on disk behind a log already purged up to the newer index, and the
    /// node could never start again (the shape of bug 1's second path in the chaos soak).
    #[tokio::test]
    async fn the_state_machine_never_moves_backwards() {
        use openraft::storage::RaftStateMachine;
        use openraft::EntryPayload;

        let dir = tempfile::tempdir().unwrap();
        let (log, mut sm) = open(dir.path(), 1).unwrap();
        let id = |i| log_id(1, 1, i);
        let blank = |i| Entry {
            log_id: id(i),
            payload: EntryPayload::Blank,
        };
        sm.apply(stream(vec![blank(1), blank(2)])).await.unwrap();
        let older = sm.get_current_snapshot().await.unwrap().unwrap();
        assert_eq!(older.meta.last_log_id, Some(id(2)));
        sm.apply(stream(vec![blank(3)])).await.unwrap();
        assert_eq!(persisted_applied(log.db()), Some(3));

        let replies = sm.apply_run(vec![blank(2), blank(3)]).unwrap();
        assert_eq!(replies.len(), 2, "one reply per entry, even when skipped");
        assert_eq!(sm.applied_state().await.unwrap().0, Some(id(3)));
        assert_eq!(persisted_applied(log.db()), Some(3));

        sm.install_snapshot(&older.meta, older.snapshot)
            .await
            .unwrap();
        assert_eq!(sm.applied_state().await.unwrap().0, Some(id(3)));
        assert_eq!(persisted_applied(log.db()), Some(3));

        sm.apply(stream(vec![blank(4)])).await.unwrap();
        assert_eq!(persisted_applied(log.db()), Some(4));
    }

    /// A directory whose log is purged past its state machine cannot be replayed; opening it
    /// says so, instead of openraft failing later with `LogIndexNotFound`.
    #[test]
    fn a_log_purged_past_the_state_machine_is_refused_at_open() {
        let dir = tempfile::tempdir().unwrap();
        drop(open(dir.path(), 1).unwrap());
        {
            let db = schema::open_db(dir.path()).unwrap();
            let meta = schema::cf(&db, schema::CF_META).unwrap();
            let purged = Some(log_id(1, 1, 5));
            db.put_cf(meta, schema::K_PURGED, schema::enc(&purged).unwrap())
                .unwrap();
        }
        let err = open(dir.path(), 1).err().unwrap();
        assert!(
            matches!(
                err,
                StoreError::PurgedPastApplied {
                    purged: 5,
                    applied: None
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("cannot be replayed"), "{err}");
    }

    #[test]
    fn rejects_foreign_format_and_node_id() {
        let dir = tempfile::tempdir().unwrap();
        drop(open(dir.path(), 1).unwrap());
        assert!(matches!(
            open(dir.path(), 2),
            Err(StoreError::NodeId {
                found: 1,
                wanted: 2
            })
        ));
        {
            let db = schema::open_db(dir.path()).unwrap();
            let meta = schema::cf(&db, schema::CF_META).unwrap();
            db.put_cf(meta, schema::K_FORMAT, 99u32.to_be_bytes())
                .unwrap();
        }
        let err = open(dir.path(), 1).err().unwrap().to_string();
        assert!(
            err.contains("unsupported on-disk format version 99"),
            "{err}"
        );
    }
}
