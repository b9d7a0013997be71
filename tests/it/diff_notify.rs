//! Keyspace notifications of every write command, against redis-server: each group of
//! commands (with its no-op cases, and the cases that create or empty a key) runs on both
//! servers with the same `notify-keyspace-events` classes, and a `__key*` subscriber must
//! receive the same messages, command by command ([`compare_events`]).

use crate::common::events::{compare_events, lines};
use crate::common::Conn;

/// Nothing to wait for after the commands (no key of these groups expires by itself).
fn settled(_: &mut Conn) {}

/// Runs `commands` with `KEA` in RESP2 and RESP3, and with `subsets` in RESP2.
fn check(commands: &[&str], subsets: &[&str]) {
    let commands = lines(commands);
    compare_events(3, &["KEA"], &commands, settled);
    let mut classes = vec!["KEA", "En"];
    classes.extend_from_slice(subsets);
    compare_events(2, &classes, &commands, settled);
}

#[test]
fn string_commands_notify_like_redis() {
    check(
        &[
            // MSET and MSETNX: `new` and `set` per key; a refused MSETNX signals nothing.
            "MSET x 1 y 2",
            "MSET x 3 z 4",
            "MSETNX x 1 w 2",
            "MSETNX v 1 w 2",
            // GETSET: `set`, and `new` for a new key.
            "GETSET x 5",
            "GETSET gs 1",
            // GETEX: `expire`, `persist` (only when there was a TTL), `del` for a past time.
            "GETEX x",
            "GETEX x PERSIST",
            "GETEX x EX 100",
            "GETEX x PX 200000",
            "GETEX x PERSIST",
            "GETEX x PERSIST",
            "GETEX x EX 0",
            "GETEX nokey EX 10",
            "GETEX x PXAT 1",
            "GETEX y EXAT 1",
            // APPEND, SETRANGE, INCRBYFLOAT: their events, nothing for a refusal or an
            // empty SETRANGE.
            "APPEND a x",
            "APPEND a yz",
            "APPEND a \"\"",
            "APPEND empty \"\"",
            "SETRANGE a 1 Q",
            "SETRANGE a 0 \"\"",
            "SETRANGE sr 0 \"\"",
            "SETRANGE sr 2 ab",
            "INCRBYFLOAT f 1.5",
            "INCRBYFLOAT f 0",
            "INCRBYFLOAT f abc",
            "INCRBYFLOAT a 1",
            "SET big 1",
            "EXPIRE big 100",
            "INCRBYFLOAT big 2",
            "APPEND big 0",
            "SETRANGE big 0 9",
            // SETBIT: only when the key is created or grows, or the bit changes.
            "SETBIT b 0 0",
            "SETBIT b 0 0",
            "SETBIT b 1 1",
            "SETBIT b 1 1",
            "SETBIT b 100 0",
            "SETBIT b 1 0",
            // BITOP: `set` on the destination (`new` first), or `del` of an existing one
            // when the result is empty.
            "BITOP AND d b a",
            "BITOP OR d b",
            "BITOP NOT d nokey",
            "BITOP XOR d nokey",
            "BITOP XOR d b",
            // The older string commands, for their `new`.
            "SET s v",
            "SETNX s2 v",
            "INCR n",
            "INCR n",
        ],
        &["E$", "Kg", "Eg$", "Kn"],
    );
}

