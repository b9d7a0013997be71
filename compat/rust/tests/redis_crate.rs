//! The `redis` crate (async, tokio) against Palisade: handshake, replies, pipelines, Script.

use palisade_compat_rust::{key, url};
use redis::{AsyncCommands, RedisResult, Script, Value};

async fn conn(suffix: &str) -> redis::aio::MultiplexedConnection {
    let client = redis::Client::open(url(suffix)).expect("client");
    client
        .get_multiplexed_async_connection()
        .await
        .expect("connect")
}

#[tokio::test]
async fn ping_and_info_resp2() {
    let mut c = conn("").await;
    let pong: String = redis::cmd("PING").query_async(&mut c).await.unwrap();
    assert_eq!(pong, "PONG");
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut c)
        .await
        .unwrap();
    assert!(info.contains("\r\nredis_version:7.2.0\r\n"), "{info}");
}

#[tokio::test]
async fn resp3_handshake_and_nulls() {
    // ?protocol=resp3 makes the crate send HELLO 3.
    let mut c = conn("?protocol=resp3").await;
    let hello: Value = redis::cmd("HELLO").query_async(&mut c).await.unwrap();
    let Value::Map(fields) = hello else {
        panic!("HELLO is not a map in RESP3: {hello:?}")
    };
    assert!(fields
        .iter()
        .any(|(k, v)| *k == Value::BulkString(b"proto".to_vec()) && *v == Value::Int(3)));
    let missing: Value = redis::cmd("GET")
        .arg(key("none"))
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(missing, Value::Nil);
}

#[tokio::test]
async fn set_nx_px_replies_are_simple_ok_and_nil() {
    let mut c = conn("").await;
    let k = key("setnx");
    // The crate (and rslock on top of it) only accepts the simple string +OK as success.
    let first: Value = redis::cmd("SET")
        .arg(&k)
        .arg("a")
        .arg("NX")
        .arg("PX")
        .arg(10_000)
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(first, Value::Okay);
    let second: Value = redis::cmd("SET")
        .arg(&k)
        .arg("b")
        .arg("NX")
        .arg("PX")
        .arg(10_000)
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(second, Value::Nil);
    let pttl: i64 = c.pttl(&k).await.unwrap();
    assert!(pttl > 0 && pttl <= 10_000, "{pttl}");
}

#[tokio::test]
async fn typed_commands_and_binary_values() {
    let mut c = conn("").await;
    let k = key("typed");
    let raw: Vec<u8> = vec![0, 0xff, 0xfe, b'\r', b'\n', 0x80];
    let () = c.set(&k, &raw).await.unwrap();
    let back: Vec<u8> = c.get(&k).await.unwrap();
    assert_eq!(back, raw);
    let n: i64 = c.incr(key("counter"), 5).await.unwrap();
    assert_eq!(n, 5);
    let gone: i64 = c.del(&k).await.unwrap();
    assert_eq!(gone, 1);
    let missing: Option<String> = c.get(&k).await.unwrap();
    assert_eq!(missing, None);
}

#[tokio::test]
async fn pipelines_plain_and_atomic() {
    let mut c = conn("").await;
    let k = key("pipe");
    let (a, b, v): (String, i64, String) = redis::pipe()
        .cmd("SET")
        .arg(&k)
        .arg("1")
        .cmd("INCR")
        .arg(&k)
        .cmd("GET")
        .arg(&k)
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!((a.as_str(), b, v.as_str()), ("OK", 2, "2"));
    // .atomic() wraps the pipeline in MULTI/EXEC.
    let (x, y): (i64, i64) = redis::pipe()
        .atomic()
        .incr(&k, 1)
        .incr(&k, 10)
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!((x, y), (3, 13));
}

#[tokio::test]
async fn script_evalsha_then_load_on_noscript() {
    let mut c = conn("").await;
    let k = key("script");
    let script = Script::new(
        r#"
        if redis.call("GET", KEYS[1]) == ARGV[1] then
          return redis.call("DEL", KEYS[1])
        else
          return 0
        end"#,
    );
    let () = c.set(&k, "mine").await.unwrap();
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut c)
        .await
        .unwrap();
    // invoke_async sends EVALSHA; on NOSCRIPT it sends SCRIPT LOAD and retries.
    let not_mine: i64 = script
        .key(&k)
        .arg("theirs")
        .invoke_async(&mut c)
        .await
        .unwrap();
    assert_eq!(not_mine, 0);
    let mine: i64 = script
        .key(&k)
        .arg("mine")
        .invoke_async(&mut c)
        .await
        .unwrap();
    assert_eq!(mine, 1);
    let returns_nil: RedisResult<Option<String>> = Script::new("return redis.call('GET', KEYS[1])")
        .key(&k)
        .invoke_async(&mut c)
        .await;
    assert_eq!(returns_nil.unwrap(), None);
}

#[tokio::test]
async fn fencing_token_for_a_set_nx_px_lock() {
    let mut a = conn("").await;
    let mut b = conn("").await;
    let lock = key("lock");
    let resource = key("resource");
    let acquired: Value = redis::cmd("SET")
        .arg(&lock)
        .arg("owner-a")
        .arg("NX")
        .arg("PX")
        .arg(300)
        .query_async(&mut a)
        .await
        .unwrap();
    assert_eq!(acquired, Value::Okay);
    let token_a: i64 = redis::cmd("LOCK")
        .arg(&lock)
        .arg("owner-a")
        .arg("PX")
        .arg(300)
        .query_async(&mut a)
        .await
        .unwrap();
    let () = redis::cmd("FENCEDSET")
        .arg(&resource)
        .arg("from-a")
        .arg(token_a)
        .query_async(&mut a)
        .await
        .unwrap();

    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    let acquired: Value = redis::cmd("SET")
        .arg(&lock)
        .arg("owner-b")
        .arg("NX")
        .arg("PX")
        .arg(10_000)
        .query_async(&mut b)
        .await
        .unwrap();
    assert_eq!(acquired, Value::Okay);
    let token_b: i64 = redis::cmd("LOCK")
        .arg(&lock)
        .arg("owner-b")
        .arg("PX")
        .arg(10_000)
        .query_async(&mut b)
        .await
        .unwrap();
    assert!(token_b > token_a);
    let () = redis::cmd("FENCEDSET")
        .arg(&resource)
        .arg("from-b")
        .arg(token_b)
        .query_async(&mut b)
        .await
        .unwrap();

    let stale: RedisResult<()> = redis::cmd("FENCEDSET")
        .arg(&resource)
        .arg("late-a")
        .arg(token_a)
        .query_async(&mut a)
        .await;
    let err = stale.expect_err("a stale token must be rejected");
    assert_eq!(err.code(), Some("FENCED"), "{err}");
    assert!(
        err.to_string()
            .contains(&format!("token {token_a} is lower than {token_b}")),
        "{err}"
    );
}
