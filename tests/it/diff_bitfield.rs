//! Differential tests of BITFIELD and BITFIELD_RO against redis-server, in RESP2 and RESP3
//! (see `differential.rs`): every subcommand, type width and OVERFLOW mode, `#n` offsets,
//! growing the string, every error text, and the `setbit` notifications Redis sends.

use crate::common::events::{compare_events, lines};
use redis_protocol::resp2::types::OwnedFrame;

use crate::common::{decode2, Conn, RedisServer, Server};
use crate::differential::{diff, same, same_args, Step};

fn field_steps() -> Vec<Step> {
    vec![
        // A missing key reads as zeros and is not created by GETs.
        same("BITFIELD k GET u8 0 GET i64 0 GET u63 100"),
        same("EXISTS k"),
        same("BITFIELD_RO k GET i1 0"),
        same("BITFIELD k"),
        same("BITFIELD_RO k"),
        // SET replies with the old value, INCRBY with the new one; the string grows to the
        // highest field written.
        same("BITFIELD k SET u8 0 200 GET u8 0 SET u8 0 7"),
        same("GET k"),
        same("BITFIELD k INCRBY i5 100 1 INCRBY i5 100 -3 GET i5 100"),
        same("STRLEN k"),
        same("GET k"),
        same("BITFIELD k get U4 0 Get u4 4 sEt i4 4 -1 incrBY u4 0 1"),
        // Fields across byte boundaries and past the end of the string.
        same("BITFIELD k SET u13 3 5000 GET u13 3 GET i13 3 GET u16 2 GET u8 99999"),
        same("GET k"),
        // `#n` offsets: the n-th field of the type's width.
        same("BITFIELD h SET u8 #0 1 SET u8 #1 2 SET i16 #2 -3 GET u8 #1 GET i16 #2"),
        same("GET h"),
        same("BITFIELD h GET u4 #3 GET i1 #9 INCRBY u8 #5 9"),
        same("STRLEN h"),
        // The widest types and their limits.
        same("BITFIELD w SET i64 0 9223372036854775807 GET i64 0 GET u63 0 GET u63 1"),
        same("BITFIELD w SET i64 0 -9223372036854775808 GET i64 0 GET u1 0 GET i1 0"),
        same("BITFIELD w SET u63 64 9223372036854775807 GET u63 64 GET i64 64"),
        same("BITFIELD w SET i1 0 -1 GET i1 0 GET u1 0 SET i1 0 1 GET i1 0"),
        same("BITFIELD w SET u1 200 1 SET u1 200 2 GET u1 200"),
        same("GET w"),
        // Several ops of one call see each other's writes.
        same("BITFIELD m INCRBY u8 0 1 INCRBY u8 0 1 INCRBY u8 4 1 GET u8 0 GET u16 0"),
        // The TTL stays.
        same("SET t abc EX 100"),
        same("BITFIELD t SET u8 8 65"),
        same("TTL t"),
        same("GET t"),
        // Strings that hold numbers are bytes too.
        same("SET n 12345"),
        same("BITFIELD n GET u8 0 GET i16 8 INCRBY u8 0 1"),
        same("GET n"),
        same_args(&[b"SET", b"e", b""]),
        same("BITFIELD_RO e GET u8 0"),
        same("BITFIELD e SET u8 16 1"),
        same("GET e"),
        // Inside scripts (a FAIL's nil is Lua's false) and transactions.
        same("EVAL return(redis.call('bitfield',KEYS[1],'incrby','u8','0','300')) 1 s"),
        same("EVAL return(redis.call('bitfield',KEYS[1],'overflow','fail','incrby','u8','0','300')) 1 s"),
        same("EVAL return(redis.call('bitfield_ro',KEYS[1],'get','i8','#0')) 1 s"),
        same("EVAL return(redis.pcall('bitfield_ro',KEYS[1],'set','i8','0','1')) 1 s"),
        same("EVAL_RO return(redis.call('bitfield_ro',KEYS[1],'get','u8','0')) 1 s"),
        same("EVAL_RO return(redis.pcall('bitfield',KEYS[1],'get','u8','0')) 1 s"),
        same("MULTI"),
        same("BITFIELD x SET u8 0 1 OVERFLOW FAIL INCRBY u8 0 255"),
        same("BITFIELD_RO x GET u8 0"),
        same("BITFIELD x GET u16 0"),
        same("EXEC"),
    ]
}

