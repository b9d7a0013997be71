//! TTL arguments shared by SET, SETEX, EXPIRE and LOCK: parsing, validation and the
//! leader-side conversion of absolute Unix times to relative TTLs (docs/time-and-leases.md).

use serde::{Deserialize, Serialize};

use crate::resp::args::{parse_i64, NOT_INTEGER};
use crate::resp::Reply;

/// A TTL as carried in a log entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Expiry {
    /// Milliseconds from the entry's cluster time.
    In(i64),
    /// A Unix time in ms; the leader replaces it with `In` before proposing.
    At(i64),
}

/// The wall clock in Unix ms; used only to validate arguments and, on the leader, to resolve
/// absolute times. Apply never calls it.
pub fn unix_now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl Expiry {
    /// Parses the value of EX/PX/EXAT/PXAT as SET does: positive, and no overflow.
    pub fn parse(unit: &str, raw: &[u8], cmd: &str) -> Result<Expiry, Reply> {
        let n = parse_i64(raw).ok_or_else(|| Reply::err(NOT_INTEGER))?;
        let invalid = || Reply::err(format!("ERR invalid expire time in '{cmd}' command"));
        let seconds = unit == "EX" || unit == "EXAT";
        if n <= 0 || (seconds && n > i64::MAX / 1000) {
            return Err(invalid());
        }
        let ms = if seconds { n * 1000 } else { n };
        // Redis adds "now" to relative times and rejects a sum that would overflow.
        if !unit.ends_with("AT") && ms > i64::MAX - unix_now_ms() {
            return Err(invalid());
        }
        Ok(if unit.ends_with("AT") {
            Expiry::At(ms)
        } else {
            Expiry::In(ms)
        })
    }

    /// Converts an absolute time to a relative one, given the leader's Unix time in ms.
    pub fn resolve(&mut self, unix_now_ms: i64) {
        if let Expiry::At(at) = *self {
            *self = Expiry::In(at.saturating_sub(unix_now_ms));
        }
    }

    /// The deadline in cluster time for an entry applied at `now`.
    pub fn deadline(&self, now: u64) -> u64 {
        match *self {
            Expiry::In(ms) => now.saturating_add_signed(ms),
            // Unresolved absolute times only occur if a proposer forgot to resolve; treat
            // them as already resolved against cluster time zero rather than panic.
            Expiry::At(ms) => ms.max(0) as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_matches_redis() {
        assert_eq!(Expiry::parse("EX", b"10", "set"), Ok(Expiry::In(10_000)));
        assert_eq!(Expiry::parse("PXAT", b"5", "set"), Ok(Expiry::At(5)));
        assert_eq!(
            Expiry::parse("EX", b"0", "set"),
            Err(Reply::err("ERR invalid expire time in 'set' command"))
        );
        assert_eq!(
            Expiry::parse("EX", b"x", "set"),
            Err(Reply::err(NOT_INTEGER))
        );
        assert!(Expiry::parse("EX", b"9223372036854775807", "set").is_err());
        let mut e = Expiry::At(10_000);
        e.resolve(4_000);
        assert_eq!(e, Expiry::In(6_000));
        assert_eq!(Expiry::In(-5).deadline(3), 0);
    }
}
