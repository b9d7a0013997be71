#!/usr/bin/env bash
# The read-only gate, the same one CI runs: formatting, lints, then every test.
#
#   scripts/check.sh                 fmt --check, clippy -D warnings, cargo test --release,
#                                    a short run of every fuzz target (PALISADE_FUZZ=0: none)
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

# FUZZ: a short run of every fuzz target (fuzz/, docs/fuzzing.md), PALISADE_FUZZ_SECS
# (default 12) seconds each, seeded from fuzz/corpus/; a crash fails it. scripts/fuzz.sh is
# the long run. Its line below counts targets; a failure still prints the totals.
FUZZ_LINE="$(mktemp)"
trap 'rm -f "$TEST_LOG" "$FUZZ_LINE"' EXIT
run_fuzz() {
    local target failed=0
    has_cargo_subcommand fuzz || die "cargo fuzz is missing: run 'cargo install cargo-fuzz --locked' (scripts/test.sh does it)"
    fuzz_build
    for target in "${FUZZ_TARGETS[@]}"; do
        fuzz_run "$target" "${PALISADE_FUZZ_SECS:-12}" || failed=$((failed + 1))
    done
    echo "fuzz: $((${#FUZZ_TARGETS[@]} - failed)) passed, $failed failed" >"$FUZZ_LINE"
    [[ "$failed" -eq 0 ]]
}
fuzz_rc=0
if [[ $# -gt 0 ]]; then
    log "fuzz: not run, because a cargo test filter was given ($*); run scripts/fuzz.sh for it"
elif [[ "${PALISADE_FUZZ:-1}" == 0 ]]; then
    log "fuzz: not run, because PALISADE_FUZZ=0 is set"
else
    PHASE_KEEP_GOING=1 phase fuzz run_fuzz || fuzz_rc=$?
    # A run that died before its line (the build failed) counts as one failure.
    [[ -s "$FUZZ_LINE" ]] || echo "fuzz: 0 passed, 1 failed" >"$FUZZ_LINE"
fi

report "$0"

# One plain closing line summing every test binary's result (cargo prints one per binary),
# then the fuzz targets' line.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i) ~ /^passed;?$/) p += $(i-1); if ($(i) ~ /^failed;?$/) f += $(i-1) } }
     END { printf "cargo: %d passed, %d failed\n", p, f }' "$TEST_LOG" | tee "${PALISADE_SUMMARY:-/dev/null}"
tee -a "${PALISADE_SUMMARY:-/dev/null}" <"$FUZZ_LINE"
exit "$fuzz_rc"
