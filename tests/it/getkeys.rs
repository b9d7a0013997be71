//! COMMAND GETKEYSANDFLAGS (and GETKEYS) against redis-server 7.0: the keys of a command
//! line and their key-spec flags, found from each command's table row (its key specs, or
//! its own function for SET, BITFIELD, SORT and SORT_RO), are Redis's, byte for byte, in
//! RESP2 and RESP3. These are the keys and flags the ACL check tests.
//!
//! The corpus is derived from the table: for every command Palisade shares with Redis whose
//! row names keys, a handful of argument shapes (plain words, and numbers where a `numkeys`
//! goes), whatever their meaning, since the answer depends only on the specs; then hand lines
//! for the commands whose keys move (EVAL, SORT, SET, BITFIELD, LMOVE, the numkeys commands,
//! GEORADIUS STORE, GEOSEARCHSTORE), with `numkeys` 0, negative, not a number (Redis then reads it with `atoi`) and too big.

use palisade::cmd::keyspec;
use palisade::cmd::registry::table;

use crate::common::*;
use crate::differential::{diff, same, show_cmd, Step};

/// Argument shapes tried on every row (after the command name).
const SHAPES: &[&str] = &[
    "",
    "k1",
    "k1 k2",
    "k1 k2 k3",
    "k1 k2 k3 k4",
    "k1 k2 k3 k4 k5 k6",
    "1 k1",
    "2 k1 k2",
    "2 k1 k2 k3",
    "k1 1 k2",
    "k1 2 k2 k3",
    "k1 2 k2 k3 k4",
    "k1 k2 2 k3 k4",
    "k1 3 k2",
    "k1 0",
    "k1 -1 k2",
];

/// Hand lines for the commands whose keys move or whose flags depend on the arguments.
const LINES: &[&str] = &[
    "EVAL s 2 a b c",
    "EVAL s 0",
    "EVAL s 0 x",
    "EVAL s -1 a",
    "EVAL s x a",
    "EVAL s 3 a b",
    "EVALSHA s 1 a",
    "EVAL_RO s 2 a b",
    "EVALSHA_RO s 1 a b",
    "SORT l",
    "SORT l STORE d",
    "SORT l BY w_* GET # GET x LIMIT 0 1 STORE d",
    "SORT l STORE d1 STORE d2",
    "SORT l LIMIT store 1 STORE d",
    "SORT l GET store d",
    "SORT l store",
    "SORT_RO l BY w_* GET #",
    "SORT_RO l STORE d",
    "SET k v",
    "SET k v GET",
    "SET k v NX get EX 10",
    "SET k v EX 10",
    "SET k get",
    "SET k v GETX",
    "BITFIELD k",
    "BITFIELD k GET u8 0",
    "BITFIELD k GET u8 0 OVERFLOW SAT GET i8 1",
    "BITFIELD k GET u8 0 SET u8 0 1",
    "BITFIELD k INCRBY u8 0 1",
    "BITFIELD k GET u8",
    "BITFIELD_RO k GET u8 0",
    "LMOVE a b LEFT RIGHT",
    "BLMOVE a b LEFT RIGHT 0",
    "RPOPLPUSH a b",
    "SMOVE a b m",
    "COPY a b",
    "RENAME a b",
    "ZUNIONSTORE d 2 a b WEIGHTS 1 2",
    "ZUNIONSTORE d 0 a",
    "ZUNIONSTORE d -1 a",
    "ZUNIONSTORE d x a",
    "ZUNIONSTORE d 3 a b",
    // Redis's fallback reads a bad numkeys with atoi: keys without flags.
    "ZUNIONSTORE d 2x a b",
    "ZUNIONSTORE d +1 a",
    "ZUNIONSTORE d 01 a",
    "ZUNION 2x a b",
    "EVAL s 1x a",
    "EVAL s 9x a",
    "SINTERCARD 2x a b",
    "LMPOP 1x a LEFT",
    "BLMPOP 0 1x a LEFT",
    "ZMPOP 1x a MIN",
    "ZINTERSTORE d 1 a",
    "ZDIFFSTORE d 2 a b",
    "ZUNION 2 a b WITHSCORES",
    "ZINTER 1 a",
    "ZDIFF 2 a b",
    "ZINTERCARD 2 a b LIMIT 1",
    "ZINTERCARD 0 a",
    "ZMPOP 2 a b MIN COUNT 1",
    "BZMPOP 0 2 a b MIN",
    "SINTERCARD 2 a b LIMIT 1",
    "SINTERCARD 3 a b",
    "SINTERCARD x a",
    "LMPOP 2 a b LEFT",
    "LMPOP 1 a RIGHT COUNT 2",
    "LMPOP 0 a LEFT",
    "BLMPOP 0 2 a b LEFT",
    "BLMPOP 0 -1 a LEFT",
    "GEORADIUS g 1 2 3 km STORE d",
    "GEORADIUS g 1 2 3 km STOREDIST e",
    "GEORADIUS g 1 2 3 km STORE d STOREDIST e",
    "GEORADIUS g 1 2 3 km WITHDIST",
    "GEORADIUSBYMEMBER g m 3 km ASC storedist e",
    "GEORADIUSBYMEMBER g m 3 km",
    "GEOSEARCHSTORE d g FROMMEMBER m BYRADIUS 1 km",
    "GEOSEARCHSTORE d g FROMMEMBER m BYRADIUS 1 km STOREDIST",
    "BITOP AND d a b",
    "BITOP NOT d a",
    "SDIFFSTORE d a b",
    "SINTERSTORE d a",
    "MSET a 1 b 2",
    "MSET a 1 b",
    "MSETNX a 1 b 2",
    "DEL a b c",
    "EXISTS a b",
    "TOUCH a",
    "WATCH a b",
    "BLPOP a b 0",
    "BZPOPMIN a b 0",
    "LCS a b",
    "ZRANGESTORE d s 0 -1",
    "GETEX k PERSIST",
    "GETDEL k",
    // A container's keys are its subcommand's; an unknown subcommand is no command.
    "OBJECT ENCODING k",
    "OBJECT FREQ k",
    "OBJECT IDLETIME k",
    "OBJECT REFCOUNT k",
    "object encoding k",
    "MEMORY USAGE k",
    "MEMORY USAGE k SAMPLES 5",
    "OBJECT NOSUCH k",
    "OBJECT ENCODING",
    "OBJECT",
    "CONFIG GET maxmemory",
    "CLIENT KILL ID 1",
    // No keys: errors, compared too.
    "PUBLISH ch m",
    "SPUBLISH ch m",
    "SSUBSCRIBE a b",
    "GET",
    "GET a b",
    "NOSUCH a",
];

