//! Handshake and introspection commands whose content is Palisade's own, so they cannot be
//! compared byte for byte with Redis: INFO (with the fields docs/architecture.md fixes), CLIENT,
//! COMMAND, QUIT, and the binary's --version/--help.

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use crate::common::*;

#[test]
fn info_has_the_fixed_sections_and_fields() {
    let srv = Server::start();
    let mut c = srv.conn();
    assert_reply(&c.c("SET k v"), b"+OK\r\n", "SET");
    let text = info_text(&c.c("INFO"), 2);
    for section in [
        "# Server",
        "# Clients",
        "# Stats",
        "# Replication",
        "# Keyspace",
        "# Raft",
    ] {
        assert!(
            text.contains(&format!("{section}\r\n")),
            "INFO lacks section {section}:\n{text}"
        );
    }
    assert_eq!(
        info_field(&text, "redis_version").as_deref(),
        Some("7.2.0"),
        "redis_version"
    );
    assert!(
        info_field(&text, "palisade_version").is_some(),
        "palisade_version missing"
    );
    assert!(
        info_field(&text, "run_id").is_some_and(|r| !r.is_empty()),
        "run_id missing"
    );
    assert_eq!(info_field(&text, "role").as_deref(), Some("master"), "role");
    assert!(
        text.contains("\r\ndb0:keys=1,expires=0"),
        "Keyspace line for one key:\n{text}"
    );

    // Memory: the resident set, and RocksDB's share of it (the SET above sits in a memtable).
    let num = |f: &str| -> u64 {
        info_field(&text, f)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("INFO field {f} missing or not a number:\n{text}"))
    };
    let rss = num("used_memory_rss");
    let memtables = num("rocksdb_memtables");
    assert!(rss > 0, "used_memory_rss {rss}");
    assert!(
        memtables > 0 && memtables < rss,
        "rocksdb_memtables {memtables}, rss {rss}"
    );
    num("rocksdb_block_cache");
    num("rocksdb_table_readers");

    let node = info_field(&text, "raft_node_id").expect("raft_node_id");
    assert!(node.parse::<u64>().is_ok(), "raft_node_id {node:?}");
    assert_eq!(
        info_field(&text, "raft_role").as_deref(),
        Some("leader"),
        "raft_role"
    );
    assert_eq!(
        info_field(&text, "raft_leader_id"),
        Some(node.clone()),
        "raft_leader_id"
    );
    assert_eq!(
        info_field(&text, "raft_members"),
        Some(node.clone()),
        "raft_members"
    );
    for f in ["raft_term", "raft_commit_index", "raft_applied_index"] {
        let v = info_field(&text, f).unwrap_or_else(|| panic!("{f} missing"));
        assert!(v.parse::<u64>().is_ok(), "{f}:{v}");
    }

    // A write advances the commit and applied indexes.
    let idx = |c: &mut Conn, f: &str| -> u64 {
        let t = info_text(&c.c("INFO raft"), c.proto());
        info_field(&t, f)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{f} in {t}"))
    };
    let (commit0, applied0) = (
        idx(&mut c, "raft_commit_index"),
        idx(&mut c, "raft_applied_index"),
    );
    assert_reply(&c.c("SET k2 v"), b"+OK\r\n", "SET");
    assert!(
        idx(&mut c, "raft_commit_index") > commit0,
        "commit index must advance after a write"
    );
    assert!(
        idx(&mut c, "raft_applied_index") > applied0,
        "applied index must advance after a write"
    );

    // A section argument limits the reply to that section.
    let raft = info_text(&c.c("INFO raft"), 2);
    assert!(raft.starts_with("# Raft\r\n"), "INFO raft:\n{raft}");
    assert!(
        !raft.contains("# Server"),
        "INFO raft must hold only the Raft section:\n{raft}"
    );
    let server = info_text(&c.c("INFO SERVER"), 2);
    assert!(
        server.starts_with("# Server\r\n") && !server.contains("# Raft"),
        "INFO SERVER:\n{server}"
    );

    // RESP3: a verbatim string, as Redis 7 sends it.
    let mut c3 = srv.conn();
    assert!(c3.c("HELLO 3").starts_with(b"%"));
    let text3 = info_text(&c3.c("INFO server"), 3);
    assert!(
        text3.contains("redis_version:7.2.0\r\n"),
        "RESP3 INFO server:\n{text3}"
    );
}

#[test]
fn client_subcommands() {
    let srv = Server::start();
    let mut c = srv.conn();
    let id = as_int(&c.c("CLIENT ID"));
    let id2 = as_int(&srv.conn().c("CLIENT ID"));
    assert!(id2 > id, "client ids increase: {id} then {id2}");

    assert_reply(&c.c("CLIENT SETNAME worker"), b"+OK\r\n", "SETNAME");
    let info = String::from_utf8(as_bulk(&c.c("CLIENT INFO")).unwrap()).unwrap();
    assert!(
        info.starts_with(&format!("id={id} ")),
        "CLIENT INFO: {info:?}"
    );
    assert!(info.contains(" name=worker "), "CLIENT INFO name: {info:?}");
    assert!(
        info.ends_with('\n'),
        "CLIENT INFO ends with a newline: {info:?}"
    );

    let list = String::from_utf8(as_bulk(&c.c("CLIENT LIST")).unwrap()).unwrap();
    assert!(
        list.lines()
            .any(|l| l.starts_with(&format!("id={id} ")) && l.contains(" name=worker ")),
        "CLIENT LIST must list this connection: {list:?}"
    );

    // Client libraries send SETINFO on connect (Redis 7.2).
    assert_reply(
        &c.c("CLIENT SETINFO lib-name redis-py"),
        b"+OK\r\n",
        "SETINFO lib-name",
    );
    assert_reply(
        &c.c("CLIENT SETINFO lib-ver 5.0.1"),
        b"+OK\r\n",
        "SETINFO lib-ver",
    );
}

