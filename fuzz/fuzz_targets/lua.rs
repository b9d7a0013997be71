//! The Lua bridge: a fuzzed script body, KEYS and ARGV run through `script::run` (the entry
//! point EVAL and the unit tests use) with a small instruction budget, over a keyspace that
//! holds one key of each type. The process must not panic or abort, and a script must be
//! deterministic, since every replica runs it inside apply: two runs on equal keyspaces give
//! the same reply and leave the same keys. The read-only path (EVAL_RO) runs it too. It
//! all runs on a thread with a tokio worker's stack (2 MiB), where apply runs scripts.
//!
//! Input: the body, then NUL-separated strings, the first half KEYS and the rest ARGV.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use palisade::cmd::{self, Ctx, Request};
use palisade::script::{run, Access, Invocation};
use palisade::state::Keyspace;
use palisade_fuzz::on_server_stack;

/// Small, so that a runaway loop ends quickly; big enough for real scripts.
const BUDGET: u64 = 20_000;
const NOW: u64 = 1_000;

/// A keyspace with one key of each type, built by the commands clients use.
fn keyspace() -> Keyspace {
    let mut ks = Keyspace::default();
    for line in [
        "SET s 1",
        "HSET h f v g 2",
        "RPUSH l a b c",
        "LOCK lk owner PX 5000",
        "SET t v PX 100",
    ] {
        let argv = line
            .split(' ')
            .map(|w| Bytes::copy_from_slice(w.as_bytes()));
        let revision = ks.bump_revision();
        if let Ok(Request::Data(c)) = cmd::parse(argv.collect()) {
            c.apply(&mut ks, Ctx { now: NOW, revision });
        }
    }
    ks
}

fuzz_target!(|data: &[u8]| on_server_stack(data, run_twice));

/// Runs the script twice with write access (on equal keyspaces) and once read-only.
fn run_twice(data: &[u8]) {
    let mut parts = data.split(|&b| b == 0);
    let body = parts.next().unwrap_or_default();
    let strings: Vec<Bytes> = parts.map(Bytes::copy_from_slice).collect();
    let (keys, args) = strings.split_at(strings.len() / 2);
    let inv = Invocation {
        sha: "fuzz",
        body,
        keys,
        args,
        now: NOW,
        budget: BUDGET,
        user: None,
        cost: palisade::script::cost::CostModel::Metered,
    };
    let mut first = keyspace();
    first.bump_revision();
    let one = run(Access::Write(&mut first), &inv);
    let mut second = keyspace();
    second.bump_revision();
    let two = run(Access::Write(&mut second), &inv);
    assert_eq!(one, two, "two runs of one script replied differently");
    assert_eq!(
        first.entries(),
        second.entries(),
        "two runs left different keys"
    );
    let read = keyspace();
    let _ = run(Access::Read(&read), &inv);
}
