//! Differential tests of the scripting libraries and the sandbox against redis-server 7.0:
//! `cjson`, `cmsgpack`, `struct`, `bit`, the `redis` helpers, read-only globals and library
//! tables, `redis.setresp` conversions, and commands refused inside scripts. Reply bytes
//! must match in RESP2 and RESP3 (error replies name the script's SHA1, which is the same on
//! both sides because the body is).
//!
//! Redis keeps one Lua state for all scripts, so a cjson setting changed by a script would
//! leak into the next one there (not in Palisade, where every script starts fresh). Scripts
//! that change a setting therefore restore the default before returning.

use crate::differential::{diff, same, same_args, Step};

/// `EVAL <body> 0`.
fn eval(body: &str) -> Step {
    same_args(&[b"EVAL", body.as_bytes(), b"0"])
}

fn cjson_steps() -> Vec<Step> {
    [
        // Encoding.
        "return cjson.encode({})",
        "return cjson.encode({1,2,3,{a=1}})",
        "return cjson.encode({[1]=1,[3]=3})",
        "return cjson.encode({[1]=1,[20]=3})",
        "return cjson.encode({[1]=1,[10]=3})",
        "return cjson.encode({[0]=1})",
        "return cjson.encode({[1.5]=1})",
        "return cjson.encode({[-1]=1})",
        "return cjson.encode({a={b={c={1,2,'x'}}}})",
        "return cjson.encode({k='v'})",
        "return cjson.encode(0.1)",
        "return cjson.encode(-0.0)",
        "return cjson.encode(1e300*10)",
        "return cjson.encode(0/0)",
        "return cjson.encode(123456789012345678)",
        "return cjson.encode(1/3)",
        "return cjson.encode(3)",
        "return cjson.encode('a\"\\\\/\\n\\r\\t\\b\\f\\1\\31\\127\\200')",
        "return cjson.encode(cjson.null)",
        "return cjson.encode(nil)",
        "return cjson.encode(true)",
        "return cjson.encode({false, true})",
        "return cjson.encode(function() end)",
        "return cjson.encode({f=function() end})",
        "return cjson.encode({[true]=1})",
        "return cjson.encode({[{}]=1})",
        "return cjson.encode()",
        "return cjson.encode(1, 2)",
        "local t = {} t[1] = t return cjson.encode(t)",
        // Decoding.
        "return cjson.decode('[1,2,null,{\"a\":true}]')[4].a",
        "local t = cjson.decode('[1,null,3]') return {t[1], t[2] == cjson.null, t[3]}",
        "return cjson.decode('{\"a\":{\"b\":[1,2,3]}}').a.b[3]",
        "return cjson.decode('\"\\\\u00e9\\\\ud83d\\\\ude00 \\\\n\\\\/\"')",
        "return cjson.encode(cjson.decode('[1.5e300, -0, 123456789012345678, 1e-7]'))",
        "return cjson.decode('[1e400]')",
        "return cjson.decode(' 42 ')",
        "return cjson.decode('0x10')",
        "return cjson.decode('[+1]')",
        "return cjson.decode('-Infinity')",
        "return tostring(cjson.decode('nan'))",
        "return cjson.decode('[01]')",
        "return cjson.decode('{')",
        "return cjson.decode('[1,]')",
        "return cjson.decode('[1 2]')",
        "return cjson.decode('{\"a\" 1}')",
        "return cjson.decode('{\"a\":1,}')",
        "return cjson.decode('{1:2}')",
        "return cjson.decode('\"\\\\x\"')",
        "return cjson.decode('\"abc')",
        "return cjson.decode('\"\\\\u12\"')",
        "return cjson.decode('\"\\\\udc00\"')",
        "return cjson.decode('tru')",
        "return cjson.decode('')",
        "return cjson.decode('[1] x')",
        "return cjson.decode('@')",
        "return cjson.decode('-')",
        "return cjson.decode('[[[[1]]]]')[1][1][1][1]",
        "return cjson.decode()",
        "return cjson.decode({})",
        "return cjson.decode(12)",
        // Configuration: defaults, changes (restored), and argument errors.
        "return {cjson.encode_sparse_array()}",
        "return {cjson.encode_max_depth(), cjson.decode_max_depth(), cjson.encode_number_precision()}",
        "return {cjson.encode_keep_buffer(), cjson.encode_invalid_numbers(), cjson.decode_invalid_numbers()}",
        "return {cjson._NAME, cjson._VERSION, type(cjson.null), type(cjson.new)}",
        "cjson.encode_number_precision(3) local s = cjson.encode(math.pi) \
         cjson.encode_number_precision(14) return s",
        "cjson.encode_max_depth(2) local ok, e = pcall(cjson.encode, {{{1}}}) \
         cjson.encode_max_depth(1000) return {tostring(ok), e}",
        "cjson.decode_max_depth(2) local ok, e = pcall(cjson.decode, '[[[1]]]') \
         cjson.decode_max_depth(1000) return {tostring(ok), e}",
        "local a = {cjson.encode_sparse_array(true)} local s = cjson.encode({[1]=1,[20]=3}) \
         cjson.encode_sparse_array(false) return {s, tostring(a[1]), a[2], a[3]}",
        "local a = {cjson.encode_sparse_array(false, 0)} local s = cjson.encode({[1]=1,[20]=3}) \
         cjson.encode_sparse_array(false, 2, 10) return {#s, a[2]}",
        "local r = cjson.encode_invalid_numbers('null') local s = cjson.encode({1/0, 0/0}) \
         cjson.encode_invalid_numbers(false) return {r, s}",
        "local r = tostring(cjson.encode_invalid_numbers(true)) local s = cjson.encode({1/0, -1/0}) \
         cjson.encode_invalid_numbers(false) return {r, s}",
        "cjson.decode_invalid_numbers(false) local ok, e = pcall(cjson.decode, '[0x10]') \
         cjson.decode_invalid_numbers(true) return {tostring(ok), e}",
        "return cjson.encode_max_depth(0)",
        "return cjson.encode_max_depth(1, 2)",
        "return cjson.encode_max_depth('x')",
        "return cjson.encode_number_precision(15)",
        "return cjson.encode_sparse_array(1)",
        "return cjson.encode_sparse_array(true, -1)",
        "return cjson.encode_invalid_numbers('x')",
        "return cjson.encode_keep_buffer({})",
        "local c = cjson.new() c.encode_number_precision(2) return {c.encode(1/3), cjson.encode(1/3)}",
    ]
    .iter()
    .map(|s| eval(s))
    .collect()
}

