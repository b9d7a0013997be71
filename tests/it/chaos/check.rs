//! Checkers for the fenced counter (and its controls), the lock model and durability.
//! Each takes a history and returns findings; an empty list means no violation. The
//! linearizable-register checker lives in `linear`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;

use super::history::{Op, Outcome};

/// One violation, with the smallest set of operations that shows it.
#[derive(Serialize, Clone, Debug)]
pub struct Finding {
    /// Which checker found it.
    pub checker: String,
    /// What is wrong, in words.
    pub message: String,
    /// The operations that show it, in invocation order.
    pub window: Vec<Op>,
}

impl Finding {
    fn new(checker: &str, message: String, mut window: Vec<Op>) -> Finding {
        window.sort_by_key(|o| o.inv);
        Finding {
            checker: checker.into(),
            message,
            window,
        }
    }

    /// The finding and its window as text.
    pub fn describe(&self) -> String {
        let mut s = format!("[{}] {}\n", self.checker, self.message);
        for op in &self.window {
            s.push_str(&format!("    {}\n", op.describe()));
        }
        s
    }
}

// ---------------------------------------------------------------------------------------
// Fenced counter
// ---------------------------------------------------------------------------------------

/// What the counter checker counted.
#[derive(Serialize, Clone, Debug, Default)]
pub struct CounterSummary {
    /// Writes of value+1 that the server acknowledged.
    pub acked: usize,
    /// Writes whose outcome is unknown.
    pub unknown: usize,
    /// Writes refused with -FENCED.
    pub fenced_rejections: usize,
    /// Reads refused with -FENCED.
    pub fenced_read_rejections: usize,
    /// The value read after the run.
    pub final_value: Option<i64>,
    /// Acknowledged increments that were lost (acked - final, when positive).
    pub lost: usize,
}

/// Checks the read-modify-write counter on `key`: accepted fenced accesses are ordered by
/// token, no two acknowledged writes wrote the same value, and the final value equals the
/// acknowledged increments give or take the unknown ones.
pub fn check_counter(
    ops: &[Op],
    key: &str,
    final_value: Option<i64>,
) -> (CounterSummary, Vec<Finding>) {
    let on_key: Vec<&Op> = ops.iter().filter(|o| o.key == key).collect();
    let mut findings = fence_order(&on_key);
    let mut sum = CounterSummary {
        final_value,
        ..Default::default()
    };
    let mut by_value: HashMap<i64, &Op> = HashMap::new();
    for op in on_key.iter().filter(|o| o.f == "set" || o.f == "fencedset") {
        match op.outcome {
            Outcome::Unknown => sum.unknown += 1,
            Outcome::Fail => sum.fenced_rejections += 1,
            Outcome::Ok => {
                sum.acked += 1;
                let v = op.arg_i64().unwrap_or(-1);
                if let Some(prev) = by_value.insert(v, op) {
                    let mut window = vec![prev.clone(), (*op).clone()];
                    window.extend(read_before(&on_key, prev).cloned());
                    window.extend(read_before(&on_key, op).cloned());
                    findings.push(Finding::new(
                        "counter",
                        format!("lost update: two acknowledged writes both set {key} to {v}"),
                        window,
                    ));
                }
            }
        }
    }
    sum.fenced_read_rejections = on_key
        .iter()
        .filter(|o| o.f == "fencedget" && o.outcome == Outcome::Fail)
        .count();
    if let Some(f) = final_value {
        let (acked, unknown) = (sum.acked as i64, sum.unknown as i64);
        sum.lost = (acked - f).max(0) as usize;
        if f < acked || f > acked + unknown {
            findings.push(Finding::new(
                "counter",
                format!(
                    "final value {f} is outside [acked {acked}, acked + unknown {}]",
                    acked + unknown
                ),
                Vec::new(),
            ));
        }
    }
    (sum, findings)
}

/// The read the same client made just before `write` on the same key.
fn read_before<'a>(ops: &[&'a Op], write: &Op) -> Option<&'a Op> {
    ops.iter()
        .filter(|o| o.client == write.client && o.ret <= write.inv)
        .filter(|o| o.f == "get" || o.f == "fencedget")
        .max_by_key(|o| o.ret)
        .copied()
}

