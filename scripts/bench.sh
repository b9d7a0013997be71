#!/usr/bin/env bash
# Benchmarks on this machine, in one run; results in docs/performance.md.
#
#   scripts/bench.sh                  the full comparison: every target at 1, 4, 16 and 64 clients
#   scripts/bench.sh --quick          a smoke run of about a minute (clients 1,16; 2 s; 1 round)
#   scripts/bench.sh --memory [N]     RSS per lock with N locks (default 1000000) on a 3-node
#                                     cluster, and the restart time of a follower and the leader
#   scripts/bench.sh --cost           where the time goes: per lock cycle, the servers' CPU time,
#                                     context switches and system calls (perf stat), for
#                                     palisade-1, redis-always, palisade-3 and redlock-3 (or
#                                     --targets), each alone, at --clients (default 1,64)
#
# The targets of the comparison, all on loopback:
#   palisade-3       a 3-node Palisade cluster, clients on the leader's port (--nodes 5: palisade-5)
#   palisade-1       a one-node Palisade
#   redis-always     Redis 7, appendonly yes, appendfsync always (the reference of the ratios)
#   redis-everysec   Redis 7, appendonly yes, appendfsync everysec
#   redlock-3        Redlock over three Redis 7 servers, each appendonly yes, appendfsync always:
#                    a cycle is SET NX PX on all three (held when a majority grants it, as
#                    redsync and node-redlock do), the data SET on the servers that granted it,
#                    and the compare-and-delete release (EVALSHA) on all three
#   etcd-3           a 3-node etcd 3.4 cluster (Debian's etcd-server), clients on the leader's
#                    client port through etcd's JSON gateway; cycle and hot workloads only
#
# palisade-bench prints, per target and client count, cycles/s, p50, p99 and the ratios to
# redis-always, then a server-side table over the same timed runs, from the nodes' INFO
# counters and /proc CPU times read before and after each run: commands per log entry and
# log entries per fsync on the leader, entries per fsync on a follower, and CPU ms per 1,000
# cycles of all the target's nodes and per node ("-" where a target does not report a figure).
# When palisade-3 (or -5) and redis-always both run, redis-benchmark (from redis-tools) then
# measures them a second, independent way: `SET key:... v NX PX 10000` and `GET key:...` on
# 100,000 random keys, 16 and 64 connections, through the cluster's leader, through a
# follower, and on redis-always; req/s, p50, p99 and the ratio to redis-always.
#
# Options of the comparison:
#   --targets LIST   some of palisade-3,palisade-1,redis-always,redis-everysec,redlock-3,etcd-3
#                    (default: all; etcd-3 and redlock-3 only for the cycle and hot workloads,
#                    etcd-3 only if etcd installs)
#   --clients LIST   client counts (default 1,4,16,64)
#   --duration S     seconds per round, target and client count (default 5)
#   --rounds R       rounds; the targets alternate within each round (default 3)
#   --workload W     cycle, hot, read or pipeline (default cycle); or contention, for the
#                    palisade-3 target only (scripts/bench-contention.sh runs it)
#   --bench-args "ARGS"
#                    more palisade-bench options, split at spaces, such as the contention
#                    workload's "--retry-ms 5 --hold-ms 1" (palisade-bench --help lists them)
#   --nodes 3|5      size of the Palisade cluster (default 3)
#   --redis-benchmark N
#                    requests per redis-benchmark SET run, twice as many per GET run (reads
#                    are faster; a run takes seconds either way); default 50000, --quick
#                    10000; 0 skips redis-benchmark
#   --out DIR        output directory (default $CARGO_TARGET_DIR/bench): bench.json,
#                    bench-clients.png, bench.txt, env.txt, redis-benchmark.txt (and its
#                    stderr in redis-benchmark.log); memory.txt and memory-*.json
#
# It installs what it needs (a C/C++ toolchain and libclang for RocksDB, redis-server, and for
# etcd-3 etcd-server and curl), builds the release binaries, starts everything on free loopback
# ports under a temporary directory, and tears everything down on exit, also on Ctrl-C.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

