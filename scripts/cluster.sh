#!/usr/bin/env bash
# A local Palisade cluster on loopback, for trying things out and for fault drills.
#
#   scripts/cluster.sh start            start nodes 1..N (default 3) and wait for a leader
#   scripts/cluster.sh stop             stop every node (SIGTERM, then SIGKILL after 10 s)
#   scripts/cluster.sh status           pid, role, leader and term of each node
#   scripts/cluster.sh leader           print the leader's node number
#   scripts/cluster.sh kill N           kill -9 node N
#   scripts/cluster.sh pause N          SIGSTOP node N (a GC pause, a frozen VM)
#   scripts/cluster.sh resume N         SIGCONT node N
#   scripts/cluster.sh restart N        start node N again (after kill or stop)
#   scripts/cluster.sh wipe             stop, then delete the cluster's data
#
# Node N listens for clients on BASE_PORT+N-1 (6379, 6380, 6381 by default) and for peers on
# that port + 10000. Data and logs live under PALISADE_CLUSTER_DIR (default ./cluster-data).
# Environment: PALISADE_NODES (3 or 5), PALISADE_BASE_PORT (6379), PALISADE_BIN (a built
# palisade binary; default: build with cargo --release), and extra flags in PALISADE_FLAGS.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

NODES="${PALISADE_NODES:-3}"
BASE_PORT="${PALISADE_BASE_PORT:-6379}"
DIR="${PALISADE_CLUSTER_DIR:-$PWD/cluster-data}"
case "$DIR" in /*) ;; *) DIR="$PWD/$DIR" ;; esac

bin() {
    if [[ -n "${PALISADE_BIN:-}" ]]; then
        printf '%s\n' "$PALISADE_BIN"
        return
    fi
    cargo build --release --quiet --manifest-path "$ROOT/Cargo.toml" >&2
    printf '%s\n' "$CARGO_TARGET_DIR/release/palisade"
}

port() { echo $((BASE_PORT + $1 - 1)); }
peer_port() { echo $(($(port "$1") + 10000)); }
pidfile() { echo "$DIR/n$1/palisade.pid"; }
alive() { [[ -f "$(pidfile "$1")" ]] && kill -0 "$(cat "$(pidfile "$1")")" 2>/dev/null; }

peers() {
    local n list=""
    for n in $(seq 1 "$NODES"); do
        list+="${list:+,}$n=127.0.0.1:$(peer_port "$n")"
    done
    echo "$list"
}

# Sends one command with redis-cli if present, else with bash's /dev/tcp (inline protocol).
ask() {
    local p="$1"
    shift
    if command -v redis-cli >/dev/null 2>&1; then
        redis-cli -p "$p" "$@" 2>/dev/null
    else
        exec 3<>"/dev/tcp/127.0.0.1/$p" || return 1
        printf '%s\r\n' "$*" >&3
        timeout 1 cat <&3 | tr -d '\r'
        exec 3<&-
    fi
}

field() { ask "$1" RAFT.INFO | tr -d '\r' | sed -n "s/^$2://p"; }

start_node() {
    local n="$1" exe="$2"
    if alive "$n"; then
        log "node $n already running (pid $(cat "$(pidfile "$n")"))"
        return
    fi
    mkdir -p "$DIR/n$n"
    # PALISADE_TLS_DIR (ca.crt, node.crt, node.key): each node also serves TLS, on its client
    # port + PALISADE_TLS_PORT_OFFSET (default 100), client certificates optional.
    local tls=()
    if [[ -n "${PALISADE_TLS_DIR:-}" ]]; then
        tls=(--tls-port "$(($(port "$n") + ${PALISADE_TLS_PORT_OFFSET:-100}))"
            --tls-cert-file "$PALISADE_TLS_DIR/node.crt" --tls-key-file "$PALISADE_TLS_DIR/node.key"
            --tls-ca-cert-file "$PALISADE_TLS_DIR/ca.crt" --tls-auth-clients optional)
    fi
    # shellcheck disable=SC2086  # PALISADE_FLAGS is a list of extra flags
    nohup "$exe" --node-id "$n" --port "$(port "$n")" --peer-port "$(peer_port "$n")" \
        --dir "$DIR/n$n/data" --peers "$(peers)" "${tls[@]}" ${PALISADE_FLAGS:-} \
        >>"$DIR/n$n/palisade.log" 2>&1 &
    echo $! >"$(pidfile "$n")"
    log "node $n: pid $!, client port $(port "$n"), peer port $(peer_port "$n")"
}

wait_leader() {
    local i n leader
    for i in $(seq 1 100); do
        for n in $(seq 1 "$NODES"); do
            alive "$n" || continue
            leader="$(field "$(port "$n")" leader_id || true)"
            if [[ -n "$leader" ]]; then
                log "leader: node $leader"
                return 0
            fi
        done
        sleep 0.1
    done
    die "no leader after 10 s; see $DIR/n*/palisade.log"
}

cmd_start() {
    local exe n
    exe="$(bin)"
    for n in $(seq 1 "$NODES"); do start_node "$n" "$exe"; done
    wait_leader
}

cmd_stop() {
    local n i
    for n in $(seq 1 "$NODES"); do
        alive "$n" && kill -CONT "$(cat "$(pidfile "$n")")" 2>/dev/null && kill -TERM "$(cat "$(pidfile "$n")")" 2>/dev/null || true
    done
    for n in $(seq 1 "$NODES"); do
        for i in $(seq 1 100); do alive "$n" || break; sleep 0.1; done
        if alive "$n"; then
            log "node $n did not stop; killing it"
            kill -KILL "$(cat "$(pidfile "$n")")" 2>/dev/null || true
        fi
        rm -f "$(pidfile "$n")"
    done
    log "stopped"
}

cmd_status() {
    local n p
    for n in $(seq 1 "$NODES"); do
        p="$(port "$n")"
        if alive "$n"; then
            printf 'node %s  pid %-7s port %s  role=%s leader=%s term=%s applied=%s\n' "$n" "$(cat "$(pidfile "$n")")" "$p" \
                "$(field "$p" role || echo '?')" "$(field "$p" leader_id || echo '?')" "$(field "$p" term || echo '?')" "$(field "$p" applied_index || echo '?')"
        else
            printf 'node %s  down\n' "$n"
        fi
    done
}

cmd_leader() {
    local n
    for n in $(seq 1 "$NODES"); do
        alive "$n" || continue
        [[ "$(field "$(port "$n")" role)" == leader ]] && { echo "$n"; return 0; }
    done
    return 1
}

signal_node() {
    local sig="$1" n="${2:?node number}"
    alive "$n" || die "node $n is not running"
    kill "-$sig" "$(cat "$(pidfile "$n")")"
    log "sent SIG$sig to node $n"
}

case "${1:-}" in
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
leader) cmd_leader ;;
kill) signal_node KILL "${2:-}" ;;
pause) signal_node STOP "${2:-}" ;;
resume) signal_node CONT "${2:-}" ;;
restart) start_node "${2:?node number}" "$(bin)" ;;
wipe) cmd_stop; rm -rf "$DIR"; log "removed $DIR" ;;
*) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
