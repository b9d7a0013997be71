//! The `redis` crate's async cluster client (`cluster-async`), with the node under test as
//! its only seed: discovery from CLUSTER SLOTS, routing by slot, a pipeline, LOCK/FENCEDSET.

use palisade_compat_rust::{key, url};
use redis::cluster::ClusterClient;
use redis::RedisResult;

#[tokio::test]
async fn cluster_client_set_get_pipeline_and_fencing() {
    let client = ClusterClient::new(vec![url("")]).expect("cluster client");
    let mut c = client.get_async_connection().await.expect("connect");
    let k = key("{rc}");
    let _: () = redis::cmd("SET").arg(&k).arg("1").query_async(&mut c).await.unwrap();
    let v: String = redis::cmd("GET").arg(&k).query_async(&mut c).await.unwrap();
    assert_eq!(v, "1");
    let mut pipe = redis::pipe();
    for i in 0..10 {
        pipe.cmd("SET").arg(format!("{k}:{i}")).arg(i).ignore();
    }
    pipe.cmd("GET").arg(format!("{k}:7"));
    let (seven,): (String,) = pipe.query_async(&mut c).await.unwrap();
    assert_eq!(seven, "7");
    let lock = format!("{k}:lock");
    let token: i64 = redis::cmd("LOCK")
        .arg(&lock)
        .arg("me")
        .arg("PX")
        .arg(5000)
        .query_async(&mut c)
        .await
        .unwrap();
    assert!(token > 0);
    let data = format!("{k}:data");
    let ok: String = redis::cmd("FENCEDSET")
        .arg(&data)
        .arg("v")
        .arg(token)
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(ok, "OK");
    let stale: RedisResult<String> = redis::cmd("FENCEDSET")
        .arg(&data)
        .arg("old")
        .arg(token - 1)
        .query_async(&mut c)
        .await;
    assert!(format!("{stale:?}").contains("FENCED"), "{stale:?}");
}
