//! The x86-64 `long double` (x87 80-bit extended: a 64-bit mantissa) that Redis's
//! HINCRBYFLOAT computes in, emulated exactly in software so every replica agrees with
//! redis-server digit for digit: `strtold`-style parsing with correct rounding, one rounded
//! addition, and glibc's `%.17Lf` with trailing zeros removed (Redis's `LD_STR_HUMAN`).
//!
//! An f64 would not do: Redis replies `12345.09999999999999964` to `HINCRBYFLOAT h f
//! 12345.1`, and `0.3` where f64 arithmetic gives `0.30000000000000004`.
//!
//! Not handled: hexadecimal input (`0x1p3`), which strtold accepts; it is refused as "not a
//! valid float" here.

use std::cmp::Ordering;

/// Smallest exponent of the mantissa's last bit (subnormals share it): 2^-16445 is the
/// smallest positive value.
const MIN_EXP: i64 = -16445;
/// Values at or above 2^16384 overflow.
const MAX_BITS: i64 = 16384;

/// A finite value `mant * 2^exp` (mant == 0 is zero), with the sign apart so -0 exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LongDouble {
    neg: bool,
    mant: u64,
    exp: i64,
}

/// A parse or arithmetic result that is not a finite value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotFinite {
    /// Infinite (an `inf` literal or an overflow).
    Inf,
    /// Unparseable, NaN, or out of range in a way Redis refuses.
    Invalid,
}

/// An unsigned big integer, little-endian 32-bit limbs, no trailing zero limbs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Big(Vec<u32>);

impl Big {
    fn from_u128(mut v: u128) -> Big {
        let mut l = Vec::new();
        while v > 0 {
            l.push(v as u32);
            v >>= 32;
        }
        Big(l)
    }

    fn trim(mut self) -> Big {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
        self
    }

    fn is_zero(&self) -> bool {
        self.0.is_empty()
    }

    fn bit_len(&self) -> i64 {
        match self.0.last() {
            None => 0,
            Some(top) => (self.0.len() as i64 - 1) * 32 + (32 - top.leading_zeros() as i64),
        }
    }

    fn bit(&self, i: i64) -> bool {
        if i < 0 {
            return false;
        }
        let (w, b) = ((i / 32) as usize, i % 32);
        self.0.get(w).is_some_and(|x| x >> b & 1 == 1)
    }

    /// True if any bit below `i` is set.
    fn any_below(&self, i: i64) -> bool {
        if i <= 0 {
            return false;
        }
        let (w, b) = ((i / 32) as usize, i % 32);
        self.0.iter().take(w).any(|&x| x != 0)
            || (b > 0 && self.0.get(w).is_some_and(|&x| x & ((1u32 << b) - 1) != 0))
    }

    fn mul_add_small(mut self, m: u32, a: u32) -> Big {
        let mut carry = a as u64;
        for x in self.0.iter_mut() {
            let v = *x as u64 * m as u64 + carry;
            *x = v as u32;
            carry = v >> 32;
        }
        if carry > 0 {
            self.0.push(carry as u32);
        }
        self.trim()
    }

    fn pow10(n: usize) -> Big {
        let mut b = Big::from_u128(1);
        let mut left = n;
        while left > 0 {
            let step = left.min(9);
            b = b.mul_add_small(10u32.pow(step as u32), 0);
            left -= step;
        }
        b
    }

    fn mul(&self, o: &Big) -> Big {
        let mut out = vec![0u32; self.0.len() + o.0.len() + 1];
        for (i, &a) in self.0.iter().enumerate() {
            let mut carry = 0u64;
            for (j, &b) in o.0.iter().enumerate() {
                let v = out[i + j] as u64 + a as u64 * b as u64 + carry;
                out[i + j] = v as u32;
                carry = v >> 32;
            }
            let mut k = i + o.0.len();
            while carry > 0 {
                let v = out[k] as u64 + carry;
                out[k] = v as u32;
                carry = v >> 32;
                k += 1;
            }
        }
        Big(out).trim()
    }

