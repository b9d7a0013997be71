//! The RESP request parser, on whatever a client can send (multibulk and inline), with and
//! without the unauthenticated limits. Besides never panicking, it must be consistent:
//! - the same bytes arriving in two pieces (or one byte at a time) give the same requests,
//!   leave the same unparsed bytes and end the same way;
//! - the unauthenticated limits only ever cut a run short: up to their error, the requests
//!   are the ones an authenticated client gets;
//! - a multibulk request re-encoded parses back to the same arguments.
//!
//! The first byte picks the limits (bit 0: authenticated; bits 1-2: one of four bulk and
//! multibulk limits), the second where the input is split; the rest is the client's bytes.
#![no_main]

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use palisade::resp::{parse_request, Limits, ProtocolError};

/// What one client's bytes come to: the requests, then how parsing stopped (incomplete:
/// `None`, or the error), and the bytes left unparsed (when incomplete).
#[derive(Debug, PartialEq)]
struct Outcome {
    requests: Vec<Vec<Bytes>>,
    end: Option<ProtocolError>,
    left: Vec<u8>,
}

/// Parses everything in `buf`, as a connection does after each read.
fn drain(buf: &mut BytesMut, limits: &Limits, auth: bool, out: &mut Outcome) -> bool {
    loop {
        match parse_request(buf, limits, auth) {
            Ok(Some(req)) => out.requests.push(req),
            Ok(None) => return true,
            Err(e) => {
                out.end = Some(e);
                return false;
            }
        }
    }
}

/// Feeds `pieces` one after another, parsing after each.
fn feed<'a>(pieces: impl IntoIterator<Item = &'a [u8]>, limits: &Limits, auth: bool) -> Outcome {
    let mut out = Outcome {
        requests: Vec::new(),
        end: None,
        left: Vec::new(),
    };
    let mut buf = BytesMut::new();
    for piece in pieces {
        buf.extend_from_slice(piece);
        if !drain(&mut buf, limits, auth, &mut out) {
            break;
        }
    }
    // After an error the connection closes: what was left unread does not matter (and
    // depends on how much had arrived).
    if out.end.is_none() {
        out.left = buf.to_vec();
    }
    out
}

fn limits(flags: u8) -> Limits {
    let (bulk, count) = match (flags >> 1) & 3 {
        0 => (512 * 1024 * 1024, 1024 * 1024),
        1 => (16, 4),
        2 => (0, 1),
        _ => (3, 0),
    };
    Limits {
        max_bulk_len: bulk,
        max_multibulk_len: count,
        // The query buffer limit depends on how the bytes were cut, as in Redis; it is out of
        // reach of inputs this size either way, like the 64 KiB line limit.
        ..Limits::default()
    }
}

/// RESP multibulk encoding of one request.
fn encode(args: &[Bytes]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

fn is_unauth_error(e: &Option<ProtocolError>) -> bool {
    matches!(e, Some(ProtocolError::Malformed(t)) if t.starts_with("unauthenticated"))
}

fuzz_target!(|data: &[u8]| {
    let [flags, split, input @ ..] = data else {
        return;
    };
    let (auth, limits) = (flags & 1 == 1, limits(*flags));
    let whole = feed([input], &limits, auth);

    let at = (*split as usize * input.len()) / 255;
    let (a, b) = input.split_at(at);
    assert_eq!(feed([a, b], &limits, auth), whole, "split at {at}");
    if input.len() <= 64 {
        let bytes = input.chunks(1);
        assert_eq!(feed(bytes, &limits, auth), whole, "one byte at a time");
    }

    if !auth {
        let authed = feed([input], &limits, true);
        let n = whole.requests.len();
        assert_eq!(authed.requests.get(..n), Some(&whole.requests[..]));
        if !is_unauth_error(&whole.end) {
            assert_eq!(
                authed, whole,
                "the unauthenticated limits changed more than they cut"
            );
        }
    }

    if input.first() == Some(&b'*') {
        if let Some(first) = whole.requests.first().filter(|r| !r.is_empty()) {
            let again = feed([&encode(first)[..]], &Limits::default(), true);
            assert_eq!(again.requests.first(), Some(first), "re-encoded request");
        }
    }
});
