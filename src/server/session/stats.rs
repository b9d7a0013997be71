//! What sessions count for INFO, as Redis 7 counts it: calls, time, rejections and failures
//! per command (`# Commandstats`), error replies by their first word (`# Errorstats`), bytes
//! in and out, and the 100 ms samples behind the `instantaneous_*` rates.
//!
//! A session collects its commands' outcomes in a [`Local`] and merges them into the shared
//! [`CommandTable`] once per batch of replies, so the table's lock is taken once per batch,
//! not once per command.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use bytes::Bytes;

use crate::cmd::info::CmdCounts;
use crate::resp::Reply;

/// Redis's ERROR_STATS_NUMBER: errorstats stops adding new prefixes after this many.
const MAX_ERROR_PREFIXES: usize = 128;

/// The most command names commandstats keeps (Redis has a fixed table; this bounds what
/// unexpected subcommand names could add).
const MAX_COMMAND_NAMES: usize = 1024;

/// Redis's STATS_METRIC_SAMPLES: the instantaneous rates average this many samples.
const SAMPLES: usize = 16;

/// The name a command is counted under: its table name, with `|subcommand` for a container
/// command given one (`client|setname`), as Redis names them.
pub fn stat_name(spec_name: &str, argv: &[Bytes]) -> String {
    match argv.get(1) {
        // A container (its table row lists subcommands) is counted per subcommand.
        Some(sub) if crate::cmd::lookup(spec_name).is_some_and(|s| !s.subcommands.is_empty()) => {
            format!(
                "{spec_name}|{}",
                String::from_utf8_lossy(sub).to_lowercase()
            )
        }
        _ => spec_name.to_string(),
    }
}

/// The errorstats prefix of an error reply's text, as Redis's `afterErrorReply` takes it:
/// the first word, if a space ends it within Redis's first 32 bytes (which include the `-`),
/// and `ERR` otherwise.
pub fn error_prefix(text: &str) -> &str {
    let head = &text.as_bytes()[..text.len().min(31)];
    match head.iter().position(|&b| b == b' ') {
        Some(end) => &text[..end],
        None => "ERR",
    }
}

/// True for the reply to an unknown subcommand, which Redis counts under no command.
fn unknown_subcommand(reply: &Reply) -> bool {
    matches!(reply, Reply::Error(e) if e.starts_with("ERR unknown subcommand"))
}

/// How a command ended, for its counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Executed: `calls` (and `failed_calls` if its reply is an error).
    Called,
    /// Refused before execution (arity, NOAUTH, not allowed while subscribed).
    Rejected,
    /// Counted under no command: unknown, or queued inside MULTI (EXEC counts it).
    Uncounted,
}

/// One command still waiting for its replies.
struct Mark {
    /// The session's reply count once this command's replies are all out.
    upto: u64,
    name: String,
    outcome: Outcome,
    start: Instant,
}

/// A session's counts since its last merge, and the commands whose replies are pending.
#[derive(Default)]
pub struct Local {
    marks: std::collections::VecDeque<Mark>,
    /// Replies finished so far on this connection.
    done: u64,
    /// An error among the replies of the command being finished.
    failed: bool,
    /// The command being finished answered "unknown subcommand".
    unknown_sub: bool,
    cmds: Vec<(String, CmdCounts)>,
    errors: Vec<String>,
    executed: u64,
}

impl Local {
    /// Registers a command whose replies end once `pending` more replies are finished.
    pub fn begin(&mut self, name: String, outcome: Outcome, start: Instant, pending: usize) {
        let upto = self.done + pending as u64;
        self.marks.push_back(Mark {
            upto,
            name,
            outcome,
            start,
        });
    }

    /// Notes one finished reply (in order) and closes the commands it completes.
    pub fn reply(&mut self, reply: &Reply) {
        self.done += 1;
        if let Reply::Error(e) = reply {
            self.failed = true;
            self.unknown_sub |= unknown_subcommand(reply);
            self.error(e);
        }
        self.close_done();
    }

    /// Counts an error reply in errorstats (replies that are not slots: protocol errors, the
    /// replies of commands inside EXEC).
    pub fn error(&mut self, text: &str) {
        self.errors.push(error_prefix(text).to_string());
    }

    /// Counts a command executed inside EXEC: its call and failure (its time is EXEC's).
    pub fn inner_call(&mut self, name: String, reply: &Reply) {
        if unknown_subcommand(reply) {
            return;
        }
        if let Reply::Error(e) = reply {
            self.error(e);
        }
        self.count(name, Outcome::Called, 0, reply.is_error());
    }

    /// Closes every command whose replies are all finished.
    pub fn close_done(&mut self) {
        while self.marks.front().is_some_and(|m| m.upto <= self.done) {
            let Some(m) = self.marks.pop_front() else {
                break;
            };
            let failed = std::mem::take(&mut self.failed);
            if std::mem::take(&mut self.unknown_sub) {
                continue;
            }
            let usec = m.start.elapsed().as_micros() as u64;
            self.count(m.name, m.outcome, usec, failed);
        }
    }

