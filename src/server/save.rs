//! SAVE, BGSAVE and BGREWRITEAOF: a Raft snapshot of this node on request (openraft's
//! `trigger().snapshot()`), and what LASTSAVE and INFO persistence report about them.
//!
//! Every acknowledged write is already fsync'd in the log; a snapshot compacts the log. A
//! save is done once this node's snapshot covers every entry it had applied when the save
//! was asked for.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use openraft::async_runtime::watch::WatchReceiver;

use super::Shared;
use crate::cmd::save::SaveCmd;
use crate::resp::Reply;

/// How long a save may take before it is reported failed.
const SAVE_TIMEOUT: Duration = Duration::from_secs(120);

/// This node's save record.
#[derive(Debug, Default)]
pub struct Saves {
    /// Unix seconds of the last completed save (the start of the node before the first).
    pub last_save: AtomicI64,
    /// The keyspace revision when the last completed save was asked for (INFO
    /// rdb_changes_since_last_save counts the commands applied since).
    pub revision_at_save: AtomicU64,
    /// A background save is running.
    pub in_progress: AtomicBool,
    /// The last background save failed.
    pub last_failed: AtomicBool,
}

impl Saves {
    /// A record that counts the node's start, at `revision`, as its last save.
    pub fn new(started_unix: i64, revision: u64) -> Saves {
        Saves {
            last_save: AtomicI64::new(started_unix),
            revision_at_save: AtomicU64::new(revision),
            ..Default::default()
        }
    }
}

fn unix_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Takes a snapshot and waits until it covers what was applied when asked; records the save.
pub async fn snapshot(shared: &Shared) -> Result<(), String> {
    let target = shared
        .raft
        .metrics()
        .borrow_watched()
        .last_applied
        .map(|l| l.index);
    let revision = shared.state.read().map(|st| st.ks.revision()).unwrap_or(0);
    shared
        .raft
        .trigger()
        .snapshot()
        .await
        .map_err(|e| e.to_string())?;
    shared
        .raft
        .wait(Some(SAVE_TIMEOUT))
        .metrics(
            move |m| m.snapshot.map(|l| l.index) >= target,
            "snapshot covers the applied log",
        )
        .await
        .map_err(|e| e.to_string())?;
    let saves = &shared.saves;
    saves.last_save.store(unix_secs(), Ordering::Relaxed);
    saves.revision_at_save.store(revision, Ordering::Relaxed);
    Ok(())
}

/// SAVE: replies once the snapshot is taken.
pub async fn save(shared: &Shared) -> Reply {
    if shared.saves.in_progress.load(Ordering::Relaxed) {
        return Reply::err("ERR Background save already in progress");
    }
    match snapshot(shared).await {
        Ok(()) => Reply::ok(),
        Err(e) => {
            tracing::error!(error = %e, "SAVE: the snapshot failed");
            Reply::err("ERR")
        }
    }
}

/// BGSAVE and BGREWRITEAOF: start a snapshot in the background and reply at once.
pub fn background(shared: &Arc<Shared>, cmd: SaveCmd) -> Reply {
    if shared.saves.in_progress.swap(true, Ordering::AcqRel) {
        return match cmd {
            SaveCmd::BgSave { schedule: true } => {
                Reply::Simple("Background saving scheduled".into())
            }
            SaveCmd::BgRewriteAof => {
                Reply::Simple("Background append only file rewriting scheduled".into())
            }
            _ => Reply::err("ERR Background save already in progress"),
        };
    }
    let s = shared.clone();
    tokio::spawn(async move {
        let result = snapshot(&s).await;
        if let Err(e) = &result {
            tracing::error!(error = %e, "BGSAVE: the snapshot failed");
        }
        s.saves
            .last_failed
            .store(result.is_err(), Ordering::Relaxed);
        s.saves.in_progress.store(false, Ordering::Release);
    });
    match cmd {
        SaveCmd::BgRewriteAof => {
            Reply::Simple("Background append only file rewriting started".into())
        }
        _ => Reply::Simple("Background saving started".into()),
    }
}
