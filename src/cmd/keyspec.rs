//! A command's key specs, as `COMMAND INFO` reports them (its ninth field), declared on the
//! command's table row ([`super::registry::Spec::key_specs`]) in a short notation: one spec
//! per space-separated item, `FLAGS@BEGIN/FIND`, where
//!
//! - `FLAGS` are Redis's key-spec flags, comma-separated: one of `RO`, `RW`, `OW`, `RM`, then
//!   what the command does with the key (`access`, `update`, `insert`, `delete`) and the
//!   others Redis has (`variable_flags`, `incomplete`, `not_key`);
//! - `BEGIN` finds the first key: `iN` (at argument N), `kWORD,N` (after the keyword WORD,
//!   searching from argument N; a negative N searches from the end) or `?` (unknown);
//! - `FIND` finds the keys from there: `rLAST,STEP,LIMIT` (a range; LAST counts from the first
//!   key, -1 is the last argument), `nIDX,FIRST,STEP` (the number of keys is at IDX, the
//!   first key FIRST after it) or `?` (unknown).
//!
//! For example LMOVE's row declares `RW,access,delete@i1/r0,1,0 RW,insert@i2/r0,1,0`: its
//! first key is read and emptied, its second written.
//!
//! The same specs find the keys of a command line ([`keys`], Redis 7's
//! `getKeysFromCommandWithSpecs`): what the ACL check tests, with the access each key's spec
//! flags ask for, and what `COMMAND GETKEYS` and `COMMAND GETKEYSANDFLAGS` answer. A row
//! whose keys the specs cannot find (an `?` spec, or `variable_flags`: SET, BITFIELD, SORT,
//! SORT_RO) declares a [`GetKeys`] function with [`super::registry::Spec::getkeys`], as
//! Redis's command table has a `getkeys_proc`. The notation is parsed once per row
//! ([`specs_of`]).

use std::collections::HashMap;
use std::sync::LazyLock;

use bytes::Bytes;

use super::registry::{table, Spec};
use crate::resp::args::parse_i64;
use crate::resp::Reply;

const FLAGS: &[&str] = &[
    "RO",
    "RW",
    "OW",
    "RM",
    "access",
    "update",
    "insert",
    "delete",
    "not_key",
    "incomplete",
    "variable_flags",
];

/// Redis's key-spec flags (`CMD_KEY_*`) as bits, bit `i` for `FLAGS[i]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyFlags(u16);

impl KeyFlags {
    /// No flags: the key is named but neither read nor changed as far as ACLs go.
    pub const NONE: KeyFlags = KeyFlags(0);
    /// `RO`: read-only.
    pub const RO: KeyFlags = KeyFlags(1);
    /// `RW`: read-write.
    pub const RW: KeyFlags = KeyFlags(1 << 1);
    /// `OW`: overwrite.
    pub const OW: KeyFlags = KeyFlags(1 << 2);
    /// `RM`: removes the key.
    pub const RM: KeyFlags = KeyFlags(1 << 3);
    /// `access`: the value is read (ACLs ask for read permission).
    pub const ACCESS: KeyFlags = KeyFlags(1 << 4);
    /// `update`: the value is changed (write permission).
    pub const UPDATE: KeyFlags = KeyFlags(1 << 5);
    /// `insert`: data is added (write permission).
    pub const INSERT: KeyFlags = KeyFlags(1 << 6);
    /// `delete`: data is removed (write permission).
    pub const DELETE: KeyFlags = KeyFlags(1 << 7);
    /// `not_key`: a shard channel in a key position, not a key.
    pub const NOT_KEY: KeyFlags = KeyFlags(1 << 8);
    /// `incomplete`: the spec may miss keys.
    pub const INCOMPLETE: KeyFlags = KeyFlags(1 << 9);
    /// `variable_flags`: the flags depend on the arguments.
    pub const VARIABLE_FLAGS: KeyFlags = KeyFlags(1 << 10);

