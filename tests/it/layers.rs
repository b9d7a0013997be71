//! The module layering drawn in docs/architecture.md ("Layers") holds in the source: each
//! top-level module names (`crate::x`) only the modules it may use, the `cmd` <-> `script`
//! seam stays two files wide, and `state` reads no clock.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Each module and the modules it may use.
const ALLOWED: &[(&str, &[&str])] = &[
    ("resp", &["algo"]),
    ("state", &[]),
    ("algo", &[]),
    ("tls", &[]),
    ("config", &["resp", "tls"]),
    ("cmd", &["resp", "state", "script", "algo"]),
    ("script", &["resp", "state", "cmd", "algo"]),
    ("raft_types", &["resp", "cmd"]),
    ("store", &["resp", "state", "cmd", "raft_types", "algo"]),
    (
        "raft",
        &["resp", "cmd", "store", "raft_types", "tls", "algo"],
    ),
    (
        "server",
        &[
            "resp",
            "state",
            "cmd",
            "config",
            "raft",
            "raft_types",
            "store",
            "tls",
        ],
    ),
];

/// The only files on either side of the `cmd` <-> `script` seam (`tests.rs` is test code
/// that runs command lines).
const SEAM: &[(&str, &str, &[&str])] = &[
    ("cmd", "script", &["eval.rs"]),
    ("script", "cmd", &["bridge.rs", "tests.rs"]),
];

fn src() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The `.rs` files of a top-level module (a directory or one file).
fn files(module: &str) -> Vec<PathBuf> {
    let dir = src().join(module);
    if !dir.is_dir() {
        return vec![src().join(format!("{module}.rs"))];
    }
    let mut out = Vec::new();
    let mut todo = vec![dir];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).expect("read a source directory") {
            let p = e.expect("a directory entry").path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out
}

/// The top-level modules a file names as `crate::x`.
fn uses(path: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(path).expect("read a source file");
    text.match_indices("crate::")
        .map(|(i, _)| {
            text[i + 7..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect::<String>()
        })
        .filter(|m| !m.is_empty())
        .collect()
}

#[test]
fn every_module_uses_only_the_modules_below_it() {
    let mut wrong = Vec::new();
    for (module, allowed) in ALLOWED {
        for file in files(module) {
            for used in uses(&file) {
                if used != *module && !allowed.contains(&used.as_str()) {
                    wrong.push(format!("{} uses crate::{used}", file.display()));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "layering broken:\n{}", wrong.join("\n"));
    let listed: BTreeSet<&str> = ALLOWED.iter().map(|(m, _)| *m).collect();
    for e in std::fs::read_dir(src()).expect("read src") {
        let p = e.expect("entry").path();
        let name = p.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
        if !["lib", "main", "bin"].contains(&name) {
            assert!(listed.contains(name), "src/{name} has no row in ALLOWED");
        }
    }
}

#[test]
fn the_cmd_script_seam_is_two_files() {
    for (from, to, only) in SEAM {
        for file in files(from) {
            let name = file
                .file_name()
                .and_then(|s| s.to_str())
                .unwrap_or_default();
            if uses(&file).contains(*to) {
                assert!(only.contains(&name), "{} uses crate::{to}", file.display());
            }
        }
    }
}

#[test]
fn state_reads_no_clock() {
    for file in files("state") {
        let text = std::fs::read_to_string(&file).expect("read a source file");
        for clock in ["Instant", "SystemTime", "tokio::time"] {
            assert!(!text.contains(clock), "{} names {clock}", file.display());
        }
    }
}
