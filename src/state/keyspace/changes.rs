//! What apply changed: the changes written with the batch ([`Changes`]), and a script's
//! undo journal.

use std::collections::{BTreeMap, VecDeque};

use bytes::Bytes;

use super::{Entry, Keyspace};
use crate::state::locks::LockMeta;

/// Changes since the last [`Keyspace::take_changes`], to be written in one WriteBatch; `R` is
/// the record the caller made of each written entry (the store encodes it).
#[derive(Debug, Default)]
pub struct Changes<R> {
    /// Keys to write (`Some`) or delete (`None`).
    pub entries: Vec<(Bytes, Option<R>)>,
    /// Fences to write.
    pub fences: Vec<(Bytes, u64)>,
    /// Cached scripts to write (`Some` body) or delete (`None`), by SHA1 hex.
    pub scripts: Vec<(String, Option<Bytes>)>,
    /// The script instruction budget, if it changed.
    pub script_budget: Option<u64>,
    /// Lock queues and delays to write (`Some`) or delete (`None`).
    pub locks: Vec<(Bytes, Option<LockMeta>)>,
    /// ACL users to write (`Some`) or delete (`None`), by name.
    pub users: Vec<(String, Option<crate::state::acl::User>)>,
    /// Blocked-pop queues to write (`Some`) or delete (`None`), by key.
    pub pops: Vec<(Bytes, Option<VecDeque<crate::state::popq::PopWaiter>>)>,
}

/// Undo information for one script run: the first old value of everything it touched.
#[derive(Clone, Debug, Default)]
pub(super) struct Journal {
    pub(super) entries: BTreeMap<Bytes, Option<Entry>>,
    pub(super) fences: BTreeMap<Bytes, Option<u64>>,
    pub(super) locks: BTreeMap<Bytes, Option<LockMeta>>,
    pub(super) revision: u64,
    pub(super) events: usize,
}

impl Keyspace {
    /// Takes the keys and fences changed since the last call.
    pub fn take_changes<R>(&mut self, mut record: impl FnMut(&Entry) -> R) -> Changes<R> {
        let (scripts, script_budget) = self.scripts.take_changes();
        // `record` sees the stored entry in place: a clone of its value would give the stored
        // buffer a shared header for life (see `raw_insert`).
        let entries = std::mem::take(&mut self.dirty).into_iter().map(|k| {
            let e = self.entries.get(&k).map(&mut record);
            (k, e)
        });
        let fences = std::mem::take(&mut self.dirty_fences).into_iter().map(|k| {
            let f = self.fence(&k);
            (k, f)
        });
        let entries = entries.collect();
        let fences = fences.collect();
        let locks = std::mem::take(&mut self.dirty_locks)
            .into_iter()
            .map(|k| {
                let m = self.locks.get(&k).cloned();
                (k, m)
            })
            .collect();
        Changes {
            entries,
            fences,
            scripts,
            script_budget,
            locks,
            users: self.acl.take_changes(),
            pops: std::mem::take(&mut self.dirty_popq)
                .into_iter()
                .map(|k| {
                    let q = self.popq.get(&k).cloned();
                    (k, q)
                })
                .collect(),
        }
    }

    /// Starts recording undo information (a script is about to run).
    pub fn begin_undo(&mut self) {
        self.journal = Some(Journal {
            revision: self.revision,
            events: self.events.len(),
            ..Default::default()
        });
    }

    /// Stops recording and keeps every change.
    pub fn commit_undo(&mut self) {
        self.journal = None;
    }

    /// Stops recording and restores everything changed since [`Keyspace::begin_undo`]:
    /// entries, fences, the revision and the recorded events (a budget abort leaves no trace).
    pub fn rollback_undo(&mut self) {
        let Some(j) = self.journal.take() else {
            return;
        };
        for (key, old) in j.entries {
            match old {
                Some(entry) => self.raw_insert(key, entry),
                None => {
                    if let Some(e) = self.entries.remove(&key) {
                        self.volatile -= usize::from(e.expire_at.is_some());
                    }
                    self.dirty.insert(key);
                }
            }
        }
        for (key, old) in j.fences {
            match old {
                Some(f) => self.fences.insert(key.clone(), f),
                None => self.fences.remove(&key),
            };
            self.dirty_fences.insert(key);
        }
        for (key, old) in j.locks {
            match old {
                Some(m) => self.locks.insert(key.clone(), m),
                None => self.locks.remove(&key),
            };
            self.dirty_locks.insert(key);
        }
        self.revision = j.revision;
        self.events.truncate(j.events);
    }

    /// Records the current entry of `key` in the journal, the first time it is touched.
    pub(super) fn note(&mut self, key: &Bytes) {
        if let Some(j) = &mut self.journal {
            if !j.entries.contains_key(key) {
                j.entries
                    .insert(key.clone(), self.entries.get(key).cloned());
            }
        }
    }

    /// Forgets pending changes (after a full rewrite such as a snapshot install).
    pub fn clear_changes(&mut self) {
        self.dirty.clear();
        self.dirty_fences.clear();
        self.dirty_locks.clear();
        self.dirty_popq.clear();
        self.ready.clear();
        self.scripts.take_changes();
        self.acl.take_changes();
    }
}
