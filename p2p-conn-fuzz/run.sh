#!/usr/bin/env bash
# Run every cargo-fuzz target of p2p-conn for SECONDS each (default 30).
#
#   p2p-conn-fuzz/run.sh [SECONDS]
#
# Installs cargo-fuzz (0.13, from crates.io) when it is missing. Works on the
# stable toolchain through RUSTC_BOOTSTRAP=1 (cargo-fuzz passes -Z flags).
# Each target starts from the committed seeds (seeds/TARGET, read only) and
# its growing local corpus (corpus/TARGET, git-ignored). A crash stops the
# script with a non-zero status; libFuzzer leaves the input in
# artifacts/TARGET/ (git-ignored). See docs/fuzzing.md.
set -euo pipefail

SECONDS_PER_TARGET="${1:-30}"
TARGETS="${FUZZ_TARGETS:-handshake frames auth_sig roundtrip queue_budget send_queue nodeinfo codec_decoder privval mconn_packets}"
cd "$(dirname "$0")"

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "installing cargo-fuzz" >&2
    cargo install cargo-fuzz --version 0.13.2 --locked
fi

export RUSTC_BOOTSTRAP=1
cargo fuzz build --fuzz-dir .
for target in $TARGETS; do
    mkdir -p "corpus/$target"
    echo "== fuzz $target for ${SECONDS_PER_TARGET}s" >&2
    cargo fuzz run --fuzz-dir . "$target" "corpus/$target" "seeds/$target" -- \
        -max_total_time="$SECONDS_PER_TARGET" -print_final_stats=1
done
