//! Differential tests of the set family and SORT against a real redis-server (7.0), in RESP2
//! and RESP3.
//!
//! Where Redis's reply order is reproducible, replies must be byte-identical: sets of
//! integers (Redis keeps them as intsets, listed in ascending order), one-member sets,
//! counts, errors, and SORT (its order is defined). Where it is not (the members of a
//! hashtable set, random draws), the replies are compared sorted, or by their properties
//! (count, membership, distinctness), and each such step says so.

use std::collections::BTreeSet;

use crate::common::*;
use crate::differential::{diff, run_steps, same, same_args, Step};

// ---------------------------------------------------------------------------------------
// A small RESP reader, for comparing unordered replies
// ---------------------------------------------------------------------------------------

/// One reply: its header line (type byte included) and its children (empty for scalars).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Node {
    head: Vec<u8>,
    data: Vec<u8>,
    kids: Vec<Node>,
}

fn line(b: &[u8], i: &mut usize) -> Vec<u8> {
    let end = b[*i..]
        .windows(2)
        .position(|w| w == b"\r\n")
        .expect("a CRLF")
        + *i;
    let l = b[*i..end].to_vec();
    *i = end + 2;
    l
}

fn node(b: &[u8], i: &mut usize) -> Node {
    let head = line(b, i);
    let n = || -> i64 { std::str::from_utf8(&head[1..]).unwrap().parse().unwrap() };
    let (mut data, mut kids) = (Vec::new(), Vec::new());
    match head[0] {
        b'$' | b'=' | b'!' if n() >= 0 => {
            let len = n() as usize;
            data = b[*i..*i + len].to_vec();
            *i += len + 2;
        }
        b'*' | b'~' | b'>' if n() >= 0 => kids = (0..n()).map(|_| node(b, i)).collect(),
        b'%' => kids = (0..2 * n()).map(|_| node(b, i)).collect(),
        _ => {}
    }
    Node { head, data, kids }
}

fn parse(b: &[u8]) -> Node {
    let mut i = 0;
    let n = node(b, &mut i);
    assert_eq!(i, b.len(), "trailing bytes in {}", show(b));
    n
}

/// The reply with its top-level elements sorted (an unordered collection).
fn sorted(b: &[u8]) -> Node {
    let mut n = parse(b);
    n.kids.sort();
    n
}

/// The members of a collection reply, as bytes.
fn members(n: &Node) -> Vec<Vec<u8>> {
    n.kids.iter().map(|k| k.data.clone()).collect()
}

/// Both servers, fresh, in `proto`.
fn pair(proto: u8) -> (RedisServer, Server, Conn, Conn) {
    let redis = RedisServer::start();
    let pal = Server::start();
    let (mut rc, mut pc) = (redis.conn(), pal.conn());
    if proto == 3 {
        rc.c("HELLO 3");
        pc.c("HELLO 3");
    }
    (redis, pal, rc, pc)
}

/// Runs `line` on both and requires the same reply once sorted (unordered collections).
fn same_sorted(rc: &mut Conn, pc: &mut Conn, line: &str, bad: &mut Vec<String>) {
    let (want, got) = (rc.c(line), pc.c(line));
    if sorted(&want) != sorted(&got) {
        bad.push(format!(
            "`{line}` (compared sorted)\n    redis:    {}\n    palisade: {}",
            show(&want),
            show(&got)
        ));
    }
}

fn both(rc: &mut Conn, pc: &mut Conn, line: &str) {
    let (want, got) = (rc.c(line), pc.c(line));
    assert_eq!(
        show(&want),
        show(&got),
        "setup step `{line}` differs from redis-server"
    );
}

// ---------------------------------------------------------------------------------------
// Byte-exact: integer sets, counts, errors, arity
// ---------------------------------------------------------------------------------------

