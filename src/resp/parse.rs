//! Request parsing: RESP multibulk arrays and inline commands, with configurable bounds.
//!
//! Parsing is two-phase, as in Redis's `processMultibulkBuffer`: a request is taken from the
//! buffer only once it is complete, and an incomplete one is the normal `Ok(None)`. Header
//! lengths are checked against the limits *before* any payload is buffered, so a client cannot
//! make the server allocate more than the limits allow. Error texts match Redis.
//!
//! Where Redis 7's parser is lenient, this one is too, byte for byte (the differential tests in
//! tests/it/bad_input.rs hold both to it): a header line ends at its `\r`, whatever byte follows;
//! the two bytes after a bulk's payload are skipped unread; a NUL byte before the end of a
//! header or inline line hides the line end (Redis searches with `strchr`), so such a request
//! stays incomplete until it passes the 64 KiB line limit. Before authentication a request may
//! have at most 10 arguments of at most 16 KiB each.

use bytes::{Buf, Bytes, BytesMut};
use thiserror::Error;

/// Redis's PROTO_INLINE_MAX_SIZE: the longest inline request or header line.
const INLINE_MAX: usize = 64 * 1024;

/// The most arguments a request may have before the client has authenticated (Redis).
const UNAUTH_MAX_ARGS: i64 = 10;

/// The largest argument a request may have before the client has authenticated (Redis).
const UNAUTH_MAX_BULK: i64 = 16 * 1024;

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

/// Input the connection cannot go on from.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ProtocolError {
    /// Malformed input: the connection answers `-ERR Protocol error: <text>` and closes.
    #[error("Protocol error: {0}")]
    Malformed(String),
    /// More unparsed input than the query buffer limit: the connection closes without a
    /// reply, as Redis closes it.
    #[error("query buffer limit exceeded")]
    QueryBufferLimit,
}

impl ProtocolError {
    /// The error reply to send before closing, if any.
    pub fn reply_text(&self) -> Option<String> {
        match self {
            ProtocolError::Malformed(_) => Some(format!("ERR {self}")),
            ProtocolError::QueryBufferLimit => None,
        }
    }
}

fn perr(s: &str) -> ProtocolError {
    ProtocolError::Malformed(s.to_string())
}

/// Takes one complete request from `buf`.
///
/// Returns `Ok(None)` when more input is needed, `Ok(Some(args))` for a request (an empty
/// `args` is a blank line or `*0`, which Redis ignores), or the protocol error.
/// `authenticated` is false while the client still has to AUTH (tighter limits, as in Redis).
pub fn parse_request(
    buf: &mut BytesMut,
    limits: &Limits,
    authenticated: bool,
) -> Result<Option<Vec<Bytes>>, ProtocolError> {
    if buf.is_empty() {
        return Ok(None);
    }
    if buf.len() > limits.max_query_buffer {
        return Err(ProtocolError::QueryBufferLimit);
    }
    if buf[0] == b'*' {
        parse_multibulk(buf, limits, authenticated)
    } else {
        parse_inline(buf)
    }
}

/// Finds the `\r` that ends the header line starting at `from`, as Redis's
/// `strchr(p, '\r')` does: a NUL byte before it hides it, and the line counts as complete
/// only once one more byte (normally the `\n`, but Redis does not look) has arrived.
fn find_header_end(buf: &[u8], from: usize) -> Option<usize> {
    let at = from + c_strchr(&buf[from..], b'\r')?;
    (at + 1 < buf.len()).then_some(at)
}

