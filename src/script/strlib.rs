//! `string.find`, `string.match`, `string.gmatch` (and 5.1's alias `gfind`) and
//! `string.gsub` in Rust over [`super::pattern`], so that their backtracking is charged step
//! by step ([`super::meter`]). Arguments, results and error texts are Lua 5.1's `lstrlib.c`.
//!
//! Each function sits behind a C closure ([`shim`]) that raises its errors as Lua's C
//! library does: argument errors through `luaL_argerror` (so the function is named as the
//! script called it, `calling 'find' on bad self` for methods), others with `luaL_where`'s
//! position; an error raised by a `gsub` replacement function or `__index` passes through
//! unchanged.

use std::rc::Rc;

use mlua::{Function, Lua, LuaString, MultiValue, Table, Value};

use super::cjson::{lua_str_number, number, type_name};
use super::convert::fmt_g14;
use super::meter::{self, Meter, LIBRARY_BYTES_PER_UNIT, UNCHARGED_CEILING};
use super::pattern::{find_plain, Capture, Fail, Matcher, SPECIALS};

/// Why a library function did not return.
enum Fault {
    /// `luaL_error(msg)`.
    Msg(String),
    /// `luaL_argerror(narg, extramsg)`.
    Arg(i64, String),
    /// Raise this value as it is (an error from a callback).
    Raise(Value),
    /// A Rust-side error (the budget abort), propagated by mlua.
    Lua(mlua::Error),
}

impl From<mlua::Error> for Fault {
    fn from(e: mlua::Error) -> Self {
        Fault::Lua(e)
    }
}

type Out = Result<Vec<Value>, Fault>;

fn abort() -> Fault {
    Fault::Lua(mlua::Error::runtime(meter::ABORT))
}

/// The name `luaL_typename` gives argument `i` (1-based): `no value` when absent.
fn arg_type(args: &MultiValue, i: usize) -> &'static str {
    args.get(i - 1).map_or("no value", type_name)
}

/// `luaL_checklstring`: a string, or a number converted with `%.14g`.
fn check_str(lua: &Lua, args: &MultiValue, i: usize) -> Result<LuaString, Fault> {
    match args.get(i - 1) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(v @ (Value::Number(_) | Value::Integer(_))) => {
            Ok(lua.create_string(fmt_g14(number(v).unwrap_or(0.0)))?)
        }
        _ => Err(Fault::Arg(
            i as i64,
            format!("string expected, got {}", arg_type(args, i)),
        )),
    }
}

/// `luaL_optinteger`: `def` when absent or nil, else a number or numeric string, truncated.
fn opt_int(args: &MultiValue, i: usize, def: i64) -> Result<i64, Fault> {
    match args.get(i - 1) {
        None | Some(Value::Nil) => Ok(def),
        Some(v @ (Value::Number(_) | Value::Integer(_))) => Ok(number(v).unwrap_or(0.0) as i64),
        Some(Value::String(s)) => match lua_str_number(&s.as_bytes()) {
            Some(n) => Ok(n as i64),
            None => Err(Fault::Arg(i as i64, "number expected, got string".into())),
        },
        Some(v) => Err(Fault::Arg(
            i as i64,
            format!("number expected, got {}", type_name(v)),
        )),
    }
}

/// Lua 5.1's `posrelat`.
fn posrelat(pos: i64, len: i64) -> i64 {
    let pos = if pos < 0 { pos + len + 1 } else { pos };
    pos.max(0)
}

/// The meter's step limit (the ceiling outside a run).
fn step_limit(m: &Option<Rc<Meter>>) -> u64 {
    m.as_ref().map_or(UNCHARGED_CEILING, |m| m.step_limit())
}

/// Charges a matcher's steps; the budget abort when that exhausts it.
fn settle(m: &Option<Rc<Meter>>, steps: u64) -> Result<(), Fault> {
    match m {
        Some(m) if m.charge_steps(steps) => Err(abort()),
        _ => Ok(()),
    }
}

