use std::collections::BTreeSet;

use super::*;
use crate::cmd::Command;

/// Whether a command is a read is declared once, on its log type
/// (`Replicated::is_read`): it picks the path (`Request::Data` goes to the read path or
/// the log by it) and EXEC's read-only check. The row's flags (`readonly`, `write`) are
/// Redis's published metadata (COMMAND INFO, ACL categories). The two agree for every
/// command line below that parses (a few argument shapes per command, enough for most
/// rows), but for the commands whose path depends on their arguments: SORT and
/// GEORADIUSBYMEMBER without STORE, and a BITFIELD of GETs, are reads, though Redis
/// flags them `write`.
#[test]
fn read_and_write_agree() {
    const BY_ARGUMENTS: &[&str] = &["sort", "bitfield", "georadiusbymember"];
    let shapes: &[&[&str]] = &[
        &[],
        &["k"],
        &["k", "v"],
        &["k", "1"],
        &["k", "0", "1"],
        &["k", "a", "b"],
        &["1", "k"],
        &["k", "1", "v"],
        &["k", "f", "v"],
        &["k", "0", "-1"],
        &["k", "a", "1", "b"],
        &["k", "owner", "PX", "1000"],
    ];
    let mut checked = 0;
    let mut bad = Vec::new();
    let mut used = BTreeSet::new();
    for spec in table() {
        for shape in shapes {
            let argv: Vec<Bytes> = std::iter::once(spec.name)
                .chain(shape.iter().copied())
                .map(|w| Bytes::copy_from_slice(w.as_bytes()))
                .collect();
            let path_read = match super::super::parse(argv) {
                Ok(Request::Data(c)) => c.is_read(),
                _ => continue,
            };
            checked += 1;
            let flagged_read = spec.flags.contains(&"readonly");
            let flagged_write = spec.flags.contains(&"write");
            let by_args = BY_ARGUMENTS.contains(&spec.name);
            let disagree = path_read && flagged_write || !path_read && flagged_read;
            if disagree && by_args {
                used.insert(spec.name);
            }
            if disagree && !by_args {
                bad.push(format!(
                    "{} {shape:?}: parsed as read {path_read}, flags {:?}",
                    spec.name, spec.flags
                ));
            }
        }
    }
    for name in BY_ARGUMENTS {
        if !used.contains(name) {
            bad.push(format!(
                "{name}: listed as read or write by its arguments, but agrees"
            ));
        }
    }
    assert!(checked >= 200, "only {checked} command lines parsed");
    assert!(
        bad.is_empty(),
        "read and write disagree:\n{}",
        bad.join("\n")
    );
}

#[test]
fn tags_and_names_are_unique() {
    let tags: BTreeSet<u32> = Command::TAGS.iter().map(|t| t.0).collect();
    assert_eq!(tags.len(), Command::TAGS.len(), "a tag is repeated");
    let names: BTreeSet<&str> = table().iter().map(|s| s.name).collect();
    assert_eq!(names.len(), table().len(), "a command name is repeated");
}

/// Every row carries its COMMAND DOCS fields: a summary, a `since` version of the form
/// `x.y.z`, and a group Redis knows or Palisade's own.
/// Every row's arguments parse, and every command that takes arguments declares them
/// (COMMAND DOCS gives them to redis-cli for its hints); a container's are its
/// subcommands' own.
#[test]
fn every_rows_arguments_parse() {
    let subs: Vec<&Spec> = table().iter().flat_map(|s| s.subcommands).collect();
    for spec in rows_and_subcommands() {
        let args = crate::cmd::argdoc::parse(spec.args)
            .unwrap_or_else(|e| panic!("{}: arguments: {e}", spec.name));
        // QUIT and DEBUG take arguments Redis does not document either; a subcommand's
        // arity counts the container's name, and Redis leaves some (COMMAND GETKEYS)
        // undocumented: the differential test compares those with Redis's.
        let takes_some = spec.arity != 1
            && spec.subcommands.is_empty()
            && !subs.iter().any(|s| std::ptr::eq(*s, spec))
            && !matches!(spec.name, "quit" | "debug");
        assert!(
            !takes_some || !args.is_empty(),
            "{} declares no arguments (`.args(...)`)",
            spec.name
        );
    }
}

/// Every row of the table, then every subcommand row.
fn rows_and_subcommands() -> impl Iterator<Item = &'static Spec> {
    let subs = table().iter().flat_map(|s| s.subcommands.iter());
    table().iter().copied().chain(subs)
}

