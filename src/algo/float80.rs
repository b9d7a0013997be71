//! x87 80-bit extended precision (`long double` on x86-64 Linux), as Redis's INCRBYFLOAT
//! computes with it: `strtold`'s correctly rounded parsing (as Redis's `string2ld` accepts
//! it), one correctly rounded addition, and `printf("%.17Lf")` with Redis's trimming of
//! trailing zeros (`ld2string`, `LD_STR_HUMAN`).
//!
//! An `f64` would not do: Redis prints `INCRBYFLOAT k 0.1` as `0.1` because the 64-bit
//! mantissa rounds 0.1 to a value whose 17 decimals are `0.10000000000000000`; with an `f64`
//! they would be `0.10000000000000001`. Everything here is exact integer arithmetic on a
//! small big-integer type, so every replica computes the same bytes.

use std::cmp::Ordering;

/// The largest string `string2ld` accepts is one byte shorter than this.
const MAX_LONG_DOUBLE_CHARS: usize = 5 * 1024;
/// The exponent of the lowest bit of the smallest subnormal (2^-16445).
const MIN_LSB_EXP: i64 = -16445;
/// The exponent of the leading bit of the largest finite value.
const MAX_LEAD_EXP: i64 = 16383;

/// An unsigned big integer: little-endian 32-bit limbs, no high zero limbs.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Big(Vec<u32>);

impl Big {
    fn zero() -> Big {
        Big(Vec::new())
    }

