//! A linearizability checker for one register (SET, GET, DEL, INCR on a key), after
//! Wing & Gong with Lowe's just-in-time search and memoisation (the algorithm Porcupine
//! uses). Keys are independent, so histories are checked one key at a time.
//!
//! An operation whose outcome is unknown may have taken effect at any point after its
//! invocation, or never: it gets a return time of infinity and matches any output. Since
//! nothing after the end of the history can observe it, "never" is the same as "at the end".

use std::collections::{BTreeMap, HashSet};

use super::check::Finding;
use super::history::{Op, Outcome};

/// A register operation with its observed output (`None`: unknown, matches anything).
#[derive(Clone, Copy, Debug)]
enum RegOp {
    Set(i64),
    Get(Option<Option<i64>>),
    Del(Option<i64>),
    Incr(Option<i64>),
}

/// Applies `op` to the register's state; `None` if its observed output is impossible.
fn step(state: Option<i64>, op: RegOp) -> Option<Option<i64>> {
    match op {
        RegOp::Set(v) => Some(Some(v)),
        RegOp::Get(out) => (out.is_none() || out == Some(state)).then_some(state),
        RegOp::Del(out) => {
            let n = state.is_some() as i64;
            (out.is_none() || out == Some(n)).then_some(None)
        }
        RegOp::Incr(out) => {
            let v = state.unwrap_or(0) + 1;
            (out.is_none() || out == Some(v)).then_some(Some(v))
        }
    }
}

/// The register operation an `Op` stands for; `None` for ops that tell nothing (a read
/// with no answer, a refused write).
fn reg_op(op: &Op) -> Option<RegOp> {
    let known = op.outcome == Outcome::Ok;
    if op.outcome == Outcome::Fail {
        return None;
    }
    match op.f.as_str() {
        "set" => Some(RegOp::Set(op.arg_i64()?)),
        "get" if known => Some(RegOp::Get(Some(op.result_i64()))),
        "del" => Some(RegOp::Del(if known { op.result_i64() } else { None })),
        "incr" => Some(RegOp::Incr(if known { op.result_i64() } else { None })),
        _ => None,
    }
}

/// Search steps allowed per key before the result is reported as inconclusive.
const BUDGET: u64 = 5_000_000;

/// Result of checking one key.
pub enum Verdict {
    /// A linearization exists.
    Ok,
    /// None exists; the window holds the operations around where the search got stuck.
    Violation(Finding),
    /// The search ran out of budget.
    Inconclusive,
}

/// Checks every key's history in `ops` (ops whose key starts with `prefix`).
/// Returns (keys checked, findings, inconclusive keys).
pub fn check_registers(ops: &[Op], prefix: &str) -> (usize, Vec<Finding>, Vec<String>) {
    let mut by_key: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
    for op in ops.iter().filter(|o| o.key.starts_with(prefix)) {
        by_key.entry(&op.key).or_default().push(op);
    }
    let (mut findings, mut inconclusive) = (Vec::new(), Vec::new());
    for (key, kops) in &by_key {
        match check_key(kops) {
            Verdict::Ok => {}
            Verdict::Violation(f) => findings.push(f),
            Verdict::Inconclusive => inconclusive.push(key.to_string()),
        }
    }
    (by_key.len(), findings, inconclusive)
}

/// One call or return in the time-ordered event list.
struct Event {
    op: usize,
    is_call: bool,
}

/// Checks one key's operations (all on the same key, starting from a missing key).
pub fn check_key(ops: &[&Op]) -> Verdict {
    let kept: Vec<(&Op, RegOp)> = ops.iter().filter_map(|o| Some((*o, reg_op(o)?))).collect();
    let n = kept.len();
    let ret_time = |o: &Op| {
        if o.outcome == Outcome::Unknown {
            u64::MAX
        } else {
            o.ret
        }
    };
    // (time, calls before returns at equal times, op)
    let mut order: Vec<(u64, bool, usize)> = Vec::with_capacity(2 * n);
    for (i, (o, _)) in kept.iter().enumerate() {
        order.push((o.inv, false, i));
        order.push((ret_time(o), true, i));
    }
    order.sort();
    let events: Vec<Event> = order
        .iter()
        .map(|&(_, is_ret, op)| Event {
            op,
            is_call: !is_ret,
        })
        .collect();
    let m = events.len();
    let (head, tail) = (m, m + 1);
    let mut next: Vec<usize> = (0..m + 2)
        .map(|i| if i == head { 0 } else { i + 1 })
        .collect();
    let mut prev: Vec<usize> = (0..m + 2)
        .map(|i| if i == 0 { head } else { i.wrapping_sub(1) })
        .collect();
    if m == 0 {
        return Verdict::Ok;
    }
    next[m - 1] = tail;
    prev[tail] = m - 1;
    let mut ret_of = vec![0usize; n];
    for (i, e) in events.iter().enumerate() {
        if !e.is_call {
            ret_of[e.op] = i;
        }
    }
    let unlink = |next: &mut Vec<usize>, prev: &mut Vec<usize>, e: usize| {
        next[prev[e]] = next[e];
        prev[next[e]] = prev[e];
    };
    let relink = |next: &mut Vec<usize>, prev: &mut Vec<usize>, e: usize| {
        next[prev[e]] = e;
        prev[next[e]] = e;
    };

    let mut bits = vec![0u64; n.div_ceil(64)];
    let mut cache: HashSet<(Vec<u64>, Option<i64>)> = HashSet::new();
    let mut stack: Vec<(usize, Option<i64>)> = Vec::new();
    let mut state: Option<i64> = None;
    let mut cur = next[head];
    let (mut steps, mut deepest, mut stuck) = (0u64, 0usize, 0usize);
    while next[head] != tail {
        steps += 1;
        if steps > BUDGET {
            return Verdict::Inconclusive;
        }
        let e = &events[cur];
        if e.is_call {
            let op = e.op;
            if let Some(ns) = step(state, kept[op].1) {
                bits[op / 64] |= 1 << (op % 64);
                if cache.insert((bits.clone(), ns)) {
                    stack.push((cur, state));
                    state = ns;
                    unlink(&mut next, &mut prev, cur);
                    unlink(&mut next, &mut prev, ret_of[op]);
                    cur = next[head];
                    continue;
                }
                bits[op / 64] &= !(1 << (op % 64));
            }
            cur = next[cur];
        } else {
            if stack.len() >= deepest {
                deepest = stack.len();
                stuck = e.op;
            }
            let Some((call, s)) = stack.pop() else {
                return Verdict::Violation(window(&kept, stuck));
            };
            let op = events[call].op;
            state = s;
            bits[op / 64] &= !(1 << (op % 64));
            relink(&mut next, &mut prev, ret_of[op]);
            relink(&mut next, &mut prev, call);
            cur = next[call];
        }
    }
    Verdict::Ok
}

