//! Differential tests (against redis-server 7.0, RESP2 and RESP3) for the list commands of
//! issue 14 item 4 (LMOVE, BLMOVE, RPOPLPUSH, BRPOPLPUSH, LMPOP, BLMPOP, LPOS, LSET, LINSERT,
//! LREM, LTRIM) and the hash commands HSTRLEN, HRANDFIELD, HSCAN and HINCRBYFLOAT.
//!
//! Random replies (HRANDFIELD with a count smaller than the hash, or negative) are compared
//! by their properties only (length, membership, distinctness), since Redis's draws are
//! random; a large hash's HSCAN pages are compared as the set of fields they cover.

use std::collections::BTreeSet;

use crate::common::*;
use crate::differential::{diff, same, same_args, Step};

fn list_steps() -> Vec<Step> {
    vec![
        // LMOVE / RPOPLPUSH.
        same("RPUSH src a b c d"),
        same("LMOVE src dst LEFT RIGHT"),
        same("LMOVE src dst right left"),
        same("LRANGE src 0 -1"),
        same("LRANGE dst 0 -1"),
        same("RPOPLPUSH src dst"),
        same("RPOPLPUSH dst dst"),
        same("LRANGE dst 0 -1"),
        same("LMOVE dst dst LEFT LEFT"),
        same("LMOVE nosuch dst LEFT LEFT"),
        same("LMOVE src dst UP LEFT"),
        same("LMOVE src dst LEFT"),
        same("SET str v"),
        same("LMOVE str dst LEFT LEFT"),
        same("LMOVE dst str LEFT LEFT"),
        same("LMOVE nosuch str LEFT LEFT"),
        same("RPOPLPUSH dst str"),
        same("RPUSH one x"),
        same("EXPIRE one 100"),
        same("LMOVE one one LEFT RIGHT"),
        same("TTL one"),
        same("LMOVE one other LEFT RIGHT"),
        same("EXISTS one"),
        same("LRANGE other 0 -1"),
        // BLMOVE / BRPOPLPUSH without waiting (data is there) and with a short timeout.
        same("RPUSH bsrc 1 2 3"),
        same("BLMOVE bsrc bdst RIGHT LEFT 1"),
        same("BRPOPLPUSH bsrc bdst 0"),
        same("LRANGE bdst 0 -1"),
        same("BLMOVE empty bdst LEFT LEFT 0.05"),
        same("BRPOPLPUSH empty bdst 0.05"),
        same("BLMOVE bsrc bdst UP LEFT 1"),
        same("BLMOVE bsrc bdst LEFT LEFT -1"),
        same("BLMOVE bsrc bdst LEFT LEFT abc"),
        same("BLMOVE bsrc bdst LEFT LEFT"),
        same("BRPOPLPUSH bsrc bdst"),
        same("BRPOPLPUSH str bdst 0"),
        // LMPOP / BLMPOP.
        same("RPUSH m1 a b c"),
        same("RPUSH m2 x y"),
        same("LMPOP 2 nosuch m1 LEFT"),
        same("LMPOP 2 nosuch m1 right COUNT 10"),
        same("EXISTS m1"),
        same("LMPOP 2 m1 m2 LEFT COUNT 1"),
        same("LMPOP 1 nosuch LEFT"),
        same("LMPOP 1 nosuch LEFT COUNT 3"),
        same("LMPOP 0 m2 LEFT"),
        same("LMPOP -1 m2 LEFT"),
        same("LMPOP x m2 LEFT"),
        same("LMPOP 99999999999999999999 m2 LEFT"),
        same("LMPOP 2 m2 LEFT"),
        same("LMPOP 3 m2 LEFT"),
        same("LMPOP 1 m2 UP"),
        same("LMPOP 1 m2 LEFT COUNT 0"),
        same("LMPOP 1 m2 LEFT COUNT -1"),
        same("LMPOP 1 m2 LEFT COUNT"),
        same("LMPOP 1 m2 LEFT COUNT 1 COUNT 1"),
        same("LMPOP 1 m2 LEFT FOO"),
        same("LMPOP 1 str LEFT"),
        same("LMPOP 2 m2 str LEFT"),
        same("LMPOP 2 str m2 LEFT"),
        same("LMPOP 1"),
        same("RPUSH m3 p q r"),
        same("BLMPOP 1 2 nosuch m3 RIGHT COUNT 2"),
        same("BLMPOP 0 1 m3 LEFT"),
        same("BLMPOP 0.05 1 m3 LEFT"),
        same("BLMPOP -1 1 m3 LEFT"),
        same("BLMPOP -1 0 m3 LEFT"),
        same("BLMPOP x 1 m3 UP"),
        same("BLMPOP x 1 m3 LEFT"),
        same("BLMPOP 0 1 m3"),
        // MULTI: the blocking forms do not wait.
        same("MULTI"),
        same("BLMOVE empty bdst LEFT LEFT 0"),
        same("BRPOPLPUSH empty bdst 0"),
        same("BLMPOP 0 1 empty LEFT"),
        same("EXEC"),
        // LSET.
        same("RPUSH s a b c"),
        same("LSET s 0 A"),
        same("LSET s -1 C"),
        same("LSET s 3 x"),
        same("LSET s -4 x"),
        same("LSET s x x"),
        same("LSET nosuch 0 x"),
        same("LSET nosuch x x"),
        same("LSET str 0 x"),
        same("LRANGE s 0 -1"),
        // LINSERT.
        same("LINSERT s BEFORE b b0"),
        same("LINSERT s after C z"),
        same("LINSERT s AFTER nope z"),
        same("LINSERT nosuch BEFORE a b"),
        same("LINSERT s MIDDLE a b"),
        same("LINSERT str BEFORE a b"),
        same("LRANGE s 0 -1"),
        // LREM.
        same("RPUSH r a b a c a b a"),
        same("LREM r 2 a"),
        same("LRANGE r 0 -1"),
        same("LREM r -1 a"),
        same("LRANGE r 0 -1"),
        same("LREM r 0 b"),
        same("LREM r 0 nope"),
        same("LREM r x a"),
        same("LREM nosuch 0 a"),
        same("LREM str 0 a"),
        same("LREM r 0 a"),
        same("LREM r 0 c"),
        same("EXISTS r"),
        // LTRIM.
        same("RPUSH t 0 1 2 3 4 5 6 7 8 9"),
        same("LTRIM t 1 -2"),
        same("LRANGE t 0 -1"),
        same("LTRIM t -100 100"),
        same("LRANGE t 0 -1"),
        same("LTRIM t 2 1"),
        same("EXISTS t"),
        same("RPUSH t a b c"),
        same("LTRIM t 5 10"),
        same("EXISTS t"),
        same("RPUSH t a b c"),
        same("LTRIM t -2 -1"),
        same("LRANGE t 0 -1"),
        same("LTRIM t x 1"),
        same("LTRIM nosuch 0 1"),
        same("LTRIM str 0 1"),
        // LPOS.
        same("RPUSH p a b c a b c a"),
        same("LPOS p a"),
        same("LPOS p c"),
        same("LPOS p z"),
        same("LPOS p a RANK 2"),
        same("LPOS p a RANK -1"),
        same("LPOS p a RANK -2"),
        same("LPOS p a RANK 5"),
        same("LPOS p a COUNT 0"),
        same("LPOS p a COUNT 2"),
        same("LPOS p a COUNT 2 RANK -1"),
        same("LPOS p a COUNT 0 RANK 2"),
        same("LPOS p a MAXLEN 3"),
        same("LPOS p a MAXLEN 3 COUNT 0"),
        same("LPOS p a RANK -1 MAXLEN 2 COUNT 0"),
        same("LPOS p z COUNT 1"),
        same("LPOS nosuch a"),
        same("LPOS nosuch a COUNT 1"),
        same("LPOS p a RANK 0"),
        same("LPOS p a RANK x"),
        same("LPOS p a RANK -9223372036854775808"),
        same("LPOS p a RANK -9223372036854775808 COUNT 2"),
        same("LPOS p a COUNT -1"),
        same("LPOS p a COUNT x"),
        same("LPOS p a MAXLEN -1"),
        same("LPOS p a FOO 1"),
        same("LPOS p a RANK"),
        same("LPOS p a RANK 1 RANK 2"),
        same("LPOS str a"),
        same("LPOS p"),
        // Arity.
        same("LMOVE a b LEFT"),
        same("RPOPLPUSH a"),
        same("LSET a 0"),
        same("LINSERT a BEFORE x"),
        same("LREM a 0"),
        same("LTRIM a 0"),
    ]
}

