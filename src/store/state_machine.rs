//! The state machine (openraft storage-v2 `RaftStateMachine`): the in-memory [`Keyspace`]
//! is the read path; every applied batch writes its changed keys, fences and `last_applied`
//! to RocksDB in one WriteBatch. Snapshots serialize the whole keyspace.

use std::collections::BTreeMap;
use std::io::Cursor;
use std::sync::{Arc, RwLock};

use bytes::Bytes;
use openraft::storage::RaftStateMachine;
use openraft::{
    AnyError, EntryPayload, OptionalSend, RaftSnapshotBuilder, Snapshot, SnapshotMeta,
    StorageIOError, StoredMembership,
};
use rocksdb::{IteratorMode, WriteBatch, DB};
use serde::{Deserialize, Serialize};

use super::schema::{
    cf, dec, decode_u64, enc, get_meta, read_err, write_err, AppliedMeta, StoredSnapshot, CF_FENCE,
    CF_KV, CF_META, CF_SCRIPT, K_APPLIED, K_SCRIPT_BUDGET, K_SNAPSHOT,
};
use crate::cmd::Ctx;
use crate::raft::{Batch, BatchReply, Entry, LogId, NodeId, StorageError, TypeConfig};
use crate::state::{Event, Keyspace};

/// State shared between the state machine worker and the server's read path.
#[derive(Debug)]
pub struct SmState {
    /// The keyspace.
    pub ks: Keyspace,
    /// Last applied log id.
    pub last_applied: Option<LogId>,
    /// Last applied membership.
    pub membership: StoredMembership<NodeId, openraft::BasicNode>,
    /// Keys removed by eviction entries since start (INFO expired_keys).
    pub expired_total: u64,
    /// Events of applied batches, published after each batch is persisted (pub/sub delivery,
    /// wake-ups of blocked clients). Lagging receivers lose events, never block apply.
    pub events: tokio::sync::broadcast::Sender<Event>,
}

impl Default for SmState {
    fn default() -> Self {
        SmState {
            ks: Keyspace::default(),
            last_applied: None,
            membership: StoredMembership::default(),
            expired_total: 0,
            events: tokio::sync::broadcast::channel(EVENT_CAPACITY).0,
        }
    }
}

/// Events buffered per receiver before the slowest one starts losing them.
pub const EVENT_CAPACITY: usize = 65_536;

/// The serialized snapshot image.
#[derive(Serialize, Deserialize)]
pub struct SnapshotImage {
    /// Format version of the image.
    pub format: u32,
    /// Last applied log id.
    pub last_applied: Option<LogId>,
    /// Membership.
    pub membership: StoredMembership<NodeId, openraft::BasicNode>,
    /// The keyspace.
    pub ks: Keyspace,
}

/// The state machine handle owned by openraft.
pub struct StateMachine {
    db: Arc<DB>,
    state: Arc<RwLock<SmState>>,
    snapshot_seq: u64,
    /// The last log id of the snapshot stored under `K_SNAPSHOT` (see [`StoredSnapshotId`]).
    stored: StoredSnapshotId,
    /// Test-only: sleep this long before installing a received snapshot
    /// ([`TEST_INSTALL_DELAY_ENV`]), so a test can kill the node inside the install.
    test_install_delay_ms: Option<u64>,
}

/// Environment variable of the test-only snapshot-install delay, in ms.
pub const TEST_INSTALL_DELAY_ENV: &str = "PALISADE_TEST_SNAPSHOT_INSTALL_DELAY_MS";

/// The last log id of the stored snapshot, shared by the state machine (installs) and the
/// snapshot builders (spawned by openraft, so a build can finish after a newer install).
/// The stored snapshot only moves forward: a build that read an older state than the stored
/// snapshot does not replace it, or a node that later leads could offer followers a snapshot
/// older than its purged log.
#[derive(Clone, Default)]
struct StoredSnapshotId(Arc<std::sync::Mutex<Option<LogId>>>);

