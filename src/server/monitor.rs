//! This node's MONITOR feed: every session hands the line of a command it ran to the
//! monitoring sessions of the node (`cmd/monitor.rs` formats it). While nobody monitors,
//! a command costs one atomic load.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::broadcast;

/// Lines a monitoring session may fall behind before it is closed.
const QUEUE: usize = 16 * 1024;

/// The node's monitors.
pub struct Monitors {
    /// Live [`Feed`]s.
    count: Arc<AtomicUsize>,
    tx: broadcast::Sender<Bytes>,
}

impl Default for Monitors {
    fn default() -> Self {
        Monitors {
            count: Arc::default(),
            tx: broadcast::channel(QUEUE).0,
        }
    }
}

impl Monitors {
    /// True while some session monitors (the cheap check before building a line).
    pub fn active(&self) -> bool {
        self.count.load(Ordering::Relaxed) > 0
    }

    /// Starts a monitoring session's feed: it receives every line fed from now on.
    pub fn watch(&self) -> Feed {
        self.count.fetch_add(1, Ordering::Relaxed);
        Feed {
            rx: self.tx.subscribe(),
            count: self.count.clone(),
        }
    }

    /// Sends a line to every monitor (none listening is normal).
    pub fn feed(&self, line: Bytes) {
        let _ = self.tx.send(line);
    }
}

/// One monitoring session's receiver; dropping it stops the monitoring.
pub struct Feed {
    rx: broadcast::Receiver<Bytes>,
    count: Arc<AtomicUsize>,
}

impl Feed {
    /// The next line. `Err(n)`: the session fell `n` lines behind, which are lost to it.
    pub async fn next(&mut self) -> Result<Bytes, u64> {
        loop {
            match self.rx.recv().await {
                Ok(line) => return Ok(line),
                Err(broadcast::error::RecvError::Lagged(n)) => return Err(n),
                // The sender lives as long as the node's client table.
                Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
            }
        }
    }
}

impl Drop for Feed {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::Relaxed);
    }
}