fn overflow_steps() -> Vec<Step> {
    vec![
        // WRAP (the default).
        same("BITFIELD o INCRBY u8 0 250 INCRBY u8 0 10 INCRBY u8 0 -20 INCRBY u8 0 -300"),
        same("BITFIELD o INCRBY i8 8 120 INCRBY i8 8 10 INCRBY i8 8 -300 OVERFLOW wrap INCRBY i8 8 -1"),
        same("BITFIELD o SET u8 16 256 GET u8 16 SET u8 16 -1 GET u8 16 SET i8 16 200 GET i8 16"),
        same("BITFIELD o SET i64 24 9223372036854775807 INCRBY i64 24 1 INCRBY i64 24 -1"),
        same("BITFIELD o SET u63 24 9223372036854775807 INCRBY u63 24 1 INCRBY u63 24 -1"),
        same("BITFIELD o INCRBY u63 24 -9223372036854775808 INCRBY i64 24 -9223372036854775808"),
        // SAT.
        same("BITFIELD o OVERFLOW SAT INCRBY u8 0 1000 INCRBY u8 0 -1000 INCRBY i8 0 1000 INCRBY i8 0 -1000"),
        same("BITFIELD o overflow sat SET u8 0 -1 GET u8 0 SET i8 0 300 GET i8 0 SET i8 0 -300 GET i8 0"),
        same("BITFIELD o OVERFLOW SAT SET i8 0 -9223372036854775808 GET i8 0 SET u8 0 9223372036854775807"),
        same("BITFIELD o OVERFLOW SAT SET i64 0 9223372036854775807 INCRBY i64 0 1 INCRBY i64 0 9223372036854775807"),
        same("BITFIELD o OVERFLOW SAT SET i64 0 -9223372036854775808 INCRBY i64 0 -1 GET i64 0"),
        same("BITFIELD o OVERFLOW SAT SET u63 0 0 INCRBY u63 0 -1 INCRBY u63 0 9223372036854775807 INCRBY u63 0 1"),
        same("BITFIELD o OVERFLOW SAT INCRBY u1 0 5 INCRBY i1 0 5 INCRBY i1 0 -5"),
        // FAIL: nil, and nothing written.
        same("BITFIELD o SET u8 0 250 OVERFLOW FAIL INCRBY u8 0 10 GET u8 0 INCRBY u8 0 5 INCRBY u8 0 -256"),
        same("BITFIELD o OVERFLOW fail SET u8 0 256 SET u8 0 -1 SET i8 0 128 SET i8 0 -129 SET i8 0 -128 GET i8 0"),
        same("BITFIELD o OVERFLOW FAIL SET i64 0 9223372036854775807 INCRBY i64 0 1 INCRBY i64 0 -1"),
        // The mode applies to the ops after it, and the last one wins.
        same("BITFIELD o SET u8 0 255 OVERFLOW FAIL OVERFLOW SAT INCRBY u8 0 1 OVERFLOW WRAP INCRBY u8 0 1 OVERFLOW FAIL INCRBY u8 0 -1"),
        // A FAIL on a new key still creates it (zeros), silently.
        same("BITFIELD f OVERFLOW FAIL SET u8 16 256"),
        same("EXISTS f"),
        same("GET f"),
        same("BITFIELD f OVERFLOW FAIL INCRBY i4 100 8 GET u8 0"),
        same("STRLEN f"),
    ]
}

