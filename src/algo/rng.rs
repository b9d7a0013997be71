//! SplitMix64, the one PRNG behind every draw (SPOP, SRANDMEMBER, HRANDFIELD, ZRANDMEMBER,
//! RANDOMKEY and the per-read salt of `cmd::draw`).
//!
//! Inside the log a draw is replicated state: every replica must draw the same members, so
//! the generator is fixed here and its outputs are pinned by the golden tests below. The
//! callers seed it differently (each documents its own seed) and reduce its output to an
//! index in one of two ways, [`SplitMix64::below`] or [`SplitMix64::below_mod`]; both are
//! kept because each is already the behaviour of an existing log entry type.

/// The golden-ratio increment of SplitMix64's state.
pub const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's output function: the finaliser applied to a state.
pub fn mix(state: u64) -> u64 {
    let mut z = state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A SplitMix64 generator (Steele, Lea and Flood), from its raw state.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator whose state is `state` (the first output is `mix(state + GOLDEN)`).
    pub fn new(state: u64) -> SplitMix64 {
        SplitMix64(state)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GOLDEN);
        mix(self.0)
    }

    /// A uniform index below `n` (`n` > 0) by multiply-shift: never a modulo of 0.
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }

    /// An index below `n` (`n` > 0) by modulo: the variant ZRANDMEMBER and RANDOMKEY use.
    pub fn below_mod(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// `k` distinct indexes below `n` (`k` <= `n`), in draw order (a partial Fisher-Yates
    /// over a sparse permutation, so O(k) whatever `n` is), drawn with [`Self::below`].
    pub fn distinct(&mut self, n: usize, k: usize) -> Vec<usize> {
        let mut swapped = std::collections::BTreeMap::new();
        let mut out = Vec::with_capacity(k);
        for i in 0..k.min(n) {
            let j = i + self.below(n - i);
            let at_j = *swapped.get(&j).unwrap_or(&j);
            let at_i = *swapped.get(&i).unwrap_or(&i);
            swapped.insert(j, at_i);
            out.push(at_j);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The outputs every replica depends on, recorded from the four generators this one
    /// replaced (sets::Draw, hash_ext::Rng, zset::Rng, keyinfo::splitmix64) before the move.
    #[test]
    fn golden_outputs_are_pinned() {
        // The reference SplitMix64 sequence from state 0.
        let mut g = SplitMix64::new(0);
        assert_eq!(g.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(g.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(
            [0u64, 1, 42].map(|s| SplitMix64::new(s).next_u64()),
            [
                16294208416658607535,
                10451216379200822465,
                13679457532755275413
            ]
        );
        let mut g = SplitMix64::new(42 ^ 0x5EED_5E75_0000_0000);
        let a: Vec<u64> = (0..3).map(|_| g.next_u64()).collect();
        assert_eq!(
            a,
            [
                6895000943407385458,
                12428064316390172324,
                12959499597084341105
            ]
        );
        let mut g = SplitMix64::new(7 ^ 0x5EED_5E75_0000_0000);
        let b: Vec<usize> = (0..5).map(|_| g.below(1000)).collect();
        assert_eq!(b, [238, 848, 270, 224, 105]);
        let mut g = SplitMix64::new(7 ^ 0x5EED_5E75_0000_0000);
        assert_eq!(g.distinct(10, 4), [2, 8, 4, 0]);
        let mut g = SplitMix64::new(42 ^ GOLDEN);
        let c: Vec<usize> = (0..5).map(|_| g.below_mod(1000)).collect();
        assert_eq!(c, [291, 858, 764, 250, 62]);
        let mut g = SplitMix64::new(7 ^ GOLDEN);
        let d: Vec<usize> = (0..3).map(|_| g.below_mod(usize::MAX)).collect();
        assert_eq!(
            d,
            [
                17039259473404265729,
                18363971414914884509,
                8043341295829897994
            ]
        );
    }

    #[test]
    fn mix_of_n_golden_is_the_nth_output() {
        let mut g = SplitMix64::new(0);
        for n in 1..=5u64 {
            assert_eq!(g.next_u64(), mix(n.wrapping_mul(GOLDEN)));
        }
    }

    #[test]
    fn distinct_draws_are_distinct_and_in_range() {
        for (n, k) in [(1, 1), (5, 5), (100, 7), (1_000_000, 50)] {
            let a = SplitMix64::new(9).distinct(n, k);
            assert_eq!(a, SplitMix64::new(9).distinct(n, k));
            assert_eq!(a.len(), k);
            let set: std::collections::BTreeSet<_> = a.iter().collect();
            assert_eq!(set.len(), k);
            assert!(a.iter().all(|&i| i < n));
        }
    }
}
