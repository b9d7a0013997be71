//! The state machine (openraft 0.10 `RaftStateMachine`): the in-memory [`Keyspace`]
//! is the read path; every applied batch writes its changed keys, fences and `last_applied`
//! to RocksDB in one WriteBatch. A snapshot is a consistent view of that database, encoded
//! only when a follower needs it ([`super::snapshot`]).

use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, RwLock};

use bytes::Bytes;
use futures::{Stream, StreamExt};
use openraft::storage::{ApplyResponder, EntryResponder, RaftStateMachine};
use openraft::{EntryPayload, OptionalSend, RaftSnapshotBuilder};
use rocksdb::{IteratorMode, WriteBatch, DB};

use super::schema::{
    cf, dec, decode_u64, enc, get_meta, read_err, write_err, AppliedMeta, Result, CF_ACL, CF_FENCE,
    CF_KV, CF_LOCK, CF_META, CF_POPQ, CF_SCRIPT, K_APPLIED, K_SCRIPT_BUDGET,
};
use super::snapshot::{self, Header, IMAGE_FORMAT};
use crate::cmd::{Command, Ctx};
use crate::raft_types::{
    Batch, BatchReply, Entry, LogId, Snapshot, SnapshotMeta, StoredMembership, TypeConfig,
};
use crate::resp::Reply;
use crate::state::{Event, Keyspace};

/// Most entries applied (and persisted in one WriteBatch) at a time: the ones openraft has
/// ready, up to this many.
const APPLY_CHUNK: usize = 1024;

/// Most commands in a run that apply may run on the state machine's task rather than on
/// the blocking pool ([`quick_run`]).
const QUICK_RUN_COMMANDS: usize = 1024;

/// True for a run short enough to apply on the calling task ([`super::quick_or_off_runtime`]):
/// at most [`QUICK_RUN_COMMANDS`] commands and no script, whose time only its budget bounds.
/// A longer run (a restart's replay, a follower catching up) goes to the blocking pool.
fn quick_run(entries: &[Entry]) -> bool {
    let mut commands = 0;
    for entry in entries {
        if let EntryPayload::Normal(batch) = &entry.payload {
            if batch.cmds.iter().any(Command::runs_script) {
                return false;
            }
            commands += batch.cmds.len();
        }
    }
    commands <= QUICK_RUN_COMMANDS
}

/// State shared between the state machine worker and the server's read path.
#[derive(Debug)]
pub struct SmState {
    /// The keyspace.
    pub ks: Keyspace,
    /// Last applied log id.
    pub last_applied: Option<LogId>,
    /// Last applied membership.
    pub membership: StoredMembership,
    /// Keys removed by eviction entries since start (INFO expired_keys).
    pub expired_total: u64,
    /// Client entries (batches) applied since start, and the commands in them (INFO).
    pub applied_entries: u64,
    /// See `applied_entries`.
    pub applied_commands: u64,
    /// Events of applied batches, published after each batch is persisted (pub/sub delivery,
    /// wake-ups of blocked clients). Lagging receivers lose events, never block apply.
    pub events: EventSender,
    /// The grants to queued waiters among `events`, on their own channel: the task that
    /// answers waiters is woken by these only, not by every applied batch.
    pub waiter_grants: EventSender,
    /// The applied ACL users, republished after every batch that changed them: sessions
    /// check each command against this copy without taking the state lock.
    pub acl: AclView,
    /// This node's `notify-keyspace-events` classes, shared with CONFIG: which keyspace
    /// notifications apply records (an output filter, see [`crate::state::notify`]).
    pub notify_flags: Arc<std::sync::atomic::AtomicU32>,
    /// How long each applied run took, its WriteBatch included (`palisade_raft_apply_seconds`).
    pub apply_seconds: super::Timing,
}

/// A node's view of the replicated ACL users (see [`SmState::acl`]).
pub type AclView = tokio::sync::watch::Sender<Arc<crate::state::acl::Users>>;

impl SmState {
    /// Republishes the users if apply (or an install) changed them.
    fn publish_users(&self) {
        let users = self.ks.users();
        if self.acl.borrow().generation() != users.generation() {
            self.acl.send_replace(Arc::new(users.clone()));
        }
    }
}

