//! Bitmaps: `SETBIT key offset value`, `GETBIT key offset`,
//! `BITCOUNT key [start end [BYTE|BIT]]`, `BITPOS key bit [start [end [BYTE|BIT]]]` and
//! `BITOP AND|OR|XOR|NOT destkey key [key ...]`, on string values as Redis 7.0 does them.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::registry::flags::{READ, READ_FAST, WRITE};
use crate::cmd::registry::{none, one, Replicated, Spec, Touches, ONE_KEY};
use crate::cmd::strings::{store_keep_ttl, MAX_STRING};
use crate::cmd::{Command, Ctx, Request};
use crate::resp::args::{parse_i64, syntax_error, NOT_INTEGER};
use crate::resp::{Args, Reply};
use crate::state::{notify, Keyspace};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new("setbit", 4, WRITE, ONE_KEY, parse_setbit)
        .key_specs("RW,access,update@i1/r0,1,0")
        .args("key:key offset:integer value:integer").docs(
        "Set or clear one bit of a string",
        "2.2.0",
        "bitmap",
    ),
    Spec::new("getbit", 3, READ_FAST, ONE_KEY, parse_read)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key offset:integer").docs(
        "Return one bit of a string",
        "2.2.0",
        "bitmap",
    ),
    Spec::new("bitcount", -2, READ, ONE_KEY, parse_read)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key index@{start:integer end:integer index_unit@(BYTE|BIT)?}?").docs(
        "Count the set bits of a string, or of a range of it",
        "2.6.0",
        "bitmap",
    ),
    Spec::new("bitpos", -3, READ, ONE_KEY, parse_read)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key bit:integer index@{start:integer end_index@{end:integer index_unit@(BYTE|BIT)?}?}?").docs(
        "Find the first set or clear bit of a string",
        "2.8.7",
        "bitmap",
    ),
    Spec::new("bitop", -4, WRITE, (2, -1, 1), parse_bitop)
        .key_specs("OW,update@i2/r0,1,0 RO,access@i3/r-1,1,0")
        .args("operation destkey:key key:key*").docs(
        "Combine strings bit by bit into a destination key",
        "2.6.0",
        "bitmap",
    ),
];

/// Redis's refusal of a bit offset.
pub(crate) const BAD_OFFSET: &str = "ERR bit offset is not an integer or out of range";
const BAD_BIT: &str = "ERR bit is not an integer or out of range";

/// SETBIT.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetBit {
    /// The key.
    pub key: Bytes,
    /// The bit offset (checked against Redis's limit).
    pub offset: u64,
    /// The new bit.
    pub on: bool,
}

/// What a bitmap read asks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BitReadOp {
    /// GETBIT offset.
    Get(u64),
    /// BITCOUNT, with its range (start, end, in bits) if given.
    Count(Option<(i64, i64, bool)>),
    /// BITPOS and its arguments after the key, as sent: Redis reads the key before it
    /// parses the range.
    Pos(Vec<Bytes>),
}

/// GETBIT, BITCOUNT and BITPOS.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BitRead {
    /// The key.
    pub key: Bytes,
    /// What to read.
    pub op: BitReadOp,
}

/// A BITOP operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BitOpKind {
    /// AND.
    And,
    /// OR.
    Or,
    /// XOR.
    Xor,
    /// NOT (one source).
    Not,
}

/// BITOP.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BitOp {
    /// The operation.
    pub op: BitOpKind,
    /// Where the result goes.
    pub dest: Bytes,
    /// The source keys.
    pub keys: Vec<Bytes>,
}

/// Redis's `getBitOffsetFromArgument` for SETBIT and GETBIT.
fn bit_offset(raw: &[u8]) -> Result<u64, Reply> {
    offset_in_range(parse_i64(raw).ok_or_else(|| Reply::err(BAD_OFFSET))?)
}

/// Redis's range check of a bit offset: not negative, and inside a string of at most
/// [`MAX_STRING`] bytes (BITFIELD's `#n` offsets are checked after the multiplication).
pub(crate) fn offset_in_range(n: i64) -> Result<u64, Reply> {
    if n >= 0 && ((n as u64) >> 3) < MAX_STRING {
        Ok(n as u64)
    } else {
        Err(Reply::err(BAD_OFFSET))
    }
}

/// Parses SETBIT.
pub fn parse_setbit(args: &mut Args) -> Result<Request, Reply> {
    let key = args.arg()?;
    let offset = bit_offset(&args.arg()?)?;
    let on = match parse_i64(&args.arg()?) {
        Some(0) => false,
        Some(1) => true,
        _ => return Err(Reply::err(BAD_BIT)),
    };
    Ok(Request::Data(Command::SetBit(SetBit { key, offset, on })))
}

fn unit(raw: &[u8]) -> Result<bool, Reply> {
    if raw.eq_ignore_ascii_case(b"bit") {
        Ok(true)
    } else if raw.eq_ignore_ascii_case(b"byte") {
        Ok(false)
    } else {
        Err(syntax_error())
    }
}

fn int(raw: &[u8]) -> Result<i64, Reply> {
    parse_i64(raw).ok_or_else(|| Reply::err(NOT_INTEGER))
}