/// The offset of `needle` in `hay` if it comes before any NUL byte, like C's `strchr`.
fn c_strchr(hay: &[u8], needle: u8) -> Option<usize> {
    let at = hay.iter().position(|&b| b == needle || b == 0)?;
    (hay[at] == needle).then_some(at)
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
    authenticated: bool,
) -> Result<Option<Vec<Bytes>>, ProtocolError> {
    let Some(end) = find_header_end(buf, 0) else {
        if buf.len() > INLINE_MAX {
            return Err(perr("too big mbulk count string"));
        }
        return Ok(None);
    };
    let count = match parse_len(&buf[1..end]) {
        Some(n) if n <= limits.max_multibulk_len as i64 && n <= i32::MAX as i64 => n,
        _ => return Err(perr("invalid multibulk length")),
    };
    if count > UNAUTH_MAX_ARGS && !authenticated {
        return Err(perr("unauthenticated multibulk length"));
    }
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
            return Err(ProtocolError::Malformed(format!(
                "expected '$', got '{}'",
                buf[pos] as char
            )));
        }
        let Some(hend) = find_header_end(buf, pos) else {
            if buf.len() - pos > INLINE_MAX {
                return Err(perr("too big bulk count string"));
            }
            return Ok(None);
        };
        let len = match parse_len(&buf[pos + 1..hend]) {
            Some(n) if n >= 0 && n as u64 <= limits.max_bulk_len as u64 => n as usize,
            _ => return Err(perr("invalid bulk length")),
        };
        if len as i64 > UNAUTH_MAX_BULK && !authenticated {
            return Err(perr("unauthenticated bulk length"));
        }
        let start = hend + 2;
        // Redis skips the two bytes after the payload without looking at them.
        if buf.len() < start + len + 2 {
            return Ok(None);
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
    let Some(nl) = c_strchr(buf, b'\n') else {
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

/// C's `isspace`: what `sdssplitargs` skips between words and accepts after a closing quote.
fn c_isspace(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// What ends an unquoted word in `sdssplitargs` (fewer bytes than `isspace`: not \v or \f).
fn ends_word(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0)
}

/// Splits an inline request like Redis's `sdssplitargs`: whitespace-separated words, with
/// "double quotes" (supporting \n \r \t \b \a \\ \" and \xHH) and 'single quotes' (\').
fn split_args(line: &[u8]) -> Option<Vec<Bytes>> {
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        while i < line.len() && c_isspace(line[i]) {
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
                    if line.get(i + 1).is_some_and(|&n| !c_isspace(n)) {
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
                    Some(&c) if ends_word(c) => break,
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
        parse_request(&mut b, &Limits::default(), true)
    }

    /// The text of the protocol error `input` gets.
    fn error(input: &[u8]) -> String {
        match parse(input) {
            Err(ProtocolError::Malformed(text)) => text,
            other => panic!("{}: {other:?}", input.escape_ascii()),
        }
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
        for (input, want) in [
            (&b"*abc\r\n"[..], "invalid multibulk length"),
            (b"*1\r\n$-5\r\n", "invalid bulk length"),
            (b"*1\r\nx\r\n", "expected '$', got 'x'"),
            (b"*99999999999\r\n", "invalid multibulk length"),
        ] {
            assert_eq!(error(input), want, "{}", input.escape_ascii());
        }
        let mut b = BytesMut::from(&b"*1\r\n$1000\r\n"[..]);
        let small = Limits {
            max_bulk_len: 10,
            ..Limits::default()
        };
        assert_eq!(
            parse_request(&mut b, &small, true),
            Err(perr("invalid bulk length"))
        );
    }

    /// Redis's leniencies: a header ends at `\r` whatever follows it, the two bytes after a
    /// payload are not checked, and a NUL before a line end hides the line end.
    #[test]
    fn lenient_where_redis_is() {
        let ping = vec![Bytes::from("PING")];
        assert_eq!(parse(b"*1\rX$4\rXPINGxx").unwrap(), Some(ping.clone()));
        assert_eq!(parse(b"*1\r").unwrap(), None);
        assert_eq!(parse(b"*1\x00\r\n$4\r\nPING\r\n").unwrap(), None);
        assert_eq!(parse(b"PING\x00\r\n").unwrap(), None);
        assert_eq!(error(&[b'*'; 70 * 1024]), "too big mbulk count string");
        let mut nul = b"PING\x00".to_vec();
        nul.extend(vec![b'\n'; 70 * 1024]);
        assert_eq!(error(&nul), "too big inline request");
    }

    #[test]
    fn unauthenticated_limits() {
        let l = Limits::default();
        let mut b = BytesMut::from(&b"*11\r\n"[..]);
        assert_eq!(
            parse_request(&mut b, &l, false),
            Err(perr("unauthenticated multibulk length"))
        );
        let mut b = BytesMut::from(&b"*2\r\n$4\r\nECHO\r\n$16385\r\n"[..]);
        assert_eq!(
            parse_request(&mut b, &l, false),
            Err(perr("unauthenticated bulk length"))
        );
        let mut b = BytesMut::from(&b"*10\r\n$16384\r\n"[..]);
        assert_eq!(parse_request(&mut b, &l, false), Ok(None));
        let mut b = BytesMut::from(&b"*11\r\n"[..]);
        assert_eq!(parse_request(&mut b, &l, true), Ok(None));
    }

    #[test]
    fn query_buffer_limit_has_no_reply() {
        let small = Limits {
            max_query_buffer: 4,
            ..Limits::default()
        };
        let mut b = BytesMut::from(&b"*1\r\n$4\r\n"[..]);
        let e = parse_request(&mut b, &small, true).unwrap_err();
        assert_eq!(e, ProtocolError::QueryBufferLimit);
        assert_eq!(e.reply_text(), None);
        assert_eq!(
            perr("invalid bulk length").reply_text().as_deref(),
            Some("ERR Protocol error: invalid bulk length")
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
        assert_eq!(error(b"SET \"a\n"), "unbalanced quotes in request");
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
            assert_eq!(error(bad), "unbalanced quotes in request");
        }
        // Words end at space, tab, CR and LF only; \v and \f are skipped between words.
        assert_eq!(
            parse(b"\x0bECHO a\x0cb \"c\"\x0b\n").unwrap().unwrap(),
            vec![Bytes::from("ECHO"), Bytes::from("a\x0cb"), Bytes::from("c")]
        );
    }

    #[test]
    fn pipelined_requests_parse_one_at_a_time() {
        let mut b = BytesMut::from(&b"*1\r\n$4\r\nPING\r\nPING\r\n"[..]);
        let l = Limits::default();
        assert_eq!(parse_request(&mut b, &l, true).unwrap().unwrap().len(), 1);
        assert_eq!(parse_request(&mut b, &l, true).unwrap().unwrap().len(), 1);
        assert_eq!(parse_request(&mut b, &l, true).unwrap(), None);
    }
}