    fn shl(&self, n: i64) -> Big {
        if self.is_zero() {
            return Big::default();
        }
        let (w, b) = ((n / 32) as usize, (n % 32) as u32);
        let mut out = vec![0u32; w];
        let mut carry = 0u32;
        for &x in &self.0 {
            out.push(if b == 0 { x } else { x << b | carry });
            carry = if b == 0 { 0 } else { x >> (32 - b) };
        }
        out.push(carry);
        Big(out).trim()
    }

    fn shr(&self, n: i64) -> Big {
        let (w, b) = ((n / 32) as usize, (n % 32) as u32);
        if w >= self.0.len() {
            return Big::default();
        }
        let src = &self.0[w..];
        let out = (0..src.len())
            .map(|i| {
                let lo = src[i] >> b;
                let hi = if b == 0 {
                    0
                } else {
                    src.get(i + 1).map_or(0, |&x| x << (32 - b))
                };
                lo | hi
            })
            .collect();
        Big(out).trim()
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
            let v = *self.0.get(i).unwrap_or(&0) as u64 + *o.0.get(i).unwrap_or(&0) as u64 + carry;
            out.push(v as u32);
            carry = v >> 32;
        }
        out.push(carry as u32);
        Big(out).trim()
    }

    /// `self - o`, for `self >= o`.
    fn sub(&self, o: &Big) -> Big {
        let mut out = Vec::with_capacity(self.0.len());
        let mut borrow = 0i64;
        for i in 0..self.0.len() {
            let mut v = self.0[i] as i64 - *o.0.get(i).unwrap_or(&0) as i64 - borrow;
            borrow = 0;
            if v < 0 {
                v += 1 << 32;
                borrow = 1;
            }
            out.push(v as u32);
        }
        Big(out).trim()
    }

    fn to_u128(&self) -> u128 {
        self.0
            .iter()
            .rev()
            .fold(0u128, |acc, &x| (acc << 32) | x as u128)
    }

    fn to_decimal(&self) -> String {
        if self.is_zero() {
            return "0".into();
        }
        let mut chunks = Vec::new();
        let mut cur = self.0.clone();
        while !cur.is_empty() {
            let mut rem = 0u64;
            for x in cur.iter_mut().rev() {
                let v = (rem << 32) | *x as u64;
                *x = (v / 1_000_000_000) as u32;
                rem = v % 1_000_000_000;
            }
            chunks.push(rem as u32);
            while cur.last() == Some(&0) {
                cur.pop();
            }
        }
        let mut s = chunks.pop().map(|c| c.to_string()).unwrap_or_default();
        for c in chunks.iter().rev() {
            s.push_str(&format!("{c:09}"));
        }
        s
    }
}

/// Rounds `(n + sticky) * 2^e` (sticky: a nonzero amount below n's last bit) to the nearest
/// long double, ties to even, subnormals included.
fn round(neg: bool, n: &Big, e: i64, sticky: bool) -> Result<LongDouble, NotFinite> {
    let len = n.bit_len();
    if len == 0 {
        return Ok(LongDouble {
            neg,
            mant: 0,
            exp: 0,
        });
    }
    let mut shift = len - 64;
    if e + shift < MIN_EXP {
        shift = MIN_EXP - e;
    }
    let (mut q, mut exp) = if shift <= 0 {
        (n.shl(-shift).to_u128(), e + shift)
    } else {
        let mut q = n.shr(shift).to_u128();
        let half = n.bit(shift - 1);
        let lower = sticky || n.any_below(shift - 1);
        if half && (lower || q & 1 == 1) {
            q += 1;
        }
        (q, e + shift)
    };
    if q >> 64 != 0 {
        q >>= 1;
        exp += 1;
    }
    if q == 0 {
        return Ok(LongDouble {
            neg,
            mant: 0,
            exp: 0,
        });
    }
    let bits = 128 - q.leading_zeros() as i64;
    if bits + exp > MAX_BITS {
        return Err(NotFinite::Inf);
    }
    Ok(LongDouble {
        neg,
        mant: q as u64,
        exp,
    })
}

