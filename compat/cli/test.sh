#!/usr/bin/env bash
# redis-cli against one Palisade node: non-interactive (RESP2, -3, --pipe, -x, stdin), and the
# interactive prompt under tmux, which reads COMMAND DOCS at start (summary, since and group of
# every command; no argument lists) and must not crash.
#
#   COMPAT_HOST=127.0.0.1 COMPAT_PORT=7380 compat/cli/test.sh
#
# Prints one `ok - NAME` or `not ok - NAME` line per check, then `N passed, M failed`.
# Exits non-zero if any check failed. Needs redis-cli and tmux (scripts/compat.sh installs them).
set -uo pipefail

HOST="${COMPAT_HOST:-127.0.0.1}"
PORT="${COMPAT_PORT:-6379}"
RUN="$(od -An -N4 -tx4 /dev/urandom | tr -d ' ')"
K="compat:$RUN:cli"
PASSED=0
FAILED=0

cli() { redis-cli -h "$HOST" -p "$PORT" "$@"; }

# check NAME EXPECTED ACTUAL: exact comparison.
check() {
    if [[ "$2" == "$3" ]]; then
        PASSED=$((PASSED + 1))
        echo "ok - $1"
    else
        FAILED=$((FAILED + 1))
        echo "not ok - $1"
        printf '#   expected: %q\n#   actual:   %q\n' "$2" "$3"
    fi
}

# check_match NAME REGEX ACTUAL: extended regular expression match (whole output, multi-line).
check_match() {
    if [[ "$3" =~ $2 ]]; then
        PASSED=$((PASSED + 1))
        echo "ok - $1"
    else
        FAILED=$((FAILED + 1))
        echo "not ok - $1"
        printf '#   expected to match: %s\n#   actual: %q\n' "$2" "$3"
    fi
}

echo "# redis-cli: $(redis-cli --version), node $HOST:$PORT"

# --- non-interactive, RESP2 -------------------------------------------------------------
check "PING" "PONG" "$(cli PING)"
check "SET" "OK" "$(cli SET "$K:s" hello)"
check "GET" "hello" "$(cli GET "$K:s")"
check "GET of a missing key prints nothing in raw mode" "" "$(cli GET "$K:missing")"
check "--no-raw GET of a missing key" "(nil)" "$(cli --no-raw GET "$K:missing")"
check "SET NX PX on a held key is nil" "(nil)" "$(cli --no-raw SET "$K:s" x NX PX 1000)"
check "INCR repeated with -r" $'1\n2\n3' "$(cli -r 3 INCR "$K:n")"
check_match "INFO SERVER has redis_version on a later line" $'^# Server\r?\n(.*\n)*redis_version:7\.2\.0' "$(cli INFO SERVER)"
check_match "unknown command error text" "^ERR unknown command 'NOSUCH', with args beginning with: 'a'" "$(cli NOSUCH a 2>&1)"
check "commands from stdin" $'PONG\nv1' "$(printf 'PING\nSET %s v1\nGET %s\n' "$K:in" "$K:in" | cli | sed -n '1p;3p')"
check "-x takes the last argument from stdin (binary)" "OK" "$(printf 'a\0b\xff' | cli -x SET "$K:bin")"
check "binary value round trip" "$(printf 'a\0b\xff' | od -An -tx1)" "$(cli --raw GET "$K:bin" | head -c 4 | od -An -tx1)"
check_match "--pipe mass insertion" "errors: 0, replies: 3" \
    "$(printf 'SET %s 1\r\nINCR %s\r\nGET %s\r\n' "$K:pipe" "$K:pipe" "$K:pipe" | cli --pipe 2>&1)"
check "EVAL" "7" "$(cli EVAL "return redis.call('incrby', KEYS[1], ARGV[1])" 1 "$K:eval" 7)"

# --- -3: RESP3 --------------------------------------------------------------------------
check_match "-3 HELLO is a map with proto 3" '3# "proto" => \(integer\) 3' "$(cli -3 --no-raw HELLO)"
check "-3 GET of a missing key" "(nil)" "$(cli -3 --no-raw GET "$K:missing")"
cli SET "$K:lk" owner-x NX PX 10000 >/dev/null
check_match "-3 LOCKINFO is a map" $'^1# "owner" => "owner-x"\n2# "token" => \\(integer\\) [0-9]+\n3# "pttl" => \\(integer\\) [0-9]+$' \
    "$(cli -3 --no-raw LOCKINFO "$K:lk")"