/// Documented differences: (command, reason). None today.
const DIFFERENCES: &[(&str, &str)] = &[];

/// Commands of later Redis versions (DELEX, DIGEST): redis-server 7.0 does not know them.
fn newer_than_redis_7_0(since: &str) -> bool {
    let v: Vec<u32> = since.split('.').filter_map(|p| p.parse().ok()).collect();
    v.as_slice() > [7, 0, 99].as_slice()
}

fn steps() -> Vec<Step> {
    let mut out = Vec::new();
    for verb in ["GETKEYSANDFLAGS", "GETKEYS"] {
        for row in table() {
            // Containers find their keys by subcommand (OBJECT ENCODING key): not here.
            if !keyspec::has_keys(row)
                || !row.subcommands.is_empty()
                || row.group == palisade::cmd::registry::PALISADE_GROUP
                || newer_than_redis_7_0(row.since)
                || DIFFERENCES.iter().any(|(n, _)| *n == row.name)
            {
                continue;
            }
            for shape in SHAPES {
                out.push(same(
                    format!("COMMAND {verb} {} {shape}", row.name).trim_end(),
                ));
            }
        }
        for line in LINES {
            out.push(same(&format!("COMMAND {verb} {line}")));
        }
    }
    out
}

/// The corpus covers every shared command with keys, and each answer is redis-server's.
#[test]
fn getkeysandflags_matches_redis_resp2() {
    let s = steps();
    assert!(s.len() > 1500, "only {} lines", s.len());
    diff(2, &s);
}

#[test]
fn getkeysandflags_matches_redis_resp3() {
    diff(3, &steps());
}

/// Without a command, or without enough arguments for it, as Redis.
#[test]
fn getkeysandflags_errors_match_redis() {
    let redis = RedisServer::start();
    let pal = Server::start();
    let (mut rc, mut pc) = (redis.conn(), pal.conn());
    for line in [
        "COMMAND GETKEYSANDFLAGS",
        "COMMAND GETKEYS",
        "COMMAND getkeysandflags set",
    ] {
        let args = words(line);
        let (want, got) = (rc.cmd(&args), pc.cmd(&args));
        assert_eq!(show(&got), show(&want), "{}", show_cmd(&args));
    }
}