impl Default for SmState {
    fn default() -> Self {
        SmState {
            ks: Keyspace::default(),
            last_applied: None,
            membership: StoredMembership::default(),
            expired_total: 0,
            applied_entries: 0,
            applied_commands: 0,
            events: tokio::sync::broadcast::channel(EVENT_CAPACITY).0,
            waiter_grants: tokio::sync::broadcast::channel(EVENT_CAPACITY).0,
            acl: AclView::new(Arc::default()),
            notify_flags: Arc::default(),
            apply_seconds: super::Timing::default(),
        }
    }
}

/// Events buffered per receiver before the slowest one starts losing them.
pub const EVENT_CAPACITY: usize = 65_536;

/// A channel of applied events. Each is shared (`Arc`): tokio's broadcast channel allocates
/// all [`EVENT_CAPACITY`] slots when it is made, and a slot holding an [`Event`] itself took
/// about 150 bytes, 10 MB per channel on every node; an `Arc` slot takes about 40.
pub type EventSender = tokio::sync::broadcast::Sender<Arc<Event>>;

/// The receiving end of an [`EventSender`].
pub type EventReceiver = tokio::sync::broadcast::Receiver<Arc<Event>>;

/// The state machine handle owned by openraft; clones share the database and the state (a
/// clone runs each storage call on the blocking pool, see [`super::off_runtime`]).
#[derive(Clone)]
pub struct StateMachine {
    db: Arc<DB>,
    state: Arc<RwLock<SmState>>,
    /// Test-only: sleep this long before installing a received snapshot
    /// ([`TEST_INSTALL_DELAY_ENV`]), so a test can kill the node inside the install.
    test_install_delay_ms: Option<u64>,
}

/// Environment variable of the test-only snapshot-install delay, in ms.
pub const TEST_INSTALL_DELAY_ENV: &str = "PALISADE_TEST_SNAPSHOT_INSTALL_DELAY_MS";

fn poisoned() -> io::Error {
    io::Error::other("state machine lock poisoned")
}

/// Applies one batch to the keyspace and returns its replies.
pub fn apply_batch(ks: &mut Keyspace, term: u64, batch: &Batch) -> BatchReply {
    let now = ks.clock_mut().advance(term, batch.boot, batch.ts);
    let replies = batch
        .cmds
        .iter()
        .map(|cmd| {
            let revision = ks.bump_revision();
            let reply = cmd.apply(ks, Ctx { now, revision });
            // Clients blocked on the keys it filled are served now, before the next command
            // (a whole MULTI/EXEC or script counts as one, as in Redis).
            crate::cmd::popwait::serve_ready(ks, now);
            reply
        })
        .collect();
    BatchReply(replies)
}

impl StateMachine {
    /// Loads the state machine from the database.
    pub fn open(db: Arc<DB>) -> Result<Self> {
        let meta: AppliedMeta = get_meta(&db, K_APPLIED)?.unwrap_or_default();
        // RocksDB iterates in key order; collecting sorted pairs builds full B-tree nodes
        // (inserting one by one leaves them about half full).
        let mut entries = Vec::new();
        for item in db.iterator_cf(cf(&db, CF_KV)?, IteratorMode::Start) {
            let (k, v) = item.map_err(read_err)?;
            entries.push((Bytes::from(k.to_vec()), dec(&v)?));
        }
        let entries: BTreeMap<Bytes, crate::state::Entry> = entries.into_iter().collect();
        let mut fences = Vec::new();
        for item in db.iterator_cf(cf(&db, CF_FENCE)?, IteratorMode::Start) {
            let (k, v) = item.map_err(read_err)?;
            let fence = decode_u64(&v)
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad fence value"))?;
            fences.push((Bytes::from(k.to_vec()), fence));
        }
        let fences: BTreeMap<Bytes, u64> = fences.into_iter().collect();
        let mut ks = Keyspace::from_parts(entries, fences, meta.revision, meta.clock);
        let (scripts, budget) = load_scripts(&db)?;
        ks.set_scripts(scripts, budget);
        let mut locks = BTreeMap::new();
        for item in db.iterator_cf(cf(&db, CF_LOCK)?, IteratorMode::Start) {
            let (k, v) = item.map_err(read_err)?;
            locks.insert(Bytes::from(k.to_vec()), dec(&v)?);
        }
        ks.set_lock_metas(locks);
        let mut pops = BTreeMap::new();
        for item in db.iterator_cf(cf(&db, CF_POPQ)?, IteratorMode::Start) {
            let (k, v) = item.map_err(read_err)?;
            pops.insert(Bytes::from(k.to_vec()), dec(&v)?);
        }
        ks.set_pop_queues(pops);
        let mut users = BTreeMap::new();
        for item in db.iterator_cf(cf(&db, CF_ACL)?, IteratorMode::Start) {
            let (k, v) = item.map_err(read_err)?;
            users.insert(String::from_utf8_lossy(&k).into_owned(), dec(&v)?);
        }
        ks.users_mut().restore(users);
        let acl = AclView::new(Arc::new(ks.users().clone()));
        let state = SmState {
            ks,
            last_applied: meta.last_applied,
            membership: meta.membership,
            expired_total: 0,
            applied_entries: 0,
            applied_commands: 0,
            events: tokio::sync::broadcast::channel(EVENT_CAPACITY).0,
            waiter_grants: tokio::sync::broadcast::channel(EVENT_CAPACITY).0,
            acl,
            notify_flags: Arc::default(),
            apply_seconds: super::Timing::default(),
        };
        Ok(StateMachine {
            db,
            state: Arc::new(RwLock::new(state)),
            test_install_delay_ms: std::env::var(TEST_INSTALL_DELAY_ENV)
                .ok()
                .and_then(|v| v.parse().ok()),
        })
    }

