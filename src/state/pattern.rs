//! Redis glob-style patterns (KEYS, SCAN MATCH, PSUBSCRIBE, scripts): `*`, `?`, `[abc]`,
//! `[^a-z]` and `\` escapes, with Redis's semantics for the odd cases (an unterminated class,
//! a trailing backslash, reversed ranges).
//!
//! The matcher is iterative and bounded: O(pattern × string) steps in the worst case, never
//! exponential. Redis's recursive matcher took exponential time on patterns such as
//! `*a*a*a*a*a*a*a*a*a*a*b` (CVE-2022-36021, fixed in 7.0.9 by pruning); here the same
//! bound comes from the classic one-backtrack-point algorithm: when the rest of the pattern
//! fails after a `*`, only the *last* `*` needs to take one more character, because any
//! earlier `*` that took more could only be matched as well by the later one.

/// True when `s` matches the Redis glob `pat`.
pub fn matches(pat: &[u8], s: &[u8]) -> bool {
    // Redis's quirk: its matcher's loop never starts on an empty string, so only the empty
    // pattern matches one (not even `*`; KEYS and SCAN treat a lone `*` as "everything").
    if s.is_empty() {
        return pat.is_empty();
    }
    let (mut p, mut i) = (0, 0);
    // After the last `*` seen: where the pattern resumes, and where in `s` that try began.
    let mut star: Option<(usize, usize)> = None;
    loop {
        if p < pat.len() {
            if pat[p] == b'*' {
                while p < pat.len() && pat[p] == b'*' {
                    p += 1;
                }
                if p == pat.len() {
                    return true;
                }
                star = Some((p, i));
                continue;
            }
            if i < s.len() {
                if let Some(next) = match_one(pat, p, s[i]) {
                    p = next;
                    i += 1;
                    continue;
                }
            }
        } else if i == s.len() {
            return true;
        }
        // A mismatch: the last `*` takes one more character, or there is no match.
        match star {
            Some((resume, from)) if from < s.len() => {
                star = Some((resume, from + 1));
                p = resume;
                i = from + 1;
            }
            _ => return false,
        }
    }
}

/// Matches the one-character token at `p` (not `*`) against `c`: the index after the token
/// if it matches.
fn match_one(pat: &[u8], p: usize, c: u8) -> Option<usize> {
    match pat[p] {
        b'?' => Some(p + 1),
        b'[' => {
            let (matched, close) = match_class(pat, p + 1, c);
            matched.then_some(close + 1)
        }
        // A trailing backslash is a literal backslash, as in Redis.
        b'\\' if p + 1 < pat.len() => (pat[p + 1] == c).then_some(p + 2),
        lit => (lit == c).then_some(p + 1),
    }
}

/// Matches `c` against the class starting at `p` (after '['); returns (matched, index of ']').
fn match_class(pat: &[u8], mut p: usize, c: u8) -> (bool, usize) {
    let negate = pat.get(p) == Some(&b'^');
    if negate {
        p += 1;
    }
    let mut matched = false;
    while p < pat.len() && pat[p] != b']' {
        if pat[p] == b'\\' && p + 1 < pat.len() {
            p += 1;
            matched |= pat[p] == c;
        } else if p + 2 < pat.len() && pat[p + 1] == b'-' {
            // As in Redis, the range's end may be `]` (which then does not close the class).
            let (lo, hi) = if pat[p] <= pat[p + 2] {
                (pat[p], pat[p + 2])
            } else {
                (pat[p + 2], pat[p])
            };
            matched |= (lo..=hi).contains(&c);
            p += 2;
        } else {
            matched |= pat[p] == c;
        }
        p += 1;
    }
    // An unterminated class ends at the pattern's end, as in Redis.
    let end = p.min(pat.len().saturating_sub(1));
    (matched != negate, end)
}

#[cfg(test)]
mod tests {
    use super::matches;

    /// Redis's recursive matcher, step for step (exponential, so only for tiny inputs): the
    /// reference the bounded matcher must agree with.
    fn reference(pat: &[u8], s: &[u8]) -> bool {
        // Redis's loop runs only while both pattern and string remain.
        if s.is_empty() {
            return pat.is_empty();
        }
        reference_from(pat, s)
    }

