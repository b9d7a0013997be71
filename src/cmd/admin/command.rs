//! `COMMAND`, `COMMAND COUNT`, `COMMAND INFO [name ...]`, `COMMAND LIST`,
//! `COMMAND GETKEYS command [arg ...]`, `COMMAND GETKEYSANDFLAGS command [arg ...]` and
//! `COMMAND DOCS [name ...]`, answered from the command table (every file's `COMMANDS` rows,
//! in registry order).
//!
//! COMMAND DOCS has Redis 7's shape, a map from command name to a map of `summary`, `since`
//! and `group` (flattened to arrays in RESP2), taken from the same rows as COMMAND INFO.
//! It also has `arguments`, from the row's notation ([`crate::cmd::argdoc`]), which redis-cli
//! reads at start for its hints and `HELP` lines, and a container's `subcommands` (a map of
//! `config|get` to its own docs, from the container's subcommand rows). COMMAND INFO's tenth
//! element lists a container's subcommands' entries the same way. It leaves out what else
//! Redis adds (complexity, history, each argument's `since`). Unknown names are left out of
//! the reply, as in Redis.

use bytes::Bytes;

use crate::cmd::connection::ConnCmd;
use crate::cmd::keyspec::{self, KeyAt};
use crate::cmd::registry::{sub_spec, table, Spec, NO_KEYS};
use crate::cmd::{lookup, Request};
use crate::resp::{Args, Reply};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new("command", -1, &["loading", "stale"], NO_KEYS, parse)
        .docs(
            "Describe the commands this server knows",
            "2.8.13",
            "server",
        )
        .categories(&["connection"])
        .subcommands(SUBCOMMANDS),
];

/// COMMAND's subcommands (`command|name`): Redis's facts (`scripts/command-args.py
/// --subcommands command`).
const SUBCOMMANDS: &[Spec] = &[
    Spec::new("count", 2, &["loading", "stale"], NO_KEYS, parse)
        .docs("Count the commands this server knows", "2.8.13", "server")
        .categories(&["connection"]),
    Spec::new("docs", -2, &["loading", "stale"], NO_KEYS, parse)
        .docs(
            "Describe commands for clients: summary, group, arguments",
            "7.0.0",
            "server",
        )
        .categories(&["connection"])
        .args("command-name?*"),
    Spec::new("getkeys", -4, &["loading", "stale"], NO_KEYS, parse)
        .docs("Find the keys of a command line", "2.8.13", "server")
        .categories(&["connection"]),
    Spec::new("getkeysandflags", -4, &["loading", "stale"], NO_KEYS, parse)
        .docs(
            "Find the keys of a command line and what it does with each",
            "7.0.0",
            "server",
        )
        .categories(&["connection"]),
    Spec::new("help", 2, &["loading", "stale"], NO_KEYS, parse)
        .docs("List the subcommands and what they take", "5.0.0", "server")
        .categories(&["connection"]),
    Spec::new("info", -2, &["loading", "stale"], NO_KEYS, parse)
        .docs(
            "Describe commands: arity, flags, keys, categories (all when none is named)",
            "2.8.13",
            "server",
        )
        .categories(&["connection"])
        .args("command-name?*"),
    Spec::new("list", -2, &["loading", "stale"], NO_KEYS, parse)
        .docs(
            "List the names of the commands this server knows",
            "7.0.0",
            "server",
        )
        .categories(&["connection"])
        .args("filterby@FILTERBY=(MODULE=module-name|ACLCAT=category|PATTERN=pattern:pattern)?"),
];

/// One command's COMMAND INFO entry.
fn info(spec: &Spec) -> Reply {
    info_named(spec, spec.name.to_string())
}

