use super::*;
use crate::algo::rng::SplitMix64;
use crate::raft::{log_id, Entry, LogId, Vote};

type Req = AppendEntriesRequest<TypeConfig>;

/// A request drawn from a small space, so that successors often match: two votes, three
/// `prev_log_id`s, four commits, and half of them commit-only (the others carry one entry).
fn draw(rng: &mut SplitMix64) -> Req {
    let opt = |n: usize| (n > 0).then(|| log_id(1, 1, n as u64));
    let prev = rng.below(3);
    let entries = match rng.below(2) {
        0 => vec![],
        _ => vec![Entry {
            log_id: log_id(1, 1, prev as u64 + 1),
            payload: openraft::EntryPayload::Blank,
        }],
    };
    Req {
        vote: Vote::new_committed(1 + rng.below(2) as u64, 1),
        prev_log_id: opt(prev),
        leader_commit: opt(rng.below(4)),
        entries,
    }
}

/// An input request tagged with its position.
impl Coalescible for (usize, Req) {
    fn request(&self) -> &Req {
        &self.1
    }
}

#[test]
fn coalescing_drops_only_covered_commit_only_appends_and_keeps_order() {
    let mut rng = SplitMix64::new(25);
    let t0 = Instant::now();
    let mut total_dropped = 0;
    let mut total_expired = 0;
    // Gaps between arrivals, as fractions of the hold: some within the hold of the one
    // before, some after it, whatever `COMMIT_HOLD` is.
    let gaps = [
        Duration::ZERO,
        COMMIT_HOLD / 6,
        COMMIT_HOLD * 5 / 6,
        COMMIT_HOLD * 4 / 3,
    ];
    for _ in 0..3000 {
        let n = 1 + rng.below(12);
        let mut now = t0;
        let mut input = Vec::new();
        for _ in 0..n {
            now += gaps[rng.below(4)];
            input.push((now, draw(&mut rng)));
        }
        let mut c = Coalescer::default();
        // (input position, time sent) of everything that went out, in sending order.
        let mut sent: Vec<(usize, Instant)> = Vec::new();
        let mut dropped = Vec::new();
        let mut out = Vec::new();
        let record = |out: &mut Vec<(usize, Req)>, at, sent: &mut Vec<(usize, Instant)>| {
            sent.extend(out.drain(..).map(|(i, _)| (i, at)));
        };
        for (i, (at, req)) in input.iter().enumerate() {
            // The writer sends a held request when its hold ends, before a later arrival.
            if let Some(d) = c.deadline().filter(|d| d <= at) {
                total_expired += 1;
                out.extend(c.release());
                record(&mut out, d, &mut sent);
            }
            if c.push((i, req.clone()), *at, &mut out) {
                dropped.push(i - 1);
            }
            record(&mut out, *at, &mut sent);
        }
        // The input ends: the held one goes out at once.
        out.extend(c.release());
        record(&mut out, input[n - 1].0, &mut sent);
        assert!(c.deadline().is_none());

        // Never reordered, and every request either went out or was dropped, once.
        assert!(
            sent.windows(2).all(|w| w[0].0 < w[1].0),
            "reordered: {sent:?}"
        );
        let mut seen: Vec<usize> = sent
            .iter()
            .map(|s| s.0)
            .chain(dropped.iter().copied())
            .collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..n).collect::<Vec<_>>(), "lost or doubled");
        total_dropped += dropped.len();
        for &d in &dropped {
            // Only a commit-only request, and only one its successor covers.
            let (held, next) = (&input[d].1, &input[d + 1].1);
            assert!(held.entries.is_empty(), "dropped a request with entries");
            assert_eq!(held.vote, next.vote);
            assert_eq!(held.prev_log_id, next.prev_log_id);
            assert!(held.leader_commit <= next.leader_commit);
        }
        for &(i, at) in &sent {
            let (arrived, req) = &input[i];
            if req.entries.is_empty() {
                // Out within the hold of the first of the chain it replaced.
                let mut first = i;
                while first > 0 && dropped.contains(&(first - 1)) {
                    first -= 1;
                }
                assert!(at >= *arrived);
                assert!(at <= input[first].0 + COMMIT_HOLD, "held too long");
            } else {
                assert_eq!(at, *arrived, "a request with entries was held");
            }
        }
    }
    assert!(
        total_dropped > 300,
        "the draws should exercise the rule: {total_dropped}"
    );
    assert!(
        total_expired > 300,
        "the draws should let holds run out before the next arrival: {total_expired}"
    );
}

