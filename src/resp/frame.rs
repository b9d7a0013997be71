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
    /// Pairs (HRANDFIELD ... WITHVALUES): a flat array in RESP2, an array of two-element
    /// arrays in RESP3.
    Pairs(#[serde(deserialize_with = "super::nesting::nested")] Vec<(Reply, Reply)>),
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
            Reply::Pairs(pairs) if resp3 => {
                line(out, b'*', pairs.len().to_string().as_bytes());
                for (k, v) in pairs {
                    line(out, b'*', b"2");
                    k.encode(proto, out);
                    v.encode(proto, out);
                }
            }
            Reply::Pairs(pairs) => {
                line(out, b'*', (pairs.len() * 2).to_string().as_bytes());
                for (k, v) in pairs {
                    k.encode(proto, out);
                    v.encode(proto, out);
                }
            }
        }
    }
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
