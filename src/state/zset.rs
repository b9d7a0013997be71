//! A Redis sorted set: a member -> score map plus an ordered index of (score, member), in
//! Redis's order (score, then member bytes). Both are B-trees, so iteration (replies,
//! snapshots) is deterministic. Ranks are O(n) walks of the index for now (a skiplist with
//! spans would make them O(log n)).

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A score in the ordered index. Never NaN (every path that could make one refuses first),
/// so the order is total; `-0` and `0` compare equal, as Redis's `<` does.
#[derive(Clone, Copy, Debug)]
pub struct Score(pub f64);

impl PartialEq for Score {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Score {}

impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Score {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.partial_cmp(&other.0).unwrap_or(Ordering::Equal)
    }
}

/// A sorted set (never empty while stored in the keyspace).
#[derive(Clone, Debug, Default)]
pub struct ZSet {
    scores: BTreeMap<Bytes, f64>,
    order: BTreeSet<(Score, Bytes)>,
}

impl PartialEq for ZSet {
    fn eq(&self, other: &Self) -> bool {
        self.order == other.order
            && self
                .scores
                .iter()
                .zip(other.scores.iter())
                .all(|(a, b)| a.0 == b.0 && a.1.to_bits() == b.1.to_bits())
    }
}

impl Eq for ZSet {}

/// A double carried in a command (a score, an increment, a weight): equal when its bits are,
/// so that commands compare (and a NaN would equal itself).
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Float(pub f64);

impl PartialEq for Float {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for Float {}

/// One bound of a score range (`1.5`, `(1.5`, `-inf`, `+inf`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScoreBound {
    /// The value.
    pub value: Float,
    /// True for `(`: the bound itself is outside the range.
    pub exclusive: bool,
}

/// A score range `[min, max]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScoreRange {
    /// Lower bound.
    pub min: ScoreBound,
    /// Upper bound.
    pub max: ScoreBound,
}

impl ScoreRange {
    fn above_min(&self, s: f64) -> bool {
        if self.min.exclusive {
            s > self.min.value.0
        } else {
            s >= self.min.value.0
        }
    }

    fn below_max(&self, s: f64) -> bool {
        if self.max.exclusive {
            s < self.max.value.0
        } else {
            s <= self.max.value.0
        }
    }

    /// True if `s` is inside the range.
    pub fn contains(&self, s: f64) -> bool {
        self.above_min(s) && self.below_max(s)
    }
}

/// One bound of a lex range (`[a`, `(a`, `-`, `+`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LexBound {
    /// `-`: below every member.
    Min,
    /// `+`: above every member.
    Max,
    /// `[m`.
    Incl(Bytes),
    /// `(m`.
    Excl(Bytes),
}

/// A lex range `[min, max]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LexRange {
    /// Lower bound.
    pub min: LexBound,
    /// Upper bound.
    pub max: LexBound,
}

impl LexRange {
    fn above_min(&self, m: &[u8]) -> bool {
        match &self.min {
            LexBound::Min => true,
            LexBound::Max => false,
            LexBound::Incl(b) => m >= &b[..],
            LexBound::Excl(b) => m > &b[..],
        }
    }

    fn below_max(&self, m: &[u8]) -> bool {
        match &self.max {
            LexBound::Min => false,
            LexBound::Max => true,
            LexBound::Incl(b) => m <= &b[..],
            LexBound::Excl(b) => m < &b[..],
        }
    }

    /// True if `m` is inside the range.
    pub fn contains(&self, m: &[u8]) -> bool {
        self.above_min(m) && self.below_max(m)
    }
}

impl ZSet {
    /// The number of members.
    pub fn len(&self) -> usize {
        self.scores.len()
    }

