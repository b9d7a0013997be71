#!/usr/bin/env bash
# Side-by-side benchmark: a 3-node Palisade cluster against a single Redis 7 with
# `appendonly yes, appendfsync always` ("Redis-always"), on this machine, in one run.
#
#   scripts/bench.sh [--clients N] [--duration S] [--rounds R] [--workload cycle|hot|read|pipeline]
#                    [--nodes 3|5] [--json FILE]
#
# Builds release binaries, starts everything on free loopback ports under a temporary
# directory, runs palisade-bench alternating the targets round by round, prints the table with
# medians and ratios, and tears everything down (also on Ctrl-C).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CLIENTS=16 DURATION=10 ROUNDS=3 WORKLOAD=cycle NODES=3 JSON=""
while [[ $# -gt 0 ]]; do
    case "$1" in
    --clients) CLIENTS="$2"; shift 2 ;;
    --duration) DURATION="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --workload) WORKLOAD="$2"; shift 2 ;;
    --nodes) NODES="$2"; shift 2 ;;
    --json) JSON="$2"; shift 2 ;;
    *) die "unknown argument $1 (see the header of $0)" ;;
    esac
done

ensure_build_deps
command -v redis-server >/dev/null 2>&1 || ensure_redis
cargo build --release --quiet --manifest-path "$ROOT/Cargo.toml"
BIN="$CARGO_TARGET_DIR/release"

WORK="$(mktemp -d -t palisade-bench-XXXXXX)"
BASE=$((20000 + RANDOM % 20000))
REDIS_PORT=$((BASE + 100))
cleanup() {
    PALISADE_CLUSTER_DIR="$WORK/cluster" PALISADE_NODES="$NODES" PALISADE_BASE_PORT="$BASE" \
        PALISADE_BIN="$BIN/palisade" "$ROOT/scripts/cluster.sh" stop >/dev/null 2>&1 || true
    [[ -f "$WORK/redis.pid" ]] && kill "$(cat "$WORK/redis.pid")" 2>/dev/null || true
    sleep 0.5
    rm -rf "$WORK" 2>/dev/null || { sleep 1; rm -rf "$WORK"; }
}
trap cleanup EXIT INT TERM

log "starting Redis-always on port $REDIS_PORT"
redis-server --port "$REDIS_PORT" --dir "$WORK" --appendonly yes --appendfsync always --save '' \
    --daemonize yes --pidfile "$WORK/redis.pid" --logfile "$WORK/redis.log"
log "starting a $NODES-node Palisade cluster on ports $BASE.."
PALISADE_CLUSTER_DIR="$WORK/cluster" PALISADE_NODES="$NODES" PALISADE_BASE_PORT="$BASE" \
    PALISADE_BIN="$BIN/palisade" "$ROOT/scripts/cluster.sh" start
sleep 1
LEADER="$(PALISADE_CLUSTER_DIR="$WORK/cluster" PALISADE_NODES="$NODES" PALISADE_BASE_PORT="$BASE" \
    PALISADE_BIN="$BIN/palisade" "$ROOT/scripts/cluster.sh" leader)"
LEADER_PORT=$((BASE + LEADER - 1))

args=(--clients "$CLIENTS" --duration "$DURATION" --rounds "$ROUNDS" --workload "$WORKLOAD"
    --target "palisade=palisade@127.0.0.1:$LEADER_PORT" --target "redis-always=redis@127.0.0.1:$REDIS_PORT")
[[ -n "$JSON" ]] && args+=(--json "$JSON")
log "palisade-bench ${args[*]}"
"$BIN/palisade-bench" "${args[@]}"
