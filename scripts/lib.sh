# shellcheck shell=bash
# Shared helpers for scripts/*.sh. Source it; do not run it.
#
# It sets ROOT (the repository root), finds cargo, points CARGO_TARGET_DIR outside the clone
# (unless the caller set it), and provides: log/die, as_root, apt_install, the ensure_*
# dependency installers, and phase/report for timed steps.

# The repository root, whatever the caller's working directory.
# shellcheck disable=SC2034  # used by the scripts that source this file
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

log() { printf '[palisade] %s\n' "$*" >&2; }
die() {
    printf '[palisade] error: %s\n' "$*" >&2
    exit 1
}

# --- cargo and the target directory ------------------------------------------------------

# CI shells and `sudo` often start without ~/.cargo/bin on PATH.
if ! command -v cargo >/dev/null 2>&1 && [[ -x "${HOME:-}/.cargo/bin/cargo" ]]; then
    PATH="$HOME/.cargo/bin:$PATH"
    export PATH
fi
command -v cargo >/dev/null 2>&1 ||
    die "cargo not found. Install Rust 1.88 or later with rustup (https://rustup.rs), then rerun."

# Outside the clone, so that repeated runs (and CI runs of fresh clones on one machine) reuse
# the compiled RocksDB instead of rebuilding it, which takes about 20 minutes on 2 cores.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${HOME:?HOME is not set; set CARGO_TARGET_DIR}/.cache/palisade-target}"
# Scripts change directory; make a relative setting mean the same thing everywhere.
case "$CARGO_TARGET_DIR" in
/*) ;;
*) CARGO_TARGET_DIR="$PWD/$CARGO_TARGET_DIR" ;;
esac

# --- system packages ---------------------------------------------------------------------

# Run a command as root: directly when we are root (as in CI), otherwise through sudo.
as_root() {
    if [[ "$(id -u)" -eq 0 ]]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        die "root is needed to run '$*'; rerun as root, or install the packages yourself"
    fi
}

# Install Debian/Ubuntu packages. `apt-get update` runs at most once per script.
APT_UPDATED=""
apt_install() {
    command -v apt-get >/dev/null 2>&1 ||
        die "missing packages ($*), and apt-get is not available; install them yourself and rerun"
    log "installing system packages: $*"
    if [[ -z "$APT_UPDATED" ]]; then
        as_root apt-get update -q || die "apt-get update failed"
        APT_UPDATED=1
    fi
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" ||
        die "apt-get install $* failed"
}

# True if a libclang shared library that bindgen (clang-sys) can load is installed.
have_libclang() {
    local pattern
    local patterns=(
        "/usr/lib/llvm-*/lib/libclang.so*"
        "/usr/lib/llvm-*/lib/libclang-[0-9]*.so*"
        "/usr/lib/*/libclang.so*"
        "/usr/lib/*/libclang-[0-9]*.so*"
        "/usr/lib64/libclang.so*"
        "/usr/local/lib/libclang.so*"
    )
    if [[ -n "${LIBCLANG_PATH:-}" ]]; then
        patterns=("$LIBCLANG_PATH/libclang.so*" "$LIBCLANG_PATH/libclang-[0-9]*.so*" "${patterns[@]}")
    fi
    for pattern in "${patterns[@]}"; do
        compgen -G "$pattern" >/dev/null && return 0
    done
    return 1
}

# What rust-rocksdb needs to build: clang and libclang for its bindings (bindgen), and a C++
# compiler for RocksDB itself.
ensure_build_deps() {
    if ! command -v clang >/dev/null 2>&1 || ! have_libclang; then
        apt_install clang libclang-dev
    fi
    if ! command -v c++ >/dev/null 2>&1; then
        apt_install g++
    fi
}

# redis-server and redis-cli: the differential tests compare Palisade's replies with a real
# redis-server's, and some tests drive Palisade with redis-cli.
ensure_redis() {
    if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
        apt_install redis-server redis-tools
        # The tests start their own redis-server on free ports. A packaged daemon would only
        # hold port 6379, which is Palisade's default port too.
        if command -v systemctl >/dev/null 2>&1 &&
            systemctl is-active --quiet redis-server 2>/dev/null; then
            log "stopping and disabling the packaged redis-server service (tests start their own)"
            as_root systemctl disable --now redis-server || true
        fi
    fi
    local version
    version="$(redis-server --version)" || die "redis-server does not run"
    log "using ${version%% sha=*}"
    case "$version" in
    *" v=7."* | *" v=8."*) ;;
    *) log "warning: the differential tests expect Redis 7; replies from this version may differ" ;;
    esac
}

