#!/usr/bin/env bash
# Client-library compatibility: real Redis clients and lock libraries, unmodified and installed
# from their registries, against a real 3-node Palisade cluster, connected to a follower and
# then to the leader.
#
#   scripts/compat.sh                   everything
#   scripts/compat.sh python node       only the named groups: python, node, rust, cli
#
# Steps:
#   1. installs what is missing: redis-cli and tmux (apt), python3-venv (apt, if venv or
#      ensurepip is missing), Node.js and npm (apt, if missing), then the pinned Python
#      packages into compat/python/.venv and .venv-redis5, `npm ci` in compat/node, and the
#      compat/rust crate's tests (cargo). Each is redone only when its pins change.
#   2. builds Palisade (cargo build --release) and starts a 3-node cluster on 127.0.0.1,
#      client ports COMPAT_BASE_PORT..+2 (default 7379-7381), data in a temporary directory;
#   3. runs every suite against a follower, then against the leader: one line per suite;
#   4. prints the compat matrix (library x version x status) and, last, `N passed, M failed`;
#   5. stops the cluster and removes its data, also on failure or Ctrl-C.
#
# Exits non-zero if any test failed or any suite could not run. Per-suite logs go to
# COMPAT_LOG_DIR (default: a temporary directory, named in the output); the failures of each
# failing suite are also printed. If PALISADE_COMPAT_SUMMARY names a file, the closing line is
# written there too (scripts/test.sh adds it to the total).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

