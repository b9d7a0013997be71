//! Configuration: command-line flags plus an optional TOML file (`--config`). Each setting is
//! defined once, as a field of [`Settings`]: its flag, its key in the file, its default and its
//! help. Flags override the file, the file overrides the defaults; flag names follow
//! redis-server's.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser};
use serde::{Deserialize, Serialize};

use crate::resp::Limits;
use crate::tls::AuthClients;

/// A Redis `yes|no` setting (flag value and file value alike).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum YesNo {
    /// On.
    Yes,
    /// Off.
    No,
}

impl YesNo {
    /// True for yes.
    pub fn on(self) -> bool {
        self == YesNo::Yes
    }

    /// Redis's word for it.
    pub fn word(self) -> &'static str {
        if self.on() {
            "yes"
        } else {
            "no"
        }
    }
}

/// Redis's `enable-debug-command` (and `enable-protected-configs`) values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum DebugCommand {
    /// Refused.
    No,
    /// Allowed.
    Yes,
    /// Allowed from loopback connections only.
    Local,
}

impl DebugCommand {
    /// Redis's word for it.
    pub fn word(self) -> &'static str {
        match self {
            DebugCommand::No => "no",
            DebugCommand::Yes => "yes",
            DebugCommand::Local => "local",
        }
    }
}

/// Default client port, as Redis.
pub const DEFAULT_PORT: u16 = 6379;
/// The shortest cluster secret accepted (`--cluster-secret`).
pub const MIN_SECRET_LEN: usize = 16;
/// The peer port is the client port plus this, like Redis Cluster's bus port.
pub const PEER_PORT_OFFSET: u16 = 10000;

