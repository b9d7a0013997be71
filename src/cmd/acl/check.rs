//! The permission check's view of the command table: each command's categories (Redis's,
//! from its row: group, flags or declared categories, and a subcommand's from its own row), the keys and channels a command line
//! names and the access each key needs, and Redis's refusal texts.

use bytes::Bytes;

use crate::cmd::registry::{lookup, sub_spec, subcommand_names, table, Spec, PALISADE_GROUP};
use crate::resp::args::parse_i64;
use crate::resp::Reply;
use crate::state::acl::{Access, Catalog, Denied, Subject, User};

/// Every category `ACL CAT` lists: Redis 7's, then Palisade's own.
pub const CATEGORIES: &[&str] = &[
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
    PALISADE_GROUP,
];

/// The command table as the rule parser sees it.
pub struct TableCatalog;

impl Catalog for TableCatalog {
    fn has_command(&self, name: &str) -> bool {
        lookup(name).is_some()
    }

    fn subcommands(&self, name: &str) -> Option<&'static [&'static str]> {
        subcommands(name)
    }

    fn has_category(&self, name: &str) -> bool {
        CATEGORIES.contains(&name)
    }
}

/// A container's subcommand names, from its table row ([`Spec::subcommands`]).
pub(super) fn subcommands(name: &str) -> Option<&'static [&'static str]> {
    subcommand_names(name)
}

/// False for a container command line whose subcommand does not exist (Redis's
/// `lookupCommand` finds no command for it); true otherwise, a bare container included.
pub fn known_subcommand(spec: &Spec, argv: &[Bytes]) -> bool {
    match (subcommands(spec.name), first_arg(argv)) {
        (Some(subs), Some(sub)) => subs.contains(&sub.as_str()),
        _ => true,
    }
}

/// The categories of a command, or of its subcommand (`sub`, lower-case) for containers: a
/// subcommand's are its own row's. A row's are those it declares ([`Spec::categories`]), or
/// else its group's (none for a container, as in Redis), then its flags'.
pub fn categories(spec: &Spec, sub: Option<&str>) -> Vec<&'static str> {
    if let Some(row) = sub.and_then(|s| sub_spec(spec, s)) {
        return categories(row, None);
    }
    let flag = |f: &str| spec.flags.contains(&f);
    let mut c = Vec::new();
    let mut add = |cat: &'static str| {
        if !c.contains(&cat) {
            c.push(cat);
        }
    };
    match spec.categories {
        Some(declared) => declared.iter().for_each(|cat| add(cat)),
        None if !spec.subcommands.is_empty() => {}
        None => group_category(spec.group).into_iter().for_each(&mut add),
    }
    if flag("write") {
        add("write");
    }
    // Redis leaves scripts (EVAL_RO) out of @read.
    if flag("readonly") && spec.group != "scripting" {
        add("read");
    }
    if flag("pubsub") {
        add("pubsub");
    }
    if flag("blocking") {
        add("blocking");
    }
    if flag("admin") {
        add("admin");
        add("dangerous");
    }
    add(if flag("fast") { "fast" } else { "slow" });
    c
}

/// The category of a command group, for the rows that declare none of their own.
fn group_category(group: &str) -> Option<&'static str> {
    Some(match group {
        "set" => "set",
        "string" => "string",
        "list" => "list",
        "hash" => "hash",
        "bitmap" => "bitmap",
        "sorted-set" => "sortedset",
        "geo" => "geo",
        "generic" => "keyspace",
        "connection" => "connection",
        "transactions" => "transaction",
        "scripting" => "scripting",
        "pubsub" => "pubsub",
        "hyperloglog" => "hyperloglog",
        "stream" => "stream",
        PALISADE_GROUP => PALISADE_GROUP,
        _ => return None,
    })
}

/// The access of a command that only reads its keys.
pub(super) const READ_ONLY: Access = Access {
    read: true,
    write: false,
};

