//! `CONFIG GET pattern [pattern ...]`, `CONFIG SET parameter value [parameter value ...]`,
//! `CONFIG RESETSTAT`, `CONFIG REWRITE`, `CONFIG HELP`: the node's settings under Redis's
//! names, with Redis 7's replies and error texts.
//!
//! [`PARAMS`] is the list of parameters. Each has a [`Effect`]:
//!
//! - **live**: `CONFIG SET` changes the running node (`maxclients`, the request-size limits,
//!   `requirepass`, `loglevel`, the slow log's two settings, `lock-delay-ms`,
//!   `protected-mode`, `timeout`, `client-output-buffer-limit`, `notify-keyspace-events`);
//! - **stored**: Redis's encoding and tuning parameters, which mean nothing to Palisade's
//!   storage. `CONFIG SET` checks the value as Redis does and keeps it, and `CONFIG GET`
//!   shows it; the encoding thresholds also shape what `OBJECT ENCODING` reports;
//! - **ignored**: persistence parameters whose answer is a fact of Palisade (`save ""`,
//!   `appendonly yes`, `appendfsync always`: every write is fsync'd before its reply). A
//!   valid `CONFIG SET` is accepted, and `CONFIG GET` keeps telling the truth;
//! - **fixed**: what Palisade cannot do (`maxmemory`, `latency-monitor-threshold`):
//!   `CONFIG SET` accepts only the value it has and refuses any other;
//! - **immutable** or **protected**: set at start (the flags), refused by `CONFIG SET` with
//!   Redis's text.
//!
//! The values live in a [`Store`] that the server owns; the settings it reads on its hot paths
//! are mirrored in atomics ([`Live`]).

use std::collections::BTreeMap;
pub mod obuf;

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{OnceLock, RwLock};

use bytes::Bytes;

use crate::cmd::connection::ConnCmd;
use crate::cmd::registry::{Spec, NO_KEYS};
use crate::cmd::Request;
use crate::resp::args::parse_i64;
use crate::resp::{Args, Reply};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[Spec::new("config", -2, &[], NO_KEYS, parse)
    .docs(
        "Read, change, reset or save the server's settings",
        "2.0.0",
        "server",
    )
    .subcommands(SUBCOMMANDS)];

/// CONFIG's subcommands (`config|name`): Redis's facts (`scripts/command-args.py
/// --subcommands config`).
const SUBCOMMANDS: &[Spec] = &[
    Spec::new(
        "get",
        -3,
        &["admin", "noscript", "loading", "stale"],
        NO_KEYS,
        parse,
    )
    .docs(
        "Read the settings matching one or more glob patterns",
        "2.0.0",
        "server",
    )
    .args("{parameter}*"),
    Spec::new("help", 2, &["loading", "stale"], NO_KEYS, parse).docs(
        "List the subcommands and what they take",
        "5.0.0",
        "server",
    ),
    Spec::new(
        "resetstat",
        2,
        &["admin", "noscript", "loading", "stale"],
        NO_KEYS,
        parse,
    )
    .docs("Reset the statistics INFO reports", "2.0.0", "server"),
    Spec::new(
        "rewrite",
        2,
        &["admin", "noscript", "loading", "stale"],
        NO_KEYS,
        parse,
    )
    .docs(
        "Write the running settings back to the configuration file",
        "2.8.0",
        "server",
    ),
    Spec::new(
        "set",
        -4,
        &["admin", "noscript", "loading", "stale"],
        NO_KEYS,
        parse,
    )
    .docs("Change one or more settings", "2.0.0", "server")
    .args("parameter_value@{parameter value}*"),
];

/// A parsed CONFIG subcommand.
#[derive(Debug, Clone, PartialEq)]
pub enum ConfigCmd {
    /// CONFIG GET with its patterns.
    Get(Vec<Bytes>),
    /// CONFIG SET with its (parameter, value) pairs.
    Set(Vec<(Bytes, Bytes)>),
    /// CONFIG RESETSTAT.
    ResetStat,
    /// CONFIG REWRITE.
    Rewrite,
}

