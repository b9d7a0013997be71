//! EVAL and friends against redis-server (errors, conversions, the script cache), and the
//! behaviour Palisade adds: the instruction budget and a replicated, persistent cache.

use std::thread;
use std::time::{Duration, Instant};

use crate::common::*;
use crate::differential::{diff, same, Step};

fn eval(script: &str, keys: &[&str], args: &[&str]) -> Step {
    Step::Same(eval_argv("EVAL", script, keys, args))
}

fn args_step(args: &[&str]) -> Step {
    Step::Same(args.iter().map(|a| a.as_bytes().to_vec()).collect())
}

fn conversion_steps() -> Vec<Step> {
    vec![
        eval("return 1", &[], &[]),
        eval("return 3.99", &[], &[]),
        eval("return -3.99", &[], &[]),
        eval("return 'str'", &[], &[]),
        eval("return true", &[], &[]),
        eval("return false", &[], &[]),
        eval("return nil", &[], &[]),
        eval("return {1, 2, nil, 4}", &[], &[]),
        eval(
            "return {1, {2, {3, 'x'}}, true, false, {ok='fine'}}",
            &[],
            &[],
        ),
        eval("return {ok='fine'}", &[], &[]),
        eval("return {err='My Error'}", &[], &[]),
        eval("return redis.error_reply('My Error')", &[], &[]),
        eval("return redis.status_reply('S')", &[], &[]),
        eval("return redis.sha1hex('')", &[], &[]),
        eval(
            "return #KEYS .. #ARGV .. KEYS[1] .. ARGV[2]",
            &["k1", "k2"],
            &["a1", "a2", "a3"],
        ),
        // Replies into Lua: nil is false, status is {ok=...}, integers are numbers.
        eval("return redis.call('get', 'nokey') == false", &[], &[]),
        eval("return redis.call('set', 'k', 'v').ok", &[], &[]),
        eval("return type(redis.call('set', 'k', 'v'))", &[], &[]),
        eval("return redis.call('incr', 'n') + 1", &[], &[]),
        eval("return redis.call('set', 'f', 0.1)", &[], &[]),
        same("GET f"),
        eval("return redis.call('set', 'f', 5)", &[], &[]),
        same("GET f"),
        eval("return redis.call('set', 'f', 1e20)", &[], &[]),
        same("GET f"),
        eval("return redis.call('hgetall', 'nohash')", &[], &[]),
        eval(
            "redis.call('hset', 'h', 'a', 1, 'b', 2) return redis.call('hgetall', 'h')",
            &[],
            &[],
        ),
        eval("return redis.call('lrange', 'nolist', 0, -1)", &[], &[]),
        eval("return redis.call('exists', 'k', 'nokey')", &[], &[]),
        eval("return redis.call('ttl', 'k')", &[], &[]),
        // Dynamic, mixed-case names.
        eval("return redis.call(ARGV[1], KEYS[1])", &["k"], &["GeT"]),
        eval(
            "return tostring(math.random()) .. ' ' .. math.random(100)",
            &[],
            &[],
        ),
        eval("return tostring(0.1 + 0.2)", &[], &[]),
        eval(
            "return {bit.band(0xff, 0x0f), bit.tohex(255), bit.tohex(-1, -4), bit.bxor(5, 1), \
             bit.ror(0x12345678, 8), bit.tobit(2^32 + 5), bit.arshift(-256, 4)}",
            &[],
            &[],
        ),
        eval(
            "return string.format('%d-%s', 42, 'x') .. table.concat({1, 2}, ',')",
            &[],
            &[],
        ),
    ]
}

