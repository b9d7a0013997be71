//! Differential tests for issue 14's keys and strings: RENAME, RENAMENX, COPY, RANDOMKEY,
//! TOUCH, EXPIRETIME, PEXPIRETIME, MGET, MSET, MSETNX, GETSET, GETEX, APPEND, STRLEN,
//! GETRANGE, SETRANGE, SUBSTR, INCRBYFLOAT, SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP and LCS,
//! against redis-server in RESP2 and RESP3 (see `differential.rs`). Also: fences stay with
//! their key names across RENAME (Palisade's own rule, docs/locks-and-fencing.md).

use crate::common::*;
use crate::differential::{diff, int_in, same, same_args, Step};

// ---------------------------------------------------------------------------------------
// RENAME, RENAMENX, COPY
// ---------------------------------------------------------------------------------------

fn rename_steps() -> Vec<Step> {
    vec![
        same("RENAME nosuch b"),
        same("RENAMENX nosuch b"),
        same("SET a 1"),
        same("RENAME a a"),
        same("RENAMENX a a"),
        same("RENAME a b"),
        same("EXISTS a"),
        same("GET b"),
        same("SET a 2 EX 100"),
        same("RENAME a b"),
        same("TTL b"),
        same("GET b"),
        same("SET c 3"),
        same("RENAMENX b c"),
        same("RENAMENX b d"),
        same("TTL d"),
        same("GET c"),
        same("HSET h f v"),
        same("RENAME h c"),
        same("TYPE c"),
        same("HGET c f"),
        same("RPUSH l x y z"),
        same("RENAME l l2"),
        same("LRANGE l2 0 -1"),
        // (KEYS order is a hash order in Redis: count and probe instead.)
        same("DBSIZE"),
        same("EXISTS a b c d h l l2"),
        // COPY.
        same("COPY nosuch x"),
        same("COPY d d"),
        same("COPY d e"),
        same("GET e"),
        same("TTL e"),
        same("COPY d e"),
        same("COPY c e"),
        same("COPY c e REPLACE"),
        same("TYPE e"),
        same("HGET e f"),
        same("HSET e g w"),
        same("HLEN c"),
        same("COPY l2 l3 DB 0"),
        same("COPY l2 l3 db 0 replace"),
        same("LRANGE l3 0 -1"),
        same("COPY d e DB"),
        same("COPY d e DB x"),
        same("COPY d e DB 99999999999"),
        same("COPY d e DB 16"),
        same("COPY d e DB -1"),
        same("COPY d d DB 0"),
        same("COPY d e FOO"),
        same("SET sx v PX 50"),
        Step::Sleep(80),
        same("RENAME sx sy"),
        same("COPY sx sy"),
        same("RENAME"),
        same("RENAME a"),
        same("RENAME a b c"),
        same("RENAMENX a"),
        same("COPY a"),
    ]
}

#[test]
fn rename_and_copy_resp2() {
    diff(2, &rename_steps());
}

#[test]
fn rename_and_copy_resp3() {
    diff(3, &rename_steps());
}

// ---------------------------------------------------------------------------------------
// RANDOMKEY, TOUCH, EXPIRETIME, PEXPIRETIME
// ---------------------------------------------------------------------------------------

fn key_info_steps() -> Vec<Step> {
    let s = unix_ms() / 1000;
    vec![
        same("RANDOMKEY"),
        same("SET only v"),
        // With one key the draw has one outcome (with more, see `randomkey_draws_live_keys`).
        same("RANDOMKEY"),
        same("TOUCH only"),
        same("TOUCH only only nosuch"),
        same("EXPIRETIME only"),
        same("PEXPIRETIME only"),
        same("EXPIRETIME nosuch"),
        same("PEXPIRETIME nosuch"),
        same("SET far v EXAT 4000000000"),
        same("EXPIRETIME far"),
        same("SET farms v PXAT 4000000000123"),
        // Deadlines are kept in cluster time: milliseconds can differ by the clock read.
        int_in("PEXPIRETIME farms", 4000000000073..=4000000000173),
        same("EXPIRETIME farms"),
        same("EXPIRE only 100"),
        int_in("EXPIRETIME only", s + 99..=s + 103),
        same("PERSIST only"),
        same("EXPIRETIME only"),
        same("HSET h f v"),
        same("EXPIRETIME h"),
        same("TOUCH h"),
        same("RANDOMKEY x"),
        same("TOUCH"),
        same("EXPIRETIME"),
        same("EXPIRETIME a b"),
        same("PEXPIRETIME"),
    ]
}

