//! Integer fields inside strings:
//! `BITFIELD key [GET type offset] [SET type offset value] [INCRBY type offset increment]
//! [OVERFLOW WRAP|SAT|FAIL] ...` and `BITFIELD_RO key [GET type offset ...]`, as Redis 7.0
//! does them (its `bitfieldGeneric`).
//!
//! A type is `i1`..`i64` or `u1`..`u63`; an offset is in bits, or `#n` for the n-th field of
//! that width. Bits are numbered as SETBIT numbers them (bit 0 is the top bit of byte 0).
//! A BITFIELD whose operations are all GETs is the same read as BITFIELD_RO.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::bitops::{offset_in_range, BAD_OFFSET};
use crate::cmd::keyspec::{KeyFlags, KeyRef};
use crate::cmd::registry::flags::{READ_FAST, WRITE};
use crate::cmd::registry::{none, one, Replicated, Spec, Touches, ONE_KEY};
use crate::cmd::strings::store_keep_ttl;
use crate::cmd::{Command, Ctx, Request};
use crate::resp::args::{parse_i64, syntax_error, NOT_INTEGER};
use crate::resp::{Args, Reply};
use crate::state::{notify, Keyspace};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new("bitfield", -2, WRITE, ONE_KEY, parse_bitfield)
        .key_specs("RW,access,update,variable_flags@i1/r0,1,0")
        .getkeys(bitfield_keys)
        .args("key:key operation@(encoding_offset@GET={encoding offset:integer}|write@{wrap_sat_fail@OVERFLOW=(WRAP|SAT|FAIL)? write_operation@(encoding_offset_value@SET={encoding offset:integer value:integer}|encoding_offset_increment@INCRBY={encoding offset:integer increment:integer})})?*").docs(
        "Read, set or increment integer fields of any width inside a string",
        "3.2.0",
        "bitmap",
    ),
    Spec::new("bitfield_ro", -2, READ_FAST, ONE_KEY, parse_bitfield)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key encoding_offset@GET={encoding offset:integer}?*+").docs(
        "Read integer fields of any width inside a string",
        "6.0.0",
        "bitmap",
    ),
];

const BAD_TYPE: &str =
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";

/// One integer field: its type and where it starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Field {
    /// Signed (`i`) or unsigned (`u`).
    pub signed: bool,
    /// Width in bits: 1..=64 signed, 1..=63 unsigned.
    pub bits: u8,
    /// The first bit, counted from the top bit of the first byte.
    pub offset: u64,
}

/// What SET and INCRBY do with a result that does not fit the field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Overflow {
    /// Keep the low bits (two's complement for signed fields): the default.
    Wrap,
    /// Clamp to the field's minimum or maximum.
    Sat,
    /// Write nothing and reply nil for that operation.
    Fail,
}

/// One BITFIELD operation, with the OVERFLOW mode in force where it was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FieldOp {
    /// GET: the field's value.
    Get(Field),
    /// SET: writes the value, replies with the old one.
    Set(Field, i64, Overflow),
    /// INCRBY: adds the increment, replies with the new value.
    IncrBy(Field, i64, Overflow),
}

/// BITFIELD with at least one SET or INCRBY.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BitField {
    /// The key.
    pub key: Bytes,
    /// The operations, in order.
    pub ops: Vec<FieldOp>,
}

/// BITFIELD_RO, and BITFIELD with only GETs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BitFieldRo {
    /// The key.
    pub key: Bytes,
    /// The fields to read, in order.
    pub fields: Vec<Field>,
}

/// Redis's `getBitfieldTypeFromArgument`. The width is read up to a NUL byte, as C's
/// `strlen` does.
fn field_type(raw: &[u8]) -> Result<(bool, u8), Reply> {
    let signed = match raw.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return Err(Reply::err(BAD_TYPE)),
    };
    let width = raw[1..].split(|&b| b == 0).next().unwrap_or_default();
    match parse_i64(width) {
        Some(n) if n >= 1 && n <= if signed { 64 } else { 63 } => Ok((signed, n as u8)),
        _ => Err(Reply::err(BAD_TYPE)),
    }
}

/// Redis's `getBitOffsetFromArgument` with `#n` allowed: `#n` is `n * bits` (wrapping as
/// Redis's C multiplication does, so a huge `#n` becomes an out-of-range offset).
fn field_offset(raw: &[u8], bits: u8) -> Result<u64, Reply> {
    let (hash, digits) = match raw.strip_prefix(b"#") {
        Some(d) => (true, d),
        None => (false, raw),
    };
    let n = parse_i64(digits).ok_or_else(|| Reply::err(BAD_OFFSET))?;
    offset_in_range(if hash { n.wrapping_mul(bits as i64) } else { n })
}

