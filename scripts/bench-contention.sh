#!/usr/bin/env bash
# The contention benchmark of issue 16: two ways of waiting for a lock, on a 3-node cluster.
#
#   scripts/bench-contention.sh               16 clients on 4 hot keys, each method 20 s
#                                             (after 2 s of warm-up), 1 round
#   scripts/bench-contention.sh --quick       a smoke run: 5 s per method, 1 s of warm-up
#
# The methods, each a loop of cycles (acquire, FENCEDSET with the token, UNLOCK):
#   poll    LOCK key owner PX 10000; on nil sleep 5 ms + up to 5 ms of random jitter and
#           try again (what Redis lock libraries do with SET NX PX)
#   queue   LOCK key owner PX 10000 WAIT 5000: the server answers when the lock is granted
# Client i connects to node i % 3, so two thirds of the clients wait through a follower, and
# contends for hot key i % 4. palisade-bench prints three tables, one row per method:
#   speed        cycles/s; acquire latency p50, p99, max (first LOCK sent to grant reply);
#                LOCK commands sent per cycle; replicated commands and log entries per cycle
#                on the leader (INFO raft_applied_commands, raft_applied_entries); CPU ms of
#                all nodes per 1,000 cycles; timeouts and errors
#   fairness     grants per client: min, mean, max, coefficient of variation, Jain's index
#                (over all clients, and the lowest among the 4 contenders of one key), and
#                the mean of the clients on the leader and on followers
#   correctness  every grant of the run: on each key, tokens strictly increasing in grant
#                order (a late reply to a holder whose lease expired aside) and no grant
#                seen before the previous holder sent its release; no
#                token granted on two keys; no FENCEDSET refused while its lock was still
#                held (lost = leases that ran out before the UNLOCK: 0 with the defaults).
#                Any violation is printed, and the run fails.
#
# Options (defaults in brackets):
#   --clients LIST       client counts [16]
#   --duration S         timed seconds per method [20; --quick 5]
#   --warmup S           seconds of warm-up before each method's timed run [2; --quick 1]
#   --rounds R           rounds; the methods alternate within each round [1]
#   --methods LIST       poll,queue or one of them [poll,queue]
#   --hot-keys N         keys the clients share [4]
#   --retry-ms MS        poll: sleep after a refused LOCK [5]
#   --retry-jitter-ms MS poll: up to this much more, uniformly random [5]
#   --wait-ms MS         queue: WAIT ms; poll: give up after this long; 0 = never [5000]
#   --lease-ms MS        PX of every lock [10000]
#   --hold-ms MS         hold the lock this long after the FENCEDSET [0]
#   --pause-ms MS        between a release and the client's next acquire [0]
#   --out DIR            output directory [$CARGO_TARGET_DIR/bench-contention]: bench.txt,
#                        bench.json, bench-clients.png (grants per client), env.txt
#
# It runs scripts/bench.sh --targets palisade-3 --workload contention, which installs what it
# needs, builds the release binaries, starts the cluster on free loopback ports under a
# temporary directory, and stops it and deletes the directory on exit, also on Ctrl-C.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CLIENTS=16 DURATION="" WARMUP="" ROUNDS=1 OUT="" QUICK=""
EXTRA=()
while [[ $# -gt 0 ]]; do
    case "$1" in
    --clients) CLIENTS="$2"; shift 2 ;;
    --duration) DURATION="$2"; shift 2 ;;
    --warmup) WARMUP="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --methods | --hot-keys | --retry-ms | --retry-jitter-ms | --wait-ms | --lease-ms | --hold-ms | --pause-ms)
        # bench.sh splits --bench-args at spaces: a value must be one word.
        [[ "${2:-}" =~ ^[a-z0-9,]+$ ]] || die "$1 takes a number or a list such as poll,queue"
        EXTRA+=("$1" "$2")
        shift 2
        ;;
    # The comment block at the top of this file, up to `set -euo pipefail`.
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (see scripts/bench-contention.sh --help)" ;;
    esac
done
if [[ -n "$QUICK" ]]; then
    DURATION="${DURATION:-5}" WARMUP="${WARMUP:-1}"
else
    DURATION="${DURATION:-20}" WARMUP="${WARMUP:-2}"
fi
[[ "$WARMUP" =~ ^[0-9]+$ ]] || die "--warmup takes whole seconds"
EXTRA+=(--warmup "$WARMUP")
OUT="${OUT:-$CARGO_TARGET_DIR/bench-contention}"

exec "$ROOT/scripts/bench.sh" --targets palisade-3 --workload contention --clients "$CLIENTS" \
    --duration "$DURATION" --rounds "$ROUNDS" --redis-benchmark 0 --out "$OUT" \
    --bench-args "${EXTRA[*]}"