/// Every accepted FENCEDGET/FENCEDSET carries a token at least as high as every token
/// accepted before it (in real time: completed before it was invoked).
fn fence_order(ops: &[&Op]) -> Vec<Finding> {
    let mut accepted: Vec<&Op> = ops
        .iter()
        .filter(|o| o.outcome == Outcome::Ok && o.token.is_some())
        .filter(|o| o.f == "fencedget" || o.f == "fencedset")
        .copied()
        .collect();
    let mut by_ret = accepted.clone();
    by_ret.sort_by_key(|o| o.ret);
    accepted.sort_by_key(|o| o.inv);
    let mut findings = Vec::new();
    let mut done = 0;
    let mut highest: Option<&Op> = None;
    for op in accepted {
        while done < by_ret.len() && by_ret[done].ret < op.inv {
            if highest.is_none_or(|h| by_ret[done].token > h.token) {
                highest = Some(by_ret[done]);
            }
            done += 1;
        }
        if let Some(h) = highest {
            if op.token < h.token {
                findings.push(Finding::new(
                    "fence",
                    format!(
                        "accepted token {} after token {} had been accepted on {}",
                        op.token.unwrap_or(0),
                        h.token.unwrap_or(0),
                        op.key
                    ),
                    vec![h.clone(), op.clone()],
                ));
            }
        }
    }
    findings
}

// ---------------------------------------------------------------------------------------
// Lock model
// ---------------------------------------------------------------------------------------

/// What the lock checker counted.
#[derive(Serialize, Clone, Debug, Default)]
pub struct LockSummary {
    /// Distinct grants (tokens).
    pub grants: usize,
    /// Re-LOCKs by the holder that the checker could hold to "same token".
    pub relocks_checked: usize,
    /// Pairs of grants on one key checked for lease overlap.
    pub lease_pairs_checked: usize,
}

/// One acquisition: the token an owner got for a key, and what bounds its lease.
struct Grant<'a> {
    token: i64,
    key: &'a str,
    owner: &'a str,
    /// Earliest invocation of any LOCK by this owner on this key (the grant is after it).
    first_inv: u64,
    /// Earliest completion of an acknowledged LOCK returning the token.
    first_ret: u64,
    /// The lease is certainly live until here (real time, clock-rate slack removed).
    valid_until: u64,
    ops: Vec<&'a Op>,
}

/// Checks LOCK/RENEW/UNLOCK histories: tokens unique and increasing in real-time order of
/// grants, re-LOCK by the holder returns the same token, and no second owner is granted a
/// key while an acknowledged lease is within its TTL. `ttl_ms` is the PX every client
/// used; `rate_slack` is the fraction by which a leader's clock may run fast.
pub fn check_locks(ops: &[Op], ttl_ms: u64, rate_slack: f64) -> (LockSummary, Vec<Finding>) {
    let mut findings = Vec::new();
    let mut sum = LockSummary::default();
    let lease_us = ((ttl_ms as f64) * (1.0 - rate_slack) * 1000.0) as u64;
    let lease_us = lease_us.saturating_sub(2_000); // ms rounding on both sides
    let mut first_inv: HashMap<(&str, &str), u64> = HashMap::new();
    let mut by_owner: HashMap<(&str, &str), Vec<&Op>> = HashMap::new();
    for op in ops.iter().filter(|o| o.f == "lock") {
        let owner = op.arg.as_deref().unwrap_or("");
        let e = first_inv.entry((op.key.as_str(), owner)).or_insert(op.inv);
        *e = (*e).min(op.inv);
        by_owner
            .entry((op.key.as_str(), owner))
            .or_default()
            .push(op);
    }
    let mut grants: BTreeMap<i64, Grant> = BTreeMap::new();
    for op in ops.iter().filter(|o| o.f == "lock" || o.f == "renew") {
        let (Outcome::Ok, Some(token)) = (op.outcome, op.result_i64()) else {
            continue;
        };
        let owner = op.arg.as_deref().unwrap_or("");
        let g = grants.entry(token).or_insert_with(|| Grant {
            token,
            key: &op.key,
            owner,
            first_inv: first_inv
                .get(&(op.key.as_str(), owner))
                .copied()
                .unwrap_or(op.inv),
            first_ret: u64::MAX,
            valid_until: 0,
            ops: Vec::new(),
        });
        if g.key != op.key || g.owner != owner {
            findings.push(Finding::new(
                "locks",
                format!(
                    "token {token} granted twice: {}/{} and {}/{owner}",
                    g.key, g.owner, op.key
                ),
                vec![g.ops[0].clone(), op.clone()],
            ));
            continue;
        }
        if op.f == "lock" {
            g.first_ret = g.first_ret.min(op.ret);
        }
        g.valid_until = g.valid_until.max(op.inv + lease_us);
        g.ops.push(op);
    }
    // An UNLOCK (whatever its outcome) may end the lease from its invocation on.
    let mut unlocks: HashMap<(&str, &str), u64> = HashMap::new();
    for op in ops.iter().filter(|o| o.f == "unlock") {
        let e = unlocks
            .entry((op.key.as_str(), op.arg.as_deref().unwrap_or("")))
            .or_insert(op.inv);
        *e = (*e).min(op.inv);
    }
    for g in grants.values_mut() {
        if let Some(&u) = unlocks.get(&(g.key, g.owner)) {
            g.valid_until = g.valid_until.min(u.max(g.first_inv));
        }
    }
    sum.grants = grants.len();
    findings.extend(token_order(&grants));
    // Re-LOCK while the lease was certainly live (counted from the owner's first LOCK, and
    // before any UNLOCK by it) must return the same token.
    for g in grants.values() {
        let Some(first) = g.ops.iter().filter(|o| o.f == "lock").min_by_key(|o| o.ret) else {
            continue;
        };
        let unlocked = unlocks.get(&(g.key, g.owner)).copied().unwrap_or(u64::MAX);
        for op in by_owner.get(&(g.key, g.owner)).into_iter().flatten() {
            if op.inv <= first.ret || op.outcome != Outcome::Ok {
                continue;
            }
            if op.ret < g.first_inv + lease_us && op.ret < unlocked {
                sum.relocks_checked += 1;
                if op.result_i64() != Some(g.token) {
                    findings.push(Finding::new(
                        "locks",
                        format!(
                            "re-LOCK by holder {} within its lease returned {:?}, not token {}",
                            g.owner, op.result, g.token
                        ),
                        vec![(*first).clone(), (*op).clone()],
                    ));
                }
            }
        }
    }
    // No grant to another owner while an acknowledged lease is live.
    let mut by_key: BTreeMap<&str, Vec<&Grant>> = BTreeMap::new();
    for g in grants.values() {
        by_key.entry(g.key).or_default().push(g);
    }
    for gs in by_key.values() {
        // In token order, the two earlier grants (of different owners) whose leases last
        // longest: a later grant must not complete before the one of another owner ends.
        let mut best: Vec<&Grant> = Vec::new();
        for b in gs {
            if b.first_ret != u64::MAX {
                sum.lease_pairs_checked += 1;
                if let Some(a) = best.iter().find(|a| a.owner != b.owner) {
                    if b.first_ret < a.valid_until {
                        findings.push(early_grant(a, b));
                    }
                }
            }
            best.push(b);
            best.sort_by_key(|g| std::cmp::Reverse(g.valid_until));
            let top = best[0].owner;
            let second = best.iter().skip(1).find(|g| g.owner != top).copied();
            best.truncate(1);
            best.extend(second);
        }
    }
    (sum, findings)
}