impl StoredSnapshotId {
    /// Runs `write` (which stores the snapshot ending at `last`) if that is newer than the
    /// stored one; returns whether it ran.
    fn store_if_newer(
        &self,
        last: Option<LogId>,
        write: impl FnOnce() -> Result<(), StorageError>,
    ) -> Result<bool, StorageError> {
        let mut cur = self.0.lock().map_err(|_| poisoned())?;
        if cur.is_some() && last <= *cur {
            return Ok(false);
        }
        write()?;
        *cur = last;
        Ok(true)
    }
}

fn poisoned() -> StorageError {
    StorageIOError::read_state_machine(AnyError::error("state machine lock poisoned")).into()
}

/// Applies one batch to the keyspace and returns its replies.
pub fn apply_batch(ks: &mut Keyspace, term: u64, batch: &Batch) -> BatchReply {
    let now = ks.clock_mut().advance(term, batch.boot, batch.ts);
    let replies = batch
        .cmds
        .iter()
        .map(|cmd| {
            let revision = ks.bump_revision();
            cmd.apply(ks, Ctx { now, revision })
        })
        .collect();
    BatchReply(replies)
}

impl StateMachine {
    /// Loads the state machine from the database.
    pub fn open(db: Arc<DB>) -> Result<Self, StorageError> {
        let meta: AppliedMeta = get_meta(&db, K_APPLIED)?.unwrap_or_default();
        let mut entries = BTreeMap::new();
        for item in db.iterator_cf(cf(&db, CF_KV)?, IteratorMode::Start) {
            let (k, v) = item.map_err(read_err)?;
            entries.insert(Bytes::from(k.to_vec()), dec(&v)?);
        }
        let mut fences = BTreeMap::new();
        for item in db.iterator_cf(cf(&db, CF_FENCE)?, IteratorMode::Start) {
            let (k, v) = item.map_err(read_err)?;
            fences.insert(
                Bytes::from(k.to_vec()),
                decode_u64(&v).ok_or_else(|| {
                    StorageError::from(StorageIOError::read_state_machine(AnyError::error(
                        "bad fence value",
                    )))
                })?,
            );
        }
        let mut ks = Keyspace::from_parts(entries, fences, meta.revision, meta.clock);
        let (scripts, budget) = load_scripts(&db)?;
        ks.set_scripts(scripts, budget);
        let state = SmState {
            ks,
            last_applied: meta.last_applied,
            membership: meta.membership,
            expired_total: 0,
            events: tokio::sync::broadcast::channel(EVENT_CAPACITY).0,
        };
        let stored_last =
            get_meta::<StoredSnapshot>(&db, K_SNAPSHOT)?.and_then(|s| s.meta.last_log_id);
        Ok(StateMachine {
            db,
            state: Arc::new(RwLock::new(state)),
            snapshot_seq: 0,
            stored: StoredSnapshotId(Arc::new(std::sync::Mutex::new(stored_last))),
            test_install_delay_ms: std::env::var(TEST_INSTALL_DELAY_ENV)
                .ok()
                .and_then(|v| v.parse().ok()),
        })
    }

    /// The state shared with the server's read path.
    pub fn shared(&self) -> Arc<RwLock<SmState>> {
        self.state.clone()
    }

    /// Writes the keyspace changes and the applied metadata in one WriteBatch.
    fn persist(&self, st: &mut SmState) -> Result<(), StorageError> {
        let changes = st.ks.take_changes();
        let (kv, fence, meta) = (
            cf(&self.db, CF_KV)?,
            cf(&self.db, CF_FENCE)?,
            cf(&self.db, CF_META)?,
        );
        let mut wb = WriteBatch::default();
        for (k, e) in changes.entries {
            match e {
                Some(e) => wb.put_cf(kv, &k, enc(&e)?),
                None => wb.delete_cf(kv, &k),
            }
        }
        for (k, f) in changes.fences {
            wb.put_cf(fence, &k, f.to_be_bytes());
        }
        let script = cf(&self.db, CF_SCRIPT)?;
        for (sha, body) in changes.scripts {
            match body {
                Some(b) => wb.put_cf(script, sha.as_bytes(), &b),
                None => wb.delete_cf(script, sha.as_bytes()),
            }
        }
        if let Some(budget) = changes.script_budget {
            wb.put_cf(script, K_SCRIPT_BUDGET, budget.to_be_bytes());
        }
        wb.put_cf(meta, K_APPLIED, enc(&applied_meta(st))?);
        // Not synced: the log entries are synced, and the single WAL orders this write after
        // them, so a crash can only lose a suffix that replaying the log restores.
        self.db.write(wb).map_err(write_err)
    }

