use openraft::storage::{IOFlushed, RaftLogReader, RaftLogStorage};
use openraft::EntryPayload;

use super::*;
use crate::raft_types::log_id;

#[tokio::test]
#[ignore]
async fn cost_of_a_replication_read() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _sm) = crate::store::open(dir.path(), 1).unwrap();
    let n = 20_000u64;
    for i in 1..=n {
        let e = Entry {
            log_id: log_id(1, 1, i),
            payload: EntryPayload::Blank,
        };
        log.append(vec![e], IOFlushed::noop()).await.unwrap();
    }
    let mut reader = log.get_log_reader().await;
    for width in [1u64, 3, 16] {
        let reads = 20_000u64;
        let started = Instant::now();
        for k in 0..reads {
            let start = n - 1000 + k % 900;
            let got = reader.limited_get_log_entries(start, start + width).await;
            assert_eq!(got.map(|v| v.len() as u64).ok(), Some(width));
        }
        let cached = started.elapsed().as_nanos() as u64 / reads;
        let started = Instant::now();
        for k in 0..reads {
            let start = n - 1000 + k % 900;
            let got = log.read_db(start..start + width, start, true);
            assert_eq!(got.map(|v| v.len() as u64).ok(), Some(width));
        }
        let db = started.elapsed().as_nanos() as u64 / reads;
        println!("{width} entries: {cached} ns from memory, {db} ns from RocksDB");
    }
}
