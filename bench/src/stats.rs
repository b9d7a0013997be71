//! Server-side figures of a measured run: each node's cumulative counters (INFO) and CPU time
//! (/proc/<pid>/stat), read just before and just after the run, and what their differences say
//! about batching (commands per log entry, entries per fsync) and cost (CPU per cycle).

use std::collections::HashMap;
use std::str::FromStr;

use anyhow::Context;
use redis_protocol::resp2::types::OwnedFrame;
use serde::{Deserialize, Serialize};

use crate::client::Client;

/// One node's counters at one moment. What the node does not report (Redis has no Raft
/// counters, an unreachable node reports nothing) is None.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeStats {
    /// `process_id` (INFO server).
    pub pid: Option<u32>,
    /// `raft_role` (INFO raft): leader, follower, candidate or learner.
    pub role: Option<String>,
    /// `raft_applied_entries`: client batches (log entries) applied.
    pub applied_entries: Option<u64>,
    /// `raft_applied_commands`: the commands in them.
    pub applied_commands: Option<u64>,
    /// `raft_log_syncs`: fsyncs of the Raft log.
    pub log_syncs: Option<u64>,
    /// `raft_log_entries_synced`: the entries those fsyncs covered.
    pub log_entries_synced: Option<u64>,
    /// utime + stime of the process, in clock ticks (filled in from /proc, not from INFO).
    pub cpu_ticks: Option<u64>,
}

fn field<T: FromStr>(fields: &HashMap<&str, &str>, name: &str) -> Option<T> {
    fields.get(name).and_then(|v| v.trim().parse().ok())
}

impl NodeStats {
    /// Parses INFO's `field:value` lines (any sections, CRLF or LF); headers and fields it does
    /// not know are skipped, and a field that is absent or not a number stays None.
    pub fn parse(info: &str) -> NodeStats {
        let fields: HashMap<&str, &str> = info
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.trim_end_matches('\r').split_once(':'))
            .collect();
        NodeStats {
            pid: field(&fields, "process_id"),
            role: field(&fields, "raft_role"),
            applied_entries: field(&fields, "raft_applied_entries"),
            applied_commands: field(&fields, "raft_applied_commands"),
            log_syncs: field(&fields, "raft_log_syncs"),
            log_entries_synced: field(&fields, "raft_log_entries_synced"),
            cpu_ticks: None,
        }
    }

    fn is(&self, role: &str) -> bool {
        self.role.as_deref() == Some(role)
    }
}

/// utime + stime (fields 14 and 15, in clock ticks) from the text of /proc/<pid>/stat. The
/// command name (field 2) is in parentheses and may hold spaces, so fields are counted from
/// the last `)`.
pub fn cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state): field N is f[N - 3].
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// What a target's nodes did during one measured run: the differences of their counters.
/// A figure is None when a node did not report it at both ends, when a counter went backwards
/// (the node restarted), and for the leader's figures when no one node led at both ends.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct RunStats {
    /// The member (HOST:PORT) that was leader before and after the run (the same process).
    pub leader: Option<String>,
    /// The follower the follower figures are from: the first member that was a follower at
    /// both ends (the same process).
    pub follower: Option<String>,
    /// Client batches (log entries) the leader applied.
    pub leader_entries: Option<u64>,
    /// The commands in them.
    pub leader_commands: Option<u64>,
    /// The leader's fsyncs of its Raft log.
    pub leader_syncs: Option<u64>,
    /// The log entries those fsyncs covered.
    pub leader_entries_synced: Option<u64>,
    /// The follower's fsyncs of its Raft log.
    pub follower_syncs: Option<u64>,
    /// The log entries those fsyncs covered.
    pub follower_entries_synced: Option<u64>,
    /// CPU time (user + system) of all the members together, in ms; None unless every
    /// member's is known (a partial sum would flatter the target).
    pub cpu_ms: Option<f64>,
    /// How many nodes `cpu_ms` is the sum of.
    #[serde(default)]
    pub cpu_nodes: Option<u64>,
}

/// A member with its samples from before and after the run.
type Ends<'a> = (&'a String, &'a NodeStats, &'a NodeStats);

/// `after - before`, if both are known and the counter did not go backwards.
fn diff(before: Option<u64>, after: Option<u64>) -> Option<u64> {
    after?.checked_sub(before?)
}

/// The difference of one counter of one member, if there is such a member.
fn of(n: Option<&Ends>, counter: fn(&NodeStats) -> Option<u64>) -> Option<u64> {
    n.and_then(|(_, b, a)| diff(counter(b), counter(a)))
}

