//! The fenced-lock recipe (`examples/fenced_lock.rs`) against a Palisade node.
//!
//! 1. Two contenders on one key: the second blocks in `LOCK ... WAIT` until the first
//!    releases, and its token is higher.
//! 2. A holder whose renewal stalls loses the lock at its TTL, its loss callback fires (from the
//!    `lock_expired` event), and its late `FENCEDSET` is rejected once the next holder has
//!    written.

#[allow(dead_code)] // the example's main
#[path = "../examples/fenced_lock.rs"]
mod fenced_lock;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fenced_lock::FencedLock;
use palisade_compat_rust::{key, url};
use redis::Client;
use tokio::sync::oneshot;

fn client() -> Client {
    Client::open(url("")).unwrap()
}

async fn cmd<T: redis::FromRedisValue>(c: &Client, args: &[&str]) -> redis::RedisResult<T> {
    let mut conn = c.get_multiplexed_async_connection().await?;
    redis::cmd(args[0])
        .arg(&args[1..])
        .query_async(&mut conn)
        .await
}

/// A loss callback that records the reason in `lost`.
fn on_lost(lost: &Arc<Mutex<Vec<&'static str>>>) -> impl FnOnce(&'static str) + Send + 'static {
    let lost = lost.clone();
    move |reason| lost.lock().unwrap().push(reason)
}

#[tokio::test]
async fn second_contender_waits_for_the_first() {
    let (k, c) = (key("recipe-wait"), client());
    let lost = Arc::new(Mutex::new(Vec::new()));
    let ttl = Duration::from_secs(5);
    let a = FencedLock::acquire(&c, &k, ttl, Duration::from_secs(1), on_lost(&lost))
        .await
        .unwrap()
        .expect("a free lock is granted");

    let waiter = tokio::spawn({
        let (c, k, on_lost) = (c.clone(), k.clone(), on_lost(&lost));
        async move {
            let b = FencedLock::acquire(&c, &k, ttl, Duration::from_secs(8), on_lost).await;
            (
                b.unwrap().expect("granted after the release"),
                Instant::now(),
            )
        }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!waiter.is_finished(), "the second contender did not wait");
    let released_at = Instant::now();
    let token_a = a.token;
    assert!(a.release().await.unwrap());
    let (b, granted_at) = waiter.await.unwrap();
    assert!(b.token > token_a, "{} > {token_a}", b.token);
    assert!(granted_at >= released_at);
    assert!(b.release().await.unwrap());
    tokio::time::sleep(Duration::from_millis(300)).await; // a release is not a loss
    assert!(
        lost.lock().unwrap().is_empty(),
        "{:?}",
        lost.lock().unwrap()
    );
}

#[tokio::test]
async fn stalled_holder_loses_the_lock_and_is_fenced() {
    let (k, res, c) = (key("recipe-stall"), key("recipe-res"), client());
    let (tell, told) = oneshot::channel();
    let on_lost = move |reason| {
        let _ = tell.send(reason);
    };
    let a = FencedLock::acquire(
        &c,
        &k,
        Duration::from_secs(1),
        Duration::from_secs(1),
        on_lost,
    )
    .await
    .unwrap()
    .expect("a free lock is granted");
    let token_a = a.token.to_string();
    let () = cmd(&c, &["FENCEDSET", &res, "from-a", &token_a])
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1_500)).await; // renewal keeps the lock...
    let holder: i64 = cmd(&c, &["FENCECHECK", &k, &token_a]).await.unwrap();
    assert_eq!(holder, 1, "A is still the holder");

    a.renewer.abort(); // ...until the holder stalls (GC pause, lost CPU, ...)
    let b = FencedLock::acquire(
        &c,
        &k,
        Duration::from_secs(10),
        Duration::from_secs(5),
        |_| {},
    )
    .await
    .unwrap()
    .expect("granted when A's lease ends");
    assert!(b.token > a.token, "{} > {token_a}", b.token);
    let reason = tokio::time::timeout(Duration::from_secs(5), told).await;
    assert_eq!(
        reason.ok().and_then(|r| r.ok()),
        Some("lock_expired"),
        "loss callback within 5 s"
    );

    let () = cmd(&c, &["FENCEDSET", &res, "from-b", &b.token.to_string()])
        .await
        .unwrap();
    let late = cmd::<()>(&c, &["FENCEDSET", &res, "late-a", &token_a])
        .await
        .unwrap_err();
    assert_eq!(late.code(), Some("FENCED"), "{late}");
    assert!(
        late.to_string()
            .contains(&format!("token {token_a} is lower than {}", b.token)),
        "{late}"
    );
    let value: String = cmd(&c, &["GET", &res]).await.unwrap();
    assert_eq!(value, "from-b");
    assert!(b.release().await.unwrap());
}
