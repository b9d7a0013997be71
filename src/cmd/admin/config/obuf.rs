//! `client-output-buffer-limit`: Redis's `class hard soft soft-seconds [class ...]` syntax,
//! with memory units, for the classes `normal`, `replica` (`slave`) and `pubsub`. A value
//! that names some classes leaves the others as they were, as in Redis.

use std::fmt;

/// One class's limits (0: no limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClassLimit {
    /// Pending output above this many bytes disconnects at once.
    pub hard: u64,
    /// Pending output above this many bytes for longer than `soft_secs` disconnects.
    pub soft: u64,
    /// See `soft`.
    pub soft_secs: u64,
}

/// The limits of every class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLimits {
    /// Ordinary clients (Redis: no limit). Stored and shown; Palisade's replies are
    /// written as they are produced, so it does not enforce this class.
    pub normal: ClassLimit,
    /// Redis replicas. Stored and shown; Palisade has no replicas of this kind (followers
    /// get the Raft log on the peer port).
    pub replica: ClassLimit,
    /// Subscribers: enforced on the messages queued for them.
    pub pubsub: ClassLimit,
}

const MB: u64 = 1024 * 1024;

impl Default for OutputLimits {
    /// Redis's defaults: `normal 0 0 0 slave 256mb 64mb 60 pubsub 32mb 8mb 60`.
    fn default() -> Self {
        let limit = |hard, soft, soft_secs| ClassLimit {
            hard,
            soft,
            soft_secs,
        };
        OutputLimits {
            normal: limit(0, 0, 0),
            replica: limit(256 * MB, 64 * MB, 60),
            pubsub: limit(32 * MB, 8 * MB, 60),
        }
    }
}

impl fmt::Display for OutputLimits {
    /// As Redis's CONFIG GET shows it (bytes, the replica class called `slave`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let classes = [
            ("normal", self.normal),
            ("slave", self.replica),
            ("pubsub", self.pubsub),
        ];
        for (i, (name, l)) in classes.iter().enumerate() {
            let sep = if i == 0 { "" } else { " " };
            write!(f, "{sep}{name} {} {} {}", l.hard, l.soft, l.soft_secs)?;
        }
        Ok(())
    }
}

impl OutputLimits {
    /// `text` applied over `self`, or Redis's reason for refusing it.
    pub fn with(&self, text: &str) -> Result<OutputLimits, String> {
        let words: Vec<&str> = text.split_whitespace().collect();
        if words.is_empty() || !words.len().is_multiple_of(4) {
            return Err("Wrong number of arguments in buffer limit configuration.".into());
        }
        let mut out = *self;
        for class in words.chunks(4) {
            let slot = match class[0].to_ascii_lowercase().as_str() {
                "normal" => &mut out.normal,
                "slave" | "replica" => &mut out.replica,
                "pubsub" => &mut out.pubsub,
                _ => {
                    return Err(
                        "Invalid client class specified in buffer limit configuration.".into(),
                    )
                }
            };
            let bytes = |w: &str| super::memory_value(w).and_then(|n| u64::try_from(n).ok());
            let secs = crate::resp::args::parse_i64(class[3].as_bytes())
                .and_then(|n| u64::try_from(n).ok());
            match (bytes(class[1]), bytes(class[2]), secs) {
                (Some(hard), Some(soft), Some(soft_secs)) => {
                    *slot = ClassLimit {
                        hard,
                        soft,
                        soft_secs,
                    }
                }
                _ => return Err(
                    "Error in hard, soft or soft_seconds setting in buffer limit configuration."
                        .into(),
                ),
            }
        }
        Ok(out)
    }

    /// A value as CONFIG GET shows it (the Display form), read back.
    pub fn parse(text: &str) -> Result<OutputLimits, String> {
        OutputLimits::default().with(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_syntax_and_form() {
        let d = OutputLimits::default();
        assert_eq!(
            d.to_string(),
            "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
        );
        let l = d.with("pubsub 1mb 256kb 60").unwrap();
        assert_eq!(
            l.to_string(),
            "normal 0 0 0 slave 268435456 67108864 60 pubsub 1048576 262144 60"
        );
        let l = l.with("replica 1k 2 3 NORMAL 4 5 6").unwrap();
        assert_eq!(
            l.to_string(),
            "normal 4 5 6 slave 1000 2 3 pubsub 1048576 262144 60"
        );
        assert_eq!(OutputLimits::parse(&l.to_string()), Ok(l));
        for (bad, why) in [
            ("", "Wrong number"),
            ("pubsub 1 2", "Wrong number"),
            ("master 1 2 3", "Invalid client class"),
            ("pubsub 1x 2 3", "Error in hard"),
            ("pubsub 1 2 -3", "Error in hard"),
            ("pubsub -1 2 3", "Error in hard"),
        ] {
            let e = d.with(bad).unwrap_err();
            assert!(e.starts_with(why), "{bad:?}: {e}");
        }
    }
}