/// A container's subcommand rows have docs (a one-line summary, an `x.y.z` since), the
/// container's group, unique names, and no subcommands of their own; the ACL rule parser
/// and [`line_spec`] find them by name.
#[test]
fn subcommand_rows_are_complete() {
    let mut containers = 0;
    for spec in table().iter().filter(|s| !s.subcommands.is_empty()) {
        containers += 1;
        let names = subcommand_names(spec.name).expect("a container has names");
        assert_eq!(names.len(), spec.subcommands.len(), "{}", spec.name);
        for sub in spec.subcommands {
            let full = format!("{}|{}", spec.name, sub.name);
            assert!(
                !sub.summary.trim().is_empty() && !sub.summary.contains('\n'),
                "{full}"
            );
            let parts: Vec<&str> = sub.since.split('.').collect();
            assert!(
                parts.len() == 3 && parts.iter().all(|p| p.parse::<u32>().is_ok()),
                "{full}: since {:?}",
                sub.since
            );
            assert_eq!(sub.group, spec.group, "{full}");
            assert!(sub.subcommands.is_empty(), "{full}");
            assert_eq!(
                names.iter().filter(|n| **n == sub.name).count(),
                1,
                "{full}"
            );
            let argv: Vec<Bytes> = [spec.name, &sub.name.to_uppercase()]
                .iter()
                .map(|w| Bytes::copy_from_slice(w.as_bytes()))
                .collect();
            assert!(std::ptr::eq(line_spec(spec, &argv), sub), "{full}");
        }
    }
    assert_eq!(containers, 11);
    assert!(subcommand_names("get").is_none());
}

/// Every row's key specs parse, and a command with key positions declares them (COMMAND
/// INFO reports them; cluster clients and proxies read them).
#[test]
fn every_rows_key_specs_parse() {
    for spec in rows_and_subcommands() {
        let specs = crate::cmd::keyspec::parse(spec.key_specs)
            .unwrap_or_else(|e| panic!("{}: key specs: {e}", spec.name));
        let has_keys = spec.first_key != 0 || spec.flags.contains(&"movablekeys");
        assert!(
            !has_keys || !specs.is_empty(),
            "{} has keys but declares no key specs (`.key_specs(...)`)",
            spec.name
        );
    }
}

#[test]
fn every_row_has_docs() {
    const GROUPS: &[&str] = &[
        "generic",
        "string",
        "list",
        "set",
        "sorted-set",
        "hash",
        "pubsub",
        "transactions",
        "connection",
        "server",
        "scripting",
        "hyperloglog",
        "cluster",
        "sentinel",
        "geo",
        "stream",
        "bitmap",
        PALISADE_GROUP,
    ];
    for s in table() {
        let name = s.name;
        assert!(
            !s.summary.trim().is_empty(),
            "{name}: no summary (Spec::docs)"
        );
        assert!(
            !s.summary.contains(['\r', '\n']),
            "{name}: a summary is one line"
        );
        let parts: Vec<&str> = s.since.split('.').collect();
        assert!(
            parts.len() == 3 && parts.iter().all(|p| p.parse::<u32>().is_ok()),
            "{name}: since {:?} is not x.y.z",
            s.since
        );
        assert!(
            GROUPS.contains(&s.group),
            "{name}: unknown group {:?}",
            s.group
        );
        let own = s.name.starts_with("raft.")
            || [
                "lock",
                "rlock",
                "semacquire",
                "mlock",
                "munlock",
                "locknotify",
                "unlock",
                "renew",
                "lockinfo",
                "fencedset",
                "fencedget",
                "fencecheck",
            ]
            .contains(&name);
        assert_eq!(own, s.group == PALISADE_GROUP, "{name}: group {}", s.group);
        if own {
            assert_eq!(s.since, PALISADE_SINCE, "{name}");
        }
    }
}

/// Every command of the fixture (the table before its rows moved into the command
/// files) is still there with the same arity, flags and key positions, in the same
/// order. New commands may come between them.
#[test]
fn the_table_keeps_every_row_of_the_fixture_in_order() {
    let want = include_str!("../../../tests/fixtures/command-table.txt");
    let want: Vec<&str> = want.lines().filter(|l| !l.starts_with('#')).collect();
    let got: Vec<String> = table()
        .iter()
        .map(|s| {
            let flags = s.flags.join(",");
            let (a, r, t) = (s.arity, s.first_key, s.last_key);
            format!("{} {a} [{flags}] {r} {t} {}", s.name, s.step)
        })
        .collect();
    let mut rows = want.iter().peekable();
    for row in &got {
        if rows.peek().is_some_and(|r| **r == row.as_str()) {
            rows.next();
        }
    }
    assert_eq!(
        rows.next(),
        None,
        "a row missing, changed or moved; the table:\n{got:#?}"
    );
}
