//! Moving and multi-key pops: `LMOVE source destination LEFT|RIGHT LEFT|RIGHT`,
//! `BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout`, `RPOPLPUSH source
//! destination`, `BRPOPLPUSH source destination timeout`, `LMPOP numkeys key [key ...]
//! LEFT|RIGHT [COUNT count]` and `BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT
//! count]`.
//!
//! The blocking forms carry their timeout; apply never blocks (inside MULTI or a script it
//! is one attempt, as in Redis). A client's blocking form queues like BLPOP
//! (`cmd::popwait`). A move emits `Touched` for its destination, so the clients blocked on
//! that key are served.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::blpop::parse_timeout;
use crate::cmd::list::{pop_n, End};
use crate::cmd::registry::{many, none, Replicated, Spec, Touches};
use crate::cmd::{Command, Ctx, Request};
use crate::resp::args::syntax_error;
use crate::resp::{Args, Reply};
use crate::state::{notify, Event, Keyspace, List, Value};

const MOVE_KEYS: (i32, i32, i32) = (1, 2, 1);
const WRITE: &[&str] = &["write", "denyoom"];
const WRITE_BLOCKING: &[&str] = &["write", "denyoom", "noscript", "blocking"];

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new("lmove", 5, WRITE, MOVE_KEYS, parse_move)
        .key_specs("RW,access,delete@i1/r0,1,0 RW,insert@i2/r0,1,0")
        .args("source:key destination:key wherefrom@(LEFT|RIGHT) whereto@(LEFT|RIGHT)").docs(
        "Pop an element from one list and push it onto another",
        "6.2.0",
        "list",
    ),
    Spec::new("blmove", 6, WRITE_BLOCKING, MOVE_KEYS, parse_move)
        .key_specs("RW,access,delete@i1/r0,1,0 RW,insert@i2/r0,1,0")
        .args("source:key destination:key wherefrom@(LEFT|RIGHT) whereto@(LEFT|RIGHT) timeout:double").docs(
        "Pop an element from one list and push it onto another, waiting while the source is empty",
        "6.2.0",
        "list",
    ),
    Spec::new("rpoplpush", 3, WRITE, MOVE_KEYS, parse_move)
        .key_specs("RW,access,delete@i1/r0,1,0 RW,insert@i2/r0,1,0")
        .args("source:key destination:key").docs(
        "Pop from the tail of one list and push onto the head of another",
        "1.2.0",
        "list",
    ),
    Spec::new("brpoplpush", 4, WRITE_BLOCKING, MOVE_KEYS, parse_move)
        .key_specs("RW,access,delete@i1/r0,1,0 RW,insert@i2/r0,1,0")
        .args("source:key destination:key timeout:double").docs(
        "Pop from the tail of one list and push onto the head of another, waiting while the source is empty",
        "2.2.0",
        "list",
    ),
    Spec::new("lmpop", -4, &["write", "movablekeys"], (0, 0, 0), parse_mpop)
        .key_specs("RW,access,delete@i1/n0,1,1")
        .args("numkeys:integer key:key* where@(LEFT|RIGHT) COUNT=count:integer?").docs(
        "Pop elements from the first non-empty list",
        "7.0.0",
        "list",
    ),
    Spec::new(
        "blmpop",
        -5,
        &["write", "blocking", "movablekeys"],
        (0, 0, 0),
        parse_mpop,
    )
        .key_specs("RW,access,delete@i2/n0,1,1")
        .args("timeout:double numkeys:integer key:key* where@(LEFT|RIGHT) COUNT=count:integer?")
    .docs(
        "Pop elements from the first non-empty list, waiting while all are empty",
        "7.0.0",
        "list",
    ),
];

/// LMOVE and its three relatives.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LMove {
    /// The list popped from.
    pub src: Bytes,
    /// The list pushed onto.
    pub dst: Bytes,
    /// Which end of `src` is popped.
    pub from: End,
    /// Which end of `dst` is pushed.
    pub to: End,
    /// For BLMOVE/BRPOPLPUSH: how long the session may block, in ms (0: forever).
    pub timeout_ms: Option<u64>,
}

