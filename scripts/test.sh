#!/usr/bin/env bash
# The test command: install what the tests need, then run the gate (scripts/check.sh).
#
#   scripts/test.sh                  everything; exits non-zero on any failure
#   scripts/test.sh fenced           extra arguments go to `cargo test` (here: a name filter)
#
# Installs, only when missing: clang and libclang-dev (RocksDB's bindings), redis-server and
# redis-tools (the differential tests compare against a real Redis), python3, and the rustfmt
# and clippy components. Packages come from apt-get, as root or through sudo.
#
# .ci/run calls this script; CI runs it as root on a clean clone, with CI=true and no stdin.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

install_test_deps() {
    ensure_build_deps
    ensure_redis
    ensure_python
    ensure_rust_components
}

phase deps install_test_deps
PALISADE_SUMMARY="$(mktemp)"
export PALISADE_SUMMARY
trap 'rm -f "$PALISADE_SUMMARY"' EXIT
phase check scripts/check.sh "$@"

# -----------------------------------------------------------------------------------------
# COMPAT: client-library compatibility suite (added by a later issue).
# scripts/compat.sh will drive real client libraries (redis-py, node-redis, the Rust redis
# crate, redis-cli) against a local cluster. When it lands, enable it here so that this
# command, and therefore CI, runs it:
#
#   phase compat scripts/compat.sh
# -----------------------------------------------------------------------------------------

report "$0"
# The closing line that counts: the total of every test run above.
cat "$PALISADE_SUMMARY"
