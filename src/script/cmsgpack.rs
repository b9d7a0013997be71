//! The `cmsgpack` library as Redis 7.0 bundles it (lua-cmsgpack 0.4.0), in Rust: the same
//! encodings (integers in the smallest form, floats as 32-bit when exact, strings as
//! fixstr/str8/str16/str32, tables as arrays when their keys are exactly 1..n, nesting cut
//! to nil at 16 levels), the same decoding of a stream of values, and the same errors.
//!
//! Difference: Redis's decoder is bounded only by the Lua C stack (arrays nest up to 3999
//! levels); here nesting stops at [`MAX_DECODE_NESTING`] levels with Redis's stack overflow
//! text, so that a hostile input cannot exhaust the thread's stack.

use mlua::{Lua, MultiValue, Table, Value};

use super::cjson::{check_integer, number, type_name};
use super::convert::fmt_g14;

/// Tables nested deeper than this are encoded as nil (LUACMSGPACK_MAX_NESTING).
const MAX_NESTING: usize = 16;
/// Lua 5.1's LUAI_MAXCSTACK: the stack slots a C function may use.
const MAX_CSTACK: usize = 8000;
/// Stack slots kept free when returning many top-level values.
const RESULT_MARGIN: usize = 16;
/// Deepest nesting decoded (see the module doc).
pub const MAX_DECODE_NESTING: usize = 1000;

const TOO_MANY: &str =
    "stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)";

fn err(msg: impl Into<String>) -> mlua::Error {
    mlua::Error::runtime(msg.into())
}

// ---------------------------------------------------------------------------------------
// Encoding
// ---------------------------------------------------------------------------------------

