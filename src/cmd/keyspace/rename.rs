//! `RENAME key newkey`, `RENAMENX key newkey` and
//! `COPY source destination [DB destination-db] [REPLACE]` (database 0 only).
//!
//! These move or copy a key's *value* and TTL. Fences, lock queues and lock-delays belong
//! to the key name and stay where they are (docs/locks-and-fencing.md, "RENAME and COPY"):
//! the source keeps its fence and the destination keeps its own, so a rename can never lower
//! the fence a resource has seen. Removing the source is what DEL does to it, waiters
//! included (they are granted the free lock by the leader's next eviction entry). The value
//! written to the destination is a new write there: it gets this command's revision as its
//! token, as SET would.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::registry::flags::{WRITE, WRITE_FAST};
use crate::cmd::registry::{none, Replicated, Spec, Touches};
use crate::cmd::{Command, Ctx, Request};
use crate::resp::args::{parse_i64, syntax_error, NOT_INTEGER};
use crate::resp::{Args, Reply};
use crate::state::{notify, Entry, Event, Keyspace, Value};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new("rename", 3, &["write"], (1, 2, 1), parse)
        .key_specs("RW,access,delete@i1/r0,1,0 OW,update@i2/r0,1,0")
        .args("key:key newkey:key")
        .docs(
            "Give a key a new name, replacing any key of that name",
            "1.0.0",
            "generic",
        ),
    Spec::new("renamenx", 3, WRITE_FAST, (1, 2, 1), parse)
        .key_specs("RW,access,delete@i1/r0,1,0 OW,insert@i2/r0,1,0")
        .args("key:key newkey:key")
        .docs(
            "Give a key a new name only if no key has that name",
            "1.0.0",
            "generic",
        ),
    Spec::new("copy", -3, WRITE, (1, 2, 1), parse_copy)
        .key_specs("RO,access@i1/r0,1,0 OW,update@i2/r0,1,0")
        .args("source:key destination:key DB=destination-db:integer? REPLACE?")
        .docs(
            "Copy a key's value and TTL to another key",
            "6.2.0",
            "generic",
        ),
];

/// RENAME or RENAMENX.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rename {
    /// The key to rename.
    pub src: Bytes,
    /// Its new name.
    pub dst: Bytes,
    /// RENAMENX: only if `dst` does not exist (replies 1/0 instead of +OK).
    pub nx: bool,
}

/// COPY.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Copy {
    /// The source key.
    pub src: Bytes,
    /// The destination key (never equal to `src`: the parser refuses it).
    pub dst: Bytes,
    /// REPLACE: overwrite an existing destination.
    pub replace: bool,
}

/// Parses RENAME and RENAMENX.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    let nx = args.name() == "renamenx";
    let (src, dst) = (args.arg()?, args.arg()?);
    Ok(Request::Data(Command::Rename(Rename { src, dst, nx })))
}

/// Parses COPY. `DB` must name database 0, the only one (any other is refused as SELECT
/// refuses it).
pub fn parse_copy(args: &mut Args) -> Result<Request, Reply> {
    let (src, dst) = (args.arg()?, args.arg()?);
    let mut replace = false;
    while args.remaining() > 0 {
        let opt = args.next_keyword()?;
        if opt == "REPLACE" {
            replace = true;
        } else if opt == "DB" && args.remaining() > 0 {
            let db = parse_i64(&args.arg()?).ok_or_else(|| Reply::err(NOT_INTEGER))?;
            if i32::try_from(db).is_err() {
                return Err(Reply::err(
                    "ERR value is out of range, value must between -2147483648 and 2147483647",
                ));
            }
            if db != 0 {
                return Err(Reply::err("ERR DB index is out of range"));
            }
        } else {
            return Err(syntax_error());
        }
    }
    if src == dst {
        return Err(Reply::err(
            "ERR source and destination objects are the same",
        ));
    }
    Ok(Request::Data(Command::Copy(Copy { src, dst, replace })))
}