fn exact_steps() -> Vec<Step> {
    vec![
        same("SADD i 10 3 -7 3 100000 2"),
        same("SMEMBERS i"),
        same("SCARD i"),
        same("SISMEMBER i 3"),
        same("SISMEMBER i 4"),
        same("SMISMEMBER i 3 4 10"),
        same("SMISMEMBER nokey a"),
        same("TYPE i"),
        same("OBJECT ENCODING i"),
        same("MEMORY USAGE i"),
        same("SADD i 10"),
        same("SREM i 10 11"),
        same("SREM i 999"),
        same("SREM nokey a"),
        same("SMEMBERS i"),
        same("SMEMBERS nokey"),
        same("SCARD nokey"),
        same("SISMEMBER nokey a"),
        // A one-member set has only one order.
        same("SADD one hello"),
        same("SMEMBERS one"),
        same("OBJECT ENCODING one"),
        same("MEMORY USAGE one"),
        same("SPOP one"),
        same("EXISTS one"),
        same("SPOP one"),
        same("SPOP one 3"),
        same("SPOP one 0"),
        same("SADD one hello"),
        same("SPOP one 5"),
        same("EXISTS one"),
        same("SRANDMEMBER nokey"),
        same("SRANDMEMBER nokey 5"),
        same("SRANDMEMBER nokey -5"),
        same("SRANDMEMBER i 0"),
        same("SRANDMEMBER i 100"),
        same("SADD one x"),
        same("SRANDMEMBER one"),
        same("SRANDMEMBER one -3"),
        same("SRANDMEMBER one 3"),
        // Removing the last member removes the key.
        same("SREM one x"),
        same("EXISTS one"),
        // Combinations of integer sets are intsets, listed in order.
        same("SADD j 3 4 5 -7"),
        same("SINTER i j"),
        same("SUNION i j"),
        same("SDIFF i j"),
        same("SDIFF j i"),
        same("SINTER i nokey"),
        same("SUNION nokey i"),
        same("SDIFF nokey i"),
        same("SINTERCARD 2 i j"),
        same("SINTERCARD 2 i j LIMIT 1"),
        same("SINTERCARD 2 i j limit 0"),
        same("SINTERCARD 1 i"),
        same("SINTERCARD 2 i nokey"),
        same("SINTERSTORE dst i j"),
        same("SMEMBERS dst"),
        same("SUNIONSTORE dst i j"),
        same("SMEMBERS dst"),
        same("SDIFFSTORE dst i j"),
        same("SMEMBERS dst"),
        same("SET dst str"),
        same("EXPIRE dst 100"),
        same("SINTERSTORE dst i j"),
        same("TTL dst"),
        same("TYPE dst"),
        same("SINTERSTORE dst i nokey"),
        same("EXISTS dst"),
        same("SUNIONSTORE i2 i"),
        same("SMEMBERS i2"),
        same("SDIFFSTORE i2 i i"),
        same("EXISTS i2"),
        // SMOVE.
        same("SMOVE i j 100000"),
        same("SMOVE i j 100000"),
        same("SMEMBERS i"),
        same("SMEMBERS j"),
        same("SMOVE i newset 2"),
        same("SMEMBERS newset"),
        same("SMOVE newset i 2"),
        same("EXISTS newset"),
        same("SMOVE i i 3"),
        same("SMOVE i i 42"),
        same("SMOVE nokey i 3"),
        // SSCAN on an intset: everything in one call, cursor 0.
        same("SSCAN i 0"),
        same("SSCAN i 0 MATCH 1*"),
        same("SSCAN i 0 COUNT 1"),
        same("SSCAN i 0 match -* count 100"),
        same("SSCAN nokey 0"),
        same("SSCAN nokey 0 BADOPT"),
        same("SSCAN i 0 BADOPT"),
        same("SSCAN i 0 COUNT 0"),
        same("SSCAN i 0 COUNT x"),
        same("SSCAN i 0 MATCH"),
        same("SSCAN i x"),
        same("SSCAN i -1"),
        same("SSCAN i 18446744073709551616"),
        // Wrong types.
        same("SET s str"),
        same("RPUSH l a"),
        same("SADD s a"),
        same("SREM s a"),
        same("SMEMBERS s"),
        same("SISMEMBER l a"),
        same("SMISMEMBER l a"),
        same("SCARD s"),
        same("SPOP s"),
        same("SPOP l 2"),
        same("SRANDMEMBER s"),
        same("SRANDMEMBER s 2"),
        same("SMOVE s i a"),
        same("SMOVE i s 3"),
        same("SMOVE nokey s 3"),
        same("SINTER i s"),
        same("SINTER nokey s"),
        same("SUNION i l"),
        same("SDIFF nokey l"),
        same("SINTERCARD 2 i s"),
        same("SINTERSTORE d i s"),
        same("SUNIONSTORE d l"),
        same("SDIFFSTORE d i l"),
        same("SSCAN s 0"),
        same("SSCAN s x"),
        same("HSET h f v"),
        same("SADD h a"),
        // Bad counts and options.
        same("SPOP i -1"),
        same("SPOP i x"),
        same("SPOP i 1 2"),
        same("SRANDMEMBER i x"),
        same("SRANDMEMBER i 1 2"),
        same("SRANDMEMBER i -9223372036854775808"),
        same("SINTERCARD 0 i"),
        same("SINTERCARD x i"),
        same("SINTERCARD -1 i"),
        same("SINTERCARD 3 i j"),
        same("SINTERCARD 1 i LIMIT -1"),
        same("SINTERCARD 1 i LIMIT x"),
        same("SINTERCARD 1 i LIMIT"),
        same("SINTERCARD 1 i FOO 1"),
        same("SINTERCARD 1 i j"),
        // Arity.
        same("SADD k"),
        same("SREM k"),
        same("SMEMBERS"),
        same("SMEMBERS a b"),
        same("SISMEMBER k"),
        same("SMISMEMBER k"),
        same("SCARD"),
        same("SPOP"),
        same("SRANDMEMBER"),
        same("SMOVE a b"),
        same("SINTER"),
        same("SINTERCARD 1"),
        same("SINTERSTORE d"),
        same("SUNION"),
        same("SUNIONSTORE d"),
        same("SDIFF"),
        same("SDIFFSTORE d"),
        same("SSCAN k"),
        // Binary-safe members, and DEL, EXPIRE, KEYS and SCAN TYPE on sets.
        same_args(&[b"SADD", b"bin", b"\x00\xff"]),
        same("SMEMBERS bin"),
        same_args(&[b"SISMEMBER", b"bin", b"\x00\xff"]),
        same("DEL bin"),
        same("EXISTS bin"),
        same("EXPIRE j 100"),
        same("TTL j"),
        same("SADD j 77"),
        same("TTL j"),
        same("PERSIST j"),
        same("KEYS j*"),
        // One set key left, so that SCAN's order (a hash order in Redis) does not matter.
        same("DEL i"),
        same("SCAN 0 TYPE set COUNT 1000"),
        same("DEL j dst"),
        same("SCAN 0 TYPE set COUNT 1000"),
    ]
}