fn error_steps() -> Vec<Step> {
    vec![
        same("SET s abc"),
        eval("return redis.call('incr', 's')", &[], &[]),
        eval("return redis.pcall('incr', 's')", &[], &[]),
        eval(
            "local ok = redis.call('set', 'kept', '1')\nreturn redis.call('incr', 's')",
            &[],
            &[],
        ),
        same("GET kept"),
        eval("return redis.call('nosuch', 's')", &[], &[]),
        eval("return redis.call('get')", &[], &[]),
        eval("return redis.call()", &[], &[]),
        eval("return redis.call({})", &[], &[]),
        eval("return redis.call('subscribe', 'x')", &[], &[]),
        eval("return redis.call('multi')", &[], &[]),
        eval("return redis.call('blpop', 'l', 0)", &[], &[]),
        eval("return redis.call('eval', 'return 1', 0)", &[], &[]),
        eval("return redis.call('hello', '3')", &[], &[]),
        eval("error('boom')", &[], &[]),
        eval("\n\nerror('on line three')", &[], &[]),
        eval("error({err='E2 bad'})", &[], &[]),
        eval("error(redis.error_reply('E3 bad'))", &[], &[]),
        eval("return 1 +", &[], &[]),
        eval("x = 1", &[], &[]),
        eval("return undefined_global", &[], &[]),
        eval("return print", &[], &[]),
        eval("return os", &[], &[]),
        eval("return nil + 1", &[], &[]),
        args_step(&["EVAL", "return 1", "-1"]),
        args_step(&["EVAL", "return 1", "3", "a"]),
        args_step(&["EVAL", "return 1", "x"]),
        args_step(&["EVAL", "return 1"]),
        args_step(&["EVALSHA", "ffffffffffffffffffffffffffffffffffffffff", "0"]),
        args_step(&["EVALSHA", "short", "0"]),
        args_step(&["EVAL_RO", "return redis.call('set', 'k', 'v')", "0"]),
        args_step(&["EVAL_RO", "return redis.pcall('set', 'k', 'v')", "0"]),
        args_step(&["EVAL_RO", "return redis.call('get', 'k')", "0"]),
        // Redis 7 shebangs.
        args_step(&[
            "EVAL",
            "#!lua flags=no-writes\nreturn redis.call('set','k','v')",
            "0",
        ]),
        args_step(&["EVAL", "#!lua\nreturn 1", "0"]),
        args_step(&["EVAL", "#!lua flags=no-writes,allow-stale\nreturn 2", "0"]),
        args_step(&["EVAL", "#!foo\nreturn 1", "0"]),
        args_step(&["EVAL", "#!lua flags=bad\nreturn 1", "0"]),
        args_step(&["EVAL", "#!lua name=x\nreturn 1", "0"]),
        args_step(&["EVAL", "#!lua\nerror('x')", "0"]),
        args_step(&["EVAL_RO", "#!lua\nreturn redis.call('set','k','v')", "0"]),
        args_step(&[
            "EVAL",
            "#!lua flags=no-writes\nreturn redis.call('get','k')",
            "0",
        ]),
        args_step(&["EVAL", "return math.random(0)", "0"]),
    ]
}

fn cache_steps() -> Vec<Step> {
    vec![
        args_step(&["SCRIPT", "LOAD", "return 'loaded'"]),
        args_step(&[
            "SCRIPT",
            "EXISTS",
            "7cf9ce5e3d4fb0d1fb4db31b9d62c2d8dc9ab1bd",
            "nope",
        ]),
        args_step(&["EVAL", "return 'cached by eval'", "0"]),
        args_step(&[
            "SCRIPT",
            "EXISTS",
            "1b8f5cba2ebd5bb9a8fa2fa1e10b2c01f5e6a5a5",
        ]),
        args_step(&["SCRIPT", "FLUSH"]),
        args_step(&["SCRIPT", "FLUSH", "ASYNC"]),
        args_step(&["SCRIPT", "FLUSH", "bad"]),
        args_step(&["SCRIPT"]),
        args_step(&["SCRIPT", "foo"]),
        args_step(&["SCRIPT", "LOAD"]),
        args_step(&["SCRIPT", "KILL"]),
    ]
}

