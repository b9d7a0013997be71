//! The `cjson` library as Redis 7.0 bundles it (lua-cjson 2.1.0), in Rust: the same output
//! bytes, the same defaults, the same configuration functions and the same error texts.
//!
//! - Encoding walks tables with raw access in `next` order, as the C library does. A table
//!   whose keys are all positive integers is an array (holes become `null`) unless it is
//!   "excessively sparse"; an empty table is `{}`. Numbers use `%.<precision>g` (14 by
//!   default). NaN and infinities are refused unless `encode_invalid_numbers` allows them.
//! - Decoding follows the C tokenizer (`strtod` numbers, so hex, `inf` and `nan` are accepted
//!   while `decode_invalid_numbers` is on, as it is by default), and reports errors as
//!   `Expected <what> but found <token> at character <n>`. `null` decodes to `cjson.null`.
//!
//! The configuration lives in the script's own Lua state, so (unlike Redis, whose Lua state
//! outlives a script) a setting never carries over to the next script.

use std::cell::RefCell;
use std::rc::Rc;

use mlua::{LightUserData, Lua, MultiValue, Table, Value};

use super::convert::fmt_g;
use crate::algo::float::strtod_prefix;

/// lua-cjson's configuration (`json_config_t`), with its defaults.
#[derive(Clone, Debug)]
struct Config {
    sparse_convert: bool,
    sparse_ratio: i64,
    sparse_safe: i64,
    encode_max_depth: i64,
    decode_max_depth: i64,
    /// 0: refuse, 1: encode as `inf`/`nan`, 2: encode as `null`.
    encode_invalid_numbers: i64,
    decode_invalid_numbers: bool,
    keep_buffer: bool,
    precision: i64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            sparse_convert: false,
            sparse_ratio: 2,
            sparse_safe: 10,
            encode_max_depth: 1000,
            decode_max_depth: 1000,
            encode_invalid_numbers: 0,
            decode_invalid_numbers: true,
            keep_buffer: true,
            precision: 14,
        }
    }
}

type Cfg = Rc<RefCell<Config>>;

/// Deepest nesting encoded or decoded whatever the configuration says: Redis is bounded by
/// the Lua C stack instead (measured on 7.0.15 with raised limits: 7997 levels encoded, 7998
/// levels of arrays and 3999 of objects decoded); this bound keeps the recursion well inside
/// a 2 MiB thread stack. Up to the default limits (1000) nothing differs
/// (docs/scripting.md, "Deliberate differences").
const HARD_DEPTH: i64 = 1000;

fn err(msg: impl Into<String>) -> mlua::Error {
    mlua::Error::runtime(msg.into())
}

fn bad_arg(n: usize, func: &str, msg: &str) -> mlua::Error {
    err(format!("bad argument #{n} to '{func}' ({msg})"))
}

/// `cjson.null`: a NULL light userdata, as in the C library.
pub fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

/// A Lua number, whichever way mlua presents it.
pub(crate) fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => Some(*n),
        Value::Integer(n) => Some(*n as f64),
        _ => None,
    }
}

/// Lua 5.1's `lua_typename` for a value.
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Nil => "nil",
        Value::Boolean(_) => "boolean",
        Value::LightUserData(_) | Value::UserData(_) => "userdata",
        Value::Integer(_) | Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Table(_) => "table",
        Value::Function(_) => "function",
        Value::Thread(_) => "thread",
        _ => "userdata",
    }
}

/// `luaL_checkinteger`: a number or a numeric string, truncated.
pub(crate) fn check_integer(v: &Value, n: usize, func: &str) -> mlua::Result<i64> {
    if let Some(x) = number(v) {
        return Ok(x as i64);
    }
    if let Value::String(s) = v {
        if let Some(x) = lua_str_number(&s.as_bytes()) {
            return Ok(x as i64);
        }
    }
    Err(bad_arg(
        n,
        func,
        &format!("number expected, got {}", type_name(v)),
    ))
}

/// Lua 5.1's string-to-number conversion (`luaO_str2d`): decimal or hex, surrounding spaces.
pub(crate) fn lua_str_number(s: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(s).ok()?;
    let t = text.trim_matches(|c: char| c.is_ascii_whitespace());
    let (end, value) = strtod_prefix(t.as_bytes());
    if end == 0 || end != t.len() {
        return None;
    }
    Some(value)
}

