//! Lists: `LPUSH key element [element ...]`, `RPUSH`, `LPUSHX`, `RPUSHX`,
//! `LPOP key [count]`, `RPOP key [count]`, `LLEN key`, `LRANGE key start stop`,
//! `LINDEX key index`.
//!
//! A push records a `Touched` event for its key, which makes the key ready: after the
//! command, apply serves the clients blocked on it in arrival order (`popwait.rs`).

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::registry::flags::{READ, READ_FAST, WRITE_FAST, WRITE_GROW_FAST};
use crate::cmd::registry::{none, one, Replicated, Spec, Touches, ONE_KEY};
use crate::cmd::{Command, Ctx, Request};
use crate::resp::{Args, Reply};
use crate::state::{Event, Keyspace, List, Value};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new("lpush", -3, WRITE_GROW_FAST, ONE_KEY, parse_push)
        .key_specs("RW,insert@i1/r0,1,0")
        .args("key:key element*")
        .docs("Insert elements at the head of a list", "1.0.0", "list"),
    Spec::new("rpush", -3, WRITE_GROW_FAST, ONE_KEY, parse_push)
        .key_specs("RW,insert@i1/r0,1,0")
        .args("key:key element*")
        .docs("Insert elements at the tail of a list", "1.0.0", "list"),
    Spec::new("lpushx", -3, WRITE_GROW_FAST, ONE_KEY, parse_push)
        .key_specs("RW,insert@i1/r0,1,0")
        .args("key:key element*")
        .docs(
            "Insert elements at the head of a list that already exists",
            "2.2.0",
            "list",
        ),
    Spec::new("rpushx", -3, WRITE_GROW_FAST, ONE_KEY, parse_push)
        .key_specs("RW,insert@i1/r0,1,0")
        .args("key:key element*")
        .docs(
            "Insert elements at the tail of a list that already exists",
            "2.2.0",
            "list",
        ),
    Spec::new("lpop", -2, WRITE_FAST, ONE_KEY, parse_pop)
        .key_specs("RW,access,delete@i1/r0,1,0")
        .args("key:key count:integer?")
        .docs(
            "Remove and return elements from the head of a list",
            "1.0.0",
            "list",
        ),
    Spec::new("rpop", -2, WRITE_FAST, ONE_KEY, parse_pop)
        .key_specs("RW,access,delete@i1/r0,1,0")
        .args("key:key count:integer?")
        .docs(
            "Remove and return elements from the tail of a list",
            "1.0.0",
            "list",
        ),
    Spec::new("llen", 2, READ_FAST, ONE_KEY, parse_read)
        .key_specs("RO@i1/r0,1,0")
        .args("key:key")
        .docs("Return the length of a list", "1.0.0", "list"),
    Spec::new("lrange", 4, READ, ONE_KEY, parse_read)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key start:integer stop:integer")
        .docs(
            "Return the list elements between two indexes",
            "1.0.0",
            "list",
        ),
    Spec::new("lindex", 3, READ, ONE_KEY, parse_read)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key index:integer")
        .docs("Return the list element at an index", "1.0.0", "list"),
];

/// Which end of a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum End {
    /// The head (L...).
    Left,
    /// The tail (R...).
    Right,
}

impl End {
    /// Redis's notification for a pop at this end.
    pub fn pop_event(self) -> &'static str {
        match self {
            End::Left => "lpop",
            End::Right => "rpop",
        }
    }

    /// Redis's notification for a push at this end.
    pub fn push_event(self) -> &'static str {
        match self {
            End::Left => "lpush",
            End::Right => "rpush",
        }
    }
}

/// LPUSH/RPUSH (and the X forms, which only push onto an existing list).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Push {
    /// The key.
    pub key: Bytes,
    /// Elements, pushed one at a time in argument order.
    pub elements: Vec<Bytes>,
    /// Which end.
    pub end: End,
    /// Only if the list exists (LPUSHX/RPUSHX).
    pub existing: bool,
}

/// LPOP/RPOP.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pop {
    /// The key.
    pub key: Bytes,
    /// Which end.
    pub end: End,
    /// With a count the reply is an array (nil array when the key is missing).
    pub count: Option<usize>,
}

/// A read of a list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LReadOp {
    /// LLEN.
    Len,
    /// LRANGE start stop.
    Range(i64, i64),
    /// LINDEX index.
    Index(i64),
}

/// A read-only list command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LRead {
    /// The key.
    pub key: Bytes,
    /// What to read.
    pub op: LReadOp,
}

fn end_of(name: &str) -> End {
    if name.starts_with('r') || name.starts_with("br") {
        End::Right
    } else {
        End::Left
    }
}

/// Parses the push family.
pub fn parse_push(args: &mut Args) -> Result<Request, Reply> {
    let name = args.name().to_string();
    let key = args.arg()?;
    Ok(Request::Data(Command::Push(Push {
        key,
        elements: args.rest(),
        end: end_of(&name),
        existing: name.ends_with('x'),
    })))
}

