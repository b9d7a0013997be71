//! On-disk format versions and the upgrade from one to the next, run once at open.
//!
//! - **Version 1**: written by Palisade builds on openraft 0.9.
//! - **Version 2**: this build, on openraft 0.10. The records Palisade itself defines did not
//!   change; the ones that hold openraft types (the vote, the committed and purged log ids,
//!   the applied metadata with its membership, and every log entry) are postcard encodings of
//!   openraft structs whose field order is the same in both versions. The upgrade does not
//!   take that on trust: it decodes every such record with this build's types and encodes it
//!   again, and only if every record comes back byte for byte does it move the marker to
//!   version 2 (one synced write). Otherwise the directory is refused untouched, with an error
//!   that names the record, both versions and what to do: it is never read differently from
//!   how it was written.

use std::io;

use rocksdb::{IteratorMode, WriteBatch, WriteOptions, DB};
use serde::{de::DeserializeOwned, Serialize};

use super::schema::{
    cf, dec, enc, read_err, write_err, AppliedMeta, Result, CF_LOG, CF_META, FORMAT_VERSION,
    K_APPLIED, K_COMMITTED, K_FORMAT, K_PURGED, K_VOTE,
};
use crate::raft_types::{Entry, LogId, Vote};

/// The format written by builds on openraft 0.9.
pub const FORMAT_OPENRAFT_09: u32 = 1;

/// Why a directory cannot be opened as it is.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// A format this build has no upgrade for (newer, or unknown).
    #[error("unsupported on-disk format version {found}: this build (Palisade {}, openraft 0.10) reads version {FORMAT_VERSION} and upgrades version {FORMAT_OPENRAFT_09}; run the Palisade release that wrote this directory", env!("CARGO_PKG_VERSION"))]
    Version {
        /// The version found.
        found: u32,
    },
    /// The format marker is not a u32.
    #[error("corrupt format_version marker")]
    Corrupt,
    /// A version-1 record does not read the same under this build's types.
    #[error("cannot upgrade this data directory from on-disk format {FORMAT_OPENRAFT_09} (openraft 0.9) to {FORMAT_VERSION} (openraft 0.10): the record {record} does not read back unchanged ({why}); the directory was left untouched. Run the previous release on it, or remove this node from its cluster, move the directory aside and add the node back empty (RAFT.NODE ADD) so that it catches up from a snapshot")]
    Unreadable {
        /// Which record.
        record: String,
        /// What went wrong.
        why: String,
    },
}

