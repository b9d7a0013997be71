#!/usr/bin/env bash
# The official Redis 7.0.15 Tcl test units, run in external-server mode against a one-node
# Palisade and against a real redis-server, side by side. Not part of CI (it takes minutes and
# needs the Redis source); docs/compatibility.md records the figures of a run.
#
#   scripts/redis-units.sh                      the core list below
#   scripts/redis-units.sh unit/type/incr ...   only the named units
#
# Steps:
#   1. fetches the Redis 7.0.15 source with `apt-get source --download-only redis` (Debian
#      bookworm's deb-src) into REDIS_UNITS_CACHE (default ~/.cache/palisade-redis-src) if it is
#      not there yet; the source is never committed. Needs tclsh 8.6 and redis-server 7.
#   2. builds Palisade (cargo build --release) and starts a one-node Palisade and a redis-server
#      on free ports, each with its own temporary data directory;
#   3. runs each unit with `./runtest --host H --port P --single UNIT --singledb --tags -needs:...`
#      (Palisade has one database) against
#      each server (external mode skips tests tagged external:skip by itself), each unit bounded
#      by REDIS_UNITS_TIMEOUT seconds (default 1200) and the runner's own --timeout (no progress
#      for REDIS_UNITS_STALL s, default 240, fails the unit), so a stalling test cannot hang the run;
#   4. prints passed/failed per unit for both servers and, last, the ratio
#      "Palisade passes / Redis passes".
# Logs go to REDIS_UNITS_LOG_DIR (default: a temporary directory, named in the output).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

REDIS_VERSION=7.0.15
CACHE="${REDIS_UNITS_CACHE:-$HOME/.cache/palisade-redis-src}"
UNIT_TIMEOUT="${REDIS_UNITS_TIMEOUT:-1200}"
STALL_TIMEOUT="${REDIS_UNITS_STALL:-240}"
# The runner listens for its test clients just below this port (change it to run two at once).
BASEPORT="${REDIS_UNITS_BASEPORT:-21111}"
LOG_DIR="${REDIS_UNITS_LOG_DIR:-$(mktemp -d -t palisade-units.XXXXXX)}"
mkdir -p "$LOG_DIR"

# The core list: data types, keyspace, expiry, scripting, pub/sub, transactions, introspection.
# Left out: units about what Palisade replaces or does not have (replication, cluster, AOF/RDB,
# modules, streams, HyperLogLog, FUNCTION, DUMP/RESTORE, client eviction, memory policies,
# latency/oom internals, TLS, tracking), see docs/compatibility.md.
# Also left out: unit/info, unit/pubsubshard, unit/auth and unit/acl (every test is
# external:skip) and unit/protocol (it stalls on redis-server itself in external mode).
CORE_UNITS=(
    unit/type/string unit/type/incr unit/type/list unit/type/list-2 unit/type/list-3
    unit/type/hash unit/type/set unit/type/zset
    unit/keyspace unit/expire unit/scan unit/sort unit/info-command
    unit/scripting unit/pubsub unit/multi
    unit/introspection unit/introspection-2 unit/quit
    unit/bitops unit/bitfield unit/geo
)
# Tags skipped on both servers: tests that need a replica, DEBUG/PFDEBUG internals, maxmemory
# eviction settings, or an RDB save.
SKIP_TAGS="-needs:repl -needs:debug -needs:pfdebug -needs:save -needs:config-maxmemory"