/// What the shared-hold checker counted.
#[derive(Serialize, Clone, Debug, Default)]
pub struct HoldSummary {
    /// Acknowledged RLOCK grants (tokens).
    pub shared: usize,
    /// Acknowledged SEMACQUIRE grants (tokens).
    pub permits: usize,
    /// Pairs of certainly-live holds on one key checked for a conflict.
    pub pairs_checked: usize,
    /// The most semaphore permits seen certainly live together.
    pub max_permits: usize,
}

/// One acknowledged hold of any kind, and when it was certainly held.
struct Held<'a> {
    token: i64,
    key: &'a str,
    owner: &'a str,
    /// `lock`, `rlock` or `semacquire` (empty: seen in RENEW replies only).
    kind: &'a str,
    from: u64,
    until: u64,
    ops: Vec<&'a Op>,
}

/// Checks LOCK, RLOCK and SEMACQUIRE together: each acknowledged grant is certainly held
/// from the completion of the first request that returned its token until its lease could
/// have run out (counted from the last acknowledged request's invocation, clock-rate slack
/// removed) or its owner's first UNLOCK was sent. Readers may overlap; a LOCK holder never
/// overlaps a holder of another owner; at most `limit` semaphore holders overlap.
pub fn check_holds(
    ops: &[Op],
    ttl_ms: u64,
    rate_slack: f64,
    limit: usize,
) -> (HoldSummary, Vec<Finding>) {
    let mut findings = Vec::new();
    let mut sum = HoldSummary::default();
    let lease_us = ((ttl_ms as f64) * (1.0 - rate_slack) * 1000.0) as u64;
    let lease_us = lease_us.saturating_sub(2_000);
    let kinds = ["lock", "rlock", "semacquire"];
    let mut holds: BTreeMap<i64, Held> = BTreeMap::new();
    for op in ops
        .iter()
        .filter(|o| kinds.contains(&o.f.as_str()) || o.f == "renew")
    {
        let (Outcome::Ok, Some(token)) = (op.outcome, op.result_i64()) else {
            continue;
        };
        let h = holds.entry(token).or_insert(Held {
            token,
            key: &op.key,
            owner: op.arg.as_deref().unwrap_or(""),
            kind: "",
            from: u64::MAX,
            until: 0,
            ops: Vec::new(),
        });
        if kinds.contains(&op.f.as_str()) {
            h.kind = &op.f;
            h.from = h.from.min(op.ret);
        }
        h.until = h.until.max(op.inv + lease_us);
        h.ops.push(op);
    }
    let mut unlocks: HashMap<(&str, &str), u64> = HashMap::new();
    for op in ops.iter().filter(|o| o.f == "unlock") {
        let e = unlocks
            .entry((op.key.as_str(), op.arg.as_deref().unwrap_or("")))
            .or_insert(op.inv);
        *e = (*e).min(op.inv);
    }
    let mut by_key: BTreeMap<&str, Vec<Held>> = BTreeMap::new();
    for mut h in holds.into_values() {
        match h.kind {
            "rlock" => sum.shared += 1,
            "semacquire" => sum.permits += 1,
            _ => {}
        }
        if let Some(u) = unlocks.get(&(h.key, h.owner)) {
            h.until = h.until.min(*u);
        }
        if !h.kind.is_empty() && h.from < h.until {
            by_key.entry(h.key).or_default().push(h);
        }
    }
    for hs in by_key.values() {
        for (i, a) in hs.iter().enumerate() {
            for b in &hs[i + 1..] {
                if a.from >= b.until || b.from >= a.until {
                    continue;
                }
                sum.pairs_checked += 1;
                let exclusive = a.kind == "lock" || b.kind == "lock";
                let mixed = a.kind != b.kind;
                if a.owner != b.owner && (exclusive || mixed) {
                    let window = a
                        .ops
                        .iter()
                        .chain(b.ops.iter())
                        .map(|o| (*o).clone())
                        .collect();
                    findings.push(Finding::new(
                        "holds",
                        format!(
                            "{} (token {}) by {} and {} (token {}) by {} held together",
                            a.kind, a.token, a.owner, b.kind, b.token, b.owner
                        ),
                        window,
                    ));
                }
            }
        }
        // Semaphore holders live together: sweep the interval ends.
        let mut edges: Vec<(u64, i32, i64)> = hs
            .iter()
            .filter(|h| h.kind == "semacquire")
            .flat_map(|h| [(h.from, 1, h.token), (h.until, -1, h.token)])
            .collect();
        edges.sort_by_key(|e| (e.0, e.1));
        let mut live: Vec<i64> = Vec::new();
        for (_, d, token) in edges {
            if d > 0 {
                live.push(token);
            } else {
                live.retain(|t| *t != token);
            }
            sum.max_permits = sum.max_permits.max(live.len());
            if live.len() > limit {
                let window = hs
                    .iter()
                    .filter(|h| live.contains(&h.token))
                    .flat_map(|h| h.ops.iter().map(|o| (*o).clone()))
                    .collect();
                findings.push(Finding::new(
                    "holds",
                    format!(
                        "{} semaphore permits held together, limit {limit}",
                        live.len()
                    ),
                    window,
                ));
                break;
            }
        }
    }
    (sum, findings)
}

