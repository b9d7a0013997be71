//! A cursor over a request's arguments, with Redis's number parsing and error texts.

use bytes::Bytes;

use super::frame::Reply;

/// Redis's reply for an argument that is not a valid 64-bit integer.
pub const NOT_INTEGER: &str = "ERR value is not an integer or out of range";

/// The arguments of one request, after the command name.
#[derive(Debug, Clone)]
pub struct Args {
    name: String,
    given: String,
    items: Vec<Bytes>,
    pos: usize,
}

impl Args {
    /// Wraps `argv`; `argv[0]` is the command name (kept lower-cased for error texts).
    pub fn new(mut argv: Vec<Bytes>) -> Args {
        let given = if argv.is_empty() {
            String::new()
        } else {
            String::from_utf8_lossy(&argv.remove(0)).into_owned()
        };
        Args {
            name: given.to_lowercase(),
            given,
            items: argv,
            pos: 0,
        }
    }

    /// The lower-cased command name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The command name as the client wrote it (some of Redis's error texts quote it).
    pub fn given_name(&self) -> &str {
        &self.given
    }

    /// How many arguments are left.
    pub fn remaining(&self) -> usize {
        self.items.len() - self.pos
    }

    /// All arguments, consumed or not (for replication of variadic commands).
    pub fn all(&self) -> &[Bytes] {
        &self.items
    }

    /// The next argument, or a syntax error when there is none.
    pub fn arg(&mut self) -> Result<Bytes, Reply> {
        let item = self.items.get(self.pos).cloned().ok_or_else(syntax_error)?;
        self.pos += 1;
        Ok(item)
    }

    /// The next argument upper-cased as text, for option keywords.
    pub fn next_keyword(&mut self) -> Result<String, Reply> {
        Ok(String::from_utf8_lossy(&self.arg()?).to_ascii_uppercase())
    }

    /// The next argument as an i64, or Redis's "not an integer" error.
    pub fn next_i64(&mut self) -> Result<i64, Reply> {
        parse_i64(&self.arg()?).ok_or_else(|| Reply::err(NOT_INTEGER))
    }

    /// Everything not yet consumed.
    pub fn rest(&mut self) -> Vec<Bytes> {
        let rest = self.items[self.pos..].to_vec();
        self.pos = self.items.len();
        rest
    }

    /// Errors with `syntax error` if arguments are left over.
    pub fn finish(&self) -> Result<(), Reply> {
        if self.remaining() > 0 {
            Err(syntax_error())
        } else {
            Ok(())
        }
    }
}

/// `-ERR syntax error`.
pub fn syntax_error() -> Reply {
    Reply::err("ERR syntax error")
}

/// Parses a strict decimal i64 as Redis's `string2ll` does (no spaces, no '+', no leading
/// zeros, at most 20 characters).
pub fn parse_i64(b: &[u8]) -> Option<i64> {
    if b.is_empty() || b.len() > 20 {
        return None;
    }
    let s = std::str::from_utf8(b).ok()?;
    if s == "0" {
        return Some(0);
    }
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty() || digits.starts_with('0') || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_integers() {
        assert_eq!(parse_i64(b"42"), Some(42));
        assert_eq!(parse_i64(b"-7"), Some(-7));
        assert_eq!(parse_i64(b"0"), Some(0));
        for bad in [
            &b"+1"[..],
            b" 1",
            b"01",
            b"-0",
            b"1.0",
            b"",
            b"-",
            b"99999999999999999999",
        ] {
            assert_eq!(parse_i64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
    }
}