    fn count(&mut self, name: String, outcome: Outcome, usec: u64, failed: bool) {
        let mut c = CmdCounts::default();
        match outcome {
            Outcome::Uncounted => return,
            Outcome::Rejected => c.rejected = 1,
            Outcome::Called => {
                c.calls = 1;
                c.usec = usec;
                c.failed = failed as u64;
                self.executed += 1;
            }
        }
        self.cmds.push((name, c));
    }

    /// Moves what was counted into the shared table.
    pub fn merge_into(&mut self, table: &CommandTable) {
        if self.cmds.is_empty() && self.errors.is_empty() {
            return;
        }
        table.merge(self);
    }
}

#[derive(Default)]
struct Tables {
    cmds: HashMap<String, CmdCounts>,
    errors: BTreeMap<String, u64>,
}

/// The server's commandstats and errorstats, and their totals.
#[derive(Default)]
pub struct CommandTable {
    tables: Mutex<Tables>,
    /// Commands executed (INFO `total_commands_processed`): as in Redis, not the unknown or
    /// rejected ones.
    executed: AtomicU64,
    /// Error replies sent (INFO `total_error_replies`).
    error_replies: AtomicU64,
}

impl CommandTable {
    fn merge(&self, local: &mut Local) {
        self.executed
            .fetch_add(std::mem::take(&mut local.executed), Ordering::Relaxed);
        self.error_replies
            .fetch_add(local.errors.len() as u64, Ordering::Relaxed);
        let Ok(mut t) = self.tables.lock() else {
            return;
        };
        let t = &mut *t;
        for (name, c) in local.cmds.drain(..) {
            let full = t.cmds.len() >= MAX_COMMAND_NAMES;
            match t.cmds.get_mut(&name) {
                Some(have) => have.add(&c),
                None if !full => {
                    t.cmds.insert(name, c);
                }
                None => {}
            }
        }
        for prefix in local.errors.drain(..) {
            let full = t.errors.len() >= MAX_ERROR_PREFIXES;
            match t.errors.get_mut(&prefix) {
                Some(n) => *n += 1,
                None if !full => {
                    t.errors.insert(prefix, 1);
                }
                None => {}
            }
        }
    }

    /// Commands executed since start (or the last reset).
    pub fn executed(&self) -> u64 {
        self.executed.load(Ordering::Relaxed)
    }

    /// Error replies sent since start (or the last reset).
    pub fn error_replies(&self) -> u64 {
        self.error_replies.load(Ordering::Relaxed)
    }

    /// Every counted command, sorted by name.
    pub fn commands(&self) -> Vec<(String, CmdCounts)> {
        let Ok(t) = self.tables.lock() else {
            return Vec::new();
        };
        let mut v: Vec<_> = t.cmds.iter().map(|(k, c)| (k.clone(), *c)).collect();
        v.sort();
        v
    }

    /// Error counts by prefix, sorted.
    pub fn errors(&self) -> Vec<(String, u64)> {
        let Ok(t) = self.tables.lock() else {
            return Vec::new();
        };
        t.errors.iter().map(|(k, n)| (k.clone(), *n)).collect()
    }

    /// Forgets every count (CONFIG RESETSTAT).
    pub fn reset(&self) {
        if let Ok(mut t) = self.tables.lock() {
            *t = Tables::default();
        }
        self.executed.store(0, Ordering::Relaxed);
        self.error_replies.store(0, Ordering::Relaxed);
    }
}

/// One instantaneous rate: per-second samples of a counter, taken every 100 ms, averaged over
/// the last 16 (Redis's `trackInstantaneousMetric`).
#[derive(Default)]
struct Rate {
    last: Option<(Instant, u64)>,
    samples: [f64; SAMPLES],
    next: usize,
}

impl Rate {
    fn sample(&mut self, now: Instant, value: u64) {
        if let Some((at, before)) = self.last {
            let ms = now.duration_since(at).as_millis().max(1) as f64;
            self.samples[self.next] = value.saturating_sub(before) as f64 * 1000.0 / ms;
            self.next = (self.next + 1) % SAMPLES;
        }
        self.last = Some((now, value));
    }

    fn per_sec(&self) -> f64 {
        self.samples.iter().sum::<f64>() / SAMPLES as f64
    }
}

/// The instantaneous rates of INFO stats.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Rates {
    /// Commands per second (`instantaneous_ops_per_sec`).
    pub ops: u64,
    /// KiB per second read from clients (`instantaneous_input_kbps`).
    pub input_kbps: f64,
    /// KiB per second written to clients (`instantaneous_output_kbps`).
    pub output_kbps: f64,
}