fn encode_int(out: &mut Vec<u8>, n: i64) {
    if n >= 0 {
        if n <= 127 {
            out.push(n as u8);
        } else if n <= 0xff {
            out.extend_from_slice(&[0xcc, n as u8]);
        } else if n <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else if n <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// `IS_INT64_EQUIVALENT`: finite and equal to its `int64_t` cast (x86-64 semantics: NaN and
/// out-of-range values cast to INT64_MIN).
fn as_int64(n: f64) -> Option<i64> {
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if n.is_finite() && (-LIMIT..LIMIT).contains(&n) && n.trunc() == n {
        Some(n as i64)
    } else {
        None
    }
}

fn encode_number(out: &mut Vec<u8>, n: f64) {
    if let Some(i) = as_int64(n) {
        encode_int(out, i);
        return;
    }
    let f = n as f32;
    if n == f as f64 {
        out.push(0xca);
        out.extend_from_slice(&f.to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn encode_bytes(out: &mut Vec<u8>, s: &[u8]) {
    let len = s.len();
    if len < 32 {
        out.push(0xa0 | len as u8);
    } else if len <= 0xff {
        out.extend_from_slice(&[0xd9, len as u8]);
    } else if len <= 0xffff {
        out.push(0xda);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
    out.extend_from_slice(s);
}

fn encode_header(out: &mut Vec<u8>, len: usize, fix: u8, b16: u8, b32: u8) {
    if len <= 15 {
        out.push(fix | len as u8);
    } else if len <= 0xffff {
        out.push(b16);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(b32);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
}

/// `table_is_an_array`: every key a positive integer (fitting an int) and max == count.
fn array_len(t: &Table) -> mlua::Result<Option<usize>> {
    let (mut count, mut max) = (0usize, 0f64);
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair?;
        match number(&k) {
            Some(n) if n > 0.0 && n <= i32::MAX as f64 && n.trunc() == n => {
                if n > max {
                    max = n;
                }
                count += 1;
            }
            _ => return Ok(None),
        }
    }
    Ok((max as usize == count).then_some(count))
}

fn encode_value(out: &mut Vec<u8>, v: &Value, level: usize) -> mlua::Result<()> {
    // The output is Rust memory, outside the script's Lua memory cap: the same cap.
    if out.len() > super::sandbox::MEMORY_LIMIT {
        return Err(err("not enough memory"));
    }
    super::meter::tick(1);
    match v {
        Value::String(s) => encode_bytes(out, &s.as_bytes()),
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Number(_) | Value::Integer(_) => encode_number(out, number(v).unwrap_or(0.0)),
        Value::Table(_) if level == MAX_NESTING => out.push(0xc0),
        Value::Table(t) => match array_len(t)? {
            Some(len) => {
                encode_header(out, len, 0x90, 0xdc, 0xdd);
                for i in 1..=len {
                    let item: Value = t.raw_get(i)?;
                    encode_value(out, &item, level + 1)?;
                }
            }
            None => {
                // Keys laid out by address would be packed in an order that differs
                // between replicas.
                for pair in t.pairs::<Value, Value>() {
                    if let (
                        Value::Table(_)
                        | Value::Function(_)
                        | Value::Thread(_)
                        | Value::UserData(_),
                        _,
                    ) = pair?
                    {
                        return Err(err(
                            "cannot pack a table keyed by a table, function, coroutine or userdata",
                        ));
                    }
                }
                let len = t.pairs::<Value, Value>().count();
                encode_header(out, len, 0x80, 0xde, 0xdf);
                for pair in t.pairs::<Value, Value>() {
                    let (k, item) = pair?;
                    encode_value(out, &k, level + 1)?;
                    encode_value(out, &item, level + 1)?;
                }
            }
        },
        _ => out.push(0xc0),
    }
    Ok(())
}

fn pack(lua: &Lua, args: MultiValue) -> mlua::Result<mlua::LuaString> {
    if args.is_empty() {
        return Err(err(
            "bad argument #0 to 'pack' (MessagePack pack needs input.)",
        ));
    }
    let mut out = Vec::new();
    for v in args.iter() {
        encode_value(&mut out, v, 0)?;
    }
    lua.create_string(&out)
}

// ---------------------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------------------

enum Fail {
    Eof,
    BadFormat,
    Lua(mlua::Error),
}

impl From<mlua::Error> for Fail {
    fn from(e: mlua::Error) -> Self {
        Fail::Lua(e)
    }
}

struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn left(&self) -> usize {
        self.data.len() - self.pos
    }

    fn need(&self, n: usize) -> Result<(), Fail> {
        if self.left() < n {
            Err(Fail::Eof)
        } else {
            Ok(())
        }
    }

    fn be(&self, at: usize, n: usize) -> u64 {
        self.data[self.pos + at..self.pos + at + n]
            .iter()
            .fold(0u64, |acc, b| (acc << 8) | *b as u64)
    }

    /// Reads a value; `top` is the Lua stack height before it is pushed, `depth` the
    /// nesting.
    fn value(&mut self, lua: &Lua, top: usize, depth: usize) -> Result<Value, Fail> {
        super::meter::tick(1);
        self.need(1)?;
        if top + 1 > MAX_CSTACK {
            return Err(Fail::Lua(err(TOO_MANY)));
        }
        let b = self.data[self.pos];
        let num = |v: f64| Ok(Value::Number(v));
        match b {
            0xcc => {
                self.need(2)?;
                let v = self.be(1, 1);
                self.pos += 2;
                num(v as f64)
            }
            0xd0 => {
                self.need(2)?;
                let v = self.be(1, 1) as u8 as i8;
                self.pos += 2;
                num(v as f64)
            }
            0xcd => {
                self.need(3)?;
                let v = self.be(1, 2);
                self.pos += 3;
                num(v as f64)
            }
            0xd1 => {
                self.need(3)?;
                let v = self.be(1, 2) as u16 as i16;
                self.pos += 3;
                num(v as f64)
            }
            0xce => {
                self.need(5)?;
                let v = self.be(1, 4);
                self.pos += 5;
                num(v as f64)
            }
            0xd2 => {
                self.need(5)?;
                let v = self.be(1, 4) as u32 as i32;
                self.pos += 5;
                num(v as f64)
            }
            0xcf => {
                self.need(9)?;
                let v = self.be(1, 8);
                self.pos += 9;
                num(v as f64)
            }
            0xd3 => {
                self.need(9)?;
                let v = self.be(1, 8) as i64;
                self.pos += 9;
                num(v as f64)
            }
            0xc0 => {
                self.pos += 1;
                Ok(Value::Nil)
            }
            0xc2 | 0xc3 => {
                self.pos += 1;
                Ok(Value::Boolean(b == 0xc3))
            }
            0xca => {
                self.need(5)?;
                let v = f32::from_bits(self.be(1, 4) as u32);
                self.pos += 5;
                num(v as f64)
            }
            0xcb => {
                self.need(9)?;
                let v = f64::from_bits(self.be(1, 8));
                self.pos += 9;
                num(v)
            }
            0xd9..=0xdb => {
                let w = match b {
                    0xd9 => 1,
                    0xda => 2,
                    _ => 4,
                };
                self.need(1 + w)?;
                let l = self.be(1, w) as usize;
                self.need(1 + w + l)?;
                let s = lua.create_string(&self.data[self.pos + 1 + w..self.pos + 1 + w + l])?;
                self.pos += 1 + w + l;
                Ok(Value::String(s))
            }
            0xdc..=0xdf => {
                let w = if b == 0xdc || b == 0xde { 2 } else { 4 };
                self.need(1 + w)?;
                let l = self.be(1, w) as usize;
                self.pos += 1 + w;
                if b <= 0xdd {
                    self.array(lua, l, top, depth)
                } else {
                    self.map(lua, l, top, depth)
                }
            }
            _ if b & 0x80 == 0 => {
                self.pos += 1;
                num(b as f64)
            }
            _ if b & 0xe0 == 0xe0 => {
                self.pos += 1;
                num(b as i8 as f64)
            }
            _ if b & 0xe0 == 0xa0 => {
                let l = (b & 0x1f) as usize;
                self.need(1 + l)?;
                let s = lua.create_string(&self.data[self.pos + 1..self.pos + 1 + l])?;
                self.pos += 1 + l;
                Ok(Value::String(s))
            }
            _ if b & 0xf0 == 0x90 => {
                self.pos += 1;
                self.array(lua, (b & 0xf) as usize, top, depth)
            }
            _ if b & 0xf0 == 0x80 => {
                self.pos += 1;
                self.map(lua, (b & 0xf) as usize, top, depth)
            }
            _ => Err(Fail::BadFormat),
        }
    }

    fn array(&mut self, lua: &Lua, len: usize, top: usize, depth: usize) -> Result<Value, Fail> {
        if top + 2 > MAX_CSTACK || depth >= MAX_DECODE_NESTING {
            return Err(Fail::Lua(err(
                "stack overflow (in function mp_decode_to_lua_array)",
            )));
        }
        let t = lua.create_table()?;
        for i in 1..=len {
            let v = self.value(lua, top + 2, depth + 1)?;
            t.raw_set(i, v)?;
        }
        Ok(Value::Table(t))
    }

    fn map(&mut self, lua: &Lua, len: usize, top: usize, depth: usize) -> Result<Value, Fail> {
        if depth >= MAX_DECODE_NESTING {
            return Err(Fail::Lua(err(TOO_MANY)));
        }
        let t = lua.create_table()?;
        for _ in 0..len {
            let k = self.value(lua, top + 1, depth + 1)?;
            let v = self.value(lua, top + 2, depth + 1)?;
            match &k {
                Value::Nil => return Err(Fail::Lua(err("table index is nil"))),
                Value::Number(n) if n.is_nan() => return Err(Fail::Lua(err("table index is NaN"))),
                _ => t.raw_set(k, v)?,
            }
        }
        Ok(Value::Table(t))
    }
}

/// `mp_unpack_full`.
fn unpack_full(
    lua: &Lua,
    data: &[u8],
    limit: i64,
    offset: i64,
    top: usize,
) -> mlua::Result<MultiValue> {
    let decode_all = limit == 0 && offset == 0;
    let len = data.len();
    if offset < 0 || limit < 0 {
        return Err(err(format!(
            "Invalid request to unpack with offset of {offset} and limit of {len}."
        )));
    } else if offset as usize > len {
        return Err(err(format!(
            "Start offset {offset} greater than input length {len}."
        )));
    }
    let limit = if decode_all { i64::MAX } else { limit };
    let mut c = Cursor {
        data,
        pos: offset as usize,
    };
    let mut out = Vec::new();
    let mut cnt = 0;
    while c.left() > 0 && cnt < limit {
        // mlua needs a few slots of its own to return the values (Redis stops at 8000).
        if top + out.len() + RESULT_MARGIN >= MAX_CSTACK {
            return Err(err(TOO_MANY));
        }
        match c.value(lua, top + out.len(), 0) {
            Ok(v) => out.push(v),
            Err(Fail::Eof) => return Err(err("Missing bytes in input.")),
            Err(Fail::BadFormat) => return Err(err("Bad data format in input.")),
            Err(Fail::Lua(e)) => return Err(e),
        }
        cnt += 1;
    }
    if !decode_all {
        let next = if c.left() == 0 {
            -1.0
        } else {
            (len - c.left()) as f64
        };
        out.insert(0, Value::Number(next));
    }
    Ok(MultiValue::from_iter(out))
}

fn string_arg(args: &MultiValue, func: &str) -> mlua::Result<Vec<u8>> {
    match args.front() {
        Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
        Some(v @ (Value::Number(_) | Value::Integer(_))) => {
            Ok(fmt_g14(number(v).unwrap_or(0.0)).into_bytes())
        }
        other => Err(err(format!(
            "bad argument #1 to '{func}' (string expected, got {})",
            other.map(type_name).unwrap_or("no value")
        ))),
    }
}

fn opt_integer(args: &MultiValue, i: usize, func: &str) -> mlua::Result<i64> {
    match args.get(i) {
        None | Some(Value::Nil) => Ok(0),
        Some(v) => check_integer(v, i + 1, func),
    }
}

/// Creates the `cmsgpack` table.
pub fn create(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("pack", lua.create_function(pack)?)?;
    t.raw_set(
        "unpack",
        lua.create_function(|lua, args: MultiValue| {
            let data = string_arg(&args, "unpack")?;
            unpack_full(lua, &data, 0, 0, args.len())
        })?,
    )?;
    t.raw_set(
        "unpack_one",
        lua.create_function(|lua, args: MultiValue| {
            let offset = opt_integer(&args, 1, "unpack_one")?;
            let data = string_arg(&args, "unpack_one")?;
            unpack_full(lua, &data, 1, offset, 1)
        })?,
    )?;
    t.raw_set(
        "unpack_limit",
        lua.create_function(|lua, args: MultiValue| {
            let limit = match args.get(1) {
                Some(v) => check_integer(v, 2, "unpack_limit")?,
                None => {
                    return Err(err(
                        "bad argument #2 to 'unpack_limit' (number expected, got no value)",
                    ))
                }
            };
            let offset = opt_integer(&args, 2, "unpack_limit")?;
            let data = string_arg(&args, "unpack_limit")?;
            unpack_full(lua, &data, limit, offset, 1)
        })?,
    )?;
    t.raw_set("_NAME", "cmsgpack")?;
    t.raw_set("_VERSION", "lua-cmsgpack 0.4.0")?;
    t.raw_set("_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo")?;
    t.raw_set("_DESCRIPTION", "MessagePack C implementation for Lua")?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_encodings() {
        let lua = Lua::new();
        lua.globals()
            .set("cmsgpack", create(&lua).unwrap())
            .unwrap();
        let hex: String = lua
            .load(
                "local s = cmsgpack.pack(1, -1, 200, -200, 70000, 2^40, 1.5, 0.1, 'ab', true, nil, {1,2}, {a=1}, {}) \
                 return (s:gsub('.', function(c) return string.format('%02x', c:byte()) end))",
            )
            .eval()
            .unwrap();
        assert_eq!(
            hex,
            "01ffccc8d1ff38ce00011170cf0000010000000000ca3fc00000cb3fb999999999999aa26162c3c0920102\
             81a16101\
             90"
        );
        let v: String = lua
            .load(
                "local a, b, c = cmsgpack.unpack(cmsgpack.pack(1, 'x', {5})) \
                 local n1, x = cmsgpack.unpack_one(cmsgpack.pack(1,2,3), 2) \
                 local n2, y, z = cmsgpack.unpack_limit(cmsgpack.pack(1,2,3), 2) \
                 return table.concat({a, b, c[1], n1, x, n2, y, z}, ' ')",
            )
            .eval()
            .unwrap();
        assert_eq!(v, "1 x 5 -1 3 2 1 2");
        for (code, msg) in [
            ("cmsgpack.unpack('\\196\\1a')", "Bad data format in input."),
            ("cmsgpack.unpack('\\146\\1')", "Missing bytes in input."),
            (
                "cmsgpack.pack()",
                "bad argument #0 to 'pack' (MessagePack pack needs input.)",
            ),
            (
                "cmsgpack.unpack_limit(cmsgpack.pack(1,2,3), 2, 9)",
                "Start offset 9 greater than input length 3.",
            ),
            (
                "cmsgpack.unpack(string.rep('\\145', 5000) .. '\\1')",
                "stack overflow (in function mp_decode_to_lua_array)",
            ),
            ("cmsgpack.unpack(string.rep('\\1', 8000))", TOO_MANY),
            ("cmsgpack.unpack(string.rep('\\1', 7990))", TOO_MANY),
        ] {
            let e = lua.load(code).exec().unwrap_err().to_string();
            assert!(e.contains(msg), "{code}: {e}");
        }
    }
}