/// Redis's wrong-arity error for subcommand `sub` of `cmd` (both lower-case).
pub fn sub_arity(cmd: &str, sub: &str) -> Reply {
    Reply::err(format!(
        "ERR wrong number of arguments for '{cmd}|{sub}' command"
    ))
}

/// The subcommand of a container command: as given (for error texts) and lower-cased.
pub fn subcommand(args: &mut Args) -> Result<(Bytes, String), Reply> {
    let raw = args.arg()?;
    let sub = String::from_utf8_lossy(&raw).to_lowercase();
    Ok((raw, sub))
}

const HELP: &[&str] = &[
    "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET <pattern>",
    "    Return parameters matching the glob-like <pattern> and their values.",
    "SET <directive> <value>",
    "    Set the configuration <directive> to <value>.",
    "RESETSTAT",
    "    Reset statistics reported by the INFO command.",
    "REWRITE",
    "    Rewrite the configuration file.",
    "HELP",
    "    Prints this help.",
];

/// A HELP reply: one status line per text line, as Redis's `addReplyHelp`.
pub fn help(lines: &[&str]) -> Reply {
    Reply::Array(lines.iter().map(|l| Reply::Simple((*l).into())).collect())
}

/// Redis's reply to an unknown subcommand of `cmd` (upper-case in the hint).
pub fn unknown_subcommand(raw: &[u8], cmd: &str) -> Reply {
    Reply::err(format!(
        "ERR unknown subcommand '{}'. Try {cmd} HELP.",
        String::from_utf8_lossy(raw)
    ))
}

/// Parses CONFIG.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    let (raw, sub) = subcommand(args)?;
    let n = args.remaining();
    let cmd = match sub.as_str() {
        "get" if n >= 1 => ConfigCmd::Get(args.rest()),
        "set" if n >= 2 && n.is_multiple_of(2) => {
            let rest = args.rest();
            ConfigCmd::Set(
                rest.chunks(2)
                    .map(|p| (p[0].clone(), p[1].clone()))
                    .collect(),
            )
        }
        // Redis checks the count first (arity), then the pairing.
        "set" if n >= 2 => return Err(crate::resp::args::syntax_error()),
        "resetstat" if n == 0 => ConfigCmd::ResetStat,
        "rewrite" if n == 0 => ConfigCmd::Rewrite,
        "help" if n == 0 => return Ok(Request::Conn(ConnCmd::Command(help(HELP)))),
        "get" | "set" | "resetstat" | "rewrite" | "help" => return Err(sub_arity("config", &sub)),
        _ => return Err(unknown_subcommand(&raw, "CONFIG")),
    };
    Ok(Request::Conn(ConnCmd::Config(cmd)))
}

/// What a value must look like, with Redis's parsing and error texts.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// `yes` or `no`.
    Bool,
    /// A strict integer in `min..=max`.
    Int(i64, i64),
    /// A byte count with an optional unit (`1mb`, `64k`), in `min..=max`.
    Memory(i64, i64),
    /// One of these words (case-insensitive; shown in lower case).
    Enum(&'static [&'static str]),
    /// Any text.
    Text,
    /// Redis's `save`: pairs of `seconds changes`, or empty.
    Save,
    /// Redis's `notify-keyspace-events` class characters.
    Events,
    /// Redis's `client-output-buffer-limit` (see [`obuf`]).
    OutputLimits,
}

/// What `CONFIG SET` does with a parameter (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Changes the running node.
    Live,
    /// Kept and shown, with no effect on storage.
    Stored,
    /// Accepted when valid; the value shown stays Palisade's.
    Ignored,
    /// Only the value it has is accepted.
    Fixed,
    /// Set at start; never by CONFIG SET.
    Immutable,
    /// As Redis's protected configs (`dir`): refused by CONFIG SET.
    Protected,
}