#[test]
fn key_commands_notify_like_redis() {
    check(
        &[
            "SET a 1",
            "SET b 2",
            // RENAME: the destination is always `new` (Redis deletes a replaced one and adds
            // it again), then `rename_from` and `rename_to`; a key renamed to itself signals
            // nothing, a missing source neither.
            "RENAME a c",
            "RENAME c b",
            "RENAME b b",
            "RENAME nokey x",
            "RENAMENX b d",
            "SET e 1",
            "RENAMENX d e",
            "RENAMENX d d",
            "RPUSH l x y",
            "RENAME l l2",
            "HSET h f v",
            "EXPIRE h 100",
            "RENAME h h2",
            // COPY: `new` and `copy_to`, also over a destination it replaces.
            "COPY d c1",
            "COPY d c1",
            "COPY d c1 REPLACE",
            "COPY nokey c2",
            "COPY l2 c3",
            // SORT ... STORE: `sortstore` (list class), or `del` of an existing destination
            // for an empty result.
            "RPUSH nums 3 1 2",
            "SORT nums STORE sorted",
            "SORT nums STORE sorted",
            "SORT nums LIMIT 5 5 STORE sorted",
            "SORT nums LIMIT 5 5 STORE sorted",
            "SORT nokey STORE sorted",
            "SORT nums DESC STORE nums",
            "SADD st b a",
            "SORT st ALPHA STORE e",
            // FLUSHALL signals nothing.
            "FLUSHALL",
            "SET after 1",
            "DEL after nokey",
        ],
        &["Eg", "Kl", "El$"],
    );
}

#[test]
fn set_commands_notify_like_redis() {
    check(
        &[
            "SADD s a b c",
            "SADD s a",
            "SADD s a d",
            "SREM s x",
            "SREM s a x",
            "SREM nokey a",
            // SMOVE: `srem` on the source (and `del` if it empties), then `new` and `sadd` on
            // the destination unless the member was there; a move to itself or of a missing
            // member signals nothing.
            "SMOVE s s b",
            "SMOVE s t x",
            "SMOVE nokey t b",
            "SMOVE s t b",
            "SADD t c",
            "SMOVE s t c",
            "SMOVE s t d",
            "SMOVE t u b",
            // SPOP: `spop`, then `del` for an emptied set; a count of 0 or a missing key
            // signals nothing.
            "SADD p 1 2 3 4",
            "SPOP p 0",
            "SPOP nokey",
            "SPOP nokey 2",
            "SPOP p",
            "SPOP p 1",
            "SPOP p 5",
            "SADD q 1",
            "SPOP q",
            // S*STORE: `new` and the command's event, or `del` of an existing destination
            // for an empty result.
            "SADD a 1 2 3",
            "SADD b 2 3 4",
            "SINTERSTORE d a b",
            "SINTERSTORE d a b",
            "SINTERSTORE d a nokey",
            "SINTERSTORE d a nokey",
            "SUNIONSTORE d a b",
            "SDIFFSTORE d a a",
            "SDIFFSTORE d a b",
            "SUNIONSTORE d nokey",
            "SET str v",
            "SUNIONSTORE str a",
            "SINTERSTORE a a b",
            "SREM a 2 3",
        ],
        &["Es", "Ks", "Egs"],
    );
}