#[test]
fn key_info_resp2() {
    diff(2, &key_info_steps());
}

#[test]
fn key_info_resp3() {
    diff(3, &key_info_steps());
}

/// Redis's RANDOMKEY is random, so only properties are compared: every draw names a live
/// key, and an expired key is never drawn.
#[test]
fn randomkey_draws_live_keys() {
    let pal = Server::start();
    let mut c = pal.conn();
    for k in ["a", "b", "c", "d"] {
        c.cmd(&["SET", k, "v"]);
    }
    c.c("SET gone v PX 20");
    std::thread::sleep(std::time::Duration::from_millis(60));
    let mut seen = std::collections::BTreeSet::new();
    for i in 0..40 {
        // A write between draws moves the revision the draw is seeded with.
        c.cmd(&["SET", "z", &i.to_string()]);
        let got = as_bulk(&c.c("RANDOMKEY")).expect("a key");
        let got = String::from_utf8(got).expect("utf-8");
        assert!(
            ["a", "b", "c", "d", "z"].contains(&got.as_str()),
            "drew {got}"
        );
        seen.insert(got);
    }
    assert!(seen.len() >= 3, "draws are spread out: {seen:?}");
}

// ---------------------------------------------------------------------------------------
// MGET, MSET, MSETNX, GETSET, GETEX
// ---------------------------------------------------------------------------------------

fn multi_steps() -> Vec<Step> {
    vec![
        same("MSET a 1 b 2 c 3"),
        same("MGET a b c nosuch"),
        same("MSET a 10 a 11"),
        same("GET a"),
        same("HSET h f v"),
        same("MGET a h b"),
        same("MSET h str"),
        same("TYPE h"),
        same("SET t v EX 100"),
        same("MSET t w"),
        same("TTL t"),
        same("MSETNX a 1 new 2"),
        same("EXISTS new"),
        same("MSETNX n1 1 n2 2"),
        same("MGET n1 n2"),
        same("MSETNX n3 1 n3 2"),
        same("GET n3"),
        same("MSET a"),
        same("MSET a 1 b"),
        same("MSETNX a"),
        same("MSETNX a 1 b"),
        same("MGET"),
        // GETSET.
        same("GETSET g 1"),
        same("SET g 2 EX 100"),
        same("GETSET g 3"),
        same("TTL g"),
        same("GET g"),
        same("RPUSH l x"),
        same("GETSET l v"),
        same("GETSET g"),
        // GETEX.
        same("GETEX nosuch"),
        same("GETEX nosuch EX 100"),
        same("GETEX nosuch EX abc"),
        same("GETEX nosuch EX 0"),
        same("SET e v"),
        same("GETEX e"),
        same("TTL e"),
        same("GETEX e EX 100"),
        same("TTL e"),
        same("GETEX e PX 50000"),
        int_in("PTTL e", 49_000..=50_000),
        same("GETEX e ex 200 EX 300"),
        same("TTL e"),
        same("GETEX e PERSIST"),
        same("TTL e"),
        same("GETEX e PERSIST PERSIST"),
        same("GETEX e EXAT 4000000000"),
        same("EXPIRETIME e"),
        same("GETEX e PXAT 1"),
        same("EXISTS e"),
        same("SET e v"),
        same("GETEX e EXAT 1"),
        same("EXISTS e"),
        same("SET e v"),
        same("GETEX e EX 0"),
        same("GETEX e EX -1"),
        same("GETEX e PX abc"),
        same("GETEX e EX 9223372036854775807"),
        same("GETEX e EX 10 PX 10"),
        same("GETEX e PERSIST EX 10"),
        same("GETEX e EX 10 PERSIST"),
        same("GETEX e EX"),
        same("GETEX e KEEPTTL"),
        same("GETEX e NX"),
        same("GETEX l"),
        same("GETEX l EX abc"),
        same("TTL e"),
        same("GETEX"),
    ]
}

#[test]
fn mget_mset_getset_getex_resp2() {
    diff(2, &multi_steps());
}

