//! What one `redis.call` costs toward a script's instruction budget.
//!
//! The budget counts Lua VM instructions; a call into Rust is charged in the same unit, so a
//! script cannot hide its work inside commands (a loop of `KEYS *` over a large keyspace is a
//! few Lua instructions per iteration and milliseconds of Rust each).
//!
//! The charge must be the same on every replica, and the same again when an entry is
//! replayed after a restart, so it is computed from what every replica has: the command
//! line, the keyspace before the command, and the reply. Two cost models exist, and the log
//! entry says which one it runs under ([`CostModel`]): entries written before metering
//! (`Eval`, `EvalAs`) keep their fixed charge, so replaying them gives the results they had.
//!
//! The metered charge of one call is [`BASE`], plus
//! - one unit per [`BYTES_PER_UNIT`] bytes of its arguments;
//! - for a command Redis does not flag `fast`, the size of every value it names (one unit per
//!   element of a hash, list or set, one per [`BYTES_PER_UNIT`] bytes of a string), read before it
//!   runs: deleting, ranging over or copying a large value costs in proportion;
//! - for a command that walks the keyspace, the keys it may visit (`KEYS`: every stored key;
//!   `SCAN`: up to its COUNT);
//! - after it ran, one unit per element of its reply and per [`BYTES_PER_UNIT`] bytes in it
//!   (the reply is converted to Lua values).
//!
//! Everything that depends on the keyspace is charged before the command runs, so a call that
//! would exceed the budget is refused before it does the work.

use bytes::Bytes;

use crate::cmd::keys::SCAN_STEP_MAX;
use crate::cmd::{self, Spec};
use crate::resp::args::parse_i64;
use crate::resp::Reply;
use crate::state::{Keyspace, Value};

/// What every call costs, in instructions (the whole charge under [`CostModel::Fixed`]).
pub const BASE: u64 = 100;
/// Bytes of arguments, values or replies that count as one instruction.
pub const BYTES_PER_UNIT: u64 = 64;

/// How an entry's `redis.call`s are charged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CostModel {
    /// [`BASE`] per call, whatever it does: entries written before metering.
    Fixed,
    /// [`BASE`] plus the work the call does (this module's rules).
    Metered,
}

/// What a call costs before it runs.
pub fn before(model: CostModel, ks: &Keyspace, argv: &[Bytes], now: u64) -> u64 {
    if model == CostModel::Fixed {
        return BASE;
    }
    let args: u64 = argv.iter().map(|a| a.len() as u64).sum();
    let mut units = BASE + args / BYTES_PER_UNIT;
    let name = argv
        .first()
        .map(|n| String::from_utf8_lossy(n).to_ascii_lowercase())
        .unwrap_or_default();
    let Some(spec) = cmd::lookup(&name) else {
        return units;
    };
    units = units.saturating_add(keyspace_walk(spec, ks, argv));
    if !spec.flags.contains(&"fast") {
        for key in named_keys(spec, argv) {
            if let Some(entry) = ks.get(key, now) {
                units = units.saturating_add(value_units(&entry.value));
            }
        }
    }
    units
}

/// What a call costs once it ran: its reply.
pub fn after(model: CostModel, reply: &Reply) -> u64 {
    match model {
        CostModel::Fixed => 0,
        CostModel::Metered => reply_units(reply),
    }
}

/// The keys a command walks without naming them.
fn keyspace_walk(spec: &Spec, ks: &Keyspace, argv: &[Bytes]) -> u64 {
    let stored = ks.stored_len() as u64;
    match spec.name {
        "keys" | "flushall" | "flushdb" => stored,
        "scan" => {
            let count = argv
                .windows(2)
                .skip(2)
                .find(|w| w[0].eq_ignore_ascii_case(b"count"))
                .and_then(|w| parse_i64(&w[1]))
                .map_or(10, |n| n.max(1) as u64);
            count.min(SCAN_STEP_MAX).min(stored)
        }
        _ => 0,
    }
}

/// The keys a command line names, by its table row (`(first, last, step)`).
fn named_keys<'a>(spec: &Spec, argv: &'a [Bytes]) -> impl Iterator<Item = &'a Bytes> {
    let argc = argv.len() as i64;
    let first = i64::from(spec.first_key);
    let last = match spec.last_key {
        l if l < 0 => argc + i64::from(l),
        l => i64::from(l).min(argc - 1),
    };
    let step = spec.step.max(1) as usize;
    // A command without keys has `first` 0: an empty range.
    let first = first.max(1);
    (first..=last)
        .step_by(step)
        .filter_map(move |i| argv.get(i as usize))
}

/// The size of a stored value, in units.
fn value_units(v: &Value) -> u64 {
    match v {
        Value::Str(s) => s.len() as u64 / BYTES_PER_UNIT,
        Value::Hash(h) => h.len() as u64,
        Value::List(l) => l.len() as u64,
        Value::Set(s) => s.len() as u64,
        Value::ZSet(z) => z.len() as u64,
    }
}

