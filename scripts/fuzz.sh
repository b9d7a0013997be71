#!/usr/bin/env bash
# The fuzz targets in fuzz/ (docs/fuzzing.md), run with cargo-fuzz (libFuzzer).
#
#   scripts/fuzz.sh                        every target, 10 minutes each
#   scripts/fuzz.sh lua 300                one target for 300 s ("all" for every target)
#   scripts/fuzz.sh build                  only build the targets
#   scripts/fuzz.sh reproduce lua FILE     run one input (a crash from fuzz/artifacts/)
#   scripts/fuzz.sh seeds                  rewrite the binary seeds (after a format change)
#
# Prints, per target: executions, exec/s, coverage, corpus size and whether it crashed; a
# crash's input lands in fuzz/artifacts/TARGET/ and fails the script. The build links the
# RocksDB of the release build (see fuzz_env in scripts/lib.sh), so run `cargo build
# --release` once first. The test command runs every target for about 12 s
# (scripts/check.sh); this is the long run.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
ensure_cargo_fuzz

case "${1:-all}" in
build)
    fuzz_build
    exit
    ;;
reproduce)
    [[ $# -eq 3 ]] || die "usage: scripts/fuzz.sh reproduce TARGET FILE"
    fuzz_env
    exec cargo fuzz run --debug-assertions --target-dir "$FUZZ_TARGET_DIR" "$2" "$3"
    ;;
seeds)
    # `cargo fuzz build` builds the seed writer too, with the targets' flags.
    fuzz_build
    "$FUZZ_TARGET_DIR/$(rustc -vV | sed -n 's/^host: //p')/release/make_seeds" fuzz/corpus
    exit
    ;;
all) targets=("${FUZZ_TARGETS[@]}") ;;
*)
    [[ " ${FUZZ_TARGETS[*]} " == *" $1 "* ]] || die "unknown target '$1' (targets: ${FUZZ_TARGETS[*]})"
    targets=("$1")
    ;;
esac
secs="${2:-600}"

fuzz_build
failed=0
for target in "${targets[@]}"; do
    log "fuzzing $target for ${secs}s"
    fuzz_run "$target" "$secs" || failed=$((failed + 1))
done
log "fuzz: $((${#targets[@]} - failed)) passed, $failed failed"
[[ "$failed" -eq 0 ]]
