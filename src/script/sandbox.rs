//! The Lua environment a script runs in: a fresh Lua 5.1 state per run with only the base,
//! string, table, math and bit libraries (no os, io, debug, package, loadfile, dofile, print),
//! Redis's deterministic `math.random`, the `redis` table, KEYS and ARGV, and Redis 7's
//! global protection (creating or reading an undefined global is an error).
//!
//! A fresh state per run means nothing a script does can leak into the next one, so every
//! replica runs every script from the same starting point whatever ran before.

use std::cell::Cell;
use std::rc::Rc;

use crate::state::scripts::sha1_hex;
use bytes::Bytes;
use mlua::{Function, Lua, LuaOptions, MultiValue, StdLib, Table, Value};

use super::meter;

/// Most memory one script's Lua state may allocate. Allocation is deterministic for a given
/// build, so hitting the limit fails the same way on every replica.
pub const MEMORY_LIMIT: usize = 64 * 1024 * 1024;

/// The drand48 state Redis's PRNG starts from (its static initializer).
const RAND_INIT: u64 = 0x1234_ABCD_330E;

/// Globals of the base library that Redis does not offer scripts.
const REMOVED: &[&str] = &[
    "dofile", "loadfile", "print", "getfenv", "setfenv", "newproxy", "module", "require",
];

/// Lua run once per state, before the script:
/// - `tostring` of a table, function or coroutine names no memory address (it would differ
///   between replicas, and a script could store it);
/// - `loadstring` and `load` refuse bytecode (malformed bytecode can crash Lua 5.1);
/// - Redis 7's global protection.
const PRELUDE: &str = r#"
local error, type, getmetatable, rawtostring = error, type, getmetatable, tostring
local loadstring, concat = loadstring, table.concat
local opaque = { table = true, ["function"] = true, thread = true, userdata = true }
rawset(_G, "tostring", function(v)
  local t = type(v)
  if opaque[t] then
    local mt = getmetatable(v)
    if type(mt) ~= "table" or mt.__tostring == nil then
      return t .. ": 0x00000000"
    end
  end
  return rawtostring(v)
end)
local function safe_loadstring(s, name)
  if type(s) == "string" and s:byte(1) == 27 then
    return nil, "loading bytecode is not allowed"
  end
  return loadstring(s, name)