    /// Both sets of flags.
    pub const fn with(self, other: KeyFlags) -> KeyFlags {
        KeyFlags(self.0 | other.0)
    }

    /// True if every flag of `other` is set.
    pub fn contains(self, other: KeyFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// True if any flag of `other` is set.
    pub fn any(self, other: KeyFlags) -> bool {
        self.0 & other.0 != 0
    }

    /// True if ACLs ask for read permission (Redis's `ACLSelectorCheckKey`: `access`).
    pub fn needs_read(self) -> bool {
        self.any(Self::ACCESS)
    }

    /// True if ACLs ask for write permission (`insert`, `update` or `delete`); a key with
    /// neither needs only a pattern that matches it.
    pub fn needs_write(self) -> bool {
        self.any(Self::INSERT.with(Self::UPDATE).with(Self::DELETE))
    }

    /// The flag names, in Redis's order (as COMMAND GETKEYSANDFLAGS lists them).
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        FLAGS
            .iter()
            .enumerate()
            .filter(move |(i, _)| self.0 & (1 << i) != 0)
            .map(|(_, n)| *n)
    }

    fn named(name: &str) -> Option<KeyFlags> {
        FLAGS
            .iter()
            .position(|f| *f == name)
            .map(|i| KeyFlags(1 << i))
    }
}

/// Where the first key is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Begin {
    Index(i64),
    Keyword { keyword: String, from: i64 },
    Unknown,
}

/// How the keys are found from the first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Find {
    Range { last: i64, step: i64, limit: i64 },
    KeyNum { index: i64, first: i64, step: i64 },
    Unknown,
}

/// One key spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySpec {
    pub flags: Vec<String>,
    /// The same flags as bits.
    pub bits: KeyFlags,
    pub begin: Begin,
    pub find: Find,
}

impl KeySpec {
    /// True if the command reads the value at these keys (`access`).
    pub fn reads(&self) -> bool {
        self.flags.iter().any(|f| f == "access")
    }

    /// True if the command changes these keys (`RW`, `OW` or `RM`).
    pub fn writes(&self) -> bool {
        self.flags
            .iter()
            .any(|f| matches!(f.as_str(), "RW" | "OW" | "RM"))
    }
}

/// Parses a row's notation (see the module docs).
pub fn parse(text: &str) -> Result<Vec<KeySpec>, String> {
    text.split_whitespace().map(one).collect()
}

fn one(item: &str) -> Result<KeySpec, String> {
    let (flags, rest) = item
        .split_once('@')
        .ok_or_else(|| format!("{item}: no '@'"))?;
    let (begin, find) = rest
        .split_once('/')
        .ok_or_else(|| format!("{item}: no '/'"))?;
    let flags: Vec<String> = flags.split(',').map(str::to_string).collect();
    let mut bits = KeyFlags::NONE;
    for f in &flags {
        let bit = KeyFlags::named(f).ok_or_else(|| format!("{item}: unknown flag '{f}'"))?;
        bits = bits.with(bit);
    }
    Ok(KeySpec {
        flags,
        bits,
        begin: begin_of(begin).ok_or_else(|| format!("{item}: bad begin '{begin}'"))?,
        find: find_of(find).ok_or_else(|| format!("{item}: bad find '{find}'"))?,
    })
}

fn ints<const N: usize>(s: &str) -> Option<[i64; N]> {
    let v: Vec<i64> = s
        .split(',')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    v.try_into().ok()
}

fn begin_of(s: &str) -> Option<Begin> {
    match s.split_at_checked(1)? {
        ("?", "") => Some(Begin::Unknown),
        ("i", n) => Some(Begin::Index(n.parse().ok()?)),
        ("k", rest) => {
            let (keyword, from) = rest.rsplit_once(',')?;
            Some(Begin::Keyword {
                keyword: keyword.to_string(),
                from: from.parse().ok()?,
            })
        }
        _ => None,
    }
}

