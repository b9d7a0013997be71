//! Hashes and lists against redis-server, byte for byte, and WRONGTYPE across all types.

use crate::differential::{diff, same, Step};

fn hash_steps() -> Vec<Step> {
    vec![
        same("HSET h f1 v1"),
        same("HSET h f2 v2 f3 v3"),
        same("HSET h f1 new f4 v4"),
        same("HGETALL h"),
        same("HKEYS h"),
        same("HVALS h"),
        same("HGET h f1"),
        same("HGET h nofield"),
        same("HGET nokey f"),
        same("HMGET h f1 nofield f3"),
        same("HMGET nokey a b"),
        same("HEXISTS h f2"),
        same("HEXISTS h nofield"),
        same("HLEN h"),
        same("HLEN nokey"),
        same("HDEL h f2 nofield"),
        same("HGETALL h"),
        same("HSET h f2 again"),
        same("HGETALL h"),
        same("HINCRBY h counter 5"),
        same("HINCRBY h counter -7"),
        same("HINCRBY h f1 1"),
        same("HINCRBY h counter x"),
        same("HINCRBY h counter 9223372036854775807"),
        same("HMSET h a 1 b 2"),
        same("HSETNX h a 9"),
        same("HSETNX h z 9"),
        same("HGETALL h"),
        same("HDEL h f1 f2 f3 f4 counter a b z"),
        same("EXISTS h"),
        same("HGETALL h"),
        same("TYPE h"),
        same("HSET h f"),
        same("HSET h f v g"),
        same("HMSET h f"),
        same("HDEL h"),
        same("HSET h2 f v"),
        same("PEXPIRE h2 100000"),
        same("HSET h2 g w"),
        same("TTL h2"),
        same("TYPE h2"),
        same("DEL h2"),
    ]
}

fn list_steps() -> Vec<Step> {
    vec![
        same("RPUSH l a b c"),
        same("LPUSH l z y"),
        same("LRANGE l 0 -1"),
        same("LRANGE l 1 2"),
        same("LRANGE l -2 -1"),
        same("LRANGE l 5 10"),
        same("LRANGE l -100 100"),
        same("LRANGE l 3 1"),
        same("LRANGE nokey 0 -1"),
        same("LRANGE l x 1"),
        same("LLEN l"),
        same("LLEN nokey"),
        same("LINDEX l 0"),
        same("LINDEX l -1"),
        same("LINDEX l 99"),
        same("LPOP l"),
        same("RPOP l"),
        same("LPOP l 2"),
        same("LPOP l 0"),
        same("LPOP l -1"),
        same("LPOP nokey"),
        same("LPOP nokey 2"),
        same("RPOP nokey 0"),
        same("LPOP l 10"),
        same("EXISTS l"),
        same("LPUSHX l a"),
        same("RPUSH l a"),
        same("RPUSHX l b c"),
        same("LRANGE l 0 -1"),
        same("RPOP l 5"),
        same("LPOP l 1 2"),
        same("LPUSH l"),
        same("TYPE l"),
        same("RPUSH bl x y"),
        same("BLPOP nokey bl 1"),
        same("BRPOP bl 1"),
        same("BLPOP bl x"),
        same("BLPOP bl -1"),
        same("EXISTS bl"),
    ]
}

fn wrongtype_steps() -> Vec<Step> {
    let mut s = vec![
        same("SET str v"),
        same("HSET hash f v"),
        same("RPUSH list a"),
    ];
    for cmd in [
        "GET hash",
        "GET list",
        "INCR hash",
        "GETDEL list",
        "SET str2 v GET",
        "HSET str f v",
        "HGET list f",
        "HGETALL str",
        "HDEL str f",
        "HINCRBY list f 1",
        "HLEN str",
        "HEXISTS list f",
        "HKEYS str",
        "HMGET list a",
        "LPUSH str a",
        "RPUSH hash a",
        "LPOP hash",
        "RPOP str",
        "LLEN hash",
        "LRANGE str 0 -1",
        "BLPOP hash 1",
        "LPUSHX str a",
        "TYPE str",
        "TYPE hash",
        "TYPE list",
        "SET hash plain",
        "GET hash",
        "DEL list",
        "EXISTS list",
    ] {
        s.push(same(cmd));
    }
    s
}

#[test]
fn hashes_match_redis() {
    diff(2, &hash_steps());
    diff(3, &hash_steps());
}

#[test]
fn lists_match_redis() {
    diff(2, &list_steps());
    diff(3, &list_steps());
}

#[test]
fn wrongtype_matches_redis() {
    diff(2, &wrongtype_steps());
}