#[test]
fn lists_resp2() {
    diff(2, &list_steps());
}

#[test]
fn lists_resp3() {
    diff(3, &list_steps());
}

fn hash_steps() -> Vec<Step> {
    vec![
        // HSTRLEN.
        same("HSET h f hello g 12345 e"),
        same_args(&[b"HSET", b"h", b"empty", b""]),
        same("HSTRLEN h f"),
        same("HSTRLEN h g"),
        same("HSTRLEN h empty"),
        same("HSTRLEN h nosuch"),
        same("HSTRLEN nosuch f"),
        same("SET str v"),
        same("HSTRLEN str f"),
        same("HSTRLEN h"),
        // HINCRBYFLOAT: Redis computes in long double.
        same("HINCRBYFLOAT n f 12345.1"),
        same("HINCRBYFLOAT n f 0.1"),
        same("HINCRBYFLOAT n f 0.1"),
        same("HINCRBYFLOAT n g 0.1"),
        same("HINCRBYFLOAT n g 0.2"),
        same("HSET n x 10.50"),
        same("HINCRBYFLOAT n x 0.1"),
        same("HINCRBYFLOAT n x -5"),
        same("HSET n y 5.0e3"),
        same("HINCRBYFLOAT n y 2.0e2"),
        same("HINCRBYFLOAT n z 1e20"),
        same("HINCRBYFLOAT n z 12345.4"),
        same("HINCRBYFLOAT n w 3"),
        same("HINCRBYFLOAT n w -3"),
        same("HINCRBYFLOAT n w -0.000000000000000001"),
        same("HINCRBYFLOAT n v -1.5"),
        same("HINCRBYFLOAT n v 1e-30"),
        same("HINCRBYFLOAT nb u 1e300"),
        same("HINCRBYFLOAT n t 1."),
        same("HINCRBYFLOAT n t .5"),
        same("HINCRBYFLOAT n t +2"),
        same("HINCRBYFLOAT n t 1E2"),
        same("HINCRBYFLOAT nb s 1.1e4932"),
        same("HINCRBYFLOAT nb s 1.1e4932"),
        same("HINCRBYFLOAT n t abc"),
        same("HINCRBYFLOAT n t inf"),
        same("HINCRBYFLOAT n t -infinity"),
        same("HINCRBYFLOAT n t nan"),
        same("HINCRBYFLOAT n t 1e5000"),
        same("HINCRBYFLOAT n t 1e"),
        same_args(&[b"HINCRBYFLOAT", b"n", b"t", b" 1"]),
        same_args(&[b"HINCRBYFLOAT", b"n", b"t", b"1 "]),
        same_args(&[b"HINCRBYFLOAT", b"n", b"t", b""]),
        same("HSET n bad abc"),
        same("HINCRBYFLOAT n bad 1"),
        same_args(&[b"HSET", b"n", b"sp", b"  1"]),
        same("HINCRBYFLOAT n sp 1"),
        same("HINCRBYFLOAT str f 1"),
        // (Values over 64 bytes make a Redis hash a hashtable, with its own order: those are
        // in `nb`, read field by field.)
        same("HGETALL n"),
        same("HGET nb u"),
        same("HGET nb s"),
        same("HINCRBYFLOAT n f"),
        // HRANDFIELD: the deterministic cases exactly.
        same("HSET r a 1 b 2 c 3"),
        same("HRANDFIELD nosuch"),
        same("HRANDFIELD nosuch 5"),
        same("HRANDFIELD nosuch -5 WITHVALUES"),
        same("HRANDFIELD r 0"),
        same("HRANDFIELD r 0 WITHVALUES"),
        same("HRANDFIELD r 3"),
        same("HRANDFIELD r 10"),
        same("HRANDFIELD r 3 WITHVALUES"),
        same("HRANDFIELD r 100 withvalues"),
        same("HRANDFIELD r x"),
        same("HRANDFIELD r 1 FOO"),
        same("HRANDFIELD r 1 WITHVALUES x"),
        same("HRANDFIELD r -9223372036854775808"),
        same("HRANDFIELD r -9223372036854775807 WITHVALUES"),
        same("HRANDFIELD r 4611686018427387904 WITHVALUES"),
        same("HRANDFIELD str"),
        same("HRANDFIELD str 1"),
        same("HSET single only v"),
        same("HRANDFIELD single"),
        same("HRANDFIELD single -3"),
        same("HRANDFIELD single -2 WITHVALUES"),
        // HSCAN of a small hash: everything at once, cursor 0.
        same("HSET sc alpha 1 beta 2 gamma 3 delta 4"),
        same("HSCAN sc 0"),
        same("HSCAN sc 0 COUNT 1"),
        same("HSCAN sc 0 MATCH *a"),
        same("HSCAN sc 0 match ?e* count 100"),
        same("HSCAN sc 0 MATCH *"),
        same("HSCAN sc 0 MATCH [ab]*"),
        same("HSCAN sc 7"),
        same("HSCAN sc -1"),
        same("HSCAN sc x"),
        same("HSCAN sc 18446744073709551616"),
        same("HSCAN sc 0 COUNT 0"),
        same("HSCAN sc 0 COUNT x"),
        same("HSCAN sc 0 COUNT"),
        same("HSCAN sc 0 FOO bar"),
        same("HSCAN sc 0 NOVALUES"),
        same("HSCAN sc 0 TYPE string"),
        same("HSCAN nosuch 0"),
        same("HSCAN nosuch 0 COUNT 0"),
        same("HSCAN str 0"),
        same("HSCAN sc"),
    ]
}