/// Lua 5.1's pattern functions (Rust here, C in Redis): results and error texts.
fn pattern_steps() -> Vec<Step> {
    let bodies = [
        "return {string.find('hello world', 'o w')}",
        "return {string.find('hello', 'l+')}",
        "return {string.find('a+b', '+', 1, true)}",
        "return {string.find('abc', '')}",
        "return {string.find('abc', '', 10)}",
        "return {string.find('abc', 'c', -1)}",
        "return {string.find('a\\0b', '%z')}",
        "return {string.find('a\\0b', 'a\\0b')}",
        "return {string.match('  key = value  ', '^%s*(%S+)%s*=%s*(%S+)%s*$')}",
        "return {string.match('2024-01-02', '(%d+)-(%d+)-(%d+)')}",
        "return {string.match('hello', '()ll()')}",
        "return {string.match('[[x]]', '%[(%b[])%]')}",
        "return {string.match('THE (quick) fox', '%f[%a]%a+', 5)}",
        "return {string.match('x]', '[%]]')}",
        "return {string.match('a-z', '[a%-z]+')}",
        "return {string.match('abab', '(ab)%1')}",
        "return {string.match('abc', 'a?b?c?d?$')}",
        "return {string.match('$1', '$1')}",
        "return {string.match('aaa', 'a-$')}",
        "return {string.gsub('hello world', '(%w+) (%w+)', '%2 %1')}",
        "return {string.gsub('abc', '%w', '%%')}",
        "return {string.gsub('abc', 'b', '%')}",
        "return {string.gsub('abc', '()b', '%1')}",
        "return {string.gsub('abc', 'b', {b = 1})}",
        "return {string.gsub('abc', 'x*', '-')}",
        "return {string.gsub('hello', 'l', 'L', 1.9)}",
        "return {string.gsub('abc', '^a', 'x')}",
        "return {string.gsub('abc', '.', {})}",
        "return {string.gsub(12345, 3, 'x')}",
        "return {string.gsub('a b', '%w', function(c) return c:byte() end)}",
        "return {string.gsub('abc', '(b)', '%2')}",
        "return {string.gsub('abc', 'b', {b = true})}",
        "return {string.gsub('abc', 'b', function() return {} end)}",
        "return {string.gsub('abc', 'b', function() error('boom') end)}",
        "return {string.gsub('abc', 'b', function() return redis.call('nosuch') end)}",
        "return {string.gsub('abc')}",
        "return {string.gsub('abc', 'b')}",
        "return {string.gsub('abc', 'b', true)}",
        "return string.find()",
        "return ('x'):find()",
        "return string.find('a', {})",
        "return string.find('a', 'a', 'x')",
        "return {select(2, pcall(string.find))}",
        "return {pcall(string.find, 'a', '%')}",
        "return string.find('a', '%')",
        "return string.find('a', '[a')",
        "return string.find('a', '(a')",
        "return string.find('a', 'a)')",
        "return string.find('a', '%1')",
        "return string.find('a', '%b')",
        "return string.find('a', '%fa')",
        "return string.match('a', string.rep('(', 33) .. 'a' .. string.rep(')', 33))",
        "local t = {} for k, v in string.gmatch('a=1, b=2', '(%w+)=(%w+)') do t[#t + 1] = k .. v end return t",
        "local t = {} for w in string.gmatch('abc', '') do t[#t + 1] = w end return #t",
        "local t = {} for a in string.gmatch('abc', '()') do t[#t + 1] = a end return t",
        "local it = string.gmatch('ab', '.') it() it() return {it()}",
        "return {string.gmatch('a', '(')()}",
        "return string.gmatch()",
        "local s = '' for i = 0, 255 do s = s .. string.char(i) end local r = {} \
         for _, c in ipairs({'a', 'c', 'd', 'l', 'p', 's', 'u', 'w', 'x', 'z', 'A', 'S', 'W'}) do \
         r[#r + 1] = (string.gsub(s, '%' .. c, '')) end return r",
        "local s = '' for i = 0, 255 do s = s .. string.char(i) end \
         return {(string.gsub(s, '[%a_%d]', '')), (string.gsub(s, '[^%s%p]', '')), (string.gsub(s, '[a-f0-3]', ''))}",
    ];
    bodies.iter().map(|b| eval(b, &[], &[])).collect()
}