/// Every setting, once. A field is a flag (`--proto-max-bulk-len`) and, under the same name, a
/// key of the TOML file (`proto-max-bulk-len = ...`); its default is the flag's default.
/// `config` and the switches in [`FlagOnly`] are flags and nothing else.
#[derive(Parser, Serialize, Deserialize, Debug)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
#[command(
    name = "palisade",
    version,
    about = "A Redis-wire-compatible lock server built on Raft, with fencing tokens."
)]
pub struct Settings {
    /// Address to listen on for clients.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: String,
    /// Client port.
    #[arg(long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Data directory.
    #[arg(long, default_value = "./data")]
    pub dir: PathBuf,
    /// TOML configuration file; keys are the flag names (e.g. `port = 6380`).
    #[arg(long)]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// Require clients to AUTH with this password.
    #[arg(long)]
    pub requirepass: Option<String>,
    /// ACL users file, as redis-server's: `user <name> <rule> ...` lines, read by ACL LOAD
    /// (and at start) and written by ACL SAVE.
    #[arg(long)]
    pub aclfile: Option<PathBuf>,
    /// This node's Raft id.
    #[arg(long, default_value_t = 1)]
    pub node_id: u64,
    /// Port for Raft peer traffic [default: port + 10000].
    #[arg(long)]
    pub peer_port: Option<u16>,
    /// Cluster members: `1=host:peerport,2=host:peerport,...`.
    #[arg(long)]
    pub peers: Option<String>,
    /// Maximum simultaneous clients.
    #[arg(long, default_value_t = 10_000)]
    pub maxclients: usize,
    /// Largest bulk string accepted, in bytes.
    #[arg(long, default_value_t = Limits::default().max_bulk_len)]
    pub proto_max_bulk_len: usize,
    /// Most arguments accepted in one request.
    #[arg(long, default_value_t = Limits::default().max_multibulk_len)]
    pub max_multibulk_len: usize,
    /// Most unparsed input buffered per client, in bytes.
    #[arg(long, default_value_t = Limits::default().max_query_buffer)]
    pub client_query_buffer_limit: usize,
    /// Deadline for a write, in ms; after it the outcome is reported unknown.
    #[arg(long, default_value_t = 5_000)]
    pub write_timeout_ms: u64,
    /// Take a Raft snapshot after this many log entries.
    #[arg(long, default_value_t = 10_000)]
    pub snapshot_every: u64,
    /// Lock-delay for LOCKs that give no DELAY, in ms: after such a lease expires (not
    /// after UNLOCK), nobody is granted the key until this much cluster time has passed.
    #[arg(long, default_value_t = 0)]
    pub lock_delay_ms: u64,
    /// Log filter, e.g. `info` or `palisade=debug`.
    #[arg(long, default_value = "info")]
    pub log_level: String,
    /// Start without forming a cluster and wait to be added with RAFT.NODE ADD.
    #[arg(long)]
    pub join: bool,
    /// Shared secret that nodes prove to each other (HMAC challenge-response) before any
    /// peer frame is read; at least 16 bytes, the same on every node. Required when the
    /// peer port is not on a loopback address (unless `--tls-cluster yes`).
    #[arg(long)]
    pub cluster_secret: Option<String>,
    /// Read the cluster secret from this file (its first line), so that it is not on the
    /// command line.
    #[arg(long)]
    pub cluster_secret_file: Option<PathBuf>,
    /// TLS port for clients (0: none). With `--port 0` the node serves TLS only.
    #[arg(long, default_value_t = 0)]
    pub tls_port: u16,
    /// PEM certificate chain of this node (client TLS, and the peer port's with
    /// `--tls-cluster yes`); reread on SIGHUP.
    #[arg(long)]
    pub tls_cert_file: Option<PathBuf>,
    /// PEM private key of `--tls-cert-file`; reread on SIGHUP.
    #[arg(long)]
    pub tls_key_file: Option<PathBuf>,
    /// PEM CA certificates that client (and peer) certificates must chain to.
    #[arg(long)]
    pub tls_ca_cert_file: Option<PathBuf>,
    /// Whether TLS clients must present a certificate signed by the CA.
    #[arg(long, value_enum, default_value_t = AuthClients::Yes)]
    pub tls_auth_clients: AuthClients,
    /// Mutual TLS on the peer port, with the same files.
    #[arg(long, value_enum, default_value_t = YesNo::No)]
    pub tls_cluster: YesNo,
    /// Refuse clients from other hosts while the default user needs no password.
    #[arg(long, value_enum, default_value_t = YesNo::Yes)]
    pub protected_mode: YesNo,
    /// Close a client idle for this many seconds (0: never); subscribers and blocked
    /// clients are exempt.
    #[arg(long, default_value_t = 0)]
    pub timeout: u64,
    /// Redis's `client-output-buffer-limit`: `class hard soft seconds` for one or more
    /// classes (normal, replica, pubsub), over Redis's defaults (`normal 0 0 0 replica
    /// 256mb 64mb 60 pubsub 32mb 8mb 60`). Palisade enforces the pubsub class.
    #[arg(long)]
    pub client_output_buffer_limit: Option<String>,
    /// Redis's `notify-keyspace-events`: the classes of keyspace notifications this node
    /// publishes (`K` `E` `g` `$` `l` `s` `h` `z` `x` `e` `t` `m` `d` `n` `A`; empty: none).
    #[arg(long, default_value = "")]
    pub notify_keyspace_events: String,
    /// Redis's `enable-debug-command`: `no` refuses DEBUG, `yes` allows it, `local` allows
    /// it from loopback connections only.
    #[arg(long, value_enum, default_value_t = DebugCommand::No)]
    pub enable_debug_command: DebugCommand,
    /// The IP this node gives cluster-mode clients (CLUSTER SLOTS, NODES, SHARDS)
    /// [default: `--bind`].
    #[arg(long)]
    pub announce_ip: Option<String>,
    /// The client port this node gives cluster-mode clients [default: `--port`].
    #[arg(long)]
    pub announce_port: Option<u16>,
    /// Serve Prometheus metrics at `http://host:port/metrics` (off unless given).
    #[arg(long)]
    pub metrics_addr: Option<String>,
    /// The switches that only the command line sets.
    #[command(flatten)]
    #[serde(skip)]
    pub flag_only: FlagOnly,
}

/// Flags that have no key in the TOML file: the switches for tests.
#[derive(clap::Args, Debug, Default)]
pub struct FlagOnly {
    /// Allow RAFT.FAULT (cut links to chosen peers). For tests only; never in production.
    #[arg(long)]
    pub enable_fault_injection: bool,
    /// Test-only clock fault: shift this node's leader clock by this many ms.
    #[arg(long, hide = true, allow_hyphen_values = true, default_value_t = 0)]
    pub test_clock_offset_ms: i64,
    /// Test-only clock fault: make this node's leader clock run fast (or slow, if
    /// negative) by this many parts per million.
    #[arg(long, hide = true, allow_hyphen_values = true, default_value_t = 0)]
    pub test_clock_rate_ppm: i64,
    /// Test-only power cut: keep writes that are not yet synced in this process's memory
    /// (RocksDB's manual WAL flush), so that a kill -9 loses them as a power cut would: the
    /// log is left at its last synced point, and the state machine behind it.
    #[arg(long, hide = true)]
    pub test_lose_unsynced_writes: bool,
}

