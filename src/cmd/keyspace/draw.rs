//! The seed of the random replies: RANDOMKEY, SRANDMEMBER, HRANDFIELD, ZRANDMEMBER.
//!
//! Inside the log (a script, SPOP, a transaction) a draw must be the same on every replica,
//! so it is seeded with the keyspace's revision alone. A client's own read is served by one
//! node and replicates nothing, so it may differ from one call to the next, as Redis's does:
//! the read path runs it inside [`fresh`], which mixes a per-call salt into the seed. Without
//! it, a hundred HRANDFIELD calls between two writes all answered the same field.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::algo::rng;
use crate::state::Keyspace;

thread_local! {
    /// The salt of the read running on this thread; 0 (none) outside [`fresh`].
    static SALT: Cell<u64> = const { Cell::new(0) };
}

/// Counts the reads run inside [`fresh`].
static CALLS: AtomicU64 = AtomicU64::new(0);

/// The seed for a draw from `ks`: its revision, salted inside [`fresh`].
pub fn seed(ks: &Keyspace) -> u64 {
    ks.revision() ^ SALT.with(Cell::get)
}

/// Runs `f` (a client's read, outside the log) with a salt of its own, so that its draws
/// differ from those of the reads before it.
pub fn fresh<R>(f: impl FnOnce() -> R) -> R {
    let n = CALLS.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
    // The n-th SplitMix64 output from state 0 (n the call number): well-spread bits, never 0 for the calls that happen.
    let salt = rng::mix(n.wrapping_mul(rng::GOLDEN)) | 1;
    let before = SALT.with(|s| s.replace(salt));
    let out = f();
    SALT.with(|s| s.set(before));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_are_fixed_in_the_log_and_fresh_for_a_read() {
        let ks = Keyspace::default();
        assert_eq!(seed(&ks), seed(&ks));
        assert_eq!(seed(&ks), ks.revision());
        let a = fresh(|| seed(&ks));
        let b = fresh(|| seed(&ks));
        assert_ne!(a, b);
        assert_eq!(seed(&ks), ks.revision(), "the salt is gone after the read");
    }

    /// The draws inside the log, pinned: a log gives these members on every replica and in
    /// every build (recorded from the generators before they moved into `algo::rng`).
    #[test]
    fn replicated_draws_are_pinned() {
        let mut ks = Keyspace::default();
        let mut run = |l: &str| format!("{:?}", crate::cmd::run_line(&mut ks, l, 1));
        run("SADD s a b c d e f g h i j");
        run("HSET h a 1 b 2 c 3 d 4 e 5");
        run("ZADD z 1 a 2 b 3 c 4 d 5 e");
        let got = [
            "SPOP s 3",
            "SRANDMEMBER s -4",
            "SRANDMEMBER s 2",
            "SRANDMEMBER s",
            "HRANDFIELD h -4",
            "HRANDFIELD h 2",
            "HRANDFIELD h",
            "ZRANDMEMBER z -4",
            "ZRANDMEMBER z 2",
            "ZRANDMEMBER z",
            "RANDOMKEY",
            "SPOP s",
        ]
        .map(run);
        let want = [
            r#"Set([Bulk(b"a"), Bulk(b"c"), Bulk(b"f")])"#,
            r#"Array([Bulk(b"d"), Bulk(b"h"), Bulk(b"g"), Bulk(b"d")])"#,
            r#"Array([Bulk(b"i"), Bulk(b"g")])"#,
            r#"Bulk(b"b")"#,
            r#"Array([Bulk(b"e"), Bulk(b"a"), Bulk(b"e"), Bulk(b"c")])"#,
            r#"Array([Bulk(b"d"), Bulk(b"e")])"#,
            r#"Bulk(b"b")"#,
            r#"Array([Bulk(b"b"), Bulk(b"d"), Bulk(b"e"), Bulk(b"b")])"#,
            r#"Array([Bulk(b"e"), Bulk(b"a")])"#,
            r#"Bulk(b"b")"#,
            r#"Bulk(b"z")"#,
            r#"Bulk(b"h")"#,
        ];
        assert_eq!(got, want);
    }
}