fn error_steps() -> Vec<Step> {
    vec![
        same("BITFIELD"),
        same("BITFIELD_RO"),
        // Subcommands with too few arguments, or unknown.
        same("BITFIELD k GET"),
        same("BITFIELD k GET u8"),
        same("BITFIELD k SET u8 0"),
        same("BITFIELD k INCRBY u8 0"),
        same("BITFIELD k OVERFLOW"),
        same("BITFIELD k FOO u8 0"),
        same("BITFIELD k GET u8 0 GET u8"),
        same("BITFIELD k OVERFLOW WRAP"),
        same("BITFIELD k OVERFLOW SATURATE GET u8 0"),
        same("BITFIELD k OVERFLOW 1 GET u8 0"),
        // Types.
        same("BITFIELD k GET u64 0"),
        same("BITFIELD k GET i65 0"),
        same("BITFIELD k GET i0 0"),
        same("BITFIELD k GET u0 0"),
        same("BITFIELD k GET U8 0"),
        same("BITFIELD k GET I8 0"),
        same("BITFIELD k GET 8 0"),
        same("BITFIELD k GET u 0"),
        same("BITFIELD k GET u08 0"),
        same("BITFIELD k GET u-1 0"),
        same("BITFIELD k GET u+8 0"),
        same("BITFIELD k GET i8x 0"),
        same_args(&[b"BITFIELD", b"k", b"GET", b"", b"0"]),
        // Offsets.
        same("BITFIELD k GET u8 -1"),
        same("BITFIELD k GET u8 x"),
        same("BITFIELD k GET u8 #"),
        same("BITFIELD k GET u8 #-1"),
        same("BITFIELD k GET u8 ##1"),
        same("BITFIELD k GET u8 4294967295"),
        same("BITFIELD k GET u8 4294967296"),
        same("BITFIELD k GET u8 #536870911"),
        same("BITFIELD k GET u8 #536870912"),
        same("BITFIELD k GET i64 #9223372036854775807"),
        same("BITFIELD k GET u8 #2305843009213693952"),
        same("BITFIELD k GET u8 99999999999999999999"),
        // Values.
        same("BITFIELD k SET u8 0 x"),
        same("BITFIELD k SET u8 0 1.5"),
        same("BITFIELD k INCRBY u8 0 9223372036854775808"),
        same("BITFIELD k SET u8 0 -9223372036854775809"),
        // The first error wins, and nothing runs.
        same("BITFIELD k SET u8 0 1 GET u64 0"),
        same("BITFIELD k SET u8 0 1 SET u8 0 x"),
        same("EXISTS k"),
        // BITFIELD_RO accepts only GET, and says so after parsing everything.
        same("BITFIELD_RO k SET u8 0 1"),
        same("BITFIELD_RO k INCRBY u8 0 1"),
        same("BITFIELD_RO k GET u8 0 INCRBY u8 0 1"),
        same("BITFIELD_RO k OVERFLOW SAT GET u8 0"),
        same("BITFIELD_RO k OVERFLOW SAT SET u8 0 x"),
        same("BITFIELD_RO k SET u64 0 1"),
        same("BITFIELD_RO k FOO"),
        same("EXISTS k"),
        // Other types: WRONGTYPE, after the arguments parse (BITFIELD_RO's own refusal first).
        same("LPUSH l a"),
        same("BITFIELD l GET u8 0"),
        same("BITFIELD l SET u8 0 1"),
        same("BITFIELD l"),
        same("BITFIELD_RO l"),
        same("BITFIELD_RO l GET u8 0"),
        same("BITFIELD_RO l SET u8 0 1"),
        same("BITFIELD l GET u64 0"),
        same("LRANGE l 0 -1"),
    ]
}

#[test]
fn bitfield_fields_resp2() {
    diff(2, &field_steps());
}

#[test]
fn bitfield_fields_resp3() {
    diff(3, &field_steps());
}

#[test]
fn bitfield_overflow_resp2() {
    diff(2, &overflow_steps());
}

#[test]
fn bitfield_overflow_resp3() {
    diff(3, &overflow_steps());
}

#[test]
fn bitfield_errors_resp2() {
    diff(2, &error_steps());
}

#[test]
fn bitfield_errors_resp3() {
    diff(3, &error_steps());
}

