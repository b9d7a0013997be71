//! The permission check's view of the command table: each command's categories (Redis's,
//! from its row: group, flags or declared categories, and a subcommand's from its own row), the keys and channels a command line
//! names and the access each key needs, and Redis's refusal texts. Keys and their access come
//! from the row's key specs ([`keyspec::keys`]; a container's from its subcommand's row),
//! channels from its [`crate::cmd::keyspec::Channels`].

use bytes::Bytes;

use crate::cmd::keyspec::{self, KeyFlags};
use crate::cmd::registry::{
    line_spec, lookup, sub_spec, subcommand_names, table, Spec, PALISADE_GROUP,
};
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
    // A container's keys are its subcommand's (`OBJECT ENCODING key`, `MEMORY USAGE key`).
    keyspec::keys(line_spec(spec, argv), argv)
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

    use crate::cmd::test_argv as argv;

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
