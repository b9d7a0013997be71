//! ACL users as in Redis 7: the user model, the `ACL SETUSER` rule language, the rule-string
//! form of `ACL LIST`, and the permission check. Users are replicated state (they live in the
//! [`Keyspace`]), so every replica, and every script run inside apply, sees the same users.
//!
//! Everything here is a pure function of its inputs. What the command table knows (which
//! commands, subcommands and categories exist, and a command's categories) comes in through
//! [`Catalog`] and [`Subject`], so this module stays a leaf.
//!
//! Command permissions are kept as Redis 7.2 keeps them: a base (`+@all` or `-@all`) and the
//! rules applied since, in order, a rule replacing an earlier one for the same command or
//! category. A command is allowed if the last rule that matches it allows it (the base if
//! none does), which is what Redis's per-command bitmap computes for a fixed command table.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::pattern;

mod users;

pub use users::{parse_file, Users};

/// The user every connection starts as, and the only one that cannot be deleted.
pub const DEFAULT_USER: &str = "default";

/// SHA-256 of a password as lower-case hex: how passwords are stored.
pub fn hash_password(pass: &[u8]) -> String {
    hex::encode(Sha256::digest(pass))
}

/// Compares two byte strings in time that depends only on their lengths (the stored hashes
/// all have the same length), so that a password check leaks nothing through its timing.
pub fn fixed_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// One key pattern with the access it grants (`~p` grants both, `%R~p` reads, `%W~p` writes).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyPattern {
    /// The glob.
    pub pattern: Bytes,
    /// Reads of the key's value are allowed.
    pub read: bool,
    /// Writes to the key are allowed.
    pub write: bool,
}

/// One user. Persisted (postcard) in the `acl` column family and in snapshots: fields are
/// only ever appended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    /// `on`: the user may authenticate.
    pub enabled: bool,
    /// `nopass`: any password authenticates.
    pub nopass: bool,
    /// `sanitize-payload` (Some(true)) or `skip-sanitize-payload` (Some(false)): shown as
    /// flags; Palisade has no RESTORE, so they change nothing else.
    pub sanitize: Option<bool>,
    /// SHA-256 hex of each password, in the order they were added.
    pub passwords: Vec<String>,
    /// Key patterns, in the order they were added.
    pub keys: Vec<KeyPattern>,
    /// Channel patterns (`*` alone is `allchannels`).
    pub channels: Vec<Bytes>,
    /// The base of the command rules: `+@all` (true) or `-@all`.
    pub all_commands: bool,
    /// The command rules since the base, as written (`+get`, `-@write`, `+config|get`),
    /// lower-case.
    pub rules: Vec<String>,
}

impl User {
    /// A new user as `ACL SETUSER name` creates it: off, no passwords, no keys, no channels,
    /// no commands.
    pub fn new() -> User {
        User {
            enabled: false,
            nopass: false,
            sanitize: None,
            passwords: Vec::new(),
            keys: Vec::new(),
            channels: Vec::new(),
            all_commands: false,
            rules: Vec::new(),
        }
    }

    /// The built-in `default` user: on, nopass, every key, channel and command.
    pub fn default_user() -> User {
        User {
            enabled: true,
            nopass: true,
            keys: vec![KeyPattern {
                pattern: Bytes::from_static(b"*"),
                read: true,
                write: true,
            }],
            channels: vec![Bytes::from_static(b"*")],
            all_commands: true,
            ..User::new()
        }
    }

    fn all_keys(&self) -> bool {
        self.keys
            .iter()
            .any(|k| k.read && k.write && k.pattern.as_ref() == b"*")
    }

    fn all_channels(&self) -> bool {
        self.channels.iter().any(|c| c.as_ref() == b"*")
    }

    /// True if `pass` authenticates this user (an enabled user only).
    pub fn password_ok(&self, pass: &[u8]) -> bool {
        if !self.enabled {
            return false;
        }
        if self.nopass {
            return true;
        }
        let h = hash_password(pass);
        // Every stored hash is compared, so the time does not tell which one matched.
        self.passwords.iter().fold(false, |ok, p| {
            fixed_time_eq(p.as_bytes(), h.as_bytes()) | ok
        })
    }

