#!/usr/bin/env bash
# Writes tests/fixtures/format1-datadir: a small data directory written by a Palisade build on
# openraft 0.9 (on-disk format 1), for the upgrade test (tests/it/upgrade.rs).
#
#   scripts/make-format1-fixture.sh PALISADE_BINARY
#
# PALISADE_BINARY must be a release built from a commit before the openraft 0.10 migration
# (for example `git worktree add /tmp/old 4a42a98 && cargo build --release` there). The
# script starts it on free ports with a fresh directory, writes keys of every type, locks,
# fences, a cached script and enough entries for a snapshot and a purged log, stops it with
# SIGTERM, and copies the directory into the fixture. The values it wrote are the ones the
# test expects; change both together.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
BIN="${1:?usage: scripts/make-format1-fixture.sh PALISADE_BINARY}"
OUT="$ROOT/tests/fixtures/format1-datadir"
WORK="$(mktemp -d)"
trap 'kill "$PID" 2>/dev/null || true; rm -rf "$WORK"' EXIT
PORT=$((20000 + RANDOM % 10000))
"$BIN" --port "$PORT" --peer-port $((PORT + 10000)) --dir "$WORK/data" --snapshot-every 20 \
    >"$WORK/log" 2>&1 &
PID=$!
for _ in $(seq 1 200); do
    [[ "$(redis-cli -p "$PORT" PING 2>/dev/null)" == PONG ]] && break
    sleep 0.05
done
r() { redis-cli -p "$PORT" "$@"; }
r SET plain v1
r LOCK lk owner1 PX 600000
r FENCEDSET fenced a 100 PX 600000
r FENCEDSET gone x 100
r DEL gone
r HSET h f 1 g 2
r RPUSH l a b c
r SCRIPT LOAD "return 'from-format-1'"
for i in $(seq 1 50); do r INCR counter >/dev/null; done
r INFO raft | tr -d '\r' | grep -E 'raft_(applied|commit)_index|raft_members'
kill -TERM "$PID"
wait "$PID" || true
rm -rf "$OUT"
mkdir -p "$OUT"
cp -r "$WORK/data/." "$OUT/"
# RocksDB's info logs are not data, and a fixture keeps no one's machine details.
rm -f "$OUT"/LOG "$OUT"/LOG.old.*
log "wrote $OUT ($(du -sh "$OUT" | cut -f1))"
