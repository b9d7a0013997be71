use std::collections::BTreeMap;

use openraft::storage::{IOFlushed, RaftLogReader, RaftLogStorage};
use openraft::EntryPayload;

use super::*;
use crate::algo::rng::SplitMix64;
use crate::raft_types::log_id;

fn entry(term: u64, index: u64) -> Entry {
    Entry {
        log_id: log_id(term, 1, index),
        payload: EntryPayload::Blank,
    }
}

/// Entries compare by log id (every payload here is blank; the term tells a rewritten
/// entry from the one it replaced).
fn ids(v: &[Entry]) -> Vec<LogId> {
    v.iter().map(|e| e.log_id).collect()
}

async fn append(log: &mut LogStore, entries: Vec<Entry>) {
    log.append(entries, IOFlushed::noop()).await.unwrap();
}

/// Index `start` up to `end` of the model, as a read of the whole range must return.
fn expected(model: &BTreeMap<u64, Entry>, start: u64, end: u64) -> Vec<Entry> {
    model.range(start..end).map(|(_, e)| e.clone()).collect()
}

/// What a contiguous (replication) read of `start..end` must return.
fn expected_run(model: &BTreeMap<u64, Entry>, start: u64, end: u64) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::new();
    for (i, e) in model.range(start..end) {
        if *i != start + out.len() as u64 {
            break;
        }
        out.push(e.clone());
    }
    out
}

/// A seeded random run of appends, truncations, overwrites, purges and restarts; after
/// each step, reads through a reader made before the writes (it shares the cache), a
/// reader made just now, the store itself, and straight from RocksDB all return what a
/// model of the log holds. A restart is a new store on the same database (its cache
/// empty). The cache is kept small so that
/// it evicts often.
#[tokio::test]
async fn recent_entries_read_as_rocksdb_holds_them() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _sm) = crate::store::open(dir.path(), 1).unwrap();
    let db = log.db().clone();
    let mut log = log
        .without_purge_guard()
        .with_recent_limits(24, 24 * (std::mem::size_of::<Entry>() + 40));
    let mut reader = log.get_log_reader().await;
    let mut model: BTreeMap<u64, Entry> = BTreeMap::new();
    let mut purged = 0u64;
    let mut term = 1u64;
    let mut rng = SplitMix64::new(0x2025);
    let (mut hits, mut misses) = (0u64, 0u64);
    for step in 0..600 {
        let last = model.keys().next_back().copied().unwrap_or(purged);
        match rng.below(100) {
            // Append after the last entry, as openraft does.
            0..=54 => {
                let n = 1 + rng.below(12) as u64;
                let batch: Vec<Entry> = (last + 1..=last + n).map(|i| entry(term, i)).collect();
                for e in &batch {
                    model.insert(e.log_id.index, e.clone());
                }
                append(&mut log, batch).await;
            }
            // Remove a conflicting suffix; the next appends come from a newer term.
            55..=69 => {
                let keep = purged + rng.below((last - purged + 1) as usize) as u64;
                let at = if keep == 0 {
                    None
                } else {
                    Some(model.get(&keep).map_or(log_id(term, 1, keep), |e| e.log_id))
                };
                log.truncate_after(at).await.unwrap();
                model.retain(|i, _| *i <= keep);
                term += 1;
            }
            // Entries written again over existing ones without a truncation first (openraft
            // truncates first; the cache must not depend on it).
            70..=77 if last > purged => {
                term += 1;
                let from = purged + 1 + rng.below((last - purged) as usize) as u64;
                let n = 1 + rng.below(6) as u64;
                let batch: Vec<Entry> = (from..from + n).map(|i| entry(term, i)).collect();
                for e in &batch {
                    model.insert(e.log_id.index, e.clone());
                }
                append(&mut log, batch).await;
            }
            // Purge a prefix, at times past the last entry (as a snapshot install does).
            78..=85 => {
                let upto = purged + rng.below((last - purged + 3) as usize) as u64;
                if upto > purged {
                    log.purge(log_id(term, 1, upto)).await.unwrap();
                    model.retain(|i, _| *i > upto);
                    purged = upto;
                }
            }
            // A restart: a new store on the same database, its cache empty.
            _ => {
                let (h, m) = log.recent_reads();
                hits += h;
                misses += m;
                log = LogStore::new(db.clone())
                    .unwrap()
                    .without_purge_guard()
                    .with_recent_limits(24, 24 * (std::mem::size_of::<Entry>() + 40));
                reader = log.get_log_reader().await;
            }
        }
        let last = model.keys().next_back().copied().unwrap_or(purged);
        let mut fresh = log.get_log_reader().await;
        for _ in 0..6 {
            // Half of the reads near the end of the log, where the cache is.
            let start = if rng.below(2) == 0 {
                rng.below(last as usize + 4) as u64
            } else {
                last.saturating_sub(rng.below(30) as u64)
            };
            let end = if rng.below(2) == 0 {
                start + rng.below(40) as u64
            } else {
                (last + 1).saturating_sub(rng.below(3) as u64).max(start)
            };
            let want = expected(&model, start, end);
            let db_read = log.read_db(start..end, start, false).unwrap();
            assert_eq!(
                ids(&db_read),
                ids(&want),
                "step {step}: RocksDB and the model differ"
            );
            let got = reader.try_get_log_entries(start..end).await.unwrap();
            assert_eq!(
                ids(&got),
                ids(&want),
                "step {step}: old reader, {start}..{end}"
            );
            let got = fresh.try_get_log_entries(start..end).await.unwrap();
            assert_eq!(
                ids(&got),
                ids(&want),
                "step {step}: new reader, {start}..{end}"
            );
            if end > start {
                let got = log.try_get_log_entries(start..=end - 1).await.unwrap();
                assert_eq!(
                    ids(&got),
                    ids(&want),
                    "step {step}: store, {start}..={}",
                    end - 1
                );
            }
            let want = expected_run(&model, start, end);
            let got = fresh.limited_get_log_entries(start, end).await.unwrap();
            assert_eq!(
                ids(&got),
                ids(&want),
                "step {step}: replication read {start}..{end}"
            );
        }
        let state = log.get_log_state().await.unwrap();
        assert_eq!(state.last_log_id.map(|l| l.index).unwrap_or(0), last);
    }
    let (h, m) = log.recent_reads();
    hits += h;
    misses += m;
    assert!(hits > 1000 && misses > 1000, "hits {hits}, misses {misses}");
}

