//! Arbitrary histories of lock commands (LOCK with WAIT and DELAY, UNLOCK, RENEW, DEL,
//! PEXPIRE, SET NX PX, FLUSHALL, FENCEDSET, RENAME, COPY, MULTI/EXEC, scripts, eviction
//! entries, cancels, releases of lost grants, purges, restores and the passing of time),
//! decoded from the fuzzer's bytes and applied through the real apply path, with every
//! invariant of the lock model checked after every step (`palisade::store::lock_model`): one
//! token per grant, rising tokens per key, FIFO grants, fences that never go down, replicas
//! that agree with or without a restore. A violation panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use palisade::store::lock_model::{Op, World};

/// Most steps of one input: long enough for any interleaving of a few waiters.
const MAX_STEPS: usize = 200;

fuzz_target!(|data: &[u8]| {
    let mut ops = Op::decode_all(data);
    ops.truncate(MAX_STEPS);
    World::run(ops);
});