impl Settings {
    /// The settings of this process: its command line, then the file that `--config` names
    /// for every setting not given as a flag. Exits on `--help`, `--version` and bad flags.
    pub fn from_command_line() -> anyhow::Result<Settings> {
        Settings::from_args(std::env::args_os())
    }

    /// As [`Settings::from_command_line`], with `args` as the command line (the first is the
    /// program name).
    pub fn from_args<I, T>(args: I) -> anyhow::Result<Settings>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let matches = Settings::command().get_matches_from(args);
        let flags = Settings::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
        match flags.config.clone() {
            Some(path) => flags.with_file(&matches, &path),
            None => Ok(flags),
        }
    }

    /// Overlays the TOML file at `path` on these settings (flags and defaults), except for
    /// the settings that `matches` says came from the command line.
    fn with_file(self, matches: &ArgMatches, path: &std::path::Path) -> anyhow::Result<Self> {
        let parsing = || format!("parsing config file {}", path.display());
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading config file {}", path.display()))?;
        let file: toml::Table = toml::from_str(&text).with_context(parsing)?;
        let mut merged = toml::Table::try_from(&self).context("encoding the flags as TOML")?;
        for (key, value) in file {
            // A flag wins over the file. A key that is no setting (a flag-only switch, a
            // typo) goes in, so that it is refused below.
            if !(merged.contains_key(&key) && given_as_flag(matches, &key)) {
                merged.insert(key, value);
            }
        }
        let mut settings: Settings = merged.try_into().with_context(parsing)?;
        settings.config = self.config;
        settings.flag_only = self.flag_only;
        Ok(settings)
    }
}

/// True if the setting of file key `key` (kebab-case) was given on the command line.
fn given_as_flag(matches: &ArgMatches, key: &str) -> bool {
    let id = key.replace('-', "_");
    matches.ids().any(|i| i.as_str() == id)
        && matches.value_source(&id) == Some(ValueSource::CommandLine)
}

/// The resolved configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Client listen address.
    pub bind: String,
    /// Client port (0: no plain listener, the node serves TLS only).
    pub port: u16,
    /// Data directory.
    pub dir: PathBuf,
    /// Password, if any.
    pub requirepass: Option<String>,
    /// The ACL file (`--aclfile`), if any.
    pub aclfile: Option<PathBuf>,
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
    /// Default lock-delay in ms (`--lock-delay-ms`).
    pub lock_delay_ms: u64,
    /// Log filter.
    pub log_level: String,
    /// Wait to be added to an existing cluster instead of forming one.
    pub join: bool,
    /// Client TLS (None: no TLS listener).
    pub tls: Option<TlsSettings>,
    /// Mutual TLS on the peer port (`--tls-cluster yes`; the files are `tls`'s).
    pub tls_cluster: bool,
    /// `--protected-mode`.
    pub protected_mode: bool,
    /// `--timeout`: idle seconds before a client is closed (0: never).
    pub timeout: u64,
    /// `--client-output-buffer-limit`, as given (the server checks it and applies it over
    /// Redis's defaults).
    pub client_output_buffer_limit: Option<String>,
    /// `--notify-keyspace-events`, as given (checked: only Redis's class characters).
    pub notify_keyspace_events: String,
    /// `--enable-debug-command`.
    pub enable_debug_command: DebugCommand,
    /// RAFT.FAULT is allowed.
    pub fault_injection: bool,
    /// Test-only clock offset in ms (chaos tests).
    pub test_clock_offset_ms: i64,
    /// Test-only clock rate error in ppm (chaos tests).
    pub test_clock_rate_ppm: i64,
    /// See [`FlagOnly::test_lose_unsynced_writes`].
    pub test_lose_unsynced_writes: bool,
    /// The `--config` file, which CONFIG REWRITE writes (None: there is none).
    pub config_file: Option<PathBuf>,
    /// The peer handshake's shared secret (`--cluster-secret`), if any.
    pub cluster_secret: Option<Vec<u8>>,
    /// `--announce-ip` and `--announce-port`, as given (see [`Config::announce`]).
    pub announce: (Option<String>, Option<u16>),
    /// `--metrics-addr`: where /metrics is served (None: not served).
    pub metrics_addr: Option<String>,
}