#[test]
fn script_patterns_match_redis() {
    diff(2, &pattern_steps());
}

#[test]
fn script_conversions_match_redis() {
    diff(2, &conversion_steps());
    diff(3, &conversion_steps());
}

#[test]
fn script_errors_match_redis() {
    diff(2, &error_steps());
    diff(3, &error_steps());
}

#[test]
fn script_cache_commands_match_redis() {
    let mut steps = cache_steps();
    // The SHA of a body EVAL cached is known to EVALSHA on both.
    let sha = palisade::script::sha1_hex(b"return 'cached by eval'");
    steps.push(args_step(&["EVAL", "return 'cached by eval'", "0"]));
    steps.push(Step::Same(vec![
        b"EVALSHA".to_vec(),
        sha.clone().into_bytes(),
        b"0".to_vec(),
    ]));
    steps.push(Step::Same(vec![
        b"EVALSHA".to_vec(),
        sha.to_uppercase().into_bytes(),
        b"0".to_vec(),
    ]));
    steps.push(Step::Same(vec![
        b"SCRIPT".to_vec(),
        b"EXISTS".to_vec(),
        sha.into_bytes(),
    ]));
    diff(2, &steps);
}

/// The exact NOSCRIPT text (redsync needs the space after NOSCRIPT).
#[test]
fn noscript_text_is_exact() {
    let pal = Server::start();
    let mut c = pal.conn();
    assert_reply(
        &c.c("EVALSHA 0123456789012345678901234567890123456789 0"),
        b"-NOSCRIPT No matching script. Please use EVAL.\r\n",
        "EVALSHA of an unknown script",
    );
}

/// `while true do end` is aborted by the budget, other clients keep being served, and the
/// script's writes are gone.
#[test]
fn runaway_script_is_aborted_without_trace() {
    let pal = Server::start();
    let mut c = pal.conn();
    assert_reply(&c.c("SET keep v"), b"+OK\r\n", "setup");
    let before = c.c("INFO keyspace");
    let port = pal.port();
    let pinger = thread::spawn(move || {
        let mut p = Conn::connect(port);
        let mut worst = Duration::ZERO;
        let until = Instant::now() + Duration::from_millis(1500);
        while Instant::now() < until {
            let t = Instant::now();
            assert_reply(
                &p.c("GET keep"),
                &bulk_bytes(b"v"),
                "GET during runaway scripts",
            );
            worst = worst.max(t.elapsed());
        }
        worst
    });
    for _ in 0..5 {
        let r = c.cmd(&[
            "EVAL",
            "redis.call('set', 'new', '1') redis.call('del', 'keep') while true do end",
            "0",
        ]);
        let text = String::from_utf8_lossy(&r).into_owned();
        assert!(
            text.starts_with("-ERR Script exceeded the instruction budget"),
            "runaway script reply: {text}"
        );
    }
    let r = c.cmd(&["EVAL", "while true do end", "0"]);
    assert!(
        r.starts_with(b"-ERR Script exceeded the instruction budget"),
        "{}",
        show(&r)
    );
    let worst = pinger.join().expect("pinger");
    assert!(
        worst < Duration::from_millis(1000),
        "a client waited {worst:?} behind a runaway script"
    );
    assert_reply(&c.c("GET keep"), &bulk_bytes(b"v"), "deleted key restored");
    assert_reply(&c.c("EXISTS new"), b":0\r\n", "written key discarded");
    assert_eq!(c.c("INFO keyspace"), before, "keyspace unchanged");
    // A smaller budget aborts sooner; the setting is replicated state.
    assert_reply(&c.c("SCRIPT BUDGET 1000"), b"+OK\r\n", "set budget");
    assert_reply(&c.c("SCRIPT BUDGET"), b":1000\r\n", "read budget");
    let r = c.cmd(&["EVAL", "for i = 1, 100000 do end return 1", "0"]);
    assert!(
        r.starts_with(b"-ERR Script exceeded the instruction budget of 1000"),
        "{}",
        show(&r)
    );
    assert_reply(
        &c.cmd(&["EVAL", "return 1", "0"]),
        b":1\r\n",
        "small script fits",
    );
}