impl RunStats {
    /// The differences between two samples of the same `members` (in the same order).
    /// `ticks_per_sec` converts CPU clock ticks to time.
    pub fn between(
        members: &[String],
        before: &[NodeStats],
        after: &[NodeStats],
        ticks_per_sec: u64,
    ) -> RunStats {
        let nodes: Vec<Ends> = members
            .iter()
            .zip(before)
            .zip(after)
            .map(|((m, b), a)| (m, b, a))
            .collect();
        // The same process in the same role at both ends: a restart or an election in between
        // would mix two nodes' (or two processes') counters.
        let in_role = |role: &str| {
            nodes
                .iter()
                .find(|(_, b, a)| b.pid == a.pid && b.is(role) && a.is(role))
        };
        let (leader, follower) = (in_role("leader"), in_role("follower"));
        let cpu_ticks = nodes
            .iter()
            .map(|(_, b, a)| match (b.pid, a.pid) {
                (Some(p), Some(q)) if p == q => diff(b.cpu_ticks, a.cpu_ticks),
                _ => None,
            })
            .sum::<Option<u64>>()
            .filter(|_| !nodes.is_empty() && nodes.len() == members.len());
        RunStats {
            leader: leader.map(|(m, _, _)| m.to_string()),
            follower: follower.map(|(m, _, _)| m.to_string()),
            leader_entries: of(leader, |s| s.applied_entries),
            leader_commands: of(leader, |s| s.applied_commands),
            leader_syncs: of(leader, |s| s.log_syncs),
            leader_entries_synced: of(leader, |s| s.log_entries_synced),
            follower_syncs: of(follower, |s| s.log_syncs),
            follower_entries_synced: of(follower, |s| s.log_entries_synced),
            cpu_ms: cpu_ticks.map(|t| t as f64 * 1000.0 / ticks_per_sec.max(1) as f64),
            cpu_nodes: cpu_ticks.map(|_| nodes.len() as u64),
        }
    }
}

/// Parses `--members NAME=HOST:PORT,HOST:PORT,...` into the target name and its members.
pub fn parse_members(s: &str) -> Result<(String, Vec<String>), String> {
    let bad = || format!("--members must be NAME=HOST:PORT[,HOST:PORT...], not {s:?}");
    let (name, list) = s.split_once('=').ok_or_else(bad)?;
    let members: Vec<String> = list.split(',').map(|m| m.trim().to_string()).collect();
    if name.is_empty()
        || members
            .iter()
            .any(|m| !m.contains(':') || m.starts_with(':'))
    {
        return Err(bad());
    }
    Ok((name.to_string(), members))
}

/// Clock ticks per second for /proc's CPU times: `getconf CLK_TCK`, else Linux's 100.
pub fn ticks_per_sec() -> u64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .filter(|&t| t > 0)
        .unwrap_or(100)
}