/// Parses GETBIT, BITCOUNT and BITPOS.
pub fn parse_read(args: &mut Args) -> Result<Request, Reply> {
    let name = args.name().to_string();
    let key = args.arg()?;
    let rest = args.rest();
    let op = match name.as_str() {
        "getbit" => BitReadOp::Get(bit_offset(&rest[0])?),
        "bitcount" => match rest.len() {
            0 => BitReadOp::Count(None),
            2 | 3 => {
                let (start, end) = (int(&rest[0])?, int(&rest[1])?);
                let bits = match rest.get(2) {
                    Some(u) => unit(u)?,
                    None => false,
                };
                BitReadOp::Count(Some((start, end, bits)))
            }
            _ => return Err(syntax_error()),
        },
        _ => BitReadOp::Pos(rest),
    };
    Ok(Request::Data(Command::BitRead(BitRead { key, op })))
}

/// Parses BITOP.
pub fn parse_bitop(args: &mut Args) -> Result<Request, Reply> {
    let op = match args.next_keyword()?.as_str() {
        "AND" => BitOpKind::And,
        "OR" => BitOpKind::Or,
        "XOR" => BitOpKind::Xor,
        "NOT" => BitOpKind::Not,
        _ => return Err(syntax_error()),
    };
    let dest = args.arg()?;
    let keys = args.rest();
    if op == BitOpKind::Not && keys.len() != 1 {
        return Err(Reply::err(
            "ERR BITOP NOT must be called with a single source key.",
        ));
    }
    Ok(Request::Data(Command::BitOp(BitOp { op, dest, keys })))
}

impl Replicated for SetBit {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["setbit"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Sets the bit, growing the string with zero bytes; replies with the old bit.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let (mut v, mut dirty) = match ks.get_str(&self.key, ctx.now) {
            Err(e) => return e.into(),
            Ok(None) => (Vec::new(), true),
            Ok(Some(v)) => (v.to_vec(), false),
        };
        let byte = (self.offset >> 3) as usize;
        let mask = 1u8 << (7 - (self.offset & 7));
        if v.len() <= byte {
            v.resize(byte + 1, 0);
            dirty = true;
        }
        let old = v[byte] & mask != 0;
        if self.on {
            v[byte] |= mask;
        } else {
            v[byte] &= !mask;
        }
        store_keep_ttl(ks, &self.key, Bytes::from(v), ctx);
        // Redis signals `setbit` only when the key was created or grown, or the bit changed.
        if dirty || old != self.on {
            ks.notify(notify::STRING, "setbit", &self.key);
        }
        Reply::Int(old as i64)
    }
}

fn get_bit(v: &[u8], pos: u64) -> bool {
    v.get((pos >> 3) as usize)
        .is_some_and(|b| b & (1 << (7 - (pos & 7))) != 0)
}

/// Redis's range clamping for BITCOUNT and BITPOS: `(start, end)` in the range's unit, or
/// None for an empty range.
fn clamp(total: i64, mut start: i64, mut end: i64) -> Option<(i64, i64)> {
    if start < 0 {
        start += total;
    }
    if end < 0 {
        end += total;
    }
    start = start.max(0);
    end = end.max(0);
    if end >= total {
        end = total - 1;
    }
    (start <= end).then_some((start, end))
}

/// BITCOUNT over `v`.
pub(crate) fn bitcount(v: &[u8], range: Option<(i64, i64, bool)>) -> i64 {
    let len = v.len() as i64;
    // The range in bits.
    let (start, end) = match range {
        None => (0, len * 8 - 1),
        Some((s, e, _)) if s < 0 && e < 0 && s > e => return 0,
        Some((s, e, false)) => match clamp(len, s, e) {
            None => return 0,
            Some((s, e)) => (s * 8, e * 8 + 7),
        },
        Some((s, e, true)) => match clamp(len * 8, s, e) {
            None => return 0,
            Some(r) => r,
        },
    };
    if start > end {
        return 0;
    }
    let (first, last) = ((start >> 3) as usize, (end >> 3) as usize);
    let mut count: i64 = v[first..=last].iter().map(|b| b.count_ones() as i64).sum();
    // Take off the bits of the edge bytes that are outside the range.
    let head = !((1u16 << (8 - (start & 7))) - 1) as u8;
    let tail = ((1u16 << (7 - (end & 7))) - 1) as u8;
    count -= (v[first] & head).count_ones() as i64;
    count -= (v[last] & tail).count_ones() as i64;
    count
}

