//! The versioned on-disk schema: every column family and key encoding in one place.
//!
//! Format version 2 (version 1 was written by builds on openraft 0.9; [`super::upgrade`]
//! moves a version-1 directory to version 2 once, after checking that every record reads the
//! same under openraft 0.10's types):
//! - `meta`: `format_version` -> u32 BE; `node_id`, `cluster_id` -> u64 BE; `vote`, `committed`,
//!   `last_purged` -> postcard openraft types; `applied` -> postcard [`AppliedMeta`].
//!   (Older builds also kept a `snapshot` key; it is deleted on open: snapshots are now a
//!   view of the database, see [`super::snapshot`].)
//! - `log`: u64 BE index -> postcard `Entry<TypeConfig>` (key order is log order).
//! - `kv`: user key bytes -> postcard [`crate::state::Entry`].
//! - `fence`: user key bytes -> u64 BE fence.
//! - `lockq`: user key bytes -> postcard [`crate::state::LockMeta`] (a lock's queue of
//!   waiters and lock-delay; only keys that have one). Added within format 2: a directory
//!   of an older build opens with the family created empty, which is its exact state.
//! - `script`: SHA1 hex of a cached script -> its body; plus the key `#budget` -> u64 BE,
//!   the script instruction budget (`#` cannot start a hex SHA1).
//! - `acl`: ACL user name -> postcard [`crate::state::acl::User`] (only users that were
//!   created or changed: the built-in `default` is not stored until it changes). Added within
//!   format 2, like `lockq`: an older directory opens with it empty, which is its exact state.
//! - `popq`: user key bytes -> postcard `VecDeque<`[`crate::state::PopWaiter`]`>` (the clients
//!   blocked in a pop on that key, in arrival order; only keys that have some). Added within
//!   format 2, like `lockq`.

use std::path::Path;

use std::io;

use rocksdb::{ColumnFamilyDescriptor, Options, DB};
use serde::{de::DeserializeOwned, Deserialize, Serialize};

use crate::cmd::info::DbMemory;
use crate::raft_types::{LogId, StoredMembership};
use crate::state::ClusterClock;

/// Storage results: openraft 0.10's storage traits speak `std::io::Error`.
pub type Result<T, E = io::Error> = std::result::Result<T, E>;

/// The format this build reads and writes.
pub const FORMAT_VERSION: u32 = 2;

/// Column family names.
pub const CF_META: &str = "meta";
/// The Raft log.
pub const CF_LOG: &str = "log";
/// Keyspace entries.
pub const CF_KV: &str = "kv";
/// Fences.
pub const CF_FENCE: &str = "fence";
/// The replicated script cache (and the script budget).
pub const CF_SCRIPT: &str = "script";
pub const CF_LOCK: &str = "lockq";
/// The replicated ACL users.
pub const CF_ACL: &str = "acl";
/// Clients blocked in a pop, per key.
pub const CF_POPQ: &str = "popq";
/// The key of the script budget in [`CF_SCRIPT`].
pub const K_SCRIPT_BUDGET: &[u8] = b"#budget";

/// Meta keys.
pub const ALL_CFS: [&str; 8] = [
    CF_META, CF_LOG, CF_KV, CF_FENCE, CF_SCRIPT, CF_LOCK, CF_ACL, CF_POPQ,
];

pub const K_FORMAT: &[u8] = b"format_version";
/// The persisted node id.
pub const K_NODE_ID: &[u8] = b"node_id";
/// The vote.
pub const K_VOTE: &[u8] = b"vote";
/// The last known committed log id.
pub const K_COMMITTED: &[u8] = b"committed";
/// The last purged log id.
pub const K_PURGED: &[u8] = b"last_purged";
/// State machine metadata written with every applied batch.
pub const K_APPLIED: &[u8] = b"applied";
/// Where older builds stored the latest snapshot (deleted on open).
pub const K_LEGACY_SNAPSHOT: &[u8] = b"snapshot";
/// The cluster id (u64 BE), fixed at bootstrap or learned when joining.
pub const K_CLUSTER_ID: &[u8] = b"cluster_id";

/// State machine metadata persisted atomically with each applied batch.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct AppliedMeta {
    /// Last applied log id.
    pub last_applied: Option<LogId>,
    /// Last applied membership.
    pub membership: StoredMembership,
    /// The revision counter.
    pub revision: u64,
    /// The cluster clock.
    pub clock: ClusterClock,
}

/// Big-endian u64, so that RocksDB key order matches numeric order.
pub fn index_key(index: u64) -> [u8; 8] {
    index.to_be_bytes()
}

/// Decodes an 8-byte big-endian u64.
pub fn decode_u64(b: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(b.try_into().ok()?))
}

/// Serializes a value for storage.
pub fn enc<T: Serialize>(v: &T) -> Result<Vec<u8>> {
    postcard::to_allocvec(v).map_err(|e| io::Error::other(format!("encode: {e}")))
}

/// Deserializes a stored value; corruption is an error, never a panic.
pub fn dec<T: DeserializeOwned>(b: &[u8]) -> Result<T> {
    postcard::from_bytes(b)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("decode: {e}")))
}

/// Maps a RocksDB error to a storage write error.
pub fn write_err(e: rocksdb::Error) -> io::Error {
    io::Error::other(format!("rocksdb write: {e}"))
}

/// Maps a RocksDB error to a storage read error.
pub fn read_err(e: rocksdb::Error) -> io::Error {
    io::Error::other(format!("rocksdb read: {e}"))
}

