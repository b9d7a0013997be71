//! Request parsing: RESP multibulk arrays and inline commands, with configurable bounds.
//!
//! Parsing is two-phase, as in Redis's `processMultibulkBuffer`: a request is taken from the
//! buffer only once it is complete, and an incomplete one is the normal `Ok(None)`. Header
//! lengths are checked against the limits *before* any payload is buffered, so a client cannot
//! make the server allocate more than the limits allow. Error texts match Redis.

use bytes::{Buf, Bytes, BytesMut};
use thiserror::Error;

/// Redis's PROTO_INLINE_MAX_SIZE: the longest inline request or header line.
const INLINE_MAX: usize = 64 * 1024;

/// Bounds on what one client may send.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest accepted bulk string (Redis `proto-max-bulk-len`).
    pub max_bulk_len: usize,
    /// Largest accepted number of arguments in one request.
    pub max_multibulk_len: usize,
    /// Largest amount of unparsed input buffered for one client.
    pub max_query_buffer: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bulk_len: 512 * 1024 * 1024,
            max_multibulk_len: 1024 * 1024,
            max_query_buffer: 1024 * 1024 * 1024,
        }
    }
}

/// Malformed input; the connection answers `-ERR Protocol error: <text>` and closes.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("Protocol error: {0}")]
pub struct ProtocolError(pub String);

fn perr(s: &str) -> ProtocolError {
    ProtocolError(s.to_string())
}

/// Takes one complete request from `buf`.
///
/// Returns `Ok(None)` when more input is needed, `Ok(Some(args))` for a request (an empty
/// `args` is a blank line or `*0`, which Redis ignores), or the protocol error.
pub fn parse_request(
    buf: &mut BytesMut,
    limits: &Limits,
) -> Result<Option<Vec<Bytes>>, ProtocolError> {
    if buf.is_empty() {
        return Ok(None);
    }
    if buf.len() > limits.max_query_buffer {
        return Err(perr("query buffer limit exceeded"));
    }
    if buf[0] == b'*' {
        parse_multibulk(buf, limits)
    } else {
        parse_inline(buf)
    }
}

/// Finds `\r\n` starting at `from`; returns the index of `\r`.
fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i + 1 < buf.len() {
        match memchr(b'\r', &buf[i..]) {
            Some(off) => {
                let at = i + off;
                if at + 1 < buf.len() && buf[at + 1] == b'\n' {
                    return Some(at);
                }
                if at + 1 >= buf.len() {
                    return None;
                }
                i = at + 1;
            }
            None => return None,
        }
    }
    None
}

fn memchr(needle: u8, hay: &[u8]) -> Option<usize> {
    hay.iter().position(|&b| b == needle)
}

/// Parses a decimal integer the way Redis's `string2ll` does: optional '-', no '+', no spaces.
fn parse_len(bytes: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(bytes).ok()?;
    if s.is_empty() || s.starts_with('+') || (s.len() > 1 && s.starts_with('0')) {
        return None;
    }
    s.parse::<i64>().ok()
}

fn parse_multibulk(
    buf: &mut BytesMut,
    limits: &Limits,
) -> Result<Option<Vec<Bytes>>, ProtocolError> {
    let Some(end) = find_crlf(buf, 1) else {
        if buf.len() > INLINE_MAX {
            return Err(perr("too big mbulk count string"));
        }
        return Ok(None);
    };
    let count = match parse_len(&buf[1..end]) {
        Some(n) if n <= limits.max_multibulk_len as i64 && n <= i32::MAX as i64 => n,
        _ => return Err(perr("invalid multibulk length")),
    };
    if count <= 0 {
        buf.advance(end + 2);
        return Ok(Some(Vec::new()));
    }
    // First pass: validate headers and check completeness without copying.
    let mut pos = end + 2;
    let mut spans = Vec::with_capacity((count as usize).min(1024));
    for _ in 0..count {
        if pos >= buf.len() {
            return Ok(None);
        }
        if buf[pos] != b'$' {
            return Err(ProtocolError(format!(
                "expected '$', got '{}'",
                buf[pos] as char
            )));
        }
        let Some(hend) = find_crlf(buf, pos + 1) else {
            if buf.len() - pos > INLINE_MAX {
                return Err(perr("too big bulk count string"));
            }
            return Ok(None);
        };
        let len = match parse_len(&buf[pos + 1..hend]) {
            Some(n) if n >= 0 && n as u64 <= limits.max_bulk_len as u64 => n as usize,
            _ => return Err(perr("invalid bulk length")),
        };
        let start = hend + 2;
        if buf.len() < start + len + 2 {
            return Ok(None);
        }
        if &buf[start + len..start + len + 2] != b"\r\n" {
            return Err(perr("invalid bulk terminator"));
        }
        spans.push((start, len));
        pos = start + len + 2;
    }
    let frame = buf.split_to(pos).freeze();
    Ok(Some(
        spans
            .into_iter()
            .map(|(s, l)| frame.slice(s..s + l))
            .collect(),
    ))
}

fn parse_inline(buf: &mut BytesMut) -> Result<Option<Vec<Bytes>>, ProtocolError> {
    let Some(nl) = memchr(b'\n', buf) else {
        if buf.len() > INLINE_MAX {
            return Err(perr("too big inline request"));
        }
        return Ok(None);
    };
    let line = buf.split_to(nl + 1);
    let mut body = &line[..nl];
    if body.last() == Some(&b'\r') {
        body = &body[..body.len() - 1];
    }
    split_args(body)
        .map(Some)
        .ok_or_else(|| perr("unbalanced quotes in request"))
}

