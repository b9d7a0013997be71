//! Lua 5.1's pattern matching (`lstrlib.c`: `match`, `max_expand`, `min_expand`, captures,
//! `%b`, `%f`, classes and sets), ported to Rust with a step counter.
//!
//! Lua's matcher backtracks: a pattern with k quantifiers can take about n^k steps on a
//! string of n bytes (`('a'):rep(1e5):find('.-.-.-.-b')` never ends), and inside Lua's C
//! library none of it is visible to the instruction budget. Here every step counts against a
//! limit the caller gives (what is left of the script's budget), and a match that reaches it
//! stops with [`Fail::Steps`], the same way on every replica.
//!
//! Semantics are Lua 5.1's, byte for byte, with one addition: a pattern that nests more
//! than [`MAX_DEPTH`] items deep fails with Lua 5.2's `pattern too complex` (Lua 5.1 would
//! overflow the C stack).

/// Lua's `LUA_MAXCAPTURES`.
pub const MAX_CAPTURES: usize = 32;
/// Nesting bound (Lua 5.2's `MAXCCALLS` for patterns).
pub const MAX_DEPTH: usize = 200;
/// The characters that make `string.find` match a pattern rather than search plainly.
pub const SPECIALS: &[u8] = b"^$*+?.([%-";

const ESC: u8 = b'%';

/// Why a match stopped without an answer.
#[derive(Debug, PartialEq, Eq)]
pub enum Fail {
    /// A malformed pattern: the message `luaL_error` raises.
    Error(&'static str),
    /// The step limit was reached.
    Steps,
}

/// A capture once the match ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Capture {
    /// A substring `[start, end)` of the subject.
    Str(usize, usize),
    /// A position capture `()`: a 1-based index.
    Pos(usize),
}

#[derive(Clone, Copy)]
enum Len {
    Unfinished,
    Position,
    Closed(usize),
}

/// The state of one match (`MatchState`).
pub struct Matcher<'a> {
    src: &'a [u8],
    pat: &'a [u8],
    level: usize,
    capture: [(usize, Len); MAX_CAPTURES],
    depth: usize,
    /// Steps taken so far (over every match with this matcher).
    pub steps: u64,
    limit: u64,
}

fn class_matches(c: u8, cl: u8) -> bool {
    let res = match cl.to_ascii_lowercase() {
        b'a' => c.is_ascii_alphabetic(),
        b'c' => c < 32 || c == 127,
        b'd' => c.is_ascii_digit(),
        b'l' => c.is_ascii_lowercase(),
        b'p' => c.is_ascii_punctuation(),
        b's' => matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'),
        b'u' => c.is_ascii_uppercase(),
        b'w' => c.is_ascii_alphanumeric(),
        b'x' => c.is_ascii_hexdigit(),
        b'z' => c == 0,
        _ => return cl == c,
    };
    if cl.is_ascii_uppercase() {
        !res
    } else {
        res
    }
}

type R = Result<Option<usize>, Fail>;

impl<'a> Matcher<'a> {
    /// A matcher of `pat` (without a leading `^`) over `src`, allowed `limit` steps.
    pub fn new(src: &'a [u8], pat: &'a [u8], limit: u64) -> Self {
        Matcher {
            src,
            pat,
            level: 0,
            capture: [(0, Len::Unfinished); MAX_CAPTURES],
            depth: 0,
            steps: 0,
            limit,
        }
    }

    /// The pattern byte at `i`; the end (and an embedded NUL, as in C) reads as 0.
    fn p(&self, i: usize) -> u8 {
        self.pat.get(i).copied().unwrap_or(0)
    }

    /// The subject byte at `i`; the end reads as Lua's terminating NUL.
    fn s(&self, i: usize) -> u8 {
        self.src.get(i).copied().unwrap_or(0)
    }

    fn step(&mut self, n: u64) -> Result<(), Fail> {
        self.steps = self.steps.saturating_add(n);
        if self.steps > self.limit {
            return Err(Fail::Steps);
        }
        Ok(())
    }

    /// Tries to match at `s` (one attempt of `str_find_aux`'s loop): the end of the match.
    pub fn match_at(&mut self, s: usize) -> R {
        self.level = 0;
        self.depth = 0;
        self.do_match(s, 0)
    }

    /// The number of captures of the last successful match.
    pub fn level(&self) -> usize {
        self.level
    }

