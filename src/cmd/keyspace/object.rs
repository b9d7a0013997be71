//! `OBJECT ENCODING|FREQ|IDLETIME|REFCOUNT key` and `OBJECT HELP`, and what `MEMORY USAGE`
//! shares with them: a key's value read through the normal read path (TYPE, then GET,
//! HGETALL or LRANGE, so linearizable and forwarded like any read), and what Redis 7.0 would
//! say about it.
//!
//! Palisade stores values in its own way, so these answers are the ones Redis 7.0 would give
//! for the same value: `int`, `embstr` (up to 44 bytes) or `raw` for strings; `quicklist` for
//! every list (Redis 7.2 would say `listpack` for small ones); `listpack` or `hashtable` for
//! hashes by the `hash-max-listpack-*` thresholds that CONFIG SET keeps (judged on the current
//! size: Redis never converts back); `intset` or `hashtable` for sets, as Redis 7.0 (which
//! has no listpack sets), by the default `set-max-intset-entries` of 512 (a CONFIG SET of it
//! is kept but not applied). No access is tracked: IDLETIME is 0, and FREQ answers
//! Redis's error for a policy that is not LFU (`maxmemory-policy` is never applied here).

use bytes::Bytes;

use crate::cmd::config::{help, sub_arity, subcommand, unknown_subcommand};
use crate::cmd::connection::ConnCmd;
use crate::cmd::registry::{Own, Spec, NO_KEYS};
use crate::cmd::Request;
use crate::resp::args::parse_i64;
use crate::resp::{Args, Reply};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[Spec::new("object", -2, &[], NO_KEYS, parse)
    .docs(
        "Describe how a key's value would be stored by Redis",
        "2.2.3",
        "generic",
    )
    .subcommands(SUBCOMMANDS)
    .own(&[Own::NotInMulti])];

/// OBJECT's subcommands (`object|name`): Redis's facts (`scripts/command-args.py
/// --subcommands object`).
const SUBCOMMANDS: &[Spec] = &[
    Spec::new("encoding", 3, &["readonly"], (2, 2, 1), parse)
        .docs(
            "Report the encoding Redis would use for a key's value",
            "2.2.3",
            "generic",
        )
        .args("key:key")
        .key_specs("RO@i2/r0,1,0"),
    Spec::new("freq", 3, &["readonly"], (2, 2, 1), parse)
        .docs(
            "Report a key's access frequency counter",
            "4.0.0",
            "generic",
        )
        .args("key:key")
        .key_specs("RO@i2/r0,1,0"),
    Spec::new("help", 2, &["loading", "stale"], NO_KEYS, parse).docs(
        "List the subcommands and what they take",
        "6.2.0",
        "generic",
    ),
    Spec::new("idletime", 3, &["readonly"], (2, 2, 1), parse)
        .docs(
            "Report the seconds since a key was last used",
            "2.2.3",
            "generic",
        )
        .args("key:key")
        .key_specs("RO@i2/r0,1,0"),
    Spec::new("refcount", 3, &["readonly"], (2, 2, 1), parse)
        .docs(
            "Report the reference count of a key's value",
            "2.2.3",
            "generic",
        )
        .args("key:key")
        .key_specs("RO@i2/r0,1,0"),
];

/// What is asked about a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Question {
    /// OBJECT ENCODING.
    Encoding,
    /// OBJECT FREQ.
    Freq,
    /// OBJECT IDLETIME.
    IdleTime,
    /// OBJECT REFCOUNT.
    RefCount,
    /// MEMORY USAGE.
    Memory,
    /// DEBUG OBJECT.
    Debug,
}

/// A question about one key, answered by the session after reading the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyQuery {
    /// The key.
    pub key: Bytes,
    /// The question.
    pub question: Question,
}

const HELP: &[&str] = &[
    "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the access frequency index of the <key>. The returned integer is",
    "    proportional to the logarithm of the recent access frequency of the key.",
    "IDLETIME <key>",
    "    Return the idle time of the <key>, that is the approximated number of",
    "    seconds elapsed since the last access to the key.",
    "REFCOUNT <key>",
    "    Return the number of references of the value associated with the specified",
    "    <key>.",
    "HELP",
    "    Prints this help.",
];

/// Parses OBJECT.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    let (raw, sub) = subcommand(args)?;
    let question = match sub.as_str() {
        "encoding" => Question::Encoding,
        "freq" => Question::Freq,
        "idletime" => Question::IdleTime,
        "refcount" => Question::RefCount,
        "help" if args.remaining() == 0 => return Ok(Request::Conn(ConnCmd::Command(help(HELP)))),
        "help" => return Err(sub_arity("object", &sub)),
        _ => return Err(unknown_subcommand(&raw, "OBJECT")),
    };
    if args.remaining() != 1 {
        return Err(sub_arity("object", &sub));
    }
    let key = args.arg()?;
    Ok(Request::Conn(ConnCmd::KeyInfo(KeyQuery { key, question })))
}