/// The size of a reply, in units: one per element, one per [`BYTES_PER_UNIT`] bytes.
pub fn reply_units(r: &Reply) -> u64 {
    match r {
        Reply::Bulk(b) => b.len() as u64 / BYTES_PER_UNIT,
        Reply::Simple(s) | Reply::Error(s) | Reply::Verbatim(s) => s.len() as u64 / BYTES_PER_UNIT,
        Reply::Int(_) | Reply::Double(_) | Reply::Nil | Reply::NilArray | Reply::Bool(_) => 0,
        Reply::Array(items) | Reply::Set(items) | Reply::Push(items) => items
            .iter()
            .fold(items.len() as u64, |n, i| n.saturating_add(reply_units(i))),
        Reply::Map(pairs) | Reply::Pairs(pairs) => pairs.iter().fold(2 * pairs.len() as u64, |n, (k, v)| {
            n.saturating_add(reply_units(k))
                .saturating_add(reply_units(v))
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(line: &str) -> Vec<Bytes> {
        line.split(' ')
            .map(|w| Bytes::from(w.to_string()))
            .collect()
    }

    fn keyspace(keys: usize) -> Keyspace {
        let mut ks = Keyspace::default();
        for i in 0..keys {
            cmd::run_line(&mut ks, &format!("SET key:{i} v"), 1);
        }
        cmd::run_line(
            &mut ks,
            &format!("RPUSH big {}", vec!["x"; 500].join(" ")),
            1,
        );
        ks
    }

    #[test]
    fn the_fixed_model_charges_the_base_only() {
        let ks = keyspace(1000);
        assert_eq!(before(CostModel::Fixed, &ks, &argv("KEYS *"), 1), BASE);
        let big = Reply::Array(vec![Reply::bulk("x"); 1000]);
        assert_eq!(after(CostModel::Fixed, &big), 0);
    }

    #[test]
    fn metered_calls_pay_for_the_keys_values_and_replies_they_touch() {
        let ks = keyspace(1000);
        let m = CostModel::Metered;
        // A fast command on a small value: the base only.
        assert_eq!(before(m, &ks, &argv("GET key:1"), 1), BASE);
        // KEYS walks all 1001 stored keys.
        assert_eq!(before(m, &ks, &argv("KEYS *"), 1), BASE + 1001);
        // SCAN walks up to COUNT (default 10), never more than is stored.
        assert_eq!(before(m, &ks, &argv("SCAN 0"), 1), BASE + 10);
        assert_eq!(
            before(m, &ks, &argv("SCAN 0 MATCH k* COUNT 300"), 1),
            BASE + 300
        );
        assert_eq!(before(m, &ks, &argv("SCAN 0 count 5000"), 1), BASE + 1001);
        // LRANGE is not fast: it pays for the list's 500 elements; LLEN is fast.
        assert_eq!(before(m, &ks, &argv("LRANGE big 0 -1"), 1), BASE + 500);
        assert_eq!(before(m, &ks, &argv("LLEN big"), 1), BASE);
        // DEL pays for every value it names; a missing key costs nothing.
        assert_eq!(
            before(m, &ks, &argv("DEL big nothing key:2"), 1),
            BASE + 500
        );
        // Arguments: one unit per 64 bytes.
        let long = format!("SET k {}", "v".repeat(640));
        assert_eq!(before(m, &ks, &argv(&long), 1), BASE + 10);
        // Replies: one unit per element, one per 64 bytes.
        let reply = Reply::Array(vec![Reply::bulk("x".repeat(128)), Reply::Int(3)]);
        assert_eq!(after(m, &reply), 2 + 2);
        let map = Reply::Map(vec![(Reply::bulk("a"), Reply::bulk("b"))]);
        assert_eq!(after(m, &map), 2);
    }

    /// Each log entry keeps the model it was written under: an `EVAL` entry from before ACLs
    /// (tag 31) and an `EvalAs` (tag 43) charge 100 per call, as they did when they were first
    /// applied, and only the metered form (tag 105) pays for the work.
    #[test]
    fn the_log_entry_decides_the_model() {
        use crate::cmd::acl::{EvalAs, EvalMetered};
        use crate::cmd::eval::{Eval, Source};
        use crate::cmd::{Command, Ctx};

        let eval = Eval {
            source: Source::Body(Bytes::from_static(
                b"for i = 1, 300 do redis.call('KEYS', '*') end return 'done'",
            )),
            keys: vec![],
            args: vec![],
        };
        let as_user = EvalAs {
            user: "default".into(),
            read_only: false,
            eval: eval.clone(),
        };
        let run = |cmd: Command| {
            let mut ks = keyspace(500);
            ks.set_script_budget(100_000);
            let revision = ks.bump_revision();
            cmd.apply(&mut ks, Ctx { now: 1, revision })
        };
        // 300 calls at the fixed 100: 30,000 instructions, within the budget.
        assert_eq!(run(Command::Eval(eval)), Reply::bulk("done"));
        assert_eq!(run(Command::EvalAs(as_user.clone())), Reply::bulk("done"));
        // Metered, each call walks and returns 501 keys: the budget covers about 90.
        let metered = run(Command::EvalMetered(EvalMetered(as_user)));
        assert!(
            matches!(&metered, Reply::Error(e) if e.starts_with("ERR Script exceeded the instruction budget of 100000 ")),
            "{metered:?}"
        );
    }

    #[test]
    fn an_unknown_command_costs_its_arguments() {
        let ks = keyspace(1);
        assert_eq!(
            before(CostModel::Metered, &ks, &argv("NOSUCH a b"), 1),
            BASE
        );
    }
}
