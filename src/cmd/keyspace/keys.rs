//! `KEYS pattern`, `SCAN cursor [MATCH pattern] [COUNT n] [TYPE type]` and `DBSIZE`.
//!
//! Keys come back in sorted order, so results are deterministic on every replica.
//!
//! A SCAN cursor names the last key a call looked at: the node that answers keeps a bounded
//! table of cursors it handed out ([`ScanCursors`]), and the next call resumes just after
//! that key, so a full scan costs O(N) and every key present for the whole scan is returned
//! once. The cursor's low 40 bits are also the offset of that key in sorted order: a node
//! that does not know the cursor (a new leader, a restarted node, a cursor evicted from the
//! table, or a script, which must be deterministic on every replica) resumes at that
//! offset instead, which can skip keys that shifted below it when earlier keys were deleted.

use std::collections::{HashMap, VecDeque};

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::registry::flags::{READ, READ_FAST};
use crate::cmd::registry::{none, Own, Replicated, Spec, Touches, NO_KEYS};
use crate::cmd::{Command, Request};
use crate::resp::args::syntax_error;
use crate::resp::{Args, Reply};
use crate::state::{pattern, Keyspace};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new("dbsize", 1, READ_FAST, NO_KEYS, parse_dbsize)
        .docs("Count the keys in the database", "1.0.0", "server")
        .categories(&["keyspace"]),
    Spec::new("keys", 2, READ, NO_KEYS, parse)
        .args("pattern:pattern")
        .docs("List the keys matching a glob pattern", "1.0.0", "generic")
        .categories(&["keyspace", "dangerous"])
        .own(&[Own::WalksKeyspace]),
    Spec::new("scan", -2, READ, NO_KEYS, parse_scan)
        .args("cursor:integer MATCH=pattern:pattern? COUNT=count:integer? TYPE=type?")
        .docs(
            "Walk the keyspace a few keys at a time with a cursor",
            "2.8.0",
            "generic",
        ),
];

/// A parsed KEYS.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Keys {
    /// The glob pattern.
    pub pattern: Bytes,
}

/// Parses KEYS.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    Ok(Request::Data(Command::Keys(Keys {
        pattern: args.arg()?,
    })))
}

impl Replicated for Keys {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["keys"], none(), none()))
    }

    fn is_read(&self) -> bool {
        true
    }

    /// Lists matching live keys, all at once (scripts and transactions, which must be
    /// atomic; a client's KEYS goes through [`Keys::part`] in bounded steps).
    fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        let (keys, _) = self.part(ks, now, None, usize::MAX);
        Reply::Array(keys)
    }
}

/// How many keys a client's KEYS looks at while holding the state's read lock; between
/// steps writers get their turn.
pub const KEYS_STEP: usize = 8_192;

impl Keys {
    /// One step of KEYS: the matching keys among up to `limit` live keys after `after`, and
    /// the last key looked at if more may follow.
    pub fn part(
        &self,
        ks: &Keyspace,
        now: u64,
        after: Option<&Bytes>,
        limit: usize,
    ) -> (Vec<Reply>, Option<Bytes>) {
        let all = self.pattern.as_ref() == b"*";
        let mut out = Vec::new();
        let mut last: Option<&Bytes> = None;
        for (seen, (k, _)) in ks.live_keys_after(after, now).enumerate() {
            if seen == limit {
                // More follow: resume after the last key looked at.
                return (out, last.cloned());
            }
            last = Some(k);
            if all || pattern::matches(&self.pattern, k) {
                out.push(Reply::Bulk(k.clone()));
            }
        }
        (out, None)
    }
}

/// A parsed SCAN.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scan {
    /// Offset into the sorted live keys.
    pub cursor: u64,
    /// MATCH pattern.
    pub pattern: Option<Bytes>,
    /// COUNT hint.
    pub count: usize,
    /// TYPE filter.
    pub type_name: Option<String>,
}

/// Parses SCAN.
pub fn parse_scan(args: &mut Args) -> Result<Request, Reply> {
    let raw = args.arg()?;
    let cursor = std::str::from_utf8(&raw)
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or_else(|| Reply::err("ERR invalid cursor"))?;
    let mut scan = Scan {
        cursor,
        pattern: None,
        count: 10,
        type_name: None,
    };
    while args.remaining() > 0 {
        let opt = args.next_keyword()?;
        if args.remaining() == 0 {
            return Err(syntax_error());
        }
        match opt.as_str() {
            "MATCH" => scan.pattern = Some(args.arg()?),
            "COUNT" => {
                let n = args.next_i64()?;
                if n < 1 {
                    return Err(syntax_error());
                }
                scan.count = n as usize;
            }
            "TYPE" => scan.type_name = Some(String::from_utf8_lossy(&args.arg()?).to_lowercase()),
            _ => return Err(syntax_error()),
        }
    }
    Ok(Request::Data(Command::Scan(scan)))
}