/// A value as read back through the read path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// A string.
    Str(Bytes),
    /// A hash's fields and values.
    Hash(Vec<(Bytes, Bytes)>),
    /// A list's elements.
    List(Vec<Bytes>),
    /// A set's members.
    Set(Vec<Bytes>),
    /// A sorted set's members and scores (as ZRANGE WITHSCORES formats them).
    ZSet(Vec<(Bytes, Bytes)>),
}

/// The reads that fetch a value of type `kind` (TYPE's reply), or None for a missing key.
pub fn value_read(kind: &str, key: &Bytes) -> Option<Vec<Bytes>> {
    let argv = |words: &[&'static str]| {
        let mut v: Vec<Bytes> = vec![Bytes::from_static(words[0].as_bytes()), key.clone()];
        v.extend(words[1..].iter().map(|w| Bytes::from_static(w.as_bytes())));
        v
    };
    match kind {
        "string" => Some(argv(&["GET"])),
        "hash" => Some(argv(&["HGETALL"])),
        "list" => Some(argv(&["LRANGE", "0", "-1"])),
        "set" => Some(argv(&["SMEMBERS"])),
        "zset" => Some(argv(&["ZRANGE", "0", "-1", "WITHSCORES"])),
        _ => None,
    }
}

fn bulks(items: Vec<Reply>) -> Option<Vec<Bytes>> {
    items
        .into_iter()
        .map(|r| match r {
            Reply::Bulk(b) => Some(b),
            _ => None,
        })
        .collect()
}

impl Value {
    /// The value in a reply to [`value_read`]'s command for `kind` (None if the key changed
    /// type or vanished in between).
    pub fn from_reply(kind: &str, reply: Reply) -> Option<Value> {
        match (kind, reply) {
            ("string", Reply::Bulk(b)) => Some(Value::Str(b)),
            ("hash", Reply::Map(pairs)) if !pairs.is_empty() => {
                let flat = pairs.into_iter().flat_map(|(k, v)| [k, v]).collect();
                Value::from_reply("hash", Reply::Array(flat))
            }
            ("hash", Reply::Array(items)) if !items.is_empty() => {
                let flat = bulks(items)?;
                let pairs = flat
                    .chunks(2)
                    .filter(|c| c.len() == 2)
                    .map(|c| (c[0].clone(), c[1].clone()));
                Some(Value::Hash(pairs.collect()))
            }
            ("list", Reply::Array(items)) if !items.is_empty() => Some(Value::List(bulks(items)?)),
            ("set", Reply::Set(items) | Reply::Array(items)) if !items.is_empty() => {
                Some(Value::Set(bulks(items)?))
            }
            ("zset", Reply::Pairs(pairs)) if !pairs.is_empty() => {
                let pairs = pairs.into_iter().map(|(m, s)| match (m, s) {
                    (Reply::Bulk(m), Reply::Double(d)) => {
                        Some((m, Bytes::from(crate::resp::frame::format_double(d))))
                    }
                    _ => None,
                });
                Some(Value::ZSet(pairs.collect::<Option<Vec<_>>>()?))
            }
            _ => None,
        }
    }
}

/// The CONFIG thresholds that decide a compact encoding, as Redis's.
#[derive(Debug, Clone, Copy)]
pub struct Thresholds {
    /// `hash-max-listpack-entries`.
    pub hash_entries: i64,
    /// `hash-max-listpack-value`.
    pub hash_value: i64,
    /// `list-max-listpack-size` (negative: a byte limit, -1 = 4 KiB ... -5 = 64 KiB).
    pub list_size: i64,
    /// `zset-max-listpack-entries`.
    pub zset_entries: i64,
    /// `zset-max-listpack-value` (the longest member).
    pub zset_value: i64,
}

/// OBJECT FREQ's error: no LFU policy is ever applied here.
pub const NOT_LFU: &str = "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.";

/// Redis's embstr limit: strings up to this long are one allocation with their header.
const EMBSTR_MAX: usize = 44;
/// Redis shares the integer objects 0 to 9999 (OBJ_SHARED_INTEGERS).
const SHARED_INTEGERS: i64 = 10_000;

fn as_int(s: &[u8]) -> Option<i64> {
    parse_i64(s)
}

/// A listpack entry's size: its encoding byte(s), its data and its back-length.
fn lp_entry(s: &[u8]) -> usize {
    let body = match as_int(s) {
        Some(n) if (0..128).contains(&n) => 1,
        Some(n) if (-4096..4096).contains(&n) => 2,
        Some(n) if (-32768..32768).contains(&n) => 3,
        Some(n) if (-(1 << 23)..(1 << 23)).contains(&n) => 4,
        Some(n) if i32::try_from(n).is_ok() => 5,
        Some(_) => 9,
        None if s.len() < 64 => 1 + s.len(),
        None if s.len() < 4096 => 2 + s.len(),
        None => 5 + s.len(),
    };
    let back = match body {
        0..=127 => 1,
        128..=16_382 => 2,
        16_383..=2_097_150 => 3,
        _ => 4,
    };
    body + back
}

