//! Protocol-neutral replies and their RESP2/RESP3 encodings.
//!
//! Commands build a [`Reply`]; the connection encodes it for the protocol that the client
//! negotiated with `HELLO`. RESP2 flattens maps and sets into arrays and renders nulls as
//! `$-1` (or `*-1` for a null array), exactly as Redis 7 does.

use bytes::{BufMut, Bytes, BytesMut};
use serde::{Deserialize, Serialize};

/// The protocol version a connection speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Protocol {
    /// RESP2, the default until `HELLO 3`.
    #[default]
    Resp2,
    /// RESP3, after `HELLO 3`.
    Resp3,
}

/// A reply to one command, independent of the wire protocol. Decoding bounds how deeply
/// replies nest ([`super::nesting`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Reply {
    /// `+text`.
    Simple(String),
    /// `-text`; the text includes its prefix (`ERR`, `WRONGTYPE`, `FENCED`, ...).
    Error(String),
    /// `:n`.
    Int(i64),
    /// `$len\r\nbytes`.
    Bulk(Bytes),
    /// A null bulk: `$-1` in RESP2, `_` in RESP3.
    Nil,
    /// A null array: `*-1` in RESP2, `_` in RESP3.
    NilArray,
    /// `*n` followed by the elements.
    Array(#[serde(deserialize_with = "super::nesting::nested")] Vec<Reply>),
    /// `%n` in RESP3; a flat key/value array in RESP2.
    Map(#[serde(deserialize_with = "super::nesting::nested")] Vec<(Reply, Reply)>),
    /// `~n` in RESP3; an array in RESP2.
    Set(#[serde(deserialize_with = "super::nesting::nested")] Vec<Reply>),
    /// `#t`/`#f` in RESP3; `:1`/`:0` in RESP2.
    Bool(bool),
    /// `=len\r\ntxt:...` in RESP3; a bulk string in RESP2.
    Verbatim(String),
    /// An out-of-band push (pub/sub messages): `>n` in RESP3, `*n` in RESP2.
    Push(#[serde(deserialize_with = "super::nesting::nested")] Vec<Reply>),
    /// A score: `,text` in RESP3; a bulk string in RESP2. Formatted as Redis 7.0 does
    /// (`%.17g`, `inf`, `-inf`; see [`format_double`]).
    Double(f64),
    /// Member/score pairs (WITHSCORES replies): an array of 2-element arrays in RESP3, a
    /// flat array in RESP2, as Redis 7.0 replies.
    Pairs(#[serde(deserialize_with = "super::nesting::nested")] Vec<(Reply, Reply)>),
    /// A double already formatted (GEO coordinates, which Redis prints with `%.17Lf`):
    /// `,text` in RESP3, a bulk string in RESP2.
    DoubleText(String),
}

impl Reply {
    /// `+OK`.
    pub fn ok() -> Reply {
        Reply::Simple("OK".into())
    }

    /// An error reply; `text` carries its own prefix, e.g. `ERR syntax error`.
    pub fn err(text: impl Into<String>) -> Reply {
        Reply::Error(text.into())
    }

    /// A bulk reply from anything byte-like.
    pub fn bulk(data: impl Into<Bytes>) -> Reply {
        Reply::Bulk(data.into())
    }

    /// A bulk reply from a string slice (used for map keys and names).
    pub fn text(s: &str) -> Reply {
        Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()))
    }

    /// True for error replies.
    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    /// Appends the encoding of `self` for `proto` to `out`.
    pub fn encode(&self, proto: Protocol, out: &mut BytesMut) {
        let resp3 = proto == Protocol::Resp3;
        match self {
            Reply::Simple(s) => line(out, b'+', s.as_bytes()),
            Reply::Error(s) => line(out, b'-', sanitize(s).as_bytes()),
            Reply::Int(n) => line(out, b':', n.to_string().as_bytes()),
            Reply::Bulk(b) => bulk(out, b),
            Reply::Nil if resp3 => out.put_slice(b"_\r\n"),
            Reply::Nil => out.put_slice(b"$-1\r\n"),
            Reply::NilArray if resp3 => out.put_slice(b"_\r\n"),
            Reply::NilArray => out.put_slice(b"*-1\r\n"),
            Reply::Array(items) => seq(out, b'*', items, proto),
            Reply::Set(items) => seq(out, if resp3 { b'~' } else { b'*' }, items, proto),
            Reply::Map(pairs) => {
                let (tag, n) = if resp3 {
                    (b'%', pairs.len())
                } else {
                    (b'*', pairs.len() * 2)
                };
                line(out, tag, n.to_string().as_bytes());
                for (k, v) in pairs {
                    k.encode(proto, out);
                    v.encode(proto, out);
                }
            }
            Reply::Bool(b) if resp3 => out.put_slice(if *b { b"#t\r\n" } else { b"#f\r\n" }),
            Reply::Bool(b) => out.put_slice(if *b { b":1\r\n" } else { b":0\r\n" }),
            Reply::Verbatim(s) if resp3 => {
                line(out, b'=', (s.len() + 4).to_string().as_bytes());
                out.put_slice(b"txt:");
                out.put_slice(s.as_bytes());
                out.put_slice(b"\r\n");
            }
            Reply::Verbatim(s) => bulk(out, s.as_bytes()),
            Reply::Push(items) => seq(out, if resp3 { b'>' } else { b'*' }, items, proto),
            Reply::Double(d) if resp3 => line(out, b',', format_double(*d).as_bytes()),
            Reply::Double(d) => bulk(out, format_double(*d).as_bytes()),
            Reply::DoubleText(t) if resp3 => line(out, b',', t.as_bytes()),
            Reply::DoubleText(t) => bulk(out, t.as_bytes()),
            Reply::Pairs(pairs) => {
                let n = if resp3 { pairs.len() } else { pairs.len() * 2 };
                line(out, b'*', n.to_string().as_bytes());
                for (k, v) in pairs {
                    if resp3 {
                        out.put_slice(b"*2\r\n");
                    }
                    k.encode(proto, out);
                    v.encode(proto, out);
                }
            }
        }
    }
}

/// A double as Redis 7.0 writes it (`addReplyDouble`): `inf`, `-inf`, or C's `%.17g`
/// (17 significant digits, trailing zeros dropped, exponent form below 1e-4 and from 1e17).
pub fn format_double(d: f64) -> String {
    crate::algo::float::format_g(d, 17)
}

/// Error and status lines must not contain CR or LF; Redis replaces them with spaces.
fn sanitize(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains(['\r', '\n']) {
        std::borrow::Cow::Owned(s.replace(['\r', '\n'], " "))
    } else {
        std::borrow::Cow::Borrowed(s)
    }
}

fn line(out: &mut BytesMut, tag: u8, body: &[u8]) {
    out.reserve(body.len() + 3);
    out.put_u8(tag);
    out.put_slice(body);
    out.put_slice(b"\r\n");
}

fn bulk(out: &mut BytesMut, data: &[u8]) {
    line(out, b'$', data.len().to_string().as_bytes());
    out.reserve(data.len() + 2);
    out.put_slice(data);
    out.put_slice(b"\r\n");
}

fn seq(out: &mut BytesMut, tag: u8, items: &[Reply], proto: Protocol) {
    line(out, tag, items.len().to_string().as_bytes());
    for item in items {
        item.encode(proto, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(r: &Reply, p: Protocol) -> Vec<u8> {
        let mut b = BytesMut::new();
        r.encode(p, &mut b);
        b.to_vec()
    }

    #[test]
    fn nulls_differ_by_protocol() {
        assert_eq!(enc(&Reply::Nil, Protocol::Resp2), b"$-1\r\n");
        assert_eq!(enc(&Reply::Nil, Protocol::Resp3), b"_\r\n");
        assert_eq!(enc(&Reply::NilArray, Protocol::Resp2), b"*-1\r\n");
    }

    #[test]
    fn maps_flatten_in_resp2() {
        let m = Reply::Map(vec![(Reply::text("a"), Reply::Int(1))]);
        assert_eq!(enc(&m, Protocol::Resp2), b"*2\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(enc(&m, Protocol::Resp3), b"%1\r\n$1\r\na\r\n:1\r\n");
    }

    #[test]
    fn errors_are_single_lines() {
        assert_eq!(
            enc(&Reply::err("ERR a\r\nb"), Protocol::Resp2),
            b"-ERR a  b\r\n"
        );
    }

    #[test]
    fn pushes_are_arrays_in_resp2() {
        let p = Reply::Push(vec![Reply::text("message"), Reply::Int(1)]);
        assert_eq!(enc(&p, Protocol::Resp2), b"*2\r\n$7\r\nmessage\r\n:1\r\n");
        assert_eq!(enc(&p, Protocol::Resp3), b">2\r\n$7\r\nmessage\r\n:1\r\n");
    }

    #[test]
    fn doubles_format_like_redis_7_0() {
        for (d, want) in [
            (1.0, "1"),
            (1.5, "1.5"),
            (0.1, "0.10000000000000001"),
            (0.1 + 0.2, "0.30000000000000004"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (-2.5, "-2.5"),
            (1e17, "1e+17"),
            (12345678901234567.0, "12345678901234568"),
            (1e-5, "1.0000000000000001e-05"),
            (0.0001, "0.0001"),
            (123.0, "123"),
            (1e300, "1.0000000000000001e+300"),
            (f64::NAN, "nan"),
            (-f64::NAN, "-nan"),
        ] {
            assert_eq!(format_double(d), want, "{d}");
        }
        assert_eq!(enc(&Reply::Double(1.5), Protocol::Resp3), b",1.5\r\n");
        assert_eq!(enc(&Reply::Double(1.5), Protocol::Resp2), b"$3\r\n1.5\r\n");
    }

    #[test]
    fn pairs_nest_only_in_resp3() {
        let p = Reply::Pairs(vec![(Reply::text("a"), Reply::Double(1.0))]);
        assert_eq!(enc(&p, Protocol::Resp2), b"*2\r\n$1\r\na\r\n$1\r\n1\r\n");
        assert_eq!(enc(&p, Protocol::Resp3), b"*1\r\n*2\r\n$1\r\na\r\n,1\r\n");
    }

    #[test]
    fn verbatim_has_txt_prefix() {
        assert_eq!(
            enc(&Reply::Verbatim("x".into()), Protocol::Resp3),
            b"=5\r\ntxt:x\r\n"
        );
        assert_eq!(
            enc(&Reply::Verbatim("x".into()), Protocol::Resp2),
            b"$1\r\nx\r\n"
        );
    }
}
