#!/usr/bin/env bash
# The read-only gate, the same one CI runs: formatting, lints, then every test.
#
#   scripts/check.sh                 fmt --check, clippy -D warnings, cargo test --release
#   scripts/check.sh fenced          extra arguments go to `cargo test` (here: a name filter)
#
# It changes nothing in the tree; scripts/fix.sh applies the fixes that fmt and clippy can
# make. It installs nothing either: scripts/test.sh installs the dependencies, then calls this.
#
# Everything uses the release profile, so RocksDB's C++ is compiled once for lints, tests and
# runs alike. The target directory is $CARGO_TARGET_DIR (default ~/.cache/palisade-target).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

has_cargo_subcommand rustfmt || die "cargo fmt is missing: run 'rustup component add rustfmt' (scripts/test.sh does it)"
has_cargo_subcommand clippy || die "cargo clippy is missing: run 'rustup component add clippy' (scripts/test.sh does it)"
export RUST_BACKTRACE="${RUST_BACKTRACE:-1}"
log "CARGO_TARGET_DIR=$CARGO_TARGET_DIR"

phase fmt cargo fmt --all --check
phase clippy cargo clippy --release --workspace --all-targets -- -D warnings
# Unit tests, the openraft storage suite, and the integration binary `it` (tests/it/).
TEST_LOG="$(mktemp)"
trap 'rm -f "$TEST_LOG"' EXIT
run_tests() {
    cargo test --release "$@" 2>&1 | tee "$TEST_LOG"
    return "${PIPESTATUS[0]}"
}
phase test run_tests "$@"

report "$0"

# One plain closing line summing every test binary's result (cargo prints one per binary).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i) ~ /^passed;?$/) p += $(i-1); if ($(i) ~ /^failed;?$/) f += $(i-1) } }
     END { printf "cargo: %d passed, %d failed\n", p, f }' "$TEST_LOG" | tee "${PALISADE_SUMMARY:-/dev/null}"
