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
    if let Some(bad) = flags.iter().find(|f| !FLAGS.contains(&f.as_str())) {
        return Err(format!("{item}: unknown flag '{bad}'"));
    }
    Ok(KeySpec {
        flags,
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