/// The finding for grant `b` completing while the lease of `a` was still live.
fn early_grant(a: &Grant, b: &Grant) -> Finding {
    let bop = b.ops.iter().find(|o| o.ret == b.first_ret).copied();
    let mut window: Vec<Op> = a.ops.iter().map(|o| (*o).clone()).collect();
    window.extend(bop.cloned());
    Finding::new(
        "locks",
        format!(
            "{} granted to {} (token {}) {:.1} ms before the lease of {} (token {}) could have expired",
            a.key,
            b.owner,
            b.token,
            (a.valid_until - b.first_ret) as f64 / 1000.0,
            a.owner,
            a.token
        ),
        window,
    )
}

/// A grant that completed before another grant was first invoked has the lower token.
fn token_order(grants: &BTreeMap<i64, Grant>) -> Vec<Finding> {
    let mut by_inv: Vec<&Grant> = grants
        .values()
        .filter(|g| g.first_ret != u64::MAX)
        .collect();
    let mut by_ret = by_inv.clone();
    by_inv.sort_by_key(|g| g.first_inv);
    by_ret.sort_by_key(|g| g.first_ret);
    let mut findings = Vec::new();
    let (mut done, mut highest): (usize, Option<&Grant>) = (0, None);
    for g in by_inv {
        while done < by_ret.len() && by_ret[done].first_ret < g.first_inv {
            if highest.is_none_or(|h| by_ret[done].token > h.token) {
                highest = Some(by_ret[done]);
            }
            done += 1;
        }
        if let Some(h) = highest {
            if g.token <= h.token {
                findings.push(Finding::new(
                    "locks",
                    format!(
                        "token {} granted after token {} had been granted (real-time order)",
                        g.token, h.token
                    ),
                    vec![h.ops[0].clone(), g.ops[0].clone()],
                ));
            }
        }
    }
    findings
}

