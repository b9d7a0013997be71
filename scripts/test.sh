#!/usr/bin/env bash
# The test command: install what the tests need, then run the gate (scripts/check.sh).
#
#   scripts/test.sh                  everything; exits non-zero on any failure
#   scripts/test.sh fenced           extra arguments go to `cargo test` (here: a name filter)
#
# Installs, only when missing: clang and libclang-dev (RocksDB's bindings), redis-server and
# redis-tools (the differential tests compare against a real Redis), prometheus-redis-exporter
# (tests/it/tools.rs), python3, the rustfmt
# and clippy components, and cargo-fuzz (`cargo install`, for the short fuzz run). Packages
# come from apt-get, as root or through sudo.
#
# .ci/run calls this script; CI runs it as root on a clean clone, with CI=true and no stdin.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

install_test_deps() {
    ensure_build_deps
    ensure_redis
    # tests/it/tools.rs scrapes a node with the Prometheus exporter for Redis.
    command -v prometheus-redis-exporter >/dev/null 2>&1 || apt_install prometheus-redis-exporter
    ensure_python
    ensure_rust_components
    # The short fuzz run in scripts/check.sh (skipped, and not installed, with PALISADE_FUZZ=0).
    [[ "${PALISADE_FUZZ:-1}" == 0 ]] || ensure_cargo_fuzz
}

phase deps install_test_deps
PALISADE_SUMMARY="$(mktemp)"
PALISADE_COMPAT_SUMMARY="$(mktemp)"
export PALISADE_SUMMARY PALISADE_COMPAT_SUMMARY
trap 'rm -f "$PALISADE_SUMMARY" "$PALISADE_COMPAT_SUMMARY"' EXIT
phase check scripts/check.sh "$@"

# COMPAT: real client libraries (redis-py, pottery, python-redis-lock, ioredis, node-redis,
# redlock, the Rust redis crate, rslock, redis-cli) against a 3-node cluster, via a follower
# and via the leader. It installs its own dependencies. A failure here still prints the total
# below, then fails the command.
compat_rc=0
if [[ $# -gt 0 ]]; then
    log "compat: not run, because a cargo test filter was given ($*); run scripts/compat.sh for it"
elif [[ "${PALISADE_COMPAT:-1}" == 0 ]]; then
    log "compat: not run, because PALISADE_COMPAT=0 is set"
else
    PHASE_KEEP_GOING=1 phase compat scripts/compat.sh || compat_rc=$?
    # A compat run that died before its closing line counts as one failure.
    [[ -s "$PALISADE_COMPAT_SUMMARY" ]] || echo "compat: 0 passed, 1 failed" >"$PALISADE_COMPAT_SUMMARY"
fi

report "$0"
# The closing line that counts: the total of every test run above.
cat "$PALISADE_SUMMARY" "$PALISADE_COMPAT_SUMMARY"
awk '{ for (i = 1; i <= NF; i++) { if ($(i) ~ /^passed,?$/) p += $(i-1); if ($(i) ~ /^failed,?$/) f += $(i-1) } }
     END { printf "total: %d passed, %d failed\n", p, f }' "$PALISADE_SUMMARY" "$PALISADE_COMPAT_SUMMARY"
exit "$compat_rc"