fn overflow_mode(raw: &[u8]) -> Result<Overflow, Reply> {
    if raw.eq_ignore_ascii_case(b"wrap") {
        Ok(Overflow::Wrap)
    } else if raw.eq_ignore_ascii_case(b"sat") {
        Ok(Overflow::Sat)
    } else if raw.eq_ignore_ascii_case(b"fail") {
        Ok(Overflow::Fail)
    } else {
        Err(Reply::err("ERR Invalid OVERFLOW type specified"))
    }
}

/// Parses the subcommands after the key, in Redis's order of checks: a subcommand needs
/// all its arguments present (else a syntax error), then a valid type, offset and value.
fn parse_ops(rest: &[Bytes]) -> Result<Vec<FieldOp>, Reply> {
    let mut ops = Vec::new();
    let mut mode = Overflow::Wrap;
    let mut j = 0;
    while j < rest.len() {
        let left = rest.len() - j - 1;
        let sub = &rest[j];
        let is =
            |name: &str, need: usize| sub.eq_ignore_ascii_case(name.as_bytes()) && left >= need;
        if is("overflow", 1) {
            mode = overflow_mode(&rest[j + 1])?;
            j += 2;
            continue;
        }
        let write = if is("get", 2) {
            false
        } else if is("set", 3) || is("incrby", 3) {
            true
        } else {
            return Err(syntax_error());
        };
        let (signed, bits) = field_type(&rest[j + 1])?;
        let offset = field_offset(&rest[j + 2], bits)?;
        let field = Field {
            signed,
            bits,
            offset,
        };
        if !write {
            ops.push(FieldOp::Get(field));
            j += 3;
            continue;
        }
        let value = parse_i64(&rest[j + 3]).ok_or_else(|| Reply::err(NOT_INTEGER))?;
        ops.push(if sub.eq_ignore_ascii_case(b"set") {
            FieldOp::Set(field, value, mode)
        } else {
            FieldOp::IncrBy(field, value, mode)
        });
        j += 4;
    }
    Ok(ops)
}

/// Parses BITFIELD and BITFIELD_RO. Only GETs make a read; BITFIELD_RO refuses the others
/// after the whole line has parsed, as Redis does.
pub fn parse_bitfield(args: &mut Args) -> Result<Request, Reply> {
    let ro = args.name() == "bitfield_ro";
    let key = args.arg()?;
    let ops = parse_ops(&args.rest())?;
    let gets: Option<Vec<Field>> = ops
        .iter()
        .map(|op| match op {
            FieldOp::Get(f) => Some(*f),
            _ => None,
        })
        .collect();
    match gets {
        Some(fields) => Ok(Request::Data(Command::BitFieldRo(BitFieldRo {
            key,
            fields,
        }))),
        None if ro => Err(Reply::err(
            "ERR BITFIELD_RO only supports the GET subcommand",
        )),
        None => Ok(Request::Data(Command::BitField(BitField { key, ops }))),
    }
}

/// BITFIELD's key and its flags (Redis's `bitfieldGetKeys`): read-only for GETs alone.
fn bitfield_keys(argv: &[Bytes]) -> Vec<KeyRef> {
    let flags = if reads_only(argv) {
        KeyFlags::RO.with(KeyFlags::ACCESS)
    } else {
        KeyFlags::RW.with(KeyFlags::ACCESS).with(KeyFlags::UPDATE)
    };
    vec![KeyRef::arg(1, flags)]
}

/// True if a BITFIELD command line (`argv[0]` is the name) only reads its key: Redis's
/// `bitfieldGetKeys`, which gives the key read-only access for ACLs when every subcommand
/// is a GET or an OVERFLOW (anything it does not recognise counts as a write).
pub(crate) fn reads_only(argv: &[Bytes]) -> bool {
    let mut j = 2;
    while j < argv.len() {
        let left = argv.len() - j - 1;
        let sub = &argv[j];
        if sub.eq_ignore_ascii_case(b"get") && left >= 2 {
            j += 3;
        } else if sub.eq_ignore_ascii_case(b"overflow") && left >= 1 {
            j += 2;
        } else {
            return false;
        }
    }
    true
}

/// The field's bits as an unsigned number; bits past the end of `v` read as zeros.
fn get_unsigned(v: &[u8], f: Field) -> u64 {
    (f.offset..f.offset + f.bits as u64).fold(0, |acc, pos| {
        let byte = v.get((pos >> 3) as usize).copied().unwrap_or(0);
        (acc << 1) | ((byte >> (7 - (pos & 7))) & 1) as u64
    })
}

/// The field's value, sign-extended for a signed field.
fn get_signed(v: &[u8], f: Field) -> i64 {
    let u = get_unsigned(v, f);
    let bits = f.bits as u32;
    if bits < 64 && u & (1 << (bits - 1)) != 0 {
        (u | (u64::MAX << bits)) as i64
    } else {
        u as i64
    }
}