/// LMPOP and BLMPOP.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LMPop {
    /// The keys, tried in order.
    pub keys: Vec<Bytes>,
    /// Which end.
    pub end: End,
    /// At most this many elements (at least 1).
    pub count: u64,
    /// For BLMPOP: how long the session may block, in ms (0: forever).
    pub timeout_ms: Option<u64>,
}

/// `LEFT` or `RIGHT`, any case; otherwise Redis's syntax error.
pub fn parse_end(raw: &[u8]) -> Result<End, Reply> {
    if raw.eq_ignore_ascii_case(b"left") {
        Ok(End::Left)
    } else if raw.eq_ignore_ascii_case(b"right") {
        Ok(End::Right)
    } else {
        Err(syntax_error())
    }
}

/// Parses LMOVE, BLMOVE, RPOPLPUSH and BRPOPLPUSH (ends first, then the timeout, as Redis).
pub fn parse_move(args: &mut Args) -> Result<Request, Reply> {
    let name = args.name().to_string();
    let src = args.arg()?;
    let dst = args.arg()?;
    let (from, to) = if name.ends_with("rpoplpush") {
        (End::Right, End::Left)
    } else {
        (parse_end(&args.arg()?)?, parse_end(&args.arg()?)?)
    };
    let timeout_ms = if name.starts_with('b') {
        Some(parse_timeout(&args.arg()?)?)
    } else {
        None
    };
    Ok(Request::Data(Command::LMove(LMove {
        src,
        dst,
        from,
        to,
        timeout_ms,
    })))
}

/// A positive count with Redis's own message for anything else.
fn positive(raw: &[u8], msg: &str) -> Result<u64, Reply> {
    match crate::resp::args::parse_i64(raw) {
        Some(n) if n >= 1 => Ok(n as u64),
        _ => Err(Reply::err(msg)),
    }
}

/// Parses LMPOP and BLMPOP in Redis's order: numkeys, the end, COUNT, then the timeout.
pub fn parse_mpop(args: &mut Args) -> Result<Request, Reply> {
    let blocking = args.name() == "blmpop";
    let timeout_raw = if blocking { Some(args.arg()?) } else { None };
    let numkeys = positive(&args.arg()?, "ERR numkeys should be greater than 0")?;
    if numkeys >= args.remaining() as u64 {
        return Err(syntax_error());
    }
    let keys: Vec<Bytes> = (0..numkeys).map(|_| args.arg()).collect::<Result<_, _>>()?;
    let end = parse_end(&args.arg()?)?;
    let mut count = None;
    while args.remaining() > 0 {
        let opt = args.arg()?;
        if count.is_none() && opt.eq_ignore_ascii_case(b"count") && args.remaining() > 0 {
            count = Some(positive(
                &args.arg()?,
                "ERR count should be greater than 0",
            )?);
        } else {
            return Err(syntax_error());
        }
    }
    let timeout_ms = match timeout_raw {
        Some(raw) => Some(parse_timeout(&raw)?),
        None => None,
    };
    Ok(Request::Data(Command::LMPop(LMPop {
        keys,
        end,
        count: count.unwrap_or(1),
        timeout_ms,
    })))
}

fn is_list(v: &Value) -> bool {
    matches!(v, Value::List(_))
}

fn new_list() -> Value {
    Value::List(List::new())
}

fn take(list: &mut List, end: End) -> Option<Bytes> {
    match end {
        End::Left => list.pop_front(),
        End::Right => list.pop_back(),
    }
}

fn put(list: &mut List, end: End, v: Bytes) {
    match end {
        End::Left => list.push_front(v),
        End::Right => list.push_back(v),
    }
}

