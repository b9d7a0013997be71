//! Key reads: `RANDOMKEY`, `TOUCH key [key ...]`, `EXPIRETIME key` and `PEXPIRETIME key`.
//!
//! RANDOMKEY draws from a small PRNG seeded with the keyspace's revision (salted for a
//! client's own read, src/cmd/keyspace/draw.rs), so that every
//! replica would pick the same key for the same state (a script calling it stays
//! deterministic). TOUCH only counts: Palisade tracks no access times (OBJECT IDLETIME is
//! always 0). EXPIRETIME and PEXPIRETIME turn the key's deadline, kept in cluster time,
//! into Unix time with the serving node's wall clock: `now + remaining TTL`
//! (docs/time-and-leases.md), so a key set with `EXAT t` reports `t` give or take the
//! milliseconds between the leader's clock and this one.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::algo::rng::SplitMix64;
use crate::cmd::expiry::unix_now_ms;
use crate::cmd::registry::flags::{READ, READ_FAST};
use crate::cmd::registry::{
    many, none, one, Own, Replicated, Spec, Touches, ALL_KEYS, NO_KEYS, ONE_KEY,
};
use crate::cmd::{Command, Request};
use crate::resp::{Args, Reply};
use crate::state::Keyspace;

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new("randomkey", 1, READ, NO_KEYS, parse).docs(
        "Return a key chosen at random",
        "1.0.0",
        "generic",
    ),
    Spec::new("touch", -2, READ_FAST, ALL_KEYS, parse)
        .key_specs("RO@i1/r-1,1,0")
        .args("key:key*")
        .docs(
            "Count how many of the given keys exist (no access times are kept)",
            "3.2.1",
            "generic",
        ),
    Spec::new("expiretime", 2, READ_FAST, ONE_KEY, parse)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key")
        .docs(
            "Return the Unix time in seconds at which a key expires",
            "7.0.0",
            "generic",
        )
        .own(&[Own::NodeClock]),
    Spec::new("pexpiretime", 2, READ_FAST, ONE_KEY, parse)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key")
        .docs(
            "Return the Unix time in milliseconds at which a key expires",
            "7.0.0",
            "generic",
        )
        .own(&[Own::NodeClock]),
];

/// What is read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum KeyRead {
    /// RANDOMKEY.
    Random,
    /// TOUCH keys.
    Touch(Vec<Bytes>),
    /// EXPIRETIME (false) or PEXPIRETIME (true) of a key.
    ExpireTime(Bytes, bool),
}

/// Parses the four commands.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    let read = match args.name() {
        "randomkey" => KeyRead::Random,
        "touch" => KeyRead::Touch(args.rest()),
        name => {
            let millis = name == "pexpiretime";
            KeyRead::ExpireTime(args.arg()?, millis)
        }
    };
    Ok(Request::Data(Command::KeyRead(read)))
}

impl Replicated for KeyRead {
    fn forwarded(&self) -> Option<Touches<'_>> {
        match self {
            KeyRead::Random => Some((&["randomkey"], none(), none())),
            KeyRead::Touch(keys) => Some((&["touch"], many(keys), none())),
            KeyRead::ExpireTime(k, _) => Some((&["expiretime", "pexpiretime"], one(k), none())),
        }
    }

    fn is_read(&self) -> bool {
        true
    }

    /// Answers the read at cluster time `now`.
    fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        match self {
            KeyRead::Random => {
                let n = ks.live_len(now);
                if n == 0 {
                    return Reply::Nil;
                }
                // One SplitMix64 step from the seed, reduced by modulo.
                let pick = SplitMix64::new(crate::cmd::draw::seed(ks)).below_mod(n);
                ks.live_keys(now)
                    .nth(pick)
                    .map_or(Reply::Nil, |(k, _)| Reply::Bulk(k.clone()))
            }
            KeyRead::Touch(keys) => {
                Reply::Int(keys.iter().filter(|k| ks.get(k, now).is_some()).count() as i64)
            }
            KeyRead::ExpireTime(key, millis) => match ks.get(key, now) {
                None => Reply::Int(-2),
                Some(e) => match e.expire_at {
                    None => Reply::Int(-1),
                    Some(at) => {
                        let unix_ms = unix_now_ms().saturating_add(at.saturating_sub(now) as i64);
                        // Seconds are rounded: a key set with EXAT t reports t, not t - 1,
                        // when this node's clock is a millisecond ahead of the leader's.
                        Reply::Int(if *millis {
                            unix_ms
                        } else {
                            (unix_ms + 500) / 1000
                        })
                    }
                },
            },
        }
    }
}