/// One parameter.
#[derive(Debug)]
pub struct Param {
    /// Its name, as CONFIG GET shows it.
    pub name: &'static str,
    /// Redis's older name for it (CONFIG GET and SET accept both; a glob matches both).
    pub alias: Option<&'static str>,
    /// Its values.
    pub kind: Kind,
    /// What CONFIG SET does.
    pub effect: Effect,
    /// Its value when the server supplies none at start.
    pub default: &'static str,
}

const fn p(name: &'static str, kind: Kind, effect: Effect, default: &'static str) -> Param {
    Param {
        name,
        alias: None,
        kind,
        effect,
        default,
    }
}

const fn aka(alias: &'static str, param: Param) -> Param {
    Param {
        alias: Some(alias),
        ..param
    }
}

const MAX: i64 = i64::MAX;
const MB: i64 = 1024 * 1024;
const LOG_LEVELS: &[&str] = &["debug", "verbose", "notice", "warning"];
const POLICIES: &[&str] = &[
    "volatile-lru",
    "volatile-lfu",
    "volatile-random",
    "volatile-ttl",
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "noeviction",
];

use Effect::*;
use Kind::*;

/// Every parameter CONFIG knows, in the order `CONFIG GET *` lists them. Palisade's own
/// settings that Redis lacks keep their flag names (`lock-delay-ms`, `node-id`, ...).
pub static PARAMS: &[Param] = &[
    // The node's own settings (flags and file keys of the same name).
    p("bind", Text, Immutable, "127.0.0.1"),
    p("port", Int(0, 65535), Immutable, "6379"),
    p("dir", Text, Protected, "./data"),
    p("requirepass", Text, Live, ""),
    p("aclfile", Text, Immutable, ""),
    p("maxclients", Int(1, u32::MAX as i64), Live, "10000"),
    p("proto-max-bulk-len", Memory(MB, MAX), Live, "536870912"),
    p(
        "client-query-buffer-limit",
        Memory(MB, MAX),
        Live,
        "1073741824",
    ),
    p("max-multibulk-len", Int(1, MAX), Live, "1048576"),
    p("loglevel", Enum(LOG_LEVELS), Live, "notice"),
    p("slowlog-log-slower-than", Int(-1, MAX), Live, "10000"),
    p("slowlog-max-len", Int(0, MAX), Live, "128"),
    p("lock-delay-ms", Int(0, MAX), Live, "0"),
    p("protected-mode", Bool, Live, "yes"),
    p("timeout", Int(0, i32::MAX as i64), Live, "0"),
    p(
        "client-output-buffer-limit",
        OutputLimits,
        Live,
        crate::cmd::config::DEFAULT_OUTPUT_LIMITS,
    ),
    p("tls-port", Int(0, 65535), Immutable, "0"),
    p("tls-cert-file", Text, Immutable, ""),
    p("tls-key-file", Text, Immutable, ""),
    p("tls-ca-cert-file", Text, Immutable, ""),
    p(
        "tls-auth-clients",
        Enum(&["yes", "no", "optional"]),
        Immutable,
        "yes",
    ),
    p("tls-cluster", Bool, Immutable, "no"),
    p("write-timeout-ms", Int(1, MAX), Immutable, "5000"),
    p("node-id", Int(1, MAX), Immutable, "1"),
    p("peer-port", Int(0, 65535), Immutable, "16379"),
    p("snapshot-every", Int(1, MAX), Immutable, "10000"),
    p(
        "enable-debug-command",
        Enum(&["no", "yes", "local"]),
        Immutable,
        "no",
    ),
    // Redis's, with the answer that is true of Palisade.
    p("databases", Int(1, i32::MAX as i64), Immutable, "1"),
    p("daemonize", Bool, Immutable, "no"),
    p("cluster-enabled", Bool, Immutable, "no"),
    p("pidfile", Text, Immutable, ""),
    p("logfile", Text, Immutable, ""),
    p("save", Save, Ignored, ""),
    p("appendonly", Bool, Ignored, "yes"),
    p(
        "appendfsync",
        Enum(&["always", "everysec", "no"]),
        Ignored,
        "always",
    ),
    p("maxmemory", Memory(0, MAX), Fixed, "0"),
    p("maxmemory-clients", Memory(0, MAX), Fixed, "0"),
    p("notify-keyspace-events", Events, Live, ""),
    p("latency-monitor-threshold", Int(0, MAX), Fixed, "0"),
    // Redis's encoding and tuning parameters: kept, with no effect on storage.
    p("maxmemory-policy", Enum(POLICIES), Stored, "noeviction"),
    p("maxmemory-samples", Int(1, i32::MAX as i64), Stored, "5"),
    aka(
        "hash-max-ziplist-entries",
        p("hash-max-listpack-entries", Int(0, MAX), Stored, "512"),
    ),
    aka(
        "hash-max-ziplist-value",
        p("hash-max-listpack-value", Int(0, MAX), Stored, "64"),
    ),
    aka(
        "list-max-ziplist-size",
        p(
            "list-max-listpack-size",
            Int(i32::MIN as i64, i32::MAX as i64),
            Stored,
            "-2",
        ),
    ),
    p("list-compress-depth", Int(0, i32::MAX as i64), Stored, "0"),
    p("set-max-intset-entries", Int(0, MAX), Stored, "512"),
    aka(
        "zset-max-ziplist-entries",
        p("zset-max-listpack-entries", Int(0, MAX), Stored, "128"),
    ),
    aka(
        "zset-max-ziplist-value",
        p("zset-max-listpack-value", Int(0, MAX), Stored, "64"),
    ),
    p("lazyfree-lazy-eviction", Bool, Stored, "no"),
    p("lazyfree-lazy-expire", Bool, Stored, "no"),
    p("lazyfree-lazy-server-del", Bool, Stored, "no"),
    p("lazyfree-lazy-user-del", Bool, Stored, "no"),
    p("lazyfree-lazy-user-flush", Bool, Stored, "no"),
    // Kept, no effect: a script runs to its end or to its instruction budget, never past a
    // time limit (docs/scripting.md, "Script timeouts").
    aka(
        "lua-time-limit",
        p("busy-reply-threshold", Int(0, MAX), Stored, "5000"),
    ),
];