#[test]
fn mget_mset_getset_getex_resp3() {
    diff(3, &multi_steps());
}

// ---------------------------------------------------------------------------------------
// APPEND, STRLEN, GETRANGE, SUBSTR, SETRANGE
// ---------------------------------------------------------------------------------------

fn string_steps() -> Vec<Step> {
    vec![
        same("APPEND s hello"),
        same("APPEND s _world"),
        same("GET s"),
        same("STRLEN s"),
        same("STRLEN nosuch"),
        same("SET t 12 EX 100"),
        same("APPEND t 34"),
        same("TTL t"),
        same("GET t"),
        same("GETRANGE s 0 4"),
        same("GETRANGE s -5 -1"),
        same("GETRANGE s 0 -1"),
        same("GETRANGE s -1 -5"),
        same("GETRANGE s 5 3"),
        same("GETRANGE s 100 200"),
        same("GETRANGE s -100 2"),
        same("GETRANGE s 3 100"),
        same("GETRANGE nosuch 0 -1"),
        same("GETRANGE s a 1"),
        same("GETRANGE s 0 b"),
        same("SUBSTR s 1 3"),
        same("SUBSTR s -3 -1"),
        same_args(&[b"SET", b"empty", b""]),
        same("GETRANGE empty 0 -1"),
        same("STRLEN empty"),
        same("SETRANGE s 6 WORLD"),
        same("GET s"),
        same("SETRANGE s 20 !"),
        same("GET s"),
        same("STRLEN s"),
        same("SETRANGE new 3 abc"),
        same("GET new"),
        same_args(&[b"SETRANGE", b"none", b"5", b""]),
        same("EXISTS none"),
        same_args(&[b"SETRANGE", b"s", b"5", b""]),
        same("SETRANGE t 0 x"),
        same("TTL t"),
        same("SETRANGE s -1 x"),
        same("SETRANGE s abc x"),
        // Redis's 512 MB string limit (proto-max-bulk-len), without allocating it.
        same("SETRANGE big 536870912 x"),
        same("SETRANGE big 536870911 xy"),
        same("SETRANGE big 9223372036854775807 x"),
        same_args(&[b"SETRANGE", b"big", b"536870912", b""]),
        same("EXISTS big"),
        same("HSET h f v"),
        same("APPEND h x"),
        same("STRLEN h"),
        same("GETRANGE h 0 1"),
        same("SETRANGE h 0 x"),
        same_args(&[b"SETRANGE", b"h", b"0", b""]),
        same("APPEND"),
        same("APPEND a"),
        same("STRLEN"),
        same("GETRANGE s 0"),
        same("SUBSTR s 0"),
        same("SETRANGE s 0"),
    ]
}

#[test]
fn string_edits_resp2() {
    diff(2, &string_steps());
}

#[test]
fn string_edits_resp3() {
    diff(3, &string_steps());
}

// ---------------------------------------------------------------------------------------
// INCRBYFLOAT: long double arithmetic and "%.17Lf" output
// ---------------------------------------------------------------------------------------

/// Increments tried on a fresh key and accumulated on one key: decimal fractions whose
/// binary forms round differently in 64 and 80 bits, exponents, hex floats, huge and tiny
/// values, signs and cancellation.
const FLOATS: &[&str] = &[
    "0.1",
    "0.2",
    "0.3",
    "1.1",
    "10.5",
    "-0.5",
    "3.0e3",
    "5.0e-3",
    "1e20",
    "1e-17",
    "0.000000000000000005",
    "0.000000000000000015",
    "3.0000000000000000005",
    "123456789.987654321",
    "-98765.4321",
    "1.7976931348623157e308",
    "-1.7976931348623157e308",
    "2.2250738585072014e-308",
    "1e-4940",
    "1e4000",
    "0x1p-3",
    "0x1.8p1",
    "0X.8P1",
    "+.5",
    "5.",
    ".5e1",
    "0.00001",
    "9007199254740993",
    "18446744073709551617",
    "0.1e-2",
    "7",
    "-7",
    "1e-30",
    "3.14159265358979323846264338327950288",
    "1e+5",
    "0.3333333333333333333333",
];