TARGETS="" CLIENTS="" DURATION="" ROUNDS="" RB_REQUESTS="" BENCH_ARGS=""
WORKLOAD=cycle NODES=3 OUT="" MEMORY="" QUICK="" COST=""
while [[ $# -gt 0 ]]; do
    case "$1" in
    --targets) TARGETS="$2"; shift 2 ;;
    --clients) CLIENTS="$2"; shift 2 ;;
    --duration) DURATION="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --workload) WORKLOAD="$2"; shift 2 ;;
    --bench-args) BENCH_ARGS="$2"; shift 2 ;;
    --nodes) NODES="$2"; shift 2 ;;
    --redis-benchmark) RB_REQUESTS="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --cost) COST=1; shift ;;
    --memory)
        MEMORY=1000000
        if [[ $# -gt 1 && "$2" =~ ^[0-9]+$ ]]; then MEMORY="$2"; shift; fi
        shift
        ;;
    # The comment block at the top of this file, up to `set -euo pipefail`.
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (see scripts/bench.sh --help)" ;;
    esac
done
[[ "$NODES" == 3 || "$NODES" == 5 ]] || die "--nodes must be 3 or 5"
# --quick changes the defaults only: `--quick --clients 4` runs 4 clients for 2 s.
if [[ -n "$COST" ]]; then
    CLIENTS="${CLIENTS:-1,64}" DURATION="${DURATION:-10}" TARGETS="${TARGETS:-palisade-1,redis-always,palisade-3,redlock-3}"
    ((DURATION >= 4)) || die "--cost needs --duration 4 or more (perf counts from second 1 to 1 s before the end)"
fi
if [[ -n "$QUICK" ]]; then
    CLIENTS="${CLIENTS:-1,16}" DURATION="${DURATION:-2}" ROUNDS="${ROUNDS:-1}"
    RB_REQUESTS="${RB_REQUESTS:-10000}"
else
    CLIENTS="${CLIENTS:-1,4,16,64}" DURATION="${DURATION:-5}" ROUNDS="${ROUNDS:-3}"
    RB_REQUESTS="${RB_REQUESTS:-50000}"
fi
[[ "$RB_REQUESTS" =~ ^[0-9]+$ ]] || die "--redis-benchmark takes a request count (0 to skip)"

OUT="${OUT:-$CARGO_TARGET_DIR/bench}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"

# etcd-server (Debian's etcd 3.4) and curl, for the etcd-3 target; fails if they cannot be
# installed. The package may start a system etcd (on 2379 and 2380): it is stopped, as the
# benchmark starts its own cluster on free ports.
ensure_etcd() {
    if ! command -v etcd >/dev/null 2>&1; then
        # A subshell: apt_install dies on failure, and a missing etcd is not fatal here.
        (apt_install etcd-server) || return 1
        if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet etcd 2>/dev/null; then
            log "stopping and disabling the packaged etcd service (the benchmark starts its own)"
            as_root systemctl disable --now etcd || true
        elif [[ -x /etc/init.d/etcd ]] && /etc/init.d/etcd status >/dev/null 2>&1; then
            log "stopping the packaged etcd service (the benchmark starts its own)"
            as_root /etc/init.d/etcd stop || true
        fi
    fi
    command -v curl >/dev/null 2>&1 || (apt_install curl) || return 1
    local version
    version="$(etcd --version 2>/dev/null | sed -n 's/^etcd Version: //p')"
    [[ -n "$version" ]] || return 1
    log "using etcd $version"
    [[ "$version" == 3.4.* ]] ||
        log "warning: the etcd-3 target is written for etcd 3.4's JSON gateway; $version may differ"
}

wants_etcd() { [[ ",$TARGETS," == *,etcd-3,* || ",$TARGETS," == *,etcd,* ]]; }

ensure_build_deps
ensure_redis
# The default targets include etcd-3 when the workload suits etcd and etcd is installed.
if [[ -z "$MEMORY" && -z "$TARGETS" ]]; then
    TARGETS="palisade-3,palisade-1,redis-always,redis-everysec"
    if [[ "$WORKLOAD" != cycle && "$WORKLOAD" != hot ]]; then
        log "no etcd-3 or redlock-3 target: they run the cycle and hot workloads only"
    elif TARGETS+=",redlock-3" && ensure_etcd; then
        TARGETS+=",etcd-3"
    else
        log "warning: etcd could not be installed (apt-get install etcd-server); going on without etcd-3"
    fi
elif [[ -z "$MEMORY" ]] && wants_etcd; then
    ensure_etcd || die "etcd-3 needs etcd, which could not be installed (apt-get install etcd-server)"
fi
log "building release binaries (CARGO_TARGET_DIR=$CARGO_TARGET_DIR)"
# Both crates of the workspace: the server (palisade) and the benchmark (bench/, palisade-bench).
cargo build --release --quiet --manifest-path "$ROOT/Cargo.toml" -p palisade -p palisade-bench
BIN="$CARGO_TARGET_DIR/release"

WORK="$(mktemp -d -t palisade-bench-XXXXXX)"
PIDS=() ETCD_PIDS=()

# Every port a run uses, from BASE: cluster nodes BASE.., the one-node Palisade BASE+50, the
# Redis servers BASE+100 and BASE+101, redlock-3's BASE+102..104; Palisade's peer ports are
# client ports + 10000. The etcd members' client ports are BASE+110..112, their peer ports
# BASE+120..122.
ports_from() {
    local b="$1" n
    for n in $(seq 0 $((NODES - 1))) 50; do echo $((b + n)) $((b + n + 10000)); done
    echo $((b + 100)) $((b + 101)) $((b + 102)) $((b + 103)) $((b + 104))
    for n in 0 1 2; do echo $((b + 110 + n)) $((b + 120 + n)); done
}
# Taken: listening, or the local end of any connection (a listener cannot bind those either).
taken_ports() {
    if command -v ss >/dev/null 2>&1; then
        ss -Htan | awk '{ n = split($4, a, ":"); print a[n] }' | sort -u
    fi
}
# Other programs (tests, other clusters) listen on random loopback ports too, and outgoing
# connections hold ports from the ephemeral range: pick a base below that range (usually
# 32768 and up) whose ports are all free.
EPHEMERAL_LOW="$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)"
TOP_BASE=$((EPHEMERAL_LOW - 10200))
((TOP_BASE > 11000)) || TOP_BASE=50000 # an unusual range: use high ports and hope
TAKEN=" $(taken_ports | tr '\n' ' ') "
for _ in $(seq 1 50); do
    BASE=$((10000 + RANDOM % (TOP_BASE - 10000)))
    busy=""
    for p in $(ports_from "$BASE"); do
        if [[ "$TAKEN" == *" $p "* ]] || (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            busy=1
            break
        fi
    done
    [[ -z "$busy" ]] && break
done
[[ -z "$busy" ]] || die "found no free range of loopback ports"
SINGLE_PORT=$((BASE + 50))
ALWAYS_PORT=$((BASE + 100))
EVERYSEC_PORT=$((BASE + 101))

cluster() {
    PALISADE_CLUSTER_DIR="$WORK/cluster" PALISADE_NODES="$NODES" PALISADE_BASE_PORT="$BASE" \
        PALISADE_BIN="$BIN/palisade" "$ROOT/scripts/cluster.sh" "$@"
}

# stop_pids PID...: SIGTERM, then SIGKILL what still runs 5 s later.
stop_pids() {
    local pid
    for pid in "$@"; do kill "$pid" 2>/dev/null || true; done
    for pid in "$@"; do
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
    done
}

cleanup() {
    local pid
    trap - EXIT INT TERM
    if [[ -d "$WORK/cluster" ]]; then cluster stop >/dev/null 2>&1 || true; fi
    # The etcd members one at a time: a leader stopped together with its followers spends 7 s
    # on a leadership transfer that cannot succeed.
    for pid in "${ETCD_PIDS[@]}"; do stop_pids "$pid"; done
    stop_pids "${PIDS[@]}"
    rm -rf "$WORK" 2>/dev/null || { sleep 1; rm -rf "$WORK"; }
}
trap cleanup EXIT
trap 'exit 130' INT TERM

now_ms() { echo $(($(date +%s%N) / 1000000)); }
secs() { awk -v ms="$1" 'BEGIN { printf "%.2f", ms / 1000 }'; }
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
node_pid() { cat "$WORK/cluster/n$1/palisade.pid"; }
node_port() { echo $((BASE + $1 - 1)); }
etcd_port() { echo $((BASE + 109 + $1)); }      # client port of etcd member N (1..3)
etcd_peer_port() { echo $((BASE + 119 + $1)); } # its peer port
keys_at() { redis-cli -p "$1" INFO keyspace 2>/dev/null | tr -d '\r' | sed -n 's/^db0:keys=\([0-9]*\),.*/\1/p'; }

# wait_for SECONDS COMMAND...: retry every 20 ms until COMMAND succeeds.
wait_for() {
    local limit=$(($(now_ms) + $1 * 1000))
    shift
    until "$@" >/dev/null 2>&1; do
        (($(now_ms) < limit)) || return 1
        sleep 0.02
    done
}
answers_ping() { [[ "$(redis-cli -p "$1" PING 2>/dev/null)" == PONG ]]; }
# etcd_healthy PORT: the member answers and sees a leader.
etcd_healthy() { curl -fsS -m 2 "http://127.0.0.1:$1/health" 2>/dev/null | grep -q '"health":"true"'; }
# etcd_status PORT FIELD: a number from the member's /v3/maintenance/status, such as its own
# member_id or the leader's.
etcd_status() {
    curl -fsS -m 2 -X POST -d '{}' "http://127.0.0.1:$1/v3/maintenance/status" 2>/dev/null |
        sed -n "s/.*\"$2\":\"\([0-9]*\)\".*/\1/p"
}
has_keys() { [[ "$(keys_at "$1")" == "$2" ]]; }
is_leader() { redis-cli -p "$1" RAFT.INFO 2>/dev/null | tr -d '\r' | grep -qx 'role:leader'; }
mb() { echo $(($1 * 1024 / 1000000)); } # kB (as /proc reports them) to MB

start_redis() { # NAME PORT FSYNC
    mkdir -p "$WORK/$1"
    redis-server --port "$2" --dir "$WORK/$1" --appendonly yes --appendfsync "$3" --save '' \
        --daemonize yes --pidfile "$WORK/$1/redis.pid" --logfile "$WORK/$1/redis.log"
    wait_for 10 answers_ping "$2" || die "$1 did not start; see $WORK/$1/redis.log"
    PIDS+=("$(cat "$WORK/$1/redis.pid")")
    log "$1: Redis on port $2 (appendonly yes, appendfsync $3)"
}

start_single() { # PORT
    mkdir -p "$WORK/single"
    "$BIN/palisade" --port "$1" --peer-port $(($1 + 10000)) --dir "$WORK/single/data" \
        >"$WORK/single/palisade.log" 2>&1 &
    PIDS+=("$!")
    SINGLE_PID="$!"
    wait_for 20 is_leader "$1" || die "the one-node Palisade did not start; see $WORK/single/palisade.log"
    log "palisade-1: one-node Palisade on port $1 (pid $!)"
}

start_cluster() { # prints the leader's client port
    cluster start >&2
    local leader n
    for n in $(seq 1 "$NODES"); do
        wait_for 20 answers_ping "$(node_port "$n")" ||
            die "node $n of the cluster is not running; see $WORK/cluster/n$n/palisade.log"
    done
    for _ in $(seq 1 100); do
        leader="$(cluster leader 2>/dev/null || true)"
        [[ -n "$leader" ]] && break
        sleep 0.1
    done
    [[ -n "$leader" ]] || die "the cluster has no leader; see $WORK/cluster/n*/palisade.log"
    node_port "$leader"
}

# Starts a 3-node etcd cluster and sets ETCD_PORT to its leader's client port. Not in a
# subshell: the members' pids go to ETCD_PIDS, for cleanup.
start_etcd() {
    local n peers="" leader
    for n in 1 2 3; do peers+="${peers:+,}n$n=http://127.0.0.1:$(etcd_peer_port "$n")"; done
    for n in 1 2 3; do
        mkdir -p "$WORK/etcd/n$n"
        etcd --name "n$n" --data-dir "$WORK/etcd/n$n/data" \
            --listen-client-urls "http://127.0.0.1:$(etcd_port "$n")" \
            --advertise-client-urls "http://127.0.0.1:$(etcd_port "$n")" \
            --listen-peer-urls "http://127.0.0.1:$(etcd_peer_port "$n")" \
            --initial-advertise-peer-urls "http://127.0.0.1:$(etcd_peer_port "$n")" \
            --initial-cluster "$peers" --initial-cluster-token "palisade-bench-$BASE" \
            --initial-cluster-state new >"$WORK/etcd/n$n/etcd.log" 2>&1 &
        ETCD_PIDS+=("$!")
    done
    for n in 1 2 3; do
        wait_for 30 etcd_healthy "$(etcd_port "$n")" ||
            die "etcd member n$n is not healthy; see $WORK/etcd/n$n/etcd.log"
    done
    leader="$(etcd_status "$(etcd_port 1)" leader)"
    ETCD_PORT=""
    for n in 1 2 3; do
        if [[ -n "$leader" && "$(etcd_status "$(etcd_port "$n")" member_id)" == "$leader" ]]; then
            ETCD_PORT="$(etcd_port "$n")"
            log "etcd-3: 3-node etcd cluster, leader n$n on port $ETCD_PORT"
        fi
    done
    if [[ -z "$ETCD_PORT" ]]; then
        ETCD_PORT="$(etcd_port 1)"
        log "etcd-3: 3-node etcd cluster, leader not found: clients on member n1, port $ETCD_PORT"
    fi
}

machine() {
    printf 'date: %s\n' "$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    printf 'host: %s, %s cores, %s\n' "$(uname -sr)" "$(nproc)" \
        "$(awk '/MemTotal/ { printf "%.1f GB RAM", $2 / 1048576 }' /proc/meminfo)"
    printf 'cpu: %s\n' "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
    printf 'load average before the run: %s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
    printf 'redis: %s\n' "$(redis-server --version | sed 's/ sha=.*//')"
    if wants_etcd; then printf 'etcd: %s\n' "$(etcd --version | sed -n 's/^etcd Version: //p')"; fi
    printf 'palisade: %s\n' "$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)"
}

# --- memory and restart ------------------------------------------------------------------

# restart_timed N ROLE: kill -9 node N, start it again, and time PING and the full keyspace.
restart_timed() {
    local n="$1" role="$2" port t0 t_ping t_keys
    port="$(node_port "$n")"
    local pid
    pid="$(node_pid "$n")"
    cluster kill "$n" >&2
    # Wait until it is gone. In a container whose init does not reap orphans, it stays a
    # zombie, which cluster.sh would take for a running node: forget its pid file then.
    for _ in $(seq 1 100); do
        [[ -e "/proc/$pid" ]] || break
        if [[ "$(awk '/^State:/ { print $2 }' "/proc/$pid/status" 2>/dev/null)" == Z ]]; then
            rm -f "$WORK/cluster/n$n/palisade.pid"
            break
        fi
        sleep 0.05
    done
    sleep 0.5
    t0="$(now_ms)"
    cluster restart "$n" >&2
    wait_for 120 answers_ping "$port" || die "node $n did not answer PING within 120 s"
    t_ping="$(now_ms)"
    wait_for 300 has_keys "$port" "$LOCKS" || die "node $n did not show $LOCKS keys within 300 s"
    t_keys="$(now_ms)"
    RESTART_PING=$((t_ping - t0)) RESTART_KEYS=$((t_keys - t0))
    local rss_now
    rss_now="$(rss_kb "$(node_pid "$n")")"
    sleep 5
    RESTART_RSS="$(rss_kb "$(node_pid "$n")")"
    printf '%-8s node %s: kill -9, restart: PING after %s s, %s keys after %s s, then RSS %s MB, 5 s later %s MB (%s)\n' \
        "$role" "$n" "$(secs "$RESTART_PING")" "$LOCKS" "$(secs "$RESTART_KEYS")" \
        "$(mb "$rss_now")" "$(mb "$RESTART_RSS")" "$(mem_detail "$port")"
}

# Where a node's memory is, from INFO memory: the keyspace and the rest of the server's heap
# (used_memory), and RocksDB's memtables (allocated outside jemalloc).
mem_detail() {
    redis-cli -p "$1" INFO memory | tr -d '\r' | awk -F: '
        $1 == "used_memory" { u = $2 } $1 == "rocksdb_memtables" { m = $2 }
        END { printf "used_memory %d MB, RocksDB memtables %d MB", u / 1e6, m / 1e6 }'
}

verdict() { if [[ "$1" -eq 1 ]]; then echo "PASS"; else echo "FAIL"; fi; }

memory_run() {
    LOCKS="$MEMORY"
    local leader_port leader n follower base=() rss max_rss=0 worst=0
    machine
    NODES=3
    leader_port="$(start_cluster)"
    leader=$((leader_port - BASE + 1))
    for n in 1 2 3; do base+=("$(rss_kb "$(node_pid "$n")")"); done
    log "loading $LOCKS locks through the leader (node $leader, port $leader_port)"
    "$BIN/palisade-bench" --workload load --locks "$LOCKS" --clients 4 --batch 1000 \
        --target "palisade-3=palisade@127.0.0.1:$leader_port" --json "$OUT/memory-load.json"
    for n in 1 2 3; do
        wait_for 300 has_keys "$(node_port "$n")" "$LOCKS" ||
            die "node $n shows $(keys_at "$(node_port "$n")") keys, not $LOCKS, after 300 s"
    done
    sleep 2
    echo
    printf 'RSS with %s locks (MB = 10^6 bytes; per lock = (RSS - RSS before loading) / locks):\n' "$LOCKS"
    for n in 1 2 3; do
        rss="$(rss_kb "$(node_pid "$n")")"
        ((rss > max_rss)) && max_rss="$rss"
        printf '  node %s (%-8s) RSS %5s MB, before loading %4s MB, %4s bytes per lock (%s)\n' "$n" \
            "$([[ "$n" == "$leader" ]] && echo leader || echo follower)" "$(mb "$rss")" \
            "$(mb "${base[n - 1]}")" "$(((rss - base[n - 1]) * 1024 / LOCKS))" \
            "$(mem_detail "$(node_port "$n")")"
    done
    echo
    follower=$((leader % 3 + 1))
    restart_timed "$follower" follower
    worst="$RESTART_KEYS"
    ((RESTART_RSS > max_rss)) && max_rss="$RESTART_RSS"
    wait_for 30 is_leader "$leader_port" || true
    restart_timed "$leader" leader
    ((RESTART_KEYS > worst)) && worst="$RESTART_KEYS"
    ((RESTART_RSS > max_rss)) && max_rss="$RESTART_RSS"

    log "the same $LOCKS locks in Redis, for comparison"
    start_redis redis-mem "$ALWAYS_PORT" everysec >&2
    "$BIN/palisade-bench" --workload load --locks "$LOCKS" --clients 4 --batch 1000 \
        --target "redis=redis@127.0.0.1:$ALWAYS_PORT" --json "$OUT/memory-load-redis.json"
    printf 'Redis 7 with the same locks: used_memory_rss %s MB\n' \
        "$(($(redis-cli -p "$ALWAYS_PORT" INFO memory | tr -d '\r' | sed -n 's/^used_memory_rss://p') / 1000000))"

    echo
    printf 'targets (issue 7: at 1,000,000 locks, RSS <= 250 MB per node, restart <= 10 s):\n'
    printf '  largest RSS (loaded, or 5 s after a restart) %s MB%s: %s\n' "$(mb "$max_rss")" \
        "$([[ "$LOCKS" -ne 1000000 ]] && echo " at $LOCKS locks (the target is for 1,000,000)")" \
        "$(verdict $((max_rss * 1024 <= 250000000)))"
    printf '  slowest restart to the full keyspace %s s: %s\n' "$(secs "$worst")" "$(verdict $((worst <= 10000)))"
}

if [[ -n "$MEMORY" ]]; then
    # Not `memory_run | tee`: a pipeline would run it in a subshell, out of cleanup's reach.
    exec > >(tee "$OUT/memory.txt") 2>&1
    memory_run
    log "wrote $OUT/memory.txt, $OUT/memory-load.json and $OUT/memory-load-redis.json"
    exit 0
fi

# --- where the time goes (--cost) ---------------------------------------------------------

# The kernel's counters of a target's server processes over one timed run of that target
# alone: system calls by kind, context switches and CPU time, per lock cycle.
COST_EVENTS=task-clock,context-switches
for c in fdatasync write writev sendto read recvfrom futex epoll_wait; do
    COST_EVENTS+=",syscalls:sys_enter_$c"
done

# cost_one NAME TARGET PIDS CLIENTS: one run of palisade-bench against TARGET, with perf stat
# on PIDS (comma-separated) from 1 s after its start to 1 s before its end; prints one row.
cost_one() {
    local name="$1" target="$2" pids="$3" clients="$4" secs=$((DURATION - 2)) bench_pid cycles
    "$BIN/palisade-bench" --target "$name=$target" --clients "$clients" --duration "$DURATION" \
        --rounds 1 --workload cycle >"$WORK/cost-bench.txt" 2>&1 &
    bench_pid=$!
    sleep 1
    perf stat -x, -e "$COST_EVENTS" -p "$pids" -o "$WORK/cost-stat.txt" -- sleep "$secs" ||
        die "perf stat failed; see $WORK/cost-stat.txt"
    wait "$bench_pid" || die "palisade-bench failed; see $WORK/cost-bench.txt"
    # The medians table: target, clients, cycles/s, then p50 in ms (with a decimal point).
    cycles="$(awk -v c="$clients" '$2 == c && $3 ~ /^[0-9]+$/ && $4 ~ /\./ { print $3; exit }' "$WORK/cost-bench.txt")"
    [[ -n "$cycles" && "$cycles" -gt 0 ]] || die "no cycles/s from palisade-bench; see $WORK/cost-bench.txt"
    awk -F, -v name="$name" -v clients="$clients" -v cycles="$cycles" -v secs="$secs" '
        $1 ~ /^[0-9.]+$/ { n[$3] = $1 }
        END {
            k = cycles * secs
            sock_w = n["syscalls:sys_enter_sendto"] + n["syscalls:sys_enter_writev"]
            printf "%-13s %7d %9d %10.0f %9.2f %7.2f %7.2f %8.2f %7.2f %7.2f %7.2f\n", name, clients, cycles,
                n["task-clock"] * 1000 / k, n["context-switches"] / k, n["syscalls:sys_enter_futex"] / k,
                n["syscalls:sys_enter_epoll_wait"] / k, n["syscalls:sys_enter_fdatasync"] / k,
                n["syscalls:sys_enter_write"] / k, sock_w / k,
                (n["syscalls:sys_enter_read"] + n["syscalls:sys_enter_recvfrom"]) / k
        }' "$WORK/cost-stat.txt"
}

cost_run() {
    local t c port pids servers n name target rows=() wanted=() counts=()
    command -v perf >/dev/null 2>&1 || apt_install linux-perf
    perf stat -e syscalls:sys_enter_futex -- true >/dev/null 2>&1 ||
        die "perf cannot count system calls here (run as root, with tracefs mounted)"
    machine
    IFS=, read -r -a wanted <<<"$TARGETS"
    for t in "${wanted[@]}"; do
        case "$t" in
        palisade-1)
            start_single "$SINGLE_PORT"
            rows+=("palisade-1|palisade@127.0.0.1:$SINGLE_PORT|$SINGLE_PID")
            ;;
        redis-always)
            start_redis redis-always "$ALWAYS_PORT" always
            rows+=("redis-always|redis@127.0.0.1:$ALWAYS_PORT|$(cat "$WORK/redis-always/redis.pid")")
            ;;
        palisade-3)
            NODES=3
            port="$(start_cluster)"
            pids="$(node_pid 1),$(node_pid 2),$(node_pid 3)"
            rows+=("palisade-3|palisade@127.0.0.1:$port|$pids")
            ;;
        redlock-3)
            servers="" pids=""
            for n in 1 2 3; do
                start_redis "redlock-n$n" $((BASE + 101 + n)) always
                servers+="${servers:+,}127.0.0.1:$((BASE + 101 + n))"
                pids+="${pids:+,}$(cat "$WORK/redlock-n$n/redis.pid")"
            done
            rows+=("redlock-3|redlock@$servers|$pids")
            ;;
        *) die "--cost takes palisade-1, redis-always, palisade-3 and redlock-3, not $t" ;;
        esac
    done
    echo
    echo "per lock cycle (3 writes), summed over the target's server processes; ${DURATION} s per run, counted over the middle $((DURATION - 2)) s:"
    printf '%-13s %7s %9s %10s %9s %7s %7s %8s %7s %7s %7s\n' target clients cycles/s "cpu us" switches \
        futex epoll fdatasync write "sock w" "sock r"
    IFS=, read -r -a counts <<<"$CLIENTS"
    for c in "${counts[@]}"; do
        for t in "${rows[@]}"; do
            IFS='|' read -r name target pids <<<"$t"
            cost_one "$name" "$target" "$pids" "$c"
        done
    done
    echo "(cpu us: CPU time of the servers, user and kernel; write: write(2), which is a WAL or AOF"
    echo " write and, for Palisade, also a wake-up of a tokio worker (eventfd); sock w: sendto and"
    echo " writev; sock r: read and recvfrom; Redis replies with write(2), so its socket writes are"
    echo " in the write column)"
    printf 'load average after the run: %s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
}

