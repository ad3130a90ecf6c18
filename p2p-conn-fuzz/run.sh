#!/usr/bin/env bash
# Run every cargo-fuzz target of p2p-conn for SECONDS each (default 30).
#
#   p2p-conn-fuzz/run.sh [SECONDS]
#   p2p-conn-fuzz/run.sh --build-only   install cargo-fuzz and build, no run
#
# Installs cargo-fuzz (0.13, from crates.io, a debug build: it only drives
# cargo and libFuzzer) when it is missing. Works on the
# stable toolchain through RUSTC_BOOTSTRAP=1 (cargo-fuzz passes -Z flags).
# Each target starts from the committed seeds (seeds/TARGET, read only) and
# its growing local corpus (corpus/TARGET, git-ignored). FUZZ_JOBS targets
# (default: one per CPU) run at a time, each a single libFuzzer process with
# its output in target/fuzz-logs/TARGET.log, printed when it fails. A crash
# fails the script (after the targets already running finish); libFuzzer
# leaves the input in artifacts/TARGET/ (git-ignored). See docs/fuzzing.md.
set -euo pipefail

BUILD_ONLY=0
if [ "${1:-}" = "--build-only" ]; then
    BUILD_ONLY=1
    shift
fi
SECONDS_PER_TARGET="${1:-30}"
TARGETS="${FUZZ_TARGETS:-handshake frames auth_sig roundtrip queue_budget send_queue nodeinfo codec_decoder privval mconn_packets noise}"
JOBS="${FUZZ_JOBS:-$(nproc)}"
cd "$(dirname "$0")"

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "installing cargo-fuzz" >&2
    cargo install cargo-fuzz --version 0.13.2 --locked --debug
fi

export RUSTC_BOOTSTRAP=1
cargo fuzz build --fuzz-dir .
[ "$BUILD_ONLY" -eq 0 ] || exit 0
mkdir -p target/fuzz-logs

fuzz_one() {
    local target="$1" log="target/fuzz-logs/$1.log"
    mkdir -p "corpus/$target"
    if cargo fuzz run --fuzz-dir . "$target" "corpus/$target" "seeds/$target" -- \
        -max_total_time="$SECONDS_PER_TARGET" -print_final_stats=1 >"$log" 2>&1; then
        echo "== fuzz $target: ${SECONDS_PER_TARGET}s, $(grep -m1 'stat::number_of_executed_units' "$log" | awk '{print $2}') runs, no crash" >&2
    else
        echo "== fuzz $target: FAILED, its log:" >&2
        cat "$log" >&2
        return 1
    fi
}

failed=0
running=0
for target in $TARGETS; do
    if [ "$running" -ge "$JOBS" ]; then
        wait -n || failed=1
        running=$((running - 1))
    fi
    [ "$failed" -eq 0 ] || break
    fuzz_one "$target" &
    running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
    wait -n || failed=1
    running=$((running - 1))
done
exit "$failed"