fn fail(e: FormatError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

/// Checks the format marker: writes it on a new directory, upgrades a version-1 directory,
/// refuses anything else.
pub fn check_format(db: &DB) -> Result<()> {
    let meta = cf(db, CF_META)?;
    let found = match db.get_cf(meta, K_FORMAT).map_err(read_err)? {
        None if is_empty(db)? => return write_marker(db),
        // Data without a marker: no release ever wrote that, so it is not ours to guess at.
        None => return Err(fail(FormatError::Corrupt)),
        Some(v) => u32::from_be_bytes(
            v.as_slice()
                .try_into()
                .map_err(|_| fail(FormatError::Corrupt))?,
        ),
    };
    match found {
        FORMAT_VERSION => Ok(()),
        FORMAT_OPENRAFT_09 => {
            verify_v1(db).map_err(fail)?;
            tracing::info!(
                from = FORMAT_OPENRAFT_09,
                to = FORMAT_VERSION,
                "upgraded the on-disk format (every openraft record read back unchanged)"
            );
            write_marker(db)
        }
        found => Err(fail(FormatError::Version { found })),
    }
}

/// True if the directory holds no log and no metadata yet (a first start).
fn is_empty(db: &DB) -> Result<bool> {
    for family in [CF_META, CF_LOG] {
        if db
            .iterator_cf(cf(db, family)?, IteratorMode::Start)
            .next()
            .is_some()
        {
            return Ok(false);
        }
    }
    Ok(true)
}

fn write_marker(db: &DB) -> Result<()> {
    let mut wb = WriteBatch::default();
    wb.put_cf(cf(db, CF_META)?, K_FORMAT, FORMAT_VERSION.to_be_bytes());
    let mut opts = WriteOptions::default();
    opts.set_sync(true);
    db.write_opt(wb, &opts).map_err(write_err)
}

/// Decodes `bytes` as `T` and encodes it again; the record must come back unchanged.
fn same_bytes<T: Serialize + DeserializeOwned>(
    record: impl Fn() -> String,
    bytes: &[u8],
) -> Result<(), FormatError> {
    let unreadable = |why: String| FormatError::Unreadable {
        record: record(),
        why,
    };
    let value: T = dec(bytes).map_err(|e| unreadable(e.to_string()))?;
    let again = enc(&value).map_err(|e| unreadable(e.to_string()))?;
    if again != bytes {
        return Err(unreadable(format!(
            "{} bytes re-encode as {} different bytes",
            bytes.len(),
            again.len()
        )));
    }
    Ok(())
}

/// Every record of a version-1 directory that holds openraft types.
fn verify_v1(db: &DB) -> Result<(), FormatError> {
    let io = |e: io::Error| FormatError::Unreadable {
        record: "(database)".into(),
        why: e.to_string(),
    };
    let meta = cf(db, CF_META).map_err(io)?;
    let get = |key: &[u8]| db.get_cf(meta, key).map_err(read_err).map_err(io);
    if let Some(b) = get(K_VOTE)? {
        same_bytes::<Vote>(|| "meta/vote".into(), &b)?;
    }
    if let Some(b) = get(K_COMMITTED)? {
        same_bytes::<Option<LogId>>(|| "meta/committed".into(), &b)?;
    }
    if let Some(b) = get(K_PURGED)? {
        same_bytes::<Option<LogId>>(|| "meta/last_purged".into(), &b)?;
    }
    if let Some(b) = get(K_APPLIED)? {
        same_bytes::<AppliedMeta>(|| "meta/applied".into(), &b)?;
    }
    for item in db.iterator_cf(cf(db, CF_LOG).map_err(io)?, IteratorMode::Start) {
        let (k, v) = item.map_err(read_err).map_err(io)?;
        let index = super::schema::decode_u64(&k).unwrap_or(u64::MAX);
        same_bytes::<Entry>(|| format!("log/{index}"), &v)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::store::schema::open_db;

    /// The data directory written by the release on openraft 0.9 (tests/it/upgrade.rs).
    fn fixture() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/format1-datadir")
    }

    fn copy_of_fixture() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for entry in std::fs::read_dir(fixture()).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
        }
        dir
    }

    /// The database as it is, without the format check.
    fn raw(dir: &Path) -> DB {
        let cfs = DB::list_cf(&rocksdb::Options::default(), dir).unwrap();
        DB::open_cf(&rocksdb::Options::default(), dir, cfs).unwrap()
    }

    fn marker(dir: &Path) -> u32 {
        let db = raw(dir);
        let v = db
            .get_cf(cf(&db, CF_META).unwrap(), K_FORMAT)
            .unwrap()
            .unwrap();
        u32::from_be_bytes(v.as_slice().try_into().unwrap())
    }

    #[test]
    fn the_format_1_fixture_reads_back_unchanged_and_moves_to_format_2() {
        let dir = copy_of_fixture();
        assert_eq!(marker(dir.path()), FORMAT_OPENRAFT_09);
        {
            let db = raw(dir.path());
            verify_v1(&db).expect("every openraft record reads back unchanged");
            let log = cf(&db, CF_LOG).unwrap();
            assert!(
                db.iterator_cf(log, IteratorMode::Start).count() > 0,
                "the fixture has log entries to check"
            );
            let meta = cf(&db, CF_META).unwrap();
            for key in [K_VOTE, K_PURGED, K_APPLIED] {
                assert!(
                    db.get_cf(meta, key).unwrap().is_some(),
                    "fixture lacks {key:?}"
                );
            }
        }
        drop(open_db(dir.path()).unwrap());
        assert_eq!(marker(dir.path()), FORMAT_VERSION);
    }

    #[test]
    fn a_format_1_record_that_does_not_read_back_is_refused_and_left_untouched() {
        let dir = copy_of_fixture();
        let garbage = [0xffu8; 3];
        {
            let db = raw(dir.path());
            db.put_cf(cf(&db, CF_META).unwrap(), K_VOTE, garbage)
                .unwrap();
        }
        let err = open_db(dir.path()).err().unwrap().to_string();
        for part in [
            "cannot upgrade",
            "format 1 (openraft 0.9) to 2 (openraft 0.10)",
            "meta/vote",
            "left untouched",
        ] {
            assert!(err.contains(part), "{part:?} missing from: {err}");
        }
        assert_eq!(marker(dir.path()), FORMAT_OPENRAFT_09);
        let db = raw(dir.path());
        let vote = db.get_cf(cf(&db, CF_META).unwrap(), K_VOTE).unwrap();
        assert_eq!(
            vote.as_deref(),
            Some(&garbage[..]),
            "the record was changed"
        );
    }

    #[test]
    fn a_record_with_trailing_bytes_does_not_count_as_the_same() {
        let vote = enc(&Some(crate::raft_types::log_id(3, 1, 9))).unwrap();
        let mut longer = vote.clone();
        longer.push(0);
        assert!(same_bytes::<Option<LogId>>(|| "x".into(), &vote).is_ok());
        assert!(same_bytes::<Option<LogId>>(|| "x".into(), &longer).is_err());
    }

    #[test]
    fn data_without_a_marker_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        drop(open_db(dir.path()).unwrap());
        {
            let db = raw(dir.path());
            let meta = cf(&db, CF_META).unwrap();
            db.put_cf(meta, K_VOTE, b"x").unwrap();
            db.delete_cf(meta, K_FORMAT).unwrap();
        }
        let err = open_db(dir.path()).err().unwrap().to_string();
        assert!(err.contains("corrupt format_version marker"), "{err}");
    }
}
