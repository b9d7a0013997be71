//! `SORT key [BY pattern] [LIMIT offset count] [GET pattern [GET pattern ...]] [ASC|DESC]
//! [ALPHA] [STORE destination]` and `SORT_RO` (the same without STORE), for lists and sets.
//!
//! The semantics are Redis 7.0's `sortCommandGeneric`: a BY pattern without `*` means "do
//! not sort" (lists keep their order, LIMIT and DESC walk it directly); `pattern` is a key
//! name whose first `*` is replaced by the element, optionally followed by `->field` to read
//! a hash field; `GET #` is the element itself; numeric sorting breaks ties by comparing the
//! elements as bytes; a value that is not a number is an error. A set sorted with no sort
//! and STORE is sorted ALPHA instead, as Redis does, so that the stored list is the same on
//! every replica.
//!
//! SORT without STORE and SORT_RO are reads; SORT ... STORE is a write (it replaces the
//! destination with a list, or deletes it when the result is empty).
//!
//! Sorted sets: [`elements`] is the one place that knows the value types. A zset arm goes
//! there, returning its members in score order as an [`Source::Ordered`] (that is its native
//! order, which "no sort" keeps, as for a list).

use std::cmp::Ordering;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::algo::float::sort_strtod;
use crate::cmd::keyspec::{KeyAt, KeyFlags, KeyRef};
use crate::cmd::registry::{none, Replicated, Spec, Touches, ONE_KEY};
use crate::cmd::{Command, Ctx, Request, WRONGTYPE};
use crate::resp::args::{parse_i64, syntax_error, NOT_INTEGER};
use crate::resp::{Args, Reply};
use crate::state::{notify, Event, Keyspace, List, Value};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new(
        "sort",
        -2,
        &["write", "denyoom", "movablekeys"],
        ONE_KEY,
        parse,
    )
        .key_specs("RO,access@i1/r0,1,0 RO,access@?/? OW,update@?/?")
        .getkeys(sort_keys)
        .args("key:key BY=pattern:pattern? offset_count@LIMIT={offset:integer count:integer}? GET=pattern:pattern?*+ order@(ASC|DESC)? sorting@ALPHA? STORE=destination:key?")
    .docs(
        "Sort the elements of a list or set, optionally storing the result",
        "1.0.0",
        "generic",
    )
    .categories(&["set", "sortedset", "list", "dangerous"]),
    Spec::new("sort_ro", -2, &["readonly", "movablekeys"], ONE_KEY, parse)
        .key_specs("RO,access@i1/r0,1,0 RO,access@?/?")
        .getkeys(sort_ro_keys)
        .args("key:key BY=pattern:pattern? offset_count@LIMIT={offset:integer count:integer}? GET=pattern:pattern?*+ order@(ASC|DESC)? sorting@ALPHA?").docs(
        "Sort the elements of a list or set (the read-only form of SORT)",
        "7.0.0",
        "generic",
    )
    .categories(&["set", "sortedset", "list", "dangerous"]),
];

/// The sorted key's flags.
const SORTED: KeyFlags = KeyFlags::RO.with(KeyFlags::ACCESS);
/// STORE's destination's flags.
const STORED: KeyFlags = KeyFlags::OW.with(KeyFlags::UPDATE);

/// SORT's and SORT_RO's keys (Redis's `sortGetKeys`, which SORT_RO's grammar shares): the
/// sorted key, the last STORE's destination, and [`KeyAt::Every`] to read when a BY
/// pattern (with a `*`) or a GET reads other keys: Redis allows BY and GET only to a user
/// who may read every key, which the key `*` asks of the user's patterns (Palisade refuses
/// with the NOPERM key text, where Redis answers `ERR BY option of SORT denied ...`).
/// COMMAND GETKEYS leaves `*` out, as Redis lists only the sorted key and the destination.
fn sort_keys(argv: &[Bytes]) -> Vec<KeyRef> {
    sort_keys_of(argv, true)
}

/// SORT_RO's keys (Redis's `sortROGetKeys` lists only the sorted key: SORT_RO has no STORE),
/// and `*` as for SORT.
fn sort_ro_keys(argv: &[Bytes]) -> Vec<KeyRef> {
    sort_keys_of(argv, false)
}