    fn from_u64(n: u64) -> Big {
        let mut b = Big(vec![n as u32, (n >> 32) as u32]);
        b.trim();
        b
    }

    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }

    fn is_zero(&self) -> bool {
        self.0.is_empty()
    }

    /// Number of significant bits.
    fn bits(&self) -> u64 {
        match self.0.last() {
            None => 0,
            Some(&top) => (self.0.len() as u64 - 1) * 32 + u64::from(32 - top.leading_zeros()),
        }
    }

    fn bit(&self, i: u64) -> bool {
        let limb = (i / 32) as usize;
        limb < self.0.len() && (self.0[limb] >> (i % 32)) & 1 == 1
    }

    /// True if any bit below position `i` is set.
    fn any_below(&self, i: u64) -> bool {
        let full = ((i / 32) as usize).min(self.0.len());
        let part = i % 32;
        self.0[..full].iter().any(|&l| l != 0)
            || (part > 0 && full < self.0.len() && self.0[full] & ((1u32 << part) - 1) != 0)
    }

    fn shl(&self, n: u64) -> Big {
        if self.is_zero() {
            return Big::zero();
        }
        let bits = (n % 32) as u32;
        let mut out = vec![0u32; (n / 32) as usize];
        if bits == 0 {
            out.extend_from_slice(&self.0);
        } else {
            let mut carry = 0u32;
            for &l in &self.0 {
                out.push((l << bits) | carry);
                carry = l >> (32 - bits);
            }
            out.push(carry);
        }
        let mut b = Big(out);
        b.trim();
        b
    }

    fn shr(&self, n: u64) -> Big {
        let limbs = (n / 32) as usize;
        if limbs >= self.0.len() {
            return Big::zero();
        }
        let bits = (n % 32) as u32;
        let src = &self.0[limbs..];
        let out = (0..src.len())
            .map(|i| {
                let hi = match src.get(i + 1) {
                    Some(&h) if bits > 0 => h << (32 - bits),
                    _ => 0,
                };
                (src[i] >> bits) | hi
            })
            .collect();
        let mut b = Big(out);
        b.trim();
        b
    }

    fn cmp(&self, o: &Big) -> Ordering {
        self.0
            .len()
            .cmp(&o.0.len())
            .then_with(|| self.0.iter().rev().cmp(o.0.iter().rev()))
    }

    fn add(&self, o: &Big) -> Big {
        let n = self.0.len().max(o.0.len());
        let mut out = Vec::with_capacity(n + 1);
        let mut carry = 0u64;
        for i in 0..n {
            let s = u64::from(*self.0.get(i).unwrap_or(&0))
                + u64::from(*o.0.get(i).unwrap_or(&0))
                + carry;
            out.push(s as u32);
            carry = s >> 32;
        }
        out.push(carry as u32);
        let mut b = Big(out);
        b.trim();
        b
    }

    /// `self - o`, for `self >= o`.
    fn sub(&self, o: &Big) -> Big {
        let mut out = Vec::with_capacity(self.0.len());
        let mut borrow = 0i64;
        for i in 0..self.0.len() {
            let mut d = i64::from(self.0[i]) - i64::from(*o.0.get(i).unwrap_or(&0)) - borrow;
            borrow = 0;
            if d < 0 {
                d += 1 << 32;
                borrow = 1;
            }
            out.push(d as u32);
        }
        let mut b = Big(out);
        b.trim();
        b
    }

    /// `self = self * m + a`.
    fn mul_add_small(&mut self, m: u32, a: u32) {
        let mut carry = u64::from(a);
        for l in &mut self.0 {
            let p = u64::from(*l) * u64::from(m) + carry;
            *l = p as u32;
            carry = p >> 32;
        }
        if carry > 0 {
            self.0.push(carry as u32);
        }
        self.trim();
    }

    /// Divides in place by `d`; returns the remainder.
    fn divmod_small(&mut self, d: u32) -> u32 {
        let mut rem = 0u64;
        for l in self.0.iter_mut().rev() {
            let cur = (rem << 32) | u64::from(*l);
            *l = (cur / u64::from(d)) as u32;
            rem = cur % u64::from(d);
        }
        self.trim();
        rem as u32
    }

    fn low_u64(&self) -> u64 {
        u64::from(*self.0.first().unwrap_or(&0)) | (u64::from(*self.0.get(1).unwrap_or(&0)) << 32)
    }

    fn pow10(mut n: u64) -> Big {
        let mut b = Big::from_u64(1);
        while n >= 9 {
            b.mul_add_small(1_000_000_000, 0);
            n -= 9;
        }
        b.mul_add_small(10u32.pow(n as u32), 0);
        b
    }

    /// Quotient and remainder, a bit at a time (parsing needs about 66 quotient bits, so
    /// the division starts from the dividend's top bits just below the divisor's size).
    fn div_rem(&self, d: &Big) -> (Big, Big) {
        let (n, db) = (self.bits(), d.bits());
        if n < db {
            return (Big::zero(), self.clone());
        }
        // The top `db - 1` bits are below `d`: no quotient bit comes from them.
        let start = n - (db - 1);
        let mut r = self.shr(start);
        let mut q = vec![0u32; (start / 32 + 1) as usize];
        for i in (0..start).rev() {
            r = r.shl(1);
            if self.bit(i) {
                if r.0.is_empty() {
                    r.0.push(1);
                } else {
                    r.0[0] |= 1;
                }
            }
            if r.cmp(d) != Ordering::Less {
                r = r.sub(d);
                q[(i / 32) as usize] |= 1 << (i % 32);
            }
        }
        let mut q = Big(q);
        q.trim();
        (q, r)
    }

    fn to_decimal(&self) -> String {
        if self.is_zero() {
            return "0".into();
        }
        let mut n = self.clone();
        let mut chunks = Vec::new();
        while !n.is_zero() {
            chunks.push(n.divmod_small(1_000_000_000));
        }
        let mut s = chunks.pop().map(|c| c.to_string()).unwrap_or_default();
        for c in chunks.iter().rev() {
            s.push_str(&format!("{c:09}"));
        }
        s
    }
}

/// An 80-bit extended value: `mant * 2^exp` (zero when `mant` is 0), or an infinity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum F80 {
    /// A finite value.
    Finite {
        /// Sign.
        neg: bool,
        /// The 64-bit significand.
        mant: u64,
        /// Exponent of its lowest bit.
        exp: i64,
    },
    /// An infinity.
    Inf {
        /// Sign.
        neg: bool,
    },
}

/// How rounding to 80 bits went.
enum Rounded {
    Value(F80),
    Overflow,
    /// A nonzero value rounded to zero.
    Underflow,
}

const ZERO: F80 = F80::Finite {
    neg: false,
    mant: 0,
    exp: 0,
};

