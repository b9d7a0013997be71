#!/usr/bin/env bash
# The long run of the lock model (src/store/lock_model.rs): the property test with many more
# histories than `cargo test` runs (400), then the lock_apply fuzz target.
#
#   scripts/model.sh [CASES] [FUZZ_SECS]      defaults: 100000 histories, 600 s of fuzzing
#
# Prints the property test's result line and the fuzz run's summary; exits non-zero on a
# violation (the failing history is printed, shrunk by proptest, or saved by libFuzzer under
# fuzz/artifacts/lock_apply/). docs/reliability.md records the figures of the last long run.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

cases="${1:-100000}"
secs="${2:-600}"
log "lock model: $cases histories"
start=$SECONDS
PALISADE_MODEL_CASES="$cases" cargo test --release -p palisade --lib -- lock_model 2>&1 | grep -E '^test |test result'
log "lock model: $((SECONDS - start)) s"
if [[ "$secs" -gt 0 ]]; then
    scripts/fuzz.sh lock_apply "$secs"
fi
