//! `INFO [section ...]`: `field:value` lines under `# Section` headers, joined by CRLF.
//!
//! The `# Raft` fields and `role:master` are fixed because tools rely on them
//! (docs/architecture.md, "INFO"). The sections and fields that Redis 7 also has are printed
//! as Redis prints them (`# Commandstats`, `# Errorstats`, `# CPU`, `# Keyspace`, ...), so
//! that tools such as Prometheus' redis_exporter read them unchanged; a field is printed only
//! where Palisade can fill it honestly.

use std::borrow::Cow;
use std::fmt::Write;

use crate::cmd::connection::ConnCmd;
use crate::cmd::registry::{Spec, NO_KEYS};
use crate::cmd::Request;
use crate::resp::{Args, Reply};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[Spec::new("info", -1, &["loading", "stale"], NO_KEYS, parse)
    .args("section?*")
    .docs(
        "Report server status and statistics, by section",
        "1.0.0",
        "server",
    )
    .categories(&["dangerous"])];

/// INFO persistence's `rdb_*` fields: this node's SAVE/BGSAVE snapshots.
#[derive(Debug, Clone, Copy, Default)]
pub struct Rdb {
    /// Commands applied since the last save was asked for.
    pub changes_since_last_save: u64,
    /// A BGSAVE is running.
    pub bgsave_in_progress: bool,
    /// Unix seconds of the last save (the node's start before the first).
    pub last_save_time: i64,
    /// The last BGSAVE failed.
    pub last_bgsave_failed: bool,
}

/// Everything INFO reports, gathered by the server at the time of the call.
#[derive(Debug, Clone, Default)]
pub struct InfoData {
    /// The persistence section's save fields.
    pub rdb: Rdb,
    /// Palisade's own version.
    pub version: &'static str,
    /// Random id of this process.
    pub run_id: String,
    /// Client port.
    pub tcp_port: u16,
    /// Process id.
    pub process_id: u32,
    /// Seconds since start.
    pub uptime_secs: u64,
    /// Connected clients.
    pub connected_clients: usize,
    /// Of those, clients waiting in a blocking command.
    pub blocked_clients: usize,
    /// The most output pending for one client over the last few seconds, in bytes.
    pub client_recent_max_output_buffer: u64,
    /// Subscribers closed at their output buffer limit.
    pub output_limit_disconnections: u64,
    /// Configured maximum.
    pub maxclients: usize,
    /// Resident memory in bytes, if known.
    pub used_memory_rss: u64,
    /// jemalloc: bytes allocated, bytes of resident pages it maps.
    pub allocator: (u64, u64),
    /// What RocksDB holds in memory.
    pub db_memory: DbMemory,
    /// Connections accepted.
    pub total_connections: u64,
    /// Commands executed (not unknown or rejected ones), inside EXEC included.
    pub total_commands: u64,
    /// Commands per second, and KiB per second in and out, averaged as Redis does.
    pub rates: (u64, f64, f64),
    /// Bytes read from and written to client connections.
    pub net_bytes: (u64, u64),
    /// Error replies sent.
    pub total_error_replies: u64,
    /// Channels with a subscriber here, distinct patterns subscribed to, and shard channels
    /// with a subscriber here.
    pub pubsub: (usize, usize, usize),
    /// Per command (`client|setname` for a subcommand), sorted by name.
    pub commandstats: Vec<(String, CmdCounts)>,
    /// Error replies by their first word, sorted.
    pub errorstats: Vec<(String, u64)>,
    /// CPU time of this process and of its waited-for children.
    pub cpu: CpuTimes,
    /// Scripts in the script cache.
    pub cached_scripts: usize,
    /// Highest `used_memory` seen (sampled every 100 ms and at each INFO).
    pub used_memory_peak: u64,
    /// Connections rejected because of maxclients.
    pub rejected_connections: u64,
    /// Keys evicted by expiry entries.
    pub expired_keys: u64,
    /// Raft batches (log entries) proposed by this node.
    pub batches_proposed: u64,
    /// Commands inside those batches.
    pub batched_commands: u64,
    /// Log syncs, the appends they completed, and the entries those held (this node's log).
    pub log_syncs: (u64, u64, u64),
    /// Client entries (batches) this node's state machine applied, and their commands.
    pub applied: (u64, u64),
    /// Live keys.
    pub keys: usize,
    /// Of those, keys with a TTL.
    pub expires: usize,
    /// The mean remaining TTL of those, in ms (exact, where Redis estimates it).
    pub avg_ttl: u64,
    /// The revision (next token is higher).
    pub revision: u64,
    /// Clients queued in a blocking pop on any node (the replicated queue).
    pub pop_waiters: usize,
    /// Raft node id.
    pub node_id: u64,
    /// leader, follower, candidate or learner.
    pub role: &'static str,
    /// Current leader, if known.
    pub leader_id: Option<u64>,
    /// Current term.
    pub term: u64,
    /// Last committed log index.
    pub commit_index: u64,
    /// Last applied log index.
    pub applied_index: u64,
    /// Last log index.
    pub last_log_index: u64,
    /// Index of the last snapshot.
    pub snapshot_index: u64,
    /// Peer connections refused in the handshake since start (wrong secret or certificate).
    pub peer_handshakes_refused: u64,
    /// AppendEntries requests this node sent to peers on append streams, and commit-only
    /// ones it did not send because the next request covered them.
    pub peer_appends: (u64, u64),
    /// Voting members.
    pub members: Vec<u64>,
    /// Data directory.
    pub dir: String,
}

