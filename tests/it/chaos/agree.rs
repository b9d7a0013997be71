//! Replicas agree: once the faults have stopped and the cluster has settled, every member
//! shows the same `RAFT.DIGEST` at the same applied index (design.md section 9).
//!
//! Each node answers RAFT.DIGEST locally with its applied index and the digest of its state
//! at that index. Writes may still trickle in after the clients stop (lease ticks, eviction
//! entries), so the nodes are polled until they all answer with one applied index; then
//! their digests must be equal. Nodes that never line up within the bound are a liveness
//! problem, not a violation.

use std::collections::BTreeMap;
use std::thread;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::check::Finding;
use super::nemesis::{admin, Target};

/// One node's answer to RAFT.DIGEST.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct NodeDigest {
    /// The index of the last applied log entry.
    pub applied_index: u64,
    /// The state digest at that index (hex).
    pub digest: String,
}

/// What the digest check saw.
#[derive(Serialize, Clone, Debug, Default)]
pub struct DigestSummary {
    /// When in the run it was taken (after healing, after the full-cluster restart).
    pub phase: String,
    /// The applied index every node showed.
    pub applied_index: u64,
    /// Each node's digest.
    pub digests: BTreeMap<u64, String>,
    /// Polling rounds until the indexes lined up.
    pub rounds: usize,
}

/// Parses RAFT.DIGEST's RESP2 reply (`applied_index N digest HEX` as a flat array).
pub fn parse_digest(reply: &str) -> Option<NodeDigest> {
    let lines: Vec<&str> = reply.split("\r\n").collect();
    let after = |name: &str| {
        let at = lines.iter().position(|l| *l == name)?;
        lines.get(at + 1..)
    };
    let applied_index = after("applied_index")?
        .first()?
        .strip_prefix(':')?
        .parse()
        .ok()?;
    // A bulk string: its `$len` line, then the text.
    let digest = after("digest")?.get(1)?.to_string();
    (digest.len() == 40).then_some(NodeDigest {
        applied_index,
        digest,
    })
}

/// Polls RAFT.DIGEST on `members` until they show one applied index (for up to `within`),
/// then compares their digests. `Err` is a liveness problem: they never lined up.
pub fn check_digests(
    target: &Target,
    members: &[u64],
    phase: &str,
    within: Duration,
) -> Result<(DigestSummary, Vec<Finding>), String> {
    let deadline = Instant::now() + within;
    let mut rounds = 0;
    let mut last = BTreeMap::new();
    while Instant::now() < deadline {
        rounds += 1;
        last = members
            .iter()
            .filter_map(|id| {
                let r = admin(
                    target.cluster,
                    *id,
                    &["RAFT.DIGEST"],
                    Duration::from_secs(2),
                )?;
                Some((*id, parse_digest(&r)?))
            })
            .collect();
        if let Some(summary) = lined_up(&last, members, phase, rounds) {
            return Ok(compare(summary, &last));
        }
        thread::sleep(Duration::from_millis(50));
    }
    let seen: BTreeMap<u64, u64> = last.iter().map(|(id, d)| (*id, d.applied_index)).collect();
    Err(format!(
        "{phase}: the nodes showed no common applied index within {} s (last seen {seen:?})",
        within.as_secs()
    ))
}

/// A summary if every member answered with the same applied index.
fn lined_up(
    answers: &BTreeMap<u64, NodeDigest>,
    members: &[u64],
    phase: &str,
    rounds: usize,
) -> Option<DigestSummary> {
    let first = answers.values().next()?;
    let all = answers.len() == members.len()
        && answers
            .values()
            .all(|d| d.applied_index == first.applied_index);
    all.then(|| DigestSummary {
        phase: phase.into(),
        applied_index: first.applied_index,
        digests: answers
            .iter()
            .map(|(id, d)| (*id, d.digest.clone()))
            .collect(),
        rounds,
    })
}

/// A finding if the digests at one applied index differ.
fn compare(
    summary: DigestSummary,
    answers: &BTreeMap<u64, NodeDigest>,
) -> (DigestSummary, Vec<Finding>) {
    let mut distinct: Vec<&String> = summary.digests.values().collect();
    distinct.sort();
    distinct.dedup();
    let findings = if distinct.len() > 1 {
        vec![Finding {
            checker: "digest".into(),
            message: format!(
                "{}: the nodes disagree at applied index {}: {:?}",
                summary.phase, summary.applied_index, answers
            ),
            window: Vec::new(),
        }]
    } else {
        Vec::new()
    };
    (summary, findings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(index: u64, digest: char) -> NodeDigest {
        NodeDigest {
            applied_index: index,
            digest: digest.to_string().repeat(40),
        }
    }

    #[test]
    fn parses_the_reply_of_raft_digest() {
        let hex = "0123456789abcdef0123456789abcdef01234567";
        let reply =
            format!("*4\r\n$13\r\napplied_index\r\n:812\r\n$6\r\ndigest\r\n$40\r\n{hex}\r\n");
        assert_eq!(
            parse_digest(&reply),
            Some(NodeDigest {
                applied_index: 812,
                digest: hex.into()
            })
        );
        assert_eq!(parse_digest("-ERR unknown command 'RAFT.DIGEST'\r\n"), None);
    }

    /// Digests are compared only at one applied index, and two digests there are a finding.
    #[test]
    fn unequal_digests_at_one_index_are_a_violation() {
        let members = [1, 2, 3];
        let answers = |v: [(u64, char); 3]| -> BTreeMap<u64, NodeDigest> {
            (1..=3)
                .zip(v)
                .map(|(id, (i, d))| (id, answer(i, d)))
                .collect()
        };
        let behind = answers([(10, 'a'), (10, 'a'), (9, 'b')]);
        assert!(lined_up(&behind, &members, "end", 1).is_none());
        let missing: BTreeMap<u64, NodeDigest> =
            answers([(10, 'a'); 3]).into_iter().take(2).collect();
        assert!(lined_up(&missing, &members, "end", 1).is_none());
        let same = answers([(10, 'a'); 3]);
        let s = lined_up(&same, &members, "end", 2).expect("lined up");
        assert!(compare(s, &same).1.is_empty());
        let split = answers([(10, 'a'), (10, 'b'), (10, 'a')]);
        let s = lined_up(&split, &members, "end", 2).expect("lined up");
        let (s, f) = compare(s, &split);
        assert_eq!(s.applied_index, 10);
        assert_eq!(f.len(), 1);
        assert!(
            f[0].message.contains("disagree at applied index 10"),
            "{f:?}"
        );
    }
}
