//! Editing lists in place: `LSET key index element`, `LINSERT key BEFORE|AFTER pivot
//! element`, `LREM key count element`, `LTRIM key start stop`, and the read
//! `LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len]`.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::registry::flags::{READ, WRITE};
use crate::cmd::registry::{none, one, Replicated, Spec, Touches, ONE_KEY};
use crate::cmd::{Command, Ctx, Request};
use crate::resp::args::{parse_i64, syntax_error, NOT_INTEGER};
use crate::resp::{Args, Reply};
use crate::state::{notify, Keyspace, List, Value};

const WRITE_SHRINK: &[&str] = &["write"];

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new("lset", 4, WRITE, ONE_KEY, parse_lset)
        .key_specs("RW,update@i1/r0,1,0")
        .args("key:key index:integer element")
        .docs("Replace the list element at an index", "1.0.0", "list"),
    Spec::new("linsert", 5, WRITE, ONE_KEY, parse_linsert)
        .key_specs("RW,insert@i1/r0,1,0")
        .args("key:key where@(BEFORE|AFTER) pivot element")
        .docs(
            "Insert an element before or after another element of a list",
            "2.2.0",
            "list",
        ),
    Spec::new("lrem", 4, WRITE_SHRINK, ONE_KEY, parse_lrem)
        .key_specs("RW,delete@i1/r0,1,0")
        .args("key:key count:integer element")
        .docs(
            "Remove elements equal to a value from a list",
            "1.0.0",
            "list",
        ),
    Spec::new("ltrim", 4, WRITE_SHRINK, ONE_KEY, parse_ltrim)
        .key_specs("RW,delete@i1/r0,1,0")
        .args("key:key start:integer stop:integer")
        .docs(
            "Keep only the elements of a list between two indexes",
            "1.0.0",
            "list",
        ),
    Spec::new("lpos", -3, READ, ONE_KEY, parse_lpos)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key element RANK=rank:integer? COUNT=num-matches:integer? MAXLEN=len:integer?")
        .docs(
            "Return the indexes of the list elements equal to a value",
            "6.0.6",
            "list",
        ),
];

/// LSET. The index stays raw: Redis answers "no such key" before it parses the index.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LSet {
    /// The key.
    pub key: Bytes,
    /// The index as given.
    pub index: Bytes,
    /// The new element.
    pub element: Bytes,
}

/// LINSERT.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LInsert {
    /// The key.
    pub key: Bytes,
    /// True for AFTER.
    pub after: bool,
    /// The element to insert next to (its first occurrence from the head).
    pub pivot: Bytes,
    /// The element inserted.
    pub element: Bytes,
}

/// LREM.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LRem {
    /// The key.
    pub key: Bytes,
    /// > 0: the first `count` from the head; < 0: from the tail; 0: all.
    pub count: i64,
    /// The element removed.
    pub element: Bytes,
}

/// LTRIM.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LTrim {
    /// The key.
    pub key: Bytes,
    /// First index kept.
    pub start: i64,
    /// Last index kept.
    pub stop: i64,
}

/// LPOS (a read).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LPos {
    /// The key.
    pub key: Bytes,
    /// The element searched for.
    pub element: Bytes,
    /// Which match comes first (negative: counted from the tail); never 0.
    pub rank: i64,
    /// COUNT: `None` for a single reply, `Some(0)` for all matches.
    pub count: Option<i64>,
    /// Compare at most this many elements (0: all).
    pub maxlen: i64,
}

/// Parses LSET.
pub fn parse_lset(args: &mut Args) -> Result<Request, Reply> {
    Ok(Request::Data(Command::LSet(LSet {
        key: args.arg()?,
        index: args.arg()?,
        element: args.arg()?,
    })))
}