# --- fencing token with redis-cli --------------------------------------------------------
# Acquire as a script would with SET NX PX, then ask for the grant's token with LOCK.
check "acquire with SET NX PX" "OK" "$(cli SET "$K:lock" client-a NX PX 300)"
TOKEN_A="$(cli LOCK "$K:lock" client-a PX 300)"
check_match "LOCK with the same value returns a token" '^[0-9]+$' "$TOKEN_A"
check "FENCEDSET with it" "OK" "$(cli FENCEDSET "$K:res" from-a "$TOKEN_A")"
sleep 0.6
check "after expiry another client acquires" "OK" "$(cli SET "$K:lock" client-b NX PX 10000)"
TOKEN_B="$(cli LOCK "$K:lock" client-b PX 10000)"
check_match "LOCK returns the new grant's token" '^[0-9]+$' "$TOKEN_B"
check "the new token is higher than the old one" yes \
    "$([[ "$TOKEN_A" =~ ^[0-9]+$ && "$TOKEN_B" =~ ^[0-9]+$ && "$TOKEN_B" -gt "$TOKEN_A" ]] && echo yes || echo "no: $TOKEN_B vs $TOKEN_A")"
check "FENCEDSET with the new token" "OK" "$(cli FENCEDSET "$K:res" from-b "$TOKEN_B")"
check_match "the stale writer is rejected" "^FENCED token $TOKEN_A is lower than $TOKEN_B" "$(cli FENCEDSET "$K:res" late-a "$TOKEN_A" 2>&1)"
check "the resource keeps the newer value" "from-b" "$(cli GET "$K:res")"

# --- the fenced-lock recipe (recipes/fenced-lock.sh) -------------------------------------
RECIPE_OUT="$(mktemp -d)"
recipe() { REDIS_HOST="$HOST" REDIS_PORT="$PORT" "$(dirname "$0")/recipes/fenced-lock.sh" "$@"; }
record_loss() { echo "echo \"\$LOST_REASON\" >>$RECIPE_OUT/$1"; }

# 1. Two contenders: B waits in the queue until A's command has exited, then gets a higher
#    token. A's lease (1 s) is shorter than its command (1.5 s): renewal keeps it.
# shellcheck disable=SC2016 # expanded by the job's shell
job='echo "$FENCING_TOKEN $(date +%s%3N)"; sleep 1.5; date +%s%3N'
ON_LOST="$(record_loss lost1)" recipe "$K:rl" 1000 2000 -- bash -c "$job" >"$RECIPE_OUT/a" &
A=$!
sleep 0.5
ON_LOST="$(record_loss lost1)" recipe "$K:rl" 1000 5000 -- bash -c "$job" >"$RECIPE_OUT/b" &
B=$!
sleep 0.5
check_match "recipe: LOCKINFO counts the waiting contender" ' waiters 1( |$)' "$(cli LOCKINFO "$K:rl" | paste -sd' ')"
wait "$A"
A_RC=$?
wait "$B"
check "recipe: both contenders ran their command" "0 0" "$A_RC $?"
read -r TA _ <"$RECIPE_OUT/a"
EA="$(sed -n 2p "$RECIPE_OUT/a")"
read -r TB SB <"$RECIPE_OUT/b"
check "recipe: the second token is higher" yes "$( ((${TB:-0} > ${TA:-0} && ${TA:-0} > 0)) && echo yes || echo "no: $TB vs $TA")"
check "recipe: the second starts after the first has finished" yes \
    "$( ((${SB:-0} >= ${EA:-1})) && echo yes || echo "no: start $SB, end of the first $EA")"
check "recipe: a release is not a loss" "" "$(cat "$RECIPE_OUT/lost1" 2>/dev/null)"

# 2. A stalls (RENEW_MS=0: no renewal) for 3 s under a 1 s lease. It is told of the loss
#    (ON_LOST, from the lock_expired event); B, queued, gets the lock and writes; A's late
#    write with its old token is rejected.
export RES="$K:recipe-res"
# shellcheck disable=SC2016 # fenced_set VALUE: the job's FENCEDSET of VALUE, as shell text
fenced_set() { echo 'redis-cli -h "$REDIS_HOST" -p "$REDIS_PORT" FENCEDSET "$RES" '"$1"' "$FENCING_TOKEN" 2>&1'; }
RENEW_MS=0 ON_LOST="$(record_loss lost2)" recipe "$K:rs" 1000 1000 -- \
    bash -c "echo \"\$FENCING_TOKEN\"; $(fenced_set from-a); sleep 3; $(fenced_set late-a)" >"$RECIPE_OUT/a2" &