#[test]
fn sets_exact_resp2() {
    diff(2, &exact_steps());
}

#[test]
fn sets_exact_resp3() {
    diff(3, &exact_steps());
}

// ---------------------------------------------------------------------------------------
// Hashtable sets: compared sorted (Redis's hashtable order is not reproducible)
// ---------------------------------------------------------------------------------------

fn unordered(proto: u8) {
    let (_r, _p, mut rc, mut pc) = pair(proto);
    let mut bad = Vec::new();
    for l in [
        "SADD a x y z 1 2",
        "SADD b y z w",
        "SADD c z q",
        "SADD big 1 2 a",
    ] {
        both(&mut rc, &mut pc, l);
    }
    for l in [
        "SMEMBERS a",
        "SINTER a b",
        "SINTER a b c",
        "SUNION a b c",
        "SDIFF a b",
        "SDIFF a b c",
        "SDIFF b a",
        "SMISMEMBER a x w 1",
    ] {
        same_sorted(&mut rc, &mut pc, l, &mut bad);
    }
    // Encodings and sizes of hashtable sets are exact.
    let steps = vec![
        same("OBJECT ENCODING a"),
        same("OBJECT ENCODING big"),
        same("MEMORY USAGE big"),
        same("SINTERCARD 3 a b c"),
        same("SINTERCARD 2 a b LIMIT 1"),
        same("SINTERSTORE d a b"),
        same("SUNIONSTORE e a b c"),
        same("SDIFFSTORE f a b"),
        same("SCARD e"),
        same("SCARD f"),
        same("SREM a x y"),
        same("SCARD a"),
    ];
    bad.extend(run_steps(&steps, &mut rc, &mut pc));
    for l in ["SMEMBERS d", "SMEMBERS e", "SMEMBERS f", "SMEMBERS a"] {
        same_sorted(&mut rc, &mut pc, l, &mut bad);
    }
    // A set that outgrows an intset becomes a hashtable.
    let many: Vec<String> = (0..513).map(|i| i.to_string()).collect();
    both(&mut rc, &mut pc, &format!("SADD n {}", many.join(" ")));
    bad.extend(run_steps(&[same("OBJECT ENCODING n")], &mut rc, &mut pc));
    same_sorted(&mut rc, &mut pc, "SMEMBERS n", &mut bad);
    assert!(bad.is_empty(), "RESP{proto}:\n{}", bad.join("\n"));
}