BASE_PORT="${COMPAT_BASE_PORT:-7379}"
SUITE_TIMEOUT="${COMPAT_SUITE_TIMEOUT:-300}"
RUST_TARGET="${COMPAT_RUST_TARGET_DIR:-$HOME/.cache/palisade-compat-rust}"
LOG_DIR="${COMPAT_LOG_DIR:-$(mktemp -d -t palisade-compat.XXXXXX)}"
mkdir -p "$LOG_DIR"
GROUPS_WANTED=("$@")
[[ ${#GROUPS_WANTED[@]} -gt 0 ]] || GROUPS_WANTED=(python node rust cli)
for g in "${GROUPS_WANTED[@]}"; do
    case "$g" in python | node | rust | cli) ;; *) die "unknown group '$g' (python, node, rust, cli)" ;; esac
done
wanted() {
    local g
    for g in "${GROUPS_WANTED[@]}"; do [[ "$g" == "$1" ]] && return 0; done
    return 1
}

# --- dependencies ------------------------------------------------------------------------

PY=compat/python
NODE=compat/node
RUST=compat/rust

# stamp_ok DIR FILE: true if DIR/.palisade-stamp records FILE's current content hash.
stamp_ok() { [[ -f "$1/.palisade-stamp" && "$(cat "$1/.palisade-stamp")" == "$(sha256sum <"$2")" ]]; }
stamp_write() { sha256sum <"$2" >"$1/.palisade-stamp"; }

python_venv() {
    local venv="$1" reqs="$2"
    if stamp_ok "$venv" "$reqs" 2>/dev/null && [[ -x "$venv/bin/pytest" ]]; then return 0; fi
    log "installing $reqs into $venv"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r "$reqs"
    stamp_write "$venv" "$reqs"
}

install_deps() {
    local missing=()
    if wanted cli; then
        command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
        command -v tmux >/dev/null 2>&1 || missing+=(tmux)
    else
        # cluster.sh uses redis-cli to find the leader (it falls back to /dev/tcp without).
        command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
    fi
    if wanted python; then
        command -v python3 >/dev/null 2>&1 || missing+=(python3)
        # The TLS suite's certificates.
        command -v openssl >/dev/null 2>&1 || missing+=(openssl)
        if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then missing+=(python3-venv); fi
    fi
    if wanted node; then
        command -v node >/dev/null 2>&1 || missing+=(nodejs)
        command -v npm >/dev/null 2>&1 || missing+=(npm)
    fi
    [[ ${#missing[@]} -eq 0 ]] || apt_install "${missing[@]}"

    if wanted python; then
        python_venv "$PY/.venv" "$PY/requirements.txt"
        python_venv "$PY/.venv-redis5" "$PY/requirements-redis5.txt"
    fi
    if wanted node; then
        node --version | grep -qE '^v(2[0-9]|[3-9][0-9])\.' ||
            log "warning: Node.js $(node --version) is older than 20; ioredis 6 and node-redis 6 need 20"
        # The stamp lives in node_modules, which npm ci recreates.
        if ! stamp_ok "$NODE/node_modules" "$NODE/package-lock.json" 2>/dev/null; then
            log "npm ci in $NODE"
            (cd "$NODE" && npm ci --no-audit --no-fund --loglevel=error)
            stamp_write "$NODE/node_modules" "$NODE/package-lock.json"
        fi
    fi
    if wanted rust; then
        log "building the compat/rust tests (target $RUST_TARGET)"
        (cd "$RUST" && CARGO_TARGET_DIR="$RUST_TARGET" cargo test --locked --no-run --quiet)
    fi
}

# --- the cluster -------------------------------------------------------------------------

CLUSTER_DIR=""
TLS_DIR=""
# Each node's TLS port is its client port plus this (scripts/cluster.sh).
TLS_OFFSET=100
cluster() {
    PALISADE_NODES=3 PALISADE_BASE_PORT="$BASE_PORT" PALISADE_CLUSTER_DIR="$CLUSTER_DIR" \
        PALISADE_TLS_DIR="$TLS_DIR" PALISADE_TLS_PORT_OFFSET="$TLS_OFFSET" \
        PALISADE_BIN="$CARGO_TARGET_DIR/release/palisade" scripts/cluster.sh "$@"
}
teardown() {
    if [[ -n "$CLUSTER_DIR" ]]; then
        cluster wipe >/dev/null 2>&1 || true
        CLUSTER_DIR=""
    fi
}

# make_tls_files DIR: a CA, and a node and a client certificate it signs (for 127.0.0.1 and
# localhost, usable as server and as client), for the redis-py TLS suite.
make_tls_files() {
    local d="$1" name ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
    mkdir -p "$d"
    openssl req -x509 "${ec[@]}" -days 2 -subj "/CN=palisade compat CA" \
        -keyout "$d/ca.key" -out "$d/ca.crt" -addext "basicConstraints=critical,CA:TRUE" \
        -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
    for name in node client; do
        openssl req "${ec[@]}" -subj "/CN=$name" -keyout "$d/$name.key" -out "$d/$name.csr" 2>/dev/null
        printf '%s\n' "subjectAltName=IP:127.0.0.1,DNS:localhost" \
            "extendedKeyUsage=serverAuth,clientAuth" "basicConstraints=CA:FALSE" >"$d/$name.ext"
        openssl x509 -req -in "$d/$name.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
            -days 2 -extfile "$d/$name.ext" -out "$d/$name.crt" 2>/dev/null
    done
}

start_cluster() {
    local p
    for p in "$BASE_PORT" $((BASE_PORT + 1)) $((BASE_PORT + 2)); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            die "port $p is already in use; set COMPAT_BASE_PORT to a free range"
        fi
    done
    CLUSTER_DIR="$(mktemp -d -t palisade-compat-cluster.XXXXXX)"
    if wanted python; then
        TLS_DIR="$CLUSTER_DIR/tls"
        make_tls_files "$TLS_DIR"
    fi
    trap teardown EXIT
    trap 'teardown; exit 130' INT TERM
    cluster start
}

# role_port ROLE: the client port of the leader, or of a follower.
role_port() {
    local leader="" n _
    # Right after start (or an election) nodes may know a leader id before that node says
    # role:leader itself: poll for up to 10 s.
    for _ in $(seq 1 50); do
        leader="$(cluster leader 2>/dev/null)" && break
        sleep 0.2
    done
    [[ -n "$leader" ]] || return 1
    if [[ "$1" == leader ]]; then
        echo $((BASE_PORT + leader - 1))
        return
    fi
    for n in 1 2 3; do
        [[ "$n" != "$leader" ]] && { echo $((BASE_PORT + n - 1)); return; }
    done
}

# --- running suites ----------------------------------------------------------------------

# counts LOG KIND: print "PASSED FAILED SKIPPED" parsed from a runner's closing lines.
counts() {
    local log="$1" kind="$2"
    case "$kind" in
    pytest)
        # "==== 12 passed, 1 failed, 2 skipped, 1 error in 3.2s ===="
        awk '/[0-9]+ (passed|failed|errors?|skipped|deselected|warnings?).* in [0-9.]+s/ { line = $0 } END {
            p = f = s = 0; n = split(line, w, /[ ,=]+/)
            for (i = 2; i <= n; i++) {
                if (w[i] ~ /^passed/) p = w[i-1]; if (w[i] ~ /^failed/) f += w[i-1]
                if (w[i] ~ /^errors?$/) f += w[i-1]; if (w[i] ~ /^skipped/) s = w[i-1] }
            print p + 0, f + 0, s + 0 }' "$log"
        ;;
    tap)
        awk '/^# pass / { p = $3 } /^# fail / { f += $3 } /^# cancelled / { f += $3 }
             /^# skipped / { s = $3 } /^# todo / { s += $3 } END { print p + 0, f + 0, s + 0 }' "$log"
        ;;
    cargo)
        awk '/^test result:/ { for (i = 1; i <= NF; i++) {
                if ($(i) ~ /^passed;?$/) p += $(i-1); if ($(i) ~ /^failed;?$/) f += $(i-1)
                if ($(i) ~ /^ignored;?$/) s += $(i-1) } } END { print p + 0, f + 0, s + 0 }' "$log"
        ;;
    plain)
        awk '/^[0-9]+ passed, [0-9]+ failed$/ { p = $1; f = $3 } END { print p + 0, f + 0, 0 }' "$log"
        ;;
    esac
}