/// Opens the database with all column families and checks (or writes) the format version.
pub fn open_db(dir: &Path) -> Result<DB> {
    open_db_with(dir, false)
}

/// [`open_db`]. With `lose_unsynced_writes` (a test-only power cut), RocksDB keeps WAL
/// records in its own buffer until a sync (manual WAL flush): the log store's syncs and
/// every synced write still reach the disk, but a kill -9 loses everything after the last
/// sync, as a power cut would. Without it, a kill -9 loses nothing that was written, since
/// the operating system keeps it.
pub fn open_db_with(dir: &Path, lose_unsynced_writes: bool) -> Result<DB> {
    let mut opts = Options::default();
    opts.set_manual_wal_flush(lose_unsynced_writes);
    opts.create_if_missing(true);
    opts.create_missing_column_families(true);
    // No WAL recycling. It would make each sync several times cheaper (a recycled file is
    // overwritten in place, so a sync does not also commit a new file size), but RocksDB's
    // own source warns that recycling with point-in-time recovery can leave a hole in the
    // recovered data, and a 5-node chaos soak lost one acknowledged write with it on
    // (docs/reliability.md, bug 2). Correctness first.
    opts.set_recycle_log_file_num(0);
    opts.set_max_total_wal_size(64 << 20);
    opts.set_max_background_jobs(2);
    // Required by the vector memtables below (they take one writer at a time); the writes
    // come one batch at a time anyway.
    opts.set_allow_concurrent_memtable_write(false);
    let cfs = ALL_CFS.map(|n| {
        let mut o = Options::default();
        // A small hot keyspace: modest memtables keep RSS down (two per family at most).
        o.set_write_buffer_size(match n {
            CF_LOG | CF_KV => 8 << 20,
            CF_META => META_BUFFER,
            _ => 4 << 20,
        });
        o.set_max_write_buffer_number(2);
        // The state machine's families are written on every apply and read only whole, by
        // an iterator (loading the state, building a snapshot image): a vector memtable
        // appends a write where a skiplist searches for its place (issue 25: the skiplist's
        // insert was about a tenth of a node's CPU under load), and sorts once, when it is
        // flushed or iterated. A point read would sort a copy of it, so the families that
        // are read by key (the log, `meta`) keep the skiplist.
        if !matches!(n, CF_LOG | CF_META) {
            o.set_memtable_factory(rocksdb::MemtableFactory::Vector);
        }
        // Log entries live for one snapshot interval: not worth compressing.
        o.set_compression_type(if n == CF_LOG {
            rocksdb::DBCompressionType::None
        } else {
            rocksdb::DBCompressionType::Lz4
        });
        ColumnFamilyDescriptor::new(n, o)
    });
    let db = DB::open_cf_descriptors(&opts, dir, cfs).map_err(read_err)?;
    let meta = cf(&db, CF_META)?;
    db.delete_cf(meta, K_LEGACY_SNAPSHOT).map_err(write_err)?;
    super::upgrade::check_format(&db)?;
    Ok(db)
}

/// Memtable size of the `meta` family.
const META_BUFFER: usize = 4 << 20;
/// A column family handle, or an error if the database lacks it.
pub fn cf<'a>(db: &'a DB, name: &str) -> Result<&'a rocksdb::ColumnFamily> {
    db.cf_handle(name)
        .ok_or_else(|| io::Error::other(format!("missing column family {name}")))
}

/// What RocksDB reports it holds in memory (0 for a figure it does not report).
pub fn memory_usage(db: &DB) -> DbMemory {
    let mut m = DbMemory::default();
    for name in ALL_CFS {
        let Some(h) = db.cf_handle(name) else {
            continue;
        };
        let prop = |p: &str| db.property_int_value_cf(h, p).ok().flatten().unwrap_or(0);
        m.memtables += prop("rocksdb.size-all-mem-tables");
        m.block_cache += prop("rocksdb.block-cache-usage");
        m.table_readers += prop("rocksdb.estimate-table-readers-mem");
    }
    m
}

/// Reads and decodes a meta value.
pub fn get_meta<T: DeserializeOwned>(db: &DB, key: &[u8]) -> Result<Option<T>> {
    match db.get_cf(cf(db, CF_META)?, key).map_err(read_err)? {
        Some(b) => Ok(Some(dec(&b)?)),
        None => Ok(None),
    }
}

/// Reads the persisted node id, if any.
pub fn node_id(db: &DB) -> Result<Option<u64>> {
    Ok(db
        .get_cf(cf(db, CF_META)?, K_NODE_ID)
        .map_err(read_err)?
        .and_then(|b| decode_u64(&b)))
}

/// Reads the persisted cluster id, if any.
pub fn cluster_id(db: &DB) -> Result<Option<u64>> {
    Ok(db
        .get_cf(cf(db, CF_META)?, K_CLUSTER_ID)
        .map_err(read_err)?
        .and_then(|b| decode_u64(&b)))
}

/// Persists the cluster id (synced: a node must never forget which cluster it belongs to).
pub fn put_cluster_id(db: &DB, id: u64) -> Result<()> {
    let mut wb = rocksdb::WriteBatch::default();
    wb.put_cf(cf(db, CF_META)?, K_CLUSTER_ID, id.to_be_bytes());
    let mut opts = rocksdb::WriteOptions::default();
    opts.set_sync(true);
    db.write_opt(wb, &opts).map_err(write_err)
}