#[test]
fn sets_unordered_resp2() {
    unordered(2);
}

#[test]
fn sets_unordered_resp3() {
    unordered(3);
}

// ---------------------------------------------------------------------------------------
// Random draws and SSCAN: compared by their properties
// ---------------------------------------------------------------------------------------

/// Checks one server's random replies (Palisade's and Redis's alike): the header type,
/// the count, membership, and distinctness where Redis promises it.
fn random_props(c: &mut Conn, proto: u8, who: &str) {
    let all: BTreeSet<Vec<u8>> = (0..20).map(|i| format!("m{i}").into_bytes()).collect();
    let words: Vec<String> = all
        .iter()
        .map(|m| String::from_utf8(m.clone()).unwrap())
        .collect();
    c.c("DEL r");
    c.c(&format!("SADD r {}", words.join(" ")));
    let set_head = if proto == 3 { b'~' } else { b'*' };
    for (line, n, distinct, head) in [
        ("SRANDMEMBER r 5", 5, true, b'*'),
        ("SRANDMEMBER r 20", 20, true, b'*'),
        ("SRANDMEMBER r 25", 20, true, b'*'),
        ("SRANDMEMBER r -30", 30, false, b'*'),
        ("SRANDMEMBER r -1", 1, false, b'*'),
    ] {
        let r = parse(&c.c(line));
        assert_eq!(r.head[0], head, "{who} `{line}` type");
        let got = members(&r);
        assert_eq!(got.len(), n, "{who} `{line}` count");
        assert!(
            got.iter().all(|m| all.contains(m)),
            "{who} `{line}` members"
        );
        if distinct {
            assert_eq!(
                got.iter().collect::<BTreeSet<_>>().len(),
                n,
                "{who} `{line}` distinct"
            );
        }
    }
    let one = c.c("SRANDMEMBER r");
    assert!(
        as_bulk(&one).is_some_and(|m| all.contains(&m)),
        "{who} SRANDMEMBER"
    );
    // SPOP: distinct members, removed, the rest intact.
    let popped = parse(&c.c("SPOP r 6"));
    assert_eq!(popped.head[0], set_head, "{who} SPOP count type");
    let popped = members(&popped);
    assert_eq!(
        popped.iter().collect::<BTreeSet<_>>().len(),
        6,
        "{who} SPOP distinct"
    );
    let single = as_bulk(&c.c("SPOP r")).expect("a member");
    let left: BTreeSet<Vec<u8>> = members(&parse(&c.c("SMEMBERS r"))).into_iter().collect();
    assert_eq!(left.len(), 13, "{who} SPOP removed 7");
    for m in popped.iter().chain([&single]) {
        assert!(all.contains(m) && !left.contains(m), "{who} SPOP member");
    }
    // Popping more than is left returns the rest and deletes the key.
    let rest = parse(&c.c("SPOP r 100"));
    assert_eq!(rest.head[0], set_head, "{who} SPOP all type");
    let rest: BTreeSet<Vec<u8>> = members(&rest).into_iter().collect();
    assert_eq!(rest, left, "{who} SPOP all");
    assert_eq!(c.c("EXISTS r"), b":0\r\n".to_vec(), "{who} SPOP emptied");
}

/// SSCAN of a hashtable set: the walk ends, and returns every member (compared sorted;
/// the cursors and per-call batches differ from Redis's, which COUNT leaves open).
fn scan_all(c: &mut Conn, key: &str, extra: &str) -> BTreeSet<Vec<u8>> {
    let mut cursor = b"0".to_vec();
    let mut seen = BTreeSet::new();
    for _ in 0..10_000 {
        let line = format!("SSCAN {key} {} {extra}", String::from_utf8_lossy(&cursor));
        let r = parse(&c.c(line.trim()));
        assert_eq!(r.kids.len(), 2, "SSCAN reply shape");
        seen.extend(members(&r.kids[1]));
        cursor = r.kids[0].data.clone();
        if cursor == b"0" {
            return seen;
        }
    }
    panic!("SSCAN did not finish");
}