/// The TLS settings, once checked: a port and the files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// The TLS client port (0: none, when only the peer port uses TLS).
    pub port: u16,
    /// Certificate, key and CA files.
    pub files: crate::tls::Files,
    /// `--tls-auth-clients`.
    pub auth_clients: AuthClients,
}

/// Checks the TLS flags: a TLS port or `--tls-cluster yes` needs the certificate and key;
/// verifying clients or peers needs the CA (Redis's rule and text).
fn tls_settings(s: &Settings) -> anyhow::Result<Option<TlsSettings>> {
    if s.tls_port == 0 && !s.tls_cluster.on() {
        return Ok(None);
    }
    let (Some(cert), Some(key)) = (&s.tls_cert_file, &s.tls_key_file) else {
        bail!("--tls-port and --tls-cluster need --tls-cert-file and --tls-key-file");
    };
    let verifies = s.tls_cluster.on() || (s.tls_port != 0 && s.tls_auth_clients != AuthClients::No);
    if verifies && s.tls_ca_cert_file.is_none() {
        bail!("{}", crate::tls::TlsError::NoCa);
    }
    Ok(Some(TlsSettings {
        port: s.tls_port,
        files: crate::tls::Files {
            cert: cert.clone(),
            key: key.clone(),
            ca: s.tls_ca_cert_file.clone(),
        },
        auth_clients: s.tls_auth_clients,
    }))
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

/// The cluster secret from `--cluster-secret` or the first line of `--cluster-secret-file`.
fn cluster_secret(
    flag: Option<String>,
    file: Option<&std::path::Path>,
) -> anyhow::Result<Option<Vec<u8>>> {
    let secret = match (flag, file) {
        (Some(_), Some(_)) => bail!("give --cluster-secret or --cluster-secret-file, not both"),
        (Some(s), None) => s,
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading --cluster-secret-file {}", path.display()))?;
            text.lines().next().unwrap_or("").to_string()
        }
        (None, None) => return Ok(None),
    };
    let min = MIN_SECRET_LEN;
    if secret.len() < min {
        bail!(
            "the cluster secret has {} bytes; it must have at least {min} (e.g. `openssl rand -hex 32`)",
            secret.len()
        );
    }
    Ok(Some(secret.into_bytes()))
}

/// True if `bind` names only loopback addresses (`127.0.0.1`, `::1`, `localhost`).
fn is_loopback(bind: &str) -> bool {
    use std::net::ToSocketAddrs;
    if let Ok(ip) = bind.parse::<std::net::IpAddr>() {
        return ip.is_loopback();
    }
    match (bind, 0).to_socket_addrs() {
        Ok(addrs) => {
            let addrs: Vec<_> = addrs.collect();
            !addrs.is_empty() && addrs.iter().all(|a| a.ip().is_loopback())
        }
        Err(_) => false,
    }
}