fn cmsgpack_steps() -> Vec<Step> {
    [
        "return cmsgpack.pack(1, -1, 127, 128, -32, -33, 200, -200, 70000, -70000, 2^32, 2^40, -2^40)",
        "return cmsgpack.pack(1.5, 0.1, 1/0, -1/0, 2^63, -2^63, 1e300)",
        "return cmsgpack.pack('', 'ab', string.rep('x', 31), string.rep('x', 32), string.rep('x', 300))",
        "return cmsgpack.pack(true, false, nil, cjson.null)",
        "return cmsgpack.pack({1,2,3}, {}, {a=1}, {[1]=1,[3]=3}, {1, {2, {3}}})",
        "return cmsgpack.pack({string.rep('a', 16)})",
        "local t = {} for i = 1, 20 do t[i] = i end return cmsgpack.pack(t)",
        "local t = {} for i = 1, 20 do t['k' .. i] = i end return #cmsgpack.pack(t)",
        "local t = {} local c = t for i = 1, 30 do c[1] = {} c = c[1] end return cmsgpack.pack(t)",
        "return cmsgpack.pack()",
        "return {cmsgpack.unpack(cmsgpack.pack(1, 'x', {5, 6}, true))}",
        "local t = cmsgpack.unpack(cmsgpack.pack({a = 1, b = {c = 'd'}})) return {t.a, t.b.c}",
        "return {cmsgpack.unpack(cmsgpack.pack(-1, -200, -70000, 2^40, -2^40, 1.5, 0.1))}",
        "return {cmsgpack.unpack('\\204\\200\\205\\1\\0\\206\\0\\1\\0\\0\\208\\128\\209\\128\\0')}",
        "return {cmsgpack.unpack('\\217\\2ab\\218\\0\\1c\\219\\0\\0\\0\\1d')}",
        "return {cmsgpack.unpack('\\220\\0\\2\\1\\2')}",
        "return {cmsgpack.unpack_one(cmsgpack.pack(1, 2, 3))}",
        "return {cmsgpack.unpack_one(cmsgpack.pack(1, 2, 3), 2)}",
        "return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 2)}",
        "return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 0)}",
        "return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 1, 1)}",
        "return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 2, 9)}",
        "return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), -1)}",
        "return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3))}",
        "return {cmsgpack.unpack('')}",
        "return {cmsgpack.unpack_one('')}",
        "return cmsgpack.unpack()",
        "return cmsgpack.unpack('\\196\\1a')",
        "return cmsgpack.unpack('\\193')",
        "return cmsgpack.unpack('\\146\\1')",
        "return cmsgpack.unpack('\\205\\1')",
        "return cmsgpack.unpack(string.rep('\\145', 5000) .. '\\1')",
        "return select('#', cmsgpack.unpack(string.rep('\\1', 7000)))",
        "return select('#', cmsgpack.unpack(string.rep('\\1', 8000)))",
        "return {cmsgpack._NAME, cmsgpack._VERSION, cmsgpack._COPYRIGHT, cmsgpack._DESCRIPTION}",
    ]
    .iter()
    .map(|s| eval(s))
    .collect()
}

