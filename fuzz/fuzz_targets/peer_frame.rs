//! The peer frame decoders: a request frame ([`Envelope`], what the peer port reads from
//! anyone who connects) and a response frame ([`PeerResponse`], what a node reads from the
//! peer it called). Arbitrary bytes must give an error, never a panic or an unbounded
//! allocation; a frame that decodes must encode again, and that encoding must decode to
//! the same encoding (so the two sides can never disagree about a frame's meaning).
//!
//! Decoding runs on a thread with a tokio worker's stack (2 MiB), so that deep nesting
//! overflows here if it would in the server. The first byte picks the decoder (modulo 4:
//! request, response, and the handshake's two frame types, `Hello` and `Handshake`, which
//! a node reads from anyone before it knows who they are).
#![no_main]

use libfuzzer_sys::fuzz_target;
use palisade::raft::auth::{Handshake, Hello};
use palisade::raft::protocol::{Envelope, PeerResponse};
use palisade_fuzz::on_server_stack;
use serde::{de::DeserializeOwned, Serialize};

fn round_trip<T: Serialize + DeserializeOwned>(frame: &[u8]) {
    let Ok(value) = postcard::from_bytes::<T>(frame) else {
        return;
    };
    let once = postcard::to_allocvec(&value).expect("a decoded frame encodes");
    let back: T = postcard::from_bytes(&once).expect("an encoded frame decodes");
    let twice = postcard::to_allocvec(&back).expect("a decoded frame encodes");
    assert_eq!(once, twice, "re-encoding changed the frame");
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, frame)) = data.split_first() else {
        return;
    };
    match which % 4 {
        0 => on_server_stack(frame, round_trip::<Envelope>),
        1 => on_server_stack(frame, round_trip::<PeerResponse>),
        2 => on_server_stack(frame, round_trip::<Hello>),
        _ => on_server_stack(frame, round_trip::<Handshake>),
    }
});