impl Replicated for Scan {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["scan"], none(), none()))
    }

    fn is_read(&self) -> bool {
        true
    }

    /// Returns `[next-cursor, [keys]]`, resuming at the cursor's offset (deterministic:
    /// scripts and transactions use this).
    fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        let start = (self.cursor & OFFSET_MASK) as usize;
        let keys = ks.live_keys(now).skip(start);
        let (out, last, visited) = self.walk(keys);
        let next = match last {
            Some(_) => start as u64 + visited,
            None => 0,
        };
        scan_reply(next, out)
    }
}

/// The low bits of a cursor: the offset of its key in sorted order.
const OFFSET_MASK: u64 = (1 << 40) - 1;

/// The most keys one SCAN call looks at, whatever its COUNT.
pub const SCAN_STEP_MAX: u64 = 65_536;

/// How many cursors a node remembers (the oldest are forgotten first).
pub const SCAN_CURSORS: usize = 16_384;

/// The SCAN cursors a node handed out, each with the last key its call looked at.
#[derive(Debug, Default)]
pub struct ScanCursors {
    last_key: HashMap<u64, Bytes>,
    order: VecDeque<u64>,
}

impl ScanCursors {
    fn remember(&mut self, offset: u64, key: Bytes) -> u64 {
        // A random tag above the offset keeps two scans at the same offset apart.
        let cursor = loop {
            let tag = rand::random::<u64>() >> 40;
            let c = (tag.max(1) << 40) | (offset & OFFSET_MASK);
            if !self.last_key.contains_key(&c) {
                break c;
            }
        };
        if self.order.len() >= SCAN_CURSORS {
            if let Some(old) = self.order.pop_front() {
                self.last_key.remove(&old);
            }
        }
        self.last_key.insert(cursor, key);
        self.order.push_back(cursor);
        cursor
    }

    /// Number of cursors remembered.
    pub fn len(&self) -> usize {
        self.last_key.len()
    }

    /// True if no cursor is remembered.
    pub fn is_empty(&self) -> bool {
        self.last_key.is_empty()
    }
}

impl Scan {
    /// Visits up to COUNT keys of `keys`: the matching ones, the last key visited (None
    /// when the keys ran out) and how many were visited.
    fn walk<'a>(
        &self,
        keys: impl Iterator<Item = (&'a Bytes, &'a crate::state::keyspace::Entry)>,
    ) -> (Vec<Reply>, Option<Bytes>, u64) {
        let mut out = Vec::new();
        let mut keys = keys.peekable();
        let mut visited = 0u64;
        let mut last = None;
        // COUNT is a hint (Redis may return fewer keys too): a huge one must not hold the
        // state's read lock, and stall writers, for a walk of the whole keyspace.
        let limit = (self.count as u64).min(SCAN_STEP_MAX);
        while visited < limit {
            let Some((k, e)) = keys.next() else {
                return (out, None, visited);
            };
            visited += 1;
            // A lone `*` is no filter, as in Redis (the matcher alone would skip the empty key).
            let by_pattern = self
                .pattern
                .as_ref()
                .is_none_or(|p| p.as_ref() == b"*" || pattern::matches(p, k));
            let by_type = self
                .type_name
                .as_deref()
                .is_none_or(|t| t == e.value.type_name());
            if by_pattern && by_type {
                out.push(Reply::Bulk(k.clone()));
            }
            last = Some(k);
        }
        // Done if nothing follows: the caller gets cursor 0 now, not an empty last call.
        match (keys.peek(), last) {
            (Some(_), Some(k)) => (out, Some(k.clone()), visited),
            _ => (out, None, visited),
        }
    }

    /// SCAN for a client: resumes after the key its cursor names when this node handed it
    /// out, else at the cursor's offset; the next cursor is remembered in `cursors`.
    pub fn query_resumable(&self, ks: &Keyspace, now: u64, cursors: &mut ScanCursors) -> Reply {
        let known = (self.cursor != 0)
            .then(|| cursors.last_key.get(&self.cursor))
            .flatten();
        let start = self.cursor & OFFSET_MASK;
        let (out, last, visited) = match known {
            Some(after) => self.walk(ks.live_keys_after(Some(after), now)),
            None if self.cursor == 0 => self.walk(ks.live_keys_after(None, now)),
            None => self.walk(ks.live_keys(now).skip(start as usize)),
        };
        let next = match last {
            Some(k) => cursors.remember(start + visited, k),
            None => 0,
        };
        scan_reply(next, out)
    }
}

fn scan_reply(next: u64, keys: Vec<Reply>) -> Reply {
    Reply::Array(vec![Reply::bulk(next.to_string()), Reply::Array(keys)])
}

/// `DBSIZE`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DbSize;

/// Parses DBSIZE.
pub fn parse_dbsize(_: &mut Args) -> Result<Request, Reply> {
    Ok(Request::Data(Command::DbSize(DbSize)))
}