fn struct_steps() -> Vec<Step> {
    [
        "return {struct.size('i'), struct.size('!8bd'), struct.size('T'), struct.size('l'), \
         struct.size('<h>H'), struct.size('i3'), struct.size('c7'), struct.size('z'), struct.size('!4bi')}",
        "return struct.size('s')",
        "return struct.size('c0')",
        "return struct.size('=')",
        "return struct.size('i99999999999')",
        "return struct.size()",
        "return struct.pack('<i>i', 1, 1)",
        "return struct.pack('bBhHlLT', -1, 255, -2, 65535, -3, 2^40, 7)",
        "return struct.pack('i17', 1)",
        "return struct.pack('<i3', -1)",
        "return struct.pack('<i', 2^40)",
        "return struct.pack('<I', -1)",
        "return struct.pack('<d>d<f>f', 1.5, 1.5, 0.1, 0.1)",
        "return struct.pack('c3', 'abcdef')",
        "return struct.pack('c0', 'abcdef')",
        "return struct.pack('>s', 'ab')",
        "return struct.pack('!4 b i', 1, 2)",
        "return struct.pack('!b d', 1, 2)",
        "return struct.pack('x b x', 5)",
        "return struct.pack('c', 5)",
        "return struct.pack('i', '12')",
        "return struct.pack('z', 1)",
        "return struct.pack('i33', 1)",
        "return struct.pack('!3i', 1)",
        "return struct.pack('c3', 'ab')",
        "return struct.pack('i', 'x')",
        "return struct.pack('i')",
        "return struct.pack('ii', 1)",
        "return struct.pack('i', {})",
        "return struct.pack()",
        "return struct.pack(5)",
        "return {struct.unpack('>i2', struct.pack('>i2', -2))}",
        "return {struct.unpack('bBhHlL', struct.pack('bBhHlL', -1, 255, -2, 65535, -3, 2^40))}",
        "return {struct.unpack('<I8', struct.pack('<I8', 2^53))}",
        "return {struct.unpack('Bc0', '\\3abcd')}",
        "return {struct.unpack('s s', 'ab\\0cd\\0')}",
        "return {struct.unpack('!4 b i', struct.pack('!4 b i', 1, 2))}",
        "return {struct.unpack('<i', 'abcdefgh', 5)}",
        "return {struct.unpack('i17', string.rep('a', 17))}",
        "return tostring(struct.unpack('<f', struct.pack('<f', 0.1)))",
        "return tostring(struct.unpack('>d', struct.pack('>d', 0.1)))",
        "return {struct.unpack('c0', 'abc')}",
        "return {struct.unpack('s', 'ab')}",
        "return {struct.unpack('i', 'ab')}",
        "return {struct.unpack('<i', 'abcd', 0)}",
        "return {struct.unpack('<i', 'abcd', -1)}",
        "return {struct.unpack('<i', 'abcdefgh', 6)}",
        "return {struct.unpack('i', 'abcd', 'x')}",
        "return struct.unpack('i')",
    ]
    .iter()
    .map(|s| eval(s))
    .collect()
}