impl LongDouble {
    /// True for +0 and -0.
    pub fn is_zero(&self) -> bool {
        self.mant == 0
    }

    /// Parses like Redis's `string2ld`: strtold over the whole string, no leading space,
    /// NaN refused, overflow and underflow to zero refused; `inf` gives `Err(Inf)`.
    pub fn parse(s: &[u8]) -> Result<LongDouble, NotFinite> {
        if s.is_empty() || s.len() >= 5 * 1024 {
            return Err(NotFinite::Invalid);
        }
        let (neg, body) = match s[0] {
            b'-' => (true, &s[1..]),
            b'+' => (false, &s[1..]),
            _ => (false, s),
        };
        let lower = body.to_ascii_lowercase();
        if lower == b"inf" || lower == b"infinity" {
            return Err(NotFinite::Inf);
        }
        let mut digits = Big::default();
        let mut ndigits = 0i64; // significant digits taken (after leading zeros)
        let mut frac = 0i64;
        let mut seen_digit = false;
        let mut seen_dot = false;
        let mut i = 0;
        while i < body.len() {
            match body[i] {
                c @ b'0'..=b'9' => {
                    seen_digit = true;
                    if seen_dot {
                        frac += 1;
                    }
                    if ndigits > 0 || c != b'0' {
                        ndigits += 1;
                        digits = digits.mul_add_small(10, (c - b'0') as u32);
                    }
                }
                b'.' if !seen_dot => seen_dot = true,
                _ => break,
            }
            i += 1;
        }
        if !seen_digit {
            return Err(NotFinite::Invalid);
        }
        let mut exp10 = 0i64;
        if i < body.len() && (body[i] == b'e' || body[i] == b'E') {
            let mut j = i + 1;
            let eneg = match body.get(j) {
                Some(b'-') => {
                    j += 1;
                    true
                }
                Some(b'+') => {
                    j += 1;
                    false
                }
                _ => false,
            };
            let start = j;
            while j < body.len() && body[j].is_ascii_digit() {
                exp10 = (exp10 * 10 + (body[j] - b'0') as i64).min(1_000_000_000);
                j += 1;
            }
            if j == start {
                return Err(NotFinite::Invalid); // strtold stops before the `e`: trailing junk
            }
            if eneg {
                exp10 = -exp10;
            }
            i = j;
        }
        if i != body.len() {
            return Err(NotFinite::Invalid);
        }
        if digits.is_zero() {
            return Ok(LongDouble {
                neg,
                mant: 0,
                exp: 0,
            });
        }
        let e = exp10 - frac;
        // Magnitude is in [10^(ndigits+e-1), 10^(ndigits+e)).
        if ndigits + e > 4934 {
            return Err(NotFinite::Invalid); // ERANGE with HUGE_VAL
        }
        if ndigits + e < -4952 {
            return Err(NotFinite::Invalid); // ERANGE with zero
        }
        let v = if e >= 0 {
            round(neg, &digits.mul(&Big::pow10(e as usize)), 0, false)
        } else {
            let mut den = Big::pow10((-e) as usize);
            let k = 67 + den.bit_len() - digits.bit_len();
            let mut num = digits;
            if k >= 0 {
                num = num.shl(k);
            } else {
                den = den.shl(-k);
            }
            let mut q = 0u128;
            for i in (0..70).rev() {
                let t = den.shl(i);
                if num.cmp(&t) != Ordering::Less {
                    num = num.sub(&t);
                    q |= 1u128 << i;
                }
            }
            round(neg, &Big::from_u128(q), -k, !num.is_zero())
        };
        match v {
            Err(_) => Err(NotFinite::Invalid),
            Ok(v) if v.is_zero() => Err(NotFinite::Invalid),
            Ok(v) => Ok(v),
        }
    }