end
rawset(_G, "loadstring", safe_loadstring)
rawset(_G, "load", function(f, name)
  if type(f) ~= "function" then error("bad argument #1 to 'load' (function expected)", 2) end
  local parts = {}
  while true do
    local p = f()
    if p == nil or p == "" then break end
    if type(p) ~= "string" then error("reader function must return a string", 2) end
    parts[#parts + 1] = p
  end
  return safe_loadstring(concat(parts), name or "=(load)")
end)
rawset(_G, "__redis__err__handler", function(err) return err end)

-- Redis 7's read-only globals and library tables. Vanilla Lua 5.1 has no read-only
-- tables, so each protected table becomes an empty proxy whose metatable reads through to
-- the real table and refuses writes; _G itself is emptied the same way (its contents move
-- to `store`). rawset, setmetatable, rawget, next, pairs and ipairs see through proxies.
local G = _G
local rawset, rawget, setmetatable, next, ipairs = rawset, rawget, setmetatable, next, ipairs
local RO = "Attempt to modify a readonly table"
local function refuse() error(RO, 2) end
local real = {}
local store = {}
for k, v in next, G do store[k] = v end
for k in next, store do rawset(G, k, nil) end
local function protect(t)
  local p = {}
  real[p] = t
  setmetatable(p, { __index = t, __newindex = refuse, __metatable = false })
  return p
end
for _, name in ipairs({ "string", "table", "math", "coroutine", "bit", "cjson", "cmsgpack",
                        "struct", "redis" }) do
  store[name] = protect(store[name])
end
local global_meta = {
  __index = function(_, n)
    error("Script attempted to access nonexistent global variable '" .. tostring(n) .. "'", 2)
  end,
}
real[G] = store
-- Argument errors are raised here, at the script's level, with the names Lua would give.
local function check(t, name)
  if type(t) ~= "table" then
    error("bad argument #1 to '" .. name .. "' (table expected, got " .. type(t) .. ")", 3)
  end
end
store.rawset = function(t, k, v)
  check(t, "rawset")
  if real[t] then error(RO, 0) end
  return rawset(t, k, v)
end
store.setmetatable = function(t, mt)
  check(t, "setmetatable")
  if mt ~= nil and type(mt) ~= "table" then
    error("bad argument #2 to 'setmetatable' (nil or table expected)", 2)
  end
  if real[t] then error(RO, 0) end
  return setmetatable(t, mt)
end
store.getmetatable = function(v)
  if v == G then return global_meta end
  if real[v] then return nil end
  return getmetatable(v)
end
store.rawget = function(t, k)
  check(t, "rawget")
  return rawget(real[t] or t, k)
end
-- A table keyed by tables, functions, coroutines or userdata is laid out by memory address,
-- so its traversal order (of every key, not only those) differs between replicas: such a
-- traversal is refused. A traversal from the start checks every key first; a step from a
-- key checks the key it returns.
local strict_order = ...
local see_next
if strict_order then
  local by_address = { table = true, ["function"] = true, thread = true, userdata = true }
  local ORDER = "cannot iterate a table keyed by a table, function, coroutine or userdata "
    .. "(its order would differ between replicas)"
  see_next = function(t, k)
    check(t, "next")
    local r = real[t] or t
    if k == nil then
      for key in next, r do
        if by_address[type(key)] then error(ORDER, 2) end
      end
    end
    local nk, nv = next(r, k)
    if by_address[type(nk)] then error(ORDER, 2) end
    return nk, nv
  end
  -- table.foreach walks with lua_next: the same rule.
  rawset(real[store.table], "foreach", function(t, f)
    check(t, "foreach")
    if type(f) ~= "function" then
      error("bad argument #2 to 'foreach' (function expected, got " .. type(f) .. ")", 2)
    end
    for k, v in see_next, t do
      local r = f(k, v)
      if r ~= nil then return r end
    end
  end)
else
  -- Log entries written before the rule run as they ran.
  see_next = function(t, k)
    check(t, "next")
    return next(real[t] or t, k)
  end
end
store.next = see_next
store.pairs = function(t)
  if type(t) ~= "table" then error("bad argument #1 to 'pairs' (table expected, got " .. type(t) .. ")", 2) end
  return see_next, t, nil
end
store.ipairs = function(t)
  if type(t) ~= "table" then error("bad argument #1 to 'ipairs' (table expected, got " .. type(t) .. ")", 2) end
  return ipairs(real[t] or t)
end
setmetatable(store, global_meta)
setmetatable(G, { __index = store, __newindex = refuse, __metatable = false })
"#;

/// Creates the Lua state with the libraries and the values that do not need the keyspace.
pub fn new_state(keys: &[Bytes], args: &[Bytes]) -> mlua::Result<Lua> {
    let lua = Lua::new_with(
        StdLib::TABLE | StdLib::STRING | StdLib::MATH,
        LuaOptions::default(),
    )?;
    lua.set_memory_limit(MEMORY_LIMIT)?;
    let g = lua.globals();
    for name in REMOVED {
        g.raw_set(*name, Value::Nil)?;
    }
    g.raw_set("KEYS", strings(&lua, keys)?)?;
    g.raw_set("ARGV", strings(&lua, args)?)?;
    install_random(&lua)?;
    super::strlib::install(&lua, &g.raw_get("string")?)?;
    for (name, table) in [
        ("bit", super::bitlib::create(&lua)?),
        ("cjson", super::cjson::create(&lua)?),
        ("cmsgpack", super::cmsgpack::create(&lua)?),
        ("struct", super::structlib::create(&lua)?),
    ] {
        wrap_library(&lua, &table)?;
        g.raw_set(name, table)?;
    }
    g.raw_set("redis", redis_table(&lua)?)?;
    register_rules(&lua)?;
    Ok(lua)
}

/// Registers the library functions the call hook charges before they run (see
/// [`meter::Rule`]; only under [`super::cost::CostModel::Library`]).
fn register_rules(lua: &Lua) -> mlua::Result<()> {
    use meter::Rule::*;
    let g = lua.globals();
    let rules: &[(&str, &str, meter::Rule)] = &[
        ("string", "rep", Rep),
        ("string", "upper", FirstString),
        ("string", "lower", FirstString),
        ("string", "reverse", FirstString),
        ("string", "sub", Sub),
        ("string", "byte", Byte),
        ("string", "char", PerArgument),
        ("string", "format", AllStrings),
        ("table", "concat", Concat),
        ("table", "insert", Insert),
        ("table", "remove", Remove),
        ("table", "sort", Sort),
        ("table", "maxn", Keys),
        ("", "unpack", Unpack),
        ("", "loadstring", FirstString),
        ("", "tonumber", FirstString),
        ("", "select", PerArgument),
        ("math", "max", PerArgument),
        ("math", "min", PerArgument),
        ("coroutine", "resume", PerArgument),
        ("cjson", "decode", FirstString),
        ("cmsgpack", "unpack", FirstString),
        ("cmsgpack", "unpack_one", FirstString),
        ("cmsgpack", "unpack_limit", FirstString),
        ("struct", "pack", AllStrings),
        ("struct", "unpack", AllStrings),
    ];
    for (lib, name, rule) in rules {
        let table: Table = if lib.is_empty() {
            g.clone()
        } else {
            g.raw_get(*lib)?
        };
        if let Value::Function(f) = table.raw_get::<Value>(*name)? {
            meter::register(lua, &f, *rule)?;
        }
    }
    Ok(())
}

/// The message of an error a library function raised (None for other errors, such as
/// memory errors, which must propagate as they are).
fn library_error(e: &mlua::Error) -> Option<String> {
    match e {
        mlua::Error::CallbackError { cause, .. } => library_error(cause),
        mlua::Error::RuntimeError(m) => Some(m.clone()),
        _ => None,
    }
}

/// Puts every function of a library table (written in Rust) behind [`library_shim`], so that
/// its errors are raised as Lua strings with `luaL_error`'s position prefix, as the C
/// libraries Redis bundles raise them: `user_script:1: ...` when the script called the
/// function, no prefix when `pcall` did, and a plain string for `pcall` to return.
fn wrap_library(lua: &Lua, table: &Table) -> mlua::Result<()> {
    let mut functions = Vec::new();
    for pair in table.pairs::<Value, Value>() {
        if let (k, Value::Function(f)) = pair? {
            functions.push((k, f));
        }
    }
    for (k, inner) in functions {
        let flagged = lua.create_function(move |lua, args: MultiValue| {
            meter::take_values();
            match inner.call::<MultiValue>(args) {
                Ok(values) => {
                    charge_results(lua, &values)?;
                    let mut out = vec![Value::Boolean(true)];
                    out.extend(values);
                    Ok(MultiValue::from_iter(out))
                }
                Err(e) => match library_error(&e) {
                    Some(m) => Ok(MultiValue::from_iter([
                        Value::Boolean(false),
                        Value::String(lua.create_string(m)?),
                    ])),
                    None => Err(e),
                },
            }
        })?;
        // SAFETY: pushes a C closure over the function given as the only argument.
        let shim: Function = unsafe {
            lua.exec_raw(flagged, |state| {
                mlua::ffi::lua_pushcclosure(state, library_shim, 1);
            })?
        };
        table.raw_set(k, shim)?;
    }
    Ok(())
}

/// Charges the strings a Rust library function returned (`cjson.encode`, `cmsgpack.pack`,
/// `struct.pack`: their work is proportional to their output).
fn charge_results(lua: &Lua, values: &MultiValue) -> mlua::Result<()> {
    let Some(m) = meter::of(lua) else {
        return Ok(());
    };
    let bytes: u64 = meter::RUST_CALL_UNITS * meter::LIBRARY_BYTES_PER_UNIT
        + values
            .iter()
            .map(|v| match v {
                Value::String(s) => s.as_bytes().len() as u64,
                _ => 0,
            })
            .sum::<u64>();
    let units = (bytes / meter::LIBRARY_BYTES_PER_UNIT).saturating_add(meter::take_values());
    if m.charge_library(units) {
        return Err(mlua::Error::runtime(meter::ABORT));
    }
    Ok(())
}

/// Calls its upvalue (a Rust function returning `ok, values...` or `false, message`) and
/// returns the values, or raises the message prefixed with `luaL_where(L, 1)`.
unsafe extern "C-unwind" fn library_shim(state: *mut mlua::lua_State) -> std::ffi::c_int {
    use mlua::ffi;
    let n = ffi::lua_gettop(state);
    ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
    ffi::lua_insert(state, 1);
    ffi::lua_call(state, n, ffi::LUA_MULTRET);
    let results = ffi::lua_gettop(state);
    if ffi::lua_toboolean(state, 1) == 0 {
        ffi::luaL_where(state, 1);
        if ffi::lua_objlen(state, -1) == 0 {
            // Not called from the script's code (from pcall, say): Lua then names the
            // function '?' in argument errors.
            let mut len = 0;
            let p = ffi::lua_tolstring(state, 2, &mut len);
            let msg = std::slice::from_raw_parts(p as *const u8, len);
            let fixed = unnamed(msg);
            ffi::lua_pushlstring(state, fixed.as_ptr() as *const _, fixed.len());
            drop(fixed);
        } else {
            ffi::lua_pushvalue(state, 2);
        }
        ffi::lua_concat(state, 2);
        ffi::lua_error(state);
    }
    results - 1
}

/// `bad argument #N to 'name' (...)` becomes `bad argument #N to '?' (...)`.
fn unnamed(msg: &[u8]) -> Vec<u8> {
    const HEAD: &[u8] = b"bad argument #";
    if !msg.starts_with(HEAD) {
        return msg.to_vec();
    }
    let Some(open) = msg.windows(5).position(|w| w == b" to '") else {
        return msg.to_vec();
    };
    let name_start = open + 5;
    let Some(close) = msg[name_start..].iter().position(|&c| c == b'\'') else {
        return msg.to_vec();
    };
    let mut out = msg[..name_start].to_vec();
    out.push(b'?');
    out.extend_from_slice(&msg[name_start + close..]);
    out
}

/// Where `redis.call`/`redis.pcall` find the Rust function that executes commands.
const RAW_KEY: &std::ffi::CStr = c"palisade.raw";

/// Installs `redis.call`/`redis.pcall` over `raw` (which returns the converted reply and
/// whether it is an error) and protects the globals.
///
/// Both are C functions, as in Redis: a C function called in tail position keeps the
/// script's stack frame, so an error raised by `redis.call` can name the script line, and
/// the error it raises is the `{err=...}` table itself (mlua would turn a table raised from a
/// Rust callback into a string).
///
/// `acl_check` (the same contract as `raw`) becomes `redis.acl_check_cmd`.
///
/// `strict_order` makes `pairs`/`next`/`table.foreach` refuse tables keyed by objects (the
/// library model; older log entries replay as they ran).
pub fn finish_state(
    lua: &Lua,
    raw: Function,
    acl_check: Function,
    strict_order: bool,
) -> mlua::Result<()> {
    lua.set_named_registry_value("palisade.raw", raw)?;
    lua.set_named_registry_value("palisade.acl_check_cmd", acl_check)?;
    let redis: Table = lua.globals().raw_get("redis")?;
    // SAFETY: the functions only use the Lua C API on the stack they are given; they raise
    // through lua_error with no Rust values live in their frames.
    let (call, pcall, acl_check_cmd) = unsafe {
        (
            lua.create_c_function(redis_call)?,
            lua.create_c_function(redis_pcall)?,
            lua.create_c_function(redis_acl_check_cmd)?,
        )
    };
    redis.raw_set("call", call)?;
    redis.raw_set("pcall", pcall)?;
    redis.raw_set("acl_check_cmd", acl_check_cmd)?;
    install_raising(lua, &redis)?;
    for name in ["sha1hex", "log"] {
        if let Value::Function(f) = redis.raw_get::<Value>(name)? {
            meter::register(lua, &f, meter::Rule::AllStrings)?;
        }
    }
    let prelude = lua.load(PRELUDE).set_name("=palisade").into_function()?;
    prelude.call::<()>(strict_order)
}

unsafe extern "C-unwind" fn redis_call(state: *mut mlua::lua_State) -> std::ffi::c_int {
    call_raw(state, RAW_KEY, true)
}

unsafe extern "C-unwind" fn redis_pcall(state: *mut mlua::lua_State) -> std::ffi::c_int {
    call_raw(state, RAW_KEY, false)
}

unsafe extern "C-unwind" fn redis_acl_check_cmd(state: *mut mlua::lua_State) -> std::ffi::c_int {
    call_raw(state, c"palisade.acl_check_cmd", true)
}

/// C functions over Rust ones that raise Redis's `{err=...}` tables (no position prefix),
/// as `luaPushError` + `luaError` do in Redis: one per registry key.
macro_rules! raising {
    ($($fn_name:ident => $key:literal),* $(,)?) => {
        $(unsafe extern "C-unwind" fn $fn_name(state: *mut mlua::lua_State) -> std::ffi::c_int {
            call_raw(state, $key, true)
        })*
        /// Replaces each `redis.<name>` by its raising C function.
        fn install_raising(lua: &Lua, redis: &Table) -> mlua::Result<()> {
            $({
                let key: &std::ffi::CStr = $key;
                let name = key.to_str().unwrap_or_default().trim_start_matches("palisade.");
                let inner = raising_impl(lua, redis, name)?;
                lua.set_named_registry_value(key.to_str().unwrap_or_default(), inner)?;
                // SAFETY: as for redis.call: stack-only Lua C API use, raising via lua_error.
                let f = unsafe { lua.create_c_function($fn_name)? };
                redis.raw_set(name, f)?;
            })*
            Ok(())
        }
    };
}

raising! {
    raise_setresp => c"palisade.setresp",
    raise_sha1hex => c"palisade.sha1hex",
    raise_log => c"palisade.log",
    raise_set_repl => c"palisade.set_repl",
}

/// An `{err="ERR <msg>"}` table and the failure flag, for the raising C functions.
fn fail(lua: &Lua, msg: &str) -> mlua::Result<(Value, bool)> {
    let t = lua.create_table()?;
    t.raw_set("err", format!("ERR {msg}"))?;
    Ok((Value::Table(t), true))
}

/// Lua's `lua_tonumber`: numbers and numeric strings, else 0.
fn to_number(v: &Value) -> f64 {
    match v {
        Value::String(s) => super::cjson::lua_str_number(&s.as_bytes()).unwrap_or(0.0),
        other => super::cjson::number(other).unwrap_or(0.0),
    }
}

/// The Rust side of a raising `redis.<name>`: returns `(value, failed)`.
fn raising_impl(lua: &Lua, redis: &Table, name: &str) -> mlua::Result<Function> {
    match name {
        "setresp" => {
            let inner: Function = redis.raw_get("setresp")?;
            lua.create_function(move |lua, args: MultiValue| {
                if args.len() != 1 {
                    return fail(lua, "redis.setresp() requires one argument.");
                }
                let resp = to_number(&args[0]) as i32;
                if resp != 2 && resp != 3 {
                    return fail(lua, "RESP version must be 2 or 3.");
                }
                inner.call::<()>(resp)?;
                Ok((Value::Nil, false))
            })
        }
        "sha1hex" => lua.create_function(|lua, args: MultiValue| {
            if args.len() != 1 {
                return fail(lua, "wrong number of arguments");
            }
            let hex = match &args[0] {
                Value::String(s) => sha1_hex(&s.as_bytes()),
                v @ (Value::Number(_) | Value::Integer(_)) => {
                    let n = super::cjson::number(v).unwrap_or(0.0);
                    sha1_hex(super::convert::fmt_g14(n).as_bytes())
                }
                _ => sha1_hex(b""),
            };
            Ok((Value::String(lua.create_string(hex)?), false))
        }),
        "log" => lua.create_function(log),
        _ => lua.create_function(|lua, args: MultiValue| {
            // redis.set_repl: accepted and checked as Redis does, with no effect (every
            // script's writes are replicated as one log entry).
            if args.len() != 1 {
                return fail(lua, "redis.set_repl() requires two arguments.");
            }
            let flags = to_number(&args[0]) as i64;
            if flags & !3 != 0 {
                return fail(
                    lua,
                    "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.",
                );
            }
            Ok((Value::Nil, false))
        }),
    }
}

/// Calls the Rust function registered under `key` with this call's arguments; raises its
/// value when it reports an error and `raise` is set, else returns the value.
unsafe fn call_raw(
    state: *mut mlua::lua_State,
    key: &std::ffi::CStr,
    raise: bool,
) -> std::ffi::c_int {
    use mlua::ffi;
    let n = ffi::lua_gettop(state);
    ffi::lua_getfield(state, ffi::LUA_REGISTRYINDEX, key.as_ptr());
    ffi::lua_insert(state, 1);
    ffi::lua_call(state, n, 2);
    let failed = ffi::lua_toboolean(state, -1) != 0;
    ffi::lua_settop(state, -2);
    if failed && raise {
        ffi::lua_error(state)
    }
    1
}

fn strings(lua: &Lua, items: &[Bytes]) -> mlua::Result<Table> {
    let t = lua.create_table_with_capacity(items.len(), 0)?;
    for (i, item) in items.iter().enumerate() {
        t.raw_set(i + 1, lua.create_string(item)?)?;
    }
    Ok(t)
}

/// Redis's `math.random`/`math.randomseed`: drand48 arithmetic, restarted from Redis's
/// initial state in every script (Redis continues one sequence per process).
fn install_random(lua: &Lua) -> mlua::Result<()> {
    let state = Rc::new(Cell::new(RAND_INIT));
    let s = state.clone();
    let random = lua.create_function(move |_, args: MultiValue| {
        let x = s.get().wrapping_mul(0x5_DEEC_E66D).wrapping_add(0xB) & ((1 << 48) - 1);
        s.set(x);
        let max = i32::MAX as f64;
        let r = ((x >> 17) as f64 % max) / max;
        let int = |v: &Value| match v {
            Value::Number(n) => Ok(*n as i32 as f64),
            Value::Integer(n) => Ok(*n as i32 as f64),
            _ => Err(mlua::Error::runtime(
                "bad argument to 'random' (number expected)",
            )),
        };
        match args.len() {
            0 => Ok(r),
            1 => {
                let u = int(&args[0])?;
                if u < 1.0 {
                    return Err(mlua::Error::runtime(
                        "bad argument #1 to 'random' (interval is empty)",
                    ));
                }
                Ok((r * u).floor() + 1.0)
            }
            2 => {
                let (l, u) = (int(&args[0])?, int(&args[1])?);
                if l > u {
                    return Err(mlua::Error::runtime(
                        "bad argument #2 to 'random' (interval is empty)",
                    ));
                }
                Ok((r * (u - l + 1.0)).floor() + l)
            }
            _ => Err(mlua::Error::runtime("wrong number of arguments")),
        }
    })?;
    let seed = lua.create_function(move |_, n: f64| {
        let seed = n as i32 as u32 as u64;
        state.set((seed << 16) | 0x330E);
        Ok(())
    })?;
    let math: Table = lua.globals().raw_get("math")?;
    math.raw_set("random", random)?;
    math.raw_set("randomseed", seed)?;
    Ok(())
}

/// The `redis` table, without `call`/`pcall` (see [`finish_state`]).
fn redis_table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "error_reply",
        lua.create_function(|lua, a: MultiValue| reply_table(lua, "err", a))?,
    )?;
    t.raw_set(
        "status_reply",
        lua.create_function(|lua, a: MultiValue| reply_table(lua, "ok", a))?,
    )?;
    // sha1hex, log, set_repl and setresp are installed by `finish_state` (they raise
    // Redis's error tables).
    t.raw_set(
        "replicate_commands",
        lua.create_function(|_, _: MultiValue| Ok(true))?,
    )?;
    // Outside a debugging session (SCRIPT DEBUG is not offered) Redis's breakpoint returns
    // false and debug does nothing.
    t.raw_set(
        "breakpoint",
        lua.create_function(|_, _: MultiValue| Ok(false))?,
    )?;
    t.raw_set("debug", lua.create_function(|_, _: MultiValue| Ok(()))?)?;
    for (name, v) in [
        ("LOG_DEBUG", 0),
        ("LOG_VERBOSE", 1),
        ("LOG_NOTICE", 2),
        ("LOG_WARNING", 3),
        ("REPL_NONE", 0),
        ("REPL_AOF", 1),
        ("REPL_SLAVE", 2),
        ("REPL_REPLICA", 2),
        ("REPL_ALL", 3),
    ] {
        t.raw_set(name, v)?;
    }
    t.raw_set("REDIS_VERSION", "7.2.0")?;
    t.raw_set("REDIS_VERSION_NUM", 0x0007_0200)?;
    Ok(t)
}

