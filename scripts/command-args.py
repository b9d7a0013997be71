#!/usr/bin/env python3
"""Prints a Redis command's arguments in the notation of src/cmd/argdoc.rs, read from a
running redis-server's COMMAND DOCS, as a starting point for a new command's `.args(...)`.

    scripts/command-args.py [--port 6379] NAME [NAME ...]

Palisade's own commands, and options Redis does not have, are written by hand; the
differential test `command_docs_arguments_match_redis` compares the result with Redis.
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
        base = name if kind == "string" else f"{name}:{kind}"
        if token is not None:
            base = f"{token}={base}"
    flags = arg.get("flags", [])
    for flag, mark in (("optional", "?"), ("multiple", "*"), ("multiple_token", "+")):
        if flag in flags:
            base += mark
    return base


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", default="6379")
    p.add_argument("names", nargs="+")
    a = p.parse_args()
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