/// True for a loopback HOST:PORT: only then is the pid INFO reports one of this machine's.
fn is_local(addr: &str) -> bool {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// One node's counters now: INFO over a fresh connection, CPU time from /proc for a local
/// node.
async fn sample_node(addr: &str) -> anyhow::Result<NodeStats> {
    let mut c = Client::connect(addr).await?;
    let info = match c.call(&[b"INFO", b"server", b"stats", b"raft"]).await? {
        OwnedFrame::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
        other => anyhow::bail!("INFO replied {other:?}"),
    };
    let mut s = NodeStats::parse(&info);
    if let (Some(pid), true) = (s.pid, is_local(addr)) {
        let path = format!("/proc/{pid}/stat");
        let stat = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
        s.cpu_ticks = cpu_ticks(&stat);
    }
    Ok(s)
}

/// Every member's counters now. A member that cannot be read counts as reporting nothing
/// (its figures show as "-"), with a warning: the benchmark itself goes on.
pub async fn sample(members: &[String]) -> Vec<NodeStats> {
    let mut out = Vec::with_capacity(members.len());
    for m in members {
        out.push(sample_node(m).await.unwrap_or_else(|e| {
            eprintln!("warning: no counters from {m}: {e:#}");
            NodeStats::default()
        }));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEADER: &str = "# Server\r\nredis_version:7.2.0\r\nprocess_id:4242\r\n\r\n# Stats\r\n\
        total_commands_processed:10\r\nraft_log_syncs:100\r\nraft_log_appends_synced:120\r\n\
        raft_log_entries_synced:400\r\nraft_applied_entries:390\r\nraft_applied_commands:1170\r\n\
        \r\n# Raft\r\nraft_node_id:1\r\nraft_role:leader\r\nraft_leader_id:1\r\n";

    #[test]
    fn info_fields_parse_and_missing_ones_stay_none() {
        let s = NodeStats::parse(LEADER);
        assert_eq!(s.pid, Some(4242));
        assert_eq!(s.role.as_deref(), Some("leader"));
        assert_eq!(
            (s.applied_entries, s.applied_commands),
            (Some(390), Some(1170))
        );
        assert_eq!((s.log_syncs, s.log_entries_synced), (Some(100), Some(400)));
        assert_eq!(s.cpu_ticks, None, "CPU comes from /proc, not INFO");
        // Redis: a pid, nothing of Raft; LF line ends work too; junk is not a number.
        let r = NodeStats::parse("# Server\nprocess_id:77\n# Stats\nraft_log_syncs:many\n");
        assert_eq!(r.pid, Some(77));
        assert_eq!((r.role, r.applied_entries, r.log_syncs), (None, None, None));
        assert_eq!(NodeStats::parse(""), NodeStats::default());
    }

    #[test]
    fn proc_stat_cpu_is_utime_plus_stime() {
        let stat =
            "4242 (palisade) S 1 4242 4242 0 -1 4194560 9000 0 0 0 250 75 0 0 20 0 12 0 100 0";
        assert_eq!(cpu_ticks(stat), Some(325));
        // A command name with spaces and parentheses does not shift the fields.
        let odd = "7 (a b) c)) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 5 0";
        assert_eq!(cpu_ticks(odd), Some(7));
        assert_eq!(cpu_ticks("7 (x) R 1"), None);
        assert_eq!(cpu_ticks(""), None);
    }

    fn node(role: &str, pid: u32, entries: u64, syncs: u64, ticks: u64) -> NodeStats {
        NodeStats {
            pid: Some(pid),
            role: Some(role.into()),
            applied_entries: Some(entries),
            applied_commands: Some(entries * 3),
            log_syncs: Some(syncs),
            log_entries_synced: Some(entries),
            cpu_ticks: Some(ticks),
        }
    }

    fn members() -> Vec<String> {
        ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]
            .map(String::from)
            .to_vec()
    }

    #[test]
    fn run_stats_are_the_leaders_and_first_followers_differences() {
        let before = [
            node("follower", 1, 10, 10, 100),
            node("leader", 2, 10, 5, 200),
            node("follower", 3, 10, 10, 300),
        ];
        let after = [
            node("follower", 1, 110, 30, 150),
            node("leader", 2, 110, 15, 400),
            node("follower", 3, 110, 60, 310),
        ];
        let d = RunStats::between(&members(), &before, &after, 100);
        assert_eq!(d.leader.as_deref(), Some("127.0.0.1:2"));
        assert_eq!(d.follower.as_deref(), Some("127.0.0.1:1"));
        assert_eq!(
            (d.leader_entries, d.leader_commands),
            (Some(100), Some(300))
        );
        assert_eq!(
            (d.leader_syncs, d.leader_entries_synced),
            (Some(10), Some(100))
        );
        assert_eq!(
            (d.follower_syncs, d.follower_entries_synced),
            (Some(20), Some(100))
        );
        // (50 + 200 + 10) ticks at 100 Hz.
        assert_eq!(d.cpu_ms, Some(2600.0));
        assert_eq!(d.cpu_nodes, Some(3));
    }

    #[test]
    fn run_stats_refuse_what_they_cannot_vouch_for() {
        let before = [
            node("leader", 1, 10, 10, 100),
            node("follower", 2, 10, 10, 100),
            node("follower", 3, 10, 10, 100),
        ];
        // Leadership moved, node 3 restarted (new pid, counters reset).
        let after = [
            node("follower", 1, 20, 20, 200),
            node("leader", 2, 20, 20, 200),
            node("follower", 9, 1, 1, 5),
        ];
        let d = RunStats::between(&members(), &before, &after, 100);
        assert_eq!(
            (d.leader, d.leader_entries, d.leader_syncs),
            (None, None, None)
        );
        assert_eq!(
            d.follower, None,
            "no member was a follower at both ends in the same process"
        );
        assert_eq!(d.cpu_ms, None, "a restarted node's CPU time is unknown");
        // A Redis target: a pid and CPU, nothing of Raft.
        let redis = |t| NodeStats {
            pid: Some(5),
            cpu_ticks: Some(t),
            ..NodeStats::default()
        };
        let one = vec!["127.0.0.1:1".to_string()];
        let d = RunStats::between(&one, &[redis(10)], &[redis(13)], 100);
        assert_eq!(d.cpu_ms, Some(30.0));
        assert_eq!((d.leader_entries, d.follower_syncs), (None, None));
        // A node that could not be read at all.
        let d = RunStats::between(&one, &[NodeStats::default()], &[redis(13)], 100);
        assert_eq!(d, RunStats::default());
        // A counter that went backwards is not a delta.
        assert_eq!(diff(Some(5), Some(4)), None);
        assert_eq!(diff(Some(4), Some(5)), Some(1));
    }

    #[test]
    fn members_parse_and_reject_nonsense() {
        assert_eq!(
            parse_members("palisade-3=127.0.0.1:7000,127.0.0.1:7001"),
            Ok((
                "palisade-3".into(),
                vec!["127.0.0.1:7000".into(), "127.0.0.1:7001".into()]
            ))
        );
        assert_eq!(
            parse_members("p=localhost:1"),
            Ok(("p".into(), vec!["localhost:1".into()]))
        );
        for bad in [
            "p",
            "=127.0.0.1:1",
            "p=",
            "p=127.0.0.1:1,",
            "p=host",
            "p=:1",
        ] {
            assert!(parse_members(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn only_loopback_members_get_cpu_times() {
        assert!(is_local("127.0.0.1:7000"));
        assert!(is_local("localhost:7000"));
        assert!(is_local("[::1]:7000"));
        assert!(!is_local("10.0.0.5:7000"));
        assert!(!is_local("db.example.com:7000"));
    }
}
