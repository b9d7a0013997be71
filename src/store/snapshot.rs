//! Snapshots as a view of the database.
//!
//! A snapshot is not kept anywhere: the state machine persists every applied batch, so the
//! column families *are* the state at `last_applied`. Building a snapshot (openraft asks
//! after every `--snapshot-every` entries, to purge the log behind it) only records its
//! metadata. When a follower needs the data, [`encode`] streams a consistent RocksDB
//! snapshot of the `kv` and `fence` families into one buffer. Nothing is cloned in memory and
//! no lock is held while it is encoded.
//!
//! Image format (version [`IMAGE_FORMAT`]):
//! - u32 BE length of the header, then the postcard [`Header`];
//! - records, each a tag byte: `1` = key/value (u32 BE key length, key, u32 BE value length,
//!   value: the stored postcard [`crate::state::Entry`]), `2` = fence (u32 BE key length, key,
//!   u64 BE fence), `3` = lock queue (u32 BE key length, key, u32 BE value length, value:
//!   the stored postcard [`crate::state::LockMeta`]), `4` = ACL user (u32 BE name length,
//!   name, u32 BE value length, value: the stored postcard [`crate::state::acl::User`]),
//!   `5` = blocked-pop queue (u32 BE key length, key, u32 BE value length, value: the stored
//!   postcard `VecDeque<`[`crate::state::PopWaiter`]`>`), `0` = end. Format 3 added tag 3,
//!   format 4 tag 4 and format 5 tag 5; older images (no lock queues, no users, no pop
//!   queues) are still read.

use std::collections::BTreeMap;

use std::io;

use bytes::Bytes;
use rocksdb::{IteratorMode, SnapshotWithThreadMode, DB};
use serde::{Deserialize, Serialize};

use super::schema::{cf, dec, enc, read_err, Result, CF_ACL, CF_FENCE, CF_KV, CF_LOCK, CF_POPQ};
use crate::raft_types::{LogId, StoredMembership};
use crate::state::{ClusterClock, Entry, Keyspace};

/// The image format this build writes and reads.
pub const IMAGE_FORMAT: u32 = 5;
/// The oldest image format this build reads.
const OLDEST_IMAGE_FORMAT: u32 = 2;

const TAG_END: u8 = 0;
const TAG_KV: u8 = 1;
const TAG_FENCE: u8 = 2;
const TAG_LOCK: u8 = 3;
const TAG_POPQ: u8 = 5;
const TAG_USER: u8 = 4;

/// Everything in an image except the keys and fences.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Header {
    /// [`IMAGE_FORMAT`] of the writer.
    pub format: u32,
    /// Last applied log id the image reflects.
    pub last_applied: Option<LogId>,
    /// Membership at `last_applied`.
    pub membership: StoredMembership,
    /// The revision counter.
    pub revision: u64,
    /// The cluster clock.
    pub clock: ClusterClock,
    /// The replicated script cache (SHA1 hex -> body).
    pub scripts: BTreeMap<String, Bytes>,
    /// The script instruction budget setting.
    pub script_budget: u64,
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) -> Result<()> {
    let len = u32::try_from(b.len()).map_err(|_| corrupt("record longer than 4 GiB"))?;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(b);
    Ok(())
}

/// Encodes the image of `snap` (a RocksDB snapshot taken while the state machine was at
/// `header.last_applied`).
pub fn encode(db: &DB, snap: &SnapshotWithThreadMode<'_, DB>, header: &Header) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    put_bytes(&mut out, &enc(header)?)?;
    for item in snap.iterator_cf(cf(db, CF_KV)?, IteratorMode::Start) {
        let (k, v) = item.map_err(read_err)?;
        out.push(TAG_KV);
        put_bytes(&mut out, &k)?;
        put_bytes(&mut out, &v)?;
    }
    for item in snap.iterator_cf(cf(db, CF_FENCE)?, IteratorMode::Start) {
        let (k, v) = item.map_err(read_err)?;
        out.push(TAG_FENCE);
        put_bytes(&mut out, &k)?;
        out.extend_from_slice(&v);
    }
    for item in snap.iterator_cf(cf(db, CF_LOCK)?, IteratorMode::Start) {
        let (k, v) = item.map_err(read_err)?;
        out.push(TAG_LOCK);
        put_bytes(&mut out, &k)?;
        put_bytes(&mut out, &v)?;
    }
    for item in snap.iterator_cf(cf(db, CF_ACL)?, IteratorMode::Start) {
        let (k, v) = item.map_err(read_err)?;
        out.push(TAG_USER);
        put_bytes(&mut out, &k)?;
        put_bytes(&mut out, &v)?;
    }
    for item in snap.iterator_cf(cf(db, CF_POPQ)?, IteratorMode::Start) {
        let (k, v) = item.map_err(read_err)?;
        out.push(TAG_POPQ);
        put_bytes(&mut out, &k)?;
        put_bytes(&mut out, &v)?;
    }
    out.push(TAG_END);
    Ok(out)
}