/// Memory RocksDB holds, in bytes, summed over the column families (INFO memory). The store
/// fills it in; it is defined here, with the rest of what INFO reports, so that commands do
/// not depend on the store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DbMemory {
    /// Memtables, active and immutable (`rocksdb.size-all-mem-tables`).
    pub memtables: u64,
    /// Block cache in use (`rocksdb.block-cache-usage`).
    pub block_cache: u64,
    /// Index and filter blocks of open table files (`rocksdb.estimate-table-readers-mem`).
    pub table_readers: u64,
}

/// One command's counters (INFO commandstats).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct CmdCounts {
    /// Times it was executed, failed ones included.
    pub calls: u64,
    /// Microseconds spent on those calls.
    pub usec: u64,
    /// Times it was refused before execution (arity, NOAUTH, not allowed in the context).
    pub rejected: u64,
    /// Executed calls whose reply was an error.
    pub failed: u64,
}

impl CmdCounts {
    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &CmdCounts) {
        self.calls += other.calls;
        self.usec += other.usec;
        self.rejected += other.rejected;
        self.failed += other.failed;
    }
}

/// CPU time used, from getrusage (zero where unavailable).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes {
    /// System time of this process, µs.
    pub sys_us: u64,
    /// User time of this process, µs.
    pub user_us: u64,
    /// System time of its terminated, waited-for children, µs.
    pub children_sys_us: u64,
    /// User time of those children, µs.
    pub children_user_us: u64,
}

/// The sections of a plain `INFO` (or `INFO default`), in the order they are printed.
const DEFAULT: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "errorstats",
    "cluster",
    "raft",
    "keyspace",
];

/// Sections only `INFO all`, `INFO everything` or their own name print.
const NOT_DEFAULT: &[&str] = &["commandstats"];

/// Redis's `%ld.%06ld` rendering of a CPU time.
fn seconds(us: u64) -> String {
    format!("{}.{:06}", us / 1_000_000, us % 1_000_000)
}

/// Parses INFO.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    let sections = args
        .rest()
        .iter()
        .map(|s| String::from_utf8_lossy(s).to_lowercase())
        .collect();
    Ok(Request::Conn(ConnCmd::Info(sections)))
}

