//! The pure part of the benchmark: the client list, per-round results, medians over rounds,
//! ratios to the reference target, and the summary table.

use serde::{Deserialize, Serialize};

/// One round's result for one target at one client count.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct RoundResult {
    /// Target name.
    pub target: String,
    /// Round number, from 1.
    pub round: usize,
    /// Concurrent clients.
    pub clients: usize,
    /// Workload name.
    pub workload: String,
    /// Completed cycles (or operations) per second.
    pub ops_per_sec: f64,
    /// Completed cycles (or operations).
    pub ops: u64,
    /// Lock attempts refused (contention).
    pub busy: u64,
    /// Error replies.
    pub errors: u64,
    /// Latency percentiles of one cycle, in µs.
    pub p50_us: u64,
    /// 90th percentile, µs.
    pub p90_us: u64,
    /// 99th percentile, µs.
    pub p99_us: u64,
    /// Maximum, µs.
    pub max_us: u64,
}

/// The medians over the rounds of one target at one client count.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Summary {
    /// Target name.
    pub target: String,
    /// Concurrent clients.
    pub clients: usize,
    /// How many rounds the medians are over.
    pub rounds: usize,
    /// Median cycles (or operations) per second.
    pub ops_per_sec: f64,
    /// Median of the rounds' p50, in ms.
    pub p50_ms: f64,
    /// Median of the rounds' p99, in ms.
    pub p99_ms: f64,
    /// `ops_per_sec` divided by the reference target's at the same client count.
    pub ratio: Option<f64>,
    /// `p99_ms` divided by the reference target's at the same client count.
    pub p99_ratio: Option<f64>,
    /// Error replies, summed over the rounds.
    pub errors: u64,
    /// Refused lock attempts, summed over the rounds.
    pub busy: u64,
}

/// Parses a client-count list such as `1,4,16,64` (one number is a list of one). Counts must
/// be positive; duplicates are dropped, the order is kept.
pub fn parse_clients(s: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let part = part.trim();
        let n: usize = part
            .parse()
            .map_err(|_| format!("bad client count {part:?} in {s:?} (expected e.g. 1,4,16,64)"))?;
        if n == 0 {
            return Err(format!("client counts must be positive (got 0 in {s:?})"));
        }
        if !out.contains(&n) {
            out.push(n);
        }
    }
    Ok(out)
}

/// The median; the mean of the two middle values for an even count; 0 for none.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// `a / b`, or None when `b` is not positive.
fn ratio(a: f64, b: f64) -> Option<f64> {
    (b > 0.0).then(|| a / b)
}

/// One summary row per (client count, target), in that order, with ratios to `reference`
/// at the same client count. Pairs without results are left out.
pub fn summarize(
    results: &[RoundResult],
    targets: &[String],
    clients: &[usize],
    reference: &str,
) -> Vec<Summary> {
    let mut rows = Vec::new();
    for &n in clients {
        let mut group = Vec::new();
        for t in targets {
            let mine: Vec<&RoundResult> = results
                .iter()
                .filter(|r| &r.target == t && r.clients == n)
                .collect();
            if mine.is_empty() {
                continue;
            }
            group.push(Summary {
                target: t.clone(),
                clients: n,
                rounds: mine.len(),
                ops_per_sec: median(mine.iter().map(|r| r.ops_per_sec).collect()),
                p50_ms: median(mine.iter().map(|r| r.p50_us as f64 / 1000.0).collect()),
                p99_ms: median(mine.iter().map(|r| r.p99_us as f64 / 1000.0).collect()),
                ratio: None,
                p99_ratio: None,
                errors: mine.iter().map(|r| r.errors).sum(),
                busy: mine.iter().map(|r| r.busy).sum(),
            });
        }
        if let Some(base) = group.iter().find(|s| s.target == reference).cloned() {
            for s in &mut group {
                s.ratio = ratio(s.ops_per_sec, base.ops_per_sec);
                s.p99_ratio = ratio(s.p99_ms, base.p99_ms);
            }
        }
        rows.extend(group);
    }
    rows
}

fn fmt_ratio(r: Option<f64>) -> String {
    r.map_or_else(|| "-".into(), |r| format!("{r:.2}x"))
}

