//! The `struct` library as Redis 7.0 bundles it (Roberto Ierusalimschy's struct 0.2 for
//! Lua 5.1), in Rust, with the byte layout of x86-64 Linux (little-endian native order,
//! `short` 2, `int` 4, `long` and `size_t` 8, maximum alignment 8) and the same error
//! texts.
//!
//! Formats: `>` big endian, `<` little endian, `![n]` alignment, `x` padding, `b`/`B`,
//! `h`/`H`, `l`/`L`, `T`, `i[n]`/`I[n]` (n up to 32 bytes), `c[n]` (pack: `c0` is the whole
//! string; unpack: `c0` takes its length from the previous number), `s` zero-terminated,
//! `f`, `d`, and `' '` ignored.

use mlua::{Lua, MultiValue, Table, Value};

use super::cjson::{lua_str_number, number, type_name};
use super::convert::fmt_g14;

const MAXINTSIZE: usize = 32;
const MAXALIGN: usize = 8;

fn err(msg: impl Into<String>) -> mlua::Error {
    mlua::Error::runtime(msg.into())
}

fn arg_error(n: usize, func: &str, msg: &str) -> mlua::Error {
    err(format!("bad argument #{n} to '{func}' ({msg})"))
}

/// What a missing argument reads as: struct.pack pushes a nil right after its arguments.
fn got(args: &MultiValue, i: usize, nil_mark: bool) -> &'static str {
    match args.get(i) {
        Some(v) => type_name(v),
        None if nil_mark && i == args.len() => "nil",
        None => "no value",
    }
}

/// `luaL_checknumber` on argument `i` (0-based).
fn check_number(args: &MultiValue, i: usize, func: &str, nil_mark: bool) -> mlua::Result<f64> {
    let v = args.get(i);
    if let Some(n) = v.and_then(number) {
        return Ok(n);
    }
    if let Some(Value::String(s)) = v {
        if let Some(n) = lua_str_number(&s.as_bytes()) {
            return Ok(n);
        }
    }
    Err(arg_error(
        i + 1,
        func,
        &format!("number expected, got {}", got(args, i, nil_mark)),
    ))
}

/// `luaL_checklstring` on argument `i` (0-based): strings, and numbers as `%.14g`.
fn check_string(args: &MultiValue, i: usize, func: &str, nil_mark: bool) -> mlua::Result<Vec<u8>> {
    match args.get(i) {
        Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
        Some(v @ (Value::Number(_) | Value::Integer(_))) => {
            Ok(fmt_g14(number(v).unwrap_or(0.0)).into_bytes())
        }
        _ => Err(arg_error(
            i + 1,
            func,
            &format!("string expected, got {}", got(args, i, nil_mark)),
        )),
    }
}

/// The format string, cut at its first NUL as the C code reads it.
fn format_arg(args: &MultiValue, func: &str) -> mlua::Result<Vec<u8>> {
    let mut f = check_string(args, 0, func, false)?;
    if let Some(z) = f.iter().position(|&c| c == 0) {
        f.truncate(z);
    }
    Ok(f)
}

struct Fmt<'a> {
    fmt: &'a [u8],
    pos: usize,
    little: bool,
    align: usize,
}

impl Fmt<'_> {
    fn new(fmt: &[u8]) -> Fmt<'_> {
        Fmt {
            fmt,
            pos: 0,
            little: true,
            align: 1,
        }
    }

    fn next_opt(&mut self) -> Option<u8> {
        let c = self.fmt.get(self.pos).copied()?;
        self.pos += 1;
        Some(c)
    }

    fn getnum(&mut self, default: usize) -> mlua::Result<usize> {
        if !self.fmt.get(self.pos).is_some_and(u8::is_ascii_digit) {
            return Ok(default);
        }
        let mut a: i64 = 0;
        while let Some(d) = self.fmt.get(self.pos).filter(|c| c.is_ascii_digit()) {
            let d = (d - b'0') as i64;
            if a > (i32::MAX as i64 / 10) || a * 10 > (i32::MAX as i64 - d) {
                return Err(err("integral size overflow"));
            }
            a = a * 10 + d;
            self.pos += 1;
        }
        Ok(a as usize)
    }

    fn optsize(&mut self, opt: u8) -> mlua::Result<usize> {
        Ok(match opt {
            b'B' | b'b' => 1,
            b'H' | b'h' => 2,
            b'L' | b'l' | b'T' | b'd' => 8,
            b'f' => 4,
            b'x' => 1,
            b'c' => self.getnum(1)?,
            b'i' | b'I' => {
                let sz = self.getnum(4)?;
                if sz > MAXINTSIZE {
                    return Err(err(format!(
                        "integral size {sz} is larger than limit of {MAXINTSIZE}"
                    )));
                }
                sz
            }
            _ => 0,
        })
    }

    fn toalign(&self, len: usize, opt: u8, size: usize) -> usize {
        if size == 0 || opt == b'c' {
            return 0;
        }
        let size = size.min(self.align);
        (size.wrapping_sub(len & size.wrapping_sub(1))) & size.wrapping_sub(1)
    }

    fn control(&mut self, opt: u8, func: &str) -> mlua::Result<()> {
        match opt {
            b' ' => {}
            b'>' => self.little = false,
            b'<' => self.little = true,
            b'!' => {
                let a = self.getnum(MAXALIGN)?;
                if a == 0 || a & (a - 1) != 0 {
                    return Err(err(format!("alignment {a} is not a power of 2")));
                }
                self.align = a;
            }
            other => {
                return Err(arg_error(
                    1,
                    func,
                    &format!("invalid format option '{}'", other as char),
                ))
            }
        }
        Ok(())
    }
}

