//! One operation of a chaos run as a client process recorded it (what it invoked, when, and
//! how it ended), and the JSON-lines files a run's history is kept in.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// How an operation ended.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The server answered and the operation took effect (or, for a read, returned `result`).
    Ok,
    /// The server answered with a definite refusal (`-FENCED`, a nil LOCK is `Ok`).
    Fail,
    /// No answer, or `-TIMEOUT`/`-TRYAGAIN`/`-CLUSTERDOWN`: it may or may not have happened.
    Unknown,
}

/// One recorded operation. Times are microseconds since the run started, taken from the
/// machine's clock, which every client process and the harness share.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Op {
    /// The client (process) that ran it.
    pub client: u32,
    /// The command, lower case (`lock`, `fencedget`, `set`, ...).
    pub f: String,
    /// The key it worked on.
    pub key: String,
    /// The value written, or the lock owner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arg: Option<String>,
    /// The fencing token sent (FENCEDGET, FENCEDSET).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<i64>,
    /// Invocation time.
    pub inv: u64,
    /// Completion time (for `Unknown`: when the client gave up waiting).
    pub ret: u64,
    /// How it ended.
    pub outcome: Outcome,
    /// What it returned: the value read, the token granted, an integer reply; `None` is nil.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
}

impl Op {
    /// The result parsed as an integer.
    pub fn result_i64(&self) -> Option<i64> {
        self.result.as_deref().and_then(|r| r.parse().ok())
    }

    /// The argument parsed as an integer.
    pub fn arg_i64(&self) -> Option<i64> {
        self.arg.as_deref().and_then(|r| r.parse().ok())
    }

    /// One line for reports.
    pub fn describe(&self) -> String {
        format!(
            "[{:>9.3}s..{:>9.3}s] c{} {} {} {}{} -> {:?} {}",
            self.inv as f64 / 1e6,
            self.ret as f64 / 1e6,
            self.client,
            self.f,
            self.key,
            self.arg.as_deref().unwrap_or(""),
            self.token
                .map(|t| format!(" token={t}"))
                .unwrap_or_default(),
            self.outcome,
            self.result.as_deref().unwrap_or("nil"),
        )
    }
}

/// Microseconds since the Unix epoch.
pub fn unix_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// Reads a JSON-lines file of records; a torn last line (a killed writer) is skipped.
pub fn read_jsonl<T: for<'de> Deserialize<'de>>(path: &Path) -> Vec<T> {
    let Ok(f) = File::open(path) else {
        return Vec::new();
    };
    BufReader::new(f)
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| serde_json::from_str(&l).ok())
        .collect()
}

/// Writes records as JSON lines.
pub fn write_jsonl<T: Serialize>(path: &Path, items: &[T]) {
    let mut f = std::io::BufWriter::new(File::create(path).expect("create jsonl"));
    for it in items {
        let line = serde_json::to_string(it).expect("serialize");
        writeln!(f, "{line}").expect("write jsonl");
    }
    f.flush().expect("flush jsonl");
}