/// Work done in Rust counts toward the budget: a loop of `KEYS *` is a few Lua instructions
/// per call, but each call pays for the keys it walks and returns (`script::cost`), so the
/// loop is aborted where the old fixed charge of 100 per call would have let it run on.
#[test]
fn commands_pay_for_their_work_in_rust() {
    let pal = Server::start();
    let mut c = pal.conn();
    let setup = "for i = 1, 2000 do redis.call('SET', 'k' .. i, 'v') end return 1";
    assert_reply(&c.cmd(&["EVAL", setup, "0"]), b":1\r\n", "setup");
    assert_reply(&c.c("DBSIZE"), b":2000\r\n", "keys");
    assert_reply(&c.c("SCRIPT BUDGET 1000000"), b"+OK\r\n", "budget");
    // 2,000 calls at a fixed 100 would be 200,000: within the budget. Metered, each KEYS
    // costs 100 + 2,000 keys walked + 2,000 returned, so about 240 calls fit.
    let keys_loop = "for i = 1, 2000 do redis.call('KEYS', '*') end return 'done'";
    let r = c.cmd(&["EVAL", keys_loop, "0"]);
    assert!(
        r.starts_with(b"-ERR Script exceeded the instruction budget of 1000000"),
        "{}",
        show(&r)
    );
    // SCAN pays for its COUNT, a non-fast command for the value it names.
    let scan_loop = "for i = 1, 2000 do redis.call('SCAN', '0', 'COUNT', '1000') end return 1";
    let r = c.cmd(&["EVAL", scan_loop, "0"]);
    assert!(r.starts_with(b"-ERR Script exceeded"), "{}", show(&r));
    assert_reply(
        &c.cmd(&[
            "EVAL",
            "for i = 1, 3000 do redis.call('RPUSH', 'l', 'x') end return 1",
            "0",
        ]),
        b":1\r\n",
        "list",
    );
    let range_loop = "for i = 1, 1000 do redis.call('LRANGE', 'l', '0', '-1') end return 1";
    let r = c.cmd(&["EVAL", range_loop, "0"]);
    assert!(r.starts_with(b"-ERR Script exceeded"), "{}", show(&r));
    // The same number of cheap calls still fits, and the aborted scripts left no trace.
    let get_loop =
        "for i = 1, 2000 do redis.call('GET', 'k1') redis.call('LLEN', 'l') end return 'done'";
    assert_reply(
        &c.cmd(&["EVAL", get_loop, "0"]),
        &bulk_bytes(b"done"),
        "cheap calls",
    );
    assert_reply(&c.c("DBSIZE"), b":2001\r\n", "keys after");
}

