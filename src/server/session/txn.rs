//! A session's transaction state: MULTI's queue and the versions WATCH saw.

use bytes::Bytes;

use crate::cmd::{Command, ConnCmd};
use crate::resp::Reply;

/// One queued item.
pub enum Queued {
    /// A replicated command, sent with EXEC.
    Cmd(Command),
    /// A connection command (PING, ECHO, ...), run by the session at EXEC.
    Conn(ConnCmd),
    /// A command whose arguments were rejected: its error takes its place in EXEC's reply
    /// (Redis reports such errors at EXEC, not when queueing).
    Failed(Reply),
}

/// Watched keys with the version each had at WATCH (None: missing).
pub type Watched = Vec<(Bytes, Option<u64>)>;

/// MULTI/WATCH state.
#[derive(Default)]
pub struct Txn {
    /// Some while inside MULTI: each item with the name INFO commandstats counts it under.
    pub queue: Option<Vec<(String, Queued)>>,
    /// A command was rejected while queueing (unknown, wrong arity): EXEC aborts.
    pub dirty: bool,
    /// Watched keys with the version each had at WATCH (None: missing).
    pub watched: Watched,
    /// The queued command lines MONITOR shows when EXEC runs them (kept only while the
    /// node has monitors).
    pub monitored: Vec<Vec<Bytes>>,
}

/// `-EXECABORT ...`.
pub fn exec_abort() -> Reply {
    Reply::err("EXECABORT Transaction discarded because of previous errors.")
}

impl Txn {
    /// True inside MULTI.
    pub fn active(&self) -> bool {
        self.queue.is_some()
    }

    /// Ends the transaction and forgets the watches (EXEC, DISCARD, RESET).
    pub fn reset(&mut self) -> (Vec<(String, Queued)>, bool, Watched) {
        let queue = self.queue.take().unwrap_or_default();
        let dirty = std::mem::take(&mut self.dirty);
        self.monitored.clear();
        (queue, dirty, std::mem::take(&mut self.watched))
    }

    /// Queues an item, counted as `name` when EXEC runs it; the reply is `+QUEUED`.
    pub fn push(&mut self, name: String, item: Queued) -> Reply {
        if let Some(q) = &mut self.queue {
            q.push((name, item));
        }
        Reply::Simple("QUEUED".into())
    }
}