#[test]
fn sorted_set_commands_notify_like_redis() {
    check(
        &[
            // ZADD: `zadd` (`zincr` with INCR) only when a member was added or its score
            // changed.
            "ZADD z XX 1 a",
            "ZADD z 1 a 2 b 3 c",
            "ZADD z 1 a",
            "ZADD z NX 5 a",
            "ZADD z XX CH 1 a",
            "ZADD z GT 0 a",
            "ZADD z LT 0 a",
            "ZADD z INCR 1 a",
            "ZADD z INCR 0 a",
            "ZADD z NX INCR 1 a",
            "ZADD z 2 a 9 d",
            "ZADD z XX 4 e",
            "ZINCRBY z 1 a",
            "ZINCRBY nz 1 a",
            "ZADD inf 1 a",
            "ZADD inf INCR inf a",
            "ZADD inf INCR -inf a",
            // ZREM and ZREMRANGEBY*: their events only when something was removed, then
            // `del` for an emptied set.
            "ZREM z x",
            "ZREM z a x",
            "ZREM nokey a",
            "ZREMRANGEBYRANK z 5 10",
            "ZREMRANGEBYRANK z 0 0",
            "ZREMRANGEBYSCORE z 100 200",
            "ZREMRANGEBYSCORE z 3 3",
            "ZREMRANGEBYLEX nz - +",
            "ZREMRANGEBYLEX nz - +",
            "ZREMRANGEBYRANK nokey 0 -1",
            // ZPOPMIN, ZPOPMAX, ZMPOP: `zpopmin`/`zpopmax`, then `del` for an emptied set.
            "ZADD z 5 e 6 f",
            "ZPOPMIN z 0",
            "ZPOPMIN z",
            "ZPOPMAX z 2",
            "ZPOPMAX nokey",
            "ZADD m 1 a 2 b 3 c",
            "ZMPOP 1 m MIN",
            "ZMPOP 2 nokey m MAX COUNT 5",
            "ZMPOP 1 m MIN",
            "ZPOPMAX z 5",
            "ZPOPMIN z",
            // ZRANGESTORE and Z*STORE: `new` and the command's event, or `del` of an existing
            // destination for an empty result.
            "ZADD y 1 a 2 b 3 c",
            "ZADD x 1 a",
            "ZRANGESTORE d y 0 0",
            "ZRANGESTORE d y 0 -1",
            "ZRANGESTORE d y 5 6",
            "ZRANGESTORE d y 5 6",
            "ZRANGESTORE d y (1 +inf BYSCORE",
            "ZINTERSTORE d 2 y x",
            "ZUNIONSTORE d 2 y nokey",
            "ZDIFFSTORE d 1 nokey",
            "ZDIFFSTORE d 2 y x",
            "ZINTERSTORE d 2 y nokey",
            "ZINTERSTORE d 2 y nokey",
            "SET str v",
            "ZUNIONSTORE str 1 y",
            "ZINTERSTORE y 2 y x",
            "ZREM y a",
        ],
        &["Ez", "Kz", "Egz"],
    );
}

#[test]
fn geo_commands_notify_like_redis() {
    check(
        &[
            // GEOADD is a ZADD: `zadd` when something changed, nothing for a no-op.
            "GEOADD g 13.361389 38.115556 Palermo 15.087269 37.502669 Catania",
            "GEOADD g 13.361389 38.115556 Palermo",
            "GEOADD g NX 1 1 Palermo",
            "GEOADD g XX 1 1 nosuch",
            "GEOADD g XX CH 13.4 38.1 Palermo",
            "GEOADD g 181 0 bad",
            // The searches' STORE forms: `new` and `georadiusstore` or `geosearchstore`, or
            // `del` of an existing destination for an empty result (or a missing source).
            "GEORADIUS g 15 37 200 km STORE d",
            "GEORADIUS g 15 37 200 km STOREDIST d",
            "GEORADIUS g 15 37 1 m STORE d",
            "GEORADIUS g 15 37 1 m STORE d",
            "GEORADIUSBYMEMBER g Palermo 500 km STORE d2",
            "GEOSEARCHSTORE d g FROMLONLAT 15 37 BYRADIUS 200 km",
            "GEOSEARCHSTORE d g FROMLONLAT 15 37 BYBOX 400 400 km STOREDIST",
            "GEOSEARCHSTORE d nokey FROMLONLAT 15 37 BYRADIUS 200 km",
            "GEOSEARCHSTORE d nokey FROMLONLAT 15 37 BYRADIUS 200 km",
            "GEORADIUS nokey 15 37 200 km STORE d2",
            "GEOSEARCH g FROMLONLAT 15 37 BYRADIUS 200 km",
        ],
        &["Ez", "Kz", "Egz"],
    );
}