/// Parses LPOP/RPOP.
pub fn parse_pop(args: &mut Args) -> Result<Request, Reply> {
    let name = args.name().to_string();
    let key = args.arg()?;
    let count = if args.remaining() > 0 {
        let n = args.next_i64()?;
        if n < 0 {
            return Err(Reply::err("ERR value is out of range, must be positive"));
        }
        Some(n as usize)
    } else {
        None
    };
    if args.remaining() > 0 {
        return Err(crate::cmd::wrong_arity(&name));
    }
    Ok(Request::Data(Command::Pop(Pop {
        key,
        end: end_of(&name),
        count,
    })))
}

/// Parses LLEN, LRANGE and LINDEX.
pub fn parse_read(args: &mut Args) -> Result<Request, Reply> {
    let name = args.name().to_string();
    let key = args.arg()?;
    let op = match name.as_str() {
        "lrange" => LReadOp::Range(args.next_i64()?, args.next_i64()?),
        "lindex" => LReadOp::Index(args.next_i64()?),
        _ => LReadOp::Len,
    };
    Ok(Request::Data(Command::LRead(LRead { key, op })))
}

fn is_list(v: &Value) -> bool {
    matches!(v, Value::List(_))
}

fn new_list() -> Value {
    Value::List(List::new())
}

/// Pops up to `n` elements from `key` (which must hold a live list); drops it when empty.
pub fn pop_n(ks: &mut Keyspace, key: &Bytes, end: End, n: usize, now: u64) -> Vec<Bytes> {
    let mut out = Vec::new();
    if let Ok(Some(Value::List(list))) = ks.value_mut(key, now, is_list, None) {
        while out.len() < n {
            let item = match end {
                End::Left => list.pop_front(),
                End::Right => list.pop_back(),
            };
            match item {
                Some(v) => out.push(v),
                None => break,
            }
        }
    }
    if !out.is_empty() {
        ks.notify(crate::state::notify::LIST, end.pop_event(), key);
    }
    ks.drop_if_empty(key, now);
    out
}

impl Replicated for Push {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((
            &["lpush", "rpush", "lpushx", "rpushx"],
            one(&self.key),
            none(),
        ))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Applies the push; replies with the new length.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let create = (!self.existing).then_some(new_list as fn() -> Value);
        let list = match ks.value_mut(&self.key, ctx.now, is_list, create) {
            Err(e) => return e.into(),
            Ok(None) => return Reply::Int(0),
            Ok(Some(Value::List(l))) => l,
            Ok(Some(_)) => return Reply::err(crate::cmd::WRONGTYPE),
        };
        for e in &self.elements {
            match self.end {
                End::Left => list.push_front(e.clone()),
                End::Right => list.push_back(e.clone()),
            }
        }
        let len = list.len() as i64;
        ks.notify(crate::state::notify::LIST, self.end.push_event(), &self.key);
        ks.emit(Event::Touched(self.key.clone()));
        Reply::Int(len)
    }
}

impl Replicated for Pop {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["lpop", "rpop"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Applies the pop.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let len = match ks.get_list(&self.key, ctx.now) {
            Err(e) => return e.into(),
            Ok(None) if self.count.is_some() => return Reply::NilArray,
            Ok(None) => return Reply::Nil,
            Ok(Some(l)) => l.len(),
        };
        match self.count {
            None => pop_n(ks, &self.key, self.end, 1, ctx.now)
                .pop()
                .map_or(Reply::Nil, Reply::Bulk),
            Some(0) => Reply::Array(vec![]),
            Some(n) => Reply::Array(
                pop_n(ks, &self.key, self.end, n.min(len), ctx.now)
                    .into_iter()
                    .map(Reply::Bulk)
                    .collect(),
            ),
        }
    }
}

/// Redis's index normalization: negative counts from the end.
fn norm(i: i64, len: i64) -> i64 {
    if i < 0 {
        len + i
    } else {
        i
    }
}

impl Replicated for LRead {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["llen", "lrange", "lindex"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        true
    }

    /// Answers the read at `now`.
    fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        let empty = List::new();
        let list = match ks.get_list(&self.key, now) {
            Err(e) => return e.into(),
            Ok(l) => l.unwrap_or(&empty),
        };
        let len = list.len() as i64;
        match self.op {
            LReadOp::Len => Reply::Int(len),
            LReadOp::Index(i) => {
                let i = norm(i, len);
                if (0..len).contains(&i) {
                    Reply::Bulk(list[i as usize].clone())
                } else {
                    Reply::Nil
                }
            }
            LReadOp::Range(start, stop) => {
                let start = norm(start, len).max(0);
                let stop = norm(stop, len).min(len - 1);
                if start > stop || start >= len {
                    return Reply::Array(vec![]);
                }
                let items = list.range(start as usize..=stop as usize);
                Reply::Array(items.cloned().map(Reply::Bulk).collect())
            }
        }
    }
}
