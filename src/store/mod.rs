//! RocksDB storage: one instance holds the vote, the log and the state machine, so that one
//! WAL orders all of them (design.md §6).

// openraft's storage traits fix `StorageError` (about 224 bytes) as the error type; boxing it
// only in our helpers would add conversions at every trait boundary for no gain.
#![allow(clippy::result_large_err, clippy::large_enum_variant)]

pub mod log;
pub mod schema;
pub mod snapshot;
pub mod state_machine;

use std::path::Path;
use std::sync::Arc;

pub use log::LogStore;
pub use state_machine::{SmState, StateMachine};

use crate::raft::StorageError;

/// Errors opening the store that a caller may want to tell apart.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// RocksDB or decoding failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
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
    let db = Arc::new(schema::open_db(dir)?);
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
    let sm = StateMachine::open(db.clone())?;
    Ok((LogStore::new(db), sm))
}

#[cfg(test)]
mod tests {
    use openraft::testing::{StoreBuilder, Suite};
    use openraft::{AnyError, StorageIOError};
    use tempfile::TempDir;

    use super::*;
    use crate::raft::TypeConfig;

    struct Builder;

    impl StoreBuilder<TypeConfig, LogStore, StateMachine, TempDir> for Builder {
        async fn build(&self) -> Result<(TempDir, LogStore, StateMachine), StorageError> {
            let dir = tempfile::tempdir().map_err(|e| StorageIOError::write(AnyError::new(&e)))?;
            let (log, sm) =
                open(dir.path(), 1).map_err(|e| StorageIOError::write(AnyError::new(&e)))?;
            Ok((dir, log.without_purge_guard(), sm))
        }
    }

    /// openraft's storage conformance suite against the RocksDB store.
    #[test]
    fn openraft_storage_suite() -> Result<(), StorageError> {
        Suite::test_all(Builder)
    }

    /// openraft 0.9 purges the log a received snapshot covers without waiting for the state
    /// machine to install it; a crash in between made the node unable to start (found by the
    /// chaos suite's snapshot-crash fault). The purge must wait for the state machine.
    #[tokio::test]
    async fn purge_waits_until_the_state_machine_has_applied_what_it_removes() {
        use openraft::storage::RaftLogStorage;
        use openraft::{CommittedLeaderId, LogId};

        let dir = tempfile::tempdir().unwrap();
        let (log, _sm) = open(dir.path(), 1).unwrap();
        let id = |i| LogId::new(CommittedLeaderId::new(1, 1), i);
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
