//! Configuration: command-line flags plus an optional TOML file (`--config`), with every
//! default in one place. Flags override the file; flag names follow redis-server's.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Parser;
use serde::Deserialize;

use crate::resp::Limits;

/// Default client port, as Redis.
pub const DEFAULT_PORT: u16 = 6379;
/// The peer port is the client port plus this, like Redis Cluster's bus port.
pub const PEER_PORT_OFFSET: u16 = 10000;

/// Command-line flags. Every value is optional so that the file and defaults can fill in.
#[derive(Parser, Debug, Default)]
#[command(
    name = "palisade",
    version,
    about = "A Redis-wire-compatible lock server built on Raft, with fencing tokens."
)]
pub struct Flags {
    /// Address to listen on for clients [default: 127.0.0.1].
    #[arg(long)]
    pub bind: Option<String>,
    /// Client port [default: 6379].
    #[arg(long)]
    pub port: Option<u16>,
    /// Data directory [default: ./data].
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// TOML configuration file; keys are the flag names (e.g. `port = 6380`).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Require clients to AUTH with this password.
    #[arg(long)]
    pub requirepass: Option<String>,
    /// This node's Raft id [default: 1].
    #[arg(long)]
    pub node_id: Option<u64>,
    /// Port for Raft peer traffic [default: port + 10000].
    #[arg(long)]
    pub peer_port: Option<u16>,
    /// Cluster members: `1=host:peerport,2=host:peerport,...`.
    #[arg(long)]
    pub peers: Option<String>,
    /// Maximum simultaneous clients [default: 10000].
    #[arg(long)]
    pub maxclients: Option<usize>,
    /// Largest bulk string accepted, in bytes [default: 536870912].
    #[arg(long)]
    pub proto_max_bulk_len: Option<usize>,
    /// Most arguments accepted in one request [default: 1048576].
    #[arg(long)]
    pub max_multibulk_len: Option<usize>,
    /// Most unparsed input buffered per client, in bytes [default: 1073741824].
    #[arg(long)]
    pub client_query_buffer_limit: Option<usize>,
    /// Deadline for a write, in ms; after it the outcome is reported unknown [default: 5000].
    #[arg(long)]
    pub write_timeout_ms: Option<u64>,
    /// Take a Raft snapshot after this many log entries [default: 10000].
    #[arg(long)]
    pub snapshot_every: Option<u64>,
    /// Log filter, e.g. `info` or `palisade=debug` [default: info].
    #[arg(long)]
    pub log_level: Option<String>,
    /// Start without forming a cluster and wait to be added with RAFT.NODE ADD.
    #[arg(long)]
    pub join: bool,
    /// Allow RAFT.FAULT (cut links to chosen peers). For tests only; never in production.
    #[arg(long)]
    pub enable_fault_injection: bool,
    /// Test-only clock fault: shift this node's leader clock by this many ms.
    #[arg(long, hide = true, allow_hyphen_values = true)]
    pub test_clock_offset_ms: Option<i64>,
    /// Test-only clock fault: make this node's leader clock run fast (or slow, if
    /// negative) by this many parts per million.
    #[arg(long, hide = true, allow_hyphen_values = true)]
    pub test_clock_rate_ppm: Option<i64>,
    /// Test-only power cut: keep writes that are not yet synced in this process's memory
    /// (RocksDB's manual WAL flush), so that a kill -9 loses them as a power cut would: the
    /// log is left at its last synced point, and the state machine behind it.
    #[arg(long, hide = true)]
    pub test_lose_unsynced_writes: bool,
}

/// The same keys in a TOML file.
#[derive(Deserialize, Debug, Default)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct FileConfig {
    bind: Option<String>,
    port: Option<u16>,
    dir: Option<PathBuf>,
    requirepass: Option<String>,
    node_id: Option<u64>,
    peer_port: Option<u16>,
    peers: Option<String>,
    maxclients: Option<usize>,
    proto_max_bulk_len: Option<usize>,
    max_multibulk_len: Option<usize>,
    client_query_buffer_limit: Option<usize>,
    write_timeout_ms: Option<u64>,
    snapshot_every: Option<u64>,
    log_level: Option<String>,
    join: Option<bool>,
}

/// The resolved configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Client listen address.
    pub bind: String,
    /// Client port (0 picks a free port).
    pub port: u16,
    /// Data directory.
    pub dir: PathBuf,
    /// Password, if any.
    pub requirepass: Option<String>,
    /// Raft node id.
    pub node_id: u64,
    /// Raft peer port.
    pub peer_port: u16,
    /// Cluster members by id (empty: a one-node cluster).
    pub peers: BTreeMap<u64, String>,
    /// Maximum clients.
    pub maxclients: usize,
    /// Request size limits.
    pub limits: Limits,
    /// Write deadline in ms.
    pub write_timeout_ms: u64,
    /// Snapshot interval in log entries.
    pub snapshot_every: u64,
    /// Log filter.
    pub log_level: String,
    /// Wait to be added to an existing cluster instead of forming one.
    pub join: bool,
    /// RAFT.FAULT is allowed.
    pub fault_injection: bool,
    /// Test-only clock offset in ms (chaos tests).
    pub test_clock_offset_ms: i64,
    /// Test-only clock rate error in ppm (chaos tests).
    pub test_clock_rate_ppm: i64,
    /// See [`Flags::test_lose_unsynced_writes`].
    pub test_lose_unsynced_writes: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: "127.0.0.1".into(),
            port: DEFAULT_PORT,
            dir: PathBuf::from("./data"),
            requirepass: None,
            node_id: 1,
            peer_port: DEFAULT_PORT + PEER_PORT_OFFSET,
            peers: BTreeMap::new(),
            maxclients: 10_000,
            limits: Limits::default(),
            write_timeout_ms: 5_000,
            snapshot_every: 10_000,
            log_level: "info".into(),
            join: false,
            fault_injection: false,
            test_clock_offset_ms: 0,
            test_clock_rate_ppm: 0,
            test_lose_unsynced_writes: false,
        }
    }
}

