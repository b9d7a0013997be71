//! Keyspace notifications (Redis's `notify-keyspace-events`): the event classes, their
//! configuration string, and the flags a node filters its applied events with.
//!
//! A command's apply calls [`Keyspace::notify`](super::Keyspace::notify) with the class and
//! the Redis event name, in the order Redis signals them. The keyspace records an
//! [`Event::Notify`](super::Event::Notify) only when this node's flags ask for that class
//! (the flags are the node's own setting, an output filter: they never change state), and
//! every node publishes what its own applied log produced, so a subscriber on a follower
//! sees the events of writes made through any node.

/// `K`: publish on `__keyspace@0__:<key>` (the message is the event).
pub const KEYSPACE: u32 = 1 << 0;
/// `E`: publish on `__keyevent@0__:<event>` (the message is the key).
pub const KEYEVENT: u32 = 1 << 1;
/// `g`: generic commands (DEL, EXPIRE, PERSIST, ...).
pub const GENERIC: u32 = 1 << 2;
/// `$`: string commands.
pub const STRING: u32 = 1 << 3;
/// `l`: list commands.
pub const LIST: u32 = 1 << 4;
/// `s`: set commands.
pub const SET: u32 = 1 << 5;
/// `h`: hash commands.
pub const HASH: u32 = 1 << 6;
/// `z`: sorted set commands.
pub const ZSET: u32 = 1 << 7;
/// `x`: a key expired.
pub const EXPIRED: u32 = 1 << 8;
/// `e`: a key was evicted for memory (never in Palisade, which evicts nothing).
pub const EVICTED: u32 = 1 << 9;
/// `t`: stream commands.
pub const STREAM: u32 = 1 << 10;
/// `m`: key misses (accepted; Palisade emits none, reads do not go through the log).
pub const KEY_MISS: u32 = 1 << 11;
/// `d`: module events.
pub const MODULE: u32 = 1 << 12;
/// `n`: a key was created.
pub const NEW: u32 = 1 << 13;
/// `A`: every class but `m` and `n`, as in Redis.
pub const ALL: u32 =
    GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// The classes of a `notify-keyspace-events` string, or None for a character Redis refuses.
pub fn parse_flags(classes: &str) -> Option<u32> {
    let mut flags = 0;
    for c in classes.chars() {
        flags |= match c {
            'A' => ALL,
            'g' => GENERIC,
            '$' => STRING,
            'l' => LIST,
            's' => SET,
            'h' => HASH,
            'z' => ZSET,
            'x' => EXPIRED,
            'e' => EVICTED,
            'K' => KEYSPACE,
            'E' => KEYEVENT,
            't' => STREAM,
            'm' => KEY_MISS,
            'd' => MODULE,
            'n' => NEW,
            _ => return None,
        };
    }
    Some(flags)
}

/// The string CONFIG GET shows for `flags`, as Redis writes it (`A` stands for all of its
/// classes, and then, as in Redis, `n` is not shown).
pub fn flags_to_string(flags: u32) -> String {
    let mut out = String::new();
    if flags & ALL == ALL {
        out.push('A');
    } else {
        for (bit, c) in [
            (GENERIC, 'g'),
            (STRING, '$'),
            (LIST, 'l'),
            (SET, 's'),
            (HASH, 'h'),
            (ZSET, 'z'),
            (EXPIRED, 'x'),
            (EVICTED, 'e'),
            (STREAM, 't'),
            (MODULE, 'd'),
            (NEW, 'n'),
        ] {
            if flags & bit != 0 {
                out.push(c);
            }
        }
    }
    for (bit, c) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')] {
        if flags & bit != 0 {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The normal forms redis-server 7.0.15 shows for these inputs (CONFIG SET, then GET).
    #[test]
    fn config_strings_match_redis() {
        for (input, shown) in [
            ("KEA", "AKE"),
            ("Kgn", "gnK"),
            ("mEKA", "AKEm"),
            ("Ag$lshzxetdmnKE", "AKEm"),
            ("zh$x", "$hzx"),
            ("tdnme", "etdnm"),
            ("g$lshzxetd", "A"),
            ("", ""),
        ] {
            let flags = parse_flags(input).expect("valid");
            assert_eq!(flags_to_string(flags), shown, "{input}");
        }
        assert_eq!(parse_flags("KEq"), None);
        assert_eq!(parse_flags("Ag").map(|f| f & NEW), Some(0));
    }
}
