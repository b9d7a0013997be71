//! `KEYS pattern`, `SCAN cursor [MATCH pattern] [COUNT n] [TYPE type]` and `DBSIZE`.
//!
//! Keys come back in sorted order, so results are deterministic on every replica. The SCAN
//! cursor is an offset into that order: a key deleted during a scan can make later keys
//! shift below the cursor and be skipped (documented in docs/).

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::registry::flags::{READ, READ_FAST};
use super::registry::{Replicated, Spec, NO_KEYS};
use super::{Command, Request};
use crate::resp::args::syntax_error;
use crate::resp::{Args, Reply};
use crate::state::{pattern, Keyspace};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new("dbsize", 1, READ_FAST, NO_KEYS, parse_dbsize).docs(
        "Count the keys in the database",
        "1.0.0",
        "server",
    ),
    Spec::new("keys", 2, READ, NO_KEYS, parse).docs(
        "List the keys matching a glob pattern",
        "1.0.0",
        "generic",
    ),
    Spec::new("scan", -2, READ, NO_KEYS, parse_scan).docs(
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
    Ok(Request::Read(Command::Keys(Keys {
        pattern: args.arg()?,
    })))
}

impl Replicated for Keys {
    fn is_read(&self) -> bool {
        true
    }

    /// Lists matching live keys.
    fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        let all = self.pattern.as_ref() == b"*";
        let keys = ks
            .live_keys(now)
            .filter(|(k, _)| all || pattern::matches(&self.pattern, k));
        Reply::Array(keys.map(|(k, _)| Reply::Bulk(k.clone())).collect())
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
    Ok(Request::Read(Command::Scan(scan)))
}

impl Replicated for Scan {
    fn is_read(&self) -> bool {
        true
    }

    /// Returns `[next-cursor, [keys]]`.
    fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        let start = self.cursor as usize;
        let mut visited = 0usize;
        let mut out = Vec::new();
        for (k, e) in ks.live_keys(now).skip(start).take(self.count) {
            visited += 1;
            let by_pattern = self.pattern.as_ref().is_none_or(|p| pattern::matches(p, k));
            let by_type = self
                .type_name
                .as_deref()
                .is_none_or(|t| t == e.value.type_name());
            if by_pattern && by_type {
                out.push(Reply::Bulk(k.clone()));
            }
        }
        let next = if visited < self.count {
            0
        } else {
            start + visited
        };
        let next = if next >= ks.live_len(now) { 0 } else { next };
        Reply::Array(vec![Reply::bulk(next.to_string()), Reply::Array(out)])
    }
}

/// `DBSIZE`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DbSize;

/// Parses DBSIZE.
pub fn parse_dbsize(_: &mut Args) -> Result<Request, Reply> {
    Ok(Request::Read(Command::DbSize(DbSize)))
}

impl Replicated for DbSize {
    fn is_read(&self) -> bool {
        true
    }

    /// Counts live keys.
    fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        Reply::Int(ks.live_len(now) as i64)
    }
}
