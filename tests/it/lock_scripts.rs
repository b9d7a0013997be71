//! The acquire, extend and release script shapes of real lock libraries (redis-py Lock,
//! redsync, node-redlock v5, Redisson RLock, python-redis-lock), written here from the
//! behaviour described in `../shared/research/clients.md`, run against redis-server and
//! Palisade: every reply must be byte-identical, in RESP2 and RESP3, including the
//! EVALSHA -> NOSCRIPT -> SCRIPT LOAD / EVAL fallbacks the libraries use.

use std::ops::RangeInclusive;

use crate::common::*;
use crate::differential::{diff, same, Step};

/// A step running `EVAL script numkeys keys... args...`.
fn eval(script: &str, keys: &[&str], args: &[&str]) -> Step {
    Step::Same(eval_argv("EVAL", script, keys, args))
}

/// A step running `EVALSHA sha1(script) ...` (the SHA is computed by SCRIPT LOAD on both
/// servers in an earlier step, or not, for the NOSCRIPT path).
fn evalsha(script: &str, keys: &[&str], args: &[&str]) -> Step {
    Step::Same(eval_argv("EVALSHA", &sha1_hex(script), keys, args))
}

/// A step whose replies must both be integers in `range` (millisecond TTLs).
fn eval_int(script: &str, keys: &[&str], args: &[&str], range: RangeInclusive<i64>) -> Step {
    Step::IntIn(eval_argv("EVAL", script, keys, args), range)
}

fn load(script: &str) -> Step {
    Step::Same(vec![
        b"SCRIPT".to_vec(),
        b"LOAD".to_vec(),
        script.as_bytes().to_vec(),
    ])
}

/// SHA1 hex, via SCRIPT LOAD's definition (computed with the same crate Palisade uses).
fn sha1_hex(s: &str) -> String {
    palisade::script::sha1_hex(s.as_bytes())
}

// ---------------------------------------------------------------------------------------
// redis-py Lock: SET NX PX; release/extend/reacquire by GET + compare.
// ---------------------------------------------------------------------------------------

const PY_RELEASE: &str = r#"
local token = redis.call('get', KEYS[1])
if not token or token ~= ARGV[1] then
    return 0
end
redis.call('del', KEYS[1])
return 1
"#;

const PY_EXTEND: &str = r#"
local token = redis.call('get', KEYS[1])
if not token or token ~= ARGV[1] then
    return 0
end
local expiration = redis.call('pttl', KEYS[1])
if not expiration then
    expiration = 0
end
if expiration < 0 then
    return 0
end
local newttl = ARGV[2]
if ARGV[3] == "0" then
    newttl = ARGV[2] + expiration
end
redis.call('pexpire', KEYS[1], newttl)
return 1
"#;

const PY_REACQUIRE: &str = r#"
local token = redis.call('get', KEYS[1])
if not token or token ~= ARGV[1] then
    return 0
end
redis.call('pexpire', KEYS[1], ARGV[2])
return 1
"#;

fn redis_py_steps() -> Vec<Step> {
    vec![
        same("SET lock:py tok-a NX PX 30000"),
        same("SET lock:py tok-b NX PX 30000"),
        // The script object tries EVALSHA first, loads on NOSCRIPT, then retries.
        evalsha(PY_EXTEND, &["lock:py"], &["tok-a", "10000", "0"]),
        load(PY_EXTEND),
        evalsha(PY_EXTEND, &["lock:py"], &["tok-a", "10000", "0"]),
        Step::IntIn(words("PTTL lock:py"), 38_000..=40_000),
        evalsha(PY_EXTEND, &["lock:py"], &["tok-a", "5000", "1"]),
        Step::IntIn(words("PTTL lock:py"), 4_000..=5_000),
        evalsha(PY_EXTEND, &["lock:py"], &["tok-b", "10000", "0"]),
        load(PY_REACQUIRE),
        evalsha(PY_REACQUIRE, &["lock:py"], &["tok-a", "20000"]),
        evalsha(PY_REACQUIRE, &["lock:py"], &["tok-b", "20000"]),
        load(PY_RELEASE),
        evalsha(PY_RELEASE, &["lock:py"], &["tok-b"]),
        evalsha(PY_RELEASE, &["lock:py"], &["tok-a"]),
        evalsha(PY_RELEASE, &["lock:py"], &["tok-a"]),
        same("EXISTS lock:py"),
        // Extending a lock without a TTL fails (PTTL -1).
        same("SET lock:py2 tok"),
        eval(PY_EXTEND, &["lock:py2"], &["tok", "1000", "0"]),
        eval(PY_EXTEND, &["missing"], &["tok", "1000", "0"]),
    ]
}

// ---------------------------------------------------------------------------------------
// redsync: lower-case set ... ex ... nx; delete returns -1 when the key is gone; touch
// extends with PEXPIRE; the SET-NX-inside-Lua variant.
// ---------------------------------------------------------------------------------------

