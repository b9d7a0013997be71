//! # Palisade
//!
//! A Redis-wire-compatible lock server built on Raft. Every write is a command inside a log
//! entry of an openraft log persisted in RocksDB; locks are leases with fencing tokens.
//!
//! # Layout
//!
//! The request path, from bytes to state and back:
//!
//! ```text
//! TCP bytes -> resp::parse (request) -> cmd::parse (dispatch table) -> Request
//!   Request::Conn  -> server::session (HELLO, CLIENT, INFO, ...)
//!   Request::Data, a write (!Command::is_read)
//!                  -> server::proposer (batch) -> raft (log entry, fsync) -> store::state_machine
//!                     -> cmd::Command::apply on state::Keyspace -> Reply
//!   Request::Data, a read (Command::is_read)
//!                  -> server::reader (one ReadIndex round per batch) -> Command::query -> Reply
//! Reply -> resp::frame (RESP2 or RESP3 bytes)
//! ```
//!
//! - [`resp`]: the only code that touches bytes.
//! - [`cmd`]: one command (or family) per file, with its table rows and log tags; the
//!   registry that joins them.
//! - [`state`]: the pure, deterministic keyspace, revision and cluster clock (a leaf: it uses
//!   no other module).
//! - [`store`]: RocksDB schema, log store, state machine and snapshots.
//! - [`script`]: sandboxed Lua 5.1 for EVAL, run inside apply.
//! - [`raft_types`]: the log entry payload and openraft's type configuration.
//! - [`raft`]: the Raft handle, peer network, node start-up.
//! - [`server`]: accept loop, sessions, batching, housekeeping.
//! - [`config`]: flags, TOML file and defaults.
//! - [`tls`]: rustls configurations for the client port and the peer port, reloaded on SIGHUP.
//!
//! Which module may use which is drawn in docs/architecture.md ("Layers").

pub mod algo;
pub mod cmd;
pub mod config;
pub mod raft;
pub mod raft_types;
pub mod resp;
pub mod script;
pub mod server;
pub mod state;
pub mod store;
pub mod tls;