fn float_steps() -> Vec<Step> {
    let mut steps = Vec::new();
    for (i, f) in FLOATS.iter().enumerate() {
        steps.push(same(&format!("INCRBYFLOAT fresh{i} {f}")));
        steps.push(same(&format!("INCRBYFLOAT acc {f}")));
        steps.push(same(&format!("SET s{i} {f}")));
        steps.push(same(&format!("INCRBYFLOAT s{i} 0.1")));
    }
    for _ in 0..12 {
        steps.push(same("INCRBYFLOAT tenths 0.1"));
    }
    // Pseudo-random decimals over a wide range of digits and exponents (reproducible).
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    for i in 0..150 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let digits = 1 + (x % 19) as u32;
        let mantissa = (x >> 8) % 10u64.pow(digits);
        let exp = ((x >> 40) % 60) as i64 - 40;
        let sign = if x & 1 == 1 { "-" } else { "" };
        let f = format!("{sign}{mantissa}e{exp}");
        steps.push(same(&format!("INCRBYFLOAT r{} {f}", i % 7)));
        steps.push(same(&format!("INCRBYFLOAT rnd{i} {f}")));
    }
    steps.extend([
        same("GET acc"),
        same("SET i 10"),
        same("INCRBYFLOAT i 0.5"),
        same("INCRBYFLOAT i -10.5"),
        same("GET i"),
        same("SET t 1.5 EX 100"),
        same("INCRBYFLOAT t 1"),
        same("TTL t"),
        // Refusals.
        same("INCRBYFLOAT x inf"),
        same("INCRBYFLOAT x -infinity"),
        same("INCRBYFLOAT x nan"),
        same("INCRBYFLOAT x abc"),
        same("INCRBYFLOAT x 1e"),
        same("INCRBYFLOAT x 1e+"),
        same("INCRBYFLOAT x ."),
        same("INCRBYFLOAT x 0x"),
        same("INCRBYFLOAT x 1e5000"),
        same("INCRBYFLOAT x 1e-5000"),
        same("INCRBYFLOAT x 1.5.5"),
        same_args(&[b"INCRBYFLOAT", b"x", b" 1"]),
        same_args(&[b"INCRBYFLOAT", b"x", b"1 "]),
        same_args(&[b"INCRBYFLOAT", b"x", b""]),
        same("EXISTS x"),
        same("SET big 1e4932"),
        same("INCRBYFLOAT big 1e4932"),
        same("SET word abc"),
        same("INCRBYFLOAT word 1"),
        same("HSET h f v"),
        same("INCRBYFLOAT h abc"),
        same("INCRBYFLOAT"),
        same("INCRBYFLOAT a"),
        same("INCRBYFLOAT a 1 2"),
    ]);
    steps
}

#[test]
fn incrbyfloat_resp2() {
    diff(2, &float_steps());
}

#[test]
fn incrbyfloat_resp3() {
    diff(3, &float_steps());
}

// ---------------------------------------------------------------------------------------
// SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP
// ---------------------------------------------------------------------------------------

