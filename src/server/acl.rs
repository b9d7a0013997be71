//! The server's side of ACLs: this node's view of the replicated users (with `requirepass`
//! applied to `default`, as Redis does), authentication, the leader's check of forwarded
//! commands, and the ACL file (`--aclfile`: loaded at start and by ACL LOAD through the log,
//! written by ACL SAVE).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::Shared;
use crate::cmd::acl::{self, AclLoad};
use crate::cmd::Command;
use crate::resp::Reply;
use crate::state::acl::{hash_password, parse_file, User, Users, DEFAULT_USER};

impl Shared {
    /// This node's applied users (cheap: a shared copy, republished after each change).
    pub fn users(&self) -> Arc<Users> {
        self.acl.borrow().clone()
    }

    /// The user `name` as this node sees it. `requirepass` (flag or CONFIG SET) sets the
    /// `default` user's only password, as in Redis; the replicated users never hold it, so
    /// each node keeps its own `requirepass`, as before ACLs.
    pub fn user(&self, name: &str) -> Option<User> {
        let mut user = self.users().get(name)?;
        if name == DEFAULT_USER {
            if let Some(pass) = self.requirepass() {
                user.nopass = false;
                user.passwords = vec![hash_password(pass.as_bytes())];
            }
        }
        Some(user)
    }

    /// True if `pass` authenticates `name` (an enabled user with that password).
    pub fn authenticate(&self, name: &str, pass: &[u8]) -> bool {
        self.user(name).is_some_and(|u| u.password_ok(pass))
    }

    /// The user a new connection starts as: `default` if it needs no password, else none.
    pub fn initial_user(&self) -> Option<Arc<str>> {
        self.user(DEFAULT_USER)
            .filter(|u| u.enabled && u.nopass)
            .map(|_| Arc::from(DEFAULT_USER))
    }

    /// The leader's check of one forwarded command: None to run it, or the refusal.
    pub fn check_forwarded(&self, user: Option<&str>, cmd: &Command) -> Option<Reply> {
        // The follower's own work (expiry, lock-queue cleanup) carries no user.
        let name = user?;
        let users = self.users();
        let Some(u) = users.get_ref(name) else {
            return Some(Reply::err(format!(
                "NOPERM the user '{name}' of a forwarded command does not exist on the leader"
            )));
        };
        if acl::unrestricted(u) {
            return None;
        }
        acl::check_forwarded(u, name, cmd).err()
    }

    /// Reads `--aclfile` into the users it declares (ACL LOAD, and the start-up load).
    pub fn read_aclfile(&self) -> Result<AclLoad, Reply> {
        let Some(path) = &self.config.aclfile else {
            return Err(Reply::err(acl::NO_ACLFILE));
        };
        let text = std::fs::read_to_string(path).map_err(|e| {
            Reply::err(format!(
                "ERR Error loading ACLs, opening file '{}': {e}",
                path.display()
            ))
        })?;
        let users = parse_file(&text, &acl::TableCatalog)
            .map_err(|e| Reply::err(format!("ERR {}:{e}", path.display())))?;
        Ok(AclLoad {
            users: users.into_iter().collect(),
        })
    }

    /// ACL SAVE: writes every user as an `ACL LIST` line to `--aclfile` (through a temporary
    /// file and a rename, so that a crash never leaves half a file).
    pub fn save_aclfile(&self) -> Reply {
        let Some(path) = &self.config.aclfile else {
            return Reply::err(acl::NO_ACLFILE);
        };
        let users = self.users();
        let mut text = String::new();
        for name in users.names() {
            if let Some(u) = users.get(&name) {
                text.push_str(&u.describe(&name));
                text.push('\n');
            }
        }
        let tmp = path.with_extension("tmp");
        let written = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path));
        match written {
            Ok(()) => Reply::ok(),
            Err(e) => {
                tracing::warn!(error = %e, path = %path.display(), "ACL SAVE failed");
                Reply::err("ERR There was an error trying to save the ACLs. Please check the server logs for more information")
            }
        }
    }
}

/// How long the start-up load of `--aclfile` keeps trying (the cluster may still be
/// electing its first leader).
const LOAD_FOR: Duration = Duration::from_secs(60);

/// Loads `--aclfile` through the log once the cluster can take writes. Each node started
/// with a file proposes it, so the users are those of the file proposed last: give every
/// node the same file.
pub async fn load_at_start(shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    if shared.config.aclfile.is_none() {
        return;
    }
    let load = match shared.read_aclfile() {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(error = ?e, "the ACL file was not loaded");
            return;
        }
    };
    let until = tokio::time::Instant::now() + LOAD_FOR;
    while tokio::time::Instant::now() < until {
        let rx = shared.proposer.submit(Command::AclLoad(load.clone()));
        let reply = tokio::select! {
            r = super::session::await_write_for(rx, &shared) => r,
            _ = stop.changed() => return,
        };
        if !reply.is_error() {
            tracing::info!(users = load.users.len(), "ACL file loaded");
            return;
        }
        tracing::debug!(reply = ?reply, "ACL file not loaded yet; retrying");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tracing::error!("the ACL file could not be loaded: the cluster took no write");
}