fn sort_keys_of(argv: &[Bytes], with_store: bool) -> Vec<KeyRef> {
    let mut keys = vec![KeyRef::arg(1, SORTED)];
    let (mut store, mut reaches) = (None, false);
    let mut i = 2;
    while i < argv.len() {
        let word = &argv[i];
        let next = argv.get(i + 1);
        // As Redis: LIMIT skips two, BY and GET one; STORE is looked for before GET and BY
        // and skips nothing.
        if word.eq_ignore_ascii_case(b"limit") {
            i += 2;
        } else if word.eq_ignore_ascii_case(b"store") && next.is_some() {
            store = Some(i + 1);
        } else if word.eq_ignore_ascii_case(b"get") {
            reaches |= next.is_some();
            i += 1;
        } else if word.eq_ignore_ascii_case(b"by") {
            reaches |= next.is_some_and(|p| p.contains(&b'*'));
            i += 1;
        }
        i += 1;
    }
    keys.extend(
        store
            .filter(|_| with_store)
            .map(|at| KeyRef::arg(at, STORED)),
    );
    if reaches {
        keys.push(KeyRef {
            at: KeyAt::Every,
            flags: KeyFlags::ACCESS,
        });
    }
    keys
}

/// A parsed SORT or SORT_RO.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sort {
    /// The key to sort.
    pub key: Bytes,
    /// BY pattern (the last one given wins).
    pub by: Option<Bytes>,
    /// LIMIT offset count.
    pub limit: Option<(i64, i64)>,
    /// GET patterns, in order.
    pub get: Vec<Bytes>,
    /// DESC.
    pub desc: bool,
    /// ALPHA.
    pub alpha: bool,
    /// STORE destination (SORT only).
    pub store: Option<Bytes>,
}

/// Parses SORT and SORT_RO, with Redis's option rules (any order, any case, repeats allowed;
/// STORE is a syntax error in SORT_RO).
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    let readonly = args.name() == "sort_ro";
    let mut sort = Sort {
        key: args.arg()?,
        by: None,
        limit: None,
        get: Vec::new(),
        desc: false,
        alpha: false,
        store: None,
    };
    while args.remaining() > 0 {
        let opt = args.next_keyword()?;
        let left = args.remaining();
        match opt.as_str() {
            "ASC" => sort.desc = false,
            "DESC" => sort.desc = true,
            "ALPHA" => sort.alpha = true,
            "LIMIT" if left >= 2 => {
                let n = |b: Bytes| parse_i64(&b).ok_or_else(|| Reply::err(NOT_INTEGER));
                let offset = n(args.arg()?)?;
                let count = n(args.arg()?)?;
                sort.limit = Some((offset, count));
            }
            "STORE" if !readonly && left >= 1 => sort.store = Some(args.arg()?),
            "BY" if left >= 1 => sort.by = Some(args.arg()?),
            "GET" if left >= 1 => sort.get.push(args.arg()?),
            _ => return Err(syntax_error()),
        }
    }
    // A read without STORE (`Sort::is_read`).
    Ok(Request::Data(Command::Sort(sort)))
}

/// What SORT reads from a key.
pub enum Source {
    /// A list (or a sorted set, in score order): its order means something, and "no sort"
    /// keeps it, with LIMIT and DESC applied to it directly.
    Ordered(Vec<Bytes>),
    /// A set: no order of its own.
    Unordered(Vec<Bytes>),
}

/// The elements of the value at `key`, or WRONGTYPE. A missing key is an empty list.
pub fn elements(ks: &Keyspace, key: &[u8], now: u64) -> Result<Source, Reply> {
    Ok(match ks.get(key, now).map(|e| &e.value) {
        None => Source::Ordered(Vec::new()),
        Some(Value::List(l)) => Source::Ordered(l.iter().cloned().collect()),
        Some(Value::Set(s)) => Source::Unordered(
            crate::cmd::sets::redis_order(s)
                .into_iter()
                .cloned()
                .collect(),
        ),
        // A sorted set's members in score order (what `BY nosort` keeps).
        Some(Value::ZSet(z)) => Source::Ordered(z.iter().map(|(m, _)| m.clone()).collect()),
        Some(_) => return Err(Reply::err(WRONGTYPE)),
    })
}

