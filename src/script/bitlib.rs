//! The `bit` library (LuaBitOp, as bundled with Redis): 32-bit operations on Lua numbers.

use mlua::{Lua, MultiValue, Table, Value};

/// LuaBitOp's `barg`: `lua_tonumber` plus 2^52 + 2^51, whose low 32 bits are the number
/// rounded half to even, modulo 2^32 (and 0 for NaN and infinities). A value that is not a
/// number (nor a numeric string) is refused with Lua's argument error.
fn barg(args: &MultiValue, i: usize, func: &str) -> mlua::Result<i32> {
    let v = args.get(i);
    let n = match v {
        Some(Value::String(s)) => super::cjson::lua_str_number(&s.as_bytes()),
        Some(v) => super::cjson::number(v),
        None => None,
    };
    let b = (n.unwrap_or(0.0) + 6_755_399_441_055_744.0).to_bits() as u32;
    if b == 0 && n.is_none() {
        let got = v.map(super::cjson::type_name).unwrap_or("no value");
        return Err(mlua::Error::runtime(format!(
            "bad argument #{} to '{func}' (number expected, got {got})",
            i + 1
        )));
    }
    Ok(b as i32)
}

/// band/bor/bxor: the first argument, combined with the others from the last one down, as
/// LuaBitOp evaluates them.
fn fold(args: &MultiValue, func: &str, f: fn(i32, i32) -> i32) -> mlua::Result<f64> {
    let mut acc = barg(args, 0, func)?;
    for i in (1..args.len()).rev() {
        acc = f(acc, barg(args, i, func)?);
    }
    Ok(acc as f64)
}

/// A shift or rotation of a 32-bit value by 0..31.
type Shift = fn(i32, u32) -> i32;

/// Creates the `bit` table.
pub fn create(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "tobit",
        lua.create_function(|_, a: MultiValue| Ok(barg(&a, 0, "tobit")? as f64))?,
    )?;
    t.raw_set(
        "bnot",
        lua.create_function(|_, a: MultiValue| Ok(!barg(&a, 0, "bnot")? as f64))?,
    )?;
    t.raw_set(
        "band",
        lua.create_function(|_, a: MultiValue| fold(&a, "band", |x, y| x & y))?,
    )?;
    t.raw_set(
        "bor",
        lua.create_function(|_, a: MultiValue| fold(&a, "bor", |x, y| x | y))?,
    )?;
    t.raw_set(
        "bxor",
        lua.create_function(|_, a: MultiValue| fold(&a, "bxor", |x, y| x ^ y))?,
    )?;
    let shifts: [(&'static str, Shift); 5] = [
        ("lshift", |x, n| ((x as u32) << n) as i32),
        ("rshift", |x, n| ((x as u32) >> n) as i32),
        ("arshift", |x, n| x >> n),
        ("rol", |x, n| (x as u32).rotate_left(n) as i32),
        ("ror", |x, n| (x as u32).rotate_right(n) as i32),
    ];
    for (name, f) in shifts {
        t.raw_set(
            name,
            lua.create_function(move |_, a: MultiValue| {
                let x = barg(&a, 0, name)?;
                let n = (barg(&a, 1, name)? & 31) as u32;
                Ok(f(x, n) as f64)
            })?,
        )?;
    }
    t.raw_set(
        "bswap",
        lua.create_function(|_, a: MultiValue| {
            Ok((barg(&a, 0, "bswap")? as u32).swap_bytes() as i32 as f64)
        })?,
    )?;
    t.raw_set(
        "tohex",
        lua.create_function(|_, a: MultiValue| {
            let mut x = barg(&a, 0, "tohex")? as u32;
            let n = if a.len() < 2 {
                8
            } else {
                barg(&a, 1, "tohex")?
            };
            let digits: &[u8; 16] = if n < 0 {
                b"0123456789ABCDEF"
            } else {
                b"0123456789abcdef"
            };
            // -INT_MIN stays negative in C, and the loop then writes nothing.
            let count = if n == i32::MIN {
                0
            } else {
                n.unsigned_abs().min(8) as usize
            };
            let mut buf = vec![b'0'; count];
            for slot in buf.iter_mut().rev() {
                *slot = digits[(x & 15) as usize];
                x >>= 4;
            }
            Ok(String::from_utf8_lossy(&buf).into_owned())
        })?,
    )?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_operations_match_luabitop() {
        let lua = Lua::new();
        lua.globals().set("bit", create(&lua).unwrap()).unwrap();
        let v: String = lua
            .load(
                "return table.concat({bit.tobit(0xffffffff), bit.tobit(2^32 + 5), bit.band(0xff, 0x0f, 0x3), \
                 bit.bor(1, 2, 4), bit.bxor(5, 1), bit.bnot(0), bit.lshift(1, 31), bit.rshift(-1, 28), \
                 bit.arshift(-256, 4), bit.rol(0x12345678, 8), bit.ror(0x12345678, 8), \
                 bit.tohex(255), bit.tohex(-1, -4), bit.bswap(0x12345678)}, ' ')",
            )
            .eval()
            .unwrap();
        assert_eq!(
            v,
            "-1 5 3 7 4 -1 -2147483648 15 -16 878082066 2014458966 000000ff FFFF 2018915346"
        );
    }
}