/// Which access a command needs to its keys: Redis's key-spec flags, reduced to whether the
/// value is read (`ACCESS`) and whether the key changes (`INSERT`, `UPDATE`, `DELETE`).
pub(super) fn key_access(spec: &Spec) -> Access {
    let write = spec.flags.contains(&"write");
    let read = match spec.name {
        // Changes without reading the value.
        "set" | "setnx" | "setex" | "psetex" | "del" | "unlink" | "expire" | "pexpire"
        | "expireat" | "pexpireat" | "persist" | "lpush" | "rpush" | "lpushx" | "rpushx"
        | "hset" | "hmset" | "hsetnx" | "hdel" | "fencedset" | "mset" | "msetnx" | "append"
        | "setrange" | "sadd" | "srem" => false,
        // Metadata only.
        "exists" | "type" | "watch" | "object" | "memory" | "touch" | "expiretime"
        | "pexpiretime" => false,
        _ => true,
    };
    Access { read, write }
}

/// The keys a command line names, from the table's key positions (EVAL's from `numkeys`).
/// COMMAND GETKEYS reports them too.
pub fn keys<'a>(spec: &Spec, argv: &'a [Bytes]) -> Vec<&'a [u8]> {
    if spec.name.starts_with("eval") {
        let n = argv.get(2).and_then(|n| parse_i64(n)).unwrap_or(0).max(0) as usize;
        return argv.iter().skip(3).take(n).map(|k| k.as_ref()).collect();
    }
    if matches!(spec.name, "sort" | "sort_ro") {
        return sort_keys(argv);
    }
    // `MLOCK owner [options] KEYS n key ...`, `MUNLOCK owner KEYS n key ...`.
    if matches!(spec.name, "mlock" | "munlock") {
        return crate::cmd::mlock::key_args(argv)
            .iter()
            .map(|k| k.as_ref())
            .collect();
    }
    // SINTERCARD numkeys key ...: the table gives it no key positions (movable keys).
    if spec.name == "sintercard" {
        let n = argv.get(1).and_then(|n| parse_i64(n)).unwrap_or(0).max(0) as usize;
        return argv.iter().skip(2).take(n).map(|k| k.as_ref()).collect();
    }
    // `LMPOP numkeys key ...`, `BLMPOP timeout numkeys key ...`.
    if let Some(at) = match spec.name {
        "lmpop" => Some(1),
        "blmpop" => Some(2),
        _ => None,
    } {
        let n = argv.get(at).and_then(|n| parse_i64(n)).unwrap_or(0).max(0) as usize;
        return argv
            .iter()
            .skip(at + 1)
            .take(n)
            .map(|k| k.as_ref())
            .collect();
    }
    // Sorted-set commands whose keys follow a `numkeys` (Redis's movablekeys), after the
    // destination for the store variants.
    let numkeys_at = match spec.name {
        "zmpop" | "zinter" | "zunion" | "zdiff" | "zintercard" => Some(1),
        "zinterstore" | "zunionstore" | "zdiffstore" | "bzmpop" => Some(2),
        _ => None,
    };
    if let Some(at) = numkeys_at {
        let n = argv.get(at).and_then(|n| parse_i64(n)).unwrap_or(0).max(0) as usize;
        let dst = argv
            .get(1)
            .filter(|_| at == 2 && spec.name != "bzmpop")
            .map(|k| k.as_ref());
        let srcs = argv.iter().skip(at + 1).take(n).map(|k| k.as_ref());
        return dst.into_iter().chain(srcs).collect();
    }
    // GEORADIUS(BYMEMBER) key ... [STORE|STOREDIST dst]: the destination is an option.
    if let Some(base) = match spec.name {
        "georadius" => Some(6),
        "georadiusbymember" => Some(5),
        _ => None,
    } {
        let opts = argv.get(base..).unwrap_or_default();
        let dst = crate::cmd::geosearch::store_key_at(opts).map(|i| opts[i].as_ref());
        return argv
            .get(1)
            .map(|k| k.as_ref())
            .into_iter()
            .chain(dst)
            .collect();
    }
    // `OBJECT ENCODING key`, `MEMORY USAGE key`: the table gives containers no key positions.
    if matches!(spec.name, "object" | "memory") {
        return argv.get(2).map(|k| k.as_ref()).into_iter().collect();
    }
    // Shard channels sit in key positions (`not_key` in Redis): channels, not keys.
    if spec.first_key <= 0 || matches!(spec.name, "spublish" | "ssubscribe" | "sunsubscribe") {
        return Vec::new();
    }
    let argc = argv.len() as i32;
    let last = if spec.last_key < 0 {
        argc + spec.last_key
    } else {
        spec.last_key.min(argc - 1)
    };
    let step = spec.step.max(1) as usize;
    (spec.first_key..=last)
        .step_by(step)
        .filter_map(|i| argv.get(i as usize).map(|k| k.as_ref()))
        .collect()
}