if [[ -n "$COST" ]]; then
    exec > >(tee "$OUT/cost.txt") 2>&1
    cost_run
    log "wrote $OUT/cost.txt"
    exit 0
fi

# --- redis-benchmark -----------------------------------------------------------------------

# redis-benchmark ships with redis-tools, which ensure_redis installs with redis-cli; true if
# it runs, with a warning if not.
ensure_redis_benchmark() {
    command -v redis-benchmark >/dev/null 2>&1 || (apt_install redis-tools) || true
    if ! redis-benchmark --version >/dev/null 2>&1; then
        log "warning: redis-benchmark is not available (apt-get install redis-tools); no second load generator"
        return 1
    fi
}

# rb_parse: "rps p50 p99" from redis-benchmark --csv on stdin, the columns found by their
# names in the header (Redis 7); without a header (Redis 6: "test","rps"), p50 and p99 are "-".
rb_parse() {
    tr -d '\r' | awk -F, '
        function col(name) { return (name in at) ? $at[name] : "-" }
        !/^"/ { next }
        { gsub(/"/, "") }
        $1 == "test" { for (i = 1; i <= NF; i++) at[$i] = i; next }
        "rps" in at { print col("rps"), col("p50_latency_ms"), col("p99_latency_ms"); found = 1; exit }
        NF >= 2 { print $2, "-", "-"; found = 1; exit }
        END { if (!found) exit 1 }'
}

# rb_once NAME PORT COMMAND CONNECTIONS: one redis-benchmark run on 100,000 random keys, of
# RB_REQUESTS SETs or twice as many GETs; prints "rps p50 p99", or "failed - -" (the reason
# goes to redis-benchmark.log). Redis 7's redis-benchmark stops at the first error reply, so a
# completed run means every reply was a success. The keys are per target and connection
# count, so that no run's SET NX meets the keys another run left behind (for 10 s).
rb_once() {
    local name="$1" port="$2" cmd="$3" c="$4" key out requests="$RB_REQUESTS"
    key="key:$name-$c:__rand_int__"
    local argv=(SET "$key" v NX PX 10000)
    if [[ "$cmd" == GET ]]; then argv=(GET "$key") requests=$((2 * RB_REQUESTS)); fi
    printf '== %s %s -c %s: redis-benchmark -p %s ... %s\n' "$name" "$cmd" "$c" "$port" "${argv[*]}" \
        >>"$OUT/redis-benchmark.log"
    # A timeout: redis-benchmark spins forever on a port that refuses connections.
    if out="$(timeout 300 redis-benchmark -h 127.0.0.1 -p "$port" -c "$c" -n "$requests" \
        -r 100000 --csv "${argv[@]}" 2>>"$OUT/redis-benchmark.log")" &&
        printf '%s\n' "$out" | rb_parse; then
        return
    fi
    printf '%s\n' "$out" >>"$OUT/redis-benchmark.log"
    log "warning: redis-benchmark $cmd -c $c on $name failed; see $OUT/redis-benchmark.log"
    echo "failed - -"
}

# The redis-benchmark table: SET NX PX and GET at 16 and 64 connections, on the cluster
# through its leader and through a follower (found with `cluster leader` now: leadership may
# have moved since the cluster started), and on redis-always; targets alternate per command
# and connection count, as in palisade-bench's rounds.
redis_benchmark_run() {
    local leader follower n c cmd t r rps p50 p99 ref
    leader="$(cluster leader 2>/dev/null)" || die "redis-benchmark: the cluster has no leader"
    for n in $(seq 1 "$NODES"); do
        if [[ "$n" != "$leader" ]]; then follower="$n" && break; fi
    done
    local names=("palisade-$NODES-leader" "palisade-$NODES-follower" redis-always)
    local ports=("$(node_port "$leader")" "$(node_port "$follower")" "$ALWAYS_PORT")
    log "redis-benchmark $(redis-benchmark --version | awk '{ print $2 }'), $RB_REQUESTS SETs or $((2 * RB_REQUESTS)) GETs per run: leader node $leader (port ${ports[0]}), follower node $follower (port ${ports[1]}), redis-always (port $ALWAYS_PORT)"
    declare -A result=()
    for c in 16 64; do
        for cmd in SET GET; do
            for t in 0 1 2; do
                result["$t $cmd $c"]="$(rb_once "${names[t]}" "${ports[t]}" "$cmd" "$c")"
            done
        done
    done
    echo
    # In the table too, which is what gets read later.
    [[ "$(cluster leader 2>/dev/null || true)" == "$leader" ]] ||
        echo "WARNING: the leader changed during these runs: the leader and follower rows are mixed"
    printf 'redis-benchmark, %s SETs (SET key v NX PX 10000) or %s GETs per run, 100,000 random keys:\n' \
        "$RB_REQUESTS" "$((2 * RB_REQUESTS))"
    printf '%-24s %-4s %5s %10s %8s %8s %8s\n' target cmd conns "req/s" "p50 ms" "p99 ms" "/ref"
    for c in 16 64; do
        for cmd in SET GET; do
            ref="${result["2 $cmd $c"]%% *}"
            for t in 0 1 2; do
                read -r rps p50 p99 <<<"${result["$t $cmd $c"]}"
                r="$(awk -v a="$rps" -v b="$ref" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2fx", a / b; else print "-" }')"
                printf '%-24s %-4s %5s %10s %8s %8s %8s\n' "${names[t]}" "$cmd" "$c" "$rps" "$p50" "$p99" "$r"
            done
        done
    done
    printf '(ref = redis-always, same command and connection count)\n'
}

# --- the comparison ------------------------------------------------------------------------

machine | tee "$OUT/env.txt"
args=()
HAVE_CLUSTER="" HAVE_ALWAYS=""
IFS=, read -r -a wanted <<<"$TARGETS"
for t in "${wanted[@]}"; do
    case "$t" in
    palisade-3 | palisade-5 | cluster)
        port="$(start_cluster)"
        log "palisade-$NODES: $NODES-node cluster, leader on port $port"
        members=""
        for n in $(seq 1 "$NODES"); do members+="${members:+,}127.0.0.1:$(node_port "$n")"; done
        args+=(--target "palisade-$NODES=palisade@127.0.0.1:$port" --members "palisade-$NODES=$members")
        HAVE_CLUSTER=1
        ;;
    palisade-1 | single)
        start_single "$SINGLE_PORT"
        args+=(--target "palisade-1=palisade@127.0.0.1:$SINGLE_PORT" --members "palisade-1=127.0.0.1:$SINGLE_PORT")
        ;;
    redis-always | always)
        start_redis redis-always "$ALWAYS_PORT" always
        args+=(--target "redis-always=redis@127.0.0.1:$ALWAYS_PORT")
        HAVE_ALWAYS=1
        ;;
    redis-everysec | everysec)
        start_redis redis-everysec "$EVERYSEC_PORT" everysec
        args+=(--target "redis-everysec=redis@127.0.0.1:$EVERYSEC_PORT")
        ;;
    redlock-3 | redlock)
        servers=""
        for n in 1 2 3; do
            start_redis "redlock-n$n" $((BASE + 101 + n)) always
            servers+="${servers:+,}127.0.0.1:$((BASE + 101 + n))"
        done
        args+=(--target "redlock-3=redlock@$servers")
        ;;
    etcd-3 | etcd)
        start_etcd
        args+=(--target "etcd-3=etcd@127.0.0.1:$ETCD_PORT")
        ;;
    *) die "unknown target $t (palisade-3, palisade-1, redis-always, redis-everysec, redlock-3, etcd-3)" ;;
    esac