# failures LOG KIND: the lines that name failing tests, for the console.
failures() {
    case "$2" in
    pytest) grep -E '^(FAILED|ERROR|SKIPPED) ' "$1" || true ;;
    tap) grep -E '^\s*not ok ' "$1" | grep -v ' - /' || true ;;
    cargo) grep -E '^test .* FAILED$|panicked at|^thread .* panicked' "$1" | head -40 || true ;;
    plain) grep -E '^not ok |^#   ' "$1" || true ;;
    esac
}

TOTAL_PASSED=0
TOTAL_FAILED=0
TOTAL_SKIPPED=0
ROWS=()          # "group|library|version" in run order
declare -A RESULT # [target|row] = "passed failed skipped"

# run_suite TARGET PORT GROUP LIBRARY VERSION KIND DIR COMMAND...
run_suite() {
    local target="$1" port="$2" group="$3" library="$4" version="$5" kind="$6" dir="$7"
    shift 7
    local row="$group|$library|$version"
    local log
    log="$LOG_DIR/$target-$group-$(echo "$library-$version" | tr -c 'A-Za-z0-9.=-' '_').log"
    [[ " ${ROWS[*]-} " == *" $row "* ]] || ROWS+=("$row")
    local rc=0 started=$SECONDS note=""
    (cd "$dir" && COMPAT_HOST=127.0.0.1 COMPAT_PORT="$port" timeout --kill-after=10 "$SUITE_TIMEOUT" "$@") \
        >"$log" 2>&1 || rc=$?
    local passed failed skipped
    read -r passed failed skipped < <(counts "$log" "$kind")
    # A suite that crashed, timed out or ran nothing counts as one failure.
    if [[ "$rc" -ne 0 && "$failed" -eq 0 ]] || [[ $((passed + failed)) -eq 0 ]]; then
        failed=$((failed + 1))
        note="exit status $rc$([[ $rc -eq 124 ]] && echo ", timed out after ${SUITE_TIMEOUT}s"): counted as 1 failure"
    fi
    RESULT["$target|$row"]="$passed $failed $skipped"
    TOTAL_PASSED=$((TOTAL_PASSED + passed))
    TOTAL_FAILED=$((TOTAL_FAILED + failed))
    TOTAL_SKIPPED=$((TOTAL_SKIPPED + skipped))
    printf '%-8s %-6s %-44s %3d passed, %d failed%s  (%ds)\n' "$target" "$group" "$library $version" \
        "$passed" "$failed" "$([[ $skipped -gt 0 ]] && echo ", $skipped skipped")" $((SECONDS - started))
    if [[ "$failed" -gt 0 || "$skipped" -gt 0 ]]; then
        failures "$log" "$kind" | sed 's/^/    /'
        [[ -z "$note" ]] || echo "    $note"
        echo "    log: $log"
    fi
}

