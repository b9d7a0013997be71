//! The contention workload's tables: speed, fairness and correctness, one row per timed run
//! of a method.

use crate::contention::MethodResult;
use crate::grant::Problem;

fn opt(x: Option<f64>, decimals: usize) -> String {
    x.map_or_else(|| "-".into(), |x| format!("{x:.decimals$}"))
}

fn ms(us: u64) -> String {
    format!("{:.2}", us as f64 / 1000.0)
}

/// `n / cycles`, if `n` is known and there were cycles.
fn per_cycle(n: Option<u64>, cycles: u64) -> Option<f64> {
    n.filter(|_| cycles > 0).map(|n| n as f64 / cycles as f64)
}

/// The first columns of every table.
fn head(r: &MethodResult) -> String {
    format!("{:<6} {:>7} {:>5}", r.method.name(), r.clients, r.round)
}

const HEAD: &str = "method clients round";

/// Throughput, acquire latency, and what a cycle costs: LOCK commands sent (client side),
/// replicated commands and log entries on the leader, CPU of all nodes.
pub fn speed_table(rows: &[MethodResult]) -> String {
    let mut out = format!(
        "{HEAD} {:>9} {:>9} {:>9} {:>9} {:>11} {:>11} {:>13} {:>10} {:>8} {:>6}\n",
        "cycles/s",
        "acq p50",
        "acq p99",
        "acq max",
        "LOCKs sent",
        "log cmds",
        "log entries",
        "cpu ms",
        "timeouts",
        "errors"
    );
    out.push_str(&format!(
        "{:20} {:>9} {:>9} {:>9} {:>9} {:>11} {:>11} {:>13} {:>10}\n",
        "", "", "ms", "ms", "ms", "/cycle", "/cycle", "/cycle", "/1k cycles"
    ));
    for r in rows {
        let s = &r.server;
        out.push_str(&format!(
            "{} {:>9.0} {:>9} {:>9} {:>9} {:>11} {:>11} {:>13} {:>10} {:>8} {:>6}\n",
            head(r),
            r.cycles_per_sec,
            ms(r.acquire_p50_us),
            ms(r.acquire_p99_us),
            ms(r.acquire_max_us),
            opt(per_cycle(Some(r.lock_commands), r.cycles), 2),
            opt(per_cycle(s.leader_commands, r.cycles), 2),
            opt(per_cycle(s.leader_entries, r.cycles), 2),
            opt(
                s.cpu_ms
                    .filter(|_| r.cycles > 0)
                    .map(|c| c * 1000.0 / r.cycles as f64),
                1
            ),
            r.timeouts,
            r.errors
        ));
    }
    out
}

/// Grants per client in the timed window: min, mean, max, coefficient of variation, Jain's
/// index over all clients and among the contenders of the worst-shared key, and the mean of
/// the clients on the leader and on followers.
pub fn fairness_table(rows: &[MethodResult]) -> String {
    let mut out = format!(
        "{HEAD} {:>7} {:>9} {:>7} {:>6} {:>6} {:>14} {:>12} {:>14}\n",
        "min", "mean", "max", "CV", "Jain", "Jain worst key", "leader mean", "follower mean"
    );
    for r in rows {
        let f = &r.fairness;
        out.push_str(&format!(
            "{} {:>7} {:>9.1} {:>7} {:>6} {:>6} {:>14} {:>12} {:>14}\n",
            head(r),
            f.min,
            f.mean,
            f.max,
            opt(f.cv, 2),
            opt(f.jain, 3),
            opt(r.key_jain_min, 3),
            opt(r.leader_mean, 1),
            opt(r.follower_mean, 1)
        ));
    }
    out
}

/// Per run: grants checked, tokens that did not increase, overlapping holders, tokens
/// granted on two keys, FENCEDSETs refused while held, releases that found the lease gone;
/// then the first violations themselves.
pub fn correctness_table(rows: &[MethodResult]) -> String {
    let mut out = format!(
        "{HEAD} {:>8} {:>13} {:>9} {:>13} {:>7} {:>5}\n",
        "grants", "token order", "overlaps", "shared tokens", "fenced", "lost"
    );
    for r in rows {
        let c = &r.check;
        out.push_str(&format!(
            "{} {:>8} {:>13} {:>9} {:>13} {:>7} {:>5}\n",
            head(r),
            c.grants,
            c.token_violations,
            c.overlaps,
            c.shared_tokens,
            r.fenced,
            r.lost
        ));
    }
    for r in rows {
        for v in &r.check.first {
            let what = match v.problem {
                Problem::TokenNotIncreasing => "token not above the previous grant's",
                Problem::Overlap => "granted before the previous holder released",
                Problem::SharedToken => "the same token as a grant on another key",
            };
            out.push_str(&format!(
                "VIOLATION {} round {} key {}: client {} token {} at {} ns: {what} (client {} token {} at {} ns, released at {})\n",
                r.method.name(),
                r.round,
                v.grant.key,
                v.grant.client,
                v.grant.token,
                v.grant.granted_ns,
                v.previous.client,
                v.previous.token,
                v.previous.granted_ns,
                v.previous.released_ns.map_or_else(|| "-".into(), |n| n.to_string())
            ));
        }
    }
    out
}