#[test]
fn list_commands_notify_like_redis() {
    check(
        &[
            // LMOVE and RPOPLPUSH: `new` and the push on the destination, then the pop on
            // the source and `del` if it emptied; a rotation signals both on one key.
            "RPUSH l a b c",
            "LMOVE l l LEFT RIGHT",
            "LMOVE l m LEFT RIGHT",
            "LMOVE l m RIGHT LEFT",
            "LMOVE l m LEFT LEFT",
            "LMOVE l m LEFT LEFT",
            "LMOVE m m RIGHT RIGHT",
            "RPUSH one x",
            "LMOVE one one LEFT RIGHT",
            "RPOPLPUSH m r",
            "RPOPLPUSH m r",
            "RPOPLPUSH m r",
            "RPOPLPUSH m r",
            "RPOPLPUSH nokey r",
            // LMPOP: the pop on the first non-empty list, `del` if it emptied.
            "RPUSH p 1 2 3",
            "LMPOP 1 nokey LEFT",
            "LMPOP 2 nokey p RIGHT COUNT 1",
            "LMPOP 1 p LEFT COUNT 5",
            // LSET, LINSERT, LREM, LTRIM: their events when something changed (LTRIM on an
            // existing key always), then `del` for an emptied list.
            "RPUSH e a b c a",
            "LSET e 0 z",
            "LSET e 10 z",
            "LSET nokey 0 z",
            "LINSERT e BEFORE nope x",
            "LINSERT e AFTER b x",
            "LINSERT nokey BEFORE b x",
            "LREM e 0 nope",
            "LREM e -1 a",
            "LREM nokey 0 a",
            "LTRIM e 0 -1",
            "LTRIM e 1 -1",
            "LTRIM nokey 0 1",
            "LTRIM e 5 10",
            "RPUSH t a",
            "LREM t 0 a",
            // The older list commands, for their `new` and `del`.
            "LPUSH o a",
            "RPOP o",
        ],
        &["El", "Kl", "Egl"],
    );
}

/// BLPOP, BLMOVE, BRPOPLPUSH, BLMPOP, BZPOPMIN, BZPOPMAX and BZMPOP served at once (the
/// keys hold elements) signal what their non-blocking forms do.
#[test]
fn blocking_commands_with_elements_notify_like_redis() {
    check(
        &[
            "RPUSH l a b c d",
            "BLPOP l 0",
            "BRPOP nokey l 0",
            "BLMOVE l m LEFT RIGHT 0",
            "BRPOPLPUSH m m 0",
            "BLMPOP 0 2 nokey m RIGHT COUNT 5",
            "ZADD z 1 a 2 b 3 c",
            "BZPOPMIN z 0",
            "BZPOPMAX nokey z 0",
            "BZMPOP 0 1 z MIN COUNT 3",
        ],
        &["Elz"],
    );
}

#[test]
fn hash_commands_notify_like_redis() {
    check(
        &[
            "HSET h f 1.5",
            "HINCRBYFLOAT h f 1",
            "HINCRBYFLOAT h g 1",
            "HINCRBYFLOAT h2 f 1",
            "HINCRBYFLOAT h2 f abc",
            "HINCRBYFLOAT h3 f abc",
            "HINCRBYFLOAT h3 f inf",
            "HSET h s x",
            "HINCRBYFLOAT h s 1",
            "HSETNX h4 f v",
            "HDEL h4 f",
        ],
        &["Eh", "Kh"],
    );
}

/// Commands inside MULTI/EXEC and inside a script signal what they signal alone, in order;
/// a script that fails part way keeps the events of the writes it made (Redis does not
/// roll back), and a transaction that is discarded signals nothing.
#[test]
fn transactions_and_scripts_notify_like_redis() {
    let mut commands = lines(&[
        "MULTI",
        "SADD s a b",
        "LMOVE nokey l LEFT LEFT",
        "ZADD z 1 a",
        "RENAME z z2",
        "EXEC",
        "MULTI",
        "SET x 1",
        "DISCARD",
    ]);
    let script = "redis.call('SADD', KEYS[1], 'c'); redis.call('SMOVE', KEYS[1], KEYS[2], 'a'); \
                  redis.call('ZPOPMIN', KEYS[3]); return redis.call('SPOP', KEYS[1], 0)";
    for args in [
        vec!["EVAL", script, "3", "s", "t", "z2"],
        vec![
            "EVAL",
            "redis.call('SADD', KEYS[1], 'x'); redis.call('INCR', KEYS[1])",
            "1",
            "u",
        ],
    ] {
        commands.push(args.iter().map(|a| a.as_bytes().to_vec()).collect());
    }
    compare_events(3, &["KEA"], &commands, settled);
    compare_events(2, &["KEA", "Es"], &commands, settled);
}
