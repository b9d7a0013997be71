//! Redis glob-style patterns (KEYS, SCAN MATCH): `*`, `?`, `[abc]`, `[^a-z]` and `\` escapes.

/// True when `s` matches the Redis glob `pat`.
pub fn matches(pat: &[u8], s: &[u8]) -> bool {
    match_from(pat, s, 0)
}

fn match_from(pat: &[u8], s: &[u8], depth: usize) -> bool {
    // Bound recursion on pathological patterns, as Redis does.
    if depth > 1000 {
        return false;
    }
    let (mut p, mut i) = (0, 0);
    while p < pat.len() {
        match pat[p] {
            b'*' => {
                while p + 1 < pat.len() && pat[p + 1] == b'*' {
                    p += 1;
                }
                if p + 1 == pat.len() {
                    return true;
                }
                return (i..=s.len())
                    .any(|start| match_from(&pat[p + 1..], &s[start..], depth + 1));
            }
            b'?' => {
                if i >= s.len() {
                    return false;
                }
                i += 1;
            }
            b'[' => {
                if i >= s.len() {
                    return false;
                }
                let (matched, next) = match_class(pat, p + 1, s[i]);
                if !matched {
                    return false;
                }
                p = next;
                i += 1;
            }
            c => {
                let lit = if c == b'\\' && p + 1 < pat.len() {
                    p += 1;
                    pat[p]
                } else {
                    c
                };
                if i >= s.len() || s[i] != lit {
                    return false;
                }
                i += 1;
            }
        }
        p += 1;
    }
    i == s.len()
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
        } else if p + 2 < pat.len() && pat[p + 1] == b'-' && pat[p + 2] != b']' {
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