#[test]
fn hashes_resp2() {
    diff(2, &hash_steps());
}

#[test]
fn hashes_resp3() {
    diff(3, &hash_steps());
}

/// Flat bulk strings of a RESP2 array reply (nested arrays flattened).
fn bulks(reply: &[u8]) -> Vec<Vec<u8>> {
    use redis_protocol::resp2::types::OwnedFrame as F;
    fn walk(f: &F, out: &mut Vec<Vec<u8>>) {
        match f {
            F::BulkString(b) => out.push(b.clone()),
            F::Array(items) => items.iter().for_each(|i| walk(i, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(&decode2(reply), &mut out);
    out
}

/// Random HRANDFIELD replies: Redis and Palisade agree on shape, size, membership and (for
/// positive counts) distinctness; the draws themselves are random in Redis.
#[test]
fn hrandfield_random_replies_have_redis_properties() {
    let redis = RedisServer::start_with(&[]);
    let pal = Server::start();
    for mut c in [redis.conn(), pal.conn()] {
        c.c("HSET h a 1 b 2 c 3 d 4 e 5 f 6");
        let fields: BTreeSet<Vec<u8>> = ["a", "b", "c", "d", "e", "f"]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect();
        let one = as_bulk(&c.c("HRANDFIELD h")).expect("one field");
        assert!(fields.contains(&one));
        let some = bulks(&c.c("HRANDFIELD h 4"));
        assert_eq!(some.len(), 4);
        assert_eq!(some.iter().collect::<BTreeSet<_>>().len(), 4, "distinct");
        assert!(some.iter().all(|f| fields.contains(f)));
        let draws = bulks(&c.c("HRANDFIELD h -25"));
        assert_eq!(draws.len(), 25);
        assert!(draws.iter().all(|f| fields.contains(f)));
        let pairs = bulks(&c.c("HRANDFIELD h -7 WITHVALUES"));
        assert_eq!(pairs.len(), 14);
        for p in pairs.chunks(2) {
            assert!(fields.contains(&p[0]));
            let want = (p[0][0] - b'a' + b'1') as char;
            assert_eq!(p[1], want.to_string().into_bytes(), "value of its field");
        }
        // RESP3: WITHVALUES is an array of [field, value] arrays.
        c.c("HELLO 3");
        let r = c.c("HRANDFIELD h 2 WITHVALUES");
        assert!(r.starts_with(b"*2\r\n*2\r\n$1\r\n"), "{}", show(&r));
    }
}

/// A hash Redis keeps as a hashtable (more than 128 fields): HSCAN pages until cursor 0
/// and covers every field, with the right values.
#[test]
fn hscan_of_a_large_hash_covers_every_field() {
    let redis = RedisServer::start_with(&[]);
    let pal = Server::start();
    for mut c in [redis.conn(), pal.conn()] {
        let mut args: Vec<String> = vec!["HSET".into(), "big".into()];
        for i in 0..300 {
            args.push(format!("f{i}"));
            args.push(format!("v{i}"));
        }
        c.cmd(&args);
        let mut seen = BTreeSet::new();
        let mut cursor = b"0".to_vec();
        for _ in 0..1000 {
            let r = c.cmd(&[b"HSCAN".as_slice(), b"big", &cursor, b"COUNT", b"50"]);
            let items = bulks(&r);
            cursor = items[0].clone();
            for p in items[1..].chunks(2) {
                let f = String::from_utf8_lossy(&p[0]).into_owned();
                assert_eq!(format!("v{}", &f[1..]).into_bytes(), p[1]);
                seen.insert(f);
            }
            if cursor == b"0" {
                break;
            }
        }
        assert_eq!(cursor, b"0".to_vec(), "the scan ends");
        assert_eq!(seen.len(), 300);
    }
}