fn find_of(s: &str) -> Option<Find> {
    match s.split_at_checked(1)? {
        ("?", "") => Some(Find::Unknown),
        ("r", rest) => {
            let [last, step, limit] = ints(rest)?;
            Some(Find::Range { last, step, limit })
        }
        ("n", rest) => {
            let [index, first, step] = ints(rest)?;
            Some(Find::KeyNum { index, first, step })
        }
        _ => None,
    }
}

/// One key a command line names: its argument, or [`KeyAt::Every`], and its spec's flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyRef {
    /// Where the key is.
    pub at: KeyAt,
    /// The flags of the spec that found it.
    pub flags: KeyFlags,
}

/// Where a key is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyAt {
    /// The argument at this index (`argv[0]` is the command name).
    Arg(usize),
    /// Any key at all: SORT's BY and GET patterns read keys named by the sorted values, so
    /// Redis lets only a user who may read every key use them. The ACL check tests it as
    /// the key `*`; COMMAND GETKEYS leaves it out.
    Every,
}

impl KeyRef {
    /// A key at argument `pos`.
    pub const fn arg(pos: usize, flags: KeyFlags) -> KeyRef {
        KeyRef {
            at: KeyAt::Arg(pos),
            flags,
        }
    }

    /// The key's name in `argv`.
    pub fn name<'a>(&self, argv: &'a [Bytes]) -> Option<&'a [u8]> {
        match self.at {
            KeyAt::Arg(i) => argv.get(i).map(|k| k.as_ref()),
            KeyAt::Every => Some(b"*"),
        }
    }
}

/// A row's own way to find its keys ([`super::registry::Spec::getkeys`]), Redis's
/// `getkeys_proc`: used when the specs have an `?` part, fail on the command line, or are
/// `variable_flags`. `argv[0]` is the command name.
pub type GetKeys = fn(&[Bytes]) -> Vec<KeyRef>;

/// Each row's parsed key specs, by name (the notation is checked by a unit test,
/// `every_rows_key_specs_parse`; a row that does not parse has none here).
/// Every row's parsed key specs, subcommand rows included, keyed by the row's address (a
/// subcommand row's name, such as `info` or `get`, is not unique).
static SPECS: LazyLock<HashMap<usize, Vec<KeySpec>>> = LazyLock::new(|| {
    table()
        .iter()
        .flat_map(|s| std::iter::once(*s).chain(s.subcommands.iter()))
        .map(|s| (address(s), parse(s.key_specs).unwrap_or_default()))
        .collect()
});

fn address(spec: &Spec) -> usize {
    spec as *const Spec as usize
}

/// A row's parsed key specs (none for a row that is not in the table).
pub fn specs_of(spec: &Spec) -> &'static [KeySpec] {
    SPECS
        .get(&address(spec))
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// True if the command may name keys (Redis's `doesCommandHaveKeys`): a spec that is not
/// `not_key`, or its own [`GetKeys`].
pub fn has_keys(spec: &Spec) -> bool {
    spec.getkeys.is_some()
        || specs_of(spec)
            .iter()
            .any(|k| !k.bits.contains(KeyFlags::NOT_KEY))
}

/// The keys of a command line and their flags, as Redis 7's `getKeysFromCommandWithSpecs`
/// finds them: from the row's specs when they can say (no `variable_flags`, and they find
/// them), else from the row's [`GetKeys`], else none.
pub fn keys(spec: &Spec, argv: &[Bytes]) -> Vec<KeyRef> {
    let specs = specs_of(spec);
    let variable = specs
        .iter()
        .any(|k| k.bits.contains(KeyFlags::VARIABLE_FLAGS));
    if has_keys(spec) && !variable {
        if let Some(found) = find(specs, argv) {
            return found;
        }
    }
    match spec.getkeys {
        Some(own) => own(argv),
        None => numkeys_fallback(specs, argv),
    }
}