/// Parses LINSERT.
pub fn parse_linsert(args: &mut Args) -> Result<Request, Reply> {
    let key = args.arg()?;
    let after = match args.next_keyword()?.as_str() {
        "BEFORE" => false,
        "AFTER" => true,
        _ => return Err(syntax_error()),
    };
    Ok(Request::Data(Command::LInsert(LInsert {
        key,
        after,
        pivot: args.arg()?,
        element: args.arg()?,
    })))
}

/// Parses LREM.
pub fn parse_lrem(args: &mut Args) -> Result<Request, Reply> {
    let key = args.arg()?;
    let count = args.next_i64()?;
    Ok(Request::Data(Command::LRem(LRem {
        key,
        count,
        element: args.arg()?,
    })))
}

/// Parses LTRIM.
pub fn parse_ltrim(args: &mut Args) -> Result<Request, Reply> {
    let key = args.arg()?;
    let start = args.next_i64()?;
    let stop = args.next_i64()?;
    Ok(Request::Data(Command::LTrim(LTrim { key, start, stop })))
}

fn non_negative(raw: &[u8], msg: &str) -> Result<i64, Reply> {
    match parse_i64(raw) {
        Some(n) if n >= 0 => Ok(n),
        _ => Err(Reply::err(msg)),
    }
}

/// Parses LPOS with Redis's option rules (each option needs its argument; repeats allowed).
pub fn parse_lpos(args: &mut Args) -> Result<Request, Reply> {
    let key = args.arg()?;
    let element = args.arg()?;
    let mut pos = LPos {
        key,
        element,
        rank: 1,
        count: None,
        maxlen: 0,
    };
    while args.remaining() > 0 {
        let opt = args.next_keyword()?;
        if args.remaining() == 0 {
            return Err(syntax_error());
        }
        match opt.as_str() {
            "RANK" => {
                pos.rank = args.next_i64()?;
                if pos.rank == 0 {
                    return Err(Reply::err(
                        "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list",
                    ));
                }
            }
            "COUNT" => pos.count = Some(non_negative(&args.arg()?, "ERR COUNT can't be negative")?),
            "MAXLEN" => pos.maxlen = non_negative(&args.arg()?, "ERR MAXLEN can't be negative")?,
            _ => return Err(syntax_error()),
        }
    }
    Ok(Request::Data(Command::LPos(pos)))
}

fn is_list(v: &Value) -> bool {
    matches!(v, Value::List(_))
}

fn list_mut<'a>(ks: &'a mut Keyspace, key: &Bytes, now: u64) -> Option<&'a mut List> {
    match ks.value_mut(key, now, is_list, None) {
        Ok(Some(Value::List(l))) => Some(l),
        _ => None,
    }
}

impl Replicated for LSet {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["lset"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Replaces the element: +OK, or Redis's errors in Redis's order.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let len = match ks.get_list(&self.key, ctx.now) {
            Err(e) => return e.into(),
            Ok(None) => return Reply::err("ERR no such key"),
            Ok(Some(l)) => l.len() as i64,
        };
        let Some(index) = parse_i64(&self.index) else {
            return Reply::err(NOT_INTEGER);
        };
        let i = if index < 0 { len + index } else { index };
        if !(0..len).contains(&i) {
            return Reply::err("ERR index out of range");
        }
        match list_mut(ks, &self.key, ctx.now) {
            Some(l) => {
                l[i as usize] = self.element.clone();
                ks.notify(notify::LIST, "lset", &self.key);
                Reply::ok()
            }
            None => Reply::err("ERR no such key"),
        }
    }
}

impl Replicated for LInsert {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["linsert"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Inserts next to the first pivot: the new length, -1 without a pivot, 0 without a key.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let at = match ks.get_list(&self.key, ctx.now) {
            Err(e) => return e.into(),
            Ok(None) => return Reply::Int(0),
            Ok(Some(l)) => l.iter().position(|e| *e == self.pivot),
        };
        let Some(at) = at else {
            return Reply::Int(-1);
        };
        match list_mut(ks, &self.key, ctx.now) {
            Some(l) => {
                l.insert(at + self.after as usize, self.element.clone());
                let len = l.len() as i64;
                ks.notify(notify::LIST, "linsert", &self.key);
                Reply::Int(len)
            }
            None => Reply::Int(0),
        }
    }
}