A=$!
sleep 0.3
recipe "$K:rs" 10000 5000 -- bash -c "echo \"\$FENCING_TOKEN\"; $(fenced_set from-b)" >"$RECIPE_OUT/b2"
check "recipe: the queued contender got the lock and wrote" "OK" "$(sed -n 2p "$RECIPE_OUT/b2")"
wait "$A"
TA="$(sed -n 1p "$RECIPE_OUT/a2")"
TB="$(sed -n 1p "$RECIPE_OUT/b2")"
check "recipe: the holder wrote before it stalled" "OK" "$(sed -n 2p "$RECIPE_OUT/a2")"
check "recipe: the stalled holder's loss callback ran once" "lock_expired" "$(cat "$RECIPE_OUT/lost2" 2>/dev/null)"
check_match "recipe: its late write is rejected" "^FENCED token $TA is lower than $TB\$" "$(sed -n 3p "$RECIPE_OUT/a2")"
check "recipe: the resource keeps the newer value" "from-b" "$(cli GET "$RES")"
rm -rf "$RECIPE_OUT"

# --- interactive mode under tmux ---------------------------------------------------------
# wait_for SESSION REGEX: poll the pane until it matches (5 s).
wait_for() {
    local _ pane
    for _ in $(seq 1 50); do
        pane="$(tmux capture-pane -p -t "$1" 2>/dev/null)" || return 1
        [[ "$pane" =~ $2 ]] && return 0
        sleep 0.1
    done
    return 1
}

# expect_screen SESSION REGEX NAME SHOWN: a check that passes when the pane matches REGEX.
expect_screen() {
    if wait_for "$1" "$2"; then
        check "$3" yes yes
    else
        check "$3" "$4" "$(tmux capture-pane -p -t "$1")"
    fi
}

interactive() {
    local name="$1" flags="$2" session="compat-cli-$$-$1" pane
    tmux kill-session -t "$session" 2>/dev/null
    # The shell after redis-cli prints its exit status and keeps the pane open, so that a
    # crash (an assertion, a signal) stays on the screen.
    tmux new-session -d -s "$session" -x 160 -y 40 \
        "redis-cli -h $HOST -p $PORT $flags; echo \"[redis-cli exited with status \$?]\"; sleep 30"
    # (capture-pane drops the prompt's trailing space)
    if wait_for "$session" "$HOST:$PORT>"; then
        check "interactive $name: prompt after COMMAND DOCS" yes yes
    else
        check "interactive $name: prompt after COMMAND DOCS" "a prompt" "$(tmux capture-pane -p -t "$session")"
        tmux kill-session -t "$session" 2>/dev/null
        return
    fi
    tmux send-keys -t "$session" "PING" Enter
    expect_screen "$session" "PONG" "interactive $name: PING" PONG
    tmux send-keys -t "$session" "LOCK $K:i-$name me PX 10000" Enter
    expect_screen "$session" "\(integer\) [0-9]+" "interactive $name: LOCK" "(integer) N"
    tmux send-keys -t "$session" "LOCKINFO $K:i-$name" Enter
    if [[ "$flags" == *-3* ]]; then
        expect_screen "$session" '1# "owner" => "me"' "interactive $name: LOCKINFO as a map" '1# "owner" => "me"'
    else
        expect_screen "$session" '1\) "owner"' "interactive $name: LOCKINFO as an array" '1) "owner"'
    fi
    # Type each command after the previous reply: linenoise discards keys typed while
    # redis-cli waits for a reply (it re-enters raw mode with TCSAFLUSH).
    tmux send-keys -t "$session" "FENCEDSET $K:i-res-$name v 1" Enter
    wait_for "$session" $'v 1\nOK'
    tmux send-keys -t "$session" "FENCEDSET $K:i-res-$name v 0" Enter
    expect_screen "$session" "\(error\) FENCED token 0 is lower than 1" "interactive $name: FENCED error" "(error) FENCED ..."
    tmux send-keys -t "$session" "quit" Enter
    expect_screen "$session" "redis-cli exited with status 0" "interactive $name: quit, status 0" "[redis-cli exited with status 0]"
    pane="$(tmux capture-pane -p -t "$session")"
    if [[ "$pane" == *"Assertion"* || "$pane" == *"Segmentation"* ]]; then
        check "interactive $name: no assertion or crash" "no assertion or crash" "$pane"
    else
        check "interactive $name: no assertion or crash" yes yes
    fi
    tmux kill-session -t "$session" 2>/dev/null
}

# A private tmux server, so that a developer's sessions are never touched.
export TMUX_TMPDIR
TMUX_TMPDIR="$(mktemp -d)"
unset TMUX
# A session that outlives each test's own: otherwise killing the first test's session stops the
# server, and the second test's new-session can reach it while it exits ("server exited
# unexpectedly").
tmux new-session -d -s "compat-cli-$$-keep" "sleep 600"
interactive resp2 ""
interactive resp3 "-3"
tmux kill-server 2>/dev/null
rm -rf "$TMUX_TMPDIR"

echo "$PASSED passed, $FAILED failed"
[[ "$FAILED" -eq 0 ]]