/// Redis's default `client-output-buffer-limit`, as CONFIG GET shows it.
pub const DEFAULT_OUTPUT_LIMITS: &str =
    "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60";

/// The parameter named `name` (either of its names, any case).
pub fn param(name: &str) -> Option<&'static Param> {
    let name = name.to_ascii_lowercase();
    PARAMS
        .iter()
        .find(|p| p.name == name || p.alias == Some(name.as_str()))
}

/// Redis's memory value: digits with an optional unit (`b`, `k`, `kb`, `m`, `mb`, `g`, `gb`,
/// any case; `k` is 1000, `kb` 1024).
pub(crate) fn memory_value(s: &str) -> Option<i64> {
    let lower = s.to_ascii_lowercase();
    let split = lower
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(lower.len());
    let (num, unit) = lower.split_at(split);
    let mul: i64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    num.parse::<i64>().ok()?.checked_mul(mul)
}

/// Checks `value` for `param` and returns its canonical form (what CONFIG GET shows), or
/// Redis's reason for refusing it.
pub fn check(param: &Param, value: &[u8]) -> Result<String, String> {
    let text = String::from_utf8_lossy(value);
    let range = |n: i64, lo: i64, hi: i64| {
        if (lo..=hi).contains(&n) {
            Ok(n.to_string())
        } else {
            Err(format!("argument must be between {lo} and {hi} inclusive"))
        }
    };
    match param.kind {
        Bool => match text.to_ascii_lowercase().as_str() {
            v @ ("yes" | "no") => Ok(v.to_string()),
            _ => Err("argument must be 'yes' or 'no'".into()),
        },
        Int(lo, hi) => match parse_i64(value) {
            Some(n) => range(n, lo, hi),
            None => Err("argument couldn't be parsed into an integer".into()),
        },
        Memory(lo, hi) => match memory_value(&text) {
            Some(n) => range(n, lo, hi),
            None => Err("argument must be a memory value".into()),
        },
        Enum(words) => {
            let lower = text.to_ascii_lowercase();
            match words.iter().find(|w| **w == lower) {
                Some(w) => Ok(w.to_string()),
                None => Err(format!(
                    "argument(s) must be one of the following: {}",
                    words.join(", ")
                )),
            }
        }
        Text => Ok(text.into_owned()),
        Save => {
            let parts: Vec<&str> = text.split_whitespace().collect();
            let numbers = parts.iter().all(|p| p.parse::<u64>().is_ok());
            if parts.len().is_multiple_of(2) && numbers {
                Ok(parts.join(" "))
            } else {
                Err("Invalid save parameters".into())
            }
        }
        // Shown in Redis's normal form (`KEA` reads back as `AKE`).
        Events => match crate::state::notify::parse_flags(&text) {
            Some(flags) => Ok(crate::state::notify::flags_to_string(flags)),
            None => Err("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".into()),
        },
        // Over the defaults; `Store::set` applies a value over the current limits instead.
        OutputLimits => obuf::OutputLimits::parse(&text).map(|l| l.to_string()),
    }
}