/// Where a `numkeys` spec fails, Redis falls back on the command's `getkeys_proc`, which for
/// every command with one (`genericGetKeys`: EVAL, ZUNIONSTORE, LMPOP, SINTERCARD, ...)
/// reads `numkeys` with `atoi` (`2x` is 2), finds no keys for fewer than one or more than
/// the arguments hold, and lists the keys, then a destination declared before them, all
/// without flags. Derived from the specs: an index-begin keynum spec, and an index-begin
/// single-key spec before it as the destination.
fn numkeys_fallback(specs: &[KeySpec], argv: &[Bytes]) -> Vec<KeyRef> {
    let Some((at, count_at, first, step)) =
        specs
            .iter()
            .enumerate()
            .find_map(|(at, k)| match (&k.begin, &k.find) {
                (Begin::Index(b), Find::KeyNum { index, first, step }) => {
                    Some((at, b + index, b + index + first, (*step).max(1)))
                }
                _ => None,
            })
    else {
        return Vec::new();
    };
    let store = specs[..at].iter().find_map(|k| match (&k.begin, &k.find) {
        (Begin::Index(i), Find::Range { last: 0, .. }) => Some(*i),
        _ => None,
    });
    let argc = argv.len() as i64;
    let Some(num) = usize::try_from(count_at)
        .ok()
        .and_then(|i| argv.get(i))
        .map(|n| atoi(n))
    else {
        return Vec::new();
    };
    if num < 1 || num > (argc - first) / step {
        return Vec::new();
    }
    (0..num)
        .map(|i| first + i * step)
        .chain(store)
        .filter_map(|i| usize::try_from(i).ok())
        .map(|i| KeyRef::arg(i, KeyFlags::NONE))
        .collect()
}

/// C's `atoi`: leading blanks, a sign, then digits as far as they go (0 if none).
fn atoi(b: &[u8]) -> i64 {
    let s = b
        .iter()
        .skip_while(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c))
        .copied()
        .collect::<Vec<u8>>();
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, &s[..]),
    };
    let n = digits
        .iter()
        .take_while(|c| c.is_ascii_digit())
        .fold(0i64, |n, c| {
            n.saturating_mul(10).saturating_add((c - b'0') as i64)
        });
    if neg {
        -n
    } else {
        n
    }
}

/// Redis 7's `getKeysUsingKeySpecs`: the keys `specs` find in `argv` (`not_key` specs
/// skipped), or None where Redis gives up (-1): an unknown (`?`) or `incomplete` spec, a
/// `numkeys` that is not a number, negative, zero or past the end, or a first or last key
/// past the end. A keyword that is not there skips its spec.
pub fn find(specs: &[KeySpec], argv: &[Bytes]) -> Option<Vec<KeyRef>> {
    let argc = argv.len() as i64;
    let mut out = Vec::new();
    for spec in specs {
        if spec.bits.contains(KeyFlags::NOT_KEY) {
            continue;
        }
        let mut first = match &spec.begin {
            Begin::Index(i) => *i,
            Begin::Keyword { keyword, from } => match keyword_at(argv, keyword, *from) {
                Some(at) => at + 1,
                None => continue,
            },
            Begin::Unknown => return None,
        };
        let (last, step) = match spec.find {
            Find::Range { last, step, limit } => {
                let end = if last >= 0 {
                    first + last
                } else if limit <= 0 {
                    argc + last
                } else {
                    // Redis asserts lastkey is -1 here.
                    first + ((argc - first) / limit + last)
                };
                (end, step)
            }
            Find::KeyNum {
                index,
                first: skip,
                step,
            } => {
                let numkeys = argv
                    .get(usize::try_from(first + index).ok()?)
                    .and_then(|n| parse_i64(n))
                    .filter(|n| *n >= 0)?;
                first += skip;
                // `numkeys` keys `step` apart (Redis 7.0 reads `numkeys - 1` arguments on
                // whatever the step; every Redis keynum spec has step 1).
                let span = numkeys
                    .checked_sub(1)
                    .map(|n| n.saturating_mul(step.max(1)));
                (span.map_or(first - 1, |s| first.saturating_add(s)), step)
            }
            Find::Unknown => return None,
        };
        if last >= argc || last < first || first >= argc || first < 0 {
            return None;
        }
        let mut i = first;
        while i <= last {
            out.push(KeyRef::arg(i as usize, spec.bits));
            i += step.max(1);
        }
        if spec.bits.contains(KeyFlags::INCOMPLETE) {
            return None;
        }
    }
    Some(out)
}