const RS_DELETE: &str = r#"
local val = redis.call("GET", KEYS[1])
if val == ARGV[1] then
    return redis.call("DEL", KEYS[1])
elseif val == false then
    return -1
else
    return 0
end
"#;

const RS_TOUCH: &str = r#"
if redis.call("GET", KEYS[1]) == ARGV[1] then
    return redis.call("PEXPIRE", KEYS[1], ARGV[2])
else
    return 0
end
"#;

const RS_SETNX: &str = r#"
if redis.call("GET", KEYS[1]) == ARGV[1] then
    return redis.call("PEXPIRE", KEYS[1], ARGV[2])
elseif redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
    return 1
else
    return 0
end
"#;

fn redsync_steps() -> Vec<Step> {
    vec![
        same("set rs:lock v1 ex 8 nx"),
        same("set rs:lock v2 ex 8 nx"),
        same("SET rs:lock2 v1 NX PX 8000"),
        // redsync sends EVALSHA and falls back to EVAL on "NOSCRIPT ".
        evalsha(RS_TOUCH, &["rs:lock"], &["v1", "9000"]),
        eval(RS_TOUCH, &["rs:lock"], &["v1", "9000"]),
        evalsha(RS_TOUCH, &["rs:lock"], &["v2", "9000"]),
        same("TTL rs:lock"),
        eval(RS_DELETE, &["rs:lock"], &["v2"]),
        eval(RS_DELETE, &["rs:lock"], &["v1"]),
        evalsha(RS_DELETE, &["rs:lock"], &["v1"]),
        eval(RS_SETNX, &["rs:lock"], &["v3", "5000"]),
        eval(RS_SETNX, &["rs:lock"], &["v3", "5000"]),
        eval(RS_SETNX, &["rs:lock"], &["v4", "5000"]),
        same("GET rs:lock"),
    ]
}

// ---------------------------------------------------------------------------------------
// node-redlock v5: one script over N keys; the result must be a number.
// ---------------------------------------------------------------------------------------

const RL_ACQUIRE: &str = r#"
-- Return 0 if an entry already exists.
for i, key in ipairs(KEYS) do
  if redis.call("exists", key) == 1 then
    return 0
  end
end
-- Create an entry for each provided key.
for i, key in ipairs(KEYS) do
  redis.call("set", key, ARGV[1], "PX", ARGV[2])
end
-- Return the number of entries added.
return #KEYS
"#;

const RL_EXTEND: &str = r#"
for i, key in ipairs(KEYS) do
  if redis.call("get", key) ~= ARGV[1] then
    return 0
  end
end
for i, key in ipairs(KEYS) do
  redis.call("set", key, ARGV[1], "PX", ARGV[2])
end
return #KEYS
"#;

const RL_RELEASE: &str = r#"
local count = 0
for i, key in ipairs(KEYS) do
  if redis.call("get", key) == ARGV[1] then
    if redis.pcall("del", key) then
      count = count + 1
    end
  end
end
return count
"#;

fn redlock_steps() -> Vec<Step> {
    vec![
        evalsha(RL_ACQUIRE, &["rl:a", "rl:b"], &["id1", "10000"]),
        eval(RL_ACQUIRE, &["rl:a", "rl:b"], &["id1", "10000"]),
        evalsha(RL_ACQUIRE, &["rl:a", "rl:b"], &["id2", "10000"]),
        eval(RL_ACQUIRE, &["rl:b", "rl:c"], &["id2", "10000"]),
        same("EXISTS rl:c"),
        eval(RL_EXTEND, &["rl:a", "rl:b"], &["id1", "20000"]),
        same("TTL rl:a"),
        eval(RL_EXTEND, &["rl:a", "rl:b"], &["id2", "20000"]),
        eval(RL_RELEASE, &["rl:a", "rl:b", "rl:x"], &["id2"]),
        eval(RL_RELEASE, &["rl:a", "rl:b", "rl:x"], &["id1"]),
        same("EXISTS rl:a rl:b"),
    ]
}

// ---------------------------------------------------------------------------------------
// Redisson RLock: a reentrant hash lock; acquire returns nil or the PTTL; unlock publishes
// through a dynamic command name and sets a latch with a Lua number as the value.
// ---------------------------------------------------------------------------------------