/// The settings the server reads on its hot paths, kept in step with the values.
#[derive(Debug, Default)]
pub struct Live {
    /// `maxclients`.
    pub maxclients: AtomicUsize,
    /// `proto-max-bulk-len`.
    pub max_bulk_len: AtomicUsize,
    /// `max-multibulk-len`.
    pub max_multibulk_len: AtomicUsize,
    /// `client-query-buffer-limit`.
    pub max_query_buffer: AtomicUsize,
    /// `lock-delay-ms`.
    pub lock_delay_ms: AtomicU64,
    /// `slowlog-log-slower-than` (µs; negative: off).
    pub slowlog_slower_than: AtomicI64,
    /// `slowlog-max-len`.
    pub slowlog_max_len: AtomicUsize,
    /// `protected-mode`.
    pub protected_mode: AtomicBool,
    /// `timeout`, in seconds (0: never).
    pub timeout_secs: AtomicU64,
    /// Woken when `timeout` changes, so that idle sessions re-arm their timers.
    pub timeout_changed: tokio::sync::Notify,
    /// The pubsub class of `client-output-buffer-limit`: hard, soft (bytes), soft seconds.
    pub pubsub_limit: [AtomicU64; 3],
    /// `notify-keyspace-events` as class flags ([`crate::state::notify`]); the state
    /// machine holds the same atomic.
    pub notify_flags: std::sync::Arc<std::sync::atomic::AtomicU32>,
}

/// Applies a new log level (Redis's word) to the running node's logging.
pub type LogHook = Box<dyn Fn(&str) -> Result<(), String> + Send + Sync>;

/// The current value of every parameter.
pub struct Store {
    values: RwLock<BTreeMap<&'static str, String>>,
    /// Mirrors of the live values, for the hot paths.
    pub live: Live,
    log_hook: OnceLock<LogHook>,
}