py_version() { "$PY/$1/bin/python" -c "import importlib.metadata as m; print(m.version('$2'))"; }
node_version() { node -p "require('./$NODE/node_modules/$1/package.json').version"; }
rust_version() { awk -v n="$1" '$0 == "name = \"" n "\"" { getline; gsub(/version = |"/, ""); print; exit }' "$RUST/Cargo.lock"; }

run_target() {
    local target="$1" port="$2" v
    if wanted python; then
        v="$(py_version .venv redis)"
        run_suite "$target" "$port" python "redis-py (RESP3, default)" "$v" pytest "$PY" \
            env COMPAT_PROTOCOL=default .venv/bin/pytest tests/test_redis_py.py
        run_suite "$target" "$port" python "redis-py (protocol=2)" "$v" pytest "$PY" \
            env COMPAT_PROTOCOL=2 .venv/bin/pytest tests/test_redis_py.py
        run_suite "$target" "$port" python "redis-py (RESP2, default)" "$(py_version .venv-redis5 redis)" pytest "$PY" \
            env COMPAT_PROTOCOL=default .venv-redis5/bin/pytest tests/test_redis_py.py
        run_suite "$target" "$port" python "redis-py TLS (ssl=True)" "$v" pytest "$PY" \
            env COMPAT_TLS_PORT=$((port + TLS_OFFSET)) COMPAT_TLS_DIR="$TLS_DIR" \
            .venv/bin/pytest tests/test_tls.py
        run_suite "$target" "$port" python "pottery Redlock" "$(py_version .venv pottery)" pytest "$PY" \
            .venv/bin/pytest tests/test_pottery.py
        run_suite "$target" "$port" python "python-redis-lock" "$(py_version .venv python-redis-lock)" pytest "$PY" \
            .venv/bin/pytest tests/test_python_redis_lock.py
        run_suite "$target" "$port" python "SQLite fencing example (redis-py)" "$v" pytest "$PY" \
            .venv/bin/pytest tests/test_sql_fencing.py
        run_suite "$target" "$port" python "fenced-lock recipe (redis-py, RESP3)" "$v" pytest "$PY" \
            env COMPAT_PROTOCOL=default .venv/bin/pytest tests/test_fenced_lock_recipe.py
        run_suite "$target" "$port" python "fenced-lock recipe (redis-py, RESP2)" "$(py_version .venv-redis5 redis)" pytest "$PY" \
            env COMPAT_PROTOCOL=default .venv-redis5/bin/pytest tests/test_fenced_lock_recipe.py
        run_suite "$target" "$port" python "redis-py RedisCluster (cluster mode)" "$v" pytest "$PY" \
            .venv/bin/pytest tests/test_redis_cluster.py
        run_suite "$target" "$port" python "shared-lock and semaphore recipes (redis-py)" "$v" pytest "$PY" \
            .venv/bin/pytest tests/test_shared_locks_recipe.py
        run_suite "$target" "$port" python "multi-key lock recipe (redis-py)" "$v" pytest "$PY" \
            .venv/bin/pytest tests/test_multi_lock_recipe.py
    fi
    if wanted node; then
        run_suite "$target" "$port" node "ioredis (RESP2)" "$(node_version ioredis5)" tap "$NODE" \
            node --test --test-reporter=tap test/ioredis5.test.mjs
        run_suite "$target" "$port" node "ioredis (RESP3)" "$(node_version ioredis6)" tap "$NODE" \
            node --test --test-reporter=tap test/ioredis6.test.mjs
        run_suite "$target" "$port" node "node-redis (RESP2)" "$(node_version redis4)" tap "$NODE" \
            node --test --test-reporter=tap test/node-redis4.test.mjs
        run_suite "$target" "$port" node "node-redis (RESP3)" "$(node_version redis6)" tap "$NODE" \
            node --test --test-reporter=tap test/node-redis6.test.mjs
        run_suite "$target" "$port" node "redlock (on ioredis 5)" "$(node_version redlock)" tap "$NODE" \
            node --test --test-reporter=tap test/redlock.test.mjs
        run_suite "$target" "$port" node "fenced-lock recipe (ioredis, RESP2)" "$(node_version ioredis5)" tap "$NODE" \
            env COMPAT_IOREDIS=ioredis5 node --test --test-reporter=tap test/fenced-lock-recipe.test.mjs
        run_suite "$target" "$port" node "fenced-lock recipe (ioredis, RESP3)" "$(node_version ioredis6)" tap "$NODE" \
            env COMPAT_IOREDIS=ioredis6 node --test --test-reporter=tap test/fenced-lock-recipe.test.mjs
        run_suite "$target" "$port" node "ioredis Cluster (cluster mode)" "$(node_version ioredis5)" tap "$NODE" \
            node --test --test-reporter=tap test/ioredis-cluster.test.mjs
        run_suite "$target" "$port" node "shared-lock and semaphore recipes (ioredis 5)" "$(node_version ioredis5)" tap "$NODE" \
            env COMPAT_IOREDIS=ioredis5 node --test --test-reporter=tap test/shared-locks-recipe.test.mjs
    fi
    if wanted rust; then
        run_suite "$target" "$port" rust "redis crate (Script)" "$(rust_version redis)" cargo "$RUST" \
            env CARGO_TARGET_DIR="$RUST_TARGET" RUST_BACKTRACE=0 cargo test --locked --quiet --test redis_crate
        run_suite "$target" "$port" rust "rslock" "$(rust_version rslock)" cargo "$RUST" \
            env CARGO_TARGET_DIR="$RUST_TARGET" RUST_BACKTRACE=0 cargo test --locked --quiet --test rslock
        run_suite "$target" "$port" rust "fenced-lock recipe (redis crate)" "$(rust_version redis)" cargo "$RUST" \
            env CARGO_TARGET_DIR="$RUST_TARGET" RUST_BACKTRACE=0 cargo test --locked --quiet --test fenced_lock_recipe
        run_suite "$target" "$port" rust "redis crate cluster-async (cluster mode)" "$(rust_version redis)" cargo "$RUST" \
            env CARGO_TARGET_DIR="$RUST_TARGET" RUST_BACKTRACE=0 cargo test --locked --quiet --test redis_cluster
    fi
    if wanted cli; then
        v="$(redis-cli --version | awk '{ print $2 }')"
        run_suite "$target" "$port" cli "redis-cli (incl. -3, interactive)" "$v" plain compat/cli ./test.sh
    fi
}