/// Bytes to and from clients, and the sampler of the instantaneous rates.
#[derive(Default)]
pub struct Traffic {
    /// Bytes read from client connections.
    pub input: AtomicU64,
    /// Bytes written to client connections.
    pub output: AtomicU64,
    rates: Mutex<[Rate; 3]>,
}

impl Traffic {
    /// Takes one sample of each rate (the server calls it every 100 ms).
    pub fn sample(&self, now: Instant, commands: u64) {
        let input = self.input.load(Ordering::Relaxed);
        let output = self.output.load(Ordering::Relaxed);
        if let Ok(mut r) = self.rates.lock() {
            r[0].sample(now, commands);
            r[1].sample(now, input);
            r[2].sample(now, output);
        }
    }

    /// The current rates.
    pub fn rates(&self) -> Rates {
        let Ok(r) = self.rates.lock() else {
            return Rates::default();
        };
        Rates {
            ops: r[0].per_sec().round() as u64,
            input_kbps: r[1].per_sec() / 1024.0,
            output_kbps: r[2].per_sec() / 1024.0,
        }
    }

    /// Forgets the byte counts and the samples (CONFIG RESETSTAT).
    pub fn reset(&self) {
        self.input.store(0, Ordering::Relaxed);
        self.output.store(0, Ordering::Relaxed);
        if let Ok(mut r) = self.rates.lock() {
            *r = Default::default();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_as_redis_takes_them() {
        assert_eq!(error_prefix("ERR syntax error"), "ERR");
        assert_eq!(
            error_prefix("WRONGTYPE Operation against a key"),
            "WRONGTYPE"
        );
        assert_eq!(error_prefix("NOSPACE"), "ERR");
        assert_eq!(error_prefix(&format!("{} x", "A".repeat(31))), "ERR");
        assert_eq!(
            error_prefix(&format!("{} x", "A".repeat(30))),
            "A".repeat(30)
        );
    }

    #[test]
    fn names_of_subcommands() {
        let argv = crate::cmd::test_argv;
        assert_eq!(
            stat_name("client", &argv("CLIENT SetName x")),
            "client|setname"
        );
        assert_eq!(stat_name("command", &argv("COMMAND")), "command");
        assert_eq!(stat_name("get", &argv("GET k")), "get");
    }

    #[test]
    fn a_batch_counts_calls_failures_rejections_and_errors() {
        let table = CommandTable::default();
        let mut l = Local::default();
        let t = Instant::now();
        l.begin("get".into(), Outcome::Called, t, 1);
        l.begin("get".into(), Outcome::Rejected, t, 2);
        l.begin("foo".into(), Outcome::Uncounted, t, 3);
        l.begin("client|bogus".into(), Outcome::Called, t, 4);
        l.begin("incr".into(), Outcome::Called, t, 5);
        l.reply(&Reply::Nil);
        l.reply(&Reply::err(
            "ERR wrong number of arguments for 'get' command",
        ));
        l.reply(&Reply::err("ERR unknown command 'foo'"));
        l.reply(&Reply::err(
            "ERR unknown subcommand 'bogus'. Try CLIENT HELP.",
        ));
        l.reply(&Reply::err("WRONGTYPE Operation"));
        l.inner_call("set".into(), &Reply::ok());
        l.merge_into(&table);
        let cmds = table.commands();
        let names: Vec<&str> = cmds.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["get", "incr", "set"]);
        let get = cmds[0].1;
        assert_eq!((get.calls, get.rejected, get.failed), (1, 1, 0));
        assert_eq!((cmds[1].1.calls, cmds[1].1.failed), (1, 1));
        assert_eq!(table.executed(), 3);
        assert_eq!(table.error_replies(), 4);
        assert_eq!(
            table.errors(),
            vec![("ERR".to_string(), 3), ("WRONGTYPE".to_string(), 1)]
        );
        table.reset();
        assert!(table.commands().is_empty() && table.errors().is_empty());
        assert_eq!(table.executed(), 0);
    }

    #[test]
    fn rates_average_sixteen_samples() {
        let traffic = Traffic::default();
        let t0 = Instant::now();
        let step = std::time::Duration::from_millis(100);
        traffic.sample(t0, 0);
        // 10 commands and 1024 bytes in each 100 ms: 100 ops/s and 10 KiB/s, once all 16
        // samples are in; after one sample, a sixteenth of that.
        traffic.input.store(1024, Ordering::Relaxed);
        traffic.sample(t0 + step, 10);
        assert_eq!(traffic.rates().ops, 6);
        for i in 2..=17u32 {
            traffic.input.store(1024 * i as u64, Ordering::Relaxed);
            traffic.sample(t0 + step * i, 10 * i as u64);
        }
        let r = traffic.rates();
        assert_eq!(r.ops, 100);
        assert!((r.input_kbps - 10.0).abs() < 1e-9, "{r:?}");
        assert_eq!(r.output_kbps, 0.0);
    }
}
