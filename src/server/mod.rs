//! The server: accept loop, per-connection sessions, write batching, read batching and
//! leader housekeeping, all sharing one [`Shared`].
//!
//! # Layout
//! - `shared.rs`: [`Shared`], the state every task shares, and its live settings;
//! - `stats.rs`: [`Stats`], the server-wide counters, and their sampler;
//! - `info.rs`: INFO's figures ([`Shared::info`]) and [`role_name`];
//! - `listen.rs`: the client ports, the accept loop, maxclients and protected mode;
//! - `start.rs`: [`Server`]: start-up, in order, and ordered shutdown;
//! - `handler.rs`: the leader's side of forwarding (work followers send over the peer port);
//! - the other files: sessions, batching (`proposer`, `reader`), waiters, housekeeping and
//!   the commands the server runs itself.

pub mod acl;
pub mod admin;
pub mod clients;
pub mod cluster;
pub mod errors;
pub mod forward;
mod handler;
pub mod housekeeping;
mod info;
mod listen;
pub mod lockwait;
pub mod metrics;
pub mod monitor;
pub mod popwait;
pub mod proposer;
pub mod reader;
pub mod replicas;
pub mod save;
pub mod session;
mod shared;
mod start;
mod stats;
pub mod stream;
mod waiters;

pub use info::role_name;
pub use listen::PROTECTED_MODE_DENIED;
pub use shared::Shared;
pub use start::{Server, BROADCAST_SUBMITTED_ENV};
pub use stats::Stats;
