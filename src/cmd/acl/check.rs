//! The permission check's view of the command table: each command's categories (Redis's,
//! from the table's groups and flags, plus `@palisade`), the keys and channels a command line
//! names and the access each key needs, and Redis's refusal texts. Keys and their access come
//! from the row's key specs ([`keyspec::keys`]), channels from its
//! [`crate::cmd::keyspec::Channels`].

use bytes::Bytes;

use crate::cmd::keyspec::{self, KeyFlags};
use crate::cmd::registry::{lookup, table, Spec, PALISADE_GROUP};
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

/// A container's subcommands, from its table row ([`Spec::subcommands`]).
pub(super) fn subcommands(name: &str) -> Option<&'static [&'static str]> {
    lookup(name)
        .map(|s| s.subcommands)
        .filter(|s| !s.is_empty())
}

/// False for a container command line whose subcommand does not exist (Redis's
/// `lookupCommand` finds no command for it); true otherwise, a bare container included.
pub fn known_subcommand(spec: &Spec, argv: &[Bytes]) -> bool {
    match (subcommands(spec.name), first_arg(argv)) {
        (Some(subs), Some(sub)) => subs.contains(&sub.as_str()),
        _ => true,
    }
}

/// The categories of a command, or of its subcommand (`sub`, lower-case) for containers.
pub fn categories(spec: &Spec, sub: Option<&str>) -> Vec<&'static str> {
    let flag = |f: &str| spec.flags.contains(&f);
    let mut c = Vec::new();
    let mut add = |cat: &'static str| {
        if !c.contains(&cat) {
            c.push(cat);
        }
    };
    // SORT and SORT_RO (group generic) work on lists, sets and sorted sets, and reach
    // other keys through BY and GET: Redis files them under those types and @dangerous.
    if matches!(spec.name, "sort" | "sort_ro") {
        for cat in ["set", "sortedset", "list", "dangerous"] {
            add(cat);
        }
    }
    match spec.group {
        _ if matches!(spec.name, "sort" | "sort_ro") => {}
        // WAIT is filed under generic but Redis puts it in @connection.
        _ if spec.name == "wait" => add("connection"),
        // READONLY, READWRITE, ASKING: group cluster, category @connection in Redis.
        _ if matches!(spec.name, "readonly" | "readwrite" | "asking") => add("connection"),
        "set" => add("set"),
        "string" => add("string"),
        "list" => add("list"),
        "hash" => add("hash"),
        "bitmap" => add("bitmap"),
        "sorted-set" => add("sortedset"),
        "geo" => add("geo"),
        "generic" => add("keyspace"),
        "server" if matches!(spec.name, "flushall" | "flushdb" | "swapdb" | "dbsize") => {
            add("keyspace")
        }
        // COMMAND: group server, category @connection in Redis.
        "server" if spec.name == "command" => add("connection"),
        "connection" => add("connection"),
        "transactions" => add("transaction"),
        "scripting" => add("scripting"),
        "pubsub" => add("pubsub"),
        PALISADE_GROUP => add(PALISADE_GROUP),
        _ => {}
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
    if dangerous(spec.name, sub) || flag("admin") {
        for cat in ["admin", "dangerous"] {
            add(cat);
        }
    }
    if matches!(
        spec.name,
        "keys" | "info" | "swapdb" | "flushall" | "flushdb"
    ) {
        add("dangerous");
    }
    add(if flag("fast") { "fast" } else { "slow" });
    c
}

/// The admin commands (or subcommands) Redis puts in `@admin` and `@dangerous`.
fn dangerous(name: &str, sub: Option<&str>) -> bool {
    match name {
        "config" | "shutdown" | "slowlog" | "latency" | "role" | "lastsave" => true,
        "acl" => !matches!(sub, Some("whoami" | "cat" | "genpass" | "help")),
        // As Redis 7: the subcommands that act on other clients or the server are @dangerous.
        "client" => matches!(
            sub,
            Some("list" | "kill" | "pause" | "unpause" | "unblock" | "no-evict")
        ),
        _ => false,
    }
}

/// The access Redis's ACLs ask for a key whose spec has these flags
/// (`ACLSelectorCheckKey`): `access` needs read permission, `insert`, `update` and `delete`
/// need write permission, and a key with none of them (EXISTS, TYPE) only a pattern that
/// matches it.
pub(super) fn access(flags: KeyFlags) -> Access {
    Access {
        read: flags.needs_read(),
        write: flags.needs_write(),
    }
}

/// The keys a command line names and the access each needs, from the row's key specs (or
/// its own [`crate::cmd::keyspec::GetKeys`]), as Redis 7's ACL check finds them
/// ([`keyspec::keys`]).
pub fn keys<'a>(spec: &Spec, argv: &'a [Bytes]) -> Vec<(&'a [u8], Access)> {
    // `OBJECT ENCODING key`, `MEMORY USAGE key`: the table gives containers no key positions.
    if matches!(spec.name, "object" | "memory") {
        return argv
            .get(2)
            .map(|k| (k.as_ref(), access(KeyFlags::RO)))
            .into_iter()
            .collect();
    }
    keyspec::keys(spec, argv)
        .into_iter()
        .filter_map(|k| Some((k.name(argv)?, access(k.flags))))
        .collect()
}

/// The first argument of a command line, lower-case (a subcommand or a first argument).
pub fn first_arg(argv: &[Bytes]) -> Option<String> {
    argv.get(1)
        .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
}

