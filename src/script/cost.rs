//! What one `redis.call` costs toward a script's instruction budget.
//!
//! The budget counts Lua VM instructions; a call into Rust is charged in the same unit, so a
//! script cannot hide its work inside commands (a loop of `KEYS *` over a large keyspace is a
//! few Lua instructions per iteration and milliseconds of Rust each).
//!
//! The charge must be the same on every replica, and the same again when an entry is
//! replayed after a restart, so it is computed from what every replica has: the command
//! line, the keyspace before the command, and the reply. Three cost models exist, and the log
//! entry says which one it runs under ([`CostModel`]): entries written before metering
//! (`Eval`, `EvalAs`) keep their fixed charge, and entries written before library charges
//! (`EvalMetered`) do not pay for library work, so replaying them gives the results they had.
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
//! would exceed the budget is refused before it does the work. The part that needs the
//! command table is [`super::bridge::cost_before`]; this module has the units.

use crate::resp::Reply;
use crate::state::Value;

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
    /// [`CostModel::Metered`], and the work of Lua's library functions too (their arguments,
    /// the bytes the Lua state allocates, pattern-matching steps: see [`super::meter`]).
    Library,
}

/// What a call costs once it ran: its reply.
pub fn after(model: CostModel, reply: &Reply) -> u64 {
    match model {
        CostModel::Fixed => 0,
        CostModel::Metered | CostModel::Library => reply_units(reply),
    }
}

/// The size of a stored value, in units.
pub fn value_units(v: &Value) -> u64 {
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
        Reply::Simple(s) | Reply::Error(s) | Reply::Verbatim(s) | Reply::DoubleText(s) => {
            s.len() as u64 / BYTES_PER_UNIT
        }
        Reply::Int(_) | Reply::Double(_) | Reply::Nil | Reply::NilArray | Reply::Bool(_) => 0,
        Reply::Array(items) | Reply::Set(items) | Reply::Push(items) => items
            .iter()
            .fold(items.len() as u64, |n, i| n.saturating_add(reply_units(i))),
        Reply::Map(pairs) | Reply::Pairs(pairs) => {
            pairs.iter().fold(2 * pairs.len() as u64, |n, (k, v)| {
                n.saturating_add(reply_units(k))
                    .saturating_add(reply_units(v))
            })
        }
    }
}