/// Writes the low `bits` of `value` into the field; `v` must already cover it.
fn put(v: &mut [u8], f: Field, value: u64) {
    for j in 0..f.bits as u64 {
        let pos = f.offset + j;
        let mask = 1u8 << (7 - (pos & 7));
        let byte = &mut v[(pos >> 3) as usize];
        if value & (1 << (f.bits as u64 - 1 - j)) != 0 {
            *byte |= mask;
        } else {
            *byte &= !mask;
        }
    }
}

/// `value + incr` in an unsigned field of `bits` bits, under `mode`: None when it does not
/// fit and the mode is FAIL. Redis's `checkUnsignedBitfieldOverflow`, with its wrapping
/// arithmetic (a negative SET value is a huge unsigned one, so it overflows upwards).
fn unsigned_add(value: u64, incr: i64, bits: u8, mode: Overflow) -> Option<u64> {
    let max = (1u64 << bits) - 1;
    let max_incr = max.wrapping_sub(value) as i64;
    let min_incr = (value as i64).wrapping_neg();
    let limit = if value > max || (incr > 0 && incr > max_incr) {
        max
    } else if incr < 0 && incr < min_incr {
        0
    } else {
        return Some(value.wrapping_add(incr as u64));
    };
    match mode {
        Overflow::Wrap => Some(value.wrapping_add(incr as u64) & max),
        Overflow::Sat => Some(limit),
        Overflow::Fail => None,
    }
}

/// `value + incr` in a signed field: Redis's `checkSignedBitfieldOverflow`, including its
/// wrapping comparisons (kept so that replies match Redis's even at the extremes).
fn signed_add(value: i64, incr: i64, bits: u8, mode: Overflow) -> Option<i64> {
    let wide = bits == 64;
    let max = if wide {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    let max_incr = (max as u64).wrapping_sub(value as u64) as i64;
    let min_incr = min.wrapping_sub(value);
    let limit =
        if value > max || (!wide && incr > max_incr) || (value >= 0 && incr > 0 && incr > max_incr)
        {
            max
        } else if value < min
            || (!wide && incr < min_incr)
            || (value < 0 && incr < 0 && incr < min_incr)
        {
            min
        } else {
            return Some(value.wrapping_add(incr));
        };
    match mode {
        Overflow::Wrap => {
            let sum = (value as u64).wrapping_add(incr as u64);
            Some(if wide {
                sum as i64
            } else if sum & (1 << (bits - 1)) != 0 {
                (sum | (u64::MAX << bits)) as i64
            } else {
                (sum & !(u64::MAX << bits)) as i64
            })
        }
        Overflow::Sat => Some(limit),
        Overflow::Fail => None,
    }
}

/// Runs one SET or INCRBY on `v`: the reply (nil for a FAIL overflow) and whether the
/// field's value changed.
fn write_field(v: &mut [u8], f: Field, arg: i64, incr: bool, mode: Overflow) -> (Reply, bool) {
    let (old, new) = if f.signed {
        let old = get_signed(v, f);
        let new = if incr {
            signed_add(old, arg, f.bits, mode)
        } else {
            signed_add(arg, 0, f.bits, mode)
        };
        (old as u64, new.map(|n| n as u64))
    } else {
        let old = get_unsigned(v, f);
        let new = if incr {
            unsigned_add(old, arg, f.bits, mode)
        } else {
            unsigned_add(arg as u64, 0, f.bits, mode)
        };
        (old, new)
    };
    let Some(new) = new else {
        return (Reply::Nil, false);
    };
    put(v, f, new);
    let shown = if incr { new } else { old };
    (Reply::Int(shown as i64), old != new)
}

/// A field's value as GET replies it.
fn read_field(v: &[u8], f: Field) -> Reply {
    Reply::Int(if f.signed {
        get_signed(v, f)
    } else {
        get_unsigned(v, f) as i64
    })
}

impl Replicated for BitField {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["bitfield"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Grows the string (creating the key) to cover every written field, then runs the
    /// operations in order. Redis signals `setbit` once, and only if the string grew or a
    /// field changed; a key created or grown only by FAIL operations is still stored (a new key
    /// gets its `new` event), without `setbit`.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let mut v = match ks.get_str(&self.key, ctx.now) {
            Err(e) => return e.into(),
            Ok(v) => v.map(|v| v.to_vec()).unwrap_or_default(),
        };
        let old_len = v.len();
        let highest = self
            .ops
            .iter()
            .filter_map(|op| match op {
                FieldOp::Set(f, ..) | FieldOp::IncrBy(f, ..) => Some(f.offset + f.bits as u64 - 1),
                FieldOp::Get(_) => None,
            })
            .max()
            .unwrap_or(0);
        let need = (highest >> 3) as usize + 1;
        if v.len() < need {
            v.resize(need, 0);
        }
        // A new key always grows: it starts with the bytes that reach the highest field.
        let grew = v.len() > old_len;
        let mut changed = false;
        let replies = self
            .ops
            .iter()
            .map(|op| match *op {
                FieldOp::Get(f) => read_field(&v, f),
                FieldOp::Set(f, value, mode) | FieldOp::IncrBy(f, value, mode) => {
                    let incr = matches!(op, FieldOp::IncrBy(..));
                    let (reply, diff) = write_field(&mut v, f, value, incr, mode);
                    changed |= reply != Reply::Nil && (grew || diff);
                    reply
                }
            })
            .collect();
        if grew || changed {
            store_keep_ttl(ks, &self.key, Bytes::from(v), ctx);
        }
        if changed {
            ks.notify(notify::STRING, "setbit", &self.key);
        }
        Reply::Array(replies)
    }
}

