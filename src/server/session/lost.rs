//! `LOCKNOTIFY ON`: the leases a connection took, and the push it gets when one is lost.
//!
//! While it is on, every `LOCK`, `RLOCK`, `SEMACQUIRE` and `MLOCK` this connection sends
//! watches its (key, owner); the grant event that follows (at once or from the queue) names
//! the lease's token. When that lease expires, or is released by anyone but this connection
//! (an `UNLOCK`/`MUNLOCK` sent here stops the watch before it is proposed), the connection
//! gets the RESP3 push `lock_lost <key> <token> <owner> expired|released`. Leases taken
//! inside `MULTI` or scripts are not watched.

use std::collections::HashMap;

use bytes::Bytes;

use crate::cmd::Command;
use crate::resp::Reply;
use crate::state::{Event, LockEventKind};

/// The most (key, owner) pairs one connection watches; beyond it, watches that never saw
/// a grant are dropped first, then new ones are not taken.
const MAX_WATCHED: usize = 4096;

/// The leases a connection watches: (key, owner) -> the token of its grant, once seen.
#[derive(Debug, Default)]
pub struct LostLocks {
    on: bool,
    watched: HashMap<(Bytes, Bytes), Option<u64>>,
}

impl LostLocks {
    /// Turns the watch on or off (off forgets every lease).
    pub fn set(&mut self, on: bool) {
        self.on = on;
        if !on {
            self.watched.clear();
        }
    }

    /// True while on.
    pub fn on(&self) -> bool {
        self.on
    }

    /// Notes a command this connection is about to send: an acquisition starts a watch, a
    /// release by this connection ends it.
    pub fn before(&mut self, cmd: &Command) {
        if !self.on {
            return;
        }
        match cmd {
            Command::Lock(c) => self.watch(&c.key, &c.owner),
            Command::Acquire(c) => self.watch(&c.key, &c.owner),
            Command::Hold(c) => self.watch(&c.key, &c.owner),
            Command::MLock(c) => c.keys.iter().for_each(|k| self.watch(k, &c.owner)),
            Command::Unlock(c) => self.unwatch(&c.key, &c.owner),
            Command::MUnlock(c) => c.keys.iter().for_each(|k| self.unwatch(k, &c.owner)),
            _ => {}
        }
    }

    fn watch(&mut self, key: &Bytes, owner: &Bytes) {
        let pair = (key.clone(), owner.clone());
        if self.watched.contains_key(&pair) {
            return;
        }
        if self.watched.len() >= MAX_WATCHED {
            self.watched.retain(|_, t| t.is_some());
            if self.watched.len() >= MAX_WATCHED {
                return;
            }
        }
        self.watched.insert(pair, None);
    }

    fn unwatch(&mut self, key: &Bytes, owner: &Bytes) {
        self.watched.remove(&(key.clone(), owner.clone()));
    }

    /// The push `event` makes for this connection: a watched lease lost.
    pub fn push(&mut self, event: &Event) -> Option<Reply> {
        let Event::Lock {
            kind,
            key,
            token,
            owner,
            ..
        } = event
        else {
            return None;
        };
        if !self.on {
            return None;
        }
        let pair = (key.clone(), owner.clone());
        let held = self.watched.get_mut(&pair)?;
        let why = match kind {
            LockEventKind::Granted => {
                *held = Some(*token);
                return None;
            }
            LockEventKind::Renewed => return None,
            LockEventKind::Expired => "expired",
            LockEventKind::Released => "released",
        };
        if *held != Some(*token) {
            return None;
        }
        self.watched.remove(&pair);
        Some(Reply::Push(vec![
            Reply::text("lock_lost"),
            Reply::Bulk(key.clone()),
            Reply::Int(*token as i64),
            Reply::Bulk(owner.clone()),
            Reply::text(why),
        ]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::lock::Lock;
    use crate::cmd::unlock::Unlock;

    fn ev(kind: LockEventKind, key: &str, token: u64) -> Event {
        Event::Lock {
            kind,
            key: Bytes::copy_from_slice(key.as_bytes()),
            token,
            owner: Bytes::from_static(b"o"),
            waiter: None,
        }
    }

    fn lock(key: &str) -> Command {
        Command::Lock(Lock {
            key: Bytes::copy_from_slice(key.as_bytes()),
            owner: Bytes::from_static(b"o"),
            ttl_ms: 10,
            wait_ms: 0,
        })
    }

    #[test]
    fn a_watched_lease_lost_is_pushed_once_and_an_own_unlock_is_not() {
        let mut w = LostLocks::default();
        w.before(&lock("k"));
        assert!(w.push(&ev(LockEventKind::Granted, "k", 5)).is_none(), "off");
        w.set(true);
        w.before(&lock("k"));
        w.before(&lock("j"));
        assert!(w.push(&ev(LockEventKind::Granted, "k", 5)).is_none());
        assert!(
            w.push(&ev(LockEventKind::Expired, "k", 4)).is_none(),
            "another lease"
        );
        let Some(Reply::Push(p)) = w.push(&ev(LockEventKind::Expired, "k", 5)) else {
            panic!("no push")
        };
        assert_eq!(p[0], Reply::text("lock_lost"));
        assert_eq!(p[2], Reply::Int(5));
        assert_eq!(p[4], Reply::text("expired"));
        assert!(
            w.push(&ev(LockEventKind::Expired, "k", 5)).is_none(),
            "once"
        );
        // j never granted: its release by others is not this connection's loss.
        assert!(w.push(&ev(LockEventKind::Released, "j", 9)).is_none());
        // This connection's own UNLOCK ends the watch before the release event.
        w.before(&lock("k"));
        w.push(&ev(LockEventKind::Granted, "k", 7));
        w.before(&Command::Unlock(Unlock {
            key: Bytes::from_static(b"k"),
            owner: Bytes::from_static(b"o"),
        }));
        assert!(w.push(&ev(LockEventKind::Released, "k", 7)).is_none());
    }
}