/// Rounds `(big + a nonzero fraction below its last bit if sticky) * 2^exp` to the nearest
/// 80-bit value, ties to even, with subnormals.
fn round(neg: bool, big: &Big, exp: i64, sticky: bool) -> Rounded {
    if big.is_zero() {
        return if sticky {
            Rounded::Underflow
        } else {
            Rounded::Value(F80::Finite {
                neg,
                mant: 0,
                exp: 0,
            })
        };
    }
    let lead = big.bits() as i64 - 1 + exp;
    if lead > MAX_LEAD_EXP {
        return Rounded::Overflow;
    }
    let mut lsb = (lead - 63).max(MIN_LSB_EXP);
    let shift = lsb - exp;
    let mut mant;
    if shift <= 0 {
        mant = big.shl((-shift) as u64).low_u64();
    } else {
        let s = shift as u64;
        mant = big.shr(s).low_u64();
        let half = big.bit(s - 1);
        let rest = sticky || big.any_below(s - 1);
        if half && (rest || mant & 1 == 1) {
            mant = mant.wrapping_add(1);
            if mant == 0 {
                mant = 1 << 63;
                lsb += 1;
            }
        }
    }
    if mant == 0 {
        return Rounded::Underflow;
    }
    if lsb + 63 - i64::from(mant.leading_zeros()) > MAX_LEAD_EXP {
        return Rounded::Overflow;
    }
    Rounded::Value(F80::Finite {
        neg,
        mant,
        exp: lsb,
    })
}

fn accept(r: Rounded) -> Option<F80> {
    match r {
        Rounded::Value(v) => Some(v),
        // strtold's ERANGE with HUGE_VAL or zero: string2ld refuses both.
        Rounded::Overflow | Rounded::Underflow => None,
    }
}

fn is_c_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Digits of `radix` at the start of `s`, as a big integer, and how many there were.
fn digits(s: &[u8], radix: u32, acc: &mut Big) -> usize {
    let n = s
        .iter()
        .take_while(|c| (**c as char).is_digit(radix))
        .count();
    for &c in &s[..n] {
        let d = (c as char).to_digit(radix).unwrap_or(0);
        acc.mul_add_small(radix, d);
    }
    n
}

/// An optional exponent (`e`/`p` already matched by the caller); None if malformed.
fn exponent(s: &[u8]) -> Option<i64> {
    let (neg, s) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut e: i64 = 0;
    for &c in s {
        e = (e * 10 + i64::from(c - b'0')).min(1_000_000_000);
    }
    Some(if neg { -e } else { e })
}

