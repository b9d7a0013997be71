//! Conversions between command replies and Lua values, as Redis's `script_lua.c` does them.
//!
//! Into Lua (what `redis.call` returns), with the script's RESP version (`redis.setresp`,
//! default 2): integer -> number; bulk -> string; null -> `false` (RESP2) or `nil` (RESP3);
//! status -> `{ok=...}`; error -> `{err=...}`; array -> table. Out of Lua (the script's
//! result): number -> integer (truncated, as C's cast does); string -> bulk; `true` -> `:1`;
//! `false`/`nil` -> null; `{err=...}` -> error; `{ok=...}` -> status; `{double=n}` -> double
//! (a bulk string in RESP2); other tables -> arrays
//! cut at the first nil. Arguments to `redis.call` format numbers with `%.17g`, so an
//! integral number becomes `5`, not `5.0`.

use bytes::Bytes;
use mlua::{Lua, Table, Value};

use crate::resp::Reply;

/// Deepest nesting converted; deeper (or self-referencing) tables give an error reply.
const MAX_DEPTH: usize = 256;

/// Converts a command reply into the Lua value a script sees.
pub fn reply_to_lua(lua: &Lua, reply: &Reply, resp3: bool) -> mlua::Result<Value> {
    Ok(match reply {
        Reply::Simple(s) => Value::Table(single(lua, "ok", s.as_bytes())?),
        Reply::Error(s) => Value::Table(single(lua, "err", s.as_bytes())?),
        Reply::Int(n) => Value::Number(*n as f64),
        Reply::Bulk(b) => Value::String(lua.create_string(b)?),
        Reply::Nil | Reply::NilArray if resp3 => Value::Nil,
        Reply::Nil | Reply::NilArray => Value::Boolean(false),
        Reply::Array(items) | Reply::Push(items) => Value::Table(array(lua, items, resp3)?),
        Reply::Set(items) if !resp3 => Value::Table(array(lua, items, resp3)?),
        Reply::Set(items) => {
            let set = lua.create_table()?;
            for item in items {
                set.raw_set(reply_to_lua(lua, item, resp3)?, true)?;
            }
            let t = lua.create_table()?;
            t.raw_set("set", set)?;
            Value::Table(t)
        }
        Reply::Map(pairs) if !resp3 => {
            let flat: Vec<Reply> = pairs
                .iter()
                .flat_map(|(k, v)| [k.clone(), v.clone()])
                .collect();
            Value::Table(array(lua, &flat, resp3)?)
        }
        Reply::Map(pairs) => {
            let map = lua.create_table()?;
            for (k, v) in pairs {
                map.raw_set(reply_to_lua(lua, k, resp3)?, reply_to_lua(lua, v, resp3)?)?;
            }
            let t = lua.create_table()?;
            t.raw_set("map", map)?;
            Value::Table(t)
        }
        Reply::Bool(b) if resp3 => Value::Boolean(*b),
        Reply::Bool(b) => Value::Number(*b as i64 as f64),
        Reply::Verbatim(s) if resp3 => {
            let inner = lua.create_table()?;
            inner.raw_set("format", "txt")?;
            inner.raw_set("string", s.as_str())?;
            let t = lua.create_table()?;
            t.raw_set("verbatim_string", inner)?;
            Value::Table(t)
        }
        Reply::Verbatim(s) => Value::String(lua.create_string(s)?),
        // Redis converts a RESP3 double to `{double=n}` and a RESP2 one (a bulk) to a string.
        Reply::Double(d) if resp3 => {
            let t = lua.create_table()?;
            t.raw_set("double", *d)?;
            Value::Table(t)
        }
        Reply::Double(d) => {
            Value::String(lua.create_string(crate::resp::frame::format_double(*d))?)
        }
        Reply::DoubleText(t) if resp3 => {
            let t2 = lua.create_table()?;
            t2.raw_set("double", t.parse::<f64>().unwrap_or(0.0))?;
            Value::Table(t2)
        }
        Reply::DoubleText(t) => Value::String(lua.create_string(t)?),
        Reply::Pairs(pairs) if !resp3 => {
            let flat: Vec<Reply> = pairs
                .iter()
                .flat_map(|(k, v)| [k.clone(), v.clone()])
                .collect();
            Value::Table(array(lua, &flat, resp3)?)
        }
        Reply::Pairs(pairs) => {
            let nested: Vec<Reply> = pairs
                .iter()
                .map(|(k, v)| Reply::Array(vec![k.clone(), v.clone()]))
                .collect();
            Value::Table(array(lua, &nested, resp3)?)
        }
    })
}

fn single(lua: &Lua, field: &str, text: &[u8]) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(field, lua.create_string(text)?)?;
    Ok(t)
}

fn array(lua: &Lua, items: &[Reply], resp3: bool) -> mlua::Result<Table> {
    let t = lua.create_table_with_capacity(items.len(), 0)?;
    for (i, item) in items.iter().enumerate() {
        t.raw_set(i + 1, reply_to_lua(lua, item, resp3)?)?;
    }
    Ok(t)
}