fn bit_steps() -> Vec<Step> {
    [
        "return {bit.tobit(0xffffffff), bit.tobit(2^32 + 5), bit.tobit(-1), bit.tobit(1.5), bit.tobit(2.5), bit.tobit('7')}",
        "return {bit.band(0xff, 0x0f, 0x3), bit.bor(1, 2, 4), bit.bxor(5, 1), bit.bnot(0), bit.bnot(-1)}",
        "return {bit.lshift(1, 31), bit.lshift(1, 32), bit.rshift(-1, 28), bit.rshift(-1, 0), bit.arshift(-256, 4), bit.arshift(-1, 31)}",
        "return {bit.rol(0x12345678, 8), bit.ror(0x12345678, 8), bit.rol(1, 33), bit.bswap(0x12345678), bit.bswap(-1)}",
        "return {bit.tohex(255), bit.tohex(-1, -4), bit.tohex(0x1234, 2), bit.tohex(1, 0), bit.tohex(1, 9), bit.tohex(-1, -8)}",
        "return bit.band()",
        "return bit.band('x')",
        "return bit.tobit({})",
        "return bit.lshift(1)",
    ]
    .iter()
    .map(|s| eval(s))
    .collect()
}

fn sandbox_steps() -> Vec<Step> {
    [
        "redis.call = 1",
        "string.x = 1",
        "x = 1",
        "KEYS = 1",
        "_G.x = 1",
        "_G.redis = 1",
        "return y",
        "return _G.y",
        "setmetatable(_G, nil)",
        "setmetatable(string, {})",
        "rawset(_G, 'x', 1)",
        "rawset(string, 'x', 1)",
        "rawset(redis, 'call', 1)",
        "cjson.encode = 1",
        "struct.x = 1",
        "cmsgpack.x = 1",
        "bit.x = 1",
        "math.x = 1",
        "table.x = 1",
        "coroutine.x = 1",
        "redis.x = 1",
        "local function f() undefined_fn() end f()",
        "return type(getmetatable(_G))",
        "return type(getmetatable(string))",
        "return rawget(_G, 'redis') ~= nil",
        "return rawget(string, 'upper') ~= nil",
        "local t = {} for k in pairs(string) do t[#t + 1] = k end table.sort(t) return t",
        // redis.acl_check_cmd is not offered (see docs/scripting.md).
        "local t = {} for k in pairs(redis) do if k ~= 'acl_check_cmd' then t[#t + 1] = k end end \
         table.sort(t) return t",
        "local t = {} for k in pairs(cjson) do t[#t + 1] = k end table.sort(t) return t",
        "local t = {} for k in pairs(struct) do t[#t + 1] = k end table.sort(t) return t",
        "local t = {} for k in pairs(bit) do t[#t + 1] = k end table.sort(t) return t",
        "local t = {} for k, v in pairs(_G) do t[#t + 1] = k .. '=' .. type(v) end table.sort(t) return t",
        "local n = 0 for k, v in next, math do n = n + 1 end return n",
        "ARGV[1] = 'x' return ARGV[1]",
        "rawset(nil, 1, 1)",
        // Not in tail position: see docs/scripting.md on `return rawget(1, 1)`.
        "local v = rawget(1, 1) return v",
        "setmetatable(1, {})",
        "setmetatable({}, 1)",
        "local v = next(1) return v",
        "local t = {} setmetatable(t, {}) rawset(t, 'a', 1) return t.a",
        "return ('abc'):upper()",
    ]
    .iter()
    .map(|s| eval(s))
    .collect()
}

fn redis_helper_steps() -> Vec<Step> {
    [
        "return redis.error_reply('x')",
        "return redis.error_reply('-x y')",
        "return redis.error_reply(1)",
        "return redis.error_reply()",
        "return redis.status_reply('fine')",
        "return redis.status_reply()",
        "return redis.status_reply({})",
        "return type(redis.error_reply(1))",
        "return {pcall(redis.error_reply)}",
        "return redis.sha1hex('')",
        "return redis.sha1hex('abc')",
        "return redis.sha1hex(1)",
        "return redis.sha1hex(0.1)",
        "return redis.sha1hex({})",
        "return redis.sha1hex(nil)",
        "return redis.sha1hex()",
        "return redis.sha1hex('a', 'b')",
        "return redis.log(redis.LOG_WARNING, 'hi', 1, {})",
        "return redis.log(redis.LOG_DEBUG, 'a')",
        "return redis.log(1.5, 'x')",
        "return redis.log('2', 'x')",
        "return redis.log(9, 'x')",
        "return redis.log(-1, 'x')",
        "return redis.log(1)",
        "return redis.log()",
        "return redis.log('x', 'y')",
        "return {redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING}",
        "return {redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL}",
        "return redis.set_repl(redis.REPL_ALL)",
        "return redis.set_repl(redis.REPL_NONE)",
        "return redis.set_repl(9)",
        "return redis.set_repl()",
        "return redis.set_repl(1, 2)",
        "return redis.replicate_commands()",
        "return redis.breakpoint()",
        "return redis.debug('x', 1)",
        "return redis.setresp(4)",
        "return redis.setresp()",
        "return redis.setresp('x')",
        "return redis.setresp(2, 3)",
        "return redis.error_reply('x y')",
        "return redis.error_reply('-x')",
        "return redis.error_reply('-x y\\r\\n')",
        "return redis.error_reply('')",
        "return redis.status_reply(1)",
        "local ok, e = pcall(cjson.encode) return e",
        "local ok, e = pcall(struct.pack) return e",
        "local ok, e = pcall(bit.band, 'x') return e",
        "redis.setresp('3') return 1",
        "redis.setresp(3) return true",
        "redis.setresp(3) return false",
        "redis.setresp(2) return true",
    ]
    .iter()
    .map(|s| eval(s))
    .collect()
}

