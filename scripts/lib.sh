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

# has_cargo_subcommand rustfmt|clippy: true if `cargo fmt` / `cargo clippy` works.
has_cargo_subcommand() {
    case "$1" in
    rustfmt) cargo fmt --version >/dev/null 2>&1 ;;
    clippy) cargo clippy --version >/dev/null 2>&1 ;;
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
