#!/usr/bin/env python3
"""Prints a Redis command's arguments in the notation of src/cmd/argdoc.rs, read from a
running redis-server's COMMAND DOCS, as a starting point for a new command's `.args(...)`.

    scripts/command-args.py [--port 6379] NAME [NAME ...]
    scripts/command-args.py [--port 6379] --subcommands CONTAINER [SUB ...]

With `--subcommands`, prints the container's subcommand rows (all, or the SUBs named) as
Rust `Spec` rows for its file's `SUBCOMMANDS`: arity, flags, key positions, summary, since,
group, arguments and key specs (src/cmd/keyspec.rs's notation), read from COMMAND INFO and
COMMAND DOCS; the summary printed is Redis's, to rewrite in our own words. Palisade's own commands and subcommands, and options Redis does not have, are
written by hand; the differential tests `command_docs_arguments_match_redis` and
`command_info_matches_redis` compare the result with Redis.
"""
import argparse
import json
import subprocess
import sys


def notation(arg):
    kind = arg["type"]
    name = arg["name"]
    token = arg.get("token")
    children = arg.get("arguments", [])
    if kind == "pure-token":
        base = token
        if name != token.lower():
            base = f"{name}@{token}"
    elif kind in ("oneof", "block"):
        sep = "|" if kind == "oneof" else " "
        inner = sep.join(notation(c) for c in children)
        base = f"({inner})" if kind == "oneof" else "{" + inner + "}"
        if token is not None:
            base = f"{token}={base}"
        if name != children[0]["name"]:
            base = f"{name}@{base}"
    else:
        # A name with a colon (CLIENT KILL's `ip:port`) is written with its type.
        base = name if kind == "string" and ":" not in name else f"{name}:{kind}"
        if token is not None:
            base = f"{token}={base}"
    flags = arg.get("flags", [])
    for flag, mark in (("optional", "?"), ("multiple", "*"), ("multiple_token", "+")):
        if flag in flags:
            base += mark
    return base


def key_spec(ks):
    """One key spec in the notation of src/cmd/keyspec.rs."""
    b, f = ks["begin_search"], ks["find_keys"]
    if b["type"] == "index":
        begin = f"i{b['spec']['index']}"
    elif b["type"] == "keyword":
        begin = f"k{b['spec']['keyword']},{b['spec']['startfrom']}"
    else:
        begin = "?"
    if f["type"] == "range":
        sp = f["spec"]
        find = f"r{sp['lastkey']},{sp['keystep']},{sp['limit']}"
    elif f["type"] == "keynum":
        sp = f["spec"]
        find = f"n{sp['keynumidx']},{sp['firstkey']},{sp['keystep']}"
    else:
        find = "?"
    return ",".join(ks["flags"]) + f"@{begin}/{find}"


def redis_json(port, *words):
    out = subprocess.run(
        ["redis-cli", "-p", port, "--json", *words],
        check=True, capture_output=True, text=True,
    ).stdout
    return json.loads(out)


def rust_str(s):
    return json.dumps(s)


def subcommand_rows(port, container, wanted):
    """Prints the subcommand rows of `container` (those in `wanted`, or all)."""
    info = redis_json(port, "COMMAND", "INFO", container)
    if not info or info[0] is None:
        sys.exit(f"{container}: not known to this server")
    docs = redis_json(port, "COMMAND", "DOCS", container)[container.lower()]
    subdocs = docs.get("subcommands", {})
    rows = sorted(info[0][9], key=lambda r: r[0])
    for row in rows:
        full, arity, flags, first, last, step, cats, _tips, specs = row[:9]
        sub = full.split("|", 1)[1]
        if wanted and sub not in wanted:
            continue
        d = subdocs.get(full, {})
        flag_list = ", ".join(rust_str(f) for f in flags)
        print(f"    // {full}: {' '.join(cats)}")
        print(f"    Spec::new({rust_str(sub)}, {arity}, &[{flag_list}], ({first}, {last}, {step}), parse)")
        print(f"        .docs({rust_str(d.get('summary', ''))}, {rust_str(d.get('since', ''))}, "
              f"{rust_str(d.get('group', ''))})")
        args = " ".join(notation(x) for x in d.get("arguments", []))
        if args:
            print(f"        .args({rust_str(args)})")
        if specs:
            print(f"        .key_specs({rust_str(' '.join(key_spec(k) for k in specs))})")
        print("        ,")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", default="6379")
    p.add_argument("--subcommands", action="store_true")
    p.add_argument("names", nargs="+")
    a = p.parse_args()
    if a.subcommands:
        subcommand_rows(a.port, a.names[0], {n.lower() for n in a.names[1:]})
        return
    out = subprocess.run(
        ["redis-cli", "-p", a.port, "--json", "COMMAND", "DOCS", *a.names],
        check=True, capture_output=True, text=True,
    ).stdout
    docs = json.loads(out)
    for name in a.names:
        d = docs.get(name.lower())
        if d is None:
            print(f"{name}: not known to this server", file=sys.stderr)
            continue
        print(f"{name.lower()}\t" + " ".join(notation(x) for x in d.get("arguments", [])))


if __name__ == "__main__":
    main()
