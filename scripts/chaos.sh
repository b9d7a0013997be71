#!/usr/bin/env bash
# Long chaos soaks against a local cluster of real Palisade processes (docs/reliability.md).
#
#   scripts/chaos.sh --seed S --duration D --nodes 3|5 [--workload W] [--net N] [--out DIR]
#
#   --seed S        seeds the fault schedule, the clock fault and the clients' choices;
#                   the same seed replays the same schedule (default 1)
#   --duration D    how long clients run: 90, 90s, 30m or 1h (default 60s)
#   --nodes N       3 or 5 (default 3)
#   --workload W    fenced (default), unfenced or write-fenced: how the counter clients
#                   read and write; the lock, register, durability, pop-queue, lock-queue
#                   and lock-script clients always run
#   --net N         how partitions are made: hook (default; the peer transport's test-only
#                   RAFT.FAULT hook) or netns (each node in its own network namespace behind a
#                   veth and a bridge, links cut with blackhole routes; needs root and `ip`)
#   --out DIR       where the run's outputs go
#                   (default $CARGO_TARGET_DIR/chaos-soaks/<nodes>n-<duration>s-seed<S>-<W>[-netns])
#
# Every fault kind is on. After the faults, and after the full-cluster restart, every node's
# RAFT.DIGEST is compared at one applied index. Outputs: history.jsonl, faults.jsonl,
# schedule.jsonl, run.json, verdict.json, verdict.txt, timeline.png and the node logs. The
# script exits non-zero if the fenced run finds a violation (the controls are expected to
# find lost updates).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

SEED=1 DURATION=60s NODES=3 WORKLOAD=fenced NET=hook OUT=""
while [[ $# -gt 0 ]]; do
    case "$1" in
    --seed) SEED="${2:?--seed needs a value}"; shift 2 ;;
    --duration) DURATION="${2:?--duration needs a value}"; shift 2 ;;
    --nodes) NODES="${2:?--nodes needs a value}"; shift 2 ;;
    --workload) WORKLOAD="${2:?--workload needs a value}"; shift 2 ;;
    --net) NET="${2:?--net needs a value}"; shift 2 ;;
    --out) OUT="${2:?--out needs a value}"; shift 2 ;;
    -h | --help) sed -n '2,23p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
    esac
done

[[ "$SEED" =~ ^[0-9]+$ ]] || die "--seed must be a non-negative integer"
[[ "$NODES" == 3 || "$NODES" == 5 ]] || die "--nodes must be 3 or 5"
case "$WORKLOAD" in fenced | unfenced | write-fenced) ;; *) die "--workload must be fenced, unfenced or write-fenced" ;; esac
case "$NET" in hook | netns) ;; *) die "--net must be hook or netns" ;; esac
[[ "$NET" == hook || "$(id -u)" == 0 ]] || die "--net netns needs root (network namespaces)"
SUFFIX=""; [[ "$NET" == hook ]] || SUFFIX="-netns"
case "$DURATION" in
*h) SECS=$((${DURATION%h} * 3600)) ;;
*m) SECS=$((${DURATION%m} * 60)) ;;
*s) SECS=${DURATION%s} ;;
*) SECS=$DURATION ;;
esac
[[ "$SECS" =~ ^[0-9]+$ && "$SECS" -ge 10 ]] || die "--duration must be at least 10 s"
OUT="${OUT:-$CARGO_TARGET_DIR/chaos-soaks/${NODES}n-${SECS}s-seed${SEED}-${WORKLOAD}${SUFFIX}}"
mkdir -p "$(dirname "$OUT")"
case "$OUT" in /*) ;; *) OUT="$PWD/$OUT" ;; esac

log "building (release profile, CARGO_TARGET_DIR=$CARGO_TARGET_DIR)"
cargo test --release --test it --no-run
log "soak: seed=$SEED duration=${SECS}s nodes=$NODES workload=$WORKLOAD net=$NET out=$OUT"
CHAOS_SEED="$SEED" CHAOS_DURATION_S="$SECS" CHAOS_NODES="$NODES" CHAOS_WORKLOAD="$WORKLOAD" CHAOS_NET="$NET" \
    CHAOS_OUT="$OUT" cargo test --release --test it chaos::soak -- --ignored --exact --nocapture