impl Replicated for LMove {
    fn forwarded(&self) -> Option<Touches<'_>> {
        let names: &'static [&'static str] = if self.timeout_ms.is_some() {
            &["blmove", "brpoplpush"]
        } else {
            &["lmove", "rpoplpush"]
        };
        Some((names, vec![self.src.as_ref(), self.dst.as_ref()], none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Moves one element: its value, or a null bulk when the source is empty. The source's
    /// type is checked first, then (only if it has elements) the destination's.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        match ks.get_list(&self.src, ctx.now) {
            Err(e) => return e.into(),
            Ok(None) => return Reply::Nil,
            Ok(Some(_)) => {}
        }
        if let Err(e) = ks.get_list(&self.dst, ctx.now) {
            return e.into();
        }
        let moved = if self.src == self.dst {
            // A rotation: the key (and its TTL) stays, even with one element.
            match ks.value_mut(&self.src, ctx.now, is_list, None) {
                Ok(Some(Value::List(l))) => {
                    take(l, self.from).inspect(|v| put(l, self.to, v.clone()))
                }
                _ => None,
            }
        } else {
            // Redis pushes onto the destination before it signals the pop (and removes an
            // emptied source last): `new`, `lpush`/`rpush` on dst, then `lpop`/`rpop`, `del`.
            let taken = match ks.value_mut(&self.src, ctx.now, is_list, None) {
                Ok(Some(Value::List(l))) => take(l, self.from),
                _ => None,
            };
            let Some(v) = taken else {
                return Reply::Nil;
            };
            match ks.value_mut(&self.dst, ctx.now, is_list, Some(new_list)) {
                Ok(Some(Value::List(l))) => put(l, self.to, v.clone()),
                _ => return Reply::err("ERR internal: destination list missing"),
            }
            Some(v)
        };
        if moved.is_some() {
            ks.notify(notify::LIST, self.to.push_event(), &self.dst);
            ks.notify(notify::LIST, self.from.pop_event(), &self.src);
            ks.drop_if_empty(&self.src, ctx.now);
        }
        match moved {
            Some(v) => {
                ks.emit(Event::Touched(self.dst.clone()));
                Reply::Bulk(v)
            }
            None => Reply::Nil,
        }
    }
}

impl Replicated for LMPop {
    fn forwarded(&self) -> Option<Touches<'_>> {
        let names: &'static [&'static str] = if self.timeout_ms.is_some() {
            &["blmpop"]
        } else {
            &["lmpop"]
        };
        Some((names, many(&self.keys), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Pops from the first non-empty list: `[key, [elements]]`, or a null array.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        for key in &self.keys {
            match ks.get_list(key, ctx.now) {
                Err(e) => return e.into(),
                Ok(Some(l)) if !l.is_empty() => {
                    let n = (self.count as usize).min(l.len());
                    let items = pop_n(ks, key, self.end, n, ctx.now);
                    return Reply::Array(vec![
                        Reply::Bulk(key.clone()),
                        Reply::Array(items.into_iter().map(Reply::Bulk).collect()),
                    ]);
                }
                Ok(_) => {}
            }
        }
        Reply::NilArray
    }
}

#[cfg(test)]
mod tests {
    use crate::cmd::run_line;
    use crate::resp::Reply;
    use crate::state::Keyspace;

    #[test]
    fn rotation_keeps_a_single_element_list_and_its_ttl() {
        let mut ks = Keyspace::default();
        run_line(&mut ks, "RPUSH l a", 0);
        run_line(&mut ks, "EXPIRE l 100", 0);
        assert_eq!(
            run_line(&mut ks, "LMOVE l l LEFT RIGHT", 0),
            Reply::bulk("a")
        );
        assert_eq!(run_line(&mut ks, "TTL l", 0), Reply::Int(100));
    }

    #[test]
    fn lmpop_count_and_order() {
        let mut ks = Keyspace::default();
        run_line(&mut ks, "RPUSH b 1 2 3", 0);
        assert_eq!(
            run_line(&mut ks, "LMPOP 2 a b RIGHT COUNT 5", 0),
            Reply::Array(vec![
                Reply::bulk("b"),
                Reply::Array(vec![Reply::bulk("3"), Reply::bulk("2"), Reply::bulk("1")])
            ])
        );
        assert_eq!(run_line(&mut ks, "EXISTS b", 0), Reply::Int(0));
        assert_eq!(run_line(&mut ks, "LMPOP 1 b LEFT", 0), Reply::NilArray);
    }
}