/// BITPOS over `v` for the arguments after the bit: Redis's replies and errors.
fn bitpos(v: &[u8], bit: bool, range: &[Bytes]) -> Result<i64, Reply> {
    let len = v.len() as i64;
    if range.len() > 3 {
        return Err(syntax_error());
    }
    let (mut start, mut end, mut end_given, mut bits) = (0, len - 1, false, false);
    if !range.is_empty() {
        start = int(&range[0])?;
        if let Some(u) = range.get(2) {
            bits = unit(u)?;
        }
        end = match range.get(1) {
            Some(e) => {
                end_given = true;
                int(e)?
            }
            None if bits => len * 8 + 7,
            None => len - 1,
        };
    }
    let total = if bits { len * 8 } else { len };
    let Some((s, e)) = clamp(total, start, end) else {
        return Ok(-1);
    };
    let (from, to) = if bits { (s, e) } else { (s * 8, e * 8 + 7) };
    let mut pos = from as u64;
    let to = to as u64;
    while pos <= to {
        if pos & 7 == 0 && pos + 7 <= to {
            let byte = v[(pos >> 3) as usize];
            if (bit && byte == 0) || (!bit && byte == 0xff) {
                pos += 8;
                continue;
            }
        }
        if get_bit(v, pos) == bit {
            return Ok(pos as i64);
        }
        pos += 1;
    }
    // No clear bit inside the string: without an end, the string continues with zeros.
    Ok(if !bit && !end_given {
        to as i64 + 1
    } else {
        -1
    })
}

impl Replicated for BitRead {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["getbit", "bitcount", "bitpos"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        true
    }

    /// Answers the read at `now`.
    fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        if let BitReadOp::Pos(args) = &self.op {
            let bit = match int(&args[0]) {
                Err(e) => return e,
                Ok(b @ (0 | 1)) => b == 1,
                Ok(_) => return Reply::err("ERR The bit argument must be 1 or 0."),
            };
            return match ks.get_str(&self.key, now) {
                Err(e) => e.into(),
                Ok(None) => Reply::Int(if bit { -1 } else { 0 }),
                Ok(Some(v)) => bitpos(v, bit, &args[1..]).map_or_else(|e| e, Reply::Int),
            };
        }
        let v = match ks.get_str(&self.key, now) {
            Err(e) => return e.into(),
            Ok(None) => return Reply::Int(0),
            Ok(Some(v)) => v,
        };
        match &self.op {
            BitReadOp::Get(offset) => Reply::Int(get_bit(v, *offset) as i64),
            BitReadOp::Count(range) => Reply::Int(bitcount(v, *range)),
            BitReadOp::Pos(_) => Reply::err("ERR internal: bitpos"),
        }
    }
}

impl Replicated for BitOp {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((
            &["bitop"],
            std::iter::once(&self.dest)
                .chain(&self.keys)
                .map(|k| k.as_ref())
                .collect(),
            none(),
        ))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Computes the result; an empty result deletes the destination.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let mut srcs = Vec::with_capacity(self.keys.len());
        for k in &self.keys {
            match ks.get_str(k, ctx.now) {
                Err(e) => return e.into(),
                Ok(v) => srcs.push(v.cloned().unwrap_or_default()),
            }
        }
        let max = srcs.iter().map(Bytes::len).max().unwrap_or(0);
        if max == 0 {
            if ks.remove(&self.dest, ctx.now).is_some() {
                ks.notify(notify::GENERIC, "del", &self.dest);
            }
            return Reply::Int(0);
        }
        let byte = |s: &Bytes, j: usize| s.get(j).copied().unwrap_or(0);
        let out: Vec<u8> = (0..max)
            .map(|j| {
                let first = byte(&srcs[0], j);
                srcs[1..].iter().fold(
                    if self.op == BitOpKind::Not {
                        !first
                    } else {
                        first
                    },
                    |acc, s| match self.op {
                        BitOpKind::And => acc & byte(s, j),
                        BitOpKind::Or => acc | byte(s, j),
                        BitOpKind::Xor => acc ^ byte(s, j),
                        BitOpKind::Not => acc,
                    },
                )
            })
            .collect();
        ks.set_str(
            self.dest.clone(),
            Bytes::from(out),
            None,
            ctx.revision,
            ctx.now,
        );
        ks.notify(notify::STRING, "set", &self.dest);
        Reply::Int(max as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bitcount_ranges() {
        let v = b"foobar";
        assert_eq!(bitcount(v, None), 26);
        assert_eq!(bitcount(v, Some((0, 0, false))), 4);
        assert_eq!(bitcount(v, Some((1, 1, false))), 6);
        assert_eq!(bitcount(v, Some((5, 30, true))), 17);
        assert_eq!(bitcount(v, Some((-1, -2, false))), 0);
        assert_eq!(bitcount(b"", None), 0);
    }

    #[test]
    fn bitpos_edges() {
        let b = |s: &str| Bytes::copy_from_slice(s.as_bytes());
        assert_eq!(bitpos(&[0xff, 0xf0, 0], true, &[]), Ok(0));
        assert_eq!(bitpos(&[0xff, 0xf0, 0], false, &[]), Ok(12));
        assert_eq!(bitpos(&[0xff, 0xff], false, &[]), Ok(16));
        assert_eq!(bitpos(&[0xff, 0xff], false, &[b("0"), b("-1")]), Ok(-1));
        assert_eq!(
            bitpos(&[0, 0xff], true, &[b("7"), b("15"), b("BIT")]),
            Ok(8)
        );
        assert_eq!(bitpos(&[0, 0xff], true, &[b("2"), b("1")]), Ok(-1));
    }
}