impl Replicated for DbSize {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["dbsize"], none(), none()))
    }

    fn is_read(&self) -> bool {
        true
    }

    /// Counts live keys.
    fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        Reply::Int(ks.live_len(now) as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    fn keyspace(n: usize) -> Keyspace {
        let mut ks = Keyspace::default();
        for i in 0..n {
            ks.set_str(b(&format!("k{i:03}")), b("v"), None, i as u64 + 1, 0);
        }
        ks
    }

    fn scan(cursor: u64, count: usize) -> Scan {
        Scan {
            cursor,
            pattern: None,
            count,
            type_name: None,
        }
    }

    /// The next cursor and the keys of a SCAN reply.
    fn parts(reply: Reply) -> (u64, Vec<Bytes>) {
        let Reply::Array(mut items) = reply else {
            panic!("not an array: {reply:?}")
        };
        let Some(Reply::Array(keys)) = items.pop() else {
            panic!("no keys")
        };
        let Some(Reply::Bulk(cursor)) = items.pop() else {
            panic!("no cursor")
        };
        let cursor = std::str::from_utf8(&cursor).unwrap().parse().unwrap();
        let keys = keys
            .into_iter()
            .map(|k| match k {
                Reply::Bulk(k) => k,
                other => panic!("{other:?}"),
            })
            .collect();
        (cursor, keys)
    }

    #[test]
    fn a_full_scan_resumes_after_the_last_key_and_misses_none_when_earlier_keys_go() {
        let mut ks = keyspace(30);
        let mut cursors = ScanCursors::default();
        let mut seen = Vec::new();
        let (mut cursor, mut calls) = (0, 0);
        loop {
            let (next, keys) = parts(scan(cursor, 4).query_resumable(&ks, 0, &mut cursors));
            calls += 1;
            seen.extend(keys);
            // Delete keys already returned: an offset cursor would now skip as many keys.
            if calls == 2 {
                for i in 0..6 {
                    ks.remove(format!("k{i:03}").as_bytes(), 0);
                }
            }
            if next == 0 {
                break;
            }
            cursor = next;
        }
        let want: Vec<Bytes> = (0..30).map(|i| b(&format!("k{i:03}"))).collect();
        assert_eq!(seen, want, "each key once, in order");
        assert_eq!(calls, 8);
        assert_eq!(cursors.len(), 7);
    }

    #[test]
    fn an_unknown_cursor_resumes_at_its_offset_like_a_script_does() {
        let ks = keyspace(10);
        let mut cursors = ScanCursors::default();
        let (next, first) = parts(scan(0, 4).query_resumable(&ks, 0, &mut cursors));
        assert_eq!(first.len(), 4);
        // Another node (or a script) does not know the cursor: it uses the offset bits.
        let mut elsewhere = ScanCursors::default();
        let (_, there) = parts(scan(next, 4).query_resumable(&ks, 0, &mut elsewhere));
        let (_, script) = parts(scan(next, 4).query(&ks, 0));
        let (_, here) = parts(scan(next, 4).query_resumable(&ks, 0, &mut cursors));
        let want: Vec<Bytes> = (4..8).map(|i| b(&format!("k{i:03}"))).collect();
        assert_eq!((there, script, here), (want.clone(), want.clone(), want));
        // A plain offset from an old client still works.
        let (_, old) = parts(scan(8, 4).query(&ks, 0));
        assert_eq!(old, vec![b("k008"), b("k009")]);
    }

    #[test]
    fn a_huge_count_looks_at_a_bounded_number_of_keys_per_call() {
        let ks = keyspace(SCAN_STEP_MAX as usize + 5);
        let mut cursors = ScanCursors::default();
        let (next, keys) = parts(scan(0, usize::MAX).query_resumable(&ks, 0, &mut cursors));
        assert_eq!(keys.len() as u64, SCAN_STEP_MAX);
        let (next, rest) = parts(scan(next, usize::MAX).query_resumable(&ks, 0, &mut cursors));
        assert_eq!((next, rest.len()), (0, 5));
    }

    #[test]
    fn the_cursor_table_is_bounded() {
        let ks = keyspace(3);
        let mut cursors = ScanCursors::default();
        for _ in 0..SCAN_CURSORS + 10 {
            scan(0, 1).query_resumable(&ks, 0, &mut cursors);
        }
        assert_eq!(cursors.len(), SCAN_CURSORS);
    }

    #[test]
    fn keys_in_steps_lists_what_keys_at_once_does() {
        let ks = keyspace(25);
        let k = Keys {
            pattern: b("k0[0-1]*"),
        };
        let Reply::Array(all) = k.query(&ks, 0) else {
            panic!()
        };
        let mut stepped = Vec::new();
        let mut after = None;
        let mut steps = 0;
        loop {
            let (part, last) = k.part(&ks, 0, after.as_ref(), 3);
            steps += 1;
            stepped.extend(part);
            match last {
                Some(l) => after = Some(l),
                None => break,
            }
        }
        assert_eq!(stepped, all);
        assert_eq!(all.len(), 20);
        assert_eq!(steps, 9);
    }
}