fn setresp_steps() -> Vec<Step> {
    let mut s = vec![same("HSET h f1 v1 f2 v2"), same("SET k v")];
    s.extend(
        [
            "redis.setresp(3) local r = redis.call('hgetall', 'h') return {type(r), type(r.map), r.map.f1}",
            "redis.setresp(3) return redis.call('hgetall', 'h')",
            "redis.setresp(2) return redis.call('hgetall', 'h')",
            "redis.setresp(3) return redis.call('get', 'nokey') == nil",
            "redis.setresp(2) return redis.call('get', 'nokey') == false",
            "redis.setresp(3) return redis.call('get', 'k')",
            "redis.setresp(3) return redis.call('set', 'k', 'v')",
            "redis.setresp(3) return redis.call('exists', 'k')",
            "return {map={a='b'}}",
            "return {set={a=true}}",
            "return {1, {map={x=1}}}",
        ]
        .iter()
        .map(|b| eval(b)),
    );
    s
}

fn refused_steps() -> Vec<Step> {
    let mut s = vec![same("RPUSH l a b")];
    s.extend(
        [
            "return redis.call('blpop', 'l', 0)",
            "return redis.call('blpop', 'l', 1)",
            "return redis.call('brpop', 'l', 1)",
            "return redis.call('subscribe', 'c')",
            "return redis.call('psubscribe', 'c*')",
            "return redis.call('multi')",
            "return redis.call('exec')",
            "return redis.call('watch', 'x')",
            "return redis.call('eval', 'return 1', 0)",
            "return redis.call('script', 'load', 'return 1')",
            "return redis.call('auth', 'x')",
            "return redis.call('hello', '3')",
            "return redis.call('select', 0)",
            "return redis.call('ping')",
            "return redis.pcall('blpop', 'l', 1)['err']",
            "return redis.call('lrange', 'l', 0, -1)",
        ]
        .iter()
        .map(|b| eval(b)),
    );
    s
}

/// `redis.acl_check_cmd` as the default user, then as a user with fewer rights (commands,
/// keys, channels), and its errors.
fn acl_check_steps() -> Vec<Step> {
    let checks = [
        "return redis.acl_check_cmd('get', 'k')",
        "return type(redis.acl_check_cmd('get', 'k'))",
        "return redis.acl_check_cmd('GeT', 'k')",
        "return redis.acl_check_cmd('set', 'allowed1', 'v')",
        "return redis.acl_check_cmd('get', 'allowed1')",
        "return redis.acl_check_cmd('get', 'other')",
        "return redis.acl_check_cmd('mget', 'allowed1', 'other')",
        "return redis.acl_check_cmd('get')",
        "return redis.acl_check_cmd('get', 'allowed1', 'extra')",
        "return redis.acl_check_cmd('publish', 'chan', 'm')",
        "return redis.acl_check_cmd('publish', 'nochan', 'm')",
        "return redis.acl_check_cmd('client', 'id')",
        "return redis.acl_check_cmd('client')",
        "return redis.acl_check_cmd('get', 1)",
        "return redis.acl_check_cmd('nosuch')",
        "return redis.acl_check_cmd('client', 'nosuch')",
        "return redis.acl_check_cmd()",
        "return redis.acl_check_cmd({})",
        "return redis.acl_check_cmd('get', {})",
        "redis.setresp(3) return redis.acl_check_cmd('get', 'other')",
    ];
    let mut s: Vec<Step> = checks.iter().map(|b| eval(b)).collect();
    s.push(same(
        "ACL SETUSER bob on nopass +@all -set resetkeys ~allowed* resetchannels &chan",
    ));
    s.push(same("AUTH bob x"));
    s.extend(checks.iter().map(|b| eval(b)));
    s
}

