//! `LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]`: the longest common
//! subsequence of two strings, by Redis 7.0's own dynamic programme (the same table and the
//! same walk back through it, so ties pick the same subsequence and ranges).

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::cmd::registry::flags::READ;
use crate::cmd::registry::{none, Replicated, Spec, Touches};
use crate::cmd::strings::MAX_STRING;
use crate::cmd::{Command, Request};
use crate::resp::args::{parse_i64, syntax_error, NOT_INTEGER};
use crate::resp::{Args, Reply};
use crate::state::{Keyspace, Value};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[Spec::new("lcs", -3, READ, (1, 2, 1), parse)
    .key_specs("RO,access@i1/r1,1,0")
    .args("key1:key key2:key LEN? IDX? MINMATCHLEN=len:integer? WITHMATCHLEN?")
    .docs(
        "Find the longest common subsequence of two strings",
        "7.0.0",
        "string",
    )];

/// LCS and its options as sent: Redis checks both keys' types before it parses them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lcs {
    /// The first key.
    pub a: Bytes,
    /// The second key.
    pub b: Bytes,
    /// The options.
    pub opts: Vec<Bytes>,
}

/// Parses LCS.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    let (a, b) = (args.arg()?, args.arg()?);
    Ok(Request::Data(Command::Lcs(Lcs {
        a,
        b,
        opts: args.rest(),
    })))
}

struct Options {
    len: bool,
    idx: bool,
    min: i64,
    with_len: bool,
}

fn options(opts: &[Bytes]) -> Result<Options, Reply> {
    let mut o = Options {
        len: false,
        idx: false,
        min: 0,
        with_len: false,
    };
    let mut i = 0;
    while i < opts.len() {
        let opt = String::from_utf8_lossy(&opts[i]).to_ascii_uppercase();
        match opt.as_str() {
            "IDX" => o.idx = true,
            "LEN" => o.len = true,
            "WITHMATCHLEN" => o.with_len = true,
            "MINMATCHLEN" if i + 1 < opts.len() => {
                o.min = parse_i64(&opts[i + 1])
                    .ok_or_else(|| Reply::err(NOT_INTEGER))?
                    .max(0);
                i += 1;
            }
            _ => return Err(syntax_error()),
        }
        i += 1;
    }
    if o.idx && o.len {
        return Err(Reply::err(
            "ERR If you want both the length and indexes, please just use IDX.",
        ));
    }
    Ok(o)
}

fn lcs(a: &[u8], b: &[u8], o: &Options) -> Reply {
    let (alen, blen) = (a.len(), b.len());
    let cells = (alen as u64 + 1) * (blen as u64 + 1);
    if cells.saturating_mul(4) > MAX_STRING {
        return Reply::err(
            "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
        );
    }
    let w = blen + 1;
    let mut t = vec![0u32; cells as usize];
    for i in 1..=alen {
        for j in 1..=blen {
            t[i * w + j] = if a[i - 1] == b[j - 1] {
                t[(i - 1) * w + j - 1] + 1
            } else {
                t[(i - 1) * w + j].max(t[i * w + j - 1])
            };
        }
    }
    let total = t[alen * w + blen];
    let mut idx = total as usize;
    let mut result = vec![0u8; idx];
    let mut matches = Vec::new();
    // `alen` in arange_start means "no range open", as in Redis.
    let (mut a_start, mut a_end, mut b_start, mut b_end) = (alen, 0, 0, 0);
    let (mut i, mut j) = (alen, blen);
    let compute = o.idx || !o.len;
    while compute && i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            result[idx - 1] = a[i - 1];
            if a_start == alen {
                (a_start, a_end, b_start, b_end) = (i - 1, i - 1, j - 1, j - 1);
            } else if a_start == i && b_start == j {
                a_start -= 1;
                b_start -= 1;
            } else {
                emit = true;
            }
            if a_start == 0 || b_start == 0 {
                emit = true;
            }
            idx -= 1;
            i -= 1;
            j -= 1;
        } else {
            if t[(i - 1) * w + j] > t[i * w + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
            if a_start != alen {
                emit = true;
            }
        }
        let match_len = (a_end as i64) - (a_start as i64) + 1;
        if emit {
            if o.idx && (o.min == 0 || match_len >= o.min) {
                let pair = |s: usize, e: usize| {
                    Reply::Array(vec![Reply::Int(s as i64), Reply::Int(e as i64)])
                };
                let mut m = vec![pair(a_start, a_end), pair(b_start, b_end)];
                if o.with_len {
                    m.push(Reply::Int(match_len));
                }
                matches.push(Reply::Array(m));
            }
            a_start = alen;
        }
    }
    if o.idx {
        Reply::Map(vec![
            (Reply::text("matches"), Reply::Array(matches)),
            (Reply::text("len"), Reply::Int(total as i64)),
        ])
    } else if o.len {
        Reply::Int(idx as i64)
    } else {
        Reply::Bulk(Bytes::from(result))
    }
}

impl Replicated for Lcs {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["lcs"], vec![&self.a[..], &self.b[..]], none()))
    }

    fn is_read(&self) -> bool {
        true
    }

    /// Answers the read at `now`; a missing key is an empty string.
    fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        let value = |k: &Bytes| match ks.get(k, now).map(|e| &e.value) {
            None => Ok(Bytes::new()),
            Some(Value::Str(v)) => Ok(v.clone()),
            Some(_) => Err(()),
        };
        let (Ok(a), Ok(b)) = (value(&self.a), value(&self.b)) else {
            return Reply::err("ERR The specified keys must contain string values");
        };
        match options(&self.opts) {
            Err(e) => e,
            Ok(o) => lcs(&a, &b, &o),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_docs_example() {
        let o = |idx, len, min, with_len| Options {
            len,
            idx,
            min,
            with_len,
        };
        let (a, b) = (b"ohmytext", b"mynewtext");
        assert_eq!(lcs(a, b, &o(false, false, 0, false)), Reply::bulk("mytext"));
        assert_eq!(lcs(a, b, &o(false, true, 0, false)), Reply::Int(6));
        let Reply::Map(m) = lcs(a, b, &o(true, false, 4, true)) else {
            panic!("a map")
        };
        let pair = |s, e| Reply::Array(vec![Reply::Int(s), Reply::Int(e)]);
        assert_eq!(
            m[0].1,
            Reply::Array(vec![Reply::Array(vec![
                pair(4, 7),
                pair(5, 8),
                Reply::Int(4)
            ])])
        );
        assert_eq!(m[1].1, Reply::Int(6));
    }
}