/// Converts a script's result into a reply. `resp3` is the script's `redis.setresp` mode.
pub fn lua_to_reply(value: &Value, resp3: bool) -> Reply {
    to_reply(value, resp3, 0)
}

fn to_reply(value: &Value, resp3: bool, depth: usize) -> Reply {
    if depth > MAX_DEPTH {
        return Reply::err("ERR reached lua stack limit");
    }
    match value {
        Value::String(s) => Reply::Bulk(Bytes::copy_from_slice(&s.as_bytes())),
        Value::Number(n) => Reply::Int(c_cast(*n)),
        Value::Integer(n) => Reply::Int(*n),
        Value::Boolean(b) if resp3 => Reply::Bool(*b),
        Value::Boolean(true) => Reply::Int(1),
        Value::Boolean(false) => Reply::Nil,
        Value::Table(t) => table_to_reply(t, resp3, depth),
        _ => Reply::Nil,
    }
}

fn table_to_reply(t: &Table, resp3: bool, depth: usize) -> Reply {
    if let Ok(Value::String(e)) = t.raw_get::<Value>("err") {
        return Reply::Error(error_text(&e.as_bytes()));
    }
    if let Ok(Value::String(s)) = t.raw_get::<Value>("ok") {
        return Reply::Simple(String::from_utf8_lossy(&s.as_bytes()).into_owned());
    }
    // A RESP3 double for a RESP3 client, a bulk string for a RESP2 one (Redis's
    // `addReplyDouble`): the client's protocol decides, not `redis.setresp`.
    match t.raw_get::<Value>("double") {
        Ok(Value::Number(d)) => return Reply::Double(d),
        Ok(Value::Integer(n)) => return Reply::Double(n as f64),
        _ => {}
    }
    if let Ok(Value::Table(m)) = t.raw_get::<Value>("map") {
        let pairs = m.pairs::<Value, Value>().filter_map(Result::ok);
        return Reply::Map(
            pairs
                .map(|(k, v)| {
                    (
                        to_reply(&k, resp3, depth + 1),
                        to_reply(&v, resp3, depth + 1),
                    )
                })
                .collect(),
        );
    }
    if let Ok(Value::Table(s)) = t.raw_get::<Value>("set") {
        let keys = s.pairs::<Value, Value>().filter_map(Result::ok);
        return Reply::Set(keys.map(|(k, _)| to_reply(&k, resp3, depth + 1)).collect());
    }
    let mut items = Vec::new();
    for i in 1.. {
        match t.raw_get::<Value>(i) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(v) => items.push(to_reply(&v, resp3, depth + 1)),
        }
        if items.len() > 16 * 1024 * 1024 {
            break;
        }
    }
    Reply::Array(items)
}

/// The text of an error reply built from an `err` field: one leading `-` is dropped, as
/// Redis does.
pub fn error_text(raw: &[u8]) -> String {
    let text = String::from_utf8_lossy(raw);
    text.strip_prefix('-').unwrap_or(&text).to_string()
}

/// C's `(long long)` cast of a double on x86-64: truncation toward zero, and
/// `LLONG_MIN` for NaN and out-of-range values (what Redis returns for `math.huge`).
pub fn c_cast(n: f64) -> i64 {
    // 2^63 exactly: the first double a long long cannot hold.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if n.is_nan() || !(-LIMIT..LIMIT).contains(&n) {
        i64::MIN
    } else {
        n as i64
    }
}

/// Formats a number as C's `printf("%.17g")`, which Redis uses for Lua numbers passed to
/// `redis.call`.
pub fn fmt_g17(n: f64) -> String {
    fmt_g(n, 17)
}

/// Formats a number as Lua 5.1's `tostring` does (`%.14g`).
pub fn fmt_g14(n: f64) -> String {
    fmt_g(n, 14)
}

pub use crate::algo::float::format_g as fmt_g;

#[cfg(test)]
mod tests {
    use super::*;

    fn lua() -> Lua {
        Lua::new()
    }

    fn eval(lua: &Lua, code: &str) -> Value {
        lua.load(code).eval::<Value>().expect("lua")
    }

    #[test]
    fn nil_bulk_becomes_false_in_resp2_and_nil_in_resp3() {
        let lua = lua();
        assert_eq!(
            reply_to_lua(&lua, &Reply::Nil, false).unwrap(),
            Value::Boolean(false)
        );
        assert_eq!(
            reply_to_lua(&lua, &Reply::NilArray, false).unwrap(),
            Value::Boolean(false)
        );
        assert_eq!(reply_to_lua(&lua, &Reply::Nil, true).unwrap(), Value::Nil);
    }