impl Config {
    /// Resolves the settings: the peer list parsed, the peer port derived from the client
    /// port unless given, and the whole checked.
    pub fn from_settings(s: Settings) -> anyhow::Result<Config> {
        let peers = match &s.peers {
            Some(p) => parse_peers(p)?,
            None => BTreeMap::new(),
        };
        let tls = tls_settings(&s)?;
        if s.port == 0 && s.tls_port == 0 {
            bail!("Configured to not listen anywhere: --port 0 needs a --tls-port");
        }
        // As Redis's cluster bus: offset from the TLS port when the plain one is off.
        let base_port = if s.port == 0 { s.tls_port } else { s.port };
        let cfg = Config {
            peer_port: s
                .peer_port
                .unwrap_or_else(|| base_port.wrapping_add(PEER_PORT_OFFSET)),
            tls,
            tls_cluster: s.tls_cluster.on(),
            protected_mode: s.protected_mode.on(),
            timeout: s.timeout,
            client_output_buffer_limit: s.client_output_buffer_limit,
            // Redis's classes; the server shows them in Redis's normal form.
            notify_keyspace_events: if s
                .notify_keyspace_events
                .chars()
                .all(|c| "Ag$lshzxeKEtmdn".contains(c))
            {
                s.notify_keyspace_events
            } else {
                bail!("--notify-keyspace-events: Invalid event class character. Use 'Ag$lshzxeKEtmdn'.")
            },
            enable_debug_command: s.enable_debug_command,
            bind: s.bind,
            port: s.port,
            dir: s.dir,
            requirepass: s.requirepass,
            aclfile: s.aclfile,
            node_id: s.node_id,
            peers,
            maxclients: s.maxclients,
            limits: Limits {
                max_bulk_len: s.proto_max_bulk_len,
                max_multibulk_len: s.max_multibulk_len,
                max_query_buffer: s.client_query_buffer_limit,
            },
            write_timeout_ms: s.write_timeout_ms,
            snapshot_every: s.snapshot_every.max(1),
            lock_delay_ms: s.lock_delay_ms,
            log_level: s.log_level,
            join: s.join,
            fault_injection: s.flag_only.enable_fault_injection,
            test_clock_offset_ms: s.flag_only.test_clock_offset_ms,
            test_clock_rate_ppm: s.flag_only.test_clock_rate_ppm,
            test_lose_unsynced_writes: s.flag_only.test_lose_unsynced_writes,
            config_file: s.config,
            cluster_secret: cluster_secret(s.cluster_secret, s.cluster_secret_file.as_deref())?,
            announce: (s.announce_ip, s.announce_port),
            metrics_addr: s.metrics_addr,
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

    /// The address the peer port listens on. Anyone who can reach an unauthenticated peer
    /// port could vote, append to the log and run commands, so without a cluster secret or
    /// mutual TLS it is never opened on a non-loopback address: a node alone (no other
    /// members, not joining) keeps it on 127.0.0.1, and a cluster member refuses to start.
    pub fn peer_bind(&self) -> anyhow::Result<String> {
        if self.cluster_secret.is_some() || self.tls_cluster || is_loopback(&self.bind) {
            return Ok(self.bind.clone());
        }
        let alone = !self.join && self.peers.keys().all(|id| *id == self.node_id);
        if alone {
            return Ok("127.0.0.1".into());
        }
        bail!(
            "refusing to open the peer port on {}:{} without authentication: any host that can reach it could vote, append to the log and run commands. Give every node the same --cluster-secret (or --cluster-secret-file), or use --tls-cluster yes, or bind to 127.0.0.1",
            self.bind,
            self.peer_port
        )
    }

    /// The client address this node gives cluster-mode clients: `--announce-ip` and
    /// `--announce-port`, each defaulting to the bound client address.
    pub fn announce(&self, bound: std::net::SocketAddr) -> (String, u16) {
        let ip = (self.announce.0.clone()).unwrap_or_else(|| bound.ip().to_string());
        (ip, self.announce.1.unwrap_or(bound.port()))
    }

    /// The address peers use to reach this node.
    pub fn peer_addr(&self) -> String {
        self.peers
            .get(&self.node_id)
            .cloned()
            .unwrap_or_else(|| format!("{}:{}", self.bind, self.peer_port))
    }
}

/// CONFIG REWRITE: puts `values` (file key and current value; None: unset) into the TOML
/// file at `path`, as Redis rewrites its own file. A key already in the file gets its new
/// value on its own line; a key that is not there is added at the end when its value is not
/// the default; an unset key is removed. Comments, blank lines and the order of the other
/// lines stay. A file laid out in a way this cannot follow line by line (a multi-line value,
/// a quoted key) is written afresh from its settings instead, without its comments. The new
/// file replaces the old one by a rename, so a crash leaves one or the other.
pub fn rewrite(
    path: &std::path::Path,
    values: &[(&str, Option<toml::Value>)],
) -> anyhow::Result<()> {
    let defaults = toml::Table::try_from(
        Settings::try_parse_from(["palisade"]).context("the default settings")?,
    )?;
    let old = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e.into()),
    };
    let mut want: toml::Table = toml::from_str(&old).context("the file no longer parses")?;
    let is_default = |k: &str, v: &toml::Value| defaults.get(k) == Some(v);
    let mut lines = Vec::new();
    let mut written = Vec::new();
    for line in old.lines() {
        let key = line_key(line);
        match values.iter().find(|(k, _)| Some(*k) == key) {
            Some((k, v)) => {
                if let (Some(v), false) = (v, written.contains(k)) {
                    lines.push(format!("{k} = {v}"));
                }
                written.push(*k);
            }
            None => lines.push(line.to_string()),
        }
    }
    for (k, v) in values {
        match v {
            Some(v) if want.contains_key(*k) || !is_default(k, v) => {
                if !written.contains(k) {
                    lines.push(format!("{k} = {v}"));
                }
                want.insert(k.to_string(), v.clone());
            }
            Some(_) => {}
            None => {
                want.remove(*k);
            }
        }
    }
    let mut text = lines.join("\n");
    text.push('\n');
    if toml::from_str::<toml::Table>(&text).ok().as_ref() != Some(&want) {
        text = toml::to_string(&want)?;
    }
    let tmp = path.with_extension("rewrite.tmp");
    std::fs::write(&tmp, text)?;
    std::fs::File::open(&tmp)?.sync_all()?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

/// The key a `key = value` line of a flat TOML file sets, if it is one.
fn line_key(line: &str) -> Option<&str> {
    let (key, _) = line.split_once('=')?;
    let key = key.trim();
    let bare = !key.is_empty()
        && key
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_');
    bare.then_some(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(args: &[&str]) -> anyhow::Result<Config> {
        let argv = ["palisade"].iter().chain(args);
        Config::from_settings(Settings::from_args(argv)?)
    }

    /// A config file in a temporary directory, with `text` in it.
    fn file(text: &str) -> (tempfile::TempDir, String) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.toml");
        std::fs::write(&path, text).unwrap();
        let path = path.to_str().unwrap().to_string();
        (dir, path)
    }

    #[test]
    fn defaults_without_flags() {
        let cfg = config(&[]).unwrap();
        assert_eq!(
            (cfg.bind.as_str(), cfg.port, cfg.peer_port),
            ("127.0.0.1", 6379, 16379)
        );
        assert_eq!(cfg.dir, PathBuf::from("./data"));
        // The defaults of docs/configuration.md.
        assert_eq!(
            (
                cfg.node_id,
                cfg.maxclients,
                cfg.write_timeout_ms,
                cfg.snapshot_every
            ),
            (1, 10_000, 5_000, 10_000)
        );
        assert_eq!(
            (
                cfg.limits.max_bulk_len,
                cfg.limits.max_multibulk_len,
                cfg.limits.max_query_buffer
            ),
            (536_870_912, 1_048_576, 1_073_741_824)
        );
        assert_eq!((cfg.log_level.as_str(), cfg.requirepass), ("info", None));
        assert!(cfg.peers.is_empty() && !cfg.join && !cfg.fault_injection);
        assert!(!cfg.test_lose_unsynced_writes);
        assert_eq!((cfg.test_clock_offset_ms, cfg.test_clock_rate_ppm), (0, 0));
    }

    #[test]
    fn flags_override_file() {
        let (_dir, path) = file("port = 7000\nbind = \"0.0.0.0\"\nproto-max-bulk-len = 100\n");
        let cfg = config(&["--config", &path, "--port", "7001"]).unwrap();
        assert_eq!(
            (
                cfg.bind.as_str(),
                cfg.port,
                cfg.peer_port,
                cfg.limits.max_bulk_len
            ),
            ("0.0.0.0", 7001, 17001, 100)
        );
        // A flag given with its default value still wins over the file.
        let cfg = config(&["--config", &path, "--port", "6379"]).unwrap();
        assert_eq!((cfg.port, cfg.peer_port), (6379, 16379));
        // The peer port follows the file's client port.
        let cfg = config(&["--config", &path]).unwrap();
        assert_eq!((cfg.port, cfg.peer_port), (7000, 17000));
    }

    #[test]
    fn every_file_key_is_read() {
        let (_dir, path) = file(
            "bind = \"10.0.0.5\"\nport = 1\ndir = \"/d\"\nrequirepass = \"pw\"\nnode-id = 2\n\
             peer-port = 3\npeers = \"2=h:3\"\nmaxclients = 4\nproto-max-bulk-len = 5\n\
             max-multibulk-len = 6\nclient-query-buffer-limit = 7\nwrite-timeout-ms = 8\n\
             snapshot-every = 9\nlog-level = \"debug\"\njoin = true\n",
        );
        let cfg = config(&["--config", &path]).unwrap();
        assert_eq!(
            (
                cfg.bind.as_str(),
                cfg.port,
                cfg.dir.to_str(),
                cfg.requirepass.as_deref()
            ),
            ("10.0.0.5", 1, Some("/d"), Some("pw"))
        );
        assert_eq!((cfg.node_id, cfg.peer_port, cfg.maxclients), (2, 3, 4));
        assert_eq!(cfg.peers.get(&2).map(String::as_str), Some("h:3"));
        let l = &cfg.limits;
        assert_eq!(
            (l.max_bulk_len, l.max_multibulk_len, l.max_query_buffer),
            (5, 6, 7)
        );
        assert_eq!((cfg.write_timeout_ms, cfg.snapshot_every), (8, 9));
        assert_eq!((cfg.log_level.as_str(), cfg.join), ("debug", true));
        // --join on the command line and `join = false` in the file: the flag wins.
        let (_dir, path) = file("join = false\n");
        assert!(config(&["--config", &path, "--join"]).unwrap().join);
    }

    #[test]
    fn file_errors_name_the_file() {
        let err = |text: &str| {
            let (_dir, path) = file(text);
            let e = config(&["--config", &path]).unwrap_err();
            (format!("{e}"), path)
        };
        for bad in [
            "bogus = 1\n",
            "port = \"x\"\n",
            "port = 70000\n",
            "not toml\n",
            // Flags only: the file itself and the test switches have no key.
            "config = \"other.toml\"\n",
            "enable-fault-injection = true\n",
            "test-lose-unsynced-writes = true\n",
        ] {
            let (e, path) = err(bad);
            assert_eq!(e, format!("parsing config file {path}"), "{bad}");
        }
        let e = config(&["--config", "/nonexistent/p.toml"]).unwrap_err();
        assert_eq!(format!("{e}"), "reading config file /nonexistent/p.toml");
    }

    #[test]
    fn checks_keep_their_text() {
        let e = config(&["--node-id", "0"]).unwrap_err();
        assert_eq!(format!("{e}"), "--node-id must be at least 1");
        let e = config(&["--node-id", "3", "--peers", "1=a:1,2=b:2"]).unwrap_err();
        assert_eq!(
            format!("{e}"),
            "--peers does not list --node-id 3; add it, or start with --join"
        );
        let cfg = config(&["--node-id", "3", "--peers", "1=a:1,2=b:2", "--join"]).unwrap();
        assert!(cfg.join);
        assert_eq!(
            config(&["--snapshot-every", "0"]).unwrap().snapshot_every,
            1
        );
    }

    #[test]
    fn the_documented_flags_exist() {
        let cmd = Settings::command();
        let longs: Vec<&str> = cmd.get_arguments().filter_map(|a| a.get_long()).collect();
        for flag in [
            "bind",
            "port",
            "dir",
            "config",
            "requirepass",
            "aclfile",
            "node-id",
            "peer-port",
            "peers",
            "join",
            "snapshot-every",
            "enable-fault-injection",
            "maxclients",
            "proto-max-bulk-len",
            "max-multibulk-len",
            "client-query-buffer-limit",
            "write-timeout-ms",
            "log-level",
            "test-clock-offset-ms",
            "test-clock-rate-ppm",
            "test-lose-unsynced-writes",
            "cluster-secret",
            "cluster-secret-file",
            "tls-port",
            "tls-cert-file",
            "tls-key-file",
            "tls-ca-cert-file",
            "tls-auth-clients",
            "tls-cluster",
            "protected-mode",
            "timeout",
            "client-output-buffer-limit",
            "announce-ip",
            "announce-port",
        ] {
            assert!(longs.contains(&flag), "--{flag}");
        }
        let cfg = config(&[
            "--test-clock-offset-ms",
            "-5",
            "--test-clock-rate-ppm",
            "-7",
        ])
        .unwrap();
        assert_eq!(
            (cfg.test_clock_offset_ms, cfg.test_clock_rate_ppm),
            (-5, -7)
        );
    }

    #[test]
    fn rewrite_keeps_comments_and_skips_defaults() {
        let (_dir, path) = file("# mine\nport = 7000 # inline\n\nmaxclients = 5\n");
        let path = std::path::Path::new(&path);
        let int = |n| Some(toml::Value::Integer(n));
        let values = [
            ("port", int(7001)),
            ("maxclients", int(10_000)),
            ("write-timeout-ms", int(5000)),
            ("lock-delay-ms", int(30)),
            ("requirepass", None),
        ];
        rewrite(path, &values).unwrap();
        let text = std::fs::read_to_string(path).unwrap();
        assert_eq!(
            text,
            "# mine\nport = 7001\n\nmaxclients = 10000\nlock-delay-ms = 30\n"
        );
        // The file still starts a node, with the rewritten values.
        let cfg = config(&["--config", path.to_str().unwrap()]).unwrap();
        assert_eq!(
            (cfg.port, cfg.maxclients, cfg.lock_delay_ms),
            (7001, 10_000, 30)
        );
        // An unset key goes; a layout it cannot follow is written afresh.
        std::fs::write(path, "requirepass = '''\npw'''\nport = 1\n").unwrap();
        rewrite(path, &[("requirepass", None), ("port", int(2))]).unwrap();
        let table: toml::Table = toml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert_eq!(table.get("requirepass"), None);
        assert_eq!(table.get("port"), int(2).as_ref());
    }

    #[test]
    fn security_settings_from_flags_and_file() {
        let cfg = config(&[]).unwrap();
        assert!(cfg.tls.is_none() && !cfg.tls_cluster);
        assert!(cfg.protected_mode);
        assert_eq!((cfg.timeout, cfg.client_output_buffer_limit), (0, None));
        let (_dir, path) = file(
            "tls-port = 7443\ntls-cert-file = \"/c.crt\"\ntls-key-file = \"/c.key\"\n\
             tls-ca-cert-file = \"/ca.crt\"\ntls-auth-clients = \"optional\"\n\
             tls-cluster = \"yes\"\nprotected-mode = \"no\"\ntimeout = 5\n\
             client-output-buffer-limit = \"pubsub 1mb 1mb 0\"\n",
        );
        let cfg = config(&["--config", &path, "--tls-auth-clients", "no"]).unwrap();
        let tls = cfg.tls.clone().unwrap();
        assert_eq!(tls.port, 7443);
        assert_eq!(tls.files.cert, PathBuf::from("/c.crt"));
        assert_eq!(tls.files.key, PathBuf::from("/c.key"));
        assert_eq!(tls.files.ca, Some(PathBuf::from("/ca.crt")));
        assert_eq!(tls.auth_clients, AuthClients::No);
        assert!(cfg.tls_cluster && !cfg.protected_mode);
        assert_eq!(cfg.timeout, 5);
        assert_eq!(
            cfg.client_output_buffer_limit.as_deref(),
            Some("pubsub 1mb 1mb 0")
        );
    }

    #[test]
    fn tls_checks_keep_their_text() {
        let e = config(&["--tls-port", "7443"]).unwrap_err();
        assert_eq!(
            format!("{e}"),
            "--tls-port and --tls-cluster need --tls-cert-file and --tls-key-file"
        );
        let files = ["--tls-cert-file", "/c", "--tls-key-file", "/k"];
        let with = |extra: &[&str]| {
            let mut args = files.to_vec();
            args.extend_from_slice(extra);
            config(&args)
        };
        let no_ca = "Either tls-ca-cert-file or tls-ca-cert-dir must be specified when \
                     tls-cluster, tls-replication or tls-auth-clients are enabled!";
        let e = with(&["--tls-port", "7443"]).unwrap_err();
        assert_eq!(format!("{e}"), no_ca);
        let e = with(&["--tls-cluster", "yes"]).unwrap_err();
        assert_eq!(format!("{e}"), no_ca);
        let cfg = with(&["--tls-port", "7443", "--tls-auth-clients", "no"]).unwrap();
        assert_eq!(cfg.tls.map(|t| t.files.ca), Some(None));
        // --port 0 serves TLS only, and the peer port follows the TLS port; without a
        // TLS port it would serve nothing.
        let cfg = with(&[
            "--port",
            "0",
            "--tls-port",
            "7443",
            "--tls-auth-clients",
            "no",
        ]);
        assert_eq!(cfg.unwrap().peer_port, 17443);
        let e = config(&["--port", "0"]).unwrap_err();
        assert_eq!(
            format!("{e}"),
            "Configured to not listen anywhere: --port 0 needs a --tls-port"
        );
        assert!(Settings::try_parse_from(["palisade", "--tls-auth-clients", "maybe"]).is_err());
        assert!(Settings::try_parse_from(["palisade", "--protected-mode", "on"]).is_err());
    }

    #[test]
    fn peers_parse() {
        let p = parse_peers("1=a:1,2=b:2").unwrap();
        assert_eq!(p.get(&2).map(String::as_str), Some("b:2"));
        assert!(parse_peers("x=a:1").is_err());
        assert!(parse_peers("1=a").is_err());
    }
}
