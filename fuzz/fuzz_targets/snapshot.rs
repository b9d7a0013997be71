//! The snapshot image decoder (what a leader sends a follower, and what a restart reads):
//! arbitrary bytes must give an error, never a panic or an allocation of unbounded size
//! (AddressSanitizer fails any single allocation over `-malloc_limit_mb`). A decoded image is
//! checked for what the decoder promises: the header's revision and script budget are the
//! keyspace's. Decoding runs on a thread with a tokio worker's stack (2 MiB), as in the server.
#![no_main]

use libfuzzer_sys::fuzz_target;
use palisade::store::snapshot::decode;
use palisade_fuzz::on_server_stack;

fuzz_target!(|data: &[u8]| on_server_stack(data, check));

fn check(data: &[u8]) {
    if let Ok((header, ks)) = decode(data) {
        assert_eq!(ks.revision(), header.revision);
        assert_eq!(ks.script_budget_setting(), header.script_budget);
        assert_eq!(ks.scripts(), &header.scripts);
    }
}