    #[test]
    fn status_becomes_ok_table_and_error_becomes_err_table() {
        let lua = lua();
        let Value::Table(t) = reply_to_lua(&lua, &Reply::ok(), false).unwrap() else {
            panic!("not a table")
        };
        assert_eq!(t.get::<String>("ok").unwrap(), "OK");
        let Value::Table(t) = reply_to_lua(&lua, &Reply::err("ERR x"), false).unwrap() else {
            panic!("not a table")
        };
        assert_eq!(t.get::<String>("err").unwrap(), "ERR x");
    }

    #[test]
    fn integers_bulks_and_arrays_convert() {
        let lua = lua();
        assert_eq!(
            reply_to_lua(&lua, &Reply::Int(7), false).unwrap(),
            Value::Number(7.0)
        );
        let arr = Reply::Array(vec![Reply::bulk("a"), Reply::Nil, Reply::Int(2)]);
        let v = reply_to_lua(&lua, &arr, false).unwrap();
        lua.globals().set("t", v).unwrap();
        let Value::Boolean(ok) = eval(&lua, "return t[1] == 'a' and t[2] == false and t[3] == 2")
        else {
            panic!()
        };
        assert!(ok);
    }

    #[test]
    fn maps_flatten_and_bools_become_numbers_in_resp2() {
        let lua = lua();
        let m = Reply::Map(vec![(Reply::text("f"), Reply::text("v"))]);
        lua.globals()
            .set("m", reply_to_lua(&lua, &m, false).unwrap())
            .unwrap();
        lua.globals()
            .set("b", reply_to_lua(&lua, &Reply::Bool(true), false).unwrap())
            .unwrap();
        assert_eq!(
            eval(&lua, "return m[1] == 'f' and m[2] == 'v' and b == 1"),
            Value::Boolean(true)
        );
    }

    #[test]
    fn results_convert_like_redis() {
        let lua = lua();
        let r = |code: &str| lua_to_reply(&eval(&lua, code), false);
        assert_eq!(r("return 3.99"), Reply::Int(3));
        assert_eq!(r("return -3.99"), Reply::Int(-3));
        assert_eq!(r("return math.huge"), Reply::Int(i64::MIN));
        assert_eq!(r("return 'x'"), Reply::bulk("x"));
        assert_eq!(r("return true"), Reply::Int(1));
        assert_eq!(r("return false"), Reply::Nil);
        assert_eq!(r("return nil"), Reply::Nil);
        assert_eq!(r("return {ok='fine'}"), Reply::Simple("fine".into()));
        assert_eq!(r("return {err='My Error'}"), Reply::err("My Error"));
        assert_eq!(r("return {err='-Oops x'}"), Reply::err("Oops x"));
        assert_eq!(
            r("return {1, 2, nil, 4}"),
            Reply::Array(vec![Reply::Int(1), Reply::Int(2)])
        );
        assert_eq!(
            r("return {1, {2, 'x'}, false, {ok='s'}}"),
            Reply::Array(vec![
                Reply::Int(1),
                Reply::Array(vec![Reply::Int(2), Reply::bulk("x")]),
                Reply::Nil,
                Reply::Simple("s".into()),
            ])
        );
        // A self-referencing table stops at the depth limit instead of overflowing.
        let mut deep = r("local t = {} t[1] = t return t");
        let mut levels = 0;
        while let Reply::Array(mut items) = deep {
            deep = items.pop().unwrap_or(Reply::Nil);
            levels += 1;
        }
        assert_eq!(deep, Reply::err("ERR reached lua stack limit"));
        assert_eq!(levels, MAX_DEPTH + 1);
    }

    #[test]
    fn booleans_follow_setresp_3() {
        let lua = lua();
        assert_eq!(lua_to_reply(&Value::Boolean(true), true), Reply::Bool(true));
        assert_eq!(
            lua_to_reply(&Value::Boolean(false), true),
            Reply::Bool(false)
        );
        let _ = lua;
    }

    #[test]
    fn numbers_format_as_printf_g17() {
        assert_eq!(fmt_g17(0.0), "0");
        assert_eq!(fmt_g17(-0.0), "-0");
        assert_eq!(fmt_g17(5.0), "5");
        assert_eq!(fmt_g17(-42.0), "-42");
        assert_eq!(fmt_g17(30000.0), "30000");
        assert_eq!(fmt_g17(0.1), "0.10000000000000001");
        assert_eq!(fmt_g17(1.5), "1.5");
        assert_eq!(fmt_g17(1e20), "1e+20");
        assert_eq!(fmt_g17(1e16), "10000000000000000");
        assert_eq!(fmt_g17(1e17), "1e+17");
        assert_eq!(fmt_g17(0.0001), "0.0001");
        assert_eq!(fmt_g17(0.00001), "1.0000000000000001e-05");
        assert_eq!(fmt_g17(f64::INFINITY), "inf");
        assert_eq!(fmt_g14(0.1), "0.1");
        assert_eq!(fmt_g14(42.0), "42");
    }
}