fn random_and_scan(proto: u8) {
    let (_r, _p, mut rc, mut pc) = pair(proto);
    random_props(&mut rc, proto, "redis");
    random_props(&mut pc, proto, "palisade");
    let many: Vec<String> = (0..300).map(|i| format!("k{i}")).collect();
    for c in [&mut rc, &mut pc] {
        c.c(&format!("SADD big {}", many.join(" ")));
    }
    for extra in ["", "COUNT 7", "MATCH k1* COUNT 50", "MATCH nomatch"] {
        let want = scan_all(&mut rc, "big", extra);
        let got = scan_all(&mut pc, "big", extra);
        assert_eq!(got, want, "RESP{proto}: SSCAN big {extra}");
    }
}

#[test]
fn sets_random_and_scan_resp2() {
    random_and_scan(2);
}

#[test]
fn sets_random_and_scan_resp3() {
    random_and_scan(3);
}

// ---------------------------------------------------------------------------------------
// SORT and SORT_RO
// ---------------------------------------------------------------------------------------

fn sort_steps() -> Vec<Step> {
    vec![
        same("RPUSH l 3 1 2 10 -4 2.5"),
        same("SORT l"),
        same("SORT l DESC"),
        same("SORT l ALPHA"),
        same("SORT l alpha desc"),
        same("SORT l LIMIT 1 3"),
        same("SORT l LIMIT -5 2"),
        same("SORT l LIMIT 2 -1"),
        same("SORT l LIMIT 0 0"),
        same("SORT l LIMIT 10 5"),
        same("SORT l LIMIT 5 100"),
        same("SORT l DESC LIMIT 0 2 ALPHA"),
        same("SORT_RO l"),
        same("SORT_RO l DESC LIMIT 1 2"),
        // BY without '*': no sort; lists keep their order, DESC and LIMIT walk it.
        same("SORT l BY nosort"),
        same("SORT l BY nosort DESC"),
        same("SORT l BY nosort LIMIT 1 2"),
        same("SORT l BY nosort DESC LIMIT 1 2"),
        same("SORT l BY nosort LIMIT 9 2"),
        // BY and GET patterns, strings and hash fields.
        same("RPUSH u a b c d"),
        same("SET w_a 3"),
        same("SET w_b 1"),
        same("SET w_c 2"),
        same("SET w_d 10"),
        same("HSET h_a n 9 name alice"),
        same("HSET h_b n 7 name bob"),
        same("HSET h_c n 8"),
        same("SORT u BY w_*"),
        same("SORT u BY w_* DESC"),
        same("SORT u BY h_*->n"),
        same("SORT u BY h_*->n GET h_*->name"),
        same("SORT u BY w_* GET # GET w_* GET h_*->name GET nostar"),
        same("SORT u BY w_* ALPHA"),
        same("SORT u BY w_* LIMIT 1 2 GET #"),
        same("SORT u BY h_*->"),
        same("SORT u GET w_*->"),
        same("SORT_RO u BY w_* GET w_*"),
        same("SORT u BY nosort GET w_*"),
        same("SORT u ALPHA GET h_*->name GET #"),
        // Equal scores: ties go by the elements' bytes.
        same("RPUSH tie y x z"),
        same("SET w_x 5"),
        same("SET w_y 5"),
        same("SET w_z 4"),
        same("SORT tie BY w_*"),
        same("SORT tie BY w_* DESC"),
        // A missing BY key (h_d) scores 0.
        same("SORT u BY h_*->n DESC"),
        // A hash field through a string key, a string through a hash: missing.
        same("SORT u BY w_* GET w_*->n GET h_*"),
        // STORE: a list replacing the destination (TTL too); empty results delete it.
        same("SET dst old"),
        same("EXPIRE dst 100"),
        same("SORT l STORE dst"),
        same("TYPE dst"),
        same("TTL dst"),
        same("LRANGE dst 0 -1"),
        same("SORT u BY w_* GET h_*->name STORE dst"),
        same("LRANGE dst 0 -1"),
        same("SORT nokey STORE dst"),
        same("EXISTS dst"),
        same("SORT l LIMIT 0 0 STORE dst2"),
        same("EXISTS dst2"),
        same("SORT l store dst3 desc"),
        same("LRANGE dst3 0 -1"),
        // Sets: sorted output is defined; "no sort" with STORE sorts ALPHA.
        same("SADD s 5 3 9 1"),
        same("SORT s"),
        same("SORT s DESC LIMIT 0 2"),
        same("SADD t banana apple cherry"),
        same("SORT t ALPHA"),
        same("SORT t ALPHA DESC"),
        same("SORT t BY nosort STORE tl"),
        same("LRANGE tl 0 -1"),
        same("SORT t BY nosort DESC STORE tl"),
        same("LRANGE tl 0 -1"),
        same("SORT s BY nosort"),
        // Errors.
        same("SORT t"),
        same("SORT u BY h_*->name"),
        same("SET str x"),
        same("SORT str"),
        same("HSET hh f v"),
        same("SORT hh"),
        same("SORT nokey"),
        same("SORT l LIMIT 1"),
        same("SORT l LIMIT x 1"),
        same("SORT l LIMIT 1 x"),
        same("SORT l BY"),
        same("SORT l GET"),
        same("SORT l STORE"),
        same("SORT l FOO"),
        same("SORT_RO l STORE d"),
        same("SORT str BADOPT"),
        same("SORT"),
        same("SORT_RO"),
        // Numbers as strtod reads them.
        same("RPUSH nums 1e2 -inf .5 7 +3"),
        same("SORT nums"),
        same("RPUSH bad 1 nan"),
        same("SORT bad"),
        same_args(&[b"RPUSH", b"empty_el", b"3", b"", b"1"]),
        same("SORT empty_el"),
    ]
}