/// What the permission check sees of a command line (`sub` from [`first_arg`]).
pub fn subject<'a>(spec: &'a Spec, sub: Option<&'a str>, argv: &'a [Bytes]) -> Subject<'a> {
    let container_sub = sub.filter(|_| subcommands(spec.name).is_some());
    Subject {
        name: spec.name,
        sub,
        categories: categories(spec, container_sub),
        keys: keys(spec, argv),
        channels: spec.channels.map(|c| c.of(argv)).unwrap_or_default(),
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

/// ACL CAT category: the commands in it, in table order; None for an unknown category.
pub fn category_commands(cat: &str) -> Option<Vec<&'static str>> {
    if !CATEGORIES.contains(&cat) {
        return None;
    }
    let mut out = Vec::new();
    for spec in table() {
        if categories(spec, None).contains(&cat) {
            out.push(spec.name);
        }
        if let Some(subs) = subcommands(spec.name) {
            for sub in subs {
                if categories(spec, Some(sub)).contains(&cat) && !out.contains(&spec.name) {
                    out.push(spec.name);
                }
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

    fn names(line: &str) -> Vec<String> {
        let a = argv(line);
        let spec = lookup(&String::from_utf8_lossy(&a[0]).to_lowercase()).unwrap();
        keys(spec, &a)
            .into_iter()
            .map(|(k, _)| String::from_utf8_lossy(k).into_owned())
            .collect()
    }

    /// SINTERCARD's keys come from numkeys; SORT's are the key, STORE's, and `*` when BY
    /// or GET reach other keys; GEORADIUS's STORE and STOREDIST are keyword specs.
    #[test]
    fn movable_keys_are_found() {
        let k = names;
        assert_eq!(k("sintercard 2 a b LIMIT 1"), vec!["a", "b"]);
        assert_eq!(k("sort l LIMIT 0 1 STORE d"), vec!["l", "d"]);
        assert_eq!(k("sort l BY nosort"), vec!["l"]);
        assert_eq!(k("sort l BY w_* GET #"), vec!["l", "*"]);
        assert_eq!(k("sort_ro l GET x"), vec!["l", "*"]);
        assert_eq!(k("georadius g 1 2 3 km STORE d"), vec!["g", "d"]);
        // Redis's specs find both destinations (the command stores to the last).
        assert_eq!(
            k("georadius g 1 2 3 km STORE d STOREDIST e"),
            vec!["g", "d", "e"]
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
        assert_eq!(k("mlock o PX 10 KEYS 2 a b"), vec!["a", "b"]);
        assert_eq!(k("zunionstore d 2 a b WEIGHTS 1 2"), vec!["d", "a", "b"]);
        // A bad numkeys names no keys (the command then fails on it).
        for bad in [
            "zunionstore d 0 a",
            "zunionstore d -1 a",
            "zunionstore d x a",
            "zunionstore d 3 a",
        ] {
            assert_eq!(k(bad), Vec::<String>::new(), "{bad}");
        }
        // Shard channels are `not_key` specs: not keys.
        assert_eq!(k("spublish ch m"), Vec::<String>::new());
        assert_eq!(k("ssubscribe a b"), Vec::<String>::new());
    }

    /// Each key's access comes from its spec's flags, as Redis's ACLs ask: LMOVE's source
    /// is read and written, its destination only written; SET reads only with GET; a
    /// BITFIELD of GETs only reads; EXISTS needs neither.
    #[test]
    fn each_key_has_its_specs_access() {
        let acc = |line: &str| {
            let a = argv(line);
            let spec = lookup(&String::from_utf8_lossy(&a[0]).to_lowercase()).unwrap();
            keys(spec, &a)
                .into_iter()
                .map(|(_, a)| (a.read, a.write))
                .collect::<Vec<_>>()
        };
        let (r, w, rw, none) = ((true, false), (false, true), (true, true), (false, false));
        assert_eq!(acc("lmove a b LEFT RIGHT"), vec![rw, w]);
        assert_eq!(acc("set k v"), vec![w]);
        assert_eq!(acc("set k v GET"), vec![rw]);
        assert_eq!(acc("set k v NX get EX 10"), vec![rw]);
        assert_eq!(acc("bitfield k GET u8 0"), vec![r]);
        assert_eq!(acc("bitfield k GET u8 0 SET u8 0 1"), vec![rw]);
        assert_eq!(acc("exists a b"), vec![none, none]);
        assert_eq!(acc("eval s 1 a"), vec![rw]);
        assert_eq!(acc("eval_ro s 1 a"), vec![r]);
        assert_eq!(acc("zunionstore d 2 a b"), vec![w, r, r]);
        assert_eq!(acc("sort l BY w_* STORE d"), vec![r, w, r]);
        assert_eq!(acc("del a"), vec![w]);
    }

    /// Channels come from the rows: SUBSCRIBE's and SSUBSCRIBE's arguments, PSUBSCRIBE's as
    /// patterns, PUBLISH's and SPUBLISH's first; UNSUBSCRIBE is not checked, as in Redis.
    #[test]
    fn channels_come_from_the_rows() {
        let ch = |line: &str| {
            let a = argv(line);
            let spec = lookup(&String::from_utf8_lossy(&a[0]).to_lowercase()).unwrap();
            subject(spec, None, &a)
                .channels
                .into_iter()
                .map(|(c, p)| (String::from_utf8_lossy(c).into_owned(), p))
                .collect::<Vec<_>>()
        };
        let c = |n: &str, p: bool| (n.to_string(), p);
        assert_eq!(ch("subscribe a b"), vec![c("a", false), c("b", false)]);
        assert_eq!(ch("ssubscribe a"), vec![c("a", false)]);
        assert_eq!(ch("psubscribe a*"), vec![c("a*", true)]);
        assert_eq!(ch("publish a m"), vec![c("a", false)]);
        assert_eq!(ch("spublish a m"), vec![c("a", false)]);
        assert_eq!(ch("unsubscribe a"), vec![]);
    }
}