/// Writes `entry`'s value and deadline to `dst` as a new write (token: `ctx.revision`), and
/// wakes clients blocked on `dst`. Redis deletes a replaced destination and adds the key
/// anew, so `dst` is always `new` to a subscriber.
fn put(ks: &mut Keyspace, dst: &Bytes, entry: &Entry, ctx: Ctx) {
    let poppable = matches!(entry.value, Value::List(_) | Value::ZSet(_));
    ks.remove(dst, ctx.now);
    let token = ks.take_token(ctx.revision, false);
    ks.insert(
        dst.clone(),
        Entry {
            value: entry.value.clone(),
            expire_at: entry.expire_at,
            token,
            modified: 0,
        },
    );
    if poppable {
        ks.emit(Event::Touched(dst.clone()));
    }
}

impl Replicated for Rename {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((
            &["rename", "renamenx"],
            vec![&self.src[..], &self.dst[..]],
            none(),
        ))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Moves the value and TTL; the names' fences and lock records stay put.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let Some(entry) = ks.get(&self.src, ctx.now).cloned() else {
            return Reply::err("ERR no such key");
        };
        let done = if self.nx { Reply::Int(1) } else { Reply::ok() };
        if self.src == self.dst {
            return if self.nx { Reply::Int(0) } else { done };
        }
        if self.nx && ks.get(&self.dst, ctx.now).is_some() {
            return Reply::Int(0);
        }
        put(ks, &self.dst, &entry, ctx);
        // The same removal as DEL's.
        ks.remove(&self.src, ctx.now);
        ks.notify(notify::GENERIC, "rename_from", &self.src);
        ks.notify(notify::GENERIC, "rename_to", &self.dst);
        done
    }
}

impl Replicated for Copy {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["copy"], vec![&self.src[..], &self.dst[..]], none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Copies the value and TTL; 1 if copied, 0 if the source is missing or the
    /// destination exists (without REPLACE).
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let Some(entry) = ks.get(&self.src, ctx.now).cloned() else {
            return Reply::Int(0);
        };
        if !self.replace && ks.get(&self.dst, ctx.now).is_some() {
            return Reply::Int(0);
        }
        put(ks, &self.dst, &entry, ctx);
        ks.notify(notify::GENERIC, "copy_to", &self.dst);
        Reply::Int(1)
    }
}

#[cfg(test)]
mod tests {
    use crate::cmd::run_line;
    use crate::resp::Reply;
    use crate::state::Keyspace;

    /// A fence belongs to the key name: RENAME moves the value, never a fence.
    #[test]
    fn rename_keeps_fences_with_their_names() {
        let mut ks = Keyspace::default();
        assert_eq!(run_line(&mut ks, "FENCEDSET a v 10", 0), Reply::ok());
        assert_eq!(run_line(&mut ks, "FENCEDSET b w 5", 0), Reply::ok());
        assert_eq!(run_line(&mut ks, "RENAME a b", 0), Reply::ok());
        assert_eq!(ks.fence(b"a"), 10);
        assert_eq!(ks.fence(b"b"), 5);
        assert!(run_line(&mut ks, "FENCEDSET a x 7", 0).is_error());
        assert!(run_line(&mut ks, "FENCEDSET b x 4", 0).is_error());
        assert_eq!(run_line(&mut ks, "GET b", 0), Reply::bulk("v"));
        assert_eq!(run_line(&mut ks, "EXISTS a", 0), Reply::Int(0));
    }

    #[test]
    fn rename_and_copy_keep_the_ttl() {
        let mut ks = Keyspace::default();
        run_line(&mut ks, "SET a v PX 1000", 0);
        assert_eq!(run_line(&mut ks, "COPY a c", 100), Reply::Int(1));
        assert_eq!(run_line(&mut ks, "RENAME a b", 200), Reply::ok());
        assert_eq!(run_line(&mut ks, "PTTL b", 300), Reply::Int(700));
        assert_eq!(run_line(&mut ks, "PTTL c", 300), Reply::Int(700));
        assert_eq!(run_line(&mut ks, "RENAMENX b c", 300), Reply::Int(0));
        assert_eq!(run_line(&mut ks, "COPY b c", 300), Reply::Int(0));
        assert_eq!(run_line(&mut ks, "COPY b c REPLACE", 300), Reply::Int(1));
        assert_eq!(
            run_line(&mut ks, "RENAME a b", 300),
            Reply::err("ERR no such key")
        );
    }
}