/// Charges library bytes.
fn charge_bytes(m: &Option<Rc<Meter>>, n: u64) -> Result<(), Fault> {
    match m {
        Some(m) if m.charge_library(n / LIBRARY_BYTES_PER_UNIT) => Err(abort()),
        _ => Ok(()),
    }
}

/// A match error: the message, or the abort once the steps ran out.
fn failed(m: &Option<Rc<Meter>>, matcher: &Matcher<'_>, f: Fail) -> Fault {
    match f {
        Fail::Error(msg) => Fault::Msg(msg.into()),
        Fail::Steps => {
            if let Some(m) = m {
                m.charge_steps(matcher.steps);
                m.exhaust();
            }
            abort()
        }
    }
}

fn capture_value(lua: &Lua, src: &[u8], c: Capture) -> mlua::Result<Value> {
    Ok(match c {
        Capture::Str(a, b) => Value::String(lua.create_string(&src[a..b])?),
        Capture::Pos(n) => Value::Number(n as f64),
    })
}

/// `push_captures`: every capture, or the whole match `[s, e)` when there are none and
/// `whole` is set.
fn captures(
    lua: &Lua,
    m: &Matcher<'_>,
    src: &[u8],
    whole: Option<(usize, usize)>,
) -> Result<Vec<Value>, Fail> {
    let n = match (m.level(), whole) {
        (0, Some(_)) => 1,
        (l, _) => l,
    };
    let (s, e) = whole.unwrap_or((0, 0));
    (0..n)
        .map(|i| {
            let c = m.capture(i, s, e)?;
            capture_value(lua, src, c).map_err(|_| Fail::Error("not enough memory"))
        })
        .collect()
}

/// `str_find_aux`: `string.find` (`find`) and `string.match`.
fn find_aux(lua: &Lua, args: &MultiValue, find: bool) -> Out {
    enter(lua)?;
    let s = check_str(lua, args, 1)?;
    let p = check_str(lua, args, 2)?;
    let init = opt_int(args, 3, 1)?;
    let (src, pat) = (s.as_bytes(), p.as_bytes());
    let l1 = src.len() as i64;
    let init = (posrelat(init, l1) - 1).clamp(0, l1) as usize;
    let meter = meter::of(lua);
    let plain = !matches!(args.get(3), None | Some(Value::Nil | Value::Boolean(false)));
    let c_pat = &pat[..pat.iter().position(|&c| c == 0).unwrap_or(pat.len())];
    if find && (plain || !c_pat.iter().any(|c| SPECIALS.contains(c))) {
        let limit = step_limit(&meter).saturating_mul(LIBRARY_BYTES_PER_UNIT);
        let found = match find_plain(&src[init..], &pat, limit) {
            Ok((found, work)) => {
                charge_bytes(&meter, work)?;
                found
            }
            Err(_) => {
                if let Some(m) = &meter {
                    m.exhaust();
                }
                return Err(abort());
            }
        };
        return Ok(match found {
            Some(at) => vec![
                Value::Number((init + at + 1) as f64),
                Value::Number((init + at + pat.len()) as f64),
            ],
            None => vec![Value::Nil],
        });
    }
    let (anchor, pat) = match pat.first() {
        Some(b'^') => (true, &pat[1..]),
        _ => (false, &pat[..]),
    };
    let mut m = Matcher::new(&src, pat, step_limit(&meter));
    let mut s1 = init;
    loop {
        match m.match_at(s1) {
            Err(f) => return Err(failed(&meter, &m, f)),
            Ok(Some(e)) => {
                settle(&meter, m.steps)?;
                let out = if find {
                    let mut out = vec![Value::Number((s1 + 1) as f64), Value::Number(e as f64)];
                    out.extend(captures(lua, &m, &src, None).map_err(|f| failed(&meter, &m, f))?);
                    out
                } else {
                    captures(lua, &m, &src, Some((s1, e))).map_err(|f| failed(&meter, &m, f))?
                };
                return Ok(out);
            }
            Ok(None) => {}
        }
        if s1 >= src.len() || anchor {
            break;
        }
        s1 += 1;
    }
    settle(&meter, m.steps)?;
    Ok(vec![Value::Nil])
}