    /// True when there are no members.
    pub fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    /// The score of `member`.
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.scores.get(member).copied()
    }

    /// Sets the score of `member`; returns the old score. A score equal to the old one
    /// (`-0` equals `0`) keeps the stored one, as Redis does.
    pub fn insert(&mut self, member: Bytes, score: f64) -> Option<f64> {
        // Redis 7.0 replies `0` for a member added with `-0` (its listpack keeps the score as
        // text), so a zero is stored positive.
        let score = if score == 0.0 { 0.0 } else { score };
        if let Some(old) = self.scores.get(&member).copied() {
            if Score(old) != Score(score) {
                self.order.remove(&(Score(old), member.clone()));
                self.order.insert((Score(score), member.clone()));
                self.scores.insert(member, score);
            }
            return Some(old);
        }
        let member = Bytes::copy_from_slice(&member);
        self.order.insert((Score(score), member.clone()));
        self.scores.insert(member, score);
        None
    }

    /// Removes `member`; returns its score.
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let (m, s) = self.scores.remove_entry(member)?;
        self.order.remove(&(Score(s), m));
        Some(s)
    }

    /// Members and scores, lowest first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&Bytes, f64)> + '_ {
        self.order
            .iter()
            .map(|(s, m)| (m, self.scores.get(m).copied().unwrap_or(s.0)))
    }

    /// The 0-based rank of `member`, lowest first (O(n)).
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        let s = self.scores.get(member)?;
        let key = (Score(*s), Bytes::copy_from_slice(member));
        Some(self.order.range(..key).count())
    }

    /// The members inside a score range, lowest first.
    pub fn by_score(&self, r: &ScoreRange) -> Vec<(&Bytes, f64)> {
        let from = (Score(r.min.value.0), Bytes::new());
        self.order
            .range(from..)
            .map(|(s, m)| (m, self.scores.get(m).copied().unwrap_or(s.0)))
            .take_while(|(_, s)| r.below_max(*s))
            .filter(|(_, s)| r.contains(*s))
            .collect()
    }

    /// The members inside a lex range, in order (meaningful when all scores are equal).
    pub fn by_lex(&self, r: &LexRange) -> Vec<(&Bytes, f64)> {
        self.iter().filter(|(m, _)| r.contains(m)).collect()
    }
}

impl FromIterator<(Bytes, f64)> for ZSet {
    fn from_iter<I: IntoIterator<Item = (Bytes, f64)>>(iter: I) -> Self {
        let mut z = ZSet::default();
        for (m, s) in iter {
            z.insert(m, s);
        }
        z
    }
}

/// Stored as its (member, score) pairs in order; the index is rebuilt on load.
impl Serialize for ZSet {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for ZSet {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let pairs: Vec<(Bytes, f64)> = Vec::deserialize(d)?;
        if pairs.iter().any(|(_, s)| s.is_nan()) {
            return Err(serde::de::Error::custom("a sorted-set score is NaN"));
        }
        Ok(pairs.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn order_is_score_then_member() {
        let z: ZSet = [(b("b"), 1.0), (b("a"), 1.0), (b("c"), 0.5), (b("d"), -0.0)]
            .into_iter()
            .collect();
        let got: Vec<_> = z.iter().map(|(m, s)| (m.clone(), s)).collect();
        assert_eq!(
            got,
            vec![(b("d"), 0.0), (b("c"), 0.5), (b("a"), 1.0), (b("b"), 1.0)]
        );
        assert!(z.score(b"d").is_some_and(|s| s.is_sign_positive()));
        assert_eq!(z.rank(b"a"), Some(2));
        assert_eq!(z.rank(b"x"), None);
    }

    #[test]
    fn update_moves_and_equal_score_keeps() {
        let mut z = ZSet::default();
        assert_eq!(z.insert(b("a"), 1.0), None);
        assert_eq!(z.insert(b("b"), 2.0), None);
        assert_eq!(z.insert(b("a"), 3.0), Some(1.0));
        assert_eq!(z.rank(b"a"), Some(1));
        assert_eq!(z.len(), 2);
        assert_eq!(z.remove(b"a"), Some(3.0));
        assert_eq!(z.iter().count(), 1);
        assert_eq!(z.remove(b"a"), None);
    }

    #[test]
    fn ranges() {
        let z: ZSet = (0..10).map(|i| (b(&format!("m{i}")), i as f64)).collect();
        let r = ScoreRange {
            min: ScoreBound {
                value: Float(2.0),
                exclusive: true,
            },
            max: ScoreBound {
                value: Float(5.0),
                exclusive: false,
            },
        };
        let got: Vec<f64> = z.by_score(&r).into_iter().map(|(_, s)| s).collect();
        assert_eq!(got, vec![3.0, 4.0, 5.0]);
        let l = LexRange {
            min: LexBound::Incl(b("m3")),
            max: LexBound::Excl(b("m5")),
        };
        assert_eq!(z.by_lex(&l).len(), 2);
    }

    #[test]
    fn serde_round_trip() {
        let z: ZSet = [(b("x"), f64::INFINITY), (b("y"), -1.5)]
            .into_iter()
            .collect();
        let bytes = postcard::to_allocvec(&z).unwrap();
        let back: ZSet = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(back, z);
    }
}