/// A COMMAND INFO entry named `name` (`config|get` for a subcommand's row): its tenth
/// element holds a container's subcommands' entries, as Redis 7 reports them.
fn info_named(spec: &Spec, name: String) -> Reply {
    Reply::Array(vec![
        Reply::Bulk(Bytes::from(name)),
        Reply::Int(spec.arity as i64),
        Reply::Set(
            spec.flags
                .iter()
                .map(|f| Reply::Simple((*f).into()))
                .collect(),
        ),
        Reply::Int(spec.first_key as i64),
        Reply::Int(spec.last_key as i64),
        Reply::Int(spec.step as i64),
        // ACL categories, as the permission check files the command.
        Reply::Set(
            crate::cmd::acl::check::categories(spec, None)
                .into_iter()
                .map(|c| Reply::Simple(format!("@{c}")))
                .collect(),
        ),
        Reply::Array(vec![]),
        // Key specs; a row's notation is checked by a unit test (`every_rows_key_specs_parse`).
        crate::cmd::keyspec::reply(&crate::cmd::keyspec::parse(spec.key_specs).unwrap_or_default()),
        Reply::Array(
            spec.subcommands
                .iter()
                .map(|sub| info_named(sub, format!("{}|{}", spec.name, sub.name)))
                .collect(),
        ),
    ])
}

/// One command's COMMAND DOCS entry: its name and the map of its docs.
fn docs(spec: &Spec) -> (Reply, Reply) {
    docs_named(spec, spec.name.to_string())
}

/// A COMMAND DOCS entry named `name` (`config|get` for a subcommand's row): a container's
/// has `subcommands`, a map of its subcommands' entries, as Redis 7 reports them (redis-cli
/// builds its hints for `CONFIG GET` from them).
fn docs_named(spec: &Spec, name: String) -> (Reply, Reply) {
    let fields = [
        ("summary", spec.summary),
        ("since", spec.since),
        ("group", spec.group),
    ];
    let mut map: Vec<(Reply, Reply)> = fields
        .iter()
        .map(|(k, v)| (Reply::text(k), Reply::text(v)))
        .collect();
    // A row's notation is checked by a unit test (`every_rows_arguments_parse`).
    if let Ok(args) = crate::cmd::argdoc::parse(spec.args) {
        if !args.is_empty() {
            map.push((Reply::text("arguments"), crate::cmd::argdoc::reply(&args)));
        }
    }
    if !spec.subcommands.is_empty() {
        let subs = spec
            .subcommands
            .iter()
            .map(|sub| docs_named(sub, format!("{}|{}", spec.name, sub.name)))
            .collect();
        map.push((Reply::text("subcommands"), Reply::Map(subs)));
    }
    (Reply::Bulk(Bytes::from(name)), Reply::Map(map))
}

/// The rows of the named commands (`None` for an unknown name, looked up in any case), or
/// every row when no name is given: what COMMAND INFO and COMMAND DOCS report.
fn rows(names: &[Bytes]) -> Vec<Option<&'static Spec>> {
    if names.is_empty() {
        return table().iter().copied().map(Some).collect();
    }
    names
        .iter()
        .map(|n| lookup(&String::from_utf8_lossy(n).to_lowercase()))
        .collect()
}