/// The three tables, with their captions.
pub fn tables(rows: &[MethodResult]) -> String {
    format!(
        "\nspeed (timed window; acquire = first LOCK sent to grant reply; log figures from the leader's INFO, cpu from all nodes' /proc):\n{}\
         \nfairness (grants per client in the timed window):\n{}\
         \ncorrectness (every grant of the run, warm-up included; all must be 0 but grants and lost):\n{}",
        speed_table(rows),
        fairness_table(rows),
        correctness_table(rows)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contention::Method;
    use crate::fairness::Fairness;
    use crate::grant::{Check, Grant, Violation};
    use crate::stats::RunStats;

    fn row(method: Method) -> MethodResult {
        let grants = vec![10, 30];
        MethodResult {
            target: "p".into(),
            method,
            clients: 2,
            round: 1,
            seconds: 2.0,
            cycles: 40,
            cycles_per_sec: 20.0,
            acquire_p50_us: 1500,
            acquire_p99_us: 9000,
            acquire_max_us: 12_345,
            lock_commands: 100,
            timeouts: 1,
            errors: 0,
            fenced: 0,
            lost: 0,
            fairness: Fairness::of(&grants),
            grants_per_client: grants,
            client_nodes: vec!["127.0.0.1:1".into(), "127.0.0.1:2".into()],
            client_roles: vec!["leader".into(), "follower".into()],
            key_jain_min: Some(0.8),
            leader_mean: Some(10.0),
            follower_mean: Some(30.0),
            check: Check::default(),
            server: RunStats {
                leader_commands: Some(160),
                leader_entries: Some(80),
                cpu_ms: Some(400.0),
                ..RunStats::default()
            },
        }
    }

    fn words(line: &str) -> Vec<&str> {
        line.split_whitespace().collect()
    }

    #[test]
    fn speed_rows_divide_the_counters_by_the_cycles() {
        let text = speed_table(&[row(Method::Poll), row(Method::Queue)]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            words(lines[2]),
            [
                "poll", "2", "1", "20", "1.50", "9.00", "12.35", "2.50", "4.00", "2.00", "10000.0",
                "1", "0"
            ]
        );
        assert_eq!(words(lines[3])[0], "queue");
        assert!(
            lines[2..].iter().all(|l| l.len() == lines[0].len()),
            "{text}"
        );
        // A target without Raft counters shows dashes.
        let mut bare = row(Method::Poll);
        bare.server = RunStats::default();
        let text = speed_table(&[bare]);
        assert_eq!(words(text.lines().nth(2).unwrap())[8..11], ["-", "-", "-"]);
    }

    #[test]
    fn fairness_rows_show_the_spread() {
        let text = fairness_table(&[row(Method::Queue)]);
        let lines: Vec<&str> = text.lines().collect();
        // Grants 10 and 30: mean 20, CV 10/20, Jain 1600 / (2 * 1000).
        assert_eq!(
            words(lines[1]),
            ["queue", "2", "1", "10", "20.0", "30", "0.50", "0.800", "0.800", "10.0", "30.0"]
        );
        assert_eq!(lines[1].len(), lines[0].len());
    }

    #[test]
    fn violations_are_listed_under_the_correctness_table() {
        let mut r = row(Method::Poll);
        let g = |client, token, at| Grant {
            key: 0,
            client,
            token,
            granted_ns: at,
            released_ns: Some(at + 5),
        };
        r.check = Check {
            grants: 2,
            token_violations: 1,
            overlaps: 0,
            shared_tokens: 0,
            first: vec![Violation {
                problem: Problem::TokenNotIncreasing,
                previous: g(0, 7, 100),
                grant: g(1, 7, 200),
            }],
        };
        let text = correctness_table(&[r]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            words(lines[1]),
            ["poll", "2", "1", "2", "1", "0", "0", "0", "0"]
        );
        assert!(
            lines[2].starts_with("VIOLATION poll round 1 key 0: client 1 token 7"),
            "{text}"
        );
        assert_eq!(lines.len(), 3);
    }
}