    /// Capture `i` of the last match (`push_onecapture`); the whole match `[s, e)` when the
    /// pattern has no captures and `i` is 0.
    pub fn capture(&self, i: usize, s: usize, e: usize) -> Result<Capture, Fail> {
        if i >= self.level {
            if i == 0 {
                return Ok(Capture::Str(s, e));
            }
            return Err(Fail::Error("invalid capture index"));
        }
        match self.capture[i] {
            (_, Len::Unfinished) => Err(Fail::Error("unfinished capture")),
            (init, Len::Position) => Ok(Capture::Pos(init + 1)),
            (init, Len::Closed(l)) => Ok(Capture::Str(init, init + l)),
        }
    }

    fn class_end(&self, mut p: usize) -> Result<usize, Fail> {
        let c = self.p(p);
        p += 1;
        match c {
            ESC => {
                if p >= self.pat_end() {
                    return Err(Fail::Error("malformed pattern (ends with '%')"));
                }
                Ok(p + 1)
            }
            b'[' => {
                if self.p(p) == b'^' {
                    p += 1;
                }
                loop {
                    if p >= self.pat_end() {
                        return Err(Fail::Error("malformed pattern (missing ']')"));
                    }
                    let c = self.p(p);
                    p += 1;
                    if c == ESC && p < self.pat_end() {
                        p += 1;
                    }
                    if self.p(p) == b']' {
                        break;
                    }
                }
                Ok(p + 1)
            }
            _ => Ok(p),
        }
    }

    /// Where the pattern ends for C: its length, or its first NUL.
    fn pat_end(&self) -> usize {
        self.pat
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(self.pat.len())
    }

    /// `matchbracketclass(c, p, ec)`: `p` at `[`, `ec` at the closing `]`.
    fn bracket(&self, c: u8, mut p: usize, ec: usize) -> bool {
        let mut sig = true;
        if self.p(p + 1) == b'^' {
            sig = false;
            p += 1;
        }
        loop {
            p += 1;
            if p >= ec {
                break;
            }
            if self.p(p) == ESC {
                p += 1;
                if class_matches(c, self.p(p)) {
                    return sig;
                }
            } else if self.p(p + 1) == b'-' && p + 2 < ec {
                p += 2;
                if self.p(p - 2) <= c && c <= self.p(p) {
                    return sig;
                }
            } else if self.p(p) == c {
                return sig;
            }
        }
        !sig
    }

    fn single(&self, c: u8, p: usize, ep: usize) -> bool {
        match self.p(p) {
            b'.' => true,
            ESC => class_matches(c, self.p(p + 1)),
            b'[' => self.bracket(c, p, ep - 1),
            other => other == c,
        }
    }

    fn balance(&mut self, s: usize, p: usize) -> R {
        if p >= self.pat_end() || p + 1 >= self.pat_end() {
            return Err(Fail::Error("unbalanced pattern"));
        }
        if self.s(s) != self.p(p) || s >= self.src.len() {
            return Ok(None);
        }
        let (b, e) = (self.p(p), self.p(p + 1));
        let mut cont = 1;
        let mut i = s + 1;
        while i < self.src.len() {
            self.step(1)?;
            let c = self.src[i];
            if c == e {
                cont -= 1;
                if cont == 0 {
                    return Ok(Some(i + 1));
                }
            } else if c == b {
                cont += 1;
            }
            i += 1;
        }
        Ok(None)
    }

    fn max_expand(&mut self, s: usize, p: usize, ep: usize) -> R {
        let mut i = 0;
        while s + i < self.src.len() && self.single(self.src[s + i], p, ep) {
            self.step(1)?;
            i += 1;
        }
        loop {
            if let Some(res) = self.do_match(s + i, ep + 1)? {
                return Ok(Some(res));
            }
            if i == 0 {
                return Ok(None);
            }
            i -= 1;
        }
    }

    fn min_expand(&mut self, mut s: usize, p: usize, ep: usize) -> R {
        loop {
            if let Some(res) = self.do_match(s, ep + 1)? {
                return Ok(Some(res));
            }
            if s < self.src.len() && self.single(self.src[s], p, ep) {
                s += 1;
            } else {
                return Ok(None);
            }
        }
    }

    fn start_capture(&mut self, s: usize, p: usize, what: Len) -> R {
        let level = self.level;
        if level >= MAX_CAPTURES {
            return Err(Fail::Error("too many captures"));
        }
        self.capture[level] = (s, what);
        self.level = level + 1;
        let res = self.do_match(s, p)?;
        if res.is_none() {
            self.level -= 1;
        }
        Ok(res)
    }