    /// The state shared with the server's read path.
    pub fn shared(&self) -> Arc<RwLock<SmState>> {
        self.state.clone()
    }

    /// The keyspace changes and the applied metadata, as one WriteBatch.
    fn changes_batch(&self, st: &mut SmState) -> Result<WriteBatch> {
        let changes = st.ks.take_changes(enc::<crate::state::Entry>);
        let (kv, fence, meta) = (
            cf(&self.db, CF_KV)?,
            cf(&self.db, CF_FENCE)?,
            cf(&self.db, CF_META)?,
        );
        let mut wb = WriteBatch::default();
        for (k, e) in changes.entries {
            match e {
                Some(record) => wb.put_cf(kv, &k, record?),
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
        let locks = cf(&self.db, CF_LOCK)?;
        for (k, m) in changes.locks {
            match m {
                Some(m) => wb.put_cf(locks, &k, enc(&m)?),
                None => wb.delete_cf(locks, &k),
            }
        }
        let pops = cf(&self.db, CF_POPQ)?;
        for (k, q) in changes.pops {
            match q {
                Some(q) => wb.put_cf(pops, &k, enc(&q)?),
                None => wb.delete_cf(pops, &k),
            }
        }
        let acl = cf(&self.db, CF_ACL)?;
        for (name, u) in changes.users {
            match u {
                Some(u) => wb.put_cf(acl, name.as_bytes(), enc(&u)?),
                None => wb.delete_cf(acl, name.as_bytes()),
            }
        }
        wb.put_cf(meta, K_APPLIED, enc(&applied_meta(st))?);
        Ok(wb)
    }

    /// A WriteBatch that replaces the whole persisted state with `ks` at `applied` (snapshot
    /// install).
    fn rewrite_batch(&self, ks: &Keyspace, applied: &AppliedMeta) -> Result<WriteBatch> {
        let (kv, fence, meta) = (
            cf(&self.db, CF_KV)?,
            cf(&self.db, CF_FENCE)?,
            cf(&self.db, CF_META)?,
        );
        let script = cf(&self.db, CF_SCRIPT)?;
        let locks = cf(&self.db, CF_LOCK)?;
        let acl = cf(&self.db, CF_ACL)?;
        let pops = cf(&self.db, CF_POPQ)?;
        let mut wb = WriteBatch::default();
        for family in [kv, fence, script, locks, acl, pops] {
            for item in self.db.iterator_cf(family, IteratorMode::Start) {
                let (k, _) = item.map_err(read_err)?;
                wb.delete_cf(family, k);
            }
        }
        for (k, e) in ks.entries() {
            wb.put_cf(kv, k, enc(e)?);
        }
        for (k, f) in ks.fences() {
            wb.put_cf(fence, k, f.to_be_bytes());
        }
        for (sha, body) in ks.scripts() {
            wb.put_cf(script, sha.as_bytes(), body);
        }
        for (k, m) in ks.lock_metas() {
            wb.put_cf(locks, k, enc(m)?);
        }
        for (name, u) in ks.users().stored() {
            wb.put_cf(acl, name.as_bytes(), enc(u)?);
        }
        for (k, q) in ks.pop_queues() {
            wb.put_cf(pops, k, enc(q)?);
        }
        let budget = ks.script_budget_setting();
        wb.put_cf(script, K_SCRIPT_BUDGET, budget.to_be_bytes());
        wb.put_cf(meta, K_APPLIED, enc(applied)?);
        Ok(wb)
    }
}

/// Reads the persisted script cache and budget.
fn load_scripts(db: &DB) -> Result<(BTreeMap<String, Bytes>, u64)> {
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

/// The metadata of the state at `st.last_applied`.
fn snapshot_meta(st: &SmState) -> SnapshotMeta {
    SnapshotMeta {
        last_log_id: st.last_applied,
        last_membership: st.membership.clone(),
    }
}

/// "Builds" snapshots: records the metadata of the applied state (see [`super::snapshot`]).
pub struct SnapshotBuilder {
    state: Arc<RwLock<SmState>>,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    type SnapshotData = Vec<u8>;

    /// openraft keeps only the metadata of a built snapshot (to purge the log behind it); the
    /// data is produced by `get_current_snapshot` when a follower needs it, so it is empty
    /// here.
    async fn build_snapshot(&mut self) -> Result<Snapshot> {
        let meta = snapshot_meta(&*self.state.read().map_err(|_| poisoned())?);
        Ok(Snapshot {
            meta,
            snapshot: Vec::new(),
        })
    }
}

impl StateMachine {
    /// Applies one run of entries and persists them in one WriteBatch. Returns each entry's
    /// reply, for the responders. Blocking: runs on the blocking pool, or on the calling task
    /// for a short run ([`quick_run`]).
    ///
    /// The state lock is held while the entries change the keyspace and their WriteBatch is
    /// built, not while RocksDB writes it: readers (on the runtime's worker threads) never
    /// wait for the disk. That is safe because every storage call of the state machine
    /// (apply, install, the image of `get_current_snapshot`) runs one after the other on
    /// openraft's state-machine task, so the database has caught up with the state before
    /// anything reads the two together; and a reader that sees state not yet written sees
    /// committed entries, which replaying the log restores after a crash.
    pub(crate) fn apply_run(&self, entries: Vec<Entry>) -> Result<Vec<BatchReply>> {
        let started = std::time::Instant::now();
        let (replies, wb, events, channels) = {
            let mut st = self.state.write().map_err(|_| poisoned())?;
            let replies = apply_entries(&mut st, entries);
            let wb = self.changes_batch(&mut st)?;
            st.publish_users();
            let channels = (
                st.events.clone(),
                st.waiter_grants.clone(),
                st.apply_seconds.clone(),
            );
            (replies, wb, st.ks.take_events(), channels)
        };
        // Not synced: the log entries are synced, and the single WAL orders this write after
        // them, so a crash can only lose a suffix that replaying the log restores.
        self.db.write(wb).map_err(write_err)?;
        let (all, waiter_grants, apply_seconds) = channels;
        apply_seconds.since(started);
        for event in events {
            let for_waiters = matches!(
                event,
                Event::Lock {
                    waiter: Some(_),
                    ..
                } | Event::Served { .. }
            );
            // No receiver is normal (nobody subscribed); then the event is not even shared.
            if !for_waiters && all.receiver_count() == 0 {
                continue;
            }
            let event = Arc::new(event);
            if for_waiters {
                let _ = waiter_grants.send(event.clone());
            }
            let _ = all.send(event);
        }
        Ok(replies)
    }

    /// Installs a received image, unless the state is already at or past it. Blocking: runs
    /// on the blocking pool.
    fn install(&self, meta: &SnapshotMeta, data: &[u8]) -> Result<()> {
        let applied = self.state.read().map_err(|_| poisoned())?.last_applied;
        tracing::info!(snapshot = %meta, ?applied, "installing a snapshot");
        if meta.last_log_id.map(|l| l.index) <= applied.map(|l| l.index) {
            // The state machine is already at or past it (same history, so it holds all of
            // it); replacing it would move `last_applied` backwards, behind the log.
            tracing::warn!(snapshot = %meta, ?applied, "keeping the newer state instead of an older snapshot");
            return Ok(());
        }
        let (header, mut ks) = snapshot::decode(data)?;
        snapshot::check_meta(&header, meta)?;
        let applied = AppliedMeta {
            last_applied: meta.last_log_id,
            membership: meta.last_membership.clone(),
            revision: ks.revision(),
            clock: *ks.clock(),
        };
        // State and last_applied in one WriteBatch, written before the state is swapped in.
        // openraft cannot purge the log this snapshot covers before this write is done
        // (`LogStore::purge` waits for it).
        let wb = self.rewrite_batch(&ks, &applied)?;
        self.db.write(wb).map_err(write_err)?;
        let mut st = self.state.write().map_err(|_| poisoned())?;
        ks.clear_changes();
        ks.users_mut().continue_from(st.ks.users().generation());
        st.ks = ks;
        st.last_applied = meta.last_log_id;
        st.membership = meta.last_membership.clone();
        st.publish_users();
        Ok(())
    }

    /// The image of the applied state, from a RocksDB snapshot taken under the state lock (so
    /// it is exactly the state at `last_applied`); `None` before anything is applied.
    /// Blocking: runs on the blocking pool.
    fn current_image(&self) -> Result<Option<Snapshot>> {
        let (db_snap, meta, header) = {
            let st = self.state.read().map_err(|_| poisoned())?;
            if st.last_applied.is_none() {
                return Ok(None);
            }
            let header = Header {
                format: IMAGE_FORMAT,
                last_applied: st.last_applied,
                membership: st.membership.clone(),
                revision: st.ks.revision(),
                clock: *st.ks.clock(),
                scripts: st.ks.scripts().clone(),
                script_budget: st.ks.script_budget_setting(),
            };
            (self.db.snapshot(), snapshot_meta(&st), header)
        };
        let data = snapshot::encode(&self.db, &db_snap, &header)?;
        Ok(Some(Snapshot {
            meta,
            snapshot: data,
        }))
    }
}

/// Applies `entries` to the state in memory; one reply per entry.
fn apply_entries(st: &mut SmState, entries: Vec<Entry>) -> Vec<BatchReply> {
    let mut replies = Vec::with_capacity(entries.len());
    for entry in entries {
        let next = st.last_applied.map_or(0, |l| l.index + 1);
        if entry.log_id.index < next {
            // Already applied (a committed entry is the same on every node, so this is a
            // repeat, never a different command). Applying it again would move
            // `last_applied` backwards on disk, behind a log purged up to it.
            tracing::warn!(
                entry = %entry.log_id,
                last_applied = ?st.last_applied,
                "skipping an entry the state machine has already applied"
            );
            replies.push(BatchReply::default());
            continue;
        }
        if entry.log_id.index > next && st.last_applied.is_some() {
            // openraft never does this (its storage suite does); loud, for diagnosis.
            tracing::error!(
                entry = %entry.log_id,
                last_applied = ?st.last_applied,
                "applying an entry past a gap after the state machine's last applied"
            );
        }
        st.last_applied = Some(entry.log_id);
        match entry.payload {
            EntryPayload::Blank => replies.push(BatchReply::default()),
            EntryPayload::Normal(batch) => {
                st.applied_entries += 1;
                st.applied_commands += batch.cmds.len() as u64;
                let flags = st.notify_flags.load(std::sync::atomic::Ordering::Relaxed);
                st.ks.set_notify_flags(flags);
                let reply = apply_batch(&mut st.ks, entry.log_id.leader_id.term, &batch);
                for (cmd, r) in batch.cmds.iter().zip(&reply.0) {
                    if let (crate::cmd::Command::Evict(_), Reply::Int(n)) = (cmd, r) {
                        st.expired_total += *n as u64;
                    }
                }
                replies.push(reply);
            }
            EntryPayload::Membership(m) => {
                st.membership = StoredMembership::new(Some(entry.log_id), m);
                replies.push(BatchReply::default());
            }
        }
    }
    replies
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotData = Vec<u8>;
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership)> {
        let st = self.state.read().map_err(|_| poisoned())?;
        Ok((st.last_applied, st.membership.clone()))
    }

    /// Applies what openraft has ready in runs of up to [`APPLY_CHUNK`] entries, each run
    /// persisted in one WriteBatch before its replies are sent (so that a client never sees
    /// a reply the state machine has not written).
    async fn apply<Strm>(&mut self, entries: Strm) -> Result<()>
    where
        Strm: Stream<Item = Result<EntryResponder<TypeConfig>>> + Unpin + OptionalSend,
    {
        let mut runs = entries.ready_chunks(APPLY_CHUNK);
        while let Some(run) = runs.next().await {
            let mut batch = Vec::with_capacity(run.len());
            let mut responders: Vec<Option<ApplyResponder<TypeConfig>>> =
                Vec::with_capacity(run.len());
            let mut failed = None;
            for item in run {
                match item {
                    Ok((entry, responder)) => {
                        batch.push(entry);
                        responders.push(responder);
                    }
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
            }
            let sm = self.clone();
            let replies = if quick_run(&batch) {
                super::quick_or_off_runtime(move || sm.apply_run(batch)).await?
            } else {
                super::off_runtime(move || sm.apply_run(batch)).await?
            };
            for (responder, reply) in responders.into_iter().zip(replies) {
                if let Some(r) = responder {
                    r.send(reply);
                }
            }
            if let Some(e) = failed {
                return Err(e);
            }
        }
        Ok(())
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        SnapshotBuilder {
            state: self.state.clone(),
        }
    }

    async fn install_snapshot(&mut self, meta: &SnapshotMeta, data: Vec<u8>) -> Result<()> {
        if let Some(ms) = self.test_install_delay_ms {
            tracing::warn!(ms, "test hook: delaying a snapshot install");
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        }
        let (sm, meta) = (self.clone(), meta.clone());
        super::off_runtime(move || sm.install(&meta, &data)).await
    }

    /// The applied state's image (see [`StateMachine::current_image`]).
    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>> {
        let sm = self.clone();
        super::off_runtime(move || sm.current_image()).await
    }
}

#[cfg(test)]
mod quick_run_tests {
    use super::*;
    use crate::cmd::test_argv;
    use crate::cmd::{parse, Request};
    use crate::raft_types::log_id;

    fn cmd(line: &str) -> Command {
        match parse(test_argv(line)) {
            Ok(Request::Data(c)) => c,
            _ => panic!("not a data command: {line}"),
        }
    }

    fn entry(index: u64, cmds: Vec<Command>) -> Entry {
        Entry {
            log_id: log_id(1, 1, index),
            payload: EntryPayload::Normal(Batch {
                ts: 0,
                boot: 1,
                cmds,
            }),
        }
    }

    /// Short runs without scripts apply on the calling task; a script (alone, or queued in
    /// a MULTI), or a run over the command limit, goes to the blocking pool.
    #[test]
    fn only_short_runs_without_scripts_apply_in_place() {
        let plain = || vec![cmd("SET k v"), cmd("LOCK l o PX 1000"), cmd("DEL k")];
        assert!(quick_run(&[entry(1, plain()), entry(2, plain())]));
        assert!(quick_run(&[]));
        let eval = cmd("EVAL return 1 0");
        assert!(eval.runs_script());
        assert!(!quick_run(&[
            entry(1, plain()),
            entry(2, vec![eval.clone()])
        ]));
        let exec = |inner: Vec<Command>| {
            Command::Exec(crate::cmd::txn::multi::Exec {
                watched: Vec::new(),
                cmds: inner,
            })
        };
        assert!(quick_run(&[entry(1, vec![exec(plain())])]));
        assert!(!quick_run(&[entry(
            1,
            vec![exec(vec![cmd("SET a b"), eval])]
        )]));
        let many = |n: usize| {
            (0..n)
                .map(|i| cmd(&format!("SET k{i} v")))
                .collect::<Vec<_>>()
        };
        assert!(quick_run(&[entry(1, many(QUICK_RUN_COMMANDS))]));
        assert!(!quick_run(&[
            entry(1, many(QUICK_RUN_COMMANDS)),
            entry(2, many(1))
        ]));
    }
}