/// One section's `field:value` lines.
type Lines = Vec<(Cow<'static, str>, String)>;

/// Lines whose field names are fixed.
fn fixed(lines: Vec<(&'static str, String)>) -> Lines {
    lines
        .into_iter()
        .map(|(k, v)| (Cow::Borrowed(k), v))
        .collect()
}

/// An INFO section: the name a client asks for, its `# Title`, and its lines.
type Section = (&'static str, &'static str, fn(&InfoData) -> Lines);

/// Every section, in Redis's order, then Palisade's `# Raft`.
const SECTIONS: &[Section] = &[
    ("server", "Server", server),
    ("clients", "Clients", clients),
    ("memory", "Memory", memory),
    ("persistence", "Persistence", persistence),
    ("stats", "Stats", stats),
    ("replication", "Replication", replication),
    ("cpu", "CPU", cpu),
    ("modules", "Modules", |_| Vec::new()),
    ("commandstats", "Commandstats", commandstats),
    ("errorstats", "Errorstats", errorstats),
    ("cluster", "Cluster", |_| {
        fixed(vec![("cluster_enabled", "0".into())])
    }),
    ("raft", "Raft", raft),
    ("keyspace", "Keyspace", keyspace),
];

/// True if the request (`INFO a b ...`, lower-case) asks for section `name`.
fn wanted(requested: &[String], name: &str) -> bool {
    if requested.is_empty() {
        return DEFAULT.contains(&name);
    }
    requested.iter().any(|r| {
        r == name
            || ((r == "all" || r == "everything")
                && (DEFAULT.contains(&name) || NOT_DEFAULT.contains(&name)))
            || (r == "default" && DEFAULT.contains(&name))
    })
}

/// Renders the requested sections.
pub fn render(requested: &[String], d: &InfoData) -> String {
    let mut out = String::new();
    for (_, title, lines) in SECTIONS.iter().filter(|s| wanted(requested, s.0)) {
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        let _ = write!(out, "# {title}\r\n");
        for (k, v) in lines(d) {
            let _ = write!(out, "{k}:{v}\r\n");
        }
    }
    out
}

fn server(d: &InfoData) -> Lines {
    fixed(vec![
        ("redis_version", "7.2.0".into()),
        ("palisade_version", d.version.into()),
        ("redis_mode", "standalone".into()),
        ("os", std::env::consts::OS.into()),
        ("arch_bits", "64".into()),
        ("process_id", d.process_id.to_string()),
        ("run_id", d.run_id.clone()),
        ("tcp_port", d.tcp_port.to_string()),
        ("uptime_in_seconds", d.uptime_secs.to_string()),
        ("uptime_in_days", (d.uptime_secs / 86400).to_string()),
    ])
}

fn clients(d: &InfoData) -> Lines {
    fixed(vec![
        ("connected_clients", d.connected_clients.to_string()),
        ("maxclients", d.maxclients.to_string()),
        (
            "client_recent_max_output_buffer",
            d.client_recent_max_output_buffer.to_string(),
        ),
        ("blocked_clients", d.blocked_clients.to_string()),
    ])
}

fn memory(d: &InfoData) -> Lines {
    fixed(vec![
        ("used_memory", d.allocator.0.to_string()),
        ("used_memory_rss", d.used_memory_rss.to_string()),
        ("mem_allocator", "jemalloc-5.3.0".into()),
        ("allocator_resident", d.allocator.1.to_string()),
        ("rocksdb_memtables", d.db_memory.memtables.to_string()),
        ("rocksdb_block_cache", d.db_memory.block_cache.to_string()),
        (
            "rocksdb_table_readers",
            d.db_memory.table_readers.to_string(),
        ),
        ("used_memory_peak", d.used_memory_peak.to_string()),
        ("number_of_cached_scripts", d.cached_scripts.to_string()),
        ("maxmemory", "0".into()),
        ("maxmemory_policy", "noeviction".into()),
    ])
}

fn persistence(d: &InfoData) -> Lines {
    fixed(vec![
        ("loading", "0".into()),
        (
            "rdb_changes_since_last_save",
            d.rdb.changes_since_last_save.to_string(),
        ),
        (
            "rdb_bgsave_in_progress",
            u8::from(d.rdb.bgsave_in_progress).to_string(),
        ),
        ("rdb_last_save_time", d.rdb.last_save_time.to_string()),
        (
            "rdb_last_bgsave_status",
            if d.rdb.last_bgsave_failed {
                "err"
            } else {
                "ok"
            }
            .into(),
        ),
        ("aof_enabled", "0".into()),
        ("raft_log_fsync", "always".into()),
        ("dir", d.dir.clone()),
    ])
}

fn stats(d: &InfoData) -> Lines {
    fixed(vec![
        (
            "total_connections_received",
            d.total_connections.to_string(),
        ),
        ("total_commands_processed", d.total_commands.to_string()),
        ("instantaneous_ops_per_sec", d.rates.0.to_string()),
        ("total_net_input_bytes", d.net_bytes.0.to_string()),
        ("total_net_output_bytes", d.net_bytes.1.to_string()),
        ("instantaneous_input_kbps", format!("{:.2}", d.rates.1)),
        ("instantaneous_output_kbps", format!("{:.2}", d.rates.2)),
        ("rejected_connections", d.rejected_connections.to_string()),
        (
            "client_output_buffer_limit_disconnections",
            d.output_limit_disconnections.to_string(),
        ),
        ("expired_keys", d.expired_keys.to_string()),
        ("evicted_keys", "0".into()),
        ("pubsub_channels", d.pubsub.0.to_string()),
        ("pubsub_patterns", d.pubsub.1.to_string()),
        ("pubsubshard_channels", d.pubsub.2.to_string()),
        ("total_error_replies", d.total_error_replies.to_string()),
        ("raft_batches_proposed", d.batches_proposed.to_string()),
        ("raft_batched_commands", d.batched_commands.to_string()),
        ("raft_log_syncs", d.log_syncs.0.to_string()),
        ("raft_log_appends_synced", d.log_syncs.1.to_string()),
        ("raft_log_entries_synced", d.log_syncs.2.to_string()),
        ("raft_applied_entries", d.applied.0.to_string()),
        ("raft_applied_commands", d.applied.1.to_string()),
    ])
}

fn replication(d: &InfoData) -> Lines {
    // Redis's fields for a master without replicas (Raft replaces Redis replication);
    // the replication offset is this node's applied log index, the position of its data
    // in the one replicated stream.
    fixed(vec![
        ("role", "master".into()),
        ("connected_slaves", "0".into()),
        ("master_failover_state", "no-failover".into()),
        ("master_repl_offset", d.applied_index.to_string()),
        ("second_repl_offset", "-1".into()),
        ("repl_backlog_active", "0".into()),
        ("repl_backlog_histlen", "0".into()),
    ])
}

fn cpu(d: &InfoData) -> Lines {
    fixed(vec![
        ("used_cpu_sys", seconds(d.cpu.sys_us)),
        ("used_cpu_user", seconds(d.cpu.user_us)),
        ("used_cpu_sys_children", seconds(d.cpu.children_sys_us)),
        ("used_cpu_user_children", seconds(d.cpu.children_user_us)),
    ])
}

fn raft(d: &InfoData) -> Lines {
    fixed(vec![
        ("raft_node_id", d.node_id.to_string()),
        ("raft_role", d.role.into()),
        (
            "raft_leader_id",
            d.leader_id.map(|l| l.to_string()).unwrap_or_default(),
        ),
        ("raft_term", d.term.to_string()),
        ("raft_commit_index", d.commit_index.to_string()),
        ("raft_applied_index", d.applied_index.to_string()),
        ("raft_last_log_index", d.last_log_index.to_string()),
        ("raft_snapshot_index", d.snapshot_index.to_string()),
        (
            "raft_peer_handshakes_refused",
            d.peer_handshakes_refused.to_string(),
        ),
        ("raft_peer_appends_sent", d.peer_appends.0.to_string()),
        ("raft_peer_appends_coalesced", d.peer_appends.1.to_string()),
        (
            "raft_members",
            d.members
                .iter()
                .map(|m| m.to_string())
                .collect::<Vec<_>>()
                .join(","),
        ),
        ("raft_revision", d.revision.to_string()),
        ("raft_pop_waiters", d.pop_waiters.to_string()),
    ])
}

fn commandstats(d: &InfoData) -> Lines {
    d.commandstats
        .iter()
        .map(|(name, c)| (Cow::Owned(format!("cmdstat_{name}")), cmdstat(c)))
        .collect()
}

fn errorstats(d: &InfoData) -> Lines {
    d.errorstats
        .iter()
        .map(|(prefix, n)| {
            (
                Cow::Owned(format!("errorstat_{prefix}")),
                format!("count={n}"),
            )
        })
        .collect()
}

fn keyspace(d: &InfoData) -> Lines {
    if d.keys == 0 {
        return Vec::new();
    }
    fixed(vec![(
        "db0",
        format!(
            "keys={},expires={},avg_ttl={}",
            d.keys, d.expires, d.avg_ttl
        ),
    )])
}

/// One commandstats value, as Redis 7 prints it.
fn cmdstat(c: &CmdCounts) -> String {
    let per_call = if c.calls == 0 {
        0.0
    } else {
        c.usec as f64 / c.calls as f64
    };
    format!(
        "calls={},usec={},usec_per_call={per_call:.2},rejected_calls={},failed_calls={}",
        c.calls, c.usec, c.rejected, c.failed
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_has_fixed_fields_not_on_first_line() {
        let text = render(
            &[],
            &InfoData {
                node_id: 1,
                role: "leader",
                leader_id: Some(1),
                members: vec![1],
                ..Default::default()
            },
        );
        assert!(text.starts_with("# Server\r\n"));
        assert!(text.contains("\r\nredis_version:7.2.0\r\n"));
        assert!(text.contains("\r\nraft_role:leader\r\n"));
        assert!(text.contains("\r\nraft_members:1\r\n"));
        assert!(text.contains("\r\nrole:master\r\n"));
        assert!(text.contains("\r\nloading:0\r\n"));
        let only = render(&["raft".into()], &InfoData::default());
        assert!(only.starts_with("# Raft\r\n") && !only.contains("# Server"));
    }

    #[test]
    fn sections_and_their_fields_as_redis_prints_them() {
        let d = InfoData {
            commandstats: vec![
                (
                    "client|setname".into(),
                    CmdCounts {
                        calls: 3,
                        usec: 10,
                        rejected: 1,
                        failed: 0,
                    },
                ),
                (
                    "get".into(),
                    CmdCounts {
                        rejected: 2,
                        ..Default::default()
                    },
                ),
            ],
            errorstats: vec![("ERR".into(), 4), ("WRONGTYPE".into(), 1)],
            cpu: CpuTimes {
                sys_us: 1_500_000,
                user_us: 25,
                children_sys_us: 0,
                children_user_us: 1_000_000,
            },
            keys: 3,
            expires: 1,
            avg_ttl: 4999,
            ..Default::default()
        };
        assert_eq!(
            render(&["commandstats".into()], &d),
            "# Commandstats\r\n\
             cmdstat_client|setname:calls=3,usec=10,usec_per_call=3.33,rejected_calls=1,failed_calls=0\r\n\
             cmdstat_get:calls=0,usec=0,usec_per_call=0.00,rejected_calls=2,failed_calls=0\r\n"
        );
        assert_eq!(
            render(&["errorstats".into(), "keyspace".into()], &d),
            "# Errorstats\r\nerrorstat_ERR:count=4\r\nerrorstat_WRONGTYPE:count=1\r\n\r\n\
             # Keyspace\r\ndb0:keys=3,expires=1,avg_ttl=4999\r\n"
        );
        assert_eq!(
            render(&["cpu".into()], &d),
            "# CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:0.000025\r\n\
             used_cpu_sys_children:0.000000\r\nused_cpu_user_children:1.000000\r\n"
        );
        let titles = |req: &[&str]| -> Vec<String> {
            let req: Vec<String> = req.iter().map(|s| s.to_string()).collect();
            render(&req, &d)
                .lines()
                .filter(|l| l.starts_with('#'))
                .map(String::from)
                .collect()
        };
        let default = titles(&[]);
        assert_eq!(default, titles(&["default"]));
        assert!(default.contains(&"# Errorstats".to_string()));
        assert!(!default.contains(&"# Commandstats".to_string()));
        let all = titles(&["all"]);
        assert_eq!(all, titles(&["everything"]));
        assert_eq!(all.len(), default.len() + 1);
        assert!(all.contains(&"# Commandstats".to_string()));
        assert_eq!(titles(&["nosuchsection"]), Vec::<String>::new());
    }
}