impl Replicated for BitFieldRo {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["bitfield_ro", "bitfield"], one(&self.key), none()))
    }

    /// Only GETs: BITFIELD's row finds its key read-only too (`bitfield_keys`).
    fn key_flags(&self) -> Option<Vec<KeyFlags>> {
        Some(vec![KeyFlags::RO.with(KeyFlags::ACCESS)])
    }

    fn is_read(&self) -> bool {
        true
    }

    /// Reads the fields; a missing key reads as zeros.
    fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        match ks.get_str(&self.key, now) {
            Err(e) => e.into(),
            Ok(v) => {
                let v: &[u8] = v.map(|v| v.as_ref()).unwrap_or_default();
                Reply::Array(self.fields.iter().map(|f| read_field(v, *f)).collect())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(signed: bool, bits: u8, offset: u64) -> Field {
        Field {
            signed,
            bits,
            offset,
        }
    }

    #[test]
    fn fields_read_and_write_msb_first() {
        // Redis's example: u5 23 at offset 7 in zeros is 00000001|01110000.
        let mut v = vec![0u8; 2];
        put(&mut v, f(false, 5, 7), 23);
        assert_eq!(v, [0b0000_0001, 0b0111_0000]);
        assert_eq!(get_unsigned(&v, f(false, 5, 7)), 23);
        assert_eq!(get_signed(&v, f(true, 5, 7)), 23 - 32);
        assert_eq!(get_unsigned(&[0xff], f(false, 8, 4)), 0xf0);
    }

    #[test]
    fn overflow_modes() {
        use Overflow::*;
        assert_eq!(unsigned_add(250, 10, 8, Wrap), Some(4));
        assert_eq!(unsigned_add(250, 10, 8, Sat), Some(255));
        assert_eq!(unsigned_add(250, 10, 8, Fail), None);
        assert_eq!(unsigned_add(5, -10, 8, Sat), Some(0));
        assert_eq!(unsigned_add(-1i64 as u64, 0, 8, Sat), Some(255));
        assert_eq!(signed_add(120, 10, 8, Wrap), Some(-126));
        assert_eq!(signed_add(-120, -10, 8, Sat), Some(-128));
        assert_eq!(signed_add(i64::MAX, 1, 64, Wrap), Some(i64::MIN));
        assert_eq!(signed_add(i64::MAX, 1, 64, Fail), None);
        // Redis's wrapping comparison: SET i8 to i64::MIN saturates upwards.
        assert_eq!(signed_add(i64::MIN, 0, 8, Sat), Some(127));
    }

    #[test]
    fn gets_only_read_the_key() {
        let line = crate::cmd::test_argv;
        assert!(reads_only(&line("BITFIELD k")));
        assert!(reads_only(&line(
            "BITFIELD k GET u8 0 OVERFLOW SAT get i8 #1"
        )));
        assert!(!reads_only(&line("BITFIELD k GET u8 0 SET u8 0 1")));
        assert!(!reads_only(&line("BITFIELD k GET u8")));
        assert!(!reads_only(&line("BITFIELD k INCRBY u8 0 1")));
    }

    #[test]
    fn types_and_offsets() {
        assert_eq!(field_type(b"i64"), Ok((true, 64)));
        assert_eq!(field_type(b"u63"), Ok((false, 63)));
        assert!(field_type(b"u64").is_err());
        assert!(field_type(b"i0").is_err());
        assert!(field_type(b"U8").is_err());
        assert!(field_type(b"").is_err());
        assert_eq!(field_offset(b"#3", 8), Ok(24));
        assert!(field_offset(b"#-1", 8).is_err());
        assert!(field_offset(b"#", 8).is_err());
        assert!(field_offset(b"4294967296", 8).is_err());
    }
}