impl Replicated for LRem {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["lrem"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Removes matching elements; replies with how many. An emptied list is removed.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        match ks.get_list(&self.key, ctx.now) {
            Err(e) => return e.into(),
            Ok(Some(l)) if l.contains(&self.element) => {}
            Ok(_) => return Reply::Int(0),
        }
        let limit = if self.count == 0 {
            u64::MAX
        } else {
            self.count.unsigned_abs()
        };
        let mut removed = 0u64;
        if let Some(l) = list_mut(ks, &self.key, ctx.now) {
            let old = std::mem::take(l);
            let keep = |e: &Bytes, removed: &mut u64| {
                if *e == self.element && *removed < limit {
                    *removed += 1;
                    false
                } else {
                    true
                }
            };
            if self.count < 0 {
                let mut kept: Vec<Bytes> = Vec::with_capacity(old.len());
                for e in old.into_iter().rev() {
                    if keep(&e, &mut removed) {
                        kept.push(e);
                    }
                }
                l.extend(kept.into_iter().rev());
            } else {
                for e in old {
                    if keep(&e, &mut removed) {
                        l.push_back(e);
                    }
                }
            }
        }
        ks.notify(notify::LIST, "lrem", &self.key);
        ks.drop_if_empty(&self.key, ctx.now);
        Reply::Int(removed as i64)
    }
}

impl Replicated for LTrim {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["ltrim"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Keeps `[start, stop]` (Redis's index rules); +OK. An emptied list is removed.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let len = match ks.get_list(&self.key, ctx.now) {
            Err(e) => return e.into(),
            Ok(None) => return Reply::ok(),
            Ok(Some(l)) => l.len() as i64,
        };
        let mut start = if self.start < 0 {
            len.saturating_add(self.start)
        } else {
            self.start
        };
        let mut stop = if self.stop < 0 {
            len.saturating_add(self.stop)
        } else {
            self.stop
        };
        start = start.max(0);
        let (ltrim, rtrim) = if start > stop || start >= len {
            (len, 0)
        } else {
            stop = stop.min(len - 1);
            (start, len - stop - 1)
        };
        if let Some(l) = list_mut(ks, &self.key, ctx.now) {
            l.truncate((len - rtrim) as usize);
            l.drain(..ltrim.min(l.len() as i64) as usize);
        }
        ks.notify(notify::LIST, "ltrim", &self.key);
        ks.drop_if_empty(&self.key, ctx.now);
        Reply::ok()
    }
}

impl Replicated for LPos {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["lpos"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        true
    }

    /// Redis's loop, including its wrapping arithmetic for RANK -9223372036854775808.
    fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        let list = match ks.get_list(&self.key, now) {
            Err(e) => return e.into(),
            Ok(None) if self.count.is_some() => return Reply::Array(vec![]),
            Ok(None) => return Reply::Nil,
            Ok(Some(l)) => l,
        };
        let (rank, from_tail) = if self.rank < 0 {
            (self.rank.wrapping_neg(), true)
        } else {
            (self.rank, false)
        };
        let len = list.len() as i64;
        let mut out = Vec::new();
        let mut matches: i64 = 0;
        for index in 0..len {
            if self.maxlen != 0 && index >= self.maxlen {
                break;
            }
            let at = if from_tail { len - index - 1 } else { index };
            if list[at as usize] != self.element {
                continue;
            }
            matches += 1;
            if matches >= rank {
                match self.count {
                    None => return Reply::Int(at),
                    Some(count) => {
                        out.push(Reply::Int(at));
                        if count != 0 && matches.wrapping_sub(rank).wrapping_add(1) >= count {
                            break;
                        }
                    }
                }
            }
        }
        match self.count {
            None => Reply::Nil,
            Some(_) => Reply::Array(out),
        }
    }
}