fn bit_steps() -> Vec<Step> {
    vec![
        same("SETBIT b 7 1"),
        same("SETBIT b 7 1"),
        same("SETBIT b 7 0"),
        same("SETBIT b 100 1"),
        same("GET b"),
        same("STRLEN b"),
        same("GETBIT b 100"),
        same("GETBIT b 99"),
        same("GETBIT b 100000"),
        same("GETBIT nosuch 0"),
        same("SETBIT z 0 0"),
        same("GET z"),
        same("SETBIT b -1 1"),
        same("SETBIT b x 1"),
        same("SETBIT b 1 2"),
        same("SETBIT b 1 -1"),
        same("SETBIT b 1 x"),
        // Redis's limit: the byte offset must be below 512 MB.
        same("SETBIT b 4294967296 1"),
        same("SETBIT b 9223372036854775807 1"),
        same("GETBIT b 4294967296"),
        same("GETBIT b -1"),
        same("SET t x EX 100"),
        same("SETBIT t 0 1"),
        same("TTL t"),
        same("GET t"),
        // BITCOUNT.
        same("SET f foobar"),
        same("BITCOUNT f"),
        same("BITCOUNT f 0 0"),
        same("BITCOUNT f 1 1"),
        same("BITCOUNT f 1 1 BYTE"),
        same("BITCOUNT f 5 30 BIT"),
        same("BITCOUNT f 5 30 bit"),
        same("BITCOUNT f -5 -1 BIT"),
        same("BITCOUNT f -1 -2"),
        same("BITCOUNT f -2 -1"),
        same("BITCOUNT f 0 100"),
        same("BITCOUNT f -100 -1"),
        same("BITCOUNT f 10 5"),
        same("BITCOUNT f 0 -1 BIT"),
        same("BITCOUNT f 7 7 BIT"),
        same("BITCOUNT f 1"),
        same("BITCOUNT f 0 1 FOO"),
        same("BITCOUNT f a 1"),
        same("BITCOUNT f 0 1 BIT x"),
        same("BITCOUNT nosuch"),
        same("BITCOUNT nosuch 0 1"),
        same_args(&[b"SET", b"empty", b""]),
        same("BITCOUNT empty"),
        same("BITCOUNT empty 0 -1 BIT"),
        // BITPOS.
        same_args(&[b"SET", b"p", b"\xff\xf0\x00"]),
        same("BITPOS p 0"),
        same("BITPOS p 1"),
        same("BITPOS p 1 1"),
        same("BITPOS p 0 1"),
        same("BITPOS p 1 2"),
        same("BITPOS p 0 0 0"),
        same("BITPOS p 0 0 -1"),
        same("BITPOS p 1 -1"),
        same("BITPOS p 1 3 BIT"),
        same("BITPOS p 1 0 -1 BIT"),
        same("BITPOS p 0 5 12 BIT"),
        same("BITPOS p 0 12 12 BIT"),
        same("BITPOS p 1 12 23 BIT"),
        same("BITPOS p 0 0 7 BIT"),
        same("BITPOS p 1 100"),
        same("BITPOS p 1 2 1"),
        same_args(&[b"SET", b"ones", b"\xff\xff"]),
        same("BITPOS ones 0"),
        same("BITPOS ones 0 0"),
        same("BITPOS ones 0 0 -1"),
        same("BITPOS ones 0 3 BIT"),
        same("BITPOS ones 0 0 -1 BIT"),
        same("BITPOS ones 1"),
        same("BITPOS nosuch 0"),
        same("BITPOS nosuch 1"),
        same("BITPOS nosuch 1 x"),
        same("BITPOS p 2"),
        same("BITPOS p x"),
        same("BITPOS p 1 x"),
        same("BITPOS p 1 0 x"),
        same("BITPOS p 1 0 1 FOO"),
        same("BITPOS p 1 0 1 BIT x"),
        same("BITPOS empty 0"),
        same("BITPOS empty 1"),
        // BITOP.
        same("SET k1 foobar"),
        same("SET k2 abcdef"),
        same("SET k3 xy"),
        same("BITOP AND d k1 k2"),
        same("GET d"),
        same("BITOP OR d k1 k2 k3"),
        same("GET d"),
        same("BITOP XOR d k1 k3"),
        same("GET d"),
        same("BITOP NOT d k1"),
        same("GET d"),
        same("BITOP and d k1 nosuch"),
        same("GET d"),
        same("SET d v EX 100"),
        same("BITOP or d k3"),
        same("TTL d"),
        same("BITOP AND d nosuch nosuch2"),
        same("EXISTS d"),
        same("BITOP NOT d k1 k2"),
        same("BITOP FOO d k1"),
        same("HSET h f v"),
        same("BITOP AND d k1 h"),
        same("SETBIT h 0 1"),
        same("GETBIT h 0"),
        same("BITCOUNT h"),
        same("BITPOS h 1"),
        same("BITOP AND d"),
        same("BITOP AND"),
        same("SETBIT b 1"),
        same("GETBIT b"),
        same("BITCOUNT"),
        same("BITPOS b"),
    ]
}

#[test]
fn bitmaps_resp2() {
    diff(2, &bit_steps());
}

#[test]
fn bitmaps_resp3() {
    diff(3, &bit_steps());
}

// ---------------------------------------------------------------------------------------
// LCS
// ---------------------------------------------------------------------------------------