/// SORT's keys: the sorted key, the STORE destination (the last one given), and `*` when a
/// BY pattern or a GET reads other keys. Redis allows BY and GET only to a user who may read
/// every key; the `*` key asks exactly that of the user's key patterns (Palisade refuses with
/// the NOPERM key text, where Redis answers `ERR BY option of SORT denied ...`).
fn sort_keys(argv: &[Bytes]) -> Vec<&[u8]> {
    let mut keys: Vec<&[u8]> = argv.get(1).map(|k| k.as_ref()).into_iter().collect();
    let (mut store, mut reaches) = (None, false);
    let mut i = 2;
    while i < argv.len() {
        let word = argv[i].to_ascii_lowercase();
        let next = argv.get(i + 1);
        match (word.as_slice(), next) {
            (b"limit", _) => i += 2,
            (b"by", Some(p)) => {
                reaches |= p.contains(&b'*');
                i += 1;
            }
            (b"get", Some(_)) => {
                reaches = true;
                i += 1;
            }
            (b"store", Some(k)) => {
                store = Some(k.as_ref());
                i += 1;
            }
            _ => {}
        }
        i += 1;
    }
    keys.extend(store);
    if reaches {
        keys.push(b"*");
    }
    keys
}

/// The channels a command line names, and whether they are patterns.
fn channels<'a>(name: &str, argv: &'a [Bytes]) -> Vec<(&'a [u8], bool)> {
    match name {
        "subscribe" | "ssubscribe" => argv[1..].iter().map(|c| (c.as_ref(), false)).collect(),
        "psubscribe" => argv[1..].iter().map(|c| (c.as_ref(), true)).collect(),
        "publish" | "spublish" => argv
            .get(1)
            .map(|c| (c.as_ref(), false))
            .into_iter()
            .collect(),
        _ => Vec::new(),
    }
}

/// The first argument of a command line, lower-case (a subcommand or a first argument).
pub fn first_arg(argv: &[Bytes]) -> Option<String> {
    argv.get(1)
        .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
}

/// What the permission check sees of a command line (`sub` from [`first_arg`]).
pub fn subject<'a>(spec: &'a Spec, sub: Option<&'a str>, argv: &'a [Bytes]) -> Subject<'a> {
    let access = if spec.name == "bitfield" && crate::cmd::bitfield::reads_only(argv) {
        READ_ONLY
    } else {
        key_access(spec)
    };
    let container_sub = sub.filter(|_| subcommands(spec.name).is_some());
    Subject {
        name: spec.name,
        sub,
        categories: categories(spec, container_sub),
        keys: keys(spec, argv).into_iter().map(|k| (k, access)).collect(),
        channels: channels(spec.name, argv),
    }
}

/// Checks a command line against a user.
pub fn check(user: &User, spec: &Spec, argv: &[Bytes]) -> Result<(), Denied> {
    let sub = first_arg(argv);
    user.check(&subject(spec, sub.as_deref(), argv))
}

/// True for a user that may run anything (the built-in `default`): its commands need no check.
pub fn unrestricted(user: &User) -> bool {
    user.all_commands
        && user.rules.is_empty()
        && user.channels.iter().any(|c| c.as_ref() == b"*")
        && user
            .keys
            .iter()
            .any(|k| k.read && k.write && k.pattern.as_ref() == b"*")
}