const RD_LOCK: &str = r#"
if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then
    redis.call('hincrby', KEYS[1], ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return nil;
end;
return redis.call('pttl', KEYS[1]);
"#;

const RD_RENEW: &str = r#"
if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return 1;
end;
return 0;
"#;

const RD_UNLOCK: &str = r#"
local val = redis.call('get', KEYS[3]);
if val ~= false then
    return tonumber(val);
end;
if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then
    return nil;
end;
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
if (counter > 0) then
    redis.call('pexpire', KEYS[1], ARGV[2]);
    redis.call('set', KEYS[3], 0, 'px', ARGV[5]);
    return 0;
else
    redis.call('del', KEYS[1]);
    redis.call(ARGV[4], KEYS[2], ARGV[1]);
    redis.call('set', KEYS[3], 1, 'px', ARGV[5]);
    return 1;
end;
"#;

const RD_PROBE: &str = "redis.call('get', KEYS[1]) redis.call('get', KEYS[2])";

fn redisson_steps() -> Vec<Step> {
    let unlock = |owner: &str, latch: &str| {
        eval(
            RD_UNLOCK,
            &["rd:lock", "redisson_lock__channel:{rd:lock}", latch],
            &["0", "30000", owner, "PUBLISH", "3000"],
        )
    };
    vec![
        eval(RD_PROBE, &["test1", "test2"], &[]),
        evalsha(RD_LOCK, &["rd:lock"], &["30000", "uuid:1"]),
        load(RD_LOCK),
        evalsha(RD_LOCK, &["rd:lock"], &["30000", "uuid:1"]),
        same("HGETALL rd:lock"),
        // Reentrant: the same owner again.
        evalsha(RD_LOCK, &["rd:lock"], &["30000", "uuid:1"]),
        same("HGET rd:lock uuid:1"),
        eval_int(RD_LOCK, &["rd:lock"], &["30000", "uuid:2"], 28_000..=30_000),
        eval(RD_RENEW, &["rd:lock"], &["40000", "uuid:1"]),
        same("TTL rd:lock"),
        eval(RD_RENEW, &["rd:lock"], &["40000", "uuid:2"]),
        unlock("uuid:2", "latch:a"),
        unlock("uuid:1", "latch:b"),
        same("GET latch:b"),
        unlock("uuid:1", "latch:b"),
        unlock("uuid:1", "latch:c"),
        same("GET latch:c"),
        same("EXISTS rd:lock"),
        same("TYPE rd:lock"),
    ]
}

// ---------------------------------------------------------------------------------------
// python-redis-lock: SET NX EX; unlock signals waiters through a list; KEYS inside Lua.
// ---------------------------------------------------------------------------------------

pub(crate) const PRL_UNLOCK: &str = r#"
if redis.call("get", KEYS[1]) ~= ARGV[1] then
    return 1
else
    redis.call("del", KEYS[2])
    redis.call("lpush", KEYS[2], 1)
    redis.call("pexpire", KEYS[2], ARGV[2])
    redis.call("del", KEYS[1])
    return 0
end
"#;

const PRL_EXTEND: &str = r#"
if redis.call("get", KEYS[1]) ~= ARGV[1] then
    return 1
elseif redis.call("ttl", KEYS[1]) < 0 then
    return 2
else
    redis.call("expire", KEYS[1], ARGV[2])
    return 0
end
"#;

const PRL_RESET: &str = r#"
redis.call('del', KEYS[2])
redis.call('lpush', KEYS[2], 1)
redis.call('pexpire', KEYS[2], ARGV[2])
return redis.call('del', KEYS[1])
"#;

const PRL_RESET_ALL: &str = r#"
local locks = redis.call('keys', 'lock:*')
local signal
for _, lock in pairs(locks) do
    signal = 'lock-signal:' .. string.sub(lock, 6)
    redis.call('del', signal)
    redis.call('lpush', signal, 1)
    redis.call('expire', signal, 1)
    redis.call('del', lock)
end
return #locks
"#;

fn python_redis_lock_steps() -> Vec<Step> {
    vec![
        same("SET lock:n id1 NX EX 60"),
        same("SET lock:n id2 NX EX 60"),
        eval(PRL_EXTEND, &["lock:n"], &["id1", "120"]),
        same("TTL lock:n"),
        eval(PRL_EXTEND, &["lock:n"], &["id2", "120"]),
        same("SET lock:nottl id1"),
        eval(PRL_EXTEND, &["lock:nottl"], &["id1", "120"]),
        eval(PRL_UNLOCK, &["lock:n", "lock-signal:n"], &["id2", "1000"]),
        eval(PRL_UNLOCK, &["lock:n", "lock-signal:n"], &["id1", "1000"]),
        same("LRANGE lock-signal:n 0 -1"),
        same("TYPE lock-signal:n"),
        same("BLPOP lock-signal:n 1"),
        same("SET lock:m id NX EX 60"),
        eval(PRL_RESET, &["lock:m", "lock-signal:m"], &["", "1000"]),
        same("LLEN lock-signal:m"),
        same("SET lock:p id NX EX 60"),
        same("SET lock:q id NX EX 60"),
        eval(PRL_RESET_ALL, &[], &[]),
        same("KEYS lock:*"),
        same("LRANGE lock-signal:q 0 -1"),
    ]
}

fn all_steps() -> Vec<Step> {
    let mut s = redis_py_steps();
    s.extend(redsync_steps());
    s.extend(redlock_steps());
    s.extend(redisson_steps());
    s.extend(python_redis_lock_steps());
    s
}

#[test]
fn lock_library_scripts_match_redis_resp2() {
    diff(2, &all_steps());
}

#[test]
fn lock_library_scripts_match_redis_resp3() {
    diff(3, &all_steps());
}
