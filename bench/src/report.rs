//! The pure part of the benchmark: the client list, per-round results, medians over rounds,
//! ratios to the reference target, and the summary tables.

use serde::{Deserialize, Serialize};

use crate::stats::RunStats;

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
    /// What the target's nodes did during the round (counter differences).
    pub server: RunStats,
}

/// The medians over the rounds of one target at one client count.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
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
    /// Commands per log entry on the leader. This and the next three are ratios of the
    /// counter differences summed over the rounds that have them; None where the target
    /// does not report them.
    #[serde(default)]
    pub commands_per_entry: Option<f64>,
    /// Log entries per fsync on the leader.
    #[serde(default)]
    pub entries_per_fsync_leader: Option<f64>,
    /// Log entries per fsync on one follower.
    #[serde(default)]
    pub entries_per_fsync_follower: Option<f64>,
    /// CPU ms of all the target's nodes per 1,000 cycles (or operations).
    #[serde(default)]
    pub cpu_ms_per_1k: Option<f64>,
    /// The same per node: divided by the number of nodes.
    #[serde(default)]
    pub cpu_ms_per_1k_per_node: Option<f64>,
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

/// `sum(numerators) / sum(denominators)` over the pairs that have both; None if none has, or
/// the denominators sum to 0.
pub fn summed_ratio(pairs: impl Iterator<Item = (Option<f64>, Option<f64>)>) -> Option<f64> {
    let mut seen = false;
    let (mut num, mut den) = (0.0, 0.0);
    for (n, d) in pairs {
        if let (Some(n), Some(d)) = (n, d) {
            (seen, num, den) = (true, num + n, den + d);
        }
    }
    if seen {
        ratio(num, den)
    } else {
        None
    }
}

/// The server-side figures of some rounds of one target at one client count:
/// commands/entry, entries/fsync on the leader and on the follower, CPU ms per 1,000 ops of
/// all nodes and per node.
fn server_figures(mine: &[&RoundResult]) -> [Option<f64>; 5] {
    let sum = |f: fn(&RoundResult) -> (Option<u64>, Option<u64>)| {
        summed_ratio(mine.iter().map(|r| {
            let (n, d) = f(r);
            (n.map(|n| n as f64), d.map(|d| d as f64))
        }))
    };
    [
        sum(|r| (r.server.leader_commands, r.server.leader_entries)),
        sum(|r| (r.server.leader_entries_synced, r.server.leader_syncs)),
        sum(|r| (r.server.follower_entries_synced, r.server.follower_syncs)),
        summed_ratio(mine.iter().map(|r| (r.server.cpu_ms, Some(r.ops as f64))))
            .map(|x| x * 1000.0),
        summed_ratio(mine.iter().map(|r| {
            let per_node = match (r.server.cpu_ms, r.server.cpu_nodes) {
                (Some(ms), Some(n)) if n > 0 => Some(ms / n as f64),
                _ => None,
            };
            (per_node, Some(r.ops as f64))
        }))
        .map(|x| x * 1000.0),
    ]
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
            let [commands_per_entry, leader_fsync, follower_fsync, cpu_ms_per_1k, cpu_per_node] =
                server_figures(&mine);
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
                commands_per_entry,
                entries_per_fsync_leader: leader_fsync,
                entries_per_fsync_follower: follower_fsync,
                cpu_ms_per_1k,
                cpu_ms_per_1k_per_node: cpu_per_node,
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
    let width = target_width(rows);
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
    out.push_str(&by_client_count(rows, |r| {
        format!(
            "{:<width$} {:>7} {:>11.0} {:>8.2} {:>8.2} {:>10} {:>10} {:>7}\n",
            r.target,
            r.clients,
            r.ops_per_sec,
            r.p50_ms,
            r.p99_ms,
            fmt_ratio(r.ratio),
            fmt_ratio(r.p99_ratio),
            r.errors
        )
    }));
    out.push_str(&format!(
        "(medians over rounds; ref = {reference} at the same client count)\n"
    ));
    out
}

/// The width of the target column: the longest name, at least "target".
fn target_width(rows: &[Summary]) -> usize {
    rows.iter()
        .map(|r| r.target.len())
        .chain([6])
        .max()
        .unwrap_or(6)
}

/// One line per row, with a blank line between client counts.
fn by_client_count(rows: &[Summary], line: impl Fn(&Summary) -> String) -> String {
    let mut out = String::new();
    for (i, r) in rows.iter().enumerate() {
        if i > 0 && rows[i - 1].clients != r.clients {
            out.push('\n');
        }
        out.push_str(&line(r));
    }
    out
}

fn fmt_figure(x: Option<f64>, decimals: usize) -> String {
    x.map_or_else(|| "-".into(), |x| format!("{x:.decimals$}"))
}

/// True if some row has a server-side figure (else [`server_table`] would be all dashes).
pub fn has_server_figures(rows: &[Summary]) -> bool {
    rows.iter().any(|r| {
        [
            r.commands_per_entry,
            r.entries_per_fsync_leader,
            r.entries_per_fsync_follower,
            r.cpu_ms_per_1k,
        ]
        .iter()
        .any(Option::is_some)
    })
}