fn is_int(opt: u8) -> bool {
    matches!(
        opt,
        b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I'
    )
}

fn pack(lua: &Lua, args: MultiValue) -> mlua::Result<mlua::LuaString> {
    let fmt = format_arg(&args, "pack")?;
    let mut f = Fmt::new(&fmt);
    let mut out: Vec<u8> = Vec::new();
    let mut arg = 1;
    while let Some(opt) = f.next_opt() {
        let mut size = f.optsize(opt)?;
        let pad = f.toalign(out.len(), opt, size);
        out.resize(out.len() + pad, 0);
        match opt {
            _ if is_int(opt) => {
                let n = check_number(&args, arg, "pack", true)?;
                arg += 1;
                let mut value: u64 = if n < 0.0 { (n as i64) as u64 } else { n as u64 };
                let mut buf = vec![0u8; size];
                for i in 0..size {
                    let at = if f.little { i } else { size - 1 - i };
                    buf[at] = (value & 0xff) as u8;
                    value >>= 8;
                }
                out.extend_from_slice(&buf);
            }
            b'x' => out.push(0),
            b'f' => {
                let n = check_number(&args, arg, "pack", true)? as f32;
                arg += 1;
                out.extend_from_slice(&if f.little {
                    n.to_le_bytes()
                } else {
                    n.to_be_bytes()
                });
            }
            b'd' => {
                let n = check_number(&args, arg, "pack", true)?;
                arg += 1;
                out.extend_from_slice(&if f.little {
                    n.to_le_bytes()
                } else {
                    n.to_be_bytes()
                });
            }
            b'c' | b's' => {
                let s = check_string(&args, arg, "pack", true)?;
                arg += 1;
                if size == 0 {
                    size = s.len();
                }
                if s.len() < size {
                    return Err(arg_error(arg + 1, "pack", "string too short"));
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                }
            }
            _ => f.control(opt, "pack")?,
        }
    }
    lua.create_string(&out)
}