#[test]
fn command_introspection() {
    let srv = Server::start();
    let mut c = srv.conn();
    let count = as_int(&c.c("COMMAND COUNT"));
    assert!(count >= 30, "COMMAND COUNT {count}");
    // (Redis's COMMAND LIST also names subcommands, so its length is not COMMAND COUNT.)
    let list = c.c("COMMAND LIST");
    assert!(
        list.starts_with(b"*"),
        "COMMAND LIST: {}",
        show(&list[..list.len().min(100)])
    );
    for name in ["get", "set", "lock", "fencedset", "hello"] {
        assert!(
            list.windows(name.len() + 6)
                .any(|w| w == bulk_bytes(name.as_bytes()).as_slice()),
            "COMMAND LIST lacks {name}"
        );
    }
    let info = c.c("COMMAND INFO get");
    assert!(
        info.starts_with(b"*1\r\n*10\r\n$3\r\nget\r\n:2\r\n"),
        "COMMAND INFO get: {}",
        show(&info)
    );
    assert_reply(
        &c.c("COMMAND INFO nosuchcommand"),
        b"*1\r\n$-1\r\n",
        "COMMAND INFO of an unknown command",
    );
}

/// `COMMAND DOCS` with no names has one entry per command of COMMAND LIST, in the same order,
/// each with a summary, a `since` and a group; one entry, with its arguments, byte for byte,
/// in both protocols.
#[test]
fn command_docs_cover_every_command() {
    use redis_protocol::resp2::types::OwnedFrame as F;
    let srv = Server::start();
    let mut c = srv.conn();
    let F::Array(list) = decode2(&c.c("COMMAND LIST")) else {
        panic!("COMMAND LIST is not an array");
    };
    let list: Vec<String> = list
        .into_iter()
        .map(|n| match n {
            F::BulkString(n) => String::from_utf8(n).unwrap(),
            other => panic!("COMMAND LIST item {other:?}"),
        })
        .collect();
    for proto in [2, 3] {
        if proto == 3 {
            c.c("HELLO 3");
        }
        let docs = command_docs(&c.c("COMMAND DOCS"), proto);
        let names: BTreeSet<&str> = docs.iter().map(|e| e.0.as_str()).collect();
        let listed: BTreeSet<&str> = list.iter().map(String::as_str).collect();
        assert_eq!(names, listed, "RESP{proto}: COMMAND DOCS names");
        assert_eq!(docs.len(), list.len(), "RESP{proto}: a name is repeated");
        for (name, fields) in &docs {
            for f in ["summary", "since", "group"] {
                assert!(
                    fields.get(f).is_some_and(|v| !v.trim().is_empty()),
                    "RESP{proto}: {name} has no {f}: {fields:?}"
                );
            }
        }
    }
    // An entry with its arguments (what redis-cli builds its hints from).
    let entry = "$8\r\nlockinfo\r\n%4\r\n\
        $7\r\nsummary\r\n$54\r\nShow a lock's owner, fencing token and remaining lease\r\n\
        $5\r\nsince\r\n$5\r\n0.1.0\r\n$5\r\ngroup\r\n$8\r\npalisade\r\n\
        $9\r\narguments\r\n*1\r\n%2\r\n$4\r\nname\r\n$3\r\nkey\r\n$4\r\ntype\r\n$3\r\nkey\r\n";
    assert_reply(
        &c.c("COMMAND DOCS lockinfo nosuchcmd"),
        format!("%1\r\n{entry}").as_bytes(),
        "RESP3 COMMAND DOCS lockinfo",
    );
    c.c("HELLO 2");
    assert_reply(
        &c.c("COMMAND DOCS lockinfo"),
        format!("*2\r\n{}", entry.replace("%4", "*8").replace("%2", "*4")).as_bytes(),
        "RESP2 COMMAND DOCS lockinfo",
    );
}

#[test]
fn quit_replies_ok_then_closes() {
    let srv = Server::start();
    let mut c = srv.conn();
    c.send(&["QUIT"]);
    let (out, closed) = c.read_until_close(Duration::from_secs(5));
    assert_reply(&out, b"+OK\r\n", "QUIT");
    assert!(closed, "QUIT must close the connection");
}

#[test]
fn version_and_help_flags() {
    let bin = env!("CARGO_BIN_EXE_palisade");
    let v = Command::new(bin)
        .arg("--version")
        .output()
        .expect("run palisade --version");
    assert!(v.status.success(), "--version exit status {:?}", v.status);
    let out = String::from_utf8_lossy(&v.stdout);
    assert!(
        out.contains("palisade") && out.contains(env!("CARGO_PKG_VERSION")),
        "--version printed {out:?}"
    );
    let h = Command::new(bin)
        .arg("--help")
        .output()
        .expect("run palisade --help");
    assert!(h.status.success(), "--help exit status {:?}", h.status);
    let out = String::from_utf8_lossy(&h.stdout);
    for flag in [
        "--bind",
        "--port",
        "--dir",
        "--config",
        "--requirepass",
        "--peer-port",
    ] {
        assert!(out.contains(flag), "--help does not mention {flag}:\n{out}");
    }
}