/// The server-side table: per target and client count, commands per log entry on the
/// leader, entries per fsync on the leader and on one follower, and CPU ms of all the
/// target's nodes per 1,000 `unit`, and the same per node; "-" where the target does not
/// report a figure.
pub fn server_table(rows: &[Summary], unit: &str) -> String {
    let width = target_width(rows);
    let cpu = format!("cpu ms/1k {unit}");
    let mut out = format!(
        "{:<width$} {:>7} {:>10} {:>14} {:>16} {:>17} {:>17}\n",
        "target", "clients", "cmds/entry", "entries/fsync", "entries/fsync", cpu, cpu
    );
    out.push_str(&format!(
        "{:<width$} {:>7} {:>10} {:>14} {:>16} {:>17} {:>17}\n",
        "", "", "(leader)", "(leader)", "(a follower)", "(all nodes)", "(per node)"
    ));
    out.push_str(&by_client_count(rows, |r| {
        format!(
            "{:<width$} {:>7} {:>10} {:>14} {:>16} {:>17} {:>17}\n",
            r.target,
            r.clients,
            fmt_figure(r.commands_per_entry, 2),
            fmt_figure(r.entries_per_fsync_leader, 2),
            fmt_figure(r.entries_per_fsync_follower, 2),
            fmt_figure(r.cpu_ms_per_1k, 1),
            fmt_figure(r.cpu_ms_per_1k_per_node, 1),
        )
    }));
    out.push_str(
        "(counter differences over the timed runs, summed over rounds; - = not reported)\n",
    );
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
            server: RunStats::default(),
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

    #[test]
    fn summed_ratio_sums_before_dividing_and_skips_gaps() {
        let pairs = [(Some(10.0), Some(1.0)), (Some(30.0), Some(9.0))];
        assert_eq!(
            summed_ratio(pairs.into_iter()),
            Some(4.0),
            "40/10, not the mean of 10 and 3.3"
        );
        let gaps = [
            (Some(10.0), None),
            (None, Some(5.0)),
            (Some(6.0), Some(3.0)),
        ];
        assert_eq!(summed_ratio(gaps.into_iter()), Some(2.0));
        assert_eq!(summed_ratio([(None, None)].into_iter()), None);
        assert_eq!(summed_ratio(std::iter::empty()), None);
        assert_eq!(summed_ratio([(Some(1.0), Some(0.0))].into_iter()), None);
    }

    fn with_server(mut r: RoundResult, entries: u64, syncs: u64, cpu_ms: f64) -> RoundResult {
        r.server = RunStats {
            leader: Some("127.0.0.1:1".into()),
            follower: Some("127.0.0.1:2".into()),
            leader_entries: Some(entries),
            leader_commands: Some(entries * 3),
            leader_syncs: Some(syncs),
            leader_entries_synced: Some(entries),
            follower_syncs: Some(syncs * 2),
            follower_entries_synced: Some(entries),
            cpu_ms: Some(cpu_ms),
            cpu_nodes: Some(2),
        };
        r
    }

    fn server_sample() -> Vec<Summary> {
        let results = vec![
            with_server(round("palisade", 1, 100.0, 1, 1), 100, 50, 500.0),
            round("redis-always", 1, 400.0, 1, 1),
            with_server(round("palisade", 1, 300.0, 1, 1), 300, 50, 1500.0),
            round("redis-always", 1, 400.0, 1, 1),
        ];
        let targets = ["palisade".to_string(), "redis-always".to_string()];
        summarize(&results, &targets, &[1], "redis-always")
    }

    #[test]
    fn server_figures_are_ratios_of_the_summed_differences() {
        let rows = server_sample();
        let p = &rows[0];
        assert_eq!(p.commands_per_entry, Some(3.0));
        // 400 entries over 100 fsyncs on the leader, over 200 on the follower.
        assert_eq!(p.entries_per_fsync_leader, Some(4.0));
        assert_eq!(p.entries_per_fsync_follower, Some(2.0));
        // 2000 ms for 400 cycles, on 2 nodes.
        assert_eq!(p.cpu_ms_per_1k, Some(5000.0));
        assert_eq!(p.cpu_ms_per_1k_per_node, Some(2500.0));
        let r = &rows[1];
        assert_eq!(
            (
                r.commands_per_entry,
                r.entries_per_fsync_leader,
                r.cpu_ms_per_1k
            ),
            (None, None, None)
        );
        assert!(has_server_figures(&rows));
        assert!(!has_server_figures(&sample()));
    }

    #[test]
    fn server_table_shows_dashes_for_what_a_target_does_not_report() {
        let text = server_table(&server_sample(), "cycles");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0].split_whitespace().collect::<Vec<_>>(),
            [
                "target",
                "clients",
                "cmds/entry",
                "entries/fsync",
                "entries/fsync",
                "cpu",
                "ms/1k",
                "cycles",
                "cpu",
                "ms/1k",
                "cycles"
            ]
        );
        assert_eq!(
            lines[2].split_whitespace().collect::<Vec<_>>(),
            ["palisade", "1", "3.00", "4.00", "2.00", "5000.0", "2500.0"]
        );
        assert_eq!(
            lines[3].split_whitespace().collect::<Vec<_>>(),
            ["redis-always", "1", "-", "-", "-", "-", "-"]
        );
        assert!([1, 2, 3].iter().all(|&i| lines[i].len() == lines[0].len()));
        assert!(lines[4].starts_with("(counter differences"));
    }

    #[test]
    fn summaries_of_older_json_files_still_load() {
        let old = r#"{"target":"p","clients":1,"rounds":1,"ops_per_sec":1.0,"p50_ms":1.0,
            "p99_ms":1.0,"ratio":null,"p99_ratio":null,"errors":0,"busy":0}"#;
        let s: Summary = serde_json::from_str(old).unwrap();
        assert_eq!((s.commands_per_entry, s.cpu_ms_per_1k), (None, None));
    }
}