fn lcs_steps() -> Vec<Step> {
    vec![
        same("MSET key1 ohmytext key2 mynewtext"),
        same("LCS key1 key2"),
        same("LCS key1 key2 LEN"),
        same("LCS key1 key2 IDX"),
        same("LCS key1 key2 IDX MINMATCHLEN 4"),
        same("LCS key1 key2 IDX MINMATCHLEN 4 WITHMATCHLEN"),
        same("LCS key1 key2 idx withmatchlen"),
        same("LCS key1 key2 WITHMATCHLEN"),
        same("LCS key1 key2 MINMATCHLEN -5 IDX"),
        same("LCS key1 key2 LEN IDX"),
        same("LCS key1 key2 MINMATCHLEN"),
        same("LCS key1 key2 MINMATCHLEN x"),
        same("LCS key1 key2 FOO"),
        same("LCS key1 nosuch"),
        same("LCS nosuch nosuch2 IDX"),
        same("LCS key1 key1 IDX WITHMATCHLEN"),
        same("MSET a abcabcabcabc b cbacbacbacba"),
        same("LCS a b"),
        same("LCS a b IDX WITHMATCHLEN"),
        same("LCS b a IDX"),
        same("MSET c GATTACAGATTACA d TAGACCATAGG"),
        same("LCS c d"),
        same("LCS c d IDX MINMATCHLEN 2 WITHMATCHLEN"),
        same("HSET h f v"),
        same("LCS key1 h"),
        same("LCS h key1 FOO"),
        same("LCS key1"),
        same("LCS"),
    ]
}

#[test]
fn lcs_resp2() {
    diff(2, &lcs_steps());
}

#[test]
fn lcs_resp3() {
    diff(3, &lcs_steps());
}

// ---------------------------------------------------------------------------------------
// Fences and RENAME (Palisade's own rule)
// ---------------------------------------------------------------------------------------

/// A fence belongs to the key name: after `RENAME a b`, a FENCEDSET on `a` below a's fence is
/// still refused, and b's fence did not drop (nor take a's); the same for COPY.
#[test]
fn rename_leaves_fences_with_their_names() {
    let pal = Server::start();
    let mut c = pal.conn();
    assert_reply(&c.c("FENCEDSET a v 40"), b"+OK\r\n", "fence a at 40");
    assert_reply(&c.c("FENCEDSET b w 20"), b"+OK\r\n", "fence b at 20");
    assert_reply(&c.c("RENAME a b"), b"+OK\r\n", "rename");
    assert_reply(&c.c("GET b"), &bulk_bytes(b"v"), "the value moved");
    assert_reply(&c.c("EXISTS a"), b":0\r\n", "the source is gone");
    assert_reply(
        &c.c("FENCEDSET a x 39"),
        &err_bytes("FENCED token 39 is lower than 40"),
        "a keeps its fence",
    );
    assert_reply(
        &c.c("FENCEDSET b x 19"),
        &err_bytes("FENCED token 19 is lower than 20"),
        "b's fence did not go down",
    );
    assert_reply(
        &c.c("FENCEDSET b y 21"),
        b"+OK\r\n",
        "b did not take a's fence",
    );
    assert_reply(&c.c("COPY b a"), b":1\r\n", "copy back");
    assert_reply(
        &c.c("FENCEDGET a 39"),
        &err_bytes("FENCED token 39 is lower than 40"),
        "a still keeps its fence",
    );
    assert_reply(&c.c("FENCEDGET a 40"), &bulk_bytes(b"y"), "a at its fence");
}

/// RENAME of a held lock removes the source as DEL does: a waiter queued on the source is
/// granted it, and the destination is a plain string (LOCK on it by the moved owner sees
/// its value as owner, with a new token).
#[test]
fn rename_of_a_lock_frees_it_for_its_waiters() {
    let pal = Server::start();
    let mut c = pal.conn();
    let t1 = as_int(&c.c("LOCK l A PX 10000"));
    let mut w = pal.conn();
    w.send(&["LOCK", "l", "B", "PX", "10000", "WAIT", "5000"]);
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_reply(&c.c("RENAME l moved"), b"+OK\r\n", "rename the lock");
    let t2 = as_int(&w.read_reply());
    assert!(
        t2 > t1,
        "the waiter got the lock with a new token: {t2} > {t1}"
    );
    assert_reply(&c.c("GET l"), &bulk_bytes(b"B"), "the waiter holds l");
    assert_reply(&c.c("GET moved"), &bulk_bytes(b"A"), "the value moved");
    let t3 = as_int(&c.c("LOCK moved A PX 1000"));
    assert!(t3 > t1, "moved is a new write: {t3} > {t1}");
}