fn unpack(lua: &Lua, args: MultiValue) -> mlua::Result<MultiValue> {
    let fmt = format_arg(&args, "unpack")?;
    let data = check_string(&args, 1, "unpack", false)?;
    let ld = data.len();
    let offset = match args.get(2) {
        None | Some(Value::Nil) => 1,
        Some(_) => check_number(&args, 2, "unpack", false)? as i64,
    };
    if offset <= 0 {
        // size_t arithmetic: a negative offset is a huge position.
        if offset == 0 {
            return Err(arg_error(3, "unpack", "offset must be 1 or greater"));
        }
    }
    let mut pos = (offset as u64 as usize).wrapping_sub(1);
    let mut f = Fmt::new(&fmt);
    let mut out: Vec<Value> = Vec::new();
    let too_short = || arg_error(2, "unpack", "data string too short");
    while let Some(opt) = f.next_opt() {
        let mut size = f.optsize(opt)?;
        pos = pos.wrapping_add(f.toalign(pos, opt, size));
        if size > ld || pos > ld - size {
            return Err(too_short());
        }
        match opt {
            _ if is_int(opt) => {
                let bytes = &data[pos..pos + size];
                let mut l: u64 = 0;
                for i in 0..size {
                    let b = if f.little {
                        bytes[size - 1 - i]
                    } else {
                        bytes[i]
                    };
                    l = (l << 8) | b as u64;
                }
                let n = if opt.is_ascii_lowercase() {
                    // x86-64 masks the shift count, as the C code's shift does.
                    let shift = ((size * 8).wrapping_sub(1) & 63) as u32;
                    let mask = u64::MAX << shift;
                    if l & mask != 0 {
                        l |= mask;
                    }
                    l as i64 as f64
                } else {
                    l as f64
                };
                out.push(Value::Number(n));
            }
            b'x' => {}
            b'f' => {
                let mut b = [0u8; 4];
                b.copy_from_slice(&data[pos..pos + 4]);
                let v = if f.little {
                    f32::from_le_bytes(b)
                } else {
                    f32::from_be_bytes(b)
                };
                out.push(Value::Number(v as f64));
            }
            b'd' => {
                let mut b = [0u8; 8];
                b.copy_from_slice(&data[pos..pos + 8]);
                let v = if f.little {
                    f64::from_le_bytes(b)
                } else {
                    f64::from_be_bytes(b)
                };
                out.push(Value::Number(v));
            }
            b'c' => {
                if size == 0 {
                    let prev = match out.last() {
                        Some(v @ (Value::Number(_) | Value::Integer(_))) => number(v),
                        Some(Value::String(s)) => lua_str_number(&s.as_bytes()),
                        _ => None,
                    };
                    let Some(prev) = prev else {
                        return Err(err("format 'c0' needs a previous size"));
                    };
                    out.pop();
                    size = prev as usize;
                    if size > ld || pos > ld - size {
                        return Err(too_short());
                    }
                }
                out.push(Value::String(lua.create_string(&data[pos..pos + size])?));
            }
            b's' => {
                let Some(z) = data[pos..].iter().position(|&c| c == 0) else {
                    return Err(err("unfinished string in data"));
                };
                out.push(Value::String(lua.create_string(&data[pos..pos + z])?));
                size = z + 1;
            }
            _ => f.control(opt, "unpack")?,
        }
        pos = pos.wrapping_add(size);
    }
    out.push(Value::Number(pos.wrapping_add(1) as f64));
    Ok(MultiValue::from_iter(out))
}

fn size(_: &Lua, args: MultiValue) -> mlua::Result<f64> {
    let fmt = format_arg(&args, "size")?;
    let mut f = Fmt::new(&fmt);
    let mut pos: usize = 0;
    while let Some(opt) = f.next_opt() {
        let size = f.optsize(opt)?;
        pos = pos.wrapping_add(f.toalign(pos, opt, size));
        if opt == b's' {
            return Err(arg_error(1, "size", "option 's' has no fixed size"));
        }
        if opt == b'c' && size == 0 {
            return Err(arg_error(1, "size", "option 'c0' has no fixed size"));
        }
        if !opt.is_ascii_alphanumeric() {
            f.control(opt, "size")?;
        }
        pos = pos.wrapping_add(size);
    }
    Ok(pos as f64)
}

/// Creates the `struct` table.
pub fn create(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("pack", lua.create_function(pack)?)?;
    t.raw_set("unpack", lua.create_function(unpack)?)?;
    t.raw_set("size", lua.create_function(size)?)?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn struct_matches_redis() {
        let lua = Lua::new();
        lua.globals().set("struct", create(&lua).unwrap()).unwrap();
        let v: String = lua
            .load(
                "local a, b = struct.unpack('>i2', struct.pack('>i2', -2)) \
                 local c, d, e = struct.unpack('!4 b i', struct.pack('!4 b i', 1, 2)) \
                 local s = struct.unpack('Bc0', '\\3abcd') \
                 return table.concat({a, b, c, d, e, s, struct.size('!8bd'), struct.size('i'), \
                   (struct.unpack('i17', string.rep('a', 17))), #struct.pack('i17', 1), \
                   struct.pack('<I', -1):byte(1), tostring((struct.unpack('<f', struct.pack('<f', 0.1))))}, ' ')",
            )
            .eval()
            .unwrap();
        assert_eq!(v, "-2 3 1 2 9 abc 16 4 -31 17 255 0.10000000149012");
        for (code, msg) in [
            (
                "struct.pack('z', 1)",
                "bad argument #1 to 'pack' (invalid format option 'z')",
            ),
            (
                "struct.pack('c3', 'ab')",
                "bad argument #3 to 'pack' (string too short)",
            ),
            (
                "struct.pack('ii', 1)",
                "bad argument #3 to 'pack' (number expected, got nil)",
            ),
            (
                "struct.unpack('i', 'ab')",
                "bad argument #2 to 'unpack' (data string too short)",
            ),
            ("struct.size('s')", "option 's' has no fixed size"),
            (
                "struct.pack('i33', 1)",
                "integral size 33 is larger than limit of 32",
            ),
            ("struct.pack('!3i', 1)", "alignment 3 is not a power of 2"),
        ] {
            let e = lua.load(code).exec().unwrap_err().to_string();
            assert!(e.contains(msg), "{code}: {e}");
        }
    }
}