fn corrupt(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("bad snapshot image: {what}"),
    )
}

/// A bounds-checked reader over image bytes: corrupt input is an error, never a panic.
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.buf.len() < n {
            return Err(corrupt("truncated"));
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_be_bytes(a))
    }

    fn bytes(&mut self) -> Result<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
}

/// Checks that the metadata a snapshot arrived with describes its image: the same last
/// applied log id and the same membership. A mismatch (a bug, or a forged `SnapshotDone`)
/// is an error: installing would put the state of one point in the log under the metadata
/// of another, and the node could no longer be trusted.
pub fn check_meta(header: &Header, meta: &crate::raft_types::SnapshotMeta) -> Result<()> {
    if header.last_applied != meta.last_log_id {
        return Err(corrupt(&format!(
            "the image is at {:?} but its metadata says {:?}",
            header.last_applied, meta.last_log_id
        )));
    }
    if header.membership != meta.last_membership {
        return Err(corrupt(&format!(
            "the image's membership {:?} is not its metadata's {:?}",
            header.membership, meta.last_membership
        )));
    }
    Ok(())
}

/// Decodes an image into its header and keyspace.
pub fn decode(data: &[u8]) -> Result<(Header, Keyspace)> {
    let mut r = Reader { buf: data };
    let header: Header = dec(r.bytes()?)?;
    if !(OLDEST_IMAGE_FORMAT..=IMAGE_FORMAT).contains(&header.format) {
        return Err(corrupt(&format!(
            "format {} (this build reads {OLDEST_IMAGE_FORMAT} to {IMAGE_FORMAT})",
            header.format
        )));
    }
    // Keys arrive sorted (RocksDB order), so collecting builds full B-tree nodes.
    let mut entries: Vec<(Bytes, Entry)> = Vec::new();
    let mut fences: Vec<(Bytes, u64)> = Vec::new();
    let mut locks = BTreeMap::new();
    let mut users = BTreeMap::new();
    let mut pops = BTreeMap::new();
    loop {
        match r.u8()? {
            TAG_END => break,
            TAG_KV => {
                let k = Bytes::copy_from_slice(r.bytes()?);
                let e: Entry = dec(r.bytes()?)?;
                entries.push((k, e));
            }
            TAG_FENCE => {
                let k = Bytes::copy_from_slice(r.bytes()?);
                fences.push((k, r.u64()?));
            }
            TAG_LOCK => {
                let k = Bytes::copy_from_slice(r.bytes()?);
                locks.insert(k, dec(r.bytes()?)?);
            }
            TAG_USER => {
                let name = String::from_utf8_lossy(r.bytes()?).into_owned();
                users.insert(name, dec(r.bytes()?)?);
            }
            TAG_POPQ => {
                let k = Bytes::copy_from_slice(r.bytes()?);
                pops.insert(k, dec(r.bytes()?)?);
            }
            t => return Err(corrupt(&format!("unknown record tag {t}"))),
        }
    }
    if !r.buf.is_empty() {
        return Err(corrupt("bytes after the end marker"));
    }
    let mut ks = Keyspace::from_parts(
        entries.into_iter().collect(),
        fences.into_iter().collect(),
        header.revision,
        header.clock,
    );
    ks.set_scripts(header.scripts.clone(), header.script_budget);
    ks.set_lock_metas(locks);
    ks.set_pop_queues(pops);
    ks.users_mut().restore(users);
    Ok((header, ks))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Value;
    use rocksdb::WriteBatch;

    fn header() -> Header {
        Header {
            format: IMAGE_FORMAT,
            last_applied: None,
            membership: StoredMembership::default(),
            revision: 42,
            clock: ClusterClock::default(),
            scripts: BTreeMap::from([("ab".to_string(), Bytes::from_static(b"return 1"))]),
            script_budget: 7,
        }
    }

    fn entry(v: &str, token: u64) -> Entry {
        Entry {
            value: Value::Str(Bytes::copy_from_slice(v.as_bytes())),
            expire_at: Some(1000 + token),
            token,
            modified: token,
        }
    }

    #[test]
    fn an_image_is_the_database_at_the_moment_of_the_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let db = super::super::schema::open_db(dir.path()).unwrap();
        let (kv, fence) = (cf(&db, CF_KV).unwrap(), cf(&db, CF_FENCE).unwrap());
        let mut wb = WriteBatch::default();
        wb.put_cf(kv, b"a", enc(&entry("x", 1)).unwrap());
        wb.put_cf(kv, b"b", enc(&entry("y", 2)).unwrap());
        wb.put_cf(fence, b"a", 9u64.to_be_bytes());
        db.write(wb).unwrap();
        let snap = db.snapshot();
        // Later writes are not in the image.
        db.put_cf(kv, b"c", enc(&entry("z", 3)).unwrap()).unwrap();
        db.delete_cf(kv, b"a").unwrap();
        let data = encode(&db, &snap, &header()).unwrap();
        let (h, ks) = decode(&data).unwrap();
        assert_eq!(h.revision, 42);
        assert_eq!(ks.revision(), 42);
        assert_eq!(ks.script_budget_setting(), 7);
        assert_eq!(ks.scripts().len(), 1);
        let keys: Vec<&[u8]> = ks.entries().keys().map(|k| k.as_ref()).collect();
        assert_eq!(keys, vec![&b"a"[..], &b"b"[..]]);
        assert_eq!(ks.entries()[&b"b"[..]], entry("y", 2));
        assert_eq!(ks.fence(b"a"), 9);
        assert_eq!(ks.volatile_len(), 2, "expiry index rebuilt");
    }

    /// The script cache, its budget, hashes and lists (with their field and element order),
    /// lock queues, blocked-pop queues and ACL users survive an image, written to the database the way the state machine
    /// does.
    #[test]
    fn images_carry_scripts_budget_and_collections() {
        let mut ks = Keyspace::default();
        ks.cache_script("cd".into(), Bytes::from_static(b"return 2"));
        ks.set_script_budget(77);
        crate::cmd::run_line(&mut ks, "HSET h b 1 a 2", 0);
        crate::cmd::run_line(&mut ks, "RPUSH l x y", 0);
        crate::cmd::run_line(&mut ks, "LOCK q a PX 1000 DELAY 50", 0);
        let (q, b) = (Bytes::from_static(b"q"), Bytes::from_static(b"b"));
        let waiter = crate::state::WaiterId {
            node: 2,
            boot: 3,
            seq: 4,
        };
        let wait = crate::state::Acquire {
            key: &q,
            owner: &b,
            ttl_ms: 500,
            delay_ms: 0,
            wait: Some((waiter, None)),
        };
        assert_eq!(ks.lock_acquire(wait, 1, 99), crate::state::Acquired::Queued);
        ks.pop_enqueue(crate::state::PopWaiter {
            id: waiter,
            kind: crate::state::PopKind::ZSet,
            deadline: Some(900),
            cmd: Bytes::from_static(b"\x4f"),
            keys: vec![Bytes::from_static(b"z1"), Bytes::from_static(b"z2")],
        });
        let dir = tempfile::tempdir().unwrap();
        let db = super::super::schema::open_db(dir.path()).unwrap();
        let (kv, locks) = (cf(&db, CF_KV).unwrap(), cf(&db, CF_LOCK).unwrap());
        let rules = [Bytes::from_static(b"on"), Bytes::from_static(b"~lock:*")];
        let catalog = crate::cmd::acl::TableCatalog;
        ks.users_mut().set_user("alice", &rules, &catalog).unwrap();
        let changes = ks.take_changes(enc::<Entry>);
        for (name, u) in changes.users {
            let acl = cf(&db, CF_ACL).unwrap();
            db.put_cf(acl, name.as_bytes(), enc(&u.unwrap()).unwrap())
                .unwrap();
        }
        for (k, e) in changes.entries {
            db.put_cf(kv, &k, e.unwrap().unwrap()).unwrap();
        }
        for (k, m) in changes.locks {
            db.put_cf(locks, &k, enc(&m.unwrap()).unwrap()).unwrap();
        }
        for (k, q) in changes.pops {
            let pops = cf(&db, CF_POPQ).unwrap();
            db.put_cf(pops, &k, enc(&q.unwrap()).unwrap()).unwrap();
        }
        let mut h = header();
        h.scripts = ks.scripts().clone();
        h.script_budget = ks.script_budget_setting();
        let (_, mut back) = decode(&encode(&db, &db.snapshot(), &h).unwrap()).unwrap();
        assert_eq!(back.script("cd"), Some(&Bytes::from_static(b"return 2")));
        assert_eq!(back.lock_metas(), ks.lock_metas());
        assert_eq!(back.lock_queue(b"q", 1), (1, 0));
        assert_eq!(back.pop_queues(), ks.pop_queues());
        assert_eq!(back.pop_queue(b"z2").map(|q| q.len()), Some(1));
        assert_eq!(back.script_budget(), 77);
        assert_eq!(back.users().get("alice"), ks.users().get("alice"));
        fn bulks(v: &[&'static str]) -> crate::resp::Reply {
            crate::resp::Reply::Array(v.iter().map(|s| crate::resp::Reply::bulk(*s)).collect())
        }
        assert_eq!(
            crate::cmd::run_line(&mut back, "HKEYS h", 0),
            bulks(&["b", "a"])
        );
        assert_eq!(
            crate::cmd::run_line(&mut back, "LRANGE l 0 -1", 0),
            bulks(&["x", "y"])
        );
    }

    /// Sets survive an image with their members (and their order), and `Value::Set` is a new
    /// last variant: the encodings of the older variants are unchanged, so data written
    /// before sets existed reads as it did.
    #[test]
    fn images_carry_sets_and_older_values_read_unchanged() {
        let mut ks = Keyspace::default();
        crate::cmd::run_line(&mut ks, "SADD s b a 3", 0);
        crate::cmd::run_line(&mut ks, "SADD i 2 1", 0);
        crate::cmd::run_line(&mut ks, "EXPIRE i 100", 0);
        let dir = tempfile::tempdir().unwrap();
        let db = super::super::schema::open_db(dir.path()).unwrap();
        let kv = cf(&db, CF_KV).unwrap();
        for (k, e) in ks.take_changes(enc::<Entry>).entries {
            db.put_cf(kv, &k, e.unwrap().unwrap()).unwrap();
        }
        let (_, mut back) = decode(&encode(&db, &db.snapshot(), &header()).unwrap()).unwrap();
        assert_eq!(back.entries(), ks.entries());
        let set = |v: &[&'static str]| {
            crate::resp::Reply::Set(v.iter().map(|s| crate::resp::Reply::bulk(*s)).collect())
        };
        assert_eq!(
            crate::cmd::run_line(&mut back, "SMEMBERS s", 0),
            set(&["b", "a", "3"])
        );
        assert_eq!(
            crate::cmd::run_line(&mut back, "SMEMBERS i", 0),
            set(&["1", "2"])
        );
        assert_eq!(back.volatile_len(), 1);
        // Variant indexes: Str 0, Hash 1, List 2 as before; Set 3.
        let first = |v: Value| postcard::to_allocvec(&v).unwrap()[0];
        assert_eq!(first(Value::Str(Bytes::from_static(b"x"))), 0);
        assert_eq!(first(Value::Hash(Box::default())), 1);
        assert_eq!(first(Value::List(Default::default())), 2);
        assert_eq!(first(Value::Set(Box::default())), 3);
        assert_eq!(first(Value::ZSet(Box::default())), 4);
        let old = postcard::to_allocvec(&entry("v", 5)).unwrap();
        assert_eq!(postcard::from_bytes::<Entry>(&old).unwrap(), entry("v", 5));
    }

    /// A sorted set survives an image with its scores (infinities, `%.17g` ones) and its
    /// order (score, then member bytes).
    #[test]
    fn images_carry_sorted_sets() {
        let mut ks = Keyspace::default();
        crate::cmd::run_line(&mut ks, "ZADD z 2 b 1 c 1 a -inf m 0.1 f inf i", 0);
        let dir = tempfile::tempdir().unwrap();
        let db = super::super::schema::open_db(dir.path()).unwrap();
        let kv = cf(&db, CF_KV).unwrap();
        for (k, e) in ks.take_changes(enc::<Entry>).entries {
            db.put_cf(kv, &k, e.unwrap().unwrap()).unwrap();
        }
        let (_, mut back) = decode(&encode(&db, &db.snapshot(), &header()).unwrap()).unwrap();
        assert_eq!(back.entries(), ks.entries());
        let line = "ZRANGE z 0 -1 WITHSCORES";
        let want = crate::cmd::run_line(&mut ks, line, 0);
        assert_eq!(crate::cmd::run_line(&mut back, line, 0), want);
        let crate::resp::Reply::Pairs(pairs) = want else {
            panic!("{want:?}")
        };
        let members: Vec<_> = pairs.iter().map(|(m, _)| m.clone()).collect();
        let want: Vec<_> = ["m", "f", "a", "c", "b", "i"]
            .map(crate::resp::Reply::bulk)
            .to_vec();
        assert_eq!(members, want);
    }

    #[test]
    fn corrupt_images_are_errors_not_panics() {
        let dir = tempfile::tempdir().unwrap();
        let db = super::super::schema::open_db(dir.path()).unwrap();
        db.put_cf(cf(&db, CF_KV).unwrap(), b"k", enc(&entry("v", 1)).unwrap())
            .unwrap();
        let data = encode(&db, &db.snapshot(), &header()).unwrap();
        assert!(decode(&data).is_ok());
        for cut in 0..data.len() {
            assert!(decode(&data[..cut]).is_err(), "truncated at {cut}");
        }
        let mut extra = data.clone();
        extra.push(0);
        assert!(decode(&extra).is_err());
        let mut bad_tag = data.clone();
        let end = bad_tag.len() - 1;
        bad_tag[end] = 9;
        assert!(decode(&bad_tag).is_err());
        let mut other = header();
        other.format = 1;
        let data = encode(&db, &db.snapshot(), &other).unwrap();
        assert!(decode(&data).is_err());
    }
}