// ---------------------------------------------------------------------------------------
// One token, one grant
// ---------------------------------------------------------------------------------------

/// The operations whose integer reply is a fencing token for a (key, owner) grant: LOCK
/// (the lock and counter workloads), RENEW, LOCK ... WAIT (the lock-queue workload), and
/// LOCK directly or inside a script (the script workload).
pub const GRANT_OPS: [&str; 4] = ["lock", "renew", "qlock", "slock"];

/// What the token checker counted.
#[derive(Serialize, Clone, Debug, Default)]
pub struct TokenSummary {
    /// Acknowledged replies that carried a token.
    pub replies: usize,
    /// Distinct tokens among them.
    pub tokens: usize,
}

/// One token, one grant (design.md section 9): every token any client was given, whatever
/// the workload and the key, belongs to exactly one (key, owner) pair across the whole run.
/// The same owner re-locking and getting its own token again is the only repetition.
pub fn check_tokens(ops: &[Op]) -> (TokenSummary, Vec<Finding>) {
    let mut sum = TokenSummary::default();
    let mut findings = Vec::new();
    let mut first: BTreeMap<i64, &Op> = BTreeMap::new();
    // One finding per (token, pair): a duplicate grant is often re-LOCKed.
    let mut reported: BTreeSet<(i64, &str, &str)> = BTreeSet::new();
    let grants = ops
        .iter()
        .filter(|o| o.outcome == Outcome::Ok && GRANT_OPS.contains(&o.f.as_str()));
    for op in grants {
        let Some(token) = op.result_i64() else {
            continue;
        };
        sum.replies += 1;
        let owner = op.arg.as_deref().unwrap_or("");
        let prev = *first.entry(token).or_insert(op);
        let prev_owner = prev.arg.as_deref().unwrap_or("");
        if (prev.key.as_str(), prev_owner) == (op.key.as_str(), owner)
            || !reported.insert((token, &op.key, owner))
        {
            continue;
        }
        findings.push(Finding::new(
            "tokens",
            format!(
                "token {token} given to two grants: {}/{prev_owner} and {}/{owner}",
                prev.key, op.key
            ),
            vec![prev.clone(), op.clone()],
        ));
    }
    sum.tokens = first.len();
    (sum, findings)
}

// ---------------------------------------------------------------------------------------
// Durability
// ---------------------------------------------------------------------------------------

/// Every acknowledged SET is still readable after the cluster restarted: `read` maps each
/// key to the value read back afterwards (`None` = missing).
pub fn check_durability(
    ops: &[Op],
    read: &HashMap<String, Option<String>>,
) -> (usize, Vec<Finding>) {
    let mut findings = Vec::new();
    let mut acked = 0;
    for op in ops
        .iter()
        .filter(|o| o.f == "set" && o.outcome == Outcome::Ok)
    {
        if !read.contains_key(&op.key) {
            continue;
        }
        acked += 1;
        let got = read[&op.key].as_deref();
        if got != op.arg.as_deref() {
            findings.push(Finding::new(
                "durability",
                format!(
                    "acknowledged write {}={} reads back as {:?} after the restart",
                    op.key,
                    op.arg.as_deref().unwrap_or(""),
                    got
                ),
                vec![op.clone()],
            ));
        }
    }
    (acked, findings)
}

/// What the queue workload did: pushes and pops acknowledged.
#[derive(Serialize, Clone, Debug, Default)]
pub struct QueueSummary {
    /// RPUSHes acknowledged.
    pub pushed: usize,
    /// BLPOPs that returned an item.
    pub popped: usize,
    /// BLPOPs that timed out (null).
    pub timed_out: usize,
}

