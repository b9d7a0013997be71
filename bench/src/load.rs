//! The `load` workload: acquire N distinct long-lived locks (`lk:0` .. `lk:N-1`) as fast as
//! the target takes them, with deep pipelining, to measure memory per lock and restart time
//! with a full keyspace (scripts/bench.sh --memory).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use redis_protocol::resp2::types::OwnedFrame;
use serde::Serialize;

use crate::client::{is_error, Client};
use crate::progress;
use crate::workload::Kind;

/// What a load run did.
#[derive(Serialize, Clone, Debug)]
pub struct LoadResult {
    /// Target name.
    pub target: String,
    /// Locks asked for.
    pub locks: u64,
    /// Locks granted.
    pub granted: u64,
    /// Locks refused (already held by another owner).
    pub refused: u64,
    /// Error replies.
    pub errors: u64,
    /// Connections used.
    pub connections: usize,
    /// Commands per pipelined batch.
    pub batch: usize,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// Granted locks per second.
    pub locks_per_sec: f64,
}

/// The batches (ranges of lock numbers) that connection `conn` of `conns` sends: batch `j`
/// covers `j*batch .. (j+1)*batch` (the last one shorter), and goes to connection `j % conns`.
pub fn batches(locks: u64, batch: usize, conns: usize, conn: usize) -> Vec<std::ops::Range<u64>> {
    let batch = batch.max(1) as u64;
    (0..locks.div_ceil(batch))
        .filter(|j| (j % conns.max(1) as u64) as usize == conn)
        .map(|j| j * batch..((j + 1) * batch).min(locks))
        .collect()
}

/// Acquires `lk:0` .. `lk:<locks-1>` on `addr` with `ttl_ms` leases. RESP targets only: an
/// etcd target gets Redis's commands (main refuses it before).
pub async fn load(
    name: &str,
    kind: Kind,
    addr: &str,
    locks: u64,
    conns: usize,
    batch: usize,
    ttl_ms: u64,
) -> anyhow::Result<LoadResult> {
    let granted = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for conn in 0..conns {
        let (addr, granted) = (addr.to_string(), granted.clone());
        let ttl = ttl_ms.to_string();
        tasks.push(tokio::spawn(async move {
            let mut c = Client::connect(&addr).await?;
            let (mut refused, mut errors) = (0u64, 0u64);
            for range in batches(locks, batch, conns, conn) {
                let n = (range.end - range.start) as usize;
                for i in range {
                    let key = format!("lk:{i}");
                    match kind {
                        Kind::Palisade => {
                            c.queue(&[b"LOCK", key.as_bytes(), b"loader", b"PX", ttl.as_bytes()])
                        }
                        Kind::Redis | Kind::Etcd | Kind::Redlock => c.queue(&[
                            b"SET",
                            key.as_bytes(),
                            b"loader",
                            b"NX",
                            b"PX",
                            ttl.as_bytes(),
                        ]),
                    }
                }
                for reply in c.flush(n).await? {
                    match reply {
                        OwnedFrame::Integer(_) | OwnedFrame::SimpleString(_) => {
                            granted.fetch_add(1, Ordering::Relaxed);
                        }
                        r if is_error(&r) => errors += 1,
                        _ => refused += 1,
                    }
                }
            }
            anyhow::Ok((refused, errors))
        }));
    }
    let progress = progress::start(granted.clone(), format!("[load] {name}"), "locks");
    let (mut refused, mut errors) = (0, 0);
    for t in tasks {
        let (r, e) = t.await??;
        refused += r;
        errors += e;
    }
    drop(progress);
    let seconds = started.elapsed().as_secs_f64();
    let granted = granted.load(Ordering::Relaxed);
    Ok(LoadResult {
        target: name.to_string(),
        locks,
        granted,
        refused,
        errors,
        connections: conns,
        batch,
        seconds,
        locks_per_sec: granted as f64 / seconds.max(1e-9),
    })
}

#[cfg(test)]
mod tests {
    use super::batches;

    #[test]
    fn batches_cover_every_lock_exactly_once() {
        for (locks, batch, conns) in [
            (10_000, 1000, 4),
            (10_001, 1000, 3),
            (5, 1000, 4),
            (0, 10, 2),
        ] {
            let mut seen: Vec<u64> = (0..conns)
                .flat_map(|c| batches(locks, batch, conns, c))
                .flatten()
                .collect();
            seen.sort_unstable();
            assert_eq!(
                seen,
                (0..locks).collect::<Vec<_>>(),
                "{locks} {batch} {conns}"
            );
        }
        assert_eq!(batches(2500, 1000, 2, 0), vec![0..1000, 2000..2500]);
        assert_eq!(batches(2500, 1000, 2, 1), vec![1000..2000]);
    }
}