/// Redis's `lookupKeyByPattern`: `#` is the element itself; otherwise the first `*` of the
/// pattern is replaced by the element, and a `->field` after it reads that hash field (a
/// string key is read without one). None when the pattern has no `*`, the key is missing, or
/// it holds the wrong type.
pub fn lookup(ks: &Keyspace, pattern: &[u8], elem: &Bytes, now: u64) -> Option<Bytes> {
    if pattern == b"#" {
        return Some(elem.clone());
    }
    let star = pattern.iter().position(|&c| c == b'*')?;
    let after = &pattern[star + 1..];
    let arrow = after
        .windows(2)
        .position(|w| w == b"->")
        .filter(|&i| i + 2 < after.len());
    let (suffix, field) = match arrow {
        Some(i) => (&after[..i], Some(&after[i + 2..])),
        None => (after, None),
    };
    let mut key = Vec::with_capacity(pattern.len() + elem.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(elem);
    key.extend_from_slice(suffix);
    match (ks.get(&key, now).map(|e| &e.value), field) {
        (Some(Value::Hash(h)), Some(f)) => h.get(f).cloned(),
        (Some(Value::Str(s)), None) => Some(s.clone()),
        _ => None,
    }
}

/// One element with what it is sorted by.
struct Item {
    elem: Bytes,
    score: f64,
    cmp: Option<Bytes>,
}

impl Sort {
    /// True when a BY pattern (with a `*`) or a GET reads keys other than the sorted one
    /// (the ACL check then asks for access to every key, as Redis does).
    pub fn reaches_other_keys(&self) -> bool {
        !self.get.is_empty() || self.by.as_ref().is_some_and(|b| b.contains(&b'*'))
    }

    /// The sorted result: the elements (or GET values, None for missing ones), or an error.
    pub fn run(&self, ks: &Keyspace, now: u64) -> Result<Vec<Option<Bytes>>, Reply> {
        let source = elements(ks, &self.key, now)?;
        let mut dontsort = self.by.as_ref().is_some_and(|b| !b.contains(&b'*'));
        let (mut alpha, mut by) = (self.alpha, self.by.as_ref());
        let (ordered, elems) = match source {
            Source::Ordered(v) => (true, v),
            Source::Unordered(v) => (false, v),
        };
        // A set stored unsorted would store its (replica-independent but arbitrary) order:
        // Redis sorts it ALPHA instead.
        if dontsort && !ordered && self.store.is_some() {
            dontsort = false;
            alpha = true;
            by = None;
        }
        let len = elems.len() as i64;
        let (offset, count) = self.limit.unwrap_or((0, -1));
        let mut start = offset.max(0);
        let mut end = if count < 0 {
            len - 1
        } else {
            start.saturating_add(count) - 1
        };
        if start >= len {
            start = len - 1;
            end = len - 2;
        }
        end = end.min(len - 1);

        let picked: Vec<Bytes> = if ordered && dontsort {
            if end < start {
                Vec::new()
            } else {
                let n = (end - start + 1) as usize;
                if self.desc {
                    elems
                        .iter()
                        .rev()
                        .skip(start as usize)
                        .take(n)
                        .cloned()
                        .collect()
                } else {
                    elems.iter().skip(start as usize).take(n).cloned().collect()
                }
            }
        } else if dontsort {
            range(elems, start, end)
        } else {
            let mut items = Vec::with_capacity(elems.len());
            let mut bad_number = false;
            for elem in elems {
                let mut item = Item {
                    elem,
                    score: 0.0,
                    cmp: None,
                };
                let byval = match by {
                    Some(p) => lookup(ks, p, &item.elem, now),
                    None => Some(item.elem.clone()),
                };
                if let Some(v) = byval {
                    if alpha {
                        if by.is_some() {
                            item.cmp = Some(v);
                        }
                    } else {
                        match sort_strtod(&v) {
                            Some(s) => item.score = s,
                            None => bad_number = true,
                        }
                    }
                }
                items.push(item);
            }
            if bad_number {
                return Err(Reply::err(
                    "ERR One or more scores can't be converted into double",
                ));
            }
            let by_pattern = by.is_some();
            let desc = self.desc;
            items.sort_by(|a, b| {
                let c = compare(a, b, alpha, by_pattern);
                if desc {
                    c.reverse()
                } else {
                    c
                }
            });
            range(items.into_iter().map(|i| i.elem).collect(), start, end)
        };
        if self.get.is_empty() {
            return Ok(picked.into_iter().map(Some).collect());
        }
        let mut out = Vec::with_capacity(picked.len() * self.get.len());
        for elem in &picked {
            for p in &self.get {
                out.push(lookup(ks, p, elem, now));
            }
        }
        Ok(out)
    }
}

/// Elements `start..=end` (empty when `end < start`).
fn range(v: Vec<Bytes>, start: i64, end: i64) -> Vec<Bytes> {
    if end < start || start < 0 {
        return Vec::new();
    }
    v.into_iter()
        .skip(start as usize)
        .take((end - start + 1) as usize)
        .collect()
}

/// Redis's `sortCompare` (the C locale's `strcoll` is a byte comparison).
fn compare(a: &Item, b: &Item, alpha: bool, by_pattern: bool) -> Ordering {
    if !alpha {
        return a
            .score
            .partial_cmp(&b.score)
            .unwrap_or(Ordering::Equal)
            .then_with(|| a.elem.cmp(&b.elem));
    }
    if by_pattern {
        // A missing BY value sorts first.
        return a.cmp.cmp(&b.cmp);
    }
    a.elem.cmp(&b.elem)
}

impl Sort {
    /// The SORT a script runs: a set sorted `BY` a pattern without `*` (no sort) is sorted
    /// ALPHA instead, as Redis does for a script's SORT so that its output does not depend
    /// on the set's internal order.
    pub fn for_script(mut self, ks: &Keyspace, now: u64) -> Sort {
        let dontsort = self.by.as_ref().is_some_and(|b| !b.contains(&b'*'));
        let set = matches!(
            ks.get(&self.key, now).map(|e| &e.value),
            Some(Value::Set(_))
        );
        if dontsort && set {
            self.by = None;
            self.alpha = true;
        }
        self
    }
}

impl Replicated for Sort {
    // `*` stands for the other keys BY and GET read (see `check::sort_keys`).
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((
            if self.store.is_some() {
                &["sort"]
            } else {
                &["sort", "sort_ro"]
            },
            std::iter::once(self.key.as_ref())
                .chain(self.store.as_ref().map(|k| k.as_ref()))
                .chain(self.reaches_other_keys().then_some(&b"*"[..]))
                .collect(),
            none(),
        ))
    }

    fn key_flags(&self) -> Option<Vec<KeyFlags>> {
        let store = self.store.as_ref().map(|_| STORED);
        let every = self.reaches_other_keys().then_some(KeyFlags::ACCESS);
        Some(std::iter::once(SORTED).chain(store).chain(every).collect())
    }

    fn is_read(&self) -> bool {
        self.store.is_none()
    }

    /// SORT ... STORE: replaces the destination with the result as a list (missing GET
    /// values become empty strings), or deletes it when the result is empty; replies with
    /// the result's length.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let Some(dst) = &self.store else {
            return self.query(ks, ctx.now);
        };
        let out = match self.run(ks, ctx.now) {
            Ok(v) => v,
            Err(e) => return e,
        };
        let len = out.len() as i64;
        let list: List = out.into_iter().map(Option::unwrap_or_default).collect();
        let value = Value::List(list);
        if ks.store_result(
            dst,
            value,
            ctx.revision,
            ctx.now,
            (notify::LIST, "sortstore"),
        ) {
            ks.emit(Event::Touched(dst.clone()));
        }
        Reply::Int(len)
    }

    /// SORT without STORE, and SORT_RO.
    fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        match self.run(ks, now) {
            Ok(v) => Reply::Array(
                v.into_iter()
                    .map(|x| x.map_or(Reply::Nil, Reply::Bulk))
                    .collect(),
            ),
            Err(e) => e,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::run_line;

    fn bulks(v: &[&str]) -> Reply {
        Reply::Array(v.iter().map(|s| Reply::bulk(s.to_string())).collect())
    }

    #[test]
    fn patterns_substitute_the_first_star_and_read_hash_fields() {
        let mut ks = Keyspace::default();
        run_line(&mut ks, "SET w_a 5", 0);
        run_line(&mut ks, "HSET h_a f 7", 0);
        let a = Bytes::from_static(b"a");
        assert_eq!(lookup(&ks, b"w_*", &a, 0), Some(Bytes::from("5")));
        assert_eq!(lookup(&ks, b"h_*->f", &a, 0), Some(Bytes::from("7")));
        assert_eq!(lookup(&ks, b"h_*->g", &a, 0), None);
        assert_eq!(
            lookup(&ks, b"w_*->f", &a, 0),
            None,
            "a string has no fields"
        );
        assert_eq!(lookup(&ks, b"#", &a, 0), Some(a.clone()));
        assert_eq!(lookup(&ks, b"nostar", &a, 0), None);
    }

    #[test]
    fn sort_orders_limits_and_stores() {
        let mut ks = Keyspace::default();
        run_line(&mut ks, "RPUSH l 3 1 2 10", 0);
        assert_eq!(
            run_line(&mut ks, "SORT l", 0),
            bulks(&["1", "2", "3", "10"])
        );
        assert_eq!(
            run_line(&mut ks, "SORT l ALPHA", 0),
            bulks(&["1", "10", "2", "3"])
        );
        assert_eq!(
            run_line(&mut ks, "SORT l DESC LIMIT 1 2", 0),
            bulks(&["3", "2"])
        );
        assert_eq!(
            run_line(&mut ks, "SORT l BY nosort DESC", 0),
            bulks(&["10", "2", "1", "3"])
        );
        assert_eq!(run_line(&mut ks, "SORT l STORE d", 0), Reply::Int(4));
        assert_eq!(
            run_line(&mut ks, "LRANGE d 0 -1", 0),
            bulks(&["1", "2", "3", "10"])
        );
        assert_eq!(run_line(&mut ks, "SORT nokey STORE d", 0), Reply::Int(0));
        assert_eq!(run_line(&mut ks, "EXISTS d", 0), Reply::Int(0));
        run_line(&mut ks, "RPUSH bad x", 0);
        assert!(run_line(&mut ks, "SORT bad", 0).is_error());
    }
}