    fn end_capture(&mut self, s: usize, p: usize) -> R {
        let Some(l) = (0..self.level)
            .rev()
            .find(|&l| matches!(self.capture[l].1, Len::Unfinished))
        else {
            return Err(Fail::Error("invalid pattern capture"));
        };
        self.capture[l].1 = Len::Closed(s - self.capture[l].0);
        let res = self.do_match(s, p)?;
        if res.is_none() {
            self.capture[l].1 = Len::Unfinished;
        }
        Ok(res)
    }

    fn match_capture(&mut self, s: usize, l: u8) -> R {
        let l = l.wrapping_sub(b'1') as usize;
        let (init, len) = match self.capture.get(l) {
            Some(&(init, Len::Closed(len))) if l < self.level => (init, len),
            // C reads CAP_POSITION (-2) as a huge size_t: never enough bytes left.
            Some(&(_, Len::Position)) if l < self.level => return Ok(None),
            _ => return Err(Fail::Error("invalid capture index")),
        };
        self.step(len as u64 / 64)?;
        if self.src.len() - s >= len && self.src[init..init + len] == self.src[s..s + len] {
            Ok(Some(s + len))
        } else {
            Ok(None)
        }
    }

    fn do_match(&mut self, s: usize, p: usize) -> R {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Fail::Error("pattern too complex"));
        }
        let res = self.match_body(s, p);
        self.depth -= 1;
        res
    }

    fn match_body(&mut self, mut s: usize, mut p: usize) -> R {
        loop {
            self.step(1)?;
            if p >= self.pat_end() {
                return Ok(Some(s));
            }
            match self.p(p) {
                b'(' => {
                    if self.p(p + 1) == b')' {
                        return self.start_capture(s, p + 2, Len::Position);
                    }
                    return self.start_capture(s, p + 1, Len::Unfinished);
                }
                b')' => return self.end_capture(s, p + 1),
                ESC if self.p(p + 1) == b'b' => match self.balance(s, p + 2)? {
                    Some(e) => {
                        s = e;
                        p += 4;
                        continue;
                    }
                    None => return Ok(None),
                },
                ESC if self.p(p + 1) == b'f' => {
                    p += 2;
                    if self.p(p) != b'[' {
                        return Err(Fail::Error("missing '[' after '%f' in pattern"));
                    }
                    let ep = self.class_end(p)?;
                    let previous = if s == 0 { 0 } else { self.src[s - 1] };
                    if self.bracket(previous, p, ep - 1) || !self.bracket(self.s(s), p, ep - 1) {
                        return Ok(None);
                    }
                    p = ep;
                    continue;
                }
                ESC if self.p(p + 1).is_ascii_digit() => {
                    match self.match_capture(s, self.p(p + 1))? {
                        Some(e) => {
                            s = e;
                            p += 2;
                            continue;
                        }
                        None => return Ok(None),
                    }
                }
                b'$' if p + 1 >= self.pat_end() => {
                    return Ok((s == self.src.len()).then_some(s));
                }
                _ => {}
            }
            let ep = self.class_end(p)?;
            let m = s < self.src.len() && self.single(self.src[s], p, ep);
            match self.p(ep) {
                b'?' if ep < self.pat_end() => {
                    if m {
                        if let Some(res) = self.do_match(s + 1, ep + 1)? {
                            return Ok(Some(res));
                        }
                    }
                    p = ep + 1;
                }
                b'*' if ep < self.pat_end() => return self.max_expand(s, p, ep),
                b'+' if ep < self.pat_end() => {
                    return if m {
                        self.max_expand(s + 1, p, ep)
                    } else {
                        Ok(None)
                    };
                }
                b'-' if ep < self.pat_end() => return self.min_expand(s, p, ep),
                _ => {
                    if !m {
                        return Ok(None);
                    }
                    s += 1;
                    p = ep;
                }
            }
        }
    }
}

