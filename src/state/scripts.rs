//! The replicated script cache: SCRIPT LOAD and EVAL bodies by SHA1, plus the instruction
//! budget every replica runs scripts with. Both are replicated state, so a script loaded on
//! one leader is still known after a failover, and every replica aborts a runaway script at
//! the same instruction.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use sha1::{Digest, Sha1};

use super::Keyspace;

/// SHA1 of `data` as lower-case hex: a script's id in the cache (also `redis.sha1hex`).
pub fn sha1_hex(data: &[u8]) -> String {
    hex::encode(Sha1::digest(data))
}

/// The default instruction budget of one script (Lua VM instructions plus a fixed charge
/// per `redis.call`). About 50-100 ms of pure Lua on the reference hardware.
pub const DEFAULT_SCRIPT_BUDGET: u64 = 20_000_000;

/// The cache and its pending changes.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ScriptCache {
    bodies: BTreeMap<String, Bytes>,
    /// 0 means [`DEFAULT_SCRIPT_BUDGET`].
    budget: u64,
    #[serde(skip)]
    dirty: BTreeSet<String>,
    #[serde(skip)]
    budget_dirty: bool,
}

impl ScriptCache {
    /// Takes the pending changes (scripts to write or delete, and a changed budget).
    pub fn take_changes(&mut self) -> (Vec<(String, Option<Bytes>)>, Option<u64>) {
        let scripts = std::mem::take(&mut self.dirty)
            .into_iter()
            .map(|sha| {
                let body = self.bodies.get(&sha).cloned();
                (sha, body)
            })
            .collect();
        let budget = std::mem::take(&mut self.budget_dirty).then_some(self.budget);
        (scripts, budget)
    }
}

impl Keyspace {
    /// Restores the persisted script cache and budget (on open).
    pub fn set_scripts(&mut self, bodies: BTreeMap<String, Bytes>, budget: u64) {
        self.scripts.bodies = bodies;
        self.scripts.budget = budget;
    }

    /// The cached body of `sha` (lower-case hex).
    pub fn script(&self, sha: &str) -> Option<&Bytes> {
        self.scripts.bodies.get(sha)
    }

    /// Caches a script body under its SHA1.
    pub fn cache_script(&mut self, sha: String, body: Bytes) {
        if !self.scripts.bodies.contains_key(&sha) {
            self.scripts.dirty.insert(sha.clone());
            self.scripts.bodies.insert(sha, body);
        }
    }

    /// Empties the cache (SCRIPT FLUSH).
    pub fn flush_scripts(&mut self) {
        let all = std::mem::take(&mut self.scripts.bodies);
        self.scripts.dirty.extend(all.into_keys());
    }

    /// Every cached script (for snapshots and full rewrites).
    pub fn scripts(&self) -> &BTreeMap<String, Bytes> {
        &self.scripts.bodies
    }

    /// The instruction budget scripts run with.
    pub fn script_budget(&self) -> u64 {
        match self.scripts.budget {
            0 => DEFAULT_SCRIPT_BUDGET,
            n => n,
        }
    }

    /// The stored budget setting (0 = default), for persistence.
    pub fn script_budget_setting(&self) -> u64 {
        self.scripts.budget
    }

    /// Changes the budget (0 restores the default).
    pub fn set_script_budget(&mut self, budget: u64) {
        self.scripts.budget = budget;
        self.scripts.budget_dirty = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_changes_are_tracked() {
        let mut ks = Keyspace::default();
        ks.cache_script("ab".into(), Bytes::from_static(b"return 1"));
        let (s, b) = ks.scripts.take_changes();
        assert_eq!(
            s,
            vec![("ab".to_string(), Some(Bytes::from_static(b"return 1")))]
        );
        assert_eq!(b, None);
        ks.flush_scripts();
        ks.set_script_budget(5);
        let (s, b) = ks.scripts.take_changes();
        assert_eq!(s, vec![("ab".to_string(), None)]);
        assert_eq!(b, Some(5));
        assert_eq!(ks.script_budget(), 5);
        assert!(ks.script("ab").is_none());
    }
}
