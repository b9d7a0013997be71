//! `ACL LOG`: this node's recent refusals (denied commands, keys, channels and failed
//! authentications), newest first, with Redis 7's fields. Like Redis's, the log is local to
//! the node that refused, and a refusal like a recent one only raises that entry's count.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Instant;

use crate::resp::Reply;

/// Entries kept (Redis's `acllog-max-len` default).
pub const MAX_LEN: usize = 128;
/// A refusal within this long of a like entry is counted in it (Redis: 60 s).
const GROUP_WINDOW_MS: u128 = 60_000;

/// Why an entry was logged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// A command the user may not run.
    Command,
    /// A key the user may not access.
    Key,
    /// A channel the user may not access.
    Channel,
    /// A failed AUTH or HELLO AUTH.
    Auth,
}

impl Reason {
    fn name(self) -> &'static str {
        match self {
            Reason::Command => "command",
            Reason::Key => "key",
            Reason::Channel => "channel",
            Reason::Auth => "auth",
        }
    }
}

/// Where the refused command ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Context {
    /// A client's own command.
    TopLevel,
    /// A command queued inside MULTI.
    Multi,
    /// A `redis.call` of a script.
    Lua,
}

impl Context {
    fn name(self) -> &'static str {
        match self {
            Context::TopLevel => "toplevel",
            Context::Multi => "multi",
            Context::Lua => "lua",
        }
    }
}

/// One refusal, as it is logged.
#[derive(Clone, Debug)]
pub struct Refusal {
    /// Why.
    pub reason: Reason,
    /// Where.
    pub context: Context,
    /// The command, key or channel refused (the command name for `auth`).
    pub object: String,
    /// The user (the attempted one for `auth`).
    pub username: String,
    /// CLIENT INFO of the connection.
    pub client_info: String,
}

struct Entry {
    refusal: Refusal,
    count: u64,
    at: Instant,
}

/// The log.
#[derive(Default)]
pub struct Log {
    entries: Mutex<VecDeque<Entry>>,
}

impl Log {
    /// Records a refusal.
    pub fn add(&self, r: Refusal) {
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        let like = entries.iter_mut().find(|e| {
            e.refusal.reason == r.reason
                && e.refusal.context == r.context
                && e.refusal.object == r.object
                && e.refusal.username == r.username
                && e.at.elapsed().as_millis() < GROUP_WINDOW_MS
        });
        if let Some(e) = like {
            e.count += 1;
            e.at = Instant::now();
            e.refusal.client_info = r.client_info;
            return;
        }
        entries.push_front(Entry {
            refusal: r,
            count: 1,
            at: Instant::now(),
        });
        entries.truncate(MAX_LEN);
    }

    /// ACL LOG RESET.
    pub fn reset(&self) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.clear();
        }
    }

    /// ACL LOG [count]: the newest `count` entries.
    pub fn reply(&self, count: usize) -> Reply {
        let Ok(entries) = self.entries.lock() else {
            return Reply::Array(Vec::new());
        };
        let text = |s: &str| Reply::bulk(s.to_string());
        Reply::Array(
            entries
                .iter()
                .take(count)
                .map(|e| {
                    let age = e.at.elapsed().as_secs_f64();
                    Reply::Map(vec![
                        (text("count"), Reply::Int(e.count as i64)),
                        (text("reason"), text(e.refusal.reason.name())),
                        (text("context"), text(e.refusal.context.name())),
                        (text("object"), text(&e.refusal.object)),
                        (text("username"), text(&e.refusal.username)),
                        (text("age-seconds"), text(&format!("{age:.3}"))),
                        (text("client-info"), text(&e.refusal.client_info)),
                    ])
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(object: &str) -> Refusal {
        Refusal {
            reason: Reason::Key,
            context: Context::TopLevel,
            object: object.into(),
            username: "u".into(),
            client_info: "id=1".into(),
        }
    }

    #[test]
    fn like_refusals_share_an_entry_and_the_newest_comes_first() {
        let log = Log::default();
        log.add(refusal("a"));
        log.add(refusal("a"));
        log.add(refusal("b"));
        let Reply::Array(entries) = log.reply(10) else {
            panic!()
        };
        assert_eq!(entries.len(), 2);
        let Reply::Map(first) = &entries[0] else {
            panic!()
        };
        assert_eq!(first[3].1, Reply::bulk("b"));
        let Reply::Map(second) = &entries[1] else {
            panic!()
        };
        assert_eq!(second[0].1, Reply::Int(2));
        assert_eq!(log.reply(1), Reply::Array(vec![entries[0].clone()]));
        log.reset();
        assert_eq!(log.reply(10), Reply::Array(Vec::new()));
    }
}
