//! The replicated set of users (kept in the [`Keyspace`]), with the changes apply has not
//! persisted yet, and the ACL file format.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;

use super::{Catalog, RuleError, User, DEFAULT_USER};
use crate::state::Keyspace;

/// The replicated users and their pending changes.
#[derive(Clone, Debug, Default)]
pub struct Users {
    users: BTreeMap<String, User>,
    dirty: BTreeSet<String>,
    /// Advanced by every change, so that a node can tell that its view is out of date.
    generation: u64,
}

/// The built-in `default` user, shared (see [`Users::get_ref`]).
static BUILTIN_DEFAULT: std::sync::LazyLock<User> = std::sync::LazyLock::new(User::default_user);

impl Users {
    /// The user, or the built-in `default` while it was never changed. Borrowed: the
    /// permission check of every command looks the user up.
    pub fn get_ref(&self, name: &str) -> Option<&User> {
        match self.users.get(name) {
            Some(u) => Some(u),
            None if name == DEFAULT_USER => Some(&BUILTIN_DEFAULT),
            None => None,
        }
    }

    /// [`Users::get_ref`], owned.
    pub fn get(&self, name: &str) -> Option<User> {
        self.get_ref(name).cloned()
    }

    /// Every user name, sorted (`default` included).
    pub fn names(&self) -> Vec<String> {
        let mut names: BTreeSet<String> = self.users.keys().cloned().collect();
        names.insert(DEFAULT_USER.into());
        names.into_iter().collect()
    }

    /// The stored users (the built-in `default` is not stored until it changes).
    pub fn stored(&self) -> &BTreeMap<String, User> {
        &self.users
    }

    /// How many changes were applied since this node started.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Applies `rules` to the user `name` (created if missing) atomically: on an error,
    /// nothing changes. Returns the rule that failed and why.
    pub fn set_user(
        &mut self,
        name: &str,
        rules: &[Bytes],
        catalog: &dyn Catalog,
    ) -> Result<(), (Bytes, RuleError)> {
        let mut user = self.get(name).unwrap_or_default();
        for r in rules {
            user.apply_rule(r, catalog).map_err(|e| (r.clone(), e))?;
        }
        self.put(name.to_string(), user);
        Ok(())
    }

    fn put(&mut self, name: String, user: User) {
        self.dirty.insert(name.clone());
        self.users.insert(name, user);
        self.generation += 1;
    }

    /// Deletes users; returns how many existed. `default` is never deleted (the caller
    /// refuses it).
    pub fn delete(&mut self, names: &[String]) -> usize {
        let mut n = 0;
        for name in names {
            if name != DEFAULT_USER && self.users.remove(name).is_some() {
                self.dirty.insert(name.clone());
                n += 1;
            }
        }
        if n > 0 {
            self.generation += 1;
        }
        n
    }

    /// Replaces every user (ACL LOAD). `default` returns to the built-in one unless given.
    pub fn replace_all(&mut self, users: BTreeMap<String, User>) {
        self.dirty.extend(self.users.keys().cloned());
        self.dirty.extend(users.keys().cloned());
        self.users = users;
        self.generation += 1;
    }

    /// Makes this (new) set of users count on from `previous`, the generation of the users it
    /// replaces (a snapshot install), so that a node's generations only ever rise.
    pub fn continue_from(&mut self, previous: u64) {
        self.generation = self.generation.max(previous) + 1;
    }

    /// Restores persisted users (on open, or from a snapshot image).
    pub fn restore(&mut self, users: BTreeMap<String, User>) {
        self.users = users;
        self.generation += 1;
    }

    /// Takes the users to write (`Some`) or delete (`None`) since the last call.
    pub fn take_changes(&mut self) -> Vec<(String, Option<User>)> {
        std::mem::take(&mut self.dirty)
            .into_iter()
            .map(|n| {
                let u = self.users.get(&n).cloned();
                (n, u)
            })
            .collect()
    }
}

impl Keyspace {
    /// The replicated ACL users.
    pub fn users(&self) -> &Users {
        &self.acl
    }

    /// The replicated ACL users, for apply.
    pub fn users_mut(&mut self) -> &mut Users {
        &mut self.acl
    }
}

/// Parses an ACL file: one `user <name> <rule> ...` line per user; blank lines and lines
/// starting with `#` are skipped. Errors name the line, as Redis's do.
pub fn parse_file(text: &str, catalog: &dyn Catalog) -> Result<BTreeMap<String, User>, String> {
    let mut users = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let words: Vec<&str> = line.split_ascii_whitespace().collect();
        if words.len() < 2 || words[0] != "user" {
            return Err(format!("/{}: line should start with user keyword", i + 1));
        }
        let name = words[1].to_string();
        if users.contains_key(&name) {
            return Err(format!("{}: Duplicate user '{name}' found", i + 1));
        }
        let mut user = if name == DEFAULT_USER {
            User::default_user()
        } else {
            User::new()
        };
        // As in Redis, a file line describes the whole user: it starts from nothing.
        user.apply_rule(b"reset", catalog)
            .map_err(|e| format!("{}: {e}", i + 1))?;
        user.sanitize = None;
        for w in &words[2..] {
            user.apply_rule(w.as_bytes(), catalog)
                .map_err(|e| format!("{}: Error in user declaration '{w}': {e}", i + 1))?;
        }
        users.insert(name, user);
    }
    Ok(users)
}