    /// Replaces the whole persisted state with `st` (snapshot install), storing `snapshot`
    /// with it in the same WriteBatch.
    fn rewrite_all(
        &self,
        st: &SmState,
        snapshot: Option<&StoredSnapshot>,
    ) -> Result<(), StorageError> {
        let (kv, fence, meta) = (
            cf(&self.db, CF_KV)?,
            cf(&self.db, CF_FENCE)?,
            cf(&self.db, CF_META)?,
        );
        let script = cf(&self.db, CF_SCRIPT)?;
        let mut wb = WriteBatch::default();
        for family in [kv, fence, script] {
            for item in self.db.iterator_cf(family, IteratorMode::Start) {
                let (k, _) = item.map_err(read_err)?;
                wb.delete_cf(family, k);
            }
        }
        for (k, e) in st.ks.entries() {
            wb.put_cf(kv, k, enc(e)?);
        }
        for (k, f) in st.ks.fences() {
            wb.put_cf(fence, k, f.to_be_bytes());
        }
        for (sha, body) in st.ks.scripts() {
            wb.put_cf(script, sha.as_bytes(), body);
        }
        let budget = st.ks.script_budget_setting();
        wb.put_cf(script, K_SCRIPT_BUDGET, budget.to_be_bytes());
        wb.put_cf(meta, K_APPLIED, enc(&applied_meta(st))?);
        if let Some(snapshot) = snapshot {
            wb.put_cf(meta, K_SNAPSHOT, enc(snapshot)?);
        }
        self.db.write(wb).map_err(write_err)
    }
}

/// Reads the persisted script cache and budget.
fn load_scripts(db: &DB) -> Result<(BTreeMap<String, Bytes>, u64), StorageError> {
    let mut scripts = BTreeMap::new();
    let mut budget = 0;
    for item in db.iterator_cf(cf(db, CF_SCRIPT)?, IteratorMode::Start) {
        let (k, v) = item.map_err(read_err)?;
        if k.as_ref() == K_SCRIPT_BUDGET {
            budget = decode_u64(&v).unwrap_or(0);
        } else {
            scripts.insert(
                String::from_utf8_lossy(&k).into_owned(),
                Bytes::from(v.to_vec()),
            );
        }
    }
    Ok((scripts, budget))
}

fn applied_meta(st: &SmState) -> AppliedMeta {
    AppliedMeta {
        last_applied: st.last_applied,
        membership: st.membership.clone(),
        revision: st.ks.revision(),
        clock: *st.ks.clock(),
    }
}