/// The name Redis gives a command in NOPERM texts: `acl|log` for a subcommand.
pub fn full_name(spec: &Spec, argv: &[Bytes]) -> String {
    match (subcommands(spec.name), first_arg(argv)) {
        (Some(subs), Some(sub)) if subs.contains(&sub.as_str()) => {
            format!("{}|{sub}", spec.name)
        }
        _ => spec.name.to_string(),
    }
}

/// Redis's reply to a command the user may not run.
pub fn noperm(denied: Denied, name: &str) -> Reply {
    Reply::err(match denied {
        Denied::Command => {
            format!("NOPERM this user has no permissions to run the '{name}' command")
        }
        Denied::Key(_) => {
            "NOPERM this user has no permissions to access one of the keys used as arguments".into()
        }
        Denied::Channel(_) => {
            "NOPERM this user has no permissions to access one of the channels used as arguments"
                .into()
        }
    })
}

/// Redis's script error for a `redis.call` the user may not run.
pub fn script_denied(denied: Denied) -> Reply {
    Reply::err(match denied {
        Denied::Command => {
            "ERR The user executing the script can't run this command or subcommand"
        }
        Denied::Key(_) => "ERR The user executing the script can't access at least one of the keys mentioned in the command arguments",
        Denied::Channel(_) => {
            "ERR The user executing the script can't publish to the channel mentioned in the command"
        }
    })
}

/// ACL CAT category: the commands in it, in table order, each followed by its subcommands
/// in it, named `container|sub` as Redis 7 names them; None for an unknown category.
pub fn category_commands(cat: &str) -> Option<Vec<String>> {
    if !CATEGORIES.contains(&cat) {
        return None;
    }
    let mut out = Vec::new();
    for spec in table() {
        if categories(spec, None).contains(&cat) {
            out.push(spec.name.to_string());
        }
        for sub in spec.subcommands {
            if categories(sub, None).contains(&cat) {
                out.push(format!("{}|{}", spec.name, sub.name));
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(line: &str) -> Vec<Bytes> {
        line.split(' ')
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect()
    }

    #[test]
    fn sets_and_sort_have_redis_categories() {
        let cats = |n: &str| categories(lookup(n).unwrap(), None);
        assert_eq!(cats("sadd"), vec!["set", "write", "fast"]);
        assert_eq!(cats("smembers"), vec!["set", "read", "slow"]);
        let mut sort = cats("sort");
        sort.sort();
        assert_eq!(
            sort,
            vec!["dangerous", "list", "set", "slow", "sortedset", "write"]
        );
        assert!(cats("sort_ro").contains(&"read"));
    }

    /// SINTERCARD's keys come from numkeys; SORT's are the key, STORE's, and `*` when BY
    /// or GET reach other keys.
    #[test]
    fn movable_keys_are_found() {
        let k = |line: &str| {
            let a = argv(line);
            let spec = lookup(&String::from_utf8_lossy(&a[0])).unwrap();
            keys(spec, &a)
                .into_iter()
                .map(|k| String::from_utf8_lossy(k).into_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(k("sintercard 2 a b LIMIT 1"), vec!["a", "b"]);
        assert_eq!(k("sort l LIMIT 0 1 STORE d"), vec!["l", "d"]);
        assert_eq!(k("sort l BY nosort"), vec!["l"]);
        assert_eq!(k("sort l BY w_* GET #"), vec!["l", "*"]);
        assert_eq!(k("sort_ro l GET x"), vec!["l", "*"]);
        assert_eq!(k("georadius g 1 2 3 km STORE d"), vec!["g", "d"]);
        assert_eq!(
            k("georadius g 1 2 3 km STORE d STOREDIST e"),
            vec!["g", "e"]
        );
        assert_eq!(
            k("georadiusbymember g m 3 km ASC storedist e"),
            vec!["g", "e"]
        );
        assert_eq!(k("georadius g 1 2 3 km WITHDIST"), vec!["g"]);
        assert_eq!(
            k("geosearchstore d g FROMMEMBER m BYRADIUS 1 km"),
            vec!["d", "g"]
        );
    }
}