    /// Applies one `ACL SETUSER` rule.
    pub fn apply_rule(&mut self, rule: &[u8], catalog: &dyn Catalog) -> Result<(), RuleError> {
        let text = String::from_utf8_lossy(rule);
        let lower = text.to_ascii_lowercase();
        match lower.as_str() {
            "on" => self.enabled = true,
            "off" => self.enabled = false,
            "nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            "resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            "allkeys" => self.set_all_keys(),
            "resetkeys" => self.keys.clear(),
            "allchannels" => self.channels = vec![Bytes::from_static(b"*")],
            "resetchannels" => self.channels.clear(),
            "allcommands" | "+@all" => {
                self.all_commands = true;
                self.rules.clear();
            }
            "nocommands" | "-@all" => {
                self.all_commands = false;
                self.rules.clear();
            }
            "sanitize-payload" => self.sanitize = Some(true),
            "skip-sanitize-payload" => self.sanitize = Some(false),
            "reset" => {
                *self = User {
                    sanitize: Some(true),
                    ..User::new()
                }
            }
            _ => return self.apply_valued(rule, &lower, catalog),
        }
        Ok(())
    }

    /// The rules that carry a value: passwords, hashes, patterns and command rules.
    fn apply_valued(
        &mut self,
        rule: &[u8],
        lower: &str,
        catalog: &dyn Catalog,
    ) -> Result<(), RuleError> {
        let rest = Bytes::copy_from_slice(&rule[1..]);
        match rule[0] {
            b'>' => self.add_hash(hash_password(&rest)),
            b'<' => self.remove_hash(&hash_password(&rest))?,
            b'#' => self.add_hash(valid_hash(&rest)?),
            b'!' => self.remove_hash(&valid_hash(&rest)?)?,
            b'~' => self.add_key(rest, true, true)?,
            b'%' => {
                let (read, write, pat) = access_prefix(&rest)?;
                self.add_key(pat, read, write)?;
            }
            b'&' => self.add_channel(rest)?,
            b'+' | b'-' => self.add_command_rule(rule[0] == b'+', &lower[1..], catalog)?,
            _ => return Err(RuleError::Syntax),
        }
        Ok(())
    }

    fn add_hash(&mut self, h: String) {
        self.nopass = false;
        if !self.passwords.contains(&h) {
            self.passwords.push(h);
        }
    }

    fn remove_hash(&mut self, h: &str) -> Result<(), RuleError> {
        let before = self.passwords.len();
        self.passwords.retain(|p| p != h);
        if self.passwords.len() == before {
            return Err(RuleError::NoSuchPassword);
        }
        Ok(())
    }

    fn set_all_keys(&mut self) {
        self.keys = vec![KeyPattern {
            pattern: Bytes::from_static(b"*"),
            read: true,
            write: true,
        }];
    }

    fn add_key(&mut self, pattern: Bytes, read: bool, write: bool) -> Result<(), RuleError> {
        if self.all_keys() {
            return Err(RuleError::AfterAllKeys);
        }
        if read && write && pattern.as_ref() == b"*" {
            self.set_all_keys();
            return Ok(());
        }
        match self.keys.iter_mut().find(|k| k.pattern == pattern) {
            // Redis merges the access of a repeated pattern.
            Some(k) => {
                k.read |= read;
                k.write |= write;
            }
            None => self.keys.push(KeyPattern {
                pattern,
                read,
                write,
            }),
        }
        Ok(())
    }

    fn add_channel(&mut self, pattern: Bytes) -> Result<(), RuleError> {
        if self.all_channels() {
            return Err(RuleError::AfterAllChannels);
        }
        if pattern.as_ref() == b"*" {
            self.channels = vec![pattern];
        } else if !self.channels.contains(&pattern) {
            self.channels.push(pattern);
        }
        Ok(())
    }