/// A request's vote, `prev_log_id`, commit and entries' log ids.
type Key = (Vote, Option<LogId>, Option<LogId>, Vec<LogId>);

/// What tells requests apart (openraft's request has no `PartialEq`).
fn keys(reqs: &[Req]) -> Vec<Key> {
    reqs.iter()
        .map(|r| {
            let entries = r.entries.iter().map(|e| e.log_id).collect();
            (r.vote, r.prev_log_id, r.leader_commit, entries)
        })
        .collect()
}

#[test]
fn a_commit_only_append_is_dropped_for_the_next_write_and_held_alone_otherwise() {
    let t0 = Instant::now();
    let vote = Vote::new_committed(3, 1);
    let commit_only = |prev: u64, commit: u64| Req {
        vote,
        prev_log_id: Some(log_id(3, 1, prev)),
        leader_commit: Some(log_id(3, 1, commit)),
        entries: vec![],
    };
    let write = |prev: u64, commit: u64| Req {
        entries: vec![Entry {
            log_id: log_id(3, 1, prev + 1),
            payload: openraft::EntryPayload::Blank,
        }],
        ..commit_only(prev, commit)
    };
    let mut c = Coalescer::default();
    let mut out = Vec::new();
    // The commit of entry 5 is held, then the write of entry 6 carries it.
    assert!(!c.push(commit_only(5, 5), t0, &mut out));
    assert!(out.is_empty());
    assert_eq!(c.deadline(), Some(t0 + COMMIT_HOLD));
    assert!(c.push(write(5, 5), t0 + Duration::from_micros(100), &mut out));
    assert_eq!(keys(&out), keys(&[write(5, 5)]));
    assert_eq!(c.deadline(), None);
    // A lower commit does not cover: both go out, in order.
    out.clear();
    c.push(commit_only(6, 6), t0, &mut out);
    assert!(!c.push(write(6, 5), t0, &mut out));
    assert_eq!(keys(&out), keys(&[commit_only(6, 6), write(6, 5)]));
    // Another vote does not cover.
    out.clear();
    c.push(commit_only(7, 7), t0, &mut out);
    let other = Req {
        vote: Vote::new_committed(4, 2),
        ..write(7, 7)
    };
    assert!(!c.push(other.clone(), t0, &mut out));
    assert_eq!(keys(&out), keys(&[commit_only(7, 7), other]));
    // A chain of commit-only requests keeps the first one's deadline.
    out.clear();
    c.push(commit_only(8, 7), t0, &mut out);
    assert!(c.push(commit_only(8, 8), t0 + Duration::from_micros(200), &mut out));
    assert!(out.is_empty());
    assert_eq!(c.deadline(), Some(t0 + COMMIT_HOLD));
    assert_eq!(
        keys(&c.release().into_iter().collect::<Vec<_>>()),
        keys(&[commit_only(8, 8)])
    );
    assert!(c.release().is_none());
}

#[test]
fn failed_opens_back_off_doubling_up_to_the_cap() {
    let waits: Vec<u64> = (0..8).map(|n| open_backoff(n).as_millis() as u64).collect();
    assert_eq!(waits, vec![0, 10, 20, 40, 80, 160, 250, 250]);
    assert_eq!(open_backoff(u32::MAX), OPEN_BACKOFF_MAX);
}