/// `{double=n}`: a RESP3 double to a RESP3 client, a bulk string to a RESP2 one, whatever
/// `redis.setresp` says.
fn double_steps() -> Vec<Step> {
    [
        "return {double=3.5}",
        "return {double=0/0}",
        "return {double=-(0/0)}",
        "return {double=1/0}",
        "return {double=-1/0}",
        "return {double=-0.0}",
        "return {double=0.1}",
        "return {double=1e300}",
        "return {double=123456789012345678}",
        "return {double=7}",
        "return {double='x'}",
        "return {double='2'}",
        "redis.setresp(3) return {double=2}",
        "redis.setresp(2) return {double=2.25}",
        "return {1, {double=2.5}, {map={a={double=1}}}}",
    ]
    .iter()
    .map(|s| eval(s))
    .collect()
}

/// Nesting at the limits Palisade shares with Redis: cjson's default depths (1000), 1000
/// levels of msgpack arrays, 256 levels of result tables. Deeper, Redis goes on to its Lua
/// C stack's limit and Palisade stops (docs/scripting.md, "Deliberate differences").
fn depth_steps() -> Vec<Step> {
    let nest = |levels: usize, tail: &str| {
        format!("local t = {{}} local c = t for i = 2, {levels} do c[1] = {{}} c = c[1] end {tail}")
    };
    let bodies = [
        nest(1000, "return #cjson.encode(t)"),
        nest(1001, "return #cjson.encode(t)"),
        nest(256, "c[1] = 5 return t"),
        "local s = string.rep('[', 1000) .. string.rep(']', 1000) return #cjson.decode(s)".into(),
        "local s = string.rep('[', 1001) .. string.rep(']', 1001) return #cjson.decode(s)".into(),
        "local s = string.rep('{\"a\":', 1000) .. '1' .. string.rep('}', 1000) \
         return type(cjson.decode(s))"
            .into(),
        "local s = string.rep('{\"a\":', 1001) .. '1' .. string.rep('}', 1001) \
         return type(cjson.decode(s))"
            .into(),
        "local s = string.rep(string.char(0x91), 999) .. string.char(0x90) \
         return type(cmsgpack.unpack(s))"
            .into(),
        "cjson.encode_max_depth(5) local ok, e = pcall(cjson.encode, {{{{{{1}}}}}}) \
         cjson.encode_max_depth(1000) return e"
            .into(),
        "cjson.decode_max_depth(3) local ok, e = pcall(cjson.decode, '[[[[1]]]]') \
         cjson.decode_max_depth(1000) return e"
            .into(),
    ];
    bodies.iter().map(|b| eval(b)).collect()
}

macro_rules! both {
    ($steps:ident, $r2:ident, $r3:ident) => {
        #[test]
        fn $r2() {
            diff(2, &$steps());
        }
        #[test]
        fn $r3() {
            diff(3, &$steps());
        }
    };
}

both!(cjson_steps, lua_cjson_resp2, lua_cjson_resp3);
both!(cmsgpack_steps, lua_cmsgpack_resp2, lua_cmsgpack_resp3);
both!(struct_steps, lua_struct_resp2, lua_struct_resp3);
both!(bit_steps, lua_bit_resp2, lua_bit_resp3);
both!(
    sandbox_steps,
    lua_readonly_globals_resp2,
    lua_readonly_globals_resp3
);
both!(
    redis_helper_steps,
    lua_redis_helpers_resp2,
    lua_redis_helpers_resp3
);
both!(setresp_steps, lua_setresp_resp2, lua_setresp_resp3);
both!(
    refused_steps,
    lua_refused_commands_resp2,
    lua_refused_commands_resp3
);
both!(
    acl_check_steps,
    lua_acl_check_cmd_resp2,
    lua_acl_check_cmd_resp3
);
both!(
    double_steps,
    lua_double_result_resp2,
    lua_double_result_resp3
);
both!(
    depth_steps,
    lua_nesting_limits_resp2,
    lua_nesting_limits_resp3
);
