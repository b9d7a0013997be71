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
setmetatable(_G, {
  __newindex = function() error("Attempt to modify a readonly table", 2) end,
  __index = function(_, n)
    error("Script attempted to access nonexistent global variable '" .. tostring(n) .. "'", 2)
  end,
  __metatable = false,
})
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
    g.raw_set("bit", super::bitlib::create(&lua)?)?;
    g.raw_set("redis", redis_table(&lua)?)?;
    Ok(lua)
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
pub fn finish_state(lua: &Lua, raw: Function) -> mlua::Result<()> {
    lua.set_named_registry_value("palisade.raw", raw)?;
    let redis: Table = lua.globals().raw_get("redis")?;
    // SAFETY: the functions only use the Lua C API on the stack they are given; they raise
    // through lua_error with no Rust values live in their frames.
    let (call, pcall) = unsafe {
        (
            lua.create_c_function(redis_call)?,
            lua.create_c_function(redis_pcall)?,
        )
    };
    redis.raw_set("call", call)?;
    redis.raw_set("pcall", pcall)?;
    let prelude = lua.load(PRELUDE).set_name("=palisade").into_function()?;
    prelude.call::<()>(())
}

unsafe extern "C-unwind" fn redis_call(state: *mut mlua::lua_State) -> std::ffi::c_int {
    call_raw(state, true)
}

unsafe extern "C-unwind" fn redis_pcall(state: *mut mlua::lua_State) -> std::ffi::c_int {
    call_raw(state, false)
}

/// Calls the registered Rust function with this call's arguments; raises its value when it
/// reports an error and `raise` is set, else returns the value.
unsafe fn call_raw(state: *mut mlua::lua_State, raise: bool) -> std::ffi::c_int {
    use mlua::ffi;
    let n = ffi::lua_gettop(state);
    ffi::lua_getfield(state, ffi::LUA_REGISTRYINDEX, RAW_KEY.as_ptr());
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
        lua.create_function(|lua, msg: Value| reply_table(lua, "err", msg))?,
    )?;
    t.raw_set(
        "status_reply",
        lua.create_function(|lua, msg: Value| reply_table(lua, "ok", msg))?,
    )?;
    t.raw_set(
        "sha1hex",
        lua.create_function(|_, args: MultiValue| match args.len() {
            1 => match &args[0] {
                Value::String(s) => Ok(sha1_hex(&s.as_bytes())),
                Value::Number(n) => Ok(sha1_hex(super::convert::fmt_g17(*n).as_bytes())),
                _ => Ok(sha1_hex(b"")),
            },
            _ => Err(mlua::Error::runtime("wrong number of arguments")),
        })?,
    )?;
    t.raw_set("log", lua.create_function(log)?)?;
    t.raw_set("replicate_commands", lua.create_function(|_, ()| Ok(true))?)?;
    t.raw_set("set_repl", lua.create_function(|_, _: MultiValue| Ok(()))?)?;
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

fn reply_table(lua: &Lua, field: &str, msg: Value) -> mlua::Result<Table> {
    let Value::String(s) = msg else {
        return Err(mlua::Error::runtime("wrong number or type of arguments"));
    };
    let t = lua.create_table()?;
    let text = super::convert::error_text(&s.as_bytes());
    if field == "err" {
        t.raw_set(field, text)?;
    } else {
        t.raw_set(field, s)?;
    }
    Ok(t)
}

fn log(_: &Lua, args: MultiValue) -> mlua::Result<()> {
    if args.len() < 2 {
        return Err(mlua::Error::runtime(
            "redis.log() requires two arguments or more.",
        ));
    }
    let level = match &args[0] {
        Value::Number(n) if (0.0..=3.0).contains(n) => *n as i64,
        Value::Integer(n) if (0..=3).contains(n) => *n,
        _ => return Err(mlua::Error::runtime("Invalid debug level.")),
    };
    let msg: Vec<String> = args
        .iter()
        .skip(1)
        .map(|v| match v {
            Value::String(s) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
            Value::Number(n) => super::convert::fmt_g17(*n),
            other => format!("{other:?}"),
        })
        .collect();
    tracing::info!(level, msg = %msg.join(" "), "script log");
    Ok(())
}
