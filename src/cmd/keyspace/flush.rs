//! `FLUSHALL [ASYNC|SYNC]` and `FLUSHDB [ASYNC|SYNC]` (the same here: Palisade has one
//! database, and both modes empty it in one log entry before the reply).
//!
//! Every key goes as `DEL` would remove it: a lock key's queue stays and its first waiter is
//! granted the free lock by the next housekeeping entry, exactly as after a `DEL` of it. The
//! fences stay (design.md section 3: a flushed resource's fence still rejects a lower token),
//! and so do the cached scripts and the ACL users, as in Redis. No keyspace notification is
//! published for the flushed keys, as in Redis.

use serde::{Deserialize, Serialize};

use crate::cmd::registry::{none, Own, Replicated, Spec, Touches, NO_KEYS};
use crate::cmd::{Command, Ctx, Request};
use crate::resp::{Args, Reply};
use crate::state::Keyspace;

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new("flushall", -1, &["write"], NO_KEYS, parse)
        .args("(ASYNC|SYNC)?")
        .docs(
            "Remove every key (fences, scripts and users stay)",
            "1.0.0",
            "server",
        )
        .categories(&["keyspace", "dangerous"])
        .own(&[Own::WalksKeyspace]),
    Spec::new("flushdb", -1, &["write"], NO_KEYS, parse)
        .args("(ASYNC|SYNC)?")
        .docs(
            "Remove every key of the database (the same as FLUSHALL here)",
            "1.0.0",
            "server",
        )
        .categories(&["keyspace", "dangerous"])
        .own(&[Own::WalksKeyspace]),
];

/// Removes every key; replies OK.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flush;

/// Parses FLUSHALL and FLUSHDB: at most one of `ASYNC` or `SYNC`.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    match args.rest().as_slice() {
        [] => {}
        [mode] if mode.eq_ignore_ascii_case(b"async") || mode.eq_ignore_ascii_case(b"sync") => {}
        _ => return Err(crate::resp::args::syntax_error()),
    }
    Ok(Request::Data(Command::Flush(Flush)))
}

impl Replicated for Flush {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["flushall", "flushdb"], none(), none()))
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Removes every stored key, live or expired, and nothing else.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let keys: Vec<_> = ks.entries().keys().cloned().collect();
        for k in &keys {
            ks.remove(k, ctx.now);
        }
        Reply::ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::run_line;

    /// Keys go, fences and lock queues stay: a lower token is still refused after a flush.
    #[test]
    fn flush_removes_keys_and_keeps_fences() {
        let mut ks = Keyspace::default();
        run_line(&mut ks, "SET a 1", 0);
        run_line(&mut ks, "HSET h f v", 0);
        run_line(&mut ks, "RPUSH l x", 0);
        run_line(&mut ks, "SET e 1 PX 5", 0);
        assert_eq!(run_line(&mut ks, "FENCEDSET r v 40", 0), Reply::ok());
        assert_eq!(run_line(&mut ks, "FLUSHALL", 1), Reply::ok());
        assert_eq!(ks.stored_len(), 0);
        assert_eq!(ks.volatile_len(), 0);
        assert_eq!(ks.fence(b"r"), 40);
        assert!(run_line(&mut ks, "FENCEDSET r v 39", 2).is_error());
        assert_eq!(run_line(&mut ks, "FENCEDSET r v 40", 2), Reply::ok());
        assert_eq!(run_line(&mut ks, "FLUSHDB sync", 3), Reply::ok());
        assert_eq!(run_line(&mut ks, "DBSIZE", 3), Reply::Int(0));
        assert_eq!(
            run_line(&mut ks, "FLUSHALL async sync", 3),
            Reply::err("ERR syntax error")
        );
        assert_eq!(
            run_line(&mut ks, "FLUSHDB now", 3),
            Reply::err("ERR syntax error")
        );
    }

    /// Redis's ACL categories: FLUSHALL and FLUSHDB are @keyspace @write @slow @dangerous
    /// (not @admin); SAVE, BGSAVE, BGREWRITEAOF and DEBUG are @admin @slow @dangerous.
    #[test]
    fn categories_are_redis_s() {
        use crate::cmd::acl::check::categories;
        use crate::cmd::lookup;
        for name in ["flushall", "flushdb"] {
            let mut c = categories(lookup(name).expect(name), None);
            c.sort();
            assert_eq!(c, ["dangerous", "keyspace", "slow", "write"], "{name}");
        }
        for name in ["save", "bgsave", "bgrewriteaof", "debug"] {
            let mut c = categories(lookup(name).expect(name), None);
            c.sort();
            assert_eq!(c, ["admin", "dangerous", "slow"], "{name}");
        }
    }
}