/// Parses a float as Redis's `string2ld` does (`strtold` on the whole string; leading space,
/// trailing characters, NaN, overflow and underflow to zero are refused). Infinities parse.
pub fn parse(s: &[u8]) -> Option<F80> {
    if s.is_empty() || s.len() >= MAX_LONG_DOUBLE_CHARS {
        return None;
    }
    // The C string ends at a NUL.
    let s = &s[..s.iter().position(|&c| c == 0).unwrap_or(s.len())];
    if s.is_empty() {
        return Some(ZERO);
    }
    if is_c_space(s[0]) {
        return None;
    }
    let (neg, s) = match s[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if s.eq_ignore_ascii_case(b"inf") || s.eq_ignore_ascii_case(b"infinity") {
        return Some(F80::Inf { neg });
    }
    let hex = s.len() > 2
        && s[0] == b'0'
        && (s[1] | 0x20) == b'x'
        && (s[2].is_ascii_hexdigit()
            || (s[2] == b'.' && s.get(3).is_some_and(u8::is_ascii_hexdigit)));
    let (radix, body) = if hex { (16, &s[2..]) } else { (10, s) };
    let mut mant = Big::zero();
    let int_len = digits(body, radix, &mut mant);
    let mut rest = &body[int_len..];
    let mut frac_len = 0;
    if rest.first() == Some(&b'.') {
        frac_len = digits(&rest[1..], radix, &mut mant);
        rest = &rest[1 + frac_len..];
    }
    if int_len + frac_len == 0 {
        return None;
    }
    let mut exp = 0;
    if let Some(&c) = rest.first() {
        let marker = if hex { b'p' } else { b'e' };
        if (c | 0x20) != marker {
            return None;
        }
        exp = exponent(&rest[1..])?;
    }
    if mant.is_zero() {
        return Some(F80::Finite {
            neg,
            mant: 0,
            exp: 0,
        });
    }
    if hex {
        let e = exp - 4 * frac_len as i64;
        let lead = mant.bits() as i64 - 1 + e;
        if lead > MAX_LEAD_EXP + 8 {
            return None;
        }
        if lead < MIN_LSB_EXP - 8 {
            return None;
        }
        return accept(round(neg, &mant, e, false));
    }
    let k = exp - frac_len as i64;
    // The value is below 10^magnitude and at least 10^(magnitude-1).
    let magnitude = mant.to_decimal().len() as i64 + k;
    if magnitude - 1 > 4933 || magnitude < -4952 {
        return None;
    }
    if k >= 0 {
        let mut big = mant;
        let p = Big::pow10(k as u64);
        big = mul(&big, &p);
        return accept(round(neg, &big, 0, false));
    }
    let den = Big::pow10((-k) as u64);
    let s = (66 + den.bits() as i64 - mant.bits() as i64).max(0) as u64;
    let (q, r) = mant.shl(s).div_rem(&den);
    accept(round(neg, &q, -(s as i64), !r.is_zero()))
}

fn mul(a: &Big, b: &Big) -> Big {
    let mut out = vec![0u32; a.0.len() + b.0.len() + 1];
    for (i, &x) in a.0.iter().enumerate() {
        let mut carry = 0u64;
        for (j, &y) in b.0.iter().enumerate() {
            let cur = u64::from(out[i + j]) + u64::from(x) * u64::from(y) + carry;
            out[i + j] = cur as u32;
            carry = cur >> 32;
        }
        let mut k = i + b.0.len();
        while carry > 0 {
            let cur = u64::from(out[k]) + carry;
            out[k] = cur as u32;
            carry = cur >> 32;
            k += 1;
        }
    }
    let mut r = Big(out);
    r.trim();
    r
}

/// `a + b` rounded to 80 bits; None for NaN or an infinity (Redis refuses to store them).
pub fn add(a: F80, b: F80) -> Option<F80> {
    let (
        F80::Finite {
            neg: na,
            mant: ma,
            exp: ea,
        },
        F80::Finite {
            neg: nb,
            mant: mb,
            exp: eb,
        },
    ) = (a, b)
    else {
        return None;
    };
    let emin = match (ma, mb) {
        (0, 0) => return Some(ZERO),
        (0, _) => eb,
        (_, 0) => ea,
        _ => ea.min(eb),
    };
    let big = |m: u64, e: i64| {
        if m == 0 {
            Big::zero()
        } else {
            Big::from_u64(m).shl((e - emin) as u64)
        }
    };
    let (x, y) = (big(ma, ea), big(mb, eb));
    let (neg, sum) = if na == nb {
        (na, x.add(&y))
    } else {
        match x.cmp(&y) {
            Ordering::Equal => return Some(ZERO),
            Ordering::Greater => (na, x.sub(&y)),
            Ordering::Less => (nb, y.sub(&x)),
        }
    };
    match round(neg, &sum, emin, false) {
        Rounded::Value(v) => Some(v),
        Rounded::Overflow => None,
        Rounded::Underflow => Some(ZERO),
    }
}

/// `printf("%.17Lf")`, then Redis's trimming: trailing zeros and a bare `.` go, and `-0`
/// becomes `0`.
pub fn format(v: F80) -> String {
    let (neg, mant, exp) = match v {
        F80::Finite { neg, mant, exp } => (neg, mant, exp),
        F80::Inf { neg } => return if neg { "-inf".into() } else { "inf".into() },
    };
    let m = Big::from_u64(mant);
    let mut digits = if exp >= 0 {
        let mut s = m.shl(exp as u64).to_decimal();
        s.push_str(&"0".repeat(17));
        s
    } else {
        let sh = (-exp) as u64;
        let mut scaled = m;
        scaled.mul_add_small(1_000_000_000, 0);
        scaled.mul_add_small(100_000_000, 0);
        let mut q = scaled.shr(sh);
        let half = scaled.bit(sh - 1);
        let rest = scaled.any_below(sh - 1);
        if half && (rest || q.bit(0)) {
            q.mul_add_small(1, 1);
        }
        q.to_decimal()
    };
    if digits.len() < 18 {
        digits = format!("{}{digits}", "0".repeat(18 - digits.len()));
    }
    let (int, frac) = digits.split_at(digits.len() - 17);
    let mut out = format!("{}{int}.{frac}", if neg { "-" } else { "" });
    while out.ends_with('0') {
        out.pop();
    }
    if out.ends_with('.') {
        out.pop();
    }
    if out == "-0" {
        out = "0".into();
    }
    out
}

#[cfg(test)]
mod tests;