/// `redis.error_reply`/`redis.status_reply`. With anything but one string they return (not
/// raise) the error `ERR wrong number or type of arguments`, as Redis does.
fn reply_table(lua: &Lua, field: &str, args: MultiValue) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let s = match (args.len(), args.front()) {
        (1, Some(Value::String(s))) => s.as_bytes().to_vec(),
        _ => {
            t.raw_set("err", "ERR wrong number or type of arguments")?;
            return Ok(t);
        }
    };
    if field == "err" {
        t.raw_set("err", lua.create_string(error_reply_text(&s))?)?;
    } else {
        t.raw_set("ok", lua.create_string(&s)?)?;
    }
    Ok(t)
}

/// Redis's `luaPushErrorBuff` on `-` + the message unless it starts with one: `-CODE msg`
/// keeps its code, a message without a space gets `ERR`; `\r` and `\n` are trimmed from
/// both ends of the message.
fn error_reply_text(s: &[u8]) -> Vec<u8> {
    let body = s.strip_prefix(b"-").unwrap_or(s);
    let (code, msg): (&[u8], &[u8]) = match body.iter().position(|&c| c == b' ') {
        Some(i) => (&body[..i], &body[i + 1..]),
        None => (b"ERR", body),
    };
    let trim = |c: &u8| *c != b'\r' && *c != b'\n';
    let start = msg.iter().position(trim).unwrap_or(msg.len());
    let end = msg.iter().rposition(trim).map_or(start, |i| i + 1);
    let mut out = code.to_vec();
    out.push(b' ');
    out.extend_from_slice(&msg[start..end.max(start)]);
    out
}