/// Where `keyword` is (case-insensitively), searching from argument `from` to the end, or
/// for a negative `from` from `argc + from` back to the start, as Redis searches (neither
/// the command name, nor argument 1 searching backwards, nor the last argument searching
/// forwards is looked at).
fn keyword_at(argv: &[Bytes], keyword: &str, from: i64) -> Option<i64> {
    let argc = argv.len() as i64;
    let (start, end) = if from > 0 {
        (from, argc - 1)
    } else {
        (argc + from, 1)
    };
    let mut i = start;
    while i != end {
        if i >= argc || i < 1 {
            break;
        }
        if argv[i as usize].eq_ignore_ascii_case(keyword.as_bytes()) {
            return Some(i);
        }
        i += if start <= end { 1 } else { -1 };
    }
    None
}

/// The flags of each of `n` keys that come without a command line (a command forwarded by
/// a follower names its keys in order): key `i` gets the flags of the row's `i`-th spec
/// (`not_key` skipped), the keys past the last spec those of the last. A log type whose
/// keys this cannot place says their flags itself ([`super::registry::Replicated::key_flags`]).
pub fn layout(spec: &Spec, n: usize) -> Vec<KeyFlags> {
    let specs: Vec<KeyFlags> = specs_of(spec)
        .iter()
        .map(|k| k.bits)
        .filter(|b| !b.contains(KeyFlags::NOT_KEY))
        .collect();
    (0..n)
        .map(|i| {
            specs
                .get(i)
                .or(specs.last())
                .copied()
                .unwrap_or(KeyFlags::NONE)
        })
        .collect()
}

/// The channels a pub/sub command names, declared on its row with
/// [`super::registry::Spec::channels`] (Redis's `commands_with_channels` in db.c): the
/// arguments from `first`, `count` of them (0: all the rest), patterns or not. Only the
/// commands that publish or subscribe declare them: Redis's ACLs check no others.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Channels {
    /// The first channel's argument.
    pub first: usize,
    /// How many (0: every argument from `first`).
    pub count: usize,
    /// The arguments are patterns (PSUBSCRIBE).
    pub pattern: bool,
}

impl Channels {
    /// Every argument from the first is a channel (SUBSCRIBE, SSUBSCRIBE).
    pub const ALL: Channels = Channels {
        first: 1,
        count: 0,
        pattern: false,
    };
    /// Every argument from the first is a pattern (PSUBSCRIBE).
    pub const PATTERNS: Channels = Channels {
        first: 1,
        count: 0,
        pattern: true,
    };
    /// The first argument is the channel (PUBLISH, SPUBLISH).
    pub const FIRST: Channels = Channels {
        first: 1,
        count: 1,
        pattern: false,
    };

    /// The channels of a command line, and whether each is a pattern.
    pub fn of<'a>(&self, argv: &'a [Bytes]) -> Vec<(&'a [u8], bool)> {
        let rest = argv.get(self.first..).unwrap_or_default();
        let n = if self.count == 0 {
            rest.len()
        } else {
            self.count
        };
        rest.iter()
            .take(n)
            .map(|c| (c.as_ref(), self.pattern))
            .collect()
    }
}

/// COMMAND GETKEYSANDFLAGS's flags of one key (a set, as Redis 7 sends it).
pub fn flags_reply(flags: KeyFlags) -> Reply {
    Reply::Set(flags.names().map(|f| Reply::Simple(f.into())).collect())
}

fn map(fields: Vec<(&str, Reply)>) -> Reply {
    Reply::Map(
        fields
            .into_iter()
            .map(|(k, v)| (Reply::text(k), v))
            .collect(),
    )
}

