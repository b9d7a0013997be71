#!/usr/bin/env bash
# Apply the fixes that clippy and rustfmt can make, then check with scripts/check.sh.
#
# It edits files in place (uncommitted changes included), so review the diff afterwards.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

# clippy first: its fixes are not always formatted, and fmt runs last.
phase clippy cargo clippy --release --workspace --all-targets --fix --allow-dirty --allow-staged
phase fmt cargo fmt --all

report "$0"
log "done; review the diff, then run scripts/check.sh"