#[test]
fn sort_resp2() {
    diff(2, &sort_steps());
}

#[test]
fn sort_resp3() {
    diff(3, &sort_steps());
}

// ---------------------------------------------------------------------------------------
// ACL: the set commands' keys, and SORT's BY and GET
// ---------------------------------------------------------------------------------------

/// A user limited to `~s:*` gets Redis's replies for the set commands' keys (SMOVE's and the
/// STORE forms' destinations, SINTERCARD's movable keys) and the categories `-@set` removes.
fn acl_steps() -> Vec<Step> {
    vec![
        same("SADD s:1 a b"),
        same("SADD other a"),
        same("ACL SETUSER u on >pw ~s:* +@all"),
        same("ACL SETUSER v on >pw ~* +@all -@set"),
        same("AUTH u pw"),
        same("SCARD s:1"),
        same("SINTERCARD 1 s:1"),
        same("SINTERCARD 2 s:1 other"),
        same("SMOVE s:1 other a"),
        same("SUNIONSTORE other s:1"),
        same("SUNIONSTORE s:2 s:1"),
        same("SORT s:1 ALPHA"),
        same("SORT s:1 ALPHA STORE other"),
        same("SORT s:1 ALPHA STORE s:3"),
        same("AUTH v pw"),
        same("SADD s:1 c"),
        same("SORT s:1 ALPHA"),
        same("GET s:1"),
    ]
}

#[test]
fn sets_acl_resp2() {
    diff(2, &acl_steps());
}

/// SORT's BY (with a `*`) and GET read other keys: a user without access to every key is
/// refused them (Palisade answers the NOPERM key text; Redis says `ERR BY option of SORT
/// denied due to insufficient ACL permissions.`), and may still sort without them.
#[test]
fn sort_by_and_get_need_access_to_every_key() {
    let pal = Server::start();
    let mut c = pal.conn();
    assert_reply(&c.c("RPUSH s:l 2 1"), b":2\r\n", "setup");
    assert_reply(&c.c("ACL SETUSER u on >pw ~s:* +@all"), b"+OK\r\n", "setup");
    assert_reply(&c.c("AUTH u pw"), b"+OK\r\n", "auth");
    let noperm = err_bytes(
        "NOPERM this user has no permissions to access one of the keys used as arguments",
    );
    assert_reply(&c.c("SORT s:l GET #"), &noperm, "GET #");
    assert_reply(&c.c("SORT s:l BY s:*"), &noperm, "BY pattern");
    assert_reply(&c.c("SORT_RO s:l GET s:*"), &noperm, "SORT_RO GET");
    assert_reply(
        &c.c("SORT s:l BY nosort"),
        b"*2\r\n$1\r\n2\r\n$1\r\n1\r\n",
        "BY without a pattern reads nothing else",
    );
    assert_reply(
        &c.c("SORT s:l"),
        b"*2\r\n$1\r\n1\r\n$1\r\n2\r\n",
        "plain SORT",
    );
}