/// `luaL_checkoption` over `options`, with booleans mapped as lua-cjson's `json_enum_option`.
fn enum_option(
    v: &Value,
    func: &str,
    options: &[&str],
    bool_true: i64,
    setting: &mut i64,
) -> mlua::Result<()> {
    match v {
        Value::Nil => {}
        Value::Boolean(b) => *setting = if *b { bool_true } else { 0 },
        Value::String(_) | Value::Number(_) | Value::Integer(_) => {
            let s = match v {
                Value::String(s) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
                other => fmt_g(number(other).unwrap_or(0.0), 14),
            };
            match options.iter().position(|o| *o == s) {
                Some(i) => *setting = i as i64,
                None => return Err(bad_arg(1, func, &format!("invalid option '{s}'"))),
            }
        }
        other => {
            return Err(bad_arg(
                1,
                func,
                &format!("string expected, got {}", type_name(other)),
            ))
        }
    }
    Ok(())
}

fn enum_result(lua: &Lua, setting: i64, options: &[&str], bool_true: i64) -> mlua::Result<Value> {
    if setting == 0 || setting == bool_true {
        Ok(Value::Boolean(setting != 0))
    } else {
        Ok(Value::String(lua.create_string(options[setting as usize])?))
    }
}

fn int_option(
    v: &Value,
    n: usize,
    func: &str,
    min: i64,
    max: i64,
    setting: &mut i64,
) -> mlua::Result<()> {
    if matches!(v, Value::Nil) {
        return Ok(());
    }
    let x = check_integer(v, n, func)?;
    if !(min..=max).contains(&x) {
        // lua-cjson 2.1.0 always names argument 1 here.
        return Err(bad_arg(
            1,
            func,
            &format!("expected integer between {min} and {max}"),
        ));
    }
    *setting = x;
    Ok(())
}

/// `json_arg_init`: at most `max` arguments; missing ones read as nil.
fn args_upto(args: &MultiValue, max: usize, func: &str) -> mlua::Result<Vec<Value>> {
    if args.len() > max {
        return Err(bad_arg(max + 1, func, "found too many arguments"));
    }
    let mut v: Vec<Value> = args.iter().cloned().collect();
    v.resize(max, Value::Nil);
    Ok(v)
}

const BOOL_OPTIONS: &[&str] = &["off", "on"];
const INVALID_OPTIONS: &[&str] = &["off", "on", "null"];