/// The bytes of a listpack of these entries (6 header bytes, the entries, an end byte).
fn listpack<'a>(entries: impl Iterator<Item = &'a Bytes>) -> usize {
    7 + entries.map(|e| lp_entry(e)).sum::<usize>()
}

/// jemalloc's size class for an allocation of `n` bytes (four classes per doubling).
pub fn malloc_size(n: usize) -> usize {
    match n {
        0..=8 => 8,
        9..=16 => 16,
        17..=128 => n.div_ceil(16) * 16,
        _ => {
            let step = n.next_power_of_two() / 8;
            n.div_ceil(step) * step
        }
    }
}

/// An sds string's allocation: its header (by length), the bytes and a NUL.
fn sds(len: usize) -> usize {
    let header = match len {
        0..=255 => 3,
        256..=65_535 => 5,
        65_536..=0xFFFF_FFFF => 9,
        _ => 17,
    };
    malloc_size(header + len + 1)
}

/// Redis's robj header.
const ROBJ: usize = 16;
/// A main-dictionary entry.
const DICT_ENTRY: usize = 24;

fn hash_fits(pairs: &[(Bytes, Bytes)], t: &Thresholds) -> bool {
    let short = |b: &Bytes| b.len() as i64 <= t.hash_value;
    pairs.len() as i64 <= t.hash_entries && pairs.iter().all(|(k, v)| short(k) && short(v))
}

fn zset_fits(pairs: &[(Bytes, Bytes)], t: &Thresholds) -> bool {
    pairs.len() as i64 <= t.zset_entries
        && pairs.iter().all(|(m, _)| m.len() as i64 <= t.zset_value)
}