/// Builds snapshots from the shared state.
pub struct SnapshotBuilder {
    db: Arc<DB>,
    state: Arc<RwLock<SmState>>,
    seq: u64,
    stored: StoredSnapshotId,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        let (data, last_applied, membership) = {
            let st = self.state.read().map_err(|_| poisoned())?;
            let image = SnapshotImage {
                format: super::schema::FORMAT_VERSION,
                last_applied: st.last_applied,
                membership: st.membership.clone(),
                ks: st.ks.clone(),
            };
            (enc(&image)?, st.last_applied, st.membership.clone())
        };
        let snapshot_id = match last_applied {
            Some(l) => format!("{}-{}-{}", l.leader_id.term, l.index, self.seq),
            None => format!("0-0-{}", self.seq),
        };
        let meta = SnapshotMeta {
            last_log_id: last_applied,
            last_membership: membership,
            snapshot_id,
        };
        let stored = StoredSnapshot {
            meta: meta.clone(),
            data: data.clone(),
        };
        let db = &self.db;
        self.stored.store_if_newer(last_applied, || {
            db.put_cf(cf(db, CF_META)?, K_SNAPSHOT, enc(&stored)?)
                .map_err(write_err)
        })?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId>, StoredMembership<NodeId, openraft::BasicNode>), StorageError> {
        let st = self.state.read().map_err(|_| poisoned())?;
        Ok((st.last_applied, st.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<BatchReply>, StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut st = self.state.write().map_err(|_| poisoned())?;
        let mut replies = Vec::new();
        for entry in entries {
            st.last_applied = Some(entry.log_id);
            match entry.payload {
                EntryPayload::Blank => replies.push(BatchReply::default()),
                EntryPayload::Normal(batch) => {
                    let before = st.ks.stored_len();
                    let reply = apply_batch(&mut st.ks, entry.log_id.leader_id.term, &batch);
                    if batch
                        .cmds
                        .iter()
                        .any(|c| matches!(c, crate::cmd::Command::Evict(_)))
                    {
                        st.expired_total += before.saturating_sub(st.ks.stored_len()) as u64;
                    }
                    replies.push(reply);
                }
                EntryPayload::Membership(m) => {
                    st.membership = StoredMembership::new(Some(entry.log_id), m);
                    replies.push(BatchReply::default());
                }
            }
        }
        self.persist(&mut st)?;
        for event in st.ks.take_events() {
            // No receiver is normal (nobody subscribed).
            let _ = st.events.send(event);
        }
        Ok(replies)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.snapshot_seq += 1;
        SnapshotBuilder {
            db: self.db.clone(),
            state: self.state.clone(),
            seq: self.snapshot_seq,
            stored: self.stored.clone(),
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, openraft::BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        if let Some(ms) = self.test_install_delay_ms {
            tracing::warn!(ms, "test hook: delaying a snapshot install");
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        }
        let data = snapshot.into_inner();
        let image: SnapshotImage = dec(&data)?;
        if image.format != super::schema::FORMAT_VERSION {
            return Err(StorageIOError::read_snapshot(
                Some(meta.signature()),
                AnyError::error(format!("snapshot format {} unsupported", image.format)),
            )
            .into());
        }
        let mut ks = image.ks;
        ks.rebuild_index();
        let mut st = self.state.write().map_err(|_| poisoned())?;
        st.ks = ks;
        st.ks.clear_changes();
        st.last_applied = meta.last_log_id;
        st.membership = meta.last_membership.clone();
        // The state, last_applied and the snapshot itself in one WriteBatch. openraft cannot
        // purge the log this snapshot covers before this write is done (`LogStore::purge`
        // waits for it).
        let stored = StoredSnapshot {
            meta: meta.clone(),
            data,
        };
        let newer = self
            .stored
            .store_if_newer(meta.last_log_id, || self.rewrite_all(&st, Some(&stored)))?;
        if !newer {
            self.rewrite_all(&st, None)?;
        }
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        let stored: Option<StoredSnapshot> = get_meta(&self.db, K_SNAPSHOT)?;
        Ok(stored.map(|s| Snapshot {
            meta: s.meta,
            snapshot: Box::new(Cursor::new(s.data)),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::CommittedLeaderId;

    fn id(i: u64) -> Option<LogId> {
        Some(LogId::new(CommittedLeaderId::new(1, 1), i))
    }

    /// A snapshot build that read the state before a newer install finishes after it; the
    /// stored snapshot must stay the newer one.
    #[test]
    fn the_stored_snapshot_only_moves_forward() {
        let stored = StoredSnapshotId::default();
        let mut writes = Vec::new();
        let mut ran = Vec::new();
        for last in [id(10), id(5), id(10), id(12)] {
            ran.push(
                stored
                    .store_if_newer(last, || {
                        writes.push(last);
                        Ok(())
                    })
                    .unwrap(),
            );
        }
        assert_eq!(ran, vec![true, false, false, true]);
        assert_eq!(writes, vec![id(10), id(12)]);
    }
}
