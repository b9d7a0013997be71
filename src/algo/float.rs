//! C's floating-point text as Redis and its Lua libraries see it: `printf("%.<n>g")` and
//! `strtod`. `strtod` comes in its two documented forms: [`strtod_prefix`], the whole of
//! glibc's (a prefix, hex, `nan`), which cjson's decoder uses, and [`strtod`] with Redis's
//! whole-string checks on top ([`string2d`], [`sort_strtod`]), which the commands use.

/// C's `printf("%.<precision>g")`: Redis's doubles in replies (`%.17g`, through
/// `resp::format_double`), Lua numbers passed to `redis.call` (`%.17g`), Lua's
/// `tostring` (`%.14g`) and cjson's encoder precision.
pub fn format_g(n: f64, precision: i32) -> String {
    if n.is_nan() {
        return if n.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if n.is_infinite() {
        return if n > 0.0 { "inf" } else { "-inf" }.into();
    }
    if n == 0.0 {
        return if n.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let digits = (precision - 1) as usize;
    let sci = format!("{n:.digits$e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..precision).contains(&exp) {
        let m = trim_zeros(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{m}e{sign}{:02}", exp.abs());
    }
    let decimals = (precision - 1 - exp).max(0) as usize;
    trim_zeros(&format!("{n:.decimals$}")).to_string()
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// The part of C's `strtod` Redis's commands accept: decimal floats, `inf`, `infinity` (any
/// case, signed), the whole of `s`; never NaN. Overflow gives an infinity (no ERANGE check).
pub fn strtod(s: &str) -> Option<f64> {
    let lower = s.to_ascii_lowercase();
    let body = lower.trim_start_matches(['+', '-']);
    if body.starts_with("nan") {
        return None;
    }
    if body.len() + 1 < lower.len() {
        return None; // two signs
    }
    lower.parse::<f64>().ok()
}

/// Parses a double as Redis's `string2d` does (strtod, the whole string, no leading space,
/// no overflow or underflow to zero, no NaN).
pub fn string2d(b: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(b).ok()?;
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_whitespace()) {
        return None;
    }
    let v = strtod(s)?;
    let lower = s.to_ascii_lowercase();
    let literal_inf = lower.trim_start_matches(['+', '-']).starts_with("inf");
    if (v.is_infinite() && !literal_inf) || v.is_nan() {
        return None;
    }
    if v == 0.0
        && s.bytes()
            .take_while(|c| *c != b'e' && *c != b'E')
            .any(|c| (b'1'..=b'9').contains(&c))
    {
        return None; // underflow
    }
    Some(v)
}

/// C's `strtod` as SORT uses it: [`string2d`] after leading C white space; the empty string
/// is 0, as in Redis (white space alone is not). Hexadecimal floats (which glibc also reads)
/// are not accepted.
pub fn sort_strtod(b: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(b).ok()?;
    let t = text.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    if t.is_empty() {
        return text.is_empty().then_some(0.0);
    }
    string2d(t.as_bytes())
}

/// C's `strtod` on a prefix of `s` (no leading whitespace): the bytes consumed (0 when no
/// number starts here) and the value. Accepts a sign, decimal with exponent, hex (`0x`,
/// with `p` exponent), `inf`, `infinity` and `nan`.
pub fn strtod_prefix(s: &[u8]) -> (usize, f64) {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let mut i = 0;
    let neg = match at(0) {
        b'-' => {
            i = 1;
            true
        }
        b'+' => {
            i = 1;
            false
        }
        _ => false,
    };
    let sign = if neg { -1.0 } else { 1.0 };
    let lower = |from: usize, n: usize| -> Vec<u8> {
        (0..n).map(|k| at(from + k).to_ascii_lowercase()).collect()
    };
    if lower(i, 8) == b"infinity" {
        return (i + 8, sign * f64::INFINITY);
    }
    if lower(i, 3) == b"inf" {
        return (i + 3, sign * f64::INFINITY);
    }
    if lower(i, 3) == b"nan" {
        let mut end = i + 3;
        if at(end) == b'(' {
            let mut j = end + 1;
            while at(j).is_ascii_alphanumeric() || at(j) == b'_' {
                j += 1;
            }
            if at(j) == b')' {
                end = j + 1;
            }
        }
        return (end, if neg { -f64::NAN } else { f64::NAN });
    }
    if at(i) == b'0' && (at(i + 1) | 0x20) == b'x' {
        let mut j = i + 2;
        let mut mant: f64 = 0.0;
        let mut digits = 0;
        let mut exp: i64 = 0;
        while let Some(d) = (at(j) as char).to_digit(16) {
            mant = mant * 16.0 + d as f64;
            digits += 1;
            j += 1;
        }
        if at(j) == b'.' {
            let mut k = j + 1;
            let mut frac_digits = 0;
            while let Some(d) = (at(k) as char).to_digit(16) {
                mant = mant * 16.0 + d as f64;
                exp -= 4;
                frac_digits += 1;
                k += 1;
            }
            if digits + frac_digits > 0 {
                j = k;
                digits += frac_digits;
            }
        }
        if digits == 0 {
            // Only the "0" parses.
            return (i + 1, sign * 0.0);
        }
        if (at(j) | 0x20) == b'p' {
            let mut k = j + 1;
            let eneg = match at(k) {
                b'-' => {
                    k += 1;
                    true
                }
                b'+' => {
                    k += 1;
                    false
                }
                _ => false,
            };
            if at(k).is_ascii_digit() {
                let mut e: i64 = 0;
                while at(k).is_ascii_digit() {
                    e = (e * 10 + (at(k) - b'0') as i64).min(100_000);
                    k += 1;
                }
                exp += if eneg { -e } else { e };
                j = k;
            }
        }
        return (j, sign * mant * 2f64.powi(exp.clamp(-5000, 5000) as i32));
    }
    let start = i;
    let mut j = i;
    while at(j).is_ascii_digit() {
        j += 1;
    }
    let int_digits = j - start;
    let mut frac_digits = 0;
    if at(j) == b'.' {
        let mut k = j + 1;
        while at(k).is_ascii_digit() {
            k += 1;
        }
        frac_digits = k - j - 1;
        if int_digits + frac_digits > 0 {
            j = k;
        }
    }
    if int_digits + frac_digits == 0 {
        return (0, 0.0);
    }
    if (at(j) | 0x20) == b'e' {
        let mut k = j + 1;
        if at(k) == b'+' || at(k) == b'-' {
            k += 1;
        }
        if at(k).is_ascii_digit() {
            while at(k).is_ascii_digit() {
                k += 1;
            }
            j = k;
        }
    }
    let text = std::str::from_utf8(&s[start..j]).unwrap_or("0");
    let text = if text.starts_with('.') {
        format!("0{text}")
    } else {
        text.to_string()
    };
    let text = text.replace(".e", ".0e").replace(".E", ".0E");
    let v: f64 = text.parse().unwrap_or(0.0);
    (j, sign * v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sort_numbers_parse_like_strtod() {
        assert_eq!(sort_strtod(b"1.5"), Some(1.5));
        assert_eq!(sort_strtod(b" 2"), Some(2.0));
        assert_eq!(sort_strtod(b""), Some(0.0));
        assert_eq!(sort_strtod(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(sort_strtod(b"1e3"), Some(1000.0));
        assert_eq!(sort_strtod(b"nan"), None);
        assert_eq!(sort_strtod(b"1e400"), None);
        assert_eq!(sort_strtod(b"1e-400"), None);
        assert_eq!(sort_strtod(b"0.0"), Some(0.0));
        assert_eq!(sort_strtod(b"2 "), None);
        assert_eq!(sort_strtod(b"abc"), None);
    }

    #[test]
    fn string2d_is_the_whole_string_and_finite_unless_literal() {
        assert_eq!(string2d(b"1.5"), Some(1.5));
        assert_eq!(string2d(b"-INF"), Some(f64::NEG_INFINITY));
        assert_eq!(string2d(b"+infinity"), Some(f64::INFINITY));
        assert_eq!(string2d(b".5"), Some(0.5));
        assert_eq!(string2d(b"1e-400"), None);
        assert_eq!(string2d(b"0e-400"), Some(0.0));
        assert_eq!(string2d(b"1e400"), None);
        assert_eq!(string2d(b" 1"), None);
        assert_eq!(string2d(b""), None);
        assert_eq!(string2d(b"nan"), None);
        assert_eq!(string2d(b"+-1"), None);
        assert_eq!(string2d(b"0x10"), None);
        assert_eq!(strtod("1e400"), Some(f64::INFINITY));
    }

    #[test]
    fn format_g_golden_strings() {
        for (d, p, want) in [
            (0.1, 17, "0.10000000000000001"),
            (0.1, 14, "0.1"),
            (1.0 / 3.0, 17, "0.33333333333333331"),
            (1.0 / 3.0, 14, "0.33333333333333"),
            (1e17, 17, "1e+17"),
            (1e16, 17, "10000000000000000"),
            (1e15, 14, "1e+15"),
            (1e-5, 17, "1.0000000000000001e-05"),
            (1e-5, 14, "1e-05"),
            (0.0001, 17, "0.0001"),
            (-2.5, 17, "-2.5"),
            (-0.0, 17, "-0"),
            (123456789012.0, 14, "123456789012"),
            (f64::MAX, 17, "1.7976931348623157e+308"),
            (5e-324, 17, "4.9406564584124654e-324"),
            (f64::NEG_INFINITY, 14, "-inf"),
            (-f64::NAN, 17, "-nan"),
        ] {
            assert_eq!(format_g(d, p), want, "{d:e} %.{p}g");
        }
    }

    #[test]
    fn strtod_prefixes() {
        assert_eq!(strtod_prefix(b"12abc"), (2, 12.0));
        assert_eq!(strtod_prefix(b"1e5x"), (3, 1e5));
        assert_eq!(strtod_prefix(b"1e+x"), (1, 1.0));
        assert_eq!(strtod_prefix(b"-.5"), (3, -0.5));
        assert_eq!(strtod_prefix(b"0x1p4"), (5, 16.0));
        assert_eq!(strtod_prefix(b"-"), (0, 0.0));
        assert_eq!(strtod_prefix(b"Infinity"), (8, f64::INFINITY));
    }
}