/// Splits an inline request like Redis's `sdssplitargs`: whitespace-separated words, with
/// "double quotes" (supporting \n \r \t \b \a \\ \" and \xHH) and 'single quotes' (\').
fn split_args(line: &[u8]) -> Option<Vec<Bytes>> {
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        while i < line.len() && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= line.len() {
            return Some(out);
        }
        let mut cur = Vec::new();
        let (mut inq, mut insq) = (false, false);
        loop {
            if inq || insq {
                let c = *line.get(i)?;
                if c == if inq { b'"' } else { b'\'' } {
                    // A closing quote must end the word.
                    if line.get(i + 1).is_some_and(|n| !n.is_ascii_whitespace()) {
                        return None;
                    }
                    i += 1;
                    break;
                }
                if inq
                    && c == b'\\'
                    && i + 3 < line.len()
                    && line[i + 1] == b'x'
                    && is_hex_pair(&line[i + 2..i + 4])
                {
                    cur.push(hex(line[i + 2]) * 16 + hex(line[i + 3]));
                    i += 3;
                } else if inq && c == b'\\' && i + 1 < line.len() {
                    i += 1;
                    cur.push(match line[i] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    });
                } else if insq && c == b'\\' && line.get(i + 1) == Some(&b'\'') {
                    i += 1;
                    cur.push(b'\'');
                } else {
                    cur.push(c);
                }
            } else {
                match line.get(i) {
                    None => break,
                    Some(c) if c.is_ascii_whitespace() => break,
                    Some(b'"') => inq = true,
                    Some(b'\'') => insq = true,
                    Some(c) => cur.push(*c),
                }
            }
            i += 1;
        }
        out.push(Bytes::from(cur));
    }
}

fn is_hex_pair(b: &[u8]) -> bool {
    b.iter().all(|c| c.is_ascii_hexdigit())
}

fn hex(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        _ => c - b'A' + 10,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(input: &[u8]) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        let mut b = BytesMut::from(input);
        parse_request(&mut b, &Limits::default())
    }

    #[test]
    fn multibulk_complete_and_partial() {
        let full = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
        assert_eq!(
            parse(full).unwrap().unwrap(),
            vec![Bytes::from("GET"), Bytes::from("k")]
        );
        for cut in 1..full.len() {
            assert_eq!(parse(&full[..cut]).unwrap(), None, "prefix of {cut} bytes");
        }
    }

    #[test]
    fn bad_lengths_are_protocol_errors() {
        for (input, error) in [
            (&b"*abc\r\n"[..], "invalid multibulk length"),
            (b"*1\r\n$-5\r\n", "invalid bulk length"),
            (b"*1\r\nx\r\n", "expected '$', got 'x'"),
            (b"*99999999999\r\n", "invalid multibulk length"),
        ] {
            let got = parse(input).unwrap_err().0;
            assert_eq!(got, error, "{}", String::from_utf8_lossy(input));
        }
        let mut b = BytesMut::from(&b"*1\r\n$1000\r\n"[..]);
        let small = Limits {
            max_bulk_len: 10,
            ..Limits::default()
        };
        assert_eq!(
            parse_request(&mut b, &small).unwrap_err().0,
            "invalid bulk length"
        );
    }

    #[test]
    fn inline_with_quotes() {
        assert_eq!(
            parse(b"PING\r\n").unwrap().unwrap(),
            vec![Bytes::from("PING")]
        );
        let got = parse(b"SET \"a b\" 'c d' \"\\x41\\n\"\n").unwrap().unwrap();
        assert_eq!(
            got,
            vec![
                Bytes::from("SET"),
                Bytes::from("a b"),
                Bytes::from("c d"),
                Bytes::from("A\n")
            ]
        );
        assert_eq!(
            parse(b"SET \"a\n").unwrap_err().0,
            "unbalanced quotes in request"
        );
        assert_eq!(parse(b"\r\n").unwrap().unwrap(), Vec::<Bytes>::new());
        // Single quotes keep backslashes, except before a single quote.
        assert_eq!(
            parse(b"SET 'it\\'s' 'a\\nb'\n").unwrap().unwrap(),
            vec![
                Bytes::from("SET"),
                Bytes::from("it's"),
                Bytes::from("a\\nb")
            ]
        );
        // A closing quote must end the word, in either kind of quotes.
        for bad in [&b"SET \"a\"b\n"[..], &b"SET 'a'b\n"[..]] {
            assert_eq!(parse(bad).unwrap_err().0, "unbalanced quotes in request");
        }
    }

    #[test]
    fn pipelined_requests_parse_one_at_a_time() {
        let mut b = BytesMut::from(&b"*1\r\n$4\r\nPING\r\nPING\r\n"[..]);
        let l = Limits::default();
        assert_eq!(parse_request(&mut b, &l).unwrap().unwrap().len(), 1);
        assert_eq!(parse_request(&mut b, &l).unwrap().unwrap().len(), 1);
        assert_eq!(parse_request(&mut b, &l).unwrap(), None);
    }
}