/// Creates a `cjson` table with its own configuration (`cjson.new` makes another).
pub fn create(lua: &Lua) -> mlua::Result<Table> {
    let cfg: Cfg = Rc::new(RefCell::new(Config::default()));
    let t = lua.create_table()?;
    let c = cfg.clone();
    t.raw_set(
        "encode",
        lua.create_function(move |lua, args: MultiValue| {
            if args.len() != 1 {
                return Err(bad_arg(1, "encode", "expected 1 argument"));
            }
            let conf = c.borrow().clone();
            let mut out = Vec::new();
            encode_value(&conf, &args[0], 0, &mut out)?;
            lua.create_string(&out)
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "decode",
        lua.create_function(move |lua, args: MultiValue| {
            if args.len() != 1 {
                return Err(bad_arg(1, "decode", "expected 1 argument"));
            }
            let bytes = match &args[0] {
                Value::String(s) => s.as_bytes().to_vec(),
                v @ (Value::Number(_) | Value::Integer(_)) => {
                    fmt_g(number(v).unwrap_or(0.0), 14).into_bytes()
                }
                other => {
                    return Err(bad_arg(
                        1,
                        "decode",
                        &format!("string expected, got {}", type_name(other)),
                    ))
                }
            };
            let conf = c.borrow().clone();
            decode(lua, &conf, &bytes)
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "encode_sparse_array",
        lua.create_function(move |_, args: MultiValue| {
            let a = args_upto(&args, 3, "encode_sparse_array")?;
            let mut cfg = c.borrow_mut();
            let mut convert = cfg.sparse_convert as i64;
            enum_option(&a[0], "encode_sparse_array", BOOL_OPTIONS, 1, &mut convert)?;
            cfg.sparse_convert = convert != 0;
            int_option(
                &a[1],
                2,
                "encode_sparse_array",
                0,
                i32::MAX as i64,
                &mut cfg.sparse_ratio,
            )?;
            int_option(
                &a[2],
                3,
                "encode_sparse_array",
                0,
                i32::MAX as i64,
                &mut cfg.sparse_safe,
            )?;
            Ok((
                cfg.sparse_convert,
                cfg.sparse_ratio as f64,
                cfg.sparse_safe as f64,
            ))
        })?,
    )?;
    for (name, min, max) in [
        ("encode_max_depth", 1, i32::MAX as i64),
        ("decode_max_depth", 1, i32::MAX as i64),
        ("encode_number_precision", 1, 14),
    ] {
        let c = cfg.clone();
        t.raw_set(
            name,
            lua.create_function(move |_, args: MultiValue| {
                let a = args_upto(&args, 1, name)?;
                let mut cfg = c.borrow_mut();
                let setting = match name {
                    "encode_max_depth" => &mut cfg.encode_max_depth,
                    "decode_max_depth" => &mut cfg.decode_max_depth,
                    _ => &mut cfg.precision,
                };
                int_option(&a[0], 1, name, min, max, setting)?;
                Ok(*setting as f64)
            })?,
        )?;
    }
    let c = cfg.clone();
    t.raw_set(
        "encode_keep_buffer",
        lua.create_function(move |lua, args: MultiValue| {
            let a = args_upto(&args, 1, "encode_keep_buffer")?;
            let mut cfg = c.borrow_mut();
            let mut v = cfg.keep_buffer as i64;
            enum_option(&a[0], "encode_keep_buffer", BOOL_OPTIONS, 1, &mut v)?;
            cfg.keep_buffer = v != 0;
            enum_result(lua, v, BOOL_OPTIONS, 1)
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "encode_invalid_numbers",
        lua.create_function(move |lua, args: MultiValue| {
            let a = args_upto(&args, 1, "encode_invalid_numbers")?;
            let mut cfg = c.borrow_mut();
            let mut v = cfg.encode_invalid_numbers;
            enum_option(&a[0], "encode_invalid_numbers", INVALID_OPTIONS, 1, &mut v)?;
            cfg.encode_invalid_numbers = v;
            enum_result(lua, v, INVALID_OPTIONS, 1)
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "decode_invalid_numbers",
        lua.create_function(move |lua, args: MultiValue| {
            let a = args_upto(&args, 1, "decode_invalid_numbers")?;
            let mut cfg = c.borrow_mut();
            let mut v = cfg.decode_invalid_numbers as i64;
            enum_option(&a[0], "decode_invalid_numbers", BOOL_OPTIONS, 1, &mut v)?;
            cfg.decode_invalid_numbers = v != 0;
            enum_result(lua, v, BOOL_OPTIONS, 1)
        })?,
    )?;
    t.raw_set(
        "new",
        lua.create_function(|lua, _: MultiValue| create(lua))?,
    )?;
    t.raw_set("null", null())?;
    t.raw_set("_NAME", "cjson")?;
    t.raw_set("_VERSION", "2.1.0")?;
    Ok(t)
}

// ---------------------------------------------------------------------------------------
// Encoding
// ---------------------------------------------------------------------------------------

fn cannot(kind: &str, reason: &str) -> mlua::Error {
    err(format!("Cannot serialise {kind}: {reason}"))
}

fn encode_value(cfg: &Config, v: &Value, depth: i64, out: &mut Vec<u8>) -> mlua::Result<()> {
    // The output is Rust memory, outside the script's Lua memory cap: the same cap.
    if out.len() > super::sandbox::MEMORY_LIMIT {
        return Err(err("not enough memory".to_string()));
    }
    super::meter::tick(1);
    match v {
        Value::String(s) => encode_string(&s.as_bytes(), out),
        Value::Number(_) | Value::Integer(_) => encode_number(cfg, number(v).unwrap_or(0.0), out)?,
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(ud) if ud.0.is_null() => out.extend_from_slice(b"null"),
        Value::Table(t) => {
            let depth = depth + 1;
            if depth > cfg.encode_max_depth.min(HARD_DEPTH) {
                return Err(err(format!(
                    "Cannot serialise, excessive nesting ({depth})"
                )));
            }
            match array_length(cfg, t)? {
                Some(len) if len > 0 => {
                    out.push(b'[');
                    for i in 1..=len {
                        if i > 1 {
                            out.push(b',');
                        }
                        let item: Value = t.raw_get(i)?;
                        encode_value(cfg, &item, depth, out)?;
                    }
                    out.push(b']');
                }
                _ => {
                    out.push(b'{');
                    let mut first = true;
                    for pair in t.pairs::<Value, Value>() {
                        let (k, item) = pair?;
                        if !first {
                            out.push(b',');
                        }
                        first = false;
                        match &k {
                            Value::Number(_) | Value::Integer(_) => {
                                out.push(b'"');
                                encode_number(cfg, number(&k).unwrap_or(0.0), out)?;
                                out.extend_from_slice(b"\":");
                            }
                            Value::String(s) => {
                                encode_string(&s.as_bytes(), out);
                                out.push(b':');
                            }
                            other => {
                                return Err(cannot(
                                    type_name(other),
                                    "table key must be a number or string",
                                ))
                            }
                        }
                        encode_value(cfg, &item, depth, out)?;
                    }
                    out.push(b'}');
                }
            }
        }
        other => return Err(cannot(type_name(other), "type not supported")),
    }
    Ok(())
}

/// `lua_array_length`: `Some(max index)` for an array, `None` for an object.
fn array_length(cfg: &Config, t: &Table) -> mlua::Result<Option<usize>> {
    let mut max: f64 = 0.0;
    let mut items: f64 = 0.0;
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair?;
        match number(&k) {
            Some(k) if k != 0.0 && k.floor() == k && k >= 1.0 => {
                if k > max {
                    max = k;
                }
                items += 1.0;
            }
            _ => return Ok(None),
        }
    }
    if cfg.sparse_ratio > 0 && max > items * cfg.sparse_ratio as f64 && max > cfg.sparse_safe as f64
    {
        if !cfg.sparse_convert {
            return Err(cannot("table", "excessively sparse array"));
        }
        return Ok(None);
    }
    Ok(Some(max as usize))
}

fn encode_number(cfg: &Config, n: f64, out: &mut Vec<u8>) -> mlua::Result<()> {
    if !n.is_finite() {
        match cfg.encode_invalid_numbers {
            0 => return Err(cannot("number", "must not be NaN or Inf")),
            1 if n.is_nan() => {
                out.extend_from_slice(b"nan");
                return Ok(());
            }
            1 => {}
            _ => {
                out.extend_from_slice(b"null");
                return Ok(());
            }
        }
    }
    out.extend_from_slice(fmt_g(n, cfg.precision as i32).as_bytes());
    Ok(())
}

fn encode_string(s: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &c in s {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\x08' => out.extend_from_slice(b"\\b"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\x0c' => out.extend_from_slice(b"\\f"),
            b'\r' => out.extend_from_slice(b"\\r"),
            0..=0x1f | 0x7f => out.extend_from_slice(format!("\\u{c:04x}").as_bytes()),
            _ => out.push(c),
        }
    }
    out.push(b'"');
}

// ---------------------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    Str(Vec<u8>),
    Num(f64),
    Bool(bool),
    Null,
    Colon,
    Comma,
    End,
    /// A token error, with its description.
    Error(&'static str),
}

impl Tok {
    fn name(&self) -> &'static str {
        match self {
            Tok::ObjBegin => "T_OBJ_BEGIN",
            Tok::ObjEnd => "T_OBJ_END",
            Tok::ArrBegin => "T_ARR_BEGIN",
            Tok::ArrEnd => "T_ARR_END",
            Tok::Str(_) => "T_STRING",
            Tok::Num(_) => "T_NUMBER",
            Tok::Bool(_) => "T_BOOLEAN",
            Tok::Null => "T_NULL",
            Tok::Colon => "T_COLON",
            Tok::Comma => "T_COMMA",
            Tok::End => "T_END",
            Tok::Error(e) => e,
        }
    }
}

struct Parser<'a> {
    data: &'a [u8],
    pos: usize,
    depth: i64,
    cfg: &'a Config,
}

impl Parser<'_> {
    /// The byte at `i`, with NUL past the end (the C code reads a NUL-terminated string).
    fn at(&self, i: usize) -> u8 {
        self.data.get(i).copied().unwrap_or(0)
    }

    /// `json_next_token`: the token and its 0-based index.
    fn next(&mut self) -> (Tok, usize) {
        while matches!(self.at(self.pos), b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
        let index = self.pos;
        let ch = self.at(self.pos);
        let single = match ch {
            b'{' => Some(Tok::ObjBegin),
            b'}' => Some(Tok::ObjEnd),
            b'[' => Some(Tok::ArrBegin),
            b']' => Some(Tok::ArrEnd),
            b',' => Some(Tok::Comma),
            b':' => Some(Tok::Colon),
            _ => None,
        };
        if let Some(t) = single {
            self.pos += 1;
            return (t, index);
        }
        if ch == 0 {
            return (Tok::End, index);
        }
        let unknown = matches!(
            ch,
            b'f' | b'i' | b'I' | b'n' | b'N' | b't' | b'"' | b'+' | b'-'
        ) || ch.is_ascii_digit();
        if !unknown {
            return (Tok::Error("invalid token"), index);
        }
        if ch == b'"' {
            return self.string();
        }
        if ch == b'-' || ch.is_ascii_digit() {
            if !self.cfg.decode_invalid_numbers && self.is_invalid_number() {
                return (Tok::Error("invalid number"), index);
            }
            return self.number();
        }
        let rest = &self.data[self.pos.min(self.data.len())..];
        if rest.starts_with(b"true") {
            self.pos += 4;
            return (Tok::Bool(true), index);
        }
        if rest.starts_with(b"false") {
            self.pos += 5;
            return (Tok::Bool(false), index);
        }
        if rest.starts_with(b"null") {
            self.pos += 4;
            return (Tok::Null, index);
        }
        if self.cfg.decode_invalid_numbers && self.is_invalid_number() {
            return self.number();
        }
        (Tok::Error("invalid token"), index)
    }

    /// `json_is_invalid_number`: numbers JSON forbids (leading `+`, hex, leading zeros,
    /// inf, nan).
    fn is_invalid_number(&self) -> bool {
        let mut p = self.pos;
        if self.at(p) == b'+' {
            return true;
        }
        if self.at(p) == b'-' {
            p += 1;
        }
        if self.at(p) == b'0' {
            let c2 = self.at(p + 1);
            return (c2 | 0x20) == b'x' || c2.is_ascii_digit();
        } else if self.at(p) <= b'9' {
            return false;
        }
        let word: Vec<u8> = (0..3)
            .map(|i| self.at(p + i).to_ascii_lowercase())
            .collect();
        word == b"inf" || word == b"nan"
    }

    fn number(&mut self) -> (Tok, usize) {
        let index = self.pos;
        let (len, value) = strtod_prefix(&self.data[self.pos..]);
        if len == 0 {
            return (Tok::Error("invalid number"), index);
        }
        self.pos += len;
        (Tok::Num(value), index)
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        let mut v = 0;
        for i in 0..4 {
            let d = (self.at(at + i) as char).to_digit(16)?;
            v = v * 16 + d;
        }
        Some(v)
    }

    fn string(&mut self) -> (Tok, usize) {
        let index = self.pos;
        self.pos += 1;
        let mut buf = Vec::new();
        loop {
            let ch = self.at(self.pos);
            if ch == b'"' {
                break;
            }
            if self.pos >= self.data.len() || ch == 0 {
                return (Tok::Error("unexpected end of string"), self.pos);
            }
            if ch == b'\\' {
                let esc = match self.at(self.pos + 1) {
                    b'"' => b'"',
                    b'\\' => b'\\',
                    b'/' => b'/',
                    b'b' => 8,
                    b't' => b'\t',
                    b'n' => b'\n',
                    b'f' => 12,
                    b'r' => b'\r',
                    b'u' => {
                        match self.unicode_escape() {
                            Some((bytes, len)) => {
                                buf.extend_from_slice(&bytes);
                                self.pos += len;
                            }
                            None => return (Tok::Error("invalid unicode escape code"), self.pos),
                        }
                        continue;
                    }
                    _ => return (Tok::Error("invalid escape code"), self.pos),
                };
                buf.push(esc);
                self.pos += 2;
                continue;
            }
            buf.push(ch);
            self.pos += 1;
        }
        self.pos += 1;
        let _ = index;
        (Tok::Str(buf), index)
    }

    /// `json_append_unicode_escape`: the UTF-8 bytes and the escape's length.
    fn unicode_escape(&self) -> Option<(Vec<u8>, usize)> {
        let mut cp = self.hex4(self.pos + 2)?;
        let mut len = 6;
        if cp & 0xF800 == 0xD800 {
            if cp & 0x400 != 0 {
                return None;
            }
            if self.at(self.pos + 6) != b'\\' || self.at(self.pos + 7) != b'u' {
                return None;
            }
            let low = self.hex4(self.pos + 8)?;
            if low & 0xFC00 != 0xDC00 {
                return None;
            }
            cp = (((cp & 0x3FF) << 10) | (low & 0x3FF)) + 0x10000;
            len = 12;
        }
        let mut out = Vec::with_capacity(4);
        if cp <= 0x7F {
            out.push(cp as u8);
        } else if cp <= 0x7FF {
            out.push((cp >> 6) as u8 | 0xC0);
            out.push((cp & 0x3F) as u8 | 0x80);
        } else if cp <= 0xFFFF {
            out.push((cp >> 12) as u8 | 0xE0);
            out.push(((cp >> 6) & 0x3F) as u8 | 0x80);
            out.push((cp & 0x3F) as u8 | 0x80);
        } else if cp <= 0x1F_FFFF {
            out.push((cp >> 18) as u8 | 0xF0);
            out.push(((cp >> 12) & 0x3F) as u8 | 0x80);
            out.push(((cp >> 6) & 0x3F) as u8 | 0x80);
            out.push((cp & 0x3F) as u8 | 0x80);
        } else {
            return None;
        }
        Some((out, len))
    }

    fn throw(&self, expected: &str, tok: &Tok, index: usize) -> mlua::Error {
        err(format!(
            "Expected {expected} but found {} at character {}",
            tok.name(),
            index + 1
        ))
    }

    fn descend(&mut self) -> mlua::Result<()> {
        self.depth += 1;
        if self.depth > self.cfg.decode_max_depth.min(HARD_DEPTH) {
            return Err(err(format!(
                "Found too many nested data structures ({}) at character {}",
                self.depth, self.pos
            )));
        }
        Ok(())
    }

    fn value(&mut self, lua: &Lua, tok: Tok, index: usize) -> mlua::Result<Value> {
        super::meter::tick(1);
        Ok(match tok {
            Tok::Str(s) => Value::String(lua.create_string(&s)?),
            Tok::Num(n) => Value::Number(n),
            Tok::Bool(b) => Value::Boolean(b),
            Tok::Null => null(),
            Tok::ObjBegin => Value::Table(self.object(lua)?),
            Tok::ArrBegin => Value::Table(self.array(lua)?),
            other => return Err(self.throw("value", &other, index)),
        })
    }

    fn object(&mut self, lua: &Lua) -> mlua::Result<Table> {
        self.descend()?;
        let t = lua.create_table()?;
        let (mut tok, mut index) = self.next();
        if tok == Tok::ObjEnd {
            self.depth -= 1;
            return Ok(t);
        }
        loop {
            let Tok::Str(key) = tok else {
                return Err(self.throw("object key string", &tok, index));
            };
            let (colon, ci) = self.next();
            if colon != Tok::Colon {
                return Err(self.throw("colon", &colon, ci));
            }
            let (vt, vi) = self.next();
            let v = self.value(lua, vt, vi)?;
            t.raw_set(lua.create_string(&key)?, v)?;
            let (sep, si) = self.next();
            if sep == Tok::ObjEnd {
                self.depth -= 1;
                return Ok(t);
            }
            if sep != Tok::Comma {
                return Err(self.throw("comma or object end", &sep, si));
            }
            (tok, index) = self.next();
        }
    }

    fn array(&mut self, lua: &Lua) -> mlua::Result<Table> {
        self.descend()?;
        let t = lua.create_table()?;
        let (mut tok, mut index) = self.next();
        if tok == Tok::ArrEnd {
            self.depth -= 1;
            return Ok(t);
        }
        for i in 1.. {
            let v = self.value(lua, tok, index)?;
            t.raw_set(i, v)?;
            let (sep, si) = self.next();
            if sep == Tok::ArrEnd {
                self.depth -= 1;
                return Ok(t);
            }
            if sep != Tok::Comma {
                return Err(self.throw("comma or array end", &sep, si));
            }
            (tok, index) = self.next();
        }
        Ok(t)
    }
}

fn decode(lua: &Lua, cfg: &Config, data: &[u8]) -> mlua::Result<Value> {
    if data.len() >= 2 && (data[0] == 0 || data[1] == 0) {
        return Err(err("JSON parser does not support UTF-16 or UTF-32"));
    }
    let mut p = Parser {
        data,
        pos: 0,
        depth: 0,
        cfg,
    };
    let (tok, index) = p.next();
    let v = p.value(lua, tok, index)?;
    let (end, ei) = p.next();
    if end != Tok::End {
        return Err(p.throw("the end", &end, ei));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lua() -> Lua {
        let lua = Lua::new();
        lua.globals().set("cjson", create(&lua).unwrap()).unwrap();
        lua
    }

    fn eval(lua: &Lua, code: &str) -> String {
        lua.load(code).eval::<String>().unwrap()
    }

    #[test]
    fn encodes_like_lua_cjson() {
        let lua = lua();
        assert_eq!(eval(&lua, "return cjson.encode({})"), "{}");
        assert_eq!(
            eval(&lua, "return cjson.encode({1,2,{a=1}})"),
            "[1,2,{\"a\":1}]"
        );
        assert_eq!(
            eval(&lua, "return cjson.encode({[1]=1,[3]=3})"),
            "[1,null,3]"
        );
        assert_eq!(
            eval(&lua, "return cjson.encode('a\"\\\\/\\n\\1\\127')"),
            "\"a\\\"\\\\\\/\\n\\u0001\\u007f\""
        );
        assert_eq!(eval(&lua, "return cjson.encode(0.1)"), "0.1");
        assert_eq!(eval(&lua, "return cjson.encode(1e300*1.5)"), "1.5e+300");
        assert_eq!(eval(&lua, "return cjson.encode(cjson.null)"), "null");
        let e = lua
            .load("return cjson.encode({[1]=1,[20]=3})")
            .eval::<String>()
            .unwrap_err();
        assert!(e
            .to_string()
            .contains("Cannot serialise table: excessively sparse array"));
    }

    #[test]
    fn decodes_like_lua_cjson() {
        let lua = lua();
        assert_eq!(
            eval(
                &lua,
                "return cjson.encode(cjson.decode('[1.5e300, -0, 123456789012345678]'))"
            ),
            "[1.5e+300,-0,1.2345678901235e+17]"
        );
        assert_eq!(
            eval(
                &lua,
                "return cjson.decode('\"\\\\u00e9\\\\ud83d\\\\ude00\"')"
            ),
            "é😀"
        );
        for (json, msg) in [
            (
                "{",
                "Expected object key string but found T_END at character 2",
            ),
            ("[1,]", "Expected value but found T_ARR_END at character 4"),
            (
                "\"abc",
                "Expected value but found unexpected end of string at character 5",
            ),
            (
                "\"\\x\"",
                "Expected value but found invalid escape code at character 2",
            ),
        ] {
            lua.globals().set("j", json).unwrap();
            let e = lua
                .load("return cjson.decode(j)")
                .eval::<Value>()
                .unwrap_err();
            assert!(e.to_string().contains(msg), "{json}: {e}");
        }
        assert_eq!(eval(&lua, "return tostring(cjson.decode('0x10'))"), "16");
    }
}
