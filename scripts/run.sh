#!/usr/bin/env bash
# Build Palisade (release profile) and start it. Arguments go to `palisade` unchanged:
#
#   scripts/run.sh                          one-node cluster on 127.0.0.1:6379, data in ./data
#   scripts/run.sh --port 6380 --dir /tmp/p
#   scripts/run.sh --help
#
# Installs clang and libclang-dev with apt-get first if they are missing (RocksDB's bindings
# need them). Relative paths (./data, --config FILE) are relative to where you run this.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_build_deps

if [[ ! -x "$CARGO_TARGET_DIR/release/palisade" ]]; then
    log "first build: compiling RocksDB from source takes about 20 minutes on 2 cores"
fi
log "cargo build --release (CARGO_TARGET_DIR=$CARGO_TARGET_DIR)"
# --manifest-path rather than cd, so that ./data lands in the caller's directory.
cargo build --release --manifest-path "$ROOT/Cargo.toml"

exec "$CARGO_TARGET_DIR/release/palisade" "$@"