/// `gmatch`: an iterator (behind the same shim) over the matches of the pattern.
fn gmatch(lua: &Lua, args: &MultiValue) -> Out {
    enter(lua)?;
    let s = check_str(lua, args, 1)?;
    let p = check_str(lua, args, 2)?;
    let pos = std::cell::Cell::new(0usize);
    let iter = lua.create_function(move |lua, _: MultiValue| {
        let result = gmatch_next(lua, &s, &p, &pos);
        encode(lua, result)
    })?;
    Ok(vec![Value::Function(shimmed(lua, iter)?)])
}

/// `gmatch_aux`: the next match from `pos`, or nothing.
fn gmatch_next(lua: &Lua, s: &LuaString, p: &LuaString, pos: &std::cell::Cell<usize>) -> Out {
    enter(lua)?;
    let (src, pat) = (s.as_bytes(), p.as_bytes());
    let meter = meter::of(lua);
    let mut m = Matcher::new(&src, &pat, step_limit(&meter));
    let mut start = pos.get();
    while start <= src.len() {
        match m.match_at(start) {
            Err(f) => return Err(failed(&meter, &m, f)),
            Ok(Some(e)) => {
                settle(&meter, m.steps)?;
                pos.set(if e == start { e + 1 } else { e });
                return captures(lua, &m, &src, Some((start, e)))
                    .map_err(|f| failed(&meter, &m, f));
            }
            Ok(None) => start += 1,
        }
    }
    settle(&meter, m.steps)?;
    Ok(Vec::new())
}

/// What `gsub` needs to call back into Lua: the unprotected `pcall`.
#[derive(Clone)]
struct Callbacks {
    pcall: Function,
}

impl Callbacks {
    /// Calls `f(args)` for one result; an error is raised again unchanged.
    fn call(&self, f: Value, args: Vec<Value>, meter: &Option<Rc<Meter>>) -> Result<Value, Fault> {
        let mut call_args = vec![f];
        call_args.extend(args);
        let out = self
            .pcall
            .call::<MultiValue>(MultiValue::from_iter(call_args))?;
        if meter.as_ref().is_some_and(|m| m.aborted()) {
            return Err(abort());
        }
        let mut out = out.into_iter();
        let ok = matches!(out.next(), Some(Value::Boolean(true)));
        let first = out.next().unwrap_or(Value::Nil);
        if ok {
            Ok(first)
        } else {
            Err(Fault::Raise(first))
        }
    }
}

/// `add_s`: the replacement string with `%0`-`%9` and `%x` escapes.
fn add_s(
    out: &mut Vec<u8>,
    news: &[u8],
    m: &Matcher<'_>,
    src: &[u8],
    s: usize,
    e: usize,
) -> Result<(), Fail> {
    let mut i = 0;
    while i < news.len() {
        let c = news[i];
        if c != b'%' {
            out.push(c);
            i += 1;
            continue;
        }
        i += 1;
        // Past the end C reads the string's terminating NUL.
        let d = news.get(i).copied().unwrap_or(0);
        if !d.is_ascii_digit() {
            out.push(d);
        } else if d == b'0' {
            out.extend_from_slice(&src[s..e]);
        } else {
            match m.capture((d - b'1') as usize, s, e)? {
                Capture::Str(a, b) => out.extend_from_slice(&src[a..b]),
                Capture::Pos(n) => out.extend_from_slice(fmt_g14(n as f64).as_bytes()),
            }
        }
        i += 1;
    }
    Ok(())
}

/// The replacement argument of `gsub`.
enum Repl {
    Str(LuaString),
    Call(Value),
    Index(Table),
}

/// What `gsub` replaces with, and how it calls back.
struct Subst<'a> {
    lua: &'a Lua,
    repl: Repl,
    cb: &'a Callbacks,
    meter: Option<Rc<Meter>>,
}

