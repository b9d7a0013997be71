//! Palisade's integration tests: one binary, real processes, exact reply bytes.
//!
//! Every test starts its own server(s) on free ports with a temporary data directory
//! (see `common`). Differential tests also start a real `redis-server`, and the seed
//! scenario runs python3 client processes; both must be on PATH (the test command
//! installs them), and a missing one fails the test with a message saying so.
//!
//! Run with: `cargo test --release --test it`

mod common;

mod acl;
mod bad_input;
mod bench;
mod blpop;
mod chaos;
mod cluster;
mod cluster_facade;
mod cluster_scripting;
mod cond_writes;
mod config;
mod determinism;
mod diff_bitfield;
mod diff_geo;
mod diff_lists;
mod diff_lua;
mod diff_notify;
mod diff_server;
mod diff_sets;
mod diff_shard;
mod diff_strings;
mod diff_units;
mod diff_zsets;
mod differential;
mod durability;
mod failstop;
mod getkeys;
mod glob;
mod golden;
mod handshake;
mod info_stats;
mod layers;
mod lists_blocking;
mod lock_kinds;
mod lock_notify;
mod lock_queue;
mod lock_safety;
mod lock_scripts;
mod locks;
mod metrics;
mod mlock;
mod peer_auth;
mod pubsub;
mod replicas;
mod rmw;
mod scripting;
mod security;
mod seed_scenario;
mod tools;
mod transactions;
mod types;
mod upgrade;
mod write_path;