status_of() {
    local passed failed skipped
    [[ -n "${RESULT[$1]-}" ]] || { echo "not run"; return; }
    read -r passed failed skipped <<<"${RESULT[$1]}"
    if [[ "$failed" -eq 0 ]]; then
        echo "pass ($passed)$([[ $skipped -gt 0 ]] && echo ", $skipped skipped")"
    else
        echo "FAIL ($failed of $((passed + failed)))"
    fi
}

print_matrix() {
    local row group library version
    echo
    echo "Compat matrix (follower / leader):"
    echo
    echo "| suite | library | version | via a follower | via the leader |"
    echo "|---|---|---|---|---|"
    for row in "${ROWS[@]}"; do
        IFS='|' read -r group library version <<<"$row"
        echo "| $group | $library | $version | $(status_of "follower|$row") | $(status_of "leader|$row") |"
    done
    echo
}

# --- main --------------------------------------------------------------------------------

phase deps install_deps
phase build cargo build --release --quiet
start_cluster
log "logs: $LOG_DIR"

for target in follower leader; do
    port="$(role_port "$target")" || die "no leader in the compat cluster"
    echo
    echo "==> suites against the $target (127.0.0.1:$port)"
    run_target "$target" "$port"
done

print_matrix
teardown
line="$TOTAL_PASSED passed, $TOTAL_FAILED failed"
[[ "$TOTAL_SKIPPED" -eq 0 ]] || line+=", $TOTAL_SKIPPED skipped"
[[ -z "${PALISADE_COMPAT_SUMMARY:-}" ]] || echo "compat: $line" >"$PALISADE_COMPAT_SUMMARY"
echo "$line"
[[ "$TOTAL_FAILED" -eq 0 ]]