/// Replication and apply read what was just appended from memory, and only a read the
/// cache does not cover goes to RocksDB.
#[tokio::test]
async fn a_read_of_just_appended_entries_is_served_from_memory() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _sm) = crate::store::open(dir.path(), 1).unwrap();
    let mut reader = log.get_log_reader().await;
    append(&mut log, (1..=5).map(|i| entry(1, i)).collect()).await;
    append(&mut log, (6..=8).map(|i| entry(1, i)).collect()).await;
    let got = reader.limited_get_log_entries(2, 9).await.unwrap();
    assert_eq!(
        ids(&got),
        ids(&(2..=8).map(|i| entry(1, i)).collect::<Vec<_>>())
    );
    assert_eq!(log.recent_reads(), (1, 0));
    // A restart: nothing cached, so the same read goes to RocksDB and returns the same.
    let mut log = LogStore::new(log.db().clone()).unwrap();
    let got = log.try_get_log_entries(2..9).await.unwrap();
    assert_eq!(
        ids(&got),
        ids(&(2..=8).map(|i| entry(1, i)).collect::<Vec<_>>())
    );
    assert_eq!(log.recent_reads(), (0, 1));
}

/// The cache is bounded by the memory its entries take once decoded, not by their encoded
/// size: a batch of small commands takes about ten times more memory than it encodes to
/// (each command's slot in the batch is `size_of::<Command>()` bytes), and a bound on the
/// encoded size let a million-lock load keep about 90 MB in the cache.
#[tokio::test]
async fn the_cache_is_bounded_by_the_memory_of_its_entries() {
    use crate::cmd::{parse, test_argv, Command, Request};
    use crate::raft_types::Batch;

    let dir = tempfile::tempdir().unwrap();
    let (mut log, _sm) = crate::store::open(dir.path(), 1).unwrap();
    let lock = |n: usize| -> Command {
        match parse(test_argv(&format!("LOCK lock:{n:07} owner-{n} PX 10000"))) {
            Ok(Request::Data(c)) => c,
            _ => panic!("LOCK does not parse"),
        }
    };
    const PER_ENTRY: usize = 1000;
    let mut encoded = 0;
    for i in 1..=200u64 {
        let cmds: Vec<Command> = (0..PER_ENTRY)
            .map(|n| lock(i as usize * PER_ENTRY + n))
            .collect();
        let e = Entry {
            log_id: log_id(1, 1, i),
            payload: EntryPayload::Normal(Batch {
                ts: i,
                boot: 1,
                cmds,
            }),
        };
        encoded += enc(&e).unwrap().len();
        append(&mut log, vec![e]).await;
    }
    let (entries, bytes) = log.recent_held();
    // All 200 entries encode to less than the bound, so a bound on the encoded size would
    // keep them all.
    assert!(encoded < RECENT_MAX_BYTES, "encoded {encoded}");
    assert!(bytes <= RECENT_MAX_BYTES, "held {bytes}");
    let slots = entries * PER_ENTRY * std::mem::size_of::<Command>();
    assert!(
        slots <= RECENT_MAX_BYTES,
        "{entries} entries hold {slots} bytes of command slots"
    );
    assert!((1..200).contains(&entries), "{entries} entries cached");
    // What is held is still the newest run, and is read from memory.
    let (h, m) = log.recent_reads();
    let got = log
        .try_get_log_entries(201 - entries as u64..201)
        .await
        .unwrap();
    assert_eq!(got.len(), entries);
    assert_eq!(log.recent_reads(), (h + 1, m));
}