/// `add_value`: appends the replacement of the match `[s, e)`.
fn add_value(
    sub: &Subst<'_>,
    out: &mut Vec<u8>,
    m: &Matcher<'_>,
    src: &[u8],
    (s, e): (usize, usize),
) -> Result<(), Fault> {
    let (lua, repl, cb, meter) = (sub.lua, &sub.repl, sub.cb, &sub.meter);
    let fail = |f| failed(meter, m, f);
    let v = match repl {
        Repl::Str(news) => return add_s(out, &news.as_bytes(), m, src, s, e).map_err(fail),
        Repl::Call(f) => {
            let caps = captures(lua, m, src, Some((s, e))).map_err(fail)?;
            cb.call(f.clone(), caps, meter)?
        }
        Repl::Index(t) => {
            let key = m.capture(0, s, e).map_err(fail)?;
            let key = capture_value(lua, src, key)?;
            // `lua_gettable`: through `__index`, as Lua does.
            let v = t.get::<Value>(key)?;
            if meter.as_ref().is_some_and(|m| m.aborted()) {
                return Err(abort());
            }
            v
        }
    };
    match &v {
        Value::Nil | Value::Boolean(false) => out.extend_from_slice(&src[s..e]),
        Value::String(x) => out.extend_from_slice(&x.as_bytes()),
        Value::Number(_) | Value::Integer(_) => {
            out.extend_from_slice(fmt_g14(number(&v).unwrap_or(0.0)).as_bytes())
        }
        other => {
            return Err(Fault::Msg(format!(
                "invalid replacement value (a {})",
                type_name(other)
            )))
        }
    }
    Ok(())
}

/// `str_gsub`.
fn gsub(lua: &Lua, args: &MultiValue, cb: &Callbacks) -> Out {
    enter(lua)?;
    let s = check_str(lua, args, 1)?;
    let p = check_str(lua, args, 2)?;
    let (src, pat) = (s.as_bytes(), p.as_bytes());
    // luaL_optint: an int, as C's cast gives it.
    let max_s = opt_int(args, 4, src.len() as i64 + 1)? as i32 as i64;
    let repl = match args.get(2) {
        Some(Value::String(r)) => Repl::Str(r.clone()),
        Some(v @ (Value::Number(_) | Value::Integer(_))) => {
            Repl::Str(lua.create_string(fmt_g14(number(v).unwrap_or(0.0)))?)
        }
        Some(f @ Value::Function(_)) => Repl::Call(f.clone()),
        Some(Value::Table(t)) => Repl::Index(t.clone()),
        _ => {
            return Err(Fault::Arg(3, "string/function/table expected".into()));
        }
    };
    let (anchor, pat) = match pat.first() {
        Some(b'^') => (true, &pat[1..]),
        _ => (false, &pat[..]),
    };
    let meter = meter::of(lua);
    let mut m = Matcher::new(&src, pat, step_limit(&meter));
    let sub = Subst {
        lua,
        repl,
        cb,
        meter: meter.clone(),
    };
    let mut out = Vec::new();
    let mut at = 0usize;
    let mut n = 0i64;
    while n < max_s {
        let e = m.match_at(at).map_err(|f| failed(&meter, &m, f))?;
        if let Some(e) = e {
            n += 1;
            add_value(&sub, &mut out, &m, &src, (at, e))?;
            if out.len() > super::sandbox::MEMORY_LIMIT {
                return Err(Fault::Raise(Value::String(
                    lua.create_string("not enough memory")?,
                )));
            }
        }
        match e {
            Some(e) if e > at => at = e,
            _ if at < src.len() => {
                out.push(src[at]);
                at += 1;
            }
            _ => break,
        }
        if anchor {
            break;
        }
    }
    out.extend_from_slice(&src[at..]);
    settle(&meter, m.steps)?;
    charge_bytes(&meter, out.len() as u64)?;
    Ok(vec![
        Value::String(lua.create_string(&out)?),
        Value::Number(n as f64),
    ])
}