    fn add_command_rule(
        &mut self,
        allow: bool,
        target: &str,
        catalog: &dyn Catalog,
    ) -> Result<(), RuleError> {
        if let Some(cat) = target.strip_prefix('@') {
            if !catalog.has_category(cat) {
                return Err(RuleError::Unknown);
            }
        } else if let Some((cmd, sub)) = target.split_once('|') {
            if !catalog.has_command(cmd) || sub.is_empty() || sub.contains('|') {
                return Err(RuleError::Unknown);
            }
            match catalog.subcommands(cmd) {
                Some(subs) if !subs.contains(&sub) => return Err(RuleError::Unknown),
                // A first-argument rule (a command without subcommands) can only allow.
                None if !allow => return Err(RuleError::Unknown),
                _ => {}
            }
        } else if !catalog.has_command(target) {
            return Err(RuleError::Unknown);
        }
        // A rule replaces an earlier one for the same target; a whole-command rule also
        // replaces the rules for its subcommands.
        let sub_prefix = format!("{target}|");
        self.rules.retain(|r| {
            let t = &r[1..];
            t != target && !t.starts_with(&sub_prefix)
        });
        self.rules
            .push(format!("{}{target}", if allow { '+' } else { '-' }));
        Ok(())
    }

    /// The command rules as `ACL GETUSER` and `ACL LIST` show them.
    pub fn command_rules(&self) -> String {
        let mut s = String::from(if self.all_commands { "+@all" } else { "-@all" });
        for r in &self.rules {
            s.push(' ');
            s.push_str(r);
        }
        s
    }

    /// The key patterns as `ACL GETUSER` shows them (`~p`, `%R~p`, `%W~p`).
    pub fn key_rules(&self) -> Vec<String> {
        self.keys
            .iter()
            .map(|k| {
                let access = match (k.read, k.write) {
                    (true, false) => "%R",
                    (false, true) => "%W",
                    _ => "",
                };
                format!("{access}~{}", String::from_utf8_lossy(&k.pattern))
            })
            .collect()
    }

    /// The channel patterns as `ACL GETUSER` shows them (`&p`).
    pub fn channel_rules(&self) -> Vec<String> {
        self.channels
            .iter()
            .map(|c| format!("&{}", String::from_utf8_lossy(c)))
            .collect()
    }

    /// The flags `ACL GETUSER` lists.
    pub fn flags(&self) -> Vec<&'static str> {
        let mut f = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            f.push("nopass");
        }
        match self.sanitize {
            Some(true) => f.push("sanitize-payload"),
            Some(false) => f.push("skip-sanitize-payload"),
            None => {}
        }
        f
    }

    /// The user as one `ACL LIST` line (also a line of an ACL file).
    pub fn describe(&self, name: &str) -> String {
        let mut parts = vec![format!("user {name}")];
        parts.extend(self.flags().into_iter().map(String::from));
        parts.extend(self.passwords.iter().map(|p| format!("#{p}")));
        parts.extend(self.key_rules());
        if !self.all_channels() {
            parts.push("resetchannels".into());
        }
        parts.extend(self.channel_rules());
        parts.push(self.command_rules());
        parts.join(" ")
    }

    /// Checks one command against this user's permissions.
    pub fn check(&self, s: &Subject<'_>) -> Result<(), Denied> {
        if !self.command_allowed(s) {
            return Err(Denied::Command);
        }
        for (i, (key, need)) in s.keys.iter().enumerate() {
            if !self.key_allowed(key, *need) {
                return Err(Denied::Key(i));
            }
        }
        for (i, (channel, is_pattern)) in s.channels.iter().enumerate() {
            if !self.channel_allowed(channel, *is_pattern) {
                return Err(Denied::Channel(i));
            }
        }
        Ok(())
    }

    fn command_allowed(&self, s: &Subject<'_>) -> bool {
        let mut allowed = self.all_commands;
        for rule in &self.rules {
            let (allow, target) = (rule.starts_with('+'), &rule[1..]);
            let hit = if let Some(cat) = target.strip_prefix('@') {
                s.categories.contains(&cat)
            } else if let Some((cmd, sub)) = target.split_once('|') {
                cmd == s.name && s.sub.is_some_and(|x| x.eq_ignore_ascii_case(sub))
            } else {
                target == s.name
            };
            if hit {
                allowed = allow;
            }
        }
        allowed
    }

    fn key_allowed(&self, key: &[u8], need: Access) -> bool {
        self.keys.iter().any(|k| {
            (!need.read || k.read) && (!need.write || k.write) && pattern::matches(&k.pattern, key)
        })
    }

    fn channel_allowed(&self, channel: &[u8], is_pattern: bool) -> bool {
        self.channels.iter().any(|c| {
            c.as_ref() == b"*"
                || if is_pattern {
                    // A pattern subscription must name one of the user's patterns exactly.
                    c.as_ref() == channel
                } else {
                    pattern::matches(c, channel)
                }
        })
    }
}