/// The script cache and the budget are replicated state: they survive a restart (the log
/// and the state machine's column family), so EVALSHA keeps working after a failover.
#[test]
fn script_cache_survives_restart() {
    let mut pal = Server::start();
    let mut c = pal.conn();
    let sha = c.cmd(&["SCRIPT", "LOAD", "return KEYS[1] .. ARGV[1]"]);
    let sha = as_bulk(&sha).expect("sha");
    assert_reply(&c.c("SCRIPT BUDGET 5000000"), b"+OK\r\n", "budget");
    c.cmd(&["EVAL", "return 'by eval'", "0"]);
    pal.restart();
    let mut c = pal.conn();
    assert_reply(
        &c.cmd(
            &[&sha[..], b"1", b"k", b"v"]
                .iter()
                .fold(vec![b"EVALSHA".to_vec()], |mut v, a| {
                    v.push(a.to_vec());
                    v
                }),
        ),
        &bulk_bytes(b"kv"),
        "EVALSHA after restart",
    );
    let by_eval = palisade::script::sha1_hex(b"return 'by eval'");
    assert_reply(
        &c.cmd(&["EVALSHA", by_eval.as_str(), "0"]),
        &bulk_bytes(b"by eval"),
        "EVAL-cached script after restart",
    );
    assert_reply(
        &c.c("SCRIPT BUDGET"),
        b":5000000\r\n",
        "budget after restart",
    );
    assert_reply(&c.c("SCRIPT FLUSH"), b"+OK\r\n", "flush");
    pal.restart();
    let mut c = pal.conn();
    assert_reply(
        &c.cmd(&["EVALSHA", by_eval.as_str(), "0"]),
        b"-NOSCRIPT No matching script. Please use EVAL.\r\n",
        "flushed scripts stay flushed",
    );
}

/// Scripts read expiry at the entry's time and see sorted KEYS results.
#[test]
fn scripts_see_sorted_keys_and_expiry() {
    let pal = Server::start();
    let mut c = pal.conn();
    for k in ["k:c", "k:a", "k:b"] {
        c.cmd(&["SET", k, "1"]);
    }
    c.c("SET k:gone 1 PX 50");
    thread::sleep(Duration::from_millis(120));
    let r = c.cmd(&["EVAL", "return redis.call('keys', 'k:*')", "0"]);
    assert_reply(
        &r,
        b"*3\r\n$3\r\nk:a\r\n$3\r\nk:b\r\n$3\r\nk:c\r\n",
        "sorted, expired key invisible",
    );
}

/// A script whose library calls do unbounded work in Lua's C library (a backtracking
/// pattern, a huge `string.rep`, allocation) used to hang apply on every replica; now each
/// is charged against the budget or the memory cap, fails promptly with the same error
/// everywhere, and the node goes on serving.
#[test]
fn hostile_library_calls_fail_promptly() {
    let pal = Server::start();
    let mut c = pal.conn();
    let cases: &[(&str, &[u8])] = &[
        (
            "local s=string.rep('a',100000) return s:find('.-.-.-.-.-.-b')",
            b"-ERR Script exceeded the instruction budget",
        ),
        (
            "return #string.rep('x', 1e12)",
            b"-ERR Script exceeded the instruction budget",
        ),
        (
            "local s = string.rep('a', 100000) for i = 1, 100000 do s:gsub('a', 'b') end",
            b"-ERR Script exceeded the instruction budget",
        ),
        (
            "local s = string.rep('a ', 50000) for i = 1, 100000 do for w in s:gmatch('%a+') do end end",
            b"-ERR Script exceeded the instruction budget",
        ),
        (
            "local t = {} for i = 1, 1e8 do t[i] = i end return #t",
            b"-ERR",
        ),
        (
            "local t = {a = 1} t[{}] = 2 for k in pairs(t) do redis.call('set', 'x', k) end",
            b"-ERR user_script:1: cannot iterate a table keyed by",
        ),
    ];
    for (body, want) in cases {
        let started = Instant::now();
        let r = c.cmd(&["EVAL", body, "0"]);
        let took = started.elapsed();
        assert!(r.starts_with(want), "{body}: {}", show(&r));
        // Loose, for a loaded machine: the hang it guards against lasted minutes.
        assert!(took < Duration::from_secs(30), "{body}: took {took:?}");
        assert_reply(&c.c("PING"), b"+PONG\r\n", "PING after a hostile script");
    }
    let r = c.cmd(&[
        "EVAL",
        "local t = {} for i = 1, 1e8 do t[i] = i end return #t",
        "0",
    ]);
    assert!(
        String::from_utf8_lossy(&r).contains("not enough memory"),
        "memory cap: {}",
        show(&r)
    );
    assert_reply(
        &c.c("EXISTS x"),
        b":0\r\n",
        "no write from the refused iteration",
    );
}
