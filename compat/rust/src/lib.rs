//! Helpers shared by the tests in `tests/`: where the node under test is, and unique key names.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// `redis://COMPAT_HOST:COMPAT_PORT/` (defaults 127.0.0.1 and 6379), with `suffix` appended.
pub fn url(suffix: &str) -> String {
    let host = std::env::var("COMPAT_HOST").unwrap_or_else(|_| "127.0.0.1".into());
    let port = std::env::var("COMPAT_PORT").unwrap_or_else(|_| "6379".into());
    format!("redis://{host}:{port}/{suffix}")
}

/// A key name unique to this process and call: runs against a follower and the leader never
/// share keys.
pub fn key(label: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    static RUN: std::sync::OnceLock<u128> = std::sync::OnceLock::new();
    let run = RUN.get_or_init(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos()
            ^ std::process::id() as u128
    });
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("compat:{:x}:{label}:{n}", run & 0xffff_ffff)
}
