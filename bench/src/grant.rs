//! The contention workload's correctness check: every grant a client saw (key, fencing token,
//! when the grant reply arrived, when the release was sent), and what their order says.
//!
//! All times come from one monotonic clock in one process. A lock is exclusive, so if client
//! A held key K before client B and released it with UNLOCK, A's grant reply arrived before
//! A sent its release, and B's grant (hence B's reply) came after that release was applied.
//! Sorted by the time the grant replies arrived, a key's grants must therefore show rising
//! tokens, and each grant must arrive after the previous holder sent its release. A lease
//! that *expired* proves less: the next grant needs no release, so a slow reply to the
//! expired holder may arrive after the next holder's, with the lower token; such a pair is not
//! counted. And as every command gets its own revision, no token may be granted on two keys.

use serde::Serialize;

/// One grant as a client saw it.
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The hot key's number.
    pub key: usize,
    /// The client's number.
    pub client: usize,
    /// The fencing token LOCK replied.
    pub token: u64,
    /// When the grant reply arrived, in ns since the run started.
    pub granted_ns: u64,
    /// When the UNLOCK was sent, in ns since the run started; None if the UNLOCK did not
    /// release (the lease had expired, or an error), so the lock may have stayed held until
    /// its lease ran out and the next grant is not checked against it.
    pub released_ns: Option<u64>,
}

/// What is wrong with a grant, compared with the grant of the same key just before it.
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Problem {
    /// Its token is not higher than the previous grant's.
    TokenNotIncreasing,
    /// It arrived before the previous holder had sent its release: two holders at once.
    Overlap,
    /// Another key was granted with the same token. Every command gets its own revision, and
    /// a grant's token is one, so tokens are unique across keys too.
    SharedToken,
}

/// A grant that breaks the rules, with the grant before it on the same key.
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Violation {
    /// Which rule it breaks.
    pub problem: Problem,
    /// The grant just before it on the same key.
    pub previous: Grant,
    /// The grant itself.
    pub grant: Grant,
}

/// The outcome of [`check`].
#[derive(Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Check {
    /// Grants checked.
    pub grants: usize,
    /// Grants whose token was not higher than the one before on the same key.
    pub token_violations: u64,
    /// Grants that arrived before the previous holder of the key sent its release.
    pub overlaps: u64,
    /// Grants whose token another key's grant had too.
    pub shared_tokens: u64,
    /// The first few violations, for the report.
    pub first: Vec<Violation>,
}

/// How many violations [`Check::first`] keeps.
const KEEP: usize = 10;

/// Checks `grants` (of all keys and clients, in any order; sorted in place): the order on
/// each key, and that no token was granted on two keys.
pub fn check(grants: &mut [Grant]) -> Check {
    let mut out = check_order(grants);
    grants.sort_by_key(|g| (g.token, g.key, g.granted_ns));
    for pair in grants.windows(2) {
        let (previous, grant) = (pair[0], pair[1]);
        if previous.token == grant.token && previous.key != grant.key {
            out.shared_tokens += 1;
            out.keep(Problem::SharedToken, previous, grant);
        }
    }
    out
}

impl Check {
    fn keep(&mut self, problem: Problem, previous: Grant, grant: Grant) {
        if self.first.len() < KEEP {
            self.first.push(Violation {
                problem,
                previous,
                grant,
            });
        }
    }
}