/// `setbit` once per call, only when the string grew or a field changed; `new` for a
/// created key (also when only FAIL operations created it); nothing for reads or refusals.
#[test]
fn bitfield_notifies_like_redis() {
    let commands = lines(&[
        "BITFIELD b GET u8 0",
        "BITFIELD b SET u8 0 0",
        "BITFIELD b SET u8 0 0",
        "BITFIELD b SET u8 0 1 SET u8 0 2",
        "BITFIELD b INCRBY u8 0 0",
        "BITFIELD b SET u8 8 0",
        "BITFIELD b OVERFLOW FAIL INCRBY u8 8 256",
        "BITFIELD b OVERFLOW FAIL INCRBY u8 100 256",
        "BITFIELD b SET u8 0 2 GET u8 0",
        "BITFIELD b SET u8 0 3 OVERFLOW FAIL INCRBY u8 0 999",
        "BITFIELD_RO b GET u8 0",
        "BITFIELD_RO b SET u8 0 1",
        "BITFIELD c OVERFLOW FAIL SET u8 0 256",
        "BITFIELD c SET u8 0 1",
        "BITFIELD d OVERFLOW SAT INCRBY u8 0 999",
        "LPUSH l a",
        "BITFIELD l SET u8 0 1",
    ]);
    compare_events(3, &["KEA"], &commands, |_| {});
    compare_events(2, &["KEA", "En", "K$", "Eg"], &commands, |_| {});
}

/// COMMAND INFO's name, arity, flags and key positions are Redis's: BITFIELD is a write
/// even with only GETs; BITFIELD_RO is a fast read.
#[test]
fn bitfield_command_info_matches_redis() {
    let redis = RedisServer::start();
    let pal = Server::start();
    for name in ["bitfield", "bitfield_ro"] {
        let head = |port: u16| {
            let reply = Conn::connect(port).c(&format!("COMMAND INFO {name}"));
            match decode2(&reply) {
                OwnedFrame::Array(rows) => match rows.into_iter().next() {
                    Some(OwnedFrame::Array(fields)) => format!("{:?}", &fields[..6]),
                    other => panic!("{name}: no COMMAND INFO row: {other:?}"),
                },
                other => panic!("{name}: COMMAND INFO: {other:?}"),
            }
        };
        let (want, got) = (head(redis.port()), head(pal.port()));
        assert!(got == want, "{name}: palisade {got} != redis {want}");
    }
}

/// ACL key permissions: a BITFIELD of GETs (and OVERFLOWs) only reads its key, as Redis's
/// `bitfieldGetKeys` says; SET, INCRBY or anything unparsable needs read and write.
#[test]
fn bitfield_key_permissions_match_redis() {
    diff(
        2,
        &[
            same("ACL SETUSER r on nopass %R~b:* +bitfield +bitfield_ro"),
            same("ACL SETUSER w on nopass %W~b:* +bitfield +bitfield_ro"),
            same("ACL SETUSER o on nopass ~b:* +bitfield_ro"),
            same("ACL DRYRUN r BITFIELD b:1 GET u8 0"),
            same("ACL DRYRUN r BITFIELD b:1 OVERFLOW SAT GET u8 0 get i8 #1"),
            same("ACL DRYRUN r BITFIELD b:1"),
            same("ACL DRYRUN r BITFIELD b:1 SET u8 0 1"),
            same("ACL DRYRUN r BITFIELD b:1 GET u8 0 INCRBY u8 0 1"),
            same("ACL DRYRUN r BITFIELD b:1 GET u8"),
            same("ACL DRYRUN r BITFIELD_RO b:1 GET u8 0"),
            same("ACL DRYRUN w BITFIELD b:1 GET u8 0"),
            same("ACL DRYRUN w BITFIELD b:1 SET u8 0 1"),
            same("ACL DRYRUN w BITFIELD_RO b:1 GET u8 0"),
            same("ACL DRYRUN o BITFIELD b:1 GET u8 0"),
            same("ACL DRYRUN o BITFIELD_RO b:1 GET u8 0"),
            same("ACL DRYRUN o BITFIELD_RO x GET u8 0"),
        ],
    );
}