/// `lmemfind`: the first occurrence of `needle` in `hay`, and the bytes examined to find it
/// (which a near-miss at every position makes up to `hay.len() * needle.len()`). Stops with
/// [`Fail::Steps`] once more than `limit` bytes were examined.
pub fn find_plain(hay: &[u8], needle: &[u8], limit: u64) -> Result<(Option<usize>, u64), Fail> {
    let Some((&first, rest)) = needle.split_first() else {
        return Ok((Some(0), 0));
    };
    if needle.len() > hay.len() {
        return Ok((None, 0));
    }
    let mut work = 0u64;
    for i in 0..=hay.len() - needle.len() {
        work += 1;
        if hay[i] != first {
            continue;
        }
        let same = hay[i + 1..]
            .iter()
            .zip(rest)
            .take_while(|(a, b)| a == b)
            .count();
        work += same as u64;
        if same == rest.len() {
            return Ok((Some(i), work));
        }
        if work > limit {
            return Err(Fail::Steps);
        }
    }
    Ok((None, work))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `string.find(s, p)` without captures: the span of the first match.
    fn find(s: &str, p: &str) -> Result<Option<(usize, usize)>, Fail> {
        let (anchor, pat) = match p.strip_prefix('^') {
            Some(rest) => (true, rest),
            None => (false, p),
        };
        let mut m = Matcher::new(s.as_bytes(), pat.as_bytes(), 10_000_000);
        let mut start = 0;
        loop {
            if let Some(e) = m.match_at(start)? {
                return Ok(Some((start + 1, e)));
            }
            start += 1;
            if anchor || start > s.len() {
                return Ok(None);
            }
        }
    }

    #[test]
    fn matches_like_lua() {
        assert_eq!(find("hello world", "o w"), Ok(Some((5, 7))));
        assert_eq!(find("hello", "l+"), Ok(Some((3, 4))));
        assert_eq!(find("hello", "^h.-o$"), Ok(Some((1, 5))));
        assert_eq!(find("  x", "%S"), Ok(Some((3, 3))));
        assert_eq!(find("THE (quick) fox", "%((%a+)%)"), Ok(Some((5, 11))));
        assert_eq!(find("f(a(b)c)d", "%b()"), Ok(Some((2, 8))));
        assert_eq!(find("THE (quick) fox", "%f[%a]%a+"), Ok(Some((1, 3))));
        assert_eq!(find("abc", "[%a-]+"), Ok(Some((1, 3))));
        assert_eq!(find("a-b", "[a-]+"), Ok(Some((1, 2))));
        assert_eq!(find("xyz", "[^x]"), Ok(Some((2, 2))));
        assert_eq!(find("abab", "(ab)%1"), Ok(Some((1, 4))));
        assert_eq!(find("ab", "a?b"), Ok(Some((1, 2))));
        assert_eq!(find("", ""), Ok(Some((1, 0))));
        assert_eq!(find("a]", "[]]"), Ok(Some((2, 2))));
        assert_eq!(
            find("a", "%"),
            Err(Fail::Error("malformed pattern (ends with '%')"))
        );
        assert_eq!(
            find("a", "[a"),
            Err(Fail::Error("malformed pattern (missing ']')"))
        );
        assert_eq!(find("a", "(a"), Ok(Some((1, 1))));
        assert_eq!(find("a", "a)"), Err(Fail::Error("invalid pattern capture")));
        assert_eq!(find("a", "%1"), Err(Fail::Error("invalid capture index")));
    }

    #[test]
    fn backtracking_stops_at_the_step_limit() {
        let s = "a".repeat(100_000);
        let mut m = Matcher::new(s.as_bytes(), b".-.-.-.-.-.-b", 1_000_000);
        assert_eq!(m.match_at(0), Err(Fail::Steps));
        assert!(m.steps > 1_000_000);
    }

    #[test]
    fn plain_search_counts_its_work() {
        assert_eq!(find_plain(b"abcabd", b"abd", 100), Ok((Some(3), 7)));
        assert_eq!(find_plain(b"abc", b"", 100), Ok((Some(0), 0)));
        assert_eq!(find_plain(b"ab", b"abc", 100), Ok((None, 0)));
        let hay = "a".repeat(10_000);
        let needle = format!("{}b", "a".repeat(1000));
        assert_eq!(
            find_plain(hay.as_bytes(), needle.as_bytes(), 100_000),
            Err(Fail::Steps)
        );
    }

    #[test]
    fn deep_patterns_are_refused() {
        let p = "a?".repeat(MAX_DEPTH + 1);
        let s = "a".repeat(MAX_DEPTH + 1);
        let mut m = Matcher::new(s.as_bytes(), p.as_bytes(), u64::MAX);
        assert_eq!(m.match_at(0), Err(Fail::Error("pattern too complex")));
    }
}