/// `redis.log(level, message...)`: the arguments that are strings or numbers (numbers as
/// `%.14g`), joined by spaces, written to the node's tracing log at the level's severity.
/// Every replica that applies the script logs it.
fn log(lua: &Lua, args: MultiValue) -> mlua::Result<(Value, bool)> {
    if args.len() < 2 {
        return fail(lua, "redis.log() requires two arguments or more.");
    }
    let level = match &args[0] {
        Value::String(s) => super::cjson::lua_str_number(&s.as_bytes()),
        other => super::cjson::number(other),
    };
    let Some(level) = level else {
        return fail(lua, "First argument must be a number (log level).");
    };
    let level = level as i32;
    if !(0..=3).contains(&level) {
        return fail(lua, "Invalid debug level.");
    }
    let parts: Vec<String> = args
        .iter()
        .skip(1)
        .filter_map(|v| match v {
            Value::String(s) => Some(String::from_utf8_lossy(&s.as_bytes()).into_owned()),
            Value::Number(_) | Value::Integer(_) => Some(super::convert::fmt_g14(
                super::cjson::number(v).unwrap_or(0.0),
            )),
            _ => None,
        })
        .collect();
    let msg = parts.join(" ");
    match level {
        0 => tracing::debug!(level = "debug", %msg, "script log"),
        1 => tracing::debug!(level = "verbose", %msg, "script log"),
        2 => tracing::info!(level = "notice", %msg, "script log"),
        _ => tracing::warn!(level = "warning", %msg, "script log"),
    }
    Ok((Value::Nil, false))
}