/// Charges the fixed cost of a call into Rust.
fn enter(lua: &Lua) -> Result<(), Fault> {
    match meter::of(lua) {
        Some(m) if m.charge_library(meter::RUST_CALL_UNITS) => Err(abort()),
        _ => Ok(()),
    }
}

/// Turns a result into the shim's protocol: `0, values...`; `1, message`;
/// `2, narg, extramsg`; `3, value` (raise as is).
fn encode(lua: &Lua, r: Out) -> mlua::Result<MultiValue> {
    let mut v = Vec::new();
    match r {
        Ok(values) => {
            v.push(Value::Integer(0));
            v.extend(values);
        }
        Err(Fault::Msg(m)) => {
            v.push(Value::Integer(1));
            v.push(Value::String(lua.create_string(m)?));
        }
        Err(Fault::Arg(n, m)) => {
            v.push(Value::Integer(2));
            v.push(Value::Integer(n as _));
            v.push(Value::String(lua.create_string(m)?));
        }
        Err(Fault::Raise(value)) => {
            v.push(Value::Integer(3));
            v.push(value);
        }
        Err(Fault::Lua(e)) => return Err(e),
    }
    Ok(MultiValue::from_iter(v))
}

/// Calls its upvalue (a Rust function speaking [`encode`]'s protocol) and returns its values
/// or raises as Lua's C library would.
unsafe extern "C-unwind" fn shim(state: *mut mlua::lua_State) -> std::ffi::c_int {
    use mlua::ffi;
    let n = ffi::lua_gettop(state);
    ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
    ffi::lua_insert(state, 1);
    ffi::lua_call(state, n, ffi::LUA_MULTRET);
    let results = ffi::lua_gettop(state);
    match ffi::lua_tonumber(state, 1) as i32 {
        0 => {
            ffi::lua_remove(state, 1);
            results - 1
        }
        1 => {
            ffi::luaL_where(state, 1);
            ffi::lua_pushvalue(state, 2);
            ffi::lua_concat(state, 2);
            ffi::lua_error(state)
        }
        2 => {
            let narg = ffi::lua_tonumber(state, 2) as std::ffi::c_int;
            let msg = ffi::lua_tolstring(state, 3, std::ptr::null_mut());
            ffi::luaL_argerror(state, narg, msg)
        }
        _ => {
            ffi::lua_pushvalue(state, 2);
            ffi::lua_error(state)
        }
    }
}

/// `f` behind a [`shim`] closure.
fn shimmed(lua: &Lua, f: Function) -> mlua::Result<Function> {
    // SAFETY: pushes a C closure over the function given as the only argument.
    unsafe {
        lua.exec_raw(f, |state| {
            mlua::ffi::lua_pushcclosure(state, shim, 1);
        })
    }
}

/// Replaces the pattern functions of the `string` table (`string` is the real table, which
/// the string metatable's `__index` also reads).
pub fn install(lua: &Lua, string: &Table) -> mlua::Result<()> {
    let pcall: Function = lua.globals().raw_get("pcall")?;
    let cb = Callbacks { pcall };
    let find = lua.create_function(|lua, a: MultiValue| encode(lua, find_aux(lua, &a, true)))?;
    let matcher =
        lua.create_function(|lua, a: MultiValue| encode(lua, find_aux(lua, &a, false)))?;
    let gm = lua.create_function(|lua, a: MultiValue| encode(lua, gmatch(lua, &a)))?;
    let gs = lua.create_function(move |lua, a: MultiValue| encode(lua, gsub(lua, &a, &cb)))?;
    string.raw_set("find", shimmed(lua, find)?)?;
    string.raw_set("match", shimmed(lua, matcher)?)?;
    let gm = shimmed(lua, gm)?;
    string.raw_set("gmatch", gm.clone())?;
    if !matches!(string.raw_get::<Value>("gfind")?, Value::Nil) {
        string.raw_set("gfind", gm)?;
    }
    string.raw_set("gsub", shimmed(lua, gs)?)?;
    Ok(())
}
