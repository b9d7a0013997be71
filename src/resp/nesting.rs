//! A bound on how deeply decoded data may nest: replies inside replies (peer responses,
//! forwarded replies) and commands inside EXEC (peer frames, log entries, snapshots).
//!
//! postcard recurses once per level of a recursive type, so without a bound a frame of a
//! few tens of kilobytes (an array in an array in an array...) overflows the stack of the
//! task that decodes it, and a stack overflow aborts the whole process: one connection to
//! the peer port could kill a node. Found by the `peer_frame` fuzz target (docs/fuzzing.md).

use std::cell::Cell;

use serde::{Deserialize, Deserializer};

/// The deepest nesting a decoded value may have. Well above what Palisade itself produces
/// (a script's reply nests at most 257 levels, `script::convert`, and EXEC adds one), and
/// far below what overflows a tokio worker's 2 MiB stack.
pub const MAX_DEPTH: usize = 512;

thread_local! {
    /// Levels of [`nested`] open on this thread. Decoding is synchronous, so a decode never
    /// moves between threads while levels are open.
    static DEPTH: Cell<usize> = const { Cell::new(0) };
}

/// Closes one level when dropped, on success and on error alike.
struct Level;

impl Drop for Level {
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(d.get() - 1));
    }
}

/// Deserializes one level of a recursive type (use it as `#[serde(deserialize_with)]` on the
/// field that recurses): an error instead of a level deeper than [`MAX_DEPTH`]. The encoding
/// is unchanged.
pub fn nested<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    let depth = DEPTH.with(|c| {
        c.set(c.get() + 1);
        c.get()
    });
    let _level = Level;
    if depth > MAX_DEPTH {
        return Err(serde::de::Error::custom(format_args!(
            "data nested deeper than {MAX_DEPTH} levels"
        )));
    }
    T::deserialize(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resp::Reply;

    /// `n` arrays, each holding the next, around a nil.
    fn nested_reply(n: usize) -> Reply {
        (0..n).fold(Reply::Nil, |inner, _| Reply::Array(vec![inner]))
    }

    /// The `peer_frame` fuzz target's crash: 20,000 nested arrays (40 KB) overflowed the
    /// decoding thread's stack and aborted the process. Now the frame is refused; the test
    /// runs on a test thread's 2 MiB stack, a tokio worker's size.
    #[test]
    fn deeply_nested_replies_are_refused_not_a_stack_overflow() {
        for n in [20_000, 1_000_000] {
            // postcard: variant 6 (Array), length 1, ..., then variant 4 (Nil).
            let mut frame = [6u8, 1].repeat(n);
            frame.push(4);
            let got = postcard::from_bytes::<Reply>(&frame);
            assert!(got.is_err(), "{n} levels decoded");
        }
        // The bound leaves the counter balanced: a normal frame still decodes.
        let ok = postcard::to_allocvec(&nested_reply(3)).unwrap();
        assert_eq!(postcard::from_bytes::<Reply>(&ok).unwrap(), nested_reply(3));
    }

    /// Exactly [`MAX_DEPTH`] levels decode (a script's deepest reply is far below); one
    /// more does not. Maps count like arrays.
    #[test]
    fn the_bound_is_exact() {
        let at = postcard::to_allocvec(&nested_reply(MAX_DEPTH)).unwrap();
        assert_eq!(
            postcard::from_bytes::<Reply>(&at).unwrap(),
            nested_reply(MAX_DEPTH)
        );
        let over = postcard::to_allocvec(&nested_reply(MAX_DEPTH + 1)).unwrap();
        assert!(postcard::from_bytes::<Reply>(&over).is_err());
        let map = (0..=MAX_DEPTH).fold(Reply::Nil, |inner, _| {
            Reply::Map(vec![(Reply::Int(1), inner)])
        });
        let over = postcard::to_allocvec(&map).unwrap();
        assert!(postcard::from_bytes::<Reply>(&over).is_err());
    }
}
