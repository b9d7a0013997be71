//! Recipe: a blocking fenced lock with automatic renewal and a loss callback (redis crate,
//! Palisade).
//!
//! What it shows:
//! - `LOCK key owner PX ttl WAIT ms`: join the key's FIFO queue and block until the lock is
//!   granted (the reply is the fencing token) or `ms` pass (nil). `WAIT 0` waits forever.
//!   The redis crate times requests out after 500 ms by default, so LOCK gets a connection
//!   without a timeout.
//! - A renewal task: `RENEW` every ttl/3. A nil reply means the lock is gone, and so does a
//!   whole TTL without a successful `RENEW` (the server cannot be reached).
//! - Loss detection from the lock events every node publishes on `__keyspace@0__:<key>`
//!   (`lock_expired <token> <owner>`, `lock_released <token> <owner>`): if the holder's own
//!   grant ends while it still thinks it holds the lock, `on_lost(reason)` is called, once.
//! - The token goes with every write to the protected resource (here `FENCEDSET`), so a holder
//!   that learns of its loss too late is still rejected with `-FENCED`.
//!
//! ```sh
//! COMPAT_PORT=6379 cargo run --example fenced_lock -- jobs:nightly
//! ```
//!
//! `tests/fenced_lock_recipe.rs` runs this file against a Palisade cluster.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::StreamExt;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, RedisResult};
use tokio::task::JoinHandle;

type OnLost = Arc<Mutex<Option<Box<dyn FnOnce(&'static str) + Send>>>>;

/// A granted lock. Dropping it without [`FencedLock::release`] stops renewing; the lock then
/// expires at its TTL.
pub struct FencedLock {
    /// The fencing token: pass it with every write to the protected resource.
    pub token: u64,
    /// The renewal task (abort it and the lease lapses: the tests simulate a stall this way).
    pub renewer: JoinHandle<()>,
    watcher: JoinHandle<()>,
    on_lost: OnLost,
    conn: MultiplexedConnection,
    key: String,
    owner: String,
}

/// Calls the loss callback unless it has been called or the lock was released.
fn lose(on_lost: &OnLost, reason: &'static str) {
    let callback = on_lost.lock().unwrap().take(); // (not called with the mutex held)
    if let Some(callback) = callback {
        callback(reason);
    }
}

impl FencedLock {
    /// Blocks until granted (`wait` zero: forever). `Ok(None)` if `wait` passed first.
    pub async fn acquire(
        client: &Client,
        key: &str,
        ttl: Duration,
        wait: Duration,
        on_lost: impl FnOnce(&'static str) + Send + 'static,
    ) -> RedisResult<Option<FencedLock>> {
        let no_timeout = AsyncConnectionConfig::new().set_response_timeout(None);
        let mut waiting = client
            .get_multiplexed_async_connection_with_config(&no_timeout)
            .await?;
        let conn = client.get_multiplexed_async_connection().await?;
        // The owner: unique to this holder (process, start time, count).
        static COUNT: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let n = COUNT.fetch_add(1, Ordering::Relaxed);
        let owner = format!("{}-{nanos}-{n}", std::process::id());
        // Subscribe first, so that no event about our grant can be missed.
        let mut events = client.get_async_pubsub().await?;
        events.subscribe(format!("__keyspace@0__:{key}")).await?;

        let (ttl_ms, wait_ms) = (ttl.as_millis() as u64, wait.as_millis() as u64);
        let token: Option<u64> = redis::cmd("LOCK")
            .arg(key)
            .arg(&owner)
            .arg("PX")
            .arg(ttl_ms)
            .arg("WAIT")
            .arg(wait_ms)
            .query_async(&mut waiting)
            .await?;
        let Some(token) = token else { return Ok(None) };
        let on_lost: OnLost = Arc::new(Mutex::new(Some(Box::new(on_lost))));

        let watcher = tokio::spawn({
            let on_lost = on_lost.clone();
            async move {
                let mut messages = events.into_on_message();
                while let Some(message) = messages.next().await {
                    let text: String = message.get_payload().unwrap_or_default();
                    let mut words = text.split(' ');
                    let reason = match words.next() {
                        Some("lock_expired") => "lock_expired",
                        Some("lock_released") => "lock_released",
                        _ => continue,
                    };
                    if words.next() == Some(token.to_string().as_str()) {
                        return lose(&on_lost, reason);
                    }
                }
            }
        });

        let mut renew = redis::cmd("RENEW");
        renew.arg(key).arg(&owner).arg("PX").arg(ttl_ms);
        let renewer = tokio::spawn({
            let (mut conn, on_lost) = (conn.clone(), on_lost.clone());
            async move {
                let mut valid_until = Instant::now() + ttl;
                let mut tick = tokio::time::interval(ttl / 3);
                tick.tick().await; // the first tick is immediate
                loop {
                    tick.tick().await;
                    if on_lost.lock().unwrap().is_none() {
                        return; // lost or released
                    }
                    let sent = Instant::now();
                    match renew.query_async::<Option<u64>>(&mut conn).await {
                        Ok(Some(_)) => valid_until = sent + ttl,
                        Ok(None) => return lose(&on_lost, "RENEW returned nil"),
                        // A failed RENEW is retried at the next tick, until a whole TTL has gone
                        // without one.
                        Err(_) if Instant::now() > valid_until => {
                            return lose(&on_lost, "lease ran out without a successful RENEW")
                        }
                        Err(_) => {}
                    }
                }
            }
        });
        Ok(Some(FencedLock {
            token,
            renewer,
            watcher,
            on_lost,
            conn,
            key: key.to_owned(),
            owner,
        }))
    }

    /// Stops renewing and watching, then unlocks. `true` if the lock was still ours.
    pub async fn release(mut self) -> RedisResult<bool> {
        self.on_lost.lock().unwrap().take(); // our own lock_released is not a loss
        self.renewer.abort();
        self.watcher.abort();
        let released: i64 = redis::cmd("UNLOCK")
            .arg(&self.key)
            .arg(&self.owner)
            .query_async(&mut self.conn)
            .await?;
        Ok(released == 1)
    }
}

impl Drop for FencedLock {
    fn drop(&mut self) {
        self.renewer.abort();
        self.watcher.abort();
    }
}

#[tokio::main]
async fn main() -> RedisResult<()> {
    let client = Client::open(palisade_compat_rust::url(""))?;
    let key = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "recipe:fenced-lock".into());
    let on_lost = |reason| eprintln!("lost the lock: {reason}");
    let lock = FencedLock::acquire(
        &client,
        &key,
        Duration::from_secs(10),
        Duration::ZERO,
        on_lost,
    )
    .await?
    .expect("WAIT 0 waits until granted");
    println!("holding {key} with token {}", lock.token);
    let mut conn = client.get_multiplexed_async_connection().await?;
    let _: () = redis::cmd("FENCEDSET")
        .arg(format!("{key}:resource"))
        .arg("written under the lock")
        .arg(lock.token)
        .query_async(&mut conn)
        .await?;
    println!("released: {}", lock.release().await?);
    Ok(())
}