# Tests skipped on both servers, by name: they use commands that are not in Palisade (streams,
# DUMP, FUNCTION; README's "not in Palisade" row), and on Palisade their error would abort the
# rest of their unit. Like the units left out, they count on neither side.
SKIP_BOTH=(
    "EVAL - Scripts can't run XREAD and XREADGROUP with BLOCK option"
    "Keyspace notifications: stream events test"
    "COPY basic usage for stream"
    "COPY basic usage for stream-cgroups"
    "List ziplist of various encodings"
    "List ziplist of various encodings - sanitize dump"
    "MONITOR can log commands issued by functions"
    "Blocking commands ignores the timeout"
    "Hash ziplist of various encodings"
    "Hash ziplist of various encodings - sanitize dump"
)
# Tests skipped on Palisade only, because their error would abort the rest of the unit: the
# script-timeout tests, which need a script that runs past busy-reply-threshold and `SCRIPT
# KILL` (docs/scripting.md, "Script timeouts"); the cmsgpack smoke test, over the default
# script budget; `unpack` of 7999 arguments, over mlua's stack; the tests of `COMMAND
# GETKEYS`, which Palisade does not have; those that set `min-replicas-to-write`, `maxmemory`
# or every parameter (`CONFIG sanity`, ...), settings Palisade does not have or fixes at start;
# and MONITOR of a script's commands, which Palisade does not show (that test would wait for
# them until the stall). They pass on redis-server, so they count as Palisade failures.
SKIP_PALISADE=(
    "/script timeout$"
    "/^Timedout"
    "EVAL - cmsgpack pack/unpack smoke test"
    "Script check unpack with massive arguments"
    "/^COMMAND GETKEYS"
    "SORT extracts STORE correctly"
    "SORT_RO get keys"
    "SORT extracts multiple STORE correctly"
    "/^not enough good replicas"
    "reject script do not cause a Lua stack leak"
    "MONITOR can log commands issued by the scripting engine"
    "Consistent eval error reporting"
    "CONFIG sanity"
    "CONFIG SET with multiple args"
    "/^CONFIG SET rollback on"
)

