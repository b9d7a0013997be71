//! The progress line: once a second, on a terminal only, how many operations the last second
//! completed and how many in total.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A running progress line; dropping it stops and clears it.
pub struct Progress(Option<tokio::task::JoinHandle<()>>);

/// Prints `\r<label>: <n> <unit>/s, <count> total` every second while the result is alive.
pub fn start(count: Arc<AtomicU64>, label: String, unit: &'static str) -> Progress {
    if !std::io::stderr().is_terminal() {
        return Progress(None);
    }
    Progress(Some(tokio::spawn(async move {
        let mut last = 0;
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let now = count.load(Ordering::Relaxed);
            eprint!("\r{label}: {} {unit}/s, {now} total    ", now - last);
            let _ = std::io::stderr().flush();
            last = now;
        }
    })))
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
            eprint!("\r{:100}\r", "");
        }
    }
}