/// The queue workload's safety: every item popped was pushed (and its push had started
/// before the pop returned), and no item was popped twice.
pub fn check_queue(ops: &[Op]) -> (QueueSummary, Vec<Finding>) {
    let mut findings = Vec::new();
    let mut sum = QueueSummary::default();
    let pushes: HashMap<&str, &Op> = ops
        .iter()
        .filter(|o| o.f == "push")
        .filter_map(|o| Some((o.arg.as_deref()?, o)))
        .collect();
    sum.pushed = ops
        .iter()
        .filter(|o| o.f == "push" && o.outcome == Outcome::Ok)
        .count();
    let mut popped: HashMap<&str, &Op> = HashMap::new();
    for pop in ops
        .iter()
        .filter(|o| o.f == "bpop" && o.outcome == Outcome::Ok)
    {
        let Some(item) = pop.result.as_deref() else {
            sum.timed_out += 1;
            continue;
        };
        sum.popped += 1;
        match pushes.get(item) {
            None => findings.push(Finding::new(
                "queue",
                format!("{item} was popped but never pushed"),
                vec![pop.clone()],
            )),
            Some(push) if push.inv > pop.ret || push.key != pop.key => findings.push(Finding::new(
                "queue",
                format!(
                    "{item} was popped from {} before or without its push",
                    pop.key
                ),
                vec![(*push).clone(), pop.clone()],
            )),
            Some(_) => {}
        }
        if let Some(first) = popped.insert(item, pop) {
            findings.push(Finding::new(
                "queue",
                format!("{item} was popped twice"),
                vec![first.clone(), pop.clone()],
            ));
        }
    }
    (sum, findings)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// An acknowledged operation for crafted histories, from `inv` to `ret` (ms).
    pub fn op(client: u32, f: &str, key: &str, (inv, ret): (u64, u64), result: Option<&str>) -> Op {
        Op {
            client,
            f: f.into(),
            key: key.into(),
            arg: None,
            token: None,
            inv: inv * 1000,
            ret: ret * 1000,
            outcome: Outcome::Ok,
            result: result.map(str::to_string),
        }
    }

    #[test]
    fn the_queue_checker_finds_duplicates_inventions_and_early_pops() {
        let push = |item: &str, (inv, ret)| Op {
            arg: Some(item.into()),
            ..op(1, "push", "q:0", (inv, ret), Some("1"))
        };
        let pop = |item: Option<&str>, key: &str, t| op(2, "bpop", key, t, item);
        let clean = [
            push("a", (0, 1)),
            push("b", (2, 3)),
            pop(Some("a"), "q:0", (1, 2)),
            pop(None, "q:0", (3, 4)),
            pop(Some("b"), "q:0", (2, 5)),
        ];
        let (sum, found) = check_queue(&clean);
        assert!(found.is_empty(), "{found:?}");
        assert_eq!((sum.pushed, sum.popped, sum.timed_out), (2, 2, 1));
        let bad = [
            push("a", (0, 1)),
            push("late", (10, 11)),
            pop(Some("a"), "q:0", (1, 2)),
            pop(Some("a"), "q:0", (3, 4)),
            pop(Some("ghost"), "q:0", (3, 4)),
            pop(Some("late"), "q:0", (5, 6)),
        ];
        let (_, found) = check_queue(&bad);
        let messages: Vec<&str> = found.iter().map(|f| f.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "a was popped twice",
                "ghost was popped but never pushed",
                "late was popped from q:0 before or without its push",
            ]
        );
    }

    impl Op {
        /// With this argument (value written, owner).
        pub fn with_arg(mut self, a: &str) -> Op {
            self.arg = Some(a.into());
            self
        }

        /// With this fencing token.
        pub fn with_token(mut self, t: i64) -> Op {
            self.token = Some(t);
            self
        }

        /// With an unknown outcome (and no result).
        pub fn unknown(mut self) -> Op {
            (self.outcome, self.result) = (Outcome::Unknown, None);
            self
        }
    }

    /// One fenced increment: FENCEDGET then FENCEDSET, by `client` with `token`.
    fn incr(c: u32, token: i64, read: i64, t: u64, ops: &mut Vec<Op>) {
        let (r, w) = (read.to_string(), (read + 1).to_string());
        ops.push(op(c, "fencedget", "ctr", (t, t + 1), Some(&r)).with_token(token));
        ops.push(
            op(c, "fencedset", "ctr", (t + 2, t + 3), Some("OK"))
                .with_arg(&w)
                .with_token(token),
        );
    }

    #[test]
    fn counter_accepts_a_serial_history() {
        let mut ops = Vec::new();
        for i in 0..5 {
            incr(i as u32 % 2, 10 + i, i, 10 * i as u64, &mut ops);
        }
        let (sum, f) = check_counter(&ops, "ctr", Some(5));
        assert!(f.is_empty(), "{f:?}");
        assert_eq!(sum.acked, 5);
    }

    #[test]
    fn counter_catches_a_lost_update() {
        // A reads 0 and pauses; B (token 2) reads 0 and writes 1; A writes 1.
        let mut ops = vec![op(0, "get", "ctr", (0, 1), None)];
        incr(1, 2, 0, 10, &mut ops);
        ops.push(op(0, "set", "ctr", (20, 21), Some("OK")).with_arg("1"));
        let (sum, f) = check_counter(&ops, "ctr", Some(1));
        assert_eq!(sum.lost, 1);
        assert!(f.iter().any(|f| f.message.contains("lost update")), "{f:?}");
        assert!(
            f.iter().any(|f| f.message.contains("final value 1")),
            "{f:?}"
        );
        // The window shows both writes and both reads.
        assert_eq!(f[0].window.len(), 4, "{}", f[0].describe());
    }

    #[test]
    fn counter_allows_unknown_writes_either_way() {
        let mut ops = Vec::new();
        incr(0, 5, 0, 0, &mut ops);
        ops.push(
            op(1, "fencedset", "ctr", (10, 20), None)
                .with_arg("2")
                .with_token(6)
                .unknown(),
        );
        for fin in [1, 2] {
            assert!(check_counter(&ops, "ctr", Some(fin)).1.is_empty());
        }
        assert!(!check_counter(&ops, "ctr", Some(3)).1.is_empty());
        assert!(!check_counter(&ops, "ctr", Some(0)).1.is_empty());
    }

    #[test]
    fn fence_checker_catches_a_lower_token_accepted_later() {
        let mut ops = Vec::new();
        incr(0, 7, 0, 0, &mut ops);
        // Token 6 accepted after token 7 completed.
        ops.push(
            op(1, "fencedset", "ctr", (10, 11), Some("OK"))
                .with_arg("9")
                .with_token(6),
        );
        let (_, f) = check_counter(&ops, "ctr", None);
        assert!(f.iter().any(|f| f.checker == "fence"), "{f:?}");
        // Concurrent (overlapping) accesses may be accepted in either order.
        let ops = vec![
            op(0, "fencedset", "ctr", (0, 10), Some("OK"))
                .with_arg("1")
                .with_token(7),
            op(1, "fencedset", "ctr", (5, 11), Some("OK"))
                .with_arg("2")
                .with_token(6),
        ];
        let (_, f) = check_counter(&ops, "ctr", None);
        assert!(f.iter().all(|f| f.checker != "fence"), "{f:?}");
    }

    fn lock(c: u32, key: &str, owner: &str, t: (u64, u64), token: Option<i64>) -> Op {
        let token = token.map(|t| t.to_string());
        op(c, "lock", key, t, token.as_deref()).with_arg(owner)
    }

    fn hold(c: u32, f: &str, key: &str, owner: &str, t: (u64, u64), token: i64) -> Op {
        let token = token.to_string();
        op(c, f, key, t, Some(&token)).with_arg(owner)
    }

    #[test]
    fn hold_checker_lets_readers_overlap_and_catches_a_writer_or_a_fourth_permit() {
        let readers = vec![
            hold(0, "rlock", "k", "a", (0, 2), 10),
            hold(1, "rlock", "k", "b", (1, 3), 11),
        ];
        let (sum, f) = check_holds(&readers, 1000, 0.01, 2);
        assert!(f.is_empty(), "{f:?}");
        assert_eq!((sum.shared, sum.pairs_checked), (2, 1));
        let writer = [&readers[..], &[hold(2, "lock", "k", "w", (4, 5), 12)]].concat();
        let (_, f) = check_holds(&writer, 1000, 0.01, 2);
        assert_eq!(f.len(), 2, "{f:?}");
        let permits = vec![
            hold(0, "semacquire", "s", "a", (0, 2), 20),
            hold(1, "semacquire", "s", "b", (0, 3), 21),
            hold(2, "semacquire", "s", "c", (0, 4), 22),
        ];
        let (sum, f) = check_holds(&permits, 1000, 0.01, 2);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(sum.max_permits, 3);
        // After an UNLOCK, the next permit is legal.
        let released = vec![
            hold(0, "semacquire", "s", "a", (0, 2), 20),
            hold(1, "semacquire", "s", "b", (0, 3), 21),
            op(0, "unlock", "s", (10, 11), Some("1")).with_arg("a"),
            hold(2, "semacquire", "s", "c", (12, 14), 22),
        ];
        let (_, f) = check_holds(&released, 1000, 0.01, 2);
        assert!(f.is_empty(), "{f:?}");
    }

    #[test]
    fn lock_checker_accepts_a_clean_history() {
        let ops = vec![
            lock(0, "k", "a", (0, 2), Some(10)),
            lock(0, "k", "a", (50, 52), Some(10)),
            op(0, "unlock", "k", (60, 61), Some("1")).with_arg("a"),
            lock(1, "k", "b", (62, 63), Some(12)),
            lock(2, "k", "c", (70, 71), None),
            // b's lease (1000 ms) ran out; c takes over.
            lock(2, "k", "c", (1100, 1101), Some(15)),
        ];
        let (sum, f) = check_locks(&ops, 1000, 0.01);
        assert!(f.is_empty(), "{f:?}");
        assert_eq!((sum.grants, sum.relocks_checked), (3, 1));
    }

    #[test]
    fn lock_checker_catches_an_early_second_grant() {
        let ops = vec![
            lock(0, "k", "a", (0, 2), Some(10)),
            lock(1, "k", "b", (500, 502), Some(11)),
        ];
        let (_, f) = check_locks(&ops, 1000, 0.01);
        assert!(
            f.iter().any(|f| f.message.contains("before the lease")),
            "{f:?}"
        );
    }

    #[test]
    fn lock_checker_catches_token_reuse_and_disorder() {
        let reuse = vec![
            lock(0, "k", "a", (0, 2), Some(10)),
            lock(1, "j", "b", (5, 6), Some(10)),
        ];
        let (_, f) = check_locks(&reuse, 1000, 0.01);
        assert!(
            f.iter().any(|f| f.message.contains("granted twice")),
            "{f:?}"
        );
        let disorder = vec![
            lock(0, "k", "a", (0, 2), Some(10)),
            lock(1, "j", "b", (5, 6), Some(9)),
        ];
        let (_, f) = check_locks(&disorder, 1000, 0.01);
        assert!(
            f.iter().any(|f| f.message.contains("real-time order")),
            "{f:?}"
        );
    }

    #[test]
    fn lock_checker_catches_a_relock_with_a_new_token() {
        let ops = vec![
            lock(0, "k", "a", (0, 2), Some(10)),
            lock(0, "k", "a", (100, 102), Some(11)),
        ];
        let (_, f) = check_locks(&ops, 1000, 0.01);
        assert!(f.iter().any(|f| f.message.contains("re-LOCK")), "{f:?}");
    }

    /// Two queued waiters given the same token (the MULTI / DEL / UNLOCK report), and one
    /// token on two keys, are found; re-locks and renewals by the holder are not.
    #[test]
    fn token_checker_finds_a_token_given_to_two_grants() {
        let qlock =
            |c, owner: &str, t, token: &str| op(c, "qlock", "lq:0", t, Some(token)).with_arg(owner);
        let clean = vec![
            lock(0, "k", "a", (0, 2), Some(10)),
            lock(0, "k", "a", (5, 6), Some(10)),
            op(0, "renew", "k", (7, 8), Some("10")).with_arg("a"),
            qlock(1, "q1", (3, 9), "11"),
            qlock(2, "q2", (4, 12), "12"),
            qlock(2, "q2", (4, 12), "12").unknown(),
            // A nil LOCK and an unknown one carry no token.
            lock(3, "k", "b", (1, 2), None),
        ];
        let (sum, f) = check_tokens(&clean);
        assert!(f.is_empty(), "{f:?}");
        assert_eq!((sum.replies, sum.tokens), (5, 3));

        let duplicate = vec![
            qlock(0, "q0", (0, 1), "20"),
            qlock(1, "q1", (2, 30), "21"),
            qlock(2, "q2", (3, 30), "21"),
            // Re-LOCKs of the duplicate are one finding, not one each.
            qlock(2, "q2", (31, 32), "21"),
            op(3, "slock", "sl:0", (40, 41), Some("20")).with_arg("s3-1"),
        ];
        let (_, f) = check_tokens(&duplicate);
        let messages: Vec<&str> = f.iter().map(|f| f.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "token 21 given to two grants: lq:0/q1 and lq:0/q2",
                "token 20 given to two grants: lq:0/q0 and sl:0/s3-1",
            ]
        );
        assert_eq!(f[0].window.len(), 2);
    }

    #[test]
    fn durability_checker_catches_a_lost_write() {
        let ops = vec![
            op(0, "set", "d:1", (0, 1), Some("OK")).with_arg("1"),
            op(0, "set", "d:2", (2, 3), Some("OK")).with_arg("2"),
            op(0, "set", "d:3", (4, 5), None).with_arg("3").unknown(),
        ];
        let read: HashMap<String, Option<String>> =
            [("d:1", Some("1")), ("d:2", None), ("d:3", None)]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
                .collect();
        let (acked, f) = check_durability(&ops, &read);
        assert_eq!(acked, 2);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].message.contains("d:2"));
    }
}