ensure_python() {
    command -v python3 >/dev/null 2>&1 || apt_install python3
}

# rustfmt and clippy, for the gate in scripts/check.sh.
ensure_rust_components() {
    local component
    for component in rustfmt clippy; do
        if ! has_cargo_subcommand "$component"; then
            command -v rustup >/dev/null 2>&1 ||
                die "cargo ${component#rust} is missing and rustup is not available to add it"
            log "adding rust component: $component"
            rustup component add "$component" || die "rustup component add $component failed"
        fi
    done
}

# has_cargo_subcommand rustfmt|clippy|fuzz: true if `cargo fmt` / `clippy` / `fuzz` works.
has_cargo_subcommand() {
    case "$1" in
    rustfmt) cargo fmt --version >/dev/null 2>&1 ;;
    clippy) cargo clippy --version >/dev/null 2>&1 ;;
    fuzz) cargo fuzz --version >/dev/null 2>&1 ;;
    *) return 1 ;;
    esac
}

# --- timed phases ------------------------------------------------------------------------

PHASE_LINES=()
PHASES_STARTED=$SECONDS

fmt_secs() { printf '%dm%02ds' "$(($1 / 60))" "$(($1 % 60))"; }

# phase NAME COMMAND [ARGS...]: run a command (or a function) as one timed step. On failure,
# print the timings so far and exit with the command's status; with PHASE_KEEP_GOING=1 set for
# the call, record the failure and return the status instead.
phase() {
    local name="$1"
    shift
    local start=$SECONDS rc=0
    printf '\n==> %s: %s\n' "$name" "$*" >&2
    # A subshell with its own `set -e`, entered while errexit is off: this way a failing
    # step inside a function still stops the function (errexit would be ignored if the call
    # were the left side of `||`), and we still get to record the status.
    set +e
    (
        set -e
        "$@"
    )
    rc=$?
    set -e
    local took
    took="$(fmt_secs $((SECONDS - start)))"
    if [[ "$rc" -eq 0 ]]; then
        printf '<== %s: ok in %s\n' "$name" "$took" >&2
        PHASE_LINES+=("$(printf '%-8s %8s  ok' "$name" "$took")")
    else
        printf '<== %s: FAILED (exit %d) after %s\n' "$name" "$rc" "$took" >&2
        PHASE_LINES+=("$(printf '%-8s %8s  FAILED (exit %d)' "$name" "$took" "$rc")")
        [[ -z "${PHASE_KEEP_GOING:-}" ]] || return "$rc"
        report "$0"
        exit "$rc"
    fi
}

# report TITLE: print how long each phase took.
report() {
    local line
    printf '\n==> timings (%s)\n' "$1" >&2
    for line in "${PHASE_LINES[@]}"; do
        printf '    %s\n' "$line" >&2
    done
    printf '    %-8s %8s\n' total "$(fmt_secs $((SECONDS - PHASES_STARTED)))" >&2
}

# --- fuzzing (scripts/fuzz.sh, and the short run in scripts/check.sh) --------------------

# The cargo-fuzz targets in fuzz/ (docs/fuzzing.md).
# shellcheck disable=SC2034  # used by the scripts that source this file
FUZZ_TARGETS=(resp_parse glob snapshot peer_frame lua lock_apply)

# cargo-fuzz, the libFuzzer driver. It needs nightly features; fuzz_env enables them on the
# stable toolchain.
ensure_cargo_fuzz() {
    if ! has_cargo_subcommand fuzz; then
        log "installing cargo-fuzz (cargo install cargo-fuzz --locked)"
        cargo install cargo-fuzz --locked || die "cargo install cargo-fuzz failed"
    fi
}

# The newest file matching a glob, or nothing.
newest() {
    # shellcheck disable=SC2012  # build directories have plain names
    ls -t "$@" 2>/dev/null | head -n 1
}