impl Store {
    /// The defaults of [`PARAMS`], overridden by `start` (name, value) pairs: the values
    /// the node was started with. A start value the parameter refuses is logged and dropped.
    pub fn new(start: &[(&str, String)]) -> Store {
        let mut values: BTreeMap<&'static str, String> =
            PARAMS.iter().map(|p| (p.name, p.default.into())).collect();
        for (name, value) in start {
            match param(name) {
                Some(p) => {
                    values.insert(p.name, value.clone());
                }
                None => tracing::warn!(param = name, "unknown start parameter"),
            }
        }
        let store = Store {
            values: RwLock::new(values),
            live: Live::default(),
            log_hook: OnceLock::new(),
        };
        for p in PARAMS.iter().filter(|p| p.effect == Live) {
            store.mirror(p.name, &store.value(p.name));
        }
        store
    }

    /// Installs the function that changes the log level (once; later calls are ignored).
    pub fn set_log_hook(&self, hook: LogHook) {
        let _ = self.log_hook.set(hook);
    }

    /// The value of the parameter called `name` (its canonical name), or "".
    pub fn value(&self, name: &str) -> String {
        self.values
            .read()
            .ok()
            .and_then(|v| v.get(name).cloned())
            .unwrap_or_default()
    }

    /// CONFIG GET: the parameters matching any pattern, once each. An exact name is shown
    /// as typed, a glob's matches under their own names, as in Redis.
    pub fn get(&self, patterns: &[Bytes]) -> Reply {
        let mut out: Vec<(String, &'static Param)> = Vec::new();
        for pat in patterns {
            let text = String::from_utf8_lossy(pat);
            if !text.contains(['[', '*', '?']) {
                if let Some(p) = param(&text) {
                    if !out.iter().any(|(_, q)| std::ptr::eq(*q, p)) {
                        out.push((text.into_owned(), p));
                    }
                }
                continue;
            }
            let lower = text.to_ascii_lowercase();
            for p in PARAMS {
                for name in std::iter::once(p.name).chain(p.alias) {
                    let seen = out.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
                    if !seen && crate::state::pattern::matches(lower.as_bytes(), name.as_bytes()) {
                        out.push((name.to_string(), p));
                    }
                }
            }
        }
        Reply::Map(
            out.into_iter()
                .map(|(name, p)| (Reply::text(&name), Reply::text(&self.value(p.name))))
                .collect(),
        )
    }

    /// CONFIG SET: every pair is checked first, and either all take effect or none, with
    /// Redis's error for the first one refused.
    pub fn set(&self, pairs: &[(Bytes, Bytes)]) -> Reply {
        // Each parameter with the name it was given by (lower-cased: Redis's error texts
        // name an alias as such) and its new value.
        let mut chosen: Vec<(&'static Param, String, String)> = Vec::new();
        let mut refused: Option<Reply> = None;
        for (name, value) in pairs {
            let typed = String::from_utf8_lossy(name);
            let Some(p) = param(&typed) else {
                // Only the first refusal is reported, as in Redis.
                if refused.is_none() {
                    refused = Some(Reply::err(format!(
                        "ERR Unknown option or number of arguments for CONFIG SET - '{typed}'"
                    )));
                }
                continue;
            };
            let why = match p.effect {
                Immutable => Some("can't set immutable config"),
                Protected => Some("can't set protected config"),
                _ if chosen.iter().any(|(q, _, _)| std::ptr::eq(*q, p)) => {
                    Some("duplicate parameter")
                }
                _ => None,
            };
            if let (Some(why), None) = (why, &refused) {
                refused = Some(set_failed(&typed, why));
            }
            let value = String::from_utf8_lossy(value).into_owned();
            chosen.push((p, typed.to_ascii_lowercase(), value));
        }
        if let Some(r) = refused {
            return r;
        }
        let mut checked = Vec::with_capacity(chosen.len());
        for (p, name, value) in chosen {
            let checked_value = match p.kind {
                OutputLimits => obuf::OutputLimits::parse(&self.value(p.name))
                    .and_then(|now| now.with(&value))
                    .map(|l| l.to_string()),
                _ => check(p, value.as_bytes()),
            };
            match checked_value {
                Ok(v) if p.effect == Fixed && v != self.value(p.name) => {
                    return set_failed(&name, "can't set immutable config")
                }
                Ok(v) => checked.push((p, v)),
                Err(why) => return set_failed(&name, &why),
            }
        }
        if let Some((_, level)) = checked.iter().find(|(p, _)| p.name == "loglevel") {
            if let Some(hook) = self.log_hook.get() {
                if let Err(e) = hook(level) {
                    return set_failed("loglevel", &e);
                }
            }
        }
        for (p, v) in checked {
            if p.effect == Ignored {
                continue;
            }
            self.mirror(p.name, &v);
            if let Ok(mut values) = self.values.write() {
                values.insert(p.name, v);
            }
        }
        Reply::ok()
    }

    /// Copies a live parameter's value into its atomic.
    fn mirror(&self, name: &str, value: &str) {
        let n = value.parse::<i64>().unwrap_or(0);
        let u = usize::try_from(n).unwrap_or(usize::MAX);
        let l = &self.live;
        match name {
            "maxclients" => l.maxclients.store(u, Ordering::Relaxed),
            "proto-max-bulk-len" => l.max_bulk_len.store(u, Ordering::Relaxed),
            "max-multibulk-len" => l.max_multibulk_len.store(u, Ordering::Relaxed),
            "client-query-buffer-limit" => l.max_query_buffer.store(u, Ordering::Relaxed),
            "lock-delay-ms" => l.lock_delay_ms.store(n.max(0) as u64, Ordering::Relaxed),
            "slowlog-log-slower-than" => l.slowlog_slower_than.store(n, Ordering::Relaxed),
            "slowlog-max-len" => l.slowlog_max_len.store(u, Ordering::Relaxed),
            "protected-mode" => l.protected_mode.store(value == "yes", Ordering::Relaxed),
            "timeout" => {
                l.timeout_secs.store(n.max(0) as u64, Ordering::Relaxed);
                l.timeout_changed.notify_waiters();
            }
            "notify-keyspace-events" => {
                let flags = crate::state::notify::parse_flags(value).unwrap_or(0);
                l.notify_flags.store(flags, Ordering::Relaxed);
            }
            "client-output-buffer-limit" => {
                if let Ok(limits) = obuf::OutputLimits::parse(value) {
                    let p = limits.pubsub;
                    for (slot, v) in l.pubsub_limit.iter().zip([p.hard, p.soft, p.soft_secs]) {
                        slot.store(v, Ordering::Relaxed);
                    }
                }
            }
            _ => {}
        }
    }
}

fn set_failed(name: &str, why: &str) -> Reply {
    Reply::err(format!(
        "ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"
    ))
}

/// Palisade's log level (`--log-level`: a level or a tracing filter) as Redis's `loglevel`.
pub fn redis_log_level(filter: &str) -> &'static str {
    let base = filter
        .split(',')
        .find(|d| !d.contains('='))
        .unwrap_or("info");
    match base.trim().to_ascii_lowercase().as_str() {
        "error" | "warn" | "off" => "warning",
        "debug" => "verbose",
        "trace" => "debug",
        _ => "notice",
    }
}

/// Redis's `loglevel` as Palisade's `--log-level`.
pub fn palisade_log_level(redis: &str) -> &'static str {
    match redis {
        "warning" => "warn",
        "verbose" => "debug",
        "debug" => "trace",
        _ => "info",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    fn set(store: &Store, pairs: &[(&str, &str)]) -> Reply {
        let pairs: Vec<(Bytes, Bytes)> = pairs.iter().map(|(k, v)| (b(k), b(v))).collect();
        store.set(&pairs)
    }

    #[test]
    fn set_is_all_or_nothing_with_redis_texts() {
        let s = Store::new(&[("maxclients", "10000".into())]);
        let failed = |n: &str, why: &str| set_failed(n, why);
        assert_eq!(
            set(&s, &[("maxclients", "100"), ("appendonly", "bad")]),
            failed("appendonly", "argument must be 'yes' or 'no'")
        );
        assert_eq!(s.value("maxclients"), "10000");
        assert_eq!(s.live.maxclients.load(Ordering::Relaxed), 10000);
        assert_eq!(
            set(&s, &[("databases", "2"), ("nosuch", "1")]),
            failed("databases", "can't set immutable config")
        );
        assert_eq!(
            set(&s, &[("nosuch", "1"), ("databases", "2")]),
            Reply::err("ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'")
        );
        assert_eq!(
            set(&s, &[("MAXCLIENTS", "5"), ("maxclients", "6")]),
            failed("maxclients", "duplicate parameter")
        );
        assert_eq!(
            set(&s, &[("MAXCLIENTS", "0")]),
            failed(
                "maxclients",
                "argument must be between 1 and 4294967295 inclusive"
            )
        );
        assert_eq!(set(&s, &[("maxclients", "7")]), Reply::ok());
        assert_eq!(s.live.maxclients.load(Ordering::Relaxed), 7);
        assert_eq!(set(&s, &[("proto-max-bulk-len", "2mb")]), Reply::ok());
        assert_eq!(s.value("proto-max-bulk-len"), "2097152");
        assert_eq!(
            set(&s, &[("Hash-Max-Ziplist-Entries", "-1")]),
            failed(
                "hash-max-ziplist-entries",
                "argument must be between 0 and 9223372036854775807 inclusive"
            )
        );
        assert_eq!(
            set(&s, &[("maxmemory", "-1")]),
            failed("maxmemory", "argument must be a memory value")
        );
        assert_eq!(
            set(&s, &[("proto-max-bulk-len", "2xb")]),
            failed("proto-max-bulk-len", "argument must be a memory value")
        );
    }

    #[test]
    fn ignored_and_fixed_keep_palisades_answer() {
        let s = Store::new(&[]);
        assert_eq!(set(&s, &[("appendfsync", "EVERYSEC")]), Reply::ok());
        assert_eq!(s.value("appendfsync"), "always");
        assert_eq!(set(&s, &[("save", "900 1")]), Reply::ok());
        assert_eq!(s.value("save"), "");
        assert_eq!(
            set(&s, &[("save", "900")]),
            set_failed("save", "Invalid save parameters")
        );
        assert_eq!(set(&s, &[("maxmemory", "0")]), Reply::ok());
        assert_eq!(
            set(&s, &[("maxmemory", "1mb")]),
            set_failed("maxmemory", "can't set immutable config")
        );
        assert_eq!(set(&s, &[("hash-max-ziplist-entries", "9")]), Reply::ok());
        assert_eq!(s.value("hash-max-listpack-entries"), "9");
    }

    #[test]
    fn get_globs_and_exact_names() {
        let s = Store::new(&[("port", "7000".into())]);
        let got = s.get(&[b("PORT"), b("port")]);
        assert_eq!(
            got,
            Reply::Map(vec![(Reply::text("PORT"), Reply::text("7000"))])
        );
        let Reply::Map(m) = s.get(&[b("hash-max-*")]) else {
            panic!()
        };
        let names: Vec<Reply> = m.into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            names,
            [
                "hash-max-listpack-entries",
                "hash-max-ziplist-entries",
                "hash-max-listpack-value",
                "hash-max-ziplist-value"
            ]
            .map(Reply::text)
        );
        assert_eq!(s.get(&[b("nosuch")]), Reply::Map(vec![]));
    }

    #[test]
    fn log_levels_map_both_ways() {
        for (ours, redis) in [
            ("info", "notice"),
            ("warn", "warning"),
            ("debug", "verbose"),
        ] {
            assert_eq!(redis_log_level(ours), redis);
            assert_eq!(palisade_log_level(redis), ours);
        }
        assert_eq!(redis_log_level("openraft=info,debug"), "verbose");
    }
}
