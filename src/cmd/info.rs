//! `INFO [section ...]`: `field:value` lines under `# Section` headers, joined by CRLF.
//!
//! The `# Raft` fields and `role:master` are fixed because tools rely on them
//! (docs/architecture.md, "INFO").

use std::fmt::Write;

use super::connection::ConnCmd;
use super::registry::{Spec, NO_KEYS};
use super::Request;
use crate::resp::{Args, Reply};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[Spec::new("info", -1, &["loading", "stale"], NO_KEYS, parse)
    .docs(
        "Report server status and statistics, by section",
        "1.0.0",
        "server",
    )];

/// Everything INFO reports, gathered by the server at the time of the call.
#[derive(Debug, Clone, Default)]
pub struct InfoData {
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
    /// Commands processed.
    pub total_commands: u64,
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
    /// Keys with a TTL.
    pub expires: usize,
    /// The revision (next token is higher).
    pub revision: u64,
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

const DEFAULT: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "raft",
    "keyspace",
];

/// Parses INFO.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    let sections = args
        .rest()
        .iter()
        .map(|s| String::from_utf8_lossy(s).to_lowercase())
        .collect();
    Ok(Request::Conn(ConnCmd::Info(sections)))
}

/// Renders the requested sections.
pub fn render(requested: &[String], d: &InfoData) -> String {
    let want = |name: &str| {
        if requested.is_empty() {
            return DEFAULT.contains(&name);
        }
        requested.iter().any(|r| {
            r == name
                || r == "all"
                || r == "everything"
                || (r == "default" && DEFAULT.contains(&name))
        })
    };
    let mut out = String::new();
    let mut section = |name: &str, title: &str, lines: Vec<(&str, String)>| {
        if want(name) {
            if !out.is_empty() {
                out.push_str("\r\n");
            }
            let _ = write!(out, "# {title}\r\n");
            for (k, v) in lines {
                let _ = write!(out, "{k}:{v}\r\n");
            }
        }
    };
    section(
        "server",
        "Server",
        vec![
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
        ],
    );
    section(
        "clients",
        "Clients",
        vec![
            ("connected_clients", d.connected_clients.to_string()),
            ("maxclients", d.maxclients.to_string()),
            ("blocked_clients", d.blocked_clients.to_string()),
        ],
    );
    section(
        "memory",
        "Memory",
        vec![
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
            ("maxmemory", "0".into()),
            ("maxmemory_policy", "noeviction".into()),
        ],
    );
    section(
        "persistence",
        "Persistence",
        vec![
            ("loading", "0".into()),
            ("aof_enabled", "0".into()),
            ("raft_log_fsync", "always".into()),
            ("dir", d.dir.clone()),
        ],
    );
    section(
        "stats",
        "Stats",
        vec![
            (
                "total_connections_received",
                d.total_connections.to_string(),
            ),
            ("total_commands_processed", d.total_commands.to_string()),
            ("rejected_connections", d.rejected_connections.to_string()),
            ("expired_keys", d.expired_keys.to_string()),
            ("raft_batches_proposed", d.batches_proposed.to_string()),
            ("raft_batched_commands", d.batched_commands.to_string()),
            ("raft_log_syncs", d.log_syncs.0.to_string()),
            ("raft_log_appends_synced", d.log_syncs.1.to_string()),
            ("raft_log_entries_synced", d.log_syncs.2.to_string()),
            ("raft_applied_entries", d.applied.0.to_string()),
            ("raft_applied_commands", d.applied.1.to_string()),
        ],
    );
    section(
        "replication",
        "Replication",
        vec![("role", "master".into()), ("connected_slaves", "0".into())],
    );
    section("cpu", "CPU", vec![]);
    section(
        "raft",
        "Raft",
        vec![
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
                "raft_members",
                d.members
                    .iter()
                    .map(|m| m.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            ("raft_revision", d.revision.to_string()),
        ],
    );
    let ks = if d.keys > 0 {
        vec![(
            "db0",
            format!("keys={},expires={},avg_ttl=0", d.keys, d.expires),
        )]
    } else {
        vec![]
    };
    section("keyspace", "Keyspace", ks);
    out
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
}