UNITS=("$@")
[[ ${#UNITS[@]} -gt 0 ]] || UNITS=("${CORE_UNITS[@]}")

# --- dependencies --------------------------------------------------------------------------

command -v tclsh >/dev/null 2>&1 || apt_install tcl
ensure_redis

fetch_source() {
    local src_list=/etc/apt/sources.list.d/palisade-redis-src.list
    if ! grep -rqs '^deb-src .*debian.* bookworm main' /etc/apt/sources.list /etc/apt/sources.list.d/; then
        log "adding Debian bookworm deb-src to $src_list"
        echo 'deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main' |
            as_root tee "$src_list" >/dev/null
    fi
    as_root apt-get update -q || die "apt-get update failed"
    mkdir -p "$CACHE"
    (cd "$CACHE" && apt-get source --download-only redis) || die "apt-get source redis failed"
    local orig
    orig="$(ls "$CACHE"/redis_"$REDIS_VERSION"*.orig.tar.* 2>/dev/null | head -n1)"
    [[ -n "$orig" ]] || die "no redis_$REDIS_VERSION source tarball in $CACHE"
    tar -xf "$orig" -C "$CACHE"
}
REDIS_SRC="$CACHE/redis-$REDIS_VERSION"
if [[ -n "${REDIS_UNITS_SRC:-}" ]]; then
    REDIS_SRC="$REDIS_UNITS_SRC"
elif [[ ! -x "$REDIS_SRC/runtest" ]]; then
    fetch_source
fi
[[ -x "$REDIS_SRC/runtest" ]] || die "no runtest in $REDIS_SRC"

# A working copy with two changes, the same for both servers, both because Palisade has no
# FUNCTION (README's "not in Palisade" row): the external-server setup runs `FUNCTION FLUSH`
# before every unit, so the call is wrapped in `catch`; and unit/scripting runs its tests twice,
# through FUNCTION and through EVAL, so only the EVAL pass is kept. No test is changed.
WORK="$(mktemp -d -t palisade-units-src.XXXXXX)"
cp -a "$REDIS_SRC/." "$WORK/"
sed -i 's/^    r function flush$/    catch {r function flush}/' "$WORK/tests/support/server.tcl"
sed -i 's/^foreach is_eval {0 1} {$/foreach is_eval {1} {/' "$WORK/tests/unit/scripting.tcl"
grep -q 'catch {r function flush}' "$WORK/tests/support/server.tcl" &&
    grep -q '^foreach is_eval {1} {$' "$WORK/tests/unit/scripting.tcl" ||
    die "the tests in $REDIS_SRC are not the expected ones (Redis $REDIS_VERSION)"
REDIS_SRC="$WORK"

# --- servers -------------------------------------------------------------------------------

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

log "cargo build --release"
cargo build --release --quiet
PALISADE="$CARGO_TARGET_DIR/release/palisade"

DATA="$(mktemp -d -t palisade-units-data.XXXXXX)"
PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$DATA" "$WORK"
}
trap cleanup EXIT

P_PORT="$(free_port)"
P_PEER="$(free_port)"
R_PORT="$(free_port)"
"$PALISADE" --port "$P_PORT" --peer-port "$P_PEER" --dir "$DATA/palisade" >"$LOG_DIR/palisade.log" 2>&1 &
PIDS+=($!)
redis-server --port "$R_PORT" --dir "$DATA" --save '' --appendonly no --daemonize no \
    >"$LOG_DIR/redis-server.log" 2>&1 &
PIDS+=($!)

wait_up() {
    local i
    for i in $(seq 1 100); do
        [[ "$(redis-cli -p "$1" ping 2>/dev/null)" == PONG ]] && return 0
        sleep 0.2
    done
    die "server on port $1 did not answer PING; see $LOG_DIR"
}
wait_up "$P_PORT"
wait_up "$R_PORT"
log "Palisade on $P_PORT, redis-server on $R_PORT, logs in $LOG_DIR"

# --- the units -----------------------------------------------------------------------------

# run_unit NAME PORT UNIT: runs one unit; prints "passed failed".
run_unit() {
    local name="$1" port="$2" unit="$3"
    local log="$LOG_DIR/$name.${unit//\//_}.log"
    local skips=() t
    for t in "${SKIP_BOTH[@]}"; do skips+=(--skiptest "$t"); done
    if [[ "$name" == palisade ]]; then
        for t in "${SKIP_PALISADE[@]}"; do skips+=(--skiptest "$t"); done
    fi
    redis-cli -p "$port" flushall >/dev/null 2>&1 || true
    (cd "$REDIS_SRC" && timeout -k 10 "$UNIT_TIMEOUT" ./runtest --host 127.0.0.1 --port "$port" \
        --single "$unit" --timeout "$STALL_TIMEOUT" --tags "$SKIP_TAGS" --clients 1 --singledb \
        --baseport "$BASEPORT" "${skips[@]}") >"$log" 2>&1 || true
    # The runner colours its [ok]/[err] marks.
    sed -i 's/\x1b\[[0-9;]*m//g' "$log"
    local ok err
    ok="$(grep -c '^\[ok\]:' "$log" || true)"
    err="$(grep -cE '^\[(err|exception)\]:' "$log" || true)"
    # A unit cut short: by an error outside any test (an unknown command in its setup, say),
    # or by a stall (no progress for --timeout s, or killed by `timeout`).
    if grep -q '^\[exception\]' "$log"; then
        err="$err+exception"
    elif ! grep -q 'All tests passed\|tests failed' "$log"; then
        err="$err+stall"
    fi
    echo "$ok $err"
}

printf '%-28s %18s %18s\n' unit 'palisade ok/fail' 'redis ok/fail'
P_TOTAL=0
R_TOTAL=0
for unit in "${UNITS[@]}"; do
    read -r p_ok p_err < <(run_unit palisade "$P_PORT" "$unit")
    read -r r_ok r_err < <(run_unit redis "$R_PORT" "$unit")
    printf '%-28s %18s %18s\n' "$unit" "$p_ok/$p_err" "$r_ok/$r_err"
    P_TOTAL=$((P_TOTAL + p_ok))
    R_TOTAL=$((R_TOTAL + r_ok))
done
printf '%-28s %18s %18s\n' total "$P_TOTAL" "$R_TOTAL"
if [[ "$R_TOTAL" -gt 0 ]]; then
    printf 'Palisade passes / Redis passes: %d/%d = %s%%\n' "$P_TOTAL" "$R_TOTAL" \
        "$(awk -v p="$P_TOTAL" -v r="$R_TOTAL" 'BEGIN { printf "%.1f", 100 * p / r }')"
fi