/// The summary table: one row per target and client count, a blank line between client
/// counts, ratios to `reference` in the last two columns.
pub fn table(rows: &[Summary], reference: &str, unit: &str) -> String {
    let width = rows
        .iter()
        .map(|r| r.target.len())
        .chain([6])
        .max()
        .unwrap_or(6);
    let mut out = format!(
        "{:<width$} {:>7} {:>11} {:>8} {:>8} {:>10} {:>10} {:>7}\n",
        "target",
        "clients",
        format!("{unit}/s"),
        "p50 ms",
        "p99 ms",
        "tput/ref",
        "p99/ref",
        "errors"
    );
    for (i, r) in rows.iter().enumerate() {
        if i > 0 && rows[i - 1].clients != r.clients {
            out.push('\n');
        }
        out.push_str(&format!(
            "{:<width$} {:>7} {:>11.0} {:>8.2} {:>8.2} {:>10} {:>10} {:>7}\n",
            r.target,
            r.clients,
            r.ops_per_sec,
            r.p50_ms,
            r.p99_ms,
            fmt_ratio(r.ratio),
            fmt_ratio(r.p99_ratio),
            r.errors
        ));
    }
    out.push_str(&format!(
        "(medians over rounds; ref = {reference} at the same client count)\n"
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_lists_parse_and_reject_nonsense() {
        assert_eq!(parse_clients("1,4,16,64"), Ok(vec![1, 4, 16, 64]));
        assert_eq!(parse_clients("16"), Ok(vec![16]));
        assert_eq!(parse_clients(" 4, 1 ,4"), Ok(vec![4, 1]));
        assert!(parse_clients("0,4").is_err());
        assert!(parse_clients("1,,4").is_err());
        assert!(parse_clients("four").is_err());
        assert!(parse_clients("-1").is_err());
        assert!(parse_clients("").is_err());
    }

    #[test]
    fn median_of_odd_even_and_empty_lists() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(vec![7.0]), 7.0);
        assert_eq!(median(vec![]), 0.0);
        // One outlier round does not move it.
        assert_eq!(median(vec![100.0, 101.0, 5.0]), 100.0);
    }

    fn round(target: &str, clients: usize, ops: f64, p50_us: u64, p99_us: u64) -> RoundResult {
        RoundResult {
            target: target.into(),
            round: 1,
            clients,
            workload: "cycle".into(),
            ops_per_sec: ops,
            ops: ops as u64,
            busy: 0,
            errors: 1,
            p50_us,
            p90_us: p99_us,
            p99_us,
            max_us: p99_us,
        }
    }

    fn sample() -> Vec<Summary> {
        let results = vec![
            round("palisade", 1, 100.0, 1000, 4000),
            round("redis-always", 1, 400.0, 500, 1000),
            round("palisade", 1, 300.0, 3000, 8000),
            round("redis-always", 1, 200.0, 700, 3000),
            round("palisade", 1, 200.0, 2000, 6000),
            round("redis-always", 1, 300.0, 600, 2000),
            round("palisade", 4, 800.0, 2000, 5000),
            round("redis-always", 4, 400.0, 4000, 10000),
        ];
        let targets = ["palisade".to_string(), "redis-always".to_string()];
        summarize(&results, &targets, &[1, 4, 16], "redis-always")
    }

    #[test]
    fn summary_takes_medians_and_ratios_per_client_count() {
        let rows = sample();
        assert_eq!(
            rows.len(),
            4,
            "no rows for 16 clients, which has no results"
        );
        let p1 = &rows[0];
        assert_eq!(
            (p1.target.as_str(), p1.clients, p1.rounds),
            ("palisade", 1, 3)
        );
        assert_eq!(p1.ops_per_sec, 200.0);
        assert_eq!(p1.p50_ms, 2.0);
        assert_eq!(p1.p99_ms, 6.0);
        assert_eq!(p1.errors, 3);
        // The reference's medians are 300 cycles/s and 2 ms.
        assert_eq!(p1.ratio, Some(200.0 / 300.0));
        assert_eq!(p1.p99_ratio, Some(3.0));
        assert_eq!(rows[1].ratio, Some(1.0));
        // At 4 clients the ratio uses the 4-client reference, not the 1-client one.
        assert_eq!(rows[2].clients, 4);
        assert_eq!(rows[2].ratio, Some(2.0));
        assert_eq!(rows[2].p99_ratio, Some(0.5));
    }

    #[test]
    fn summary_without_the_reference_has_no_ratios() {
        let results = vec![round("a", 1, 10.0, 1, 1)];
        let rows = summarize(&results, &["a".into()], &[1], "missing");
        assert_eq!(rows[0].ratio, None);
        let rows = summarize(
            &[round("a", 1, 10.0, 1, 1), round("r", 1, 0.0, 0, 0)],
            &["a".into(), "r".into()],
            &[1],
            "r",
        );
        assert_eq!(
            rows[0].ratio, None,
            "a zero reference gives no ratio, not infinity"
        );
    }

    #[test]
    fn table_has_one_aligned_row_per_target_and_client_count() {
        let text = table(&sample(), "redis-always", "cycles");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0].split_whitespace().collect::<Vec<_>>(),
            [
                "target", "clients", "cycles/s", "p50", "ms", "p99", "ms", "tput/ref", "p99/ref",
                "errors"
            ]
        );
        assert_eq!(
            lines[1].split_whitespace().collect::<Vec<_>>(),
            ["palisade", "1", "200", "2.00", "6.00", "0.67x", "3.00x", "3"]
        );
        assert_eq!(
            lines[2].split_whitespace().collect::<Vec<_>>(),
            [
                "redis-always",
                "1",
                "300",
                "0.60",
                "2.00",
                "1.00x",
                "1.00x",
                "3"
            ]
        );
        assert_eq!(lines[3], "", "a blank line between client counts");
        assert!(lines[4].starts_with("palisade     "));
        assert!(lines[6].starts_with("(medians over rounds; ref = redis-always"));
        // Every data row is as wide as the header, so the columns line up.
        assert!([1, 2, 4, 5]
            .iter()
            .all(|&i| lines[i].len() == lines[0].len()));
        assert_eq!(
            table(
                &[Summary {
                    ratio: None,
                    ..sample()[0].clone()
                }],
                "x",
                "cycles"
            )
            .lines()
            .nth(1)
            .unwrap()
            .split_whitespace()
            .nth(5),
            Some("-")
        );
    }
}