impl Value {
    /// OBJECT ENCODING's answer.
    pub fn encoding(&self, t: &Thresholds) -> &'static str {
        match self {
            Value::Str(s) if s.len() <= 20 && as_int(s).is_some() => "int",
            Value::Str(s) if s.len() <= EMBSTR_MAX => "embstr",
            Value::Str(_) => "raw",
            Value::Hash(p) if hash_fits(p, t) => "listpack",
            Value::Hash(_) => "hashtable",
            // Redis 7.0 (the version Palisade answers as) stores every list as a quicklist;
            // 7.2 would say listpack for small ones.
            Value::List(_) => "quicklist",
            Value::Set(m) if crate::cmd::sets::is_intset(m.iter()) => "intset",
            Value::Set(_) => "hashtable",
            Value::ZSet(p) if zset_fits(p, t) => "listpack",
            Value::ZSet(_) => "skiplist",
        }
    }

    /// OBJECT REFCOUNT's answer: shared small integers say INT_MAX, as in Redis.
    pub fn refcount(&self) -> i64 {
        match self {
            Value::Str(s) if as_int(s).is_some_and(|n| (0..SHARED_INTEGERS).contains(&n)) => {
                i32::MAX as i64
            }
            _ => 1,
        }
    }

    /// MEMORY USAGE's answer: what Redis 7 on jemalloc would report for `key` holding this
    /// value (key, dictionary entry, object header and the value's allocations).
    pub fn memory_usage(&self, key: &[u8], t: &Thresholds) -> i64 {
        let value = match (self, self.encoding(t)) {
            (_, "int") => ROBJ,
            (Value::Str(s), "embstr") => malloc_size(ROBJ + 3 + s.len() + 1),
            (Value::Str(s), _) => ROBJ + sds(s.len()),
            (Value::Hash(p), "listpack") => {
                ROBJ + malloc_size(listpack(p.iter().flat_map(|(k, v)| [k, v])))
            }
            (Value::Hash(p), _) => {
                let table = 8 * p.len().next_power_of_two().max(4);
                let entries: usize = p
                    .iter()
                    .map(|(k, v)| DICT_ENTRY + sds(k.len()) + sds(v.len()))
                    .sum();
                ROBJ + 56 + malloc_size(table) + entries
            }
            (Value::List(items), _) => {
                // quicklist nodes of about 8 KiB of listpack each.
                let bytes = listpack(items.iter());
                let nodes = bytes.div_ceil(8192).max(1);
                ROBJ + 40 + nodes * (32 + malloc_size(bytes.div_ceil(nodes)))
            }
            (Value::Set(m), "intset") => {
                // A header (encoding, length) and every member at the widest width needed.
                let width = m
                    .iter()
                    .filter_map(|v| as_int(v))
                    .map(|n| {
                        if i16::try_from(n).is_ok() {
                            2
                        } else if i32::try_from(n).is_ok() {
                            4
                        } else {
                            8
                        }
                    })
                    .max()
                    .unwrap_or(2);
                ROBJ + malloc_size(8 + width * m.len())
            }
            (Value::Set(m), _) => {
                let table = 8 * m.len().next_power_of_two().max(4);
                // A member is an `sdsdup` copy: a 1-byte sds5 header below 32 bytes.
                let member = |n: usize| if n < 32 { malloc_size(n + 2) } else { sds(n) };
                let entries: usize = m.iter().map(|k| DICT_ENTRY + member(k.len())).sum();
                ROBJ + 56 + malloc_size(table) + entries
            }
            (Value::ZSet(p), "listpack") => {
                ROBJ + malloc_size(listpack(p.iter().flat_map(|(m, s)| [m, s])))
            }
            (Value::ZSet(p), _) => {
                // The zset struct, its dict (table and entries) and its skiplist: a header
                // node of 32 levels, then one node per member (score, member, backward
                // pointer and about 1.33 levels) and the member's sds.
                let table = 8 * p.len().next_power_of_two().max(4);
                let members: usize = p
                    .iter()
                    .map(|(m, _)| DICT_ENTRY + malloc_size(24 + 16 * 4 / 3) + sds(m.len()))
                    .sum();
                ROBJ + 16 + 56 + malloc_size(table) + 32 + malloc_size(24 + 32 * 16) + members
            }
        };
        (sds(key.len()) + DICT_ENTRY + value) as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Thresholds = Thresholds {
        hash_entries: 512,
        hash_value: 64,
        list_size: -2,
        zset_entries: 128,
        zset_value: 64,
    };

    fn s(v: &str) -> Value {
        Value::Str(Bytes::copy_from_slice(v.as_bytes()))
    }

    /// The figures of Redis 7.0.15 (Debian 12, jemalloc) for the same keys.
    #[test]
    fn answers_as_redis() {
        let a44 = "a".repeat(44);
        let a45 = "a".repeat(45);
        for (v, enc, mem) in [
            (s("123"), "int", 48),
            (s("10000"), "int", 48),
            (s("v"), "embstr", 64),
            (s(&a44), "embstr", 96),
            (s(&a45), "raw", 112),
            (s("0123"), "embstr", 64),
            (s("12345678901234567890"), "embstr", 80),
        ] {
            assert_eq!(v.encoding(&T), enc, "{v:?}");
            assert_eq!(v.memory_usage(b"k", &T), mem, "{v:?}");
        }
        let h = Value::Hash(vec![
            (Bytes::from("a"), Bytes::from("1")),
            (Bytes::from("b"), Bytes::from("2")),
        ]);
        assert_eq!((h.encoding(&T), h.memory_usage(b"h", &T)), ("listpack", 80));
        let h = Value::Hash(vec![(Bytes::from("f"), Bytes::from("x".repeat(65)))]);
        assert_eq!(
            (h.encoding(&T), h.memory_usage(b"hh", &T)),
            ("hashtable", 248)
        );
        let b = |v: &[&str]| {
            v.iter()
                .map(|s| Bytes::copy_from_slice(s.as_bytes()))
                .collect()
        };
        let ints = Value::Set(b(&["3", "1", "2"]));
        assert_eq!(
            (ints.encoding(&T), ints.memory_usage(b"i", &T)),
            ("intset", 64)
        );
        let mixed = Value::Set(b(&["1", "2", "a"]));
        assert_eq!(
            (mixed.encoding(&T), mixed.memory_usage(b"big", &T)),
            ("hashtable", 232)
        );
        let one = Value::Set(b(&["hello"]));
        assert_eq!(one.memory_usage(b"one", &T), 168);
        assert_eq!(s("123").refcount(), i32::MAX as i64);
        assert_eq!(s("10000").refcount(), 1);
    }

    #[test]
    fn thresholds_decide_the_encoding() {
        let big = Value::Hash(vec![(Bytes::from("f"), Bytes::from("x".repeat(65)))]);
        assert_eq!(big.encoding(&T), "hashtable");
        let list = Value::List((0..3).map(|i| Bytes::from(i.to_string())).collect());
        assert_eq!(list.encoding(&T), "quicklist");
    }

    #[test]
    fn replies_become_values() {
        let flat = Reply::Array(vec![Reply::text("f"), Reply::text("v")]);
        assert_eq!(
            Value::from_reply("hash", flat),
            Some(Value::Hash(vec![(Bytes::from("f"), Bytes::from("v"))]))
        );
        assert_eq!(Value::from_reply("string", Reply::Nil), None);
        assert_eq!(Value::from_reply("list", Reply::Array(vec![])), None);
    }
}