done
sleep 1
title="Workload $WORKLOAD, $(nproc) cores, $(date -u '+%Y-%m-%d %H:%M') UTC, load $(cut -d' ' -f1 /proc/loadavg)"
args+=(--clients "$CLIENTS" --duration "$DURATION" --rounds "$ROUNDS" --workload "$WORKLOAD"
    --json "$OUT/bench.json" --plot "$OUT/bench-clients.png" --title "$title")
read -r -a extra <<<"$BENCH_ARGS"
args+=("${extra[@]}")
log "palisade-bench ${args[*]}"
"$BIN/palisade-bench" "${args[@]}" | tee "$OUT/bench.txt"
wrote="$OUT/bench.txt, $OUT/bench.json, $OUT/bench-clients.png"
if [[ -n "$HAVE_CLUSTER" && -n "$HAVE_ALWAYS" && "$RB_REQUESTS" -gt 0 ]]; then
    if ensure_redis_benchmark; then
        redis_benchmark_run | tee "$OUT/redis-benchmark.txt"
        wrote+=", $OUT/redis-benchmark.txt"
    fi
elif [[ "$RB_REQUESTS" -gt 0 ]]; then
    log "no redis-benchmark run: it needs the palisade-$NODES and redis-always targets"
fi
printf 'load average after the run: %s\n' "$(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/env.txt"
log "wrote $wrote and $OUT/env.txt"