    fn reference_from(pat: &[u8], s: &[u8]) -> bool {
        let (mut p, mut i) = (0usize, 0usize);
        while p < pat.len() && i <= s.len() {
            match pat[p] {
                b'*' => {
                    while p + 1 < pat.len() && pat[p + 1] == b'*' {
                        p += 1;
                    }
                    if p + 1 == pat.len() {
                        return true;
                    }
                    // Redis tries the rest only where some string remains.
                    return (i..s.len()).any(|k| reference_from(&pat[p + 1..], &s[k..]));
                }
                _ if i == s.len() => return false,
                b'?' => {}
                b'[' => {
                    p += 1;
                    let not = pat.get(p) == Some(&b'^');
                    if not {
                        p += 1;
                    }
                    let mut hit = false;
                    loop {
                        if p + 1 < pat.len() && pat[p] == b'\\' {
                            p += 1;
                            hit |= pat[p] == s[i];
                        } else if p >= pat.len() {
                            p -= 1;
                            break;
                        } else if pat[p] == b']' {
                            break;
                        } else if p + 2 < pat.len() && pat[p + 1] == b'-' {
                            let (a, b) = (pat[p].min(pat[p + 2]), pat[p].max(pat[p + 2]));
                            hit |= (a..=b).contains(&s[i]);
                            p += 2;
                        } else {
                            hit |= pat[p] == s[i];
                        }
                        p += 1;
                    }
                    if hit == not {
                        return false;
                    }
                }
                c => {
                    let lit = if c == b'\\' && p + 1 < pat.len() {
                        p += 1;
                        pat[p]
                    } else {
                        c
                    };
                    if s[i] != lit {
                        return false;
                    }
                }
            }
            p += 1;
            i += 1;
        }
        while p < pat.len() && pat[p] == b'*' {
            p += 1;
        }
        p == pat.len() && i == s.len()
    }

    /// Every string of length up to `n` over `alphabet`.
    fn all(alphabet: &[u8], n: usize) -> Vec<Vec<u8>> {
        let mut out = vec![vec![]];
        let mut last = vec![vec![]];
        for _ in 0..n {
            last = last
                .iter()
                .flat_map(|w: &Vec<u8>| {
                    alphabet.iter().map(move |c| {
                        let mut w = w.clone();
                        w.push(*c);
                        w
                    })
                })
                .collect();
            out.extend(last.iter().cloned());
        }
        out
    }

    #[test]
    fn agrees_with_redis_semantics_on_every_small_pattern() {
        let patterns = all(b"ab*?[]^-\\", 4);
        let strings = all(b"ab]-\\", 4);
        for p in &patterns {
            for s in &strings {
                assert_eq!(
                    matches(p, s),
                    reference(p, s),
                    "pattern {:?} string {:?}",
                    String::from_utf8_lossy(p),
                    String::from_utf8_lossy(s)
                );
            }
        }
    }

    #[test]
    fn a_pattern_that_is_exponential_for_a_backtracking_matcher_is_answered() {
        // CVE-2022-36021's shape: each `*a` multiplies a naive matcher's work.
        let pat = b"*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b";
        assert!(!matches(pat, &[b'a'; 40]));
        let mut s = vec![b'a'; 40];
        s.push(b'b');
        assert!(matches(pat, &s));
    }

    #[test]
    fn globs() {
        assert!(matches(b"*", b"anything"));
        assert!(matches(b"lock:*", b"lock:1"));
        assert!(!matches(b"lock:*", b"lick:1"));
        assert!(matches(b"h?llo", b"hello"));
        assert!(matches(b"h[ae]llo", b"hallo"));
        assert!(!matches(b"h[^e]llo", b"hello"));
        assert!(matches(b"h[a-c]llo", b"hbllo"));
        assert!(matches(b"a\\*b", b"a*b"));
        assert!(!matches(b"a\\*b", b"axb"));
        assert!(matches(b"*a*b*", b"xxaxxbxx"));
    }
}
