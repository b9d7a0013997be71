//! How evenly a contention run shared its locks: the spread of grants per client.

use serde::Serialize;

/// Figures of the grants per client of one run.
#[derive(Serialize, Clone, Debug, Default, PartialEq)]
pub struct Fairness {
    /// Fewest grants any client got.
    pub min: u64,
    /// Most grants any client got.
    pub max: u64,
    /// Mean grants per client.
    pub mean: f64,
    /// Coefficient of variation: the (population) standard deviation over the mean; 0 is
    /// perfectly even. None when no client got a grant.
    pub cv: Option<f64>,
    /// Jain's fairness index, (Σx)² / (n·Σx²): 1 when every client got the same, 1/n when
    /// one client got everything. None when no client got a grant.
    pub jain: Option<f64>,
}

impl Fairness {
    /// The figures of `grants`, one count per client.
    pub fn of(grants: &[u64]) -> Fairness {
        let n = grants.len() as f64;
        let sum: f64 = grants.iter().map(|&g| g as f64).sum();
        let squares: f64 = grants.iter().map(|&g| (g as f64).powi(2)).sum();
        let mean = if grants.is_empty() { 0.0 } else { sum / n };
        let any = sum > 0.0;
        let variance = if any { squares / n - mean * mean } else { 0.0 };
        Fairness {
            min: grants.iter().copied().min().unwrap_or(0),
            max: grants.iter().copied().max().unwrap_or(0),
            mean,
            cv: any.then(|| variance.max(0.0).sqrt() / mean),
            jain: any.then(|| sum * sum / (n * squares)),
        }
    }
}

/// The mean of the `grants` whose `roles` entry is `role` (None if no client has it).
pub fn mean_of_role(grants: &[u64], roles: &[String], role: &str) -> Option<f64> {
    let mine: Vec<f64> = grants
        .iter()
        .zip(roles)
        .filter(|(_, r)| r.as_str() == role)
        .map(|(&g, _)| g as f64)
        .collect();
    (!mine.is_empty()).then(|| mine.iter().sum::<f64>() / mine.len() as f64)
}

/// The lowest Jain's index among the groups of clients that share a key (`keys[i]` is
/// client i's key): how evenly the worst key was shared among its own contenders, apart from
/// how busy each key was. None if no key had a grant.
pub fn worst_key_jain(grants: &[u64], keys: &[usize]) -> Option<f64> {
    let mut groups: Vec<Vec<u64>> = Vec::new();
    for (&g, &k) in grants.iter().zip(keys) {
        if groups.len() <= k {
            groups.resize(k + 1, Vec::new());
        }
        groups[k].push(g);
    }
    groups
        .iter()
        .filter_map(|g| Fairness::of(g).jain)
        .min_by(|a, b| a.total_cmp(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-9)
    }

    #[test]
    fn equal_shares_are_perfectly_fair() {
        let f = Fairness::of(&[5, 5, 5, 5]);
        assert_eq!((f.min, f.max, f.mean), (5, 5, 5.0));
        assert!(close(f.cv, 0.0) && close(f.jain, 1.0), "{f:?}");
    }

    #[test]
    fn one_client_taking_everything_scores_one_over_n() {
        let f = Fairness::of(&[0, 0, 0, 12]);
        assert_eq!((f.min, f.max, f.mean), (0, 12, 3.0));
        assert!(close(f.jain, 0.25), "{f:?}");
        // Standard deviation sqrt(36 - 9) over the mean 3.
        assert!(close(f.cv, 27f64.sqrt() / 3.0), "{f:?}");
    }

    #[test]
    fn uneven_shares_fall_in_between() {
        let f = Fairness::of(&[1, 2, 3]);
        // 36 / (3 * 14)
        assert!(close(f.jain, 36.0 / 42.0), "{f:?}");
        assert!(close(f.cv, (14.0 / 3.0 - 4.0f64).sqrt() / 2.0), "{f:?}");
    }

    #[test]
    fn no_grants_have_no_index() {
        assert_eq!(
            Fairness::of(&[0, 0]),
            Fairness {
                cv: None,
                jain: None,
                ..Fairness::default()
            }
        );
        assert_eq!(Fairness::of(&[]), Fairness::default());
    }

    #[test]
    fn the_worst_key_is_judged_among_its_own_contenders() {
        // Key 0 shared evenly (10, 10), key 1 not at all (0, 6); key 1's index is 1/2.
        let keys = [0, 1, 0, 1];
        assert!(close(worst_key_jain(&[10, 0, 10, 6], &keys), 0.5));
        // Two keys, each even, but one busier than the other: every key is fair.
        assert!(close(worst_key_jain(&[10, 3, 10, 3], &keys), 1.0));
        assert_eq!(worst_key_jain(&[0, 0], &[0, 1]), None);
    }

    #[test]
    fn role_means_average_the_clients_of_that_role() {
        let roles: Vec<String> = ["leader", "follower", "follower"]
            .map(String::from)
            .to_vec();
        assert_eq!(mean_of_role(&[10, 2, 4], &roles, "leader"), Some(10.0));
        assert_eq!(mean_of_role(&[10, 2, 4], &roles, "follower"), Some(3.0));
        assert_eq!(mean_of_role(&[10, 2, 4], &roles, "learner"), None);
    }
}
