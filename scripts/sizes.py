#!/usr/bin/env python3
"""Size figures for issue 28's before/after table: Rust files over N lines and functions
over M lines (a `fn` line to the `}` at its indentation; test modules included).

Usage: scripts/sizes.py [--file-lines 600] [--fn-lines 80] PATH...   (files or directories)
"""
import argparse
import os
import re

FN = re.compile(r"^(\s*)(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?"
                r"(?:extern\s+\"C\"\s+)?fn\s+(\w+)")


def rust_files(paths):
    for p in paths:
        if os.path.isdir(p):
            for root, _, names in os.walk(p):
                for n in sorted(names):
                    if n.endswith(".rs"):
                        yield os.path.join(root, n)
        elif p.endswith(".rs") and os.path.exists(p):
            yield p


def functions(lines):
    """(name, first line, length) of each function with a body."""
    out = []
    for i, line in enumerate(lines):
        m = FN.match(line)
        if not m:
            continue
        indent = m.group(1)
        close = indent + "}"
        for j in range(i, len(lines)):
            if j > i and lines[j].rstrip() == close:
                out.append((m.group(2), i + 1, j - i + 1))
                break
            if j == i and line.rstrip().endswith(";"):
                break  # a declaration without a body
            if j > i and FN.match(lines[j]) and len(FN.match(lines[j]).group(1)) <= len(indent):
                break  # a body-less fn (trait item); do not swallow the next one
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--file-lines", type=int, default=600)
    ap.add_argument("--fn-lines", type=int, default=80)
    ap.add_argument("paths", nargs="+")
    a = ap.parse_args()
    big_files, big_fns = [], []
    for f in rust_files(a.paths):
        with open(f, encoding="utf-8", errors="replace") as fh:
            lines = fh.read().split("\n")
        n = len(lines) - (1 if lines and lines[-1] == "" else 0)
        if n > a.file_lines:
            big_files.append((n, f))
        for name, at, length in functions(lines):
            if length > a.fn_lines:
                big_fns.append((length, f"{f}:{at} {name}"))
    print(f"files over {a.file_lines} lines: {len(big_files)}")
    for n, f in sorted(big_files, reverse=True):
        print(f"  {n:5} {f}")
    print(f"functions over {a.fn_lines} lines: {len(big_fns)}")
    for n, f in sorted(big_fns, reverse=True):
        print(f"  {n:5} {f}")


if __name__ == "__main__":
    main()