# fuzz_env: the environment of every fuzz build. The fuzz build has its own RUSTFLAGS
# (coverage, AddressSanitizer), which would make cargo compile RocksDB's C++ again (about
# 20 minutes on 2 cores): instead it links the static librocksdb.a that the release build
# produced (librocksdb-sys reads ROCKSDB_LIB_DIR and ROCKSDB_STATIC), and jemalloc's static
# library likewise (tikv-jemalloc-sys reads JEMALLOC_OVERRIDE). lz4 and Lua are small C
# libraries and are compiled again. The fuzz build's own target directory sits under the
# main one, so it stays warm between runs and between clones.
fuzz_env() {
    local rocksdb jemalloc
    rocksdb="$(newest "$CARGO_TARGET_DIR"/release/build/librocksdb-sys-*/out/librocksdb.a)"
    [[ -n "$rocksdb" ]] ||
        die "no librocksdb.a under $CARGO_TARGET_DIR/release/build: the fuzz build links the RocksDB of the release build; run 'cargo build --release' first (with the same CARGO_TARGET_DIR)"
    export ROCKSDB_LIB_DIR="${rocksdb%/*}" ROCKSDB_STATIC=1
    jemalloc="$(newest "$CARGO_TARGET_DIR"/release/build/tikv-jemalloc-sys-*/out/lib/libjemalloc_pic.a)"
    if [[ -n "$jemalloc" ]]; then
        export JEMALLOC_OVERRIDE="$jemalloc"
    else
        log "no libjemalloc_pic.a from the release build; the fuzz build compiles jemalloc (a few minutes)"
    fi
    # cargo-fuzz passes nightly-only flags (-Z, sanitizers) to rustc.
    export RUSTC_BOOTSTRAP=1
    FUZZ_TARGET_DIR="$CARGO_TARGET_DIR/fuzz"
}

# fuzz_build: builds every target (AddressSanitizer, debug assertions and overflow checks
# on, optimized).
fuzz_build() {
    fuzz_env
    log "fuzz build: ROCKSDB_LIB_DIR=$ROCKSDB_LIB_DIR, target dir $FUZZ_TARGET_DIR"
    (cd "$ROOT" && cargo fuzz build --debug-assertions --target-dir "$FUZZ_TARGET_DIR")
}

# fuzz_run TARGET SECONDS: fuzzes one target, seeded from the committed fuzz/corpus/TARGET
# (never written to) and the target's working corpus under the fuzz target dir (new inputs
# go there). A crash, panic, leak, timeout (10 s for one input) or out-of-memory input
# (2 GiB RSS, or one allocation over 512 MiB) fails it, and the input is saved under
# fuzz/artifacts/TARGET/. Prints one line: executions, exec/s, coverage, corpus, result.
fuzz_run() {
    local target="$1" secs="$2" work out rc=0 dict=()
    fuzz_env
    work="$FUZZ_TARGET_DIR/corpus/$target"
    out="$FUZZ_TARGET_DIR/logs/$target.log"
    mkdir -p "$work" "${out%/*}" "$ROOT/fuzz/artifacts/$target"
    [[ -f "$ROOT/fuzz/dict/$target.dict" ]] && dict=("-dict=$ROOT/fuzz/dict/$target.dict")
    (cd "$ROOT" && cargo fuzz run --debug-assertions --target-dir "$FUZZ_TARGET_DIR" \
        "$target" "$work" "fuzz/corpus/$target" -- \
        -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=512 \
        -print_final_stats=1 "${dict[@]}") >"$out" 2>&1 || rc=$?
    fuzz_summary "$target" "$out" "$rc"
    if [[ "$rc" -ne 0 ]]; then
        # The crash report: the input's path, the panic or sanitizer report, the stack.
        # (The symbolizer's complaints about the sanitized build's line tables are noise.)
        grep -v 'address range table at offset' "$out" |
            grep -E -A30 'panicked at|ERROR: (libFuzzer|AddressSanitizer)|SUMMARY|Test unit written' |
            head -n 80 >&2 || tail -n 40 "$out" >&2
        log "full log: $out; reproduce with: scripts/fuzz.sh reproduce $target <input>"
    fi
    return "$rc"
}

# fuzz_summary TARGET LOG RC: the one-line result of a run, from libFuzzer's final stats.
fuzz_summary() {
    awk -v target="$1" -v rc="$3" '
        /^stat::number_of_executed_units:/ { execs = $2 }
        /^stat::average_exec_per_sec:/ { rate = $2 }
        /^stat::peak_rss_mb:/ { rss = $2 }
        / cov: / { for (i = 1; i <= NF; i++) { if ($i == "cov:") cov = $(i+1); if ($i == "corp:") corp = $(i+1) } }
        END { printf "fuzz %-10s %10d execs %7d exec/s  cov %5d  corpus %-5s rss %4d MB  %s\n",
              target, execs, rate, cov, corp, rss, (rc == 0 ? "ok" : "CRASH (exit " rc ")") }
    ' "$2" >&2
}