/// Parses `1=host:port,2=host:port`.
pub fn parse_peers(s: &str) -> anyhow::Result<BTreeMap<u64, String>> {
    let mut out = BTreeMap::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (id, addr) = part
            .split_once('=')
            .with_context(|| format!("peer '{part}' is not id=host:port"))?;
        let id: u64 = id
            .trim()
            .parse()
            .with_context(|| format!("peer id '{id}' is not a number"))?;
        if !addr.contains(':') {
            bail!("peer address '{addr}' has no port");
        }
        if out.insert(id, addr.trim().to_string()).is_some() {
            bail!("peer id {id} listed twice");
        }
    }
    Ok(out)
}

impl Config {
    /// Resolves flags (and the file they name) over the defaults.
    pub fn from_flags(flags: Flags) -> anyhow::Result<Config> {
        let file = match &flags.config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("reading config file {}", path.display()))?;
                toml::from_str::<FileConfig>(&text)
                    .with_context(|| format!("parsing config file {}", path.display()))?
            }
            None => FileConfig::default(),
        };
        let d = Config::default();
        let port = flags.port.or(file.port).unwrap_or(d.port);
        let peers = match flags.peers.or(file.peers) {
            Some(p) => parse_peers(&p)?,
            None => BTreeMap::new(),
        };
        let cfg = Config {
            bind: flags.bind.or(file.bind).unwrap_or(d.bind),
            port,
            dir: flags.dir.or(file.dir).unwrap_or(d.dir),
            requirepass: flags.requirepass.or(file.requirepass),
            node_id: flags.node_id.or(file.node_id).unwrap_or(d.node_id),
            peer_port: flags
                .peer_port
                .or(file.peer_port)
                .unwrap_or_else(|| port.wrapping_add(PEER_PORT_OFFSET)),
            peers,
            maxclients: flags.maxclients.or(file.maxclients).unwrap_or(d.maxclients),
            limits: Limits {
                max_bulk_len: flags
                    .proto_max_bulk_len
                    .or(file.proto_max_bulk_len)
                    .unwrap_or(d.limits.max_bulk_len),
                max_multibulk_len: flags
                    .max_multibulk_len
                    .or(file.max_multibulk_len)
                    .unwrap_or(d.limits.max_multibulk_len),
                max_query_buffer: flags
                    .client_query_buffer_limit
                    .or(file.client_query_buffer_limit)
                    .unwrap_or(d.limits.max_query_buffer),
            },
            write_timeout_ms: flags
                .write_timeout_ms
                .or(file.write_timeout_ms)
                .unwrap_or(d.write_timeout_ms),
            snapshot_every: flags
                .snapshot_every
                .or(file.snapshot_every)
                .unwrap_or(d.snapshot_every)
                .max(1),
            log_level: flags.log_level.or(file.log_level).unwrap_or(d.log_level),
            join: flags.join || file.join.unwrap_or(false),
            fault_injection: flags.enable_fault_injection,
            test_clock_offset_ms: flags.test_clock_offset_ms.unwrap_or(0),
            test_clock_rate_ppm: flags.test_clock_rate_ppm.unwrap_or(0),
            test_lose_unsynced_writes: flags.test_lose_unsynced_writes,
        };
        if cfg.node_id == 0 {
            bail!("--node-id must be at least 1");
        }
        if !cfg.peers.is_empty() && !cfg.join && !cfg.peers.contains_key(&cfg.node_id) {
            bail!(
                "--peers does not list --node-id {}; add it, or start with --join",
                cfg.node_id
            );
        }
        Ok(cfg)
    }

    /// The address peers use to reach this node.
    pub fn peer_addr(&self) -> String {
        self.peers
            .get(&self.node_id)
            .cloned()
            .unwrap_or_else(|| format!("{}:{}", self.bind, self.peer_port))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_without_flags() {
        let cfg = Config::from_flags(Flags::parse_from(["palisade"])).unwrap();
        assert_eq!(
            (cfg.bind.as_str(), cfg.port, cfg.peer_port),
            ("127.0.0.1", 6379, 16379)
        );
        assert_eq!(cfg.dir, PathBuf::from("./data"));
    }

    #[test]
    fn flags_override_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.toml");
        std::fs::write(
            &path,
            "port = 7000\nbind = \"0.0.0.0\"\nproto-max-bulk-len = 100\n",
        )
        .unwrap();
        let cfg = Config::from_flags(Flags::parse_from([
            "palisade",
            "--config",
            path.to_str().unwrap(),
            "--port",
            "7001",
        ]))
        .unwrap();
        assert_eq!(
            (
                cfg.bind.as_str(),
                cfg.port,
                cfg.peer_port,
                cfg.limits.max_bulk_len
            ),
            ("0.0.0.0", 7001, 17001, 100)
        );
        std::fs::write(&path, "bogus = 1\n").unwrap();
        assert!(Config::from_flags(Flags::parse_from([
            "palisade",
            "--config",
            path.to_str().unwrap()
        ]))
        .is_err());
    }

    #[test]
    fn peers_parse() {
        let p = parse_peers("1=a:1,2=b:2").unwrap();
        assert_eq!(p.get(&2).map(String::as_str), Some("b:2"));
        assert!(parse_peers("x=a:1").is_err());
        assert!(parse_peers("1=a").is_err());
    }
}