impl Default for User {
    fn default() -> Self {
        User::new()
    }
}

fn valid_hash(h: &[u8]) -> Result<String, RuleError> {
    let ok = h.len() == 64 && h.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'));
    if !ok {
        return Err(RuleError::BadHash);
    }
    Ok(String::from_utf8_lossy(h).into_owned())
}

/// `R~p`, `W~p`, `RW~p` (after the `%`): the access and the pattern.
fn access_prefix(rest: &Bytes) -> Result<(bool, bool, Bytes), RuleError> {
    let tilde = rest
        .iter()
        .position(|&c| c == b'~')
        .ok_or(RuleError::Syntax)?;
    let (mut read, mut write) = (false, false);
    for c in &rest[..tilde] {
        match c.to_ascii_uppercase() {
            b'R' => read = true,
            b'W' => write = true,
            _ => return Err(RuleError::Syntax),
        }
    }
    if !read && !write {
        return Err(RuleError::Syntax);
    }
    Ok((read, write, rest.slice(tilde + 1..)))
}

/// Why a rule was refused (the texts are Redis's, added in `cmd::acl`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    /// Not a rule.
    #[error("Syntax error")]
    Syntax,
    /// An unknown command, subcommand or category.
    #[error("Unknown command or category name in ACL")]
    Unknown,
    /// A `#` or `!` hash that is not 64 lower-case hex digits.
    #[error("The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters")]
    BadHash,
    /// `<pass` or `!hash` of a password the user does not have.
    #[error("The password you are trying to remove from the user does not exist")]
    NoSuchPassword,
    /// A key pattern after `allkeys`.
    #[error("Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns")]
    AfterAllKeys,
    /// A channel pattern after `allchannels`.
    #[error("Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels")]
    AfterAllChannels,
}

/// What the command table tells the rule parser.
pub trait Catalog {
    /// True if the command exists (lower-case name).
    fn has_command(&self, name: &str) -> bool;
    /// The subcommands of a container command (None: it has none, and `+cmd|arg` is a
    /// first-argument rule).
    fn subcommands(&self, name: &str) -> Option<&'static [&'static str]>;
    /// True if the category exists (without `@`).
    fn has_category(&self, name: &str) -> bool;
}

/// The access a command needs to one of its keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    /// It reads the key's value.
    pub read: bool,
    /// It changes the key.
    pub write: bool,
}

/// One command as the permission check sees it.
#[derive(Clone, Debug)]
pub struct Subject<'a> {
    /// The lower-case command name.
    pub name: &'a str,
    /// The first argument (a subcommand, or the first-argument rules' argument).
    pub sub: Option<&'a str>,
    /// The command's (or subcommand's) categories, without `@`.
    pub categories: Vec<&'static str>,
    /// The keys it touches, with the access each needs.
    pub keys: Vec<(&'a [u8], Access)>,
    /// The channels it names, and whether each is a pattern (PSUBSCRIBE).
    pub channels: Vec<(&'a [u8], bool)>,
}

/// Why a command was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denied {
    /// The command (or subcommand) is not allowed.
    Command,
    /// The key at this index of [`Subject::keys`] is not allowed.
    Key(usize),
    /// The channel at this index of [`Subject::channels`] is not allowed.
    Channel(usize),
}

#[cfg(test)]
mod tests;
