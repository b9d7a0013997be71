//! rslock against Palisade, with one address instead of N Redis masters.
//!
//! rslock acquires with SET resource <20 random bytes> NX PX ttl, so lock values are raw bytes
//! that are almost never valid UTF-8. It extends and unlocks with Lua scripts (redis::Script).

use std::time::Duration;

use palisade_compat_rust::{key, url};
use redis::{AsyncCommands, RedisResult};
use rslock::{Lock, LockError, LockManager};

fn manager() -> LockManager {
    let mut m = LockManager::new(vec![url("")]);
    m.set_retry(1, Duration::from_millis(50));
    m
}

async fn conn() -> redis::aio::MultiplexedConnection {
    redis::Client::open(url(""))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// Locks `resource` until rslock picks a value that is not valid UTF-8 (almost always at once),
/// so that the binary path is exercised every run.
async fn lock_with_binary_value(m: &LockManager, resource: &str, ttl: Duration) -> Lock {
    for _ in 0..20 {
        let lock = m.lock(resource.as_bytes(), ttl).await.expect("lock");
        if std::str::from_utf8(&lock.val).is_err() {
            return lock;
        }
        m.unlock(&lock).await;
    }
    panic!("rslock produced only UTF-8 values");
}

#[tokio::test]
async fn lock_stores_the_raw_value() {
    let m = manager();
    let mut c = conn().await;
    let r = key("raw");
    let lock = lock_with_binary_value(&m, &r, Duration::from_secs(10)).await;
    assert_eq!(lock.val.len(), 20);
    let stored: Vec<u8> = c.get(&r).await.unwrap();
    assert_eq!(stored, lock.val);
    assert!(
        lock.validity_time > 9_000 && lock.validity_time <= 10_000,
        "{}",
        lock.validity_time
    );
    m.unlock(&lock).await;
    let exists: i64 = c.exists(&r).await.unwrap();
    assert_eq!(exists, 0);
}

#[tokio::test]
async fn contention_is_unavailable() {
    let m = manager();
    let r = key("busy");
    let held = m.lock(r.as_bytes(), Duration::from_secs(10)).await.unwrap();
    match manager().lock(r.as_bytes(), Duration::from_secs(10)).await {
        Err(LockError::Unavailable) => {}
        other => panic!("expected Unavailable, got {other:?}"),
    }
    m.unlock(&held).await;
    let again = manager()
        .lock(r.as_bytes(), Duration::from_secs(10))
        .await
        .unwrap();
    again.release().await;
}

#[tokio::test]
async fn unlock_by_another_value_does_nothing() {
    let m = manager();
    let mut c = conn().await;
    let r = key("other");
    let lock = lock_with_binary_value(&m, &r, Duration::from_millis(200)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let thief = m.lock(r.as_bytes(), Duration::from_secs(10)).await.unwrap();
    // The expired holder's unlock runs the compare-and-delete script: the thief keeps the key.
    m.unlock(&lock).await;
    let stored: Vec<u8> = c.get(&r).await.unwrap();
    assert_eq!(stored, thief.val);
    // Nor can the expired holder extend.
    assert!(m.extend(&lock, Duration::from_secs(5)).await.is_err());
    m.unlock(&thief).await;
}

#[tokio::test]
async fn extend() {
    let m = manager();
    let mut c = conn().await;
    let r = key("extend");
    let lock = lock_with_binary_value(&m, &r, Duration::from_secs(1)).await;
    let extended = m
        .extend(&lock, Duration::from_secs(30))
        .await
        .expect("extend");
    assert_eq!(extended.val, lock.val);
    let pttl: i64 = c.pttl(&r).await.unwrap();
    assert!(pttl > 29_000 && pttl <= 30_000, "{pttl}");
    m.unlock(&extended).await;
}

#[tokio::test]
async fn acquire_waits_for_release() {
    let m = manager();
    let r = key("wait");
    let held = m.lock(r.as_bytes(), Duration::from_secs(10)).await.unwrap();
    let releaser = {
        let m = m.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            m.unlock(&held).await;
        })
    };
    let guard = tokio::time::timeout(
        Duration::from_secs(10),
        manager().acquire(r.as_bytes(), Duration::from_secs(10)),
    )
    .await
    .expect("acquire did not finish")
    .expect("acquire");
    releaser.await.unwrap();
    guard.release().await;
}

#[tokio::test]
async fn fencing_token_for_a_binary_lock_value() {
    let m = manager();
    let mut c = conn().await;
    let r = key("fenced");
    let resource = key("resource");
    let a = lock_with_binary_value(&m, &r, Duration::from_millis(300)).await;
    // LOCK with rslock's raw 20-byte value returns this grant's token.
    let token_a: i64 = redis::cmd("LOCK")
        .arg(&r)
        .arg(&a.val[..])
        .arg("PX")
        .arg(300)
        .query_async(&mut c)
        .await
        .unwrap();
    let info: Vec<redis::Value> = redis::cmd("LOCKINFO")
        .arg(&r)
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(
        info[1],
        redis::Value::BulkString(a.val.clone()),
        "LOCKINFO owner is the raw value"
    );
    let () = redis::cmd("FENCEDSET")
        .arg(&resource)
        .arg("from-a")
        .arg(token_a)
        .query_async(&mut c)
        .await
        .unwrap();

    tokio::time::sleep(Duration::from_millis(600)).await;
    let b = lock_with_binary_value(&m, &r, Duration::from_secs(10)).await;
    let token_b: i64 = redis::cmd("LOCK")
        .arg(&r)
        .arg(&b.val[..])
        .arg("PX")
        .arg(10_000)
        .query_async(&mut c)
        .await
        .unwrap();
    assert!(token_b > token_a);
    // A's value no longer owns the key: no token for it.
    let none: Option<i64> = redis::cmd("LOCK")
        .arg(&r)
        .arg(&a.val[..])
        .arg("PX")
        .arg(10_000)
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(none, None);
    let () = redis::cmd("FENCEDSET")
        .arg(&resource)
        .arg("from-b")
        .arg(token_b)
        .query_async(&mut c)
        .await
        .unwrap();

    let stale: RedisResult<()> = redis::cmd("FENCEDSET")
        .arg(&resource)
        .arg("late-a")
        .arg(token_a)
        .query_async(&mut c)
        .await;
    let err = stale.expect_err("a stale token must be rejected");
    assert_eq!(err.code(), Some("FENCED"), "{err}");
    m.unlock(&b).await;
}