/// COMMAND INFO's key specs field (a set of maps, as Redis 7 sends it).
pub fn reply(specs: &[KeySpec]) -> Reply {
    Reply::Set(specs.iter().map(spec_reply).collect())
}

fn spec_reply(k: &KeySpec) -> Reply {
    let (btype, bspec) = match &k.begin {
        Begin::Index(i) => ("index", vec![("index", Reply::Int(*i))]),
        Begin::Keyword { keyword, from } => (
            "keyword",
            vec![
                ("keyword", Reply::text(keyword)),
                ("startfrom", Reply::Int(*from)),
            ],
        ),
        Begin::Unknown => ("unknown", vec![]),
    };
    let (ftype, fspec) = match &k.find {
        Find::Range { last, step, limit } => (
            "range",
            vec![
                ("lastkey", Reply::Int(*last)),
                ("keystep", Reply::Int(*step)),
                ("limit", Reply::Int(*limit)),
            ],
        ),
        Find::KeyNum { index, first, step } => (
            "keynum",
            vec![
                ("keynumidx", Reply::Int(*index)),
                ("firstkey", Reply::Int(*first)),
                ("keystep", Reply::Int(*step)),
            ],
        ),
        Find::Unknown => ("unknown", vec![]),
    };
    map(vec![
        (
            "flags",
            Reply::Set(k.flags.iter().map(|f| Reply::Simple(f.clone())).collect()),
        ),
        (
            "begin_search",
            map(vec![("type", Reply::text(btype)), ("spec", map(bspec))]),
        ),
        (
            "find_keys",
            map(vec![("type", Reply::text(ftype)), ("spec", map(fspec))]),
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notation_reads_every_form() {
        let specs = parse(
            "RW,access,delete@i1/r0,1,0 OW,update@kSTORE,6/r0,1,0 RO,access@i2/n0,1,1 RO@?/?",
        )
        .unwrap();
        assert_eq!(specs.len(), 4);
        assert_eq!(specs[0].begin, Begin::Index(1));
        assert!(specs[0].reads() && specs[0].writes());
        assert_eq!(
            specs[1].begin,
            Begin::Keyword {
                keyword: "STORE".into(),
                from: 6
            }
        );
        assert!(!specs[1].reads() && specs[1].writes());
        assert_eq!(
            specs[2].find,
            Find::KeyNum {
                index: 0,
                first: 1,
                step: 1
            }
        );
        assert!(specs[2].reads() && !specs[2].writes());
        assert_eq!(
            (specs[3].begin.clone(), specs[3].find.clone()),
            (Begin::Unknown, Find::Unknown)
        );
        assert_eq!(parse("").unwrap(), vec![]);
    }

    use crate::cmd::test_argv as line;

    /// The key positions `notation`'s specs find in `words`, or None where Redis gives up.
    fn found(notation: &str, words: &str) -> Option<Vec<usize>> {
        let specs = parse(notation).unwrap();
        find(&specs, &line(words)).map(|keys| {
            keys.iter()
                .map(|k| match k.at {
                    KeyAt::Arg(i) => i,
                    KeyAt::Every => usize::MAX,
                })
                .collect()
        })
    }

    /// The evaluator follows Redis's `getKeysUsingKeySpecs`: index and keyword begins
    /// (a negative start searches back from the end), ranges with a limit, keynum with a
    /// step, and the cases where Redis gives up or skips a spec.
    #[test]
    fn specs_find_keys_as_redis_does() {
        // XREAD: keyword STREAMS, the rest split in two halves (limit 2).
        let xread = "RO,access@kSTREAMS,1/r-1,1,2";
        assert_eq!(
            found(xread, "XREAD COUNT 2 STREAMS a b 0 0"),
            Some(vec![4, 5])
        );
        assert_eq!(found(xread, "XREAD STREAMS a 0"), Some(vec![2]));
        // A missing keyword skips the spec.
        assert_eq!(found(xread, "XREAD COUNT 2"), Some(vec![]));
        // MIGRATE's KEYS, searched back from the second-last argument: the last KEYS wins.
        let migrate = "RW,access,delete@kKEYS,-2/r-1,1,0";
        assert_eq!(found(migrate, "M h p x 0 5 KEYS a b"), Some(vec![7, 8]));
        assert_eq!(found(migrate, "M KEYS x KEYS b"), Some(vec![4]));
        // Argument 1 is not looked at searching backwards, nor the last searching forwards.
        assert_eq!(found(migrate, "M KEYS b"), Some(vec![]));
        assert_eq!(found("RW@kKEYS,1/r0,1,0", "M a KEYS"), Some(vec![]));
        // A range with a step (MSET) and a fixed range (LCS).
        assert_eq!(
            found("OW,update@i1/r-1,2,0", "MSET a 1 b 2"),
            Some(vec![1, 3])
        );
        assert_eq!(found("RO,access@i1/r1,1,0", "LCS a b"), Some(vec![1, 2]));
        // keynum: the count at `index` after the begin, the keys `first` after it, `step`
        // apart.
        let zunion = "OW,update@i1/r0,1,0 RO,access@i2/n0,1,1";
        assert_eq!(found(zunion, "Z d 2 a b WEIGHTS 1 2"), Some(vec![1, 3, 4]));
        assert_eq!(found("RW@i1/n0,1,2", "C 2 a x b y"), Some(vec![2, 4]));
        assert_eq!(
            found("RW@kKEYS,2/n0,1,1", "MLOCK o KEYS 2 a b"),
            Some(vec![4, 5])
        );
        // A bad numkeys makes Redis give up on every spec: zero, negative, not a number,
        // past the end, missing.
        for bad in [
            "Z d 0 a",
            "Z d -1 a",
            "Z d x a",
            "Z d 01 a",
            "Z d 3 a b",
            "Z d",
        ] {
            assert_eq!(found(zunion, bad), None, "{bad}");
        }
        // A first or last key past the end; an unknown or incomplete spec.
        assert_eq!(found("RO@i1/r1,1,0", "LCS a"), None);
        assert_eq!(found("RO@i1/r0,1,0 OW@?/?", "SORT l"), None);
        assert_eq!(found("RO,incomplete@i1/r0,1,0", "X k"), None);
        // `not_key` specs are skipped.
        assert_eq!(found("not_key@i1/r0,1,0", "SPUBLISH ch m"), Some(vec![]));
        // Huge numbers do not overflow.
        assert_eq!(found(zunion, "Z d 9223372036854775807 a"), None);
        assert_eq!(found("RW@i1/n0,1,9223372036854775807", "C 2 a b"), None);
    }

    /// Keys without a command line take their flags from the specs in order.
    #[test]
    fn layout_follows_the_specs() {
        let lmove = crate::cmd::lookup("lmove").unwrap();
        let rw = KeyFlags::RW.with(KeyFlags::ACCESS).with(KeyFlags::DELETE);
        let ins = KeyFlags::RW.with(KeyFlags::INSERT);
        assert_eq!(layout(lmove, 2), vec![rw, ins]);
        let zu = crate::cmd::lookup("zunionstore").unwrap();
        let ro = KeyFlags::RO.with(KeyFlags::ACCESS);
        assert_eq!(
            layout(zu, 3),
            vec![KeyFlags::OW.with(KeyFlags::UPDATE), ro, ro]
        );
        assert_eq!(KeyFlags::NONE.names().count(), 0);
        assert_eq!(
            rw.names().collect::<Vec<_>>(),
            vec!["RW", "access", "delete"]
        );
    }

    #[test]
    fn bad_notation_is_an_error() {
        for bad in [
            "RW",
            "RW@i1",
            "XX@i1/r0,1,0",
            "RW@x1/r0,1,0",
            "RW@i1/r0,1",
            "RW@kSTORE/r0,1,0",
        ] {
            assert!(parse(bad).is_err(), "{bad} parsed");
        }
    }
}