/// COMMAND GETKEYS and (`with_flags`) COMMAND GETKEYSANDFLAGS: the keys of the command line
/// `argv` and their key-spec flags, found from the row as the ACL check finds them
/// ([`keyspec::keys`]: Redis 7's `getKeysFromCommandWithSpecs`), with Redis's error texts.
/// Cluster clients ask it to route a command whose keys move. SORT's `*` (a BY or GET
/// reading other keys, for the ACL check) is not a key of the line and is left out.
fn getkeys(argv: &[Bytes], with_flags: bool) -> Result<Reply, Reply> {
    if argv.len() < 2 {
        let sub = if with_flags {
            "getkeysandflags"
        } else {
            "getkeys"
        };
        return Err(crate::cmd::wrong_arity(&format!("command|{sub}")));
    }
    let name = String::from_utf8_lossy(&argv[0]).to_lowercase();
    let invalid = || Reply::err("ERR Invalid command specified");
    let spec = lookup(&name).ok_or_else(invalid)?;
    // A container's line runs under its subcommand's row (`OBJECT ENCODING key`), as
    // Redis's lookupCommand finds it; an unknown subcommand is no command.
    let spec = match argv.get(1) {
        Some(sub) if !spec.subcommands.is_empty() => {
            sub_spec(spec, &String::from_utf8_lossy(sub).to_ascii_lowercase())
                .ok_or_else(invalid)?
        }
        _ => spec,
    };
    if !keyspec::has_keys(spec) {
        return Err(Reply::err("ERR The command has no key arguments"));
    }
    let argc = argv.len() as i32;
    if (spec.arity > 0 && argc != spec.arity) || argc < -spec.arity {
        return Err(Reply::err(
            "ERR Invalid number of arguments specified for command",
        ));
    }
    let keys: Vec<Reply> = keyspec::keys(spec, argv)
        .into_iter()
        .filter_map(|k| match k.at {
            KeyAt::Arg(i) => Some((argv.get(i)?, k.flags)),
            KeyAt::Every => None,
        })
        .map(|(key, flags)| {
            let key = Reply::Bulk(key.clone());
            if with_flags {
                Reply::Array(vec![key, keyspec::flags_reply(flags)])
            } else {
                key
            }
        })
        .collect();
    // EVAL, EVALSHA, EVAL_RO, EVALSHA_RO: keys after `numkeys`, which may be 0.
    if keys.is_empty() && !spec.flags.contains(&"no_mandatory_keys") {
        return Err(Reply::err("ERR Invalid arguments specified for command"));
    }
    Ok(Reply::Array(keys))
}