    /// The correctly rounded sum (round to nearest, ties to even); `Err(Inf)` on overflow.
    pub fn checked_add(self, o: LongDouble) -> Result<LongDouble, NotFinite> {
        if o.is_zero() {
            return Ok(if self.is_zero() {
                LongDouble {
                    neg: self.neg && o.neg,
                    ..self
                }
            } else {
                self
            });
        }
        if self.is_zero() {
            return Ok(o);
        }
        let emin = self.exp.min(o.exp);
        let a = Big::from_u128(self.mant as u128).shl(self.exp - emin);
        let b = Big::from_u128(o.mant as u128).shl(o.exp - emin);
        if self.neg == o.neg {
            return round(self.neg, &a.add(&b), emin, false);
        }
        match a.cmp(&b) {
            Ordering::Equal => Ok(LongDouble {
                neg: false,
                mant: 0,
                exp: 0,
            }),
            Ordering::Greater => round(self.neg, &a.sub(&b), emin, false),
            Ordering::Less => round(o.neg, &b.sub(&a), emin, false),
        }
    }

    /// glibc's `%.17Lf` with trailing fractional zeros (and a bare point) removed, and
    /// `-0` written `0`: Redis's `ld2string(.., LD_STR_HUMAN)`.
    pub fn to_human(self) -> String {
        let digits = if self.exp >= 0 {
            let mut s = Big::from_u128(self.mant as u128).shl(self.exp).to_decimal();
            s.push_str("00000000000000000");
            s
        } else {
            let n = Big::from_u128(self.mant as u128).mul(&Big::pow10(17));
            let s = -self.exp;
            let mut q = n.shr(s);
            if n.bit(s - 1) && (n.any_below(s - 1) || q.bit(0)) {
                q = q.add(&Big::from_u128(1));
            }
            q.to_decimal()
        };
        let digits = format!("{digits:0>18}");
        let (int, frac) = digits.split_at(digits.len() - 17);
        let frac = frac.trim_end_matches('0');
        let body = if frac.is_empty() {
            int.to_string()
        } else {
            format!("{int}.{frac}")
        };
        if self.neg && body != "0" {
            format!("-{body}")
        } else {
            body
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ld(s: &str) -> LongDouble {
        LongDouble::parse(s.as_bytes()).unwrap()
    }

    fn sum(a: &str, b: &str) -> String {
        ld(a).checked_add(ld(b)).unwrap().to_human()
    }

    // Expected strings are redis-server 7.0.15's replies to HSET h f A, HINCRBYFLOAT h f B.
    #[test]
    fn matches_redis_long_double_output() {
        assert_eq!(sum("0", "12345.1"), "12345.09999999999999964");
        assert_eq!(
            sum("12345.09999999999999964", "0.1"),
            "12345.19999999999999929"
        );
        assert_eq!(sum("10.50", "0.1"), "10.6");
        assert_eq!(sum("0.1", "0.2"), "0.3");
        assert_eq!(sum("5.0e3", "2.0e2"), "5200");
        assert_eq!(sum("1", "-1"), "0");
        assert_eq!(sum("-1e-30", "0"), "0");
        assert_eq!(sum("0", "1e20"), "100000000000000000000");
        assert_eq!(
            sum("100000000000000000000", "12344"),
            "100000000000000012344"
        );
        assert_eq!(sum("3", "-5.5"), "-2.5");
    }

    #[test]
    fn parse_refusals() {
        for bad in [
            "", " 1", "1 ", "abc", "nan", "1e", "1e+", "--1", ".", "1e5000", "1e-5000",
        ] {
            assert!(LongDouble::parse(bad.as_bytes()).is_err(), "{bad}");
        }
        assert_eq!(LongDouble::parse(b"-inf"), Err(NotFinite::Inf));
        assert!(LongDouble::parse(b"1.").is_ok());
        assert!(LongDouble::parse(b".5").is_ok());
        assert!(LongDouble::parse(b"0e99999").is_ok());
        assert!(LongDouble::parse(b"1e4000").is_ok());
    }

    #[test]
    fn overflow_is_infinite() {
        let big = ld("1.1e4932");
        assert_eq!(big.checked_add(big), Err(NotFinite::Inf));
    }
}