/// The order of each key's grants (sorts `grants` by key and time).
fn check_order(grants: &mut [Grant]) -> Check {
    grants.sort_by_key(|g| (g.key, g.granted_ns, g.client));
    let mut out = Check {
        grants: grants.len(),
        ..Check::default()
    };
    for pair in grants.windows(2) {
        let (previous, grant) = (pair[0], pair[1]);
        if previous.key != grant.key {
            continue;
        }
        // A lower token seen later was granted earlier: fine only if its lease ran out (its
        // holder then had no release to send before the next grant). The same token twice is
        // never fine: every cycle has its own owner.
        let late = grant.token < previous.token && grant.released_ns.is_none();
        if grant.token <= previous.token && !late {
            out.token_violations += 1;
            out.keep(Problem::TokenNotIncreasing, previous, grant);
        }
        let before_release = previous.released_ns.is_some_and(|r| grant.granted_ns < r);
        if grant.token > previous.token && before_release {
            out.overlaps += 1;
            out.keep(Problem::Overlap, previous, grant);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(key: usize, client: usize, token: u64, granted_ns: u64, released_ns: u64) -> Grant {
        Grant {
            key,
            client,
            token,
            granted_ns,
            released_ns: Some(released_ns),
        }
    }

    #[test]
    fn ordered_grants_on_each_key_pass_in_any_input_order() {
        let mut grants = vec![
            g(1, 3, 12, 250, 300),
            g(0, 1, 10, 100, 150),
            g(0, 2, 11, 200, 260),
            g(1, 4, 7, 50, 90),
            // The keys' tokens interleave: only the order within a key counts.
            g(0, 1, 40, 270, 280),
        ];
        let c = check(&mut grants);
        assert_eq!(
            c,
            Check {
                grants: 5,
                ..Check::default()
            }
        );
    }

    #[test]
    fn a_token_that_does_not_increase_is_counted_and_kept() {
        let mut grants = vec![
            g(0, 1, 10, 100, 150),
            g(0, 2, 10, 200, 250),
            g(0, 3, 9, 300, 350),
        ];
        let c = check(&mut grants);
        assert_eq!((c.token_violations, c.overlaps), (2, 0));
        assert_eq!(c.first.len(), 2);
        assert_eq!(c.first[0].problem, Problem::TokenNotIncreasing);
        assert_eq!(
            (c.first[0].previous.client, c.first[0].grant.client),
            (1, 2)
        );
    }

    #[test]
    fn a_grant_before_the_previous_release_is_an_overlap() {
        let mut grants = vec![g(0, 1, 10, 100, 300), g(0, 2, 11, 200, 400)];
        let c = check(&mut grants);
        assert_eq!((c.token_violations, c.overlaps), (0, 1));
        assert_eq!(c.first[0].problem, Problem::Overlap);
        // After a release that did not release (lease expired), no overlap can be told.
        let mut grants = vec![
            Grant {
                released_ns: None,
                ..g(0, 1, 10, 100, 0)
            },
            g(0, 2, 11, 200, 400),
        ];
        assert_eq!(check(&mut grants).overlaps, 0);
    }

    #[test]
    fn a_late_reply_to_a_holder_whose_lease_expired_is_no_violation() {
        let expired = |client, token, at| Grant {
            released_ns: None,
            ..g(0, client, token, at, 0)
        };
        // Token 10's holder hears of its grant only after its lease ran out and token 11 went
        // to the next client, who has already seen it.
        let mut grants = vec![g(0, 2, 11, 100, 150), expired(1, 10, 120)];
        assert_eq!(
            check(&mut grants),
            Check {
                grants: 2,
                ..Check::default()
            }
        );
        // Had token 10's holder released it with UNLOCK, token 11 could not have come first.
        let mut grants = vec![g(0, 2, 11, 100, 150), g(0, 1, 10, 120, 130)];
        assert_eq!(check(&mut grants).token_violations, 1);
        // The same token on one key twice is always wrong.
        let mut grants = vec![g(0, 2, 11, 100, 150), expired(1, 11, 120)];
        assert_eq!(check(&mut grants).token_violations, 1);
    }

    #[test]
    fn a_token_granted_on_two_keys_is_counted() {
        let mut grants = vec![
            g(0, 1, 10, 100, 150),
            g(1, 2, 10, 120, 130),
            g(1, 3, 11, 200, 250),
        ];
        let c = check(&mut grants);
        assert_eq!((c.token_violations, c.overlaps, c.shared_tokens), (0, 0, 1));
        assert_eq!(c.first[0].problem, Problem::SharedToken);
        assert_eq!((c.first[0].previous.key, c.first[0].grant.key), (0, 1));
    }

    #[test]
    fn only_the_first_violations_are_kept() {
        let mut grants: Vec<Grant> = (0..30)
            .map(|i| g(0, i, 5, i as u64 * 10, i as u64 * 10 + 5))
            .collect();
        let c = check(&mut grants);
        assert_eq!(c.token_violations, 29);
        assert_eq!(c.first.len(), KEEP);
    }
}