/// Parses COMMAND and computes its reply (it depends only on the static table).
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    if args.remaining() == 0 {
        return Ok(Request::Conn(ConnCmd::Command(Reply::Array(
            table().iter().copied().map(info).collect(),
        ))));
    }
    let raw = args.arg()?;
    let sub = String::from_utf8_lossy(&raw).to_lowercase();
    let reply = match sub.as_str() {
        "count" if args.remaining() == 0 => Reply::Int(table().len() as i64),
        "list" => Reply::Array(table().iter().map(|s| Reply::text(s.name)).collect()),
        "info" => Reply::Array(
            rows(&args.rest())
                .into_iter()
                .map(|s| s.map_or(Reply::Nil, info))
                .collect(),
        ),
        "docs" => Reply::Map(rows(&args.rest()).into_iter().flatten().map(docs).collect()),
        "getkeys" => getkeys(&args.rest(), false)?,
        "getkeysandflags" => getkeys(&args.rest(), true)?,
        "count" => {
            return Err(Reply::err(
                "ERR wrong number of arguments for 'command|count' command",
            ))
        }
        _ => {
            return Err(Reply::err(format!(
                "ERR unknown subcommand '{}'. Try COMMAND HELP.",
                String::from_utf8_lossy(&raw)
            )))
        }
    };
    Ok(Request::Conn(ConnCmd::Command(reply)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::registry::PALISADE_GROUP;

    use crate::cmd::test_argv as argv;

    fn keys_of(line: &str) -> Result<Reply, Reply> {
        getkeys(&argv(line), false)
    }

    fn bulks(keys: &[&str]) -> Reply {
        Reply::Array(keys.iter().map(|k| Reply::text(k)).collect())
    }

    /// Each of Palisade's own commands, a valid command line, and the keys cluster clients
    /// must route it by. Every Palisade command must have a row (RAFT.* has no keys).
    const OWN: &[(&str, &[&str])] = &[
        ("LOCK res:{1} owner PX 1000 WAIT 10", &["res:{1}"]),
        ("UNLOCK res:{1} owner", &["res:{1}"]),
        ("RENEW res:{1} owner PX 1000", &["res:{1}"]),
        ("LOCKINFO res:{1}", &["res:{1}"]),
        ("FENCEDSET data:{1} value 7 PX 100", &["data:{1}"]),
        ("FENCEDGET data:{1} 7", &["data:{1}"]),
        ("FENCECHECK res:{1} 7", &["res:{1}"]),
        ("RLOCK res:{1} owner PX 1000 WAIT 10", &["res:{1}"]),
        ("SEMACQUIRE res:{1} owner LIMIT 3 PX 1000", &["res:{1}"]),
        // Movable keys (after `KEYS n`): no key positions; GETKEYS finds them.
        (
            "MLOCK owner PX 1000 WAIT 10 KEYS 2 res:{1}:a res:{1}:b",
            &["res:{1}:a", "res:{1}:b"],
        ),
        (
            "MUNLOCK owner KEYS 2 res:{1}:a res:{1}:b",
            &["res:{1}:a", "res:{1}:b"],
        ),
    ];

    /// COMMAND INFO's key positions and COMMAND GETKEYS name exactly the key of each of
    /// Palisade's own commands, and the line parses (so the positions describe real use).
    #[test]
    fn palisade_commands_have_exact_key_positions() {
        for s in table().iter().filter(|s| s.group == PALISADE_GROUP) {
            // RAFT.* and LOCKNOTIFY have no keys.
            if s.name.starts_with("raft.") || s.name == "locknotify" {
                assert_eq!((s.first_key, s.last_key, s.step), (0, 0, 0), "{}", s.name);
                continue;
            }
            let Some((line, keys)) = OWN.iter().find(|(l, _)| {
                l.split(' ').next().map(str::to_lowercase).as_deref() == Some(s.name)
            }) else {
                panic!("{}: no example line in OWN", s.name)
            };
            assert!(
                crate::cmd::parse(argv(line)).is_ok(),
                "{line} does not parse"
            );
            assert_eq!(keys_of(line), Ok(bulks(keys)), "{line}");
            if s.flags.contains(&"movablekeys") {
                assert_eq!((s.first_key, s.last_key, s.step), (0, 0, 0), "{line}");
                continue;
            }
            // From the positions alone, as redis-py computes them from COMMAND.
            let words: Vec<&str> = line.split(' ').collect();
            let last = if s.last_key < 0 {
                words.len() as i32 + s.last_key
            } else {
                s.last_key
            };
            let from_positions: Vec<&str> = (s.first_key..=last)
                .step_by(s.step.max(1) as usize)
                .map(|i| words[i as usize])
                .collect();
            assert_eq!(
                from_positions,
                *keys,
                "{line}: positions {:?}",
                (s.first_key, s.last_key, s.step)
            );
        }
    }

    /// COMMAND GETKEYS as redis-server 7.0 answers it.
    #[test]
    fn getkeys_matches_redis() {
        assert_eq!(keys_of("MSET a 1 b 2"), Ok(bulks(&["a", "b"])));
        assert_eq!(keys_of("EVAL x 2 a b c"), Ok(bulks(&["a", "b"])));
        assert_eq!(keys_of("EVAL x 0"), Ok(bulks(&[])));
        assert_eq!(keys_of("ZUNIONSTORE d 2 a b"), Ok(bulks(&["d", "a", "b"])));
        assert_eq!(
            keys_of("SORT l BY w* GET x STORE d"),
            Ok(bulks(&["l", "d"]))
        );
        assert_eq!(keys_of("GET"), Err(wrong_arity_getkeys()));
        assert_eq!(
            keys_of("NOSUCH a"),
            Err(Reply::err("ERR Invalid command specified"))
        );
        assert_eq!(
            keys_of("GET a b"),
            Err(Reply::err(
                "ERR Invalid number of arguments specified for command"
            ))
        );
        for line in ["PUBLISH ch m", "SPUBLISH ch m"] {
            assert_eq!(
                keys_of(line),
                Err(Reply::err("ERR The command has no key arguments")),
                "{line}"
            );
        }
    }

    fn wrong_arity_getkeys() -> Reply {
        crate::cmd::wrong_arity("command|getkeys")
    }
}
