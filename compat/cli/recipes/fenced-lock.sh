#!/usr/bin/env bash
# Recipe: a blocking fenced lock with automatic renewal and a loss callback, in bash with
# redis-cli (Palisade).
#
#   fenced-lock.sh KEY TTL_MS WAIT_MS -- COMMAND [ARG...]
#
# Waits in KEY's FIFO queue (LOCK KEY OWNER PX TTL_MS WAIT WAIT_MS; WAIT_MS 0: for ever), runs
# COMMAND with the fencing token in $FENCING_TOKEN, renews the lease every TTL_MS/3 while
# COMMAND runs, and unlocks when it exits. COMMAND sends the token with each write, e.g.
# `redis-cli FENCEDSET res value "$FENCING_TOKEN"`, so a write after a loss gets -FENCED.
# If the lock is lost first (a "lock_expired <token> <owner>" or "lock_released ..." event
# for this owner on __keyspace@0__:KEY, a RENEW that replies nil, or a whole TTL without a
# successful RENEW), ON_LOST runs, once, with the reason in $LOST_REASON; by default it sends
# COMMAND SIGTERM.
#
# Environment: REDIS_HOST (127.0.0.1), REDIS_PORT (6379), ON_LOST, RENEW_MS (TTL_MS/3;
# 0 turns renewal off, which compat/cli/test.sh uses to play a stalled holder).
# Exit status: COMMAND's; 75 if WAIT_MS passed without a grant. Needs bash 5 and redis-cli.
set -uo pipefail
[[ $# -ge 5 && $4 == -- ]] || { sed -n '5,18p' "$0" >&2; exit 64; }
KEY=$1 TTL_MS=$2 WAIT_MS=$3
shift 4
cli() { redis-cli -h "${REDIS_HOST:-127.0.0.1}" -p "${REDIS_PORT:-6379}" "$@"; }
now_ms() { local t=${EPOCHREALTIME//[!0-9]/}; echo $((t / 1000)); }
OWNER="$HOSTNAME-$$-$RANDOM$RANDOM" # unique to this holder

# Subscribe first (and read the confirmation), so that no event about our grant is missed.
exec {EVENTS}< <(exec redis-cli -h "${REDIS_HOST:-127.0.0.1}" -p "${REDIS_PORT:-6379}" \
    SUBSCRIBE "__keyspace@0__:$KEY")
SUBSCRIBER=$!
trap 'kill "$SUBSCRIBER" 2>/dev/null' EXIT
read -r -u "$EVENTS" && read -r -u "$EVENTS" && read -r -u "$EVENTS" || exit 1

TOKEN="$(cli LOCK "$KEY" "$OWNER" PX "$TTL_MS" WAIT "$WAIT_MS")"
if ! [[ $TOKEN =~ ^[0-9]+$ ]]; then
    echo "fenced-lock: no grant of $KEY: ${TOKEN:-timed out}" >&2
    exit 75
fi
FENCING_TOKEN=$TOKEN "$@" &
CHILD=$!

lost() { LOST_REASON=$1 eval "${ON_LOST:-kill -TERM $CHILD}"; exit 0; }

# One loop watches the events and renews: it reads event lines until the next renewal is due.
watch_and_renew() {
    local every=${RENEW_MS:-$((TTL_MS / 3))} next valid_until left timeout line reply sent
    next=$(($(now_ms) + every)) valid_until=$(($(now_ms) + TTL_MS))
    while :; do
        line="" left=$((next - $(now_ms)))
        if ((every == 0)); then
            read -r -u "$EVENTS" line || exit 0 # the subscription ended
        elif ((left > 0)); then
            printf -v timeout '%d.%03d' $((left / 1000)) $((left % 1000))
            read -r -u "$EVENTS" -t "$timeout" line || (($? > 128)) || sleep "$timeout"
        else
            sent=$(now_ms) next=$((next + every))
            reply="$(cli RENEW "$KEY" "$OWNER" PX "$TTL_MS" 2>/dev/null)" && [[ -z $reply ]] &&
                lost "RENEW returned nil"
            [[ $reply == "$TOKEN" ]] && valid_until=$((sent + TTL_MS))
            # A failed RENEW is retried at the next tick, until a whole TTL has gone without one.
            (($(now_ms) > valid_until)) && lost "lease ran out without a successful RENEW"
        fi
        case "$line" in
        "lock_expired $TOKEN $OWNER") lost lock_expired ;;
        "lock_released $TOKEN $OWNER") lost lock_released ;;
        esac
    done
}
watch_and_renew &
WATCHER=$!
trap 'kill -TERM "$CHILD" 2>/dev/null' INT TERM

wait "$CHILD"
status=$?
while kill -0 "$CHILD" 2>/dev/null; do # the wait was cut short by INT or TERM
    wait "$CHILD"
    status=$?
done
kill "$WATCHER" 2>/dev/null # before UNLOCK: our own lock_released is not a loss
cli UNLOCK "$KEY" "$OWNER" >/dev/null
exit "$status"
