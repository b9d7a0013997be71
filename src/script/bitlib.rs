//! The `bit` library (LuaBitOp, as bundled with Redis): 32-bit operations on Lua numbers.

use mlua::{Lua, MultiValue, Table, Value};

/// LuaBitOp's `tobit`: the number rounded to an integer, modulo 2^32, as a signed 32-bit value.
fn tobit(v: &Value) -> mlua::Result<i32> {
    let n = match v {
        Value::Number(n) => *n,
        Value::Integer(n) => *n as f64,
        Value::String(s) => s
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse::<f64>().ok())
            .ok_or_else(|| {
                mlua::Error::runtime("bad argument to bit operation (number expected)")
            })?,
        _ => {
            return Err(mlua::Error::runtime(
                "bad argument to bit operation (number expected)",
            ))
        }
    };
    if !n.is_finite() {
        return Ok(0);
    }
    Ok(n.round_ties_even().rem_euclid(4_294_967_296.0) as u32 as i32)
}

fn arg(args: &MultiValue, i: usize) -> mlua::Result<i32> {
    tobit(args.get(i).unwrap_or(&Value::Nil))
}

fn fold(args: MultiValue, f: fn(i32, i32) -> i32) -> mlua::Result<f64> {
    let mut acc = arg(&args, 0)?;
    for i in 1..args.len() {
        acc = f(acc, arg(&args, i)?);
    }
    Ok(acc as f64)
}

/// Creates the `bit` table.
pub fn create(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "tobit",
        lua.create_function(|_, a: MultiValue| Ok(arg(&a, 0)? as f64))?,
    )?;
    t.raw_set(
        "bnot",
        lua.create_function(|_, a: MultiValue| Ok(!arg(&a, 0)? as f64))?,
    )?;
    t.raw_set("band", lua.create_function(|_, a| fold(a, |x, y| x & y))?)?;
    t.raw_set("bor", lua.create_function(|_, a| fold(a, |x, y| x | y))?)?;
    t.raw_set("bxor", lua.create_function(|_, a| fold(a, |x, y| x ^ y))?)?;
    let shift = |f: fn(i32, u32) -> i32| {
        move |_: &Lua, a: MultiValue| Ok(f(arg(&a, 0)?, (arg(&a, 1)? & 31) as u32) as f64)
    };
    t.raw_set(
        "lshift",
        lua.create_function(shift(|x, n| ((x as u32) << n) as i32))?,
    )?;
    t.raw_set(
        "rshift",
        lua.create_function(shift(|x, n| ((x as u32) >> n) as i32))?,
    )?;
    t.raw_set("arshift", lua.create_function(shift(|x, n| x >> n))?)?;
    t.raw_set(
        "rol",
        lua.create_function(shift(|x, n| (x as u32).rotate_left(n) as i32))?,
    )?;
    t.raw_set(
        "ror",
        lua.create_function(shift(|x, n| (x as u32).rotate_right(n) as i32))?,
    )?;
    t.raw_set(
        "bswap",
        lua.create_function(
            |_, a: MultiValue| Ok((arg(&a, 0)? as u32).swap_bytes() as i32 as f64),
        )?,
    )?;
    t.raw_set(
        "tohex",
        lua.create_function(|_, a: MultiValue| {
            let x = arg(&a, 0)? as u32;
            let n = match a.get(1) {
                None | Some(Value::Nil) => 8,
                Some(v) => tobit(v)?,
            };
            let upper = n < 0;
            let digits = n.unsigned_abs().clamp(1, 8) as usize;
            let masked = if digits == 8 {
                x
            } else {
                x & ((1u32 << (4 * digits)) - 1)
            };
            Ok(if upper {
                format!("{masked:0digits$X}")
            } else {
                format!("{masked:0digits$x}")
            })
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