/// The operations around the one whose return the search could not get past: every op
/// overlapping it, and the last few that completed before it began.
fn window(kept: &[(&Op, RegOp)], stuck: usize) -> Finding {
    let s = kept[stuck].0;
    let s_ret = if s.outcome == Outcome::Unknown {
        u64::MAX
    } else {
        s.ret
    };
    let mut before: Vec<&Op> = kept.iter().map(|k| k.0).filter(|o| o.ret < s.inv).collect();
    before.sort_by_key(|o| o.ret);
    let mut w: Vec<Op> = before.iter().rev().take(4).map(|o| (*o).clone()).collect();
    w.extend(
        kept.iter()
            .map(|k| k.0)
            .filter(|o| o.ret >= s.inv && o.inv <= s_ret)
            .cloned(),
    );
    w.sort_by_key(|o| o.inv);
    Finding {
        checker: "linearizable".into(),
        message: format!(
            "{}: no linearization; the search could not get past {} {}",
            s.key,
            s.f,
            s.describe()
        ),
        window: w,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chaos::check::tests::op;

    /// An acknowledged register operation on key "r" (times in ms).
    fn reg(c: u32, f: &str, t: (u64, u64), result: Option<&str>) -> Op {
        op(c, f, "r", t, result)
    }

    fn set(c: u32, v: &str, t: (u64, u64)) -> Op {
        reg(c, "set", t, Some("OK")).with_arg(v)
    }

    fn verdict(ops: &[Op]) -> &'static str {
        let refs: Vec<&Op> = ops.iter().collect();
        match check_key(&refs) {
            Verdict::Ok => "ok",
            Verdict::Violation(_) => "violation",
            Verdict::Inconclusive => "inconclusive",
        }
    }

    #[test]
    fn accepts_concurrent_reads_of_old_or_new_value() {
        let ops = vec![
            set(0, "1", (0, 10)),
            set(0, "2", (20, 40)),
            reg(1, "get", (25, 30), Some("1")),
            reg(2, "get", (26, 35), Some("2")),
            reg(1, "incr", (50, 60), Some("3")),
            reg(2, "del", (70, 80), Some("1")),
            reg(1, "get", (90, 95), None),
        ];
        assert_eq!(verdict(&ops), "ok");
    }

    #[test]
    fn catches_a_stale_read() {
        let ops = vec![
            set(0, "1", (0, 10)),
            set(0, "2", (20, 30)),
            reg(1, "get", (40, 50), Some("1")),
        ];
        assert_eq!(verdict(&ops), "violation");
        let refs: Vec<&Op> = ops.iter().collect();
        let Verdict::Violation(f) = check_key(&refs) else {
            unreachable!()
        };
        assert!(f.window.iter().any(|o| o.f == "get"), "{}", f.describe());
    }

    #[test]
    fn catches_a_lost_increment() {
        let ops = vec![
            reg(0, "incr", (0, 10), Some("1")),
            reg(1, "incr", (20, 30), Some("1")),
        ];
        assert_eq!(verdict(&ops), "violation");
    }

    #[test]
    fn unknown_writes_may_or_may_not_have_happened() {
        let unknown_incr = || reg(0, "incr", (0, 10), None).unknown();
        let happened = vec![unknown_incr(), reg(1, "get", (20, 30), Some("1"))];
        assert_eq!(verdict(&happened), "ok");
        let not_happened = vec![
            unknown_incr(),
            reg(1, "get", (20, 30), None),
            set(1, "7", (40, 50)),
            reg(1, "get", (60, 70), Some("7")),
        ];
        assert_eq!(verdict(&not_happened), "ok");
        // ...but it cannot have happened twice.
        let twice = vec![unknown_incr(), reg(1, "get", (20, 30), Some("2"))];
        assert_eq!(verdict(&twice), "violation");
    }
}
