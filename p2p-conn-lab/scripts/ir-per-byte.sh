#!/usr/bin/env bash
# Instructions per byte of p2p-conn's send path against a bare seal loop,
# counted by callgrind (deterministic: the same binary and inputs give the
# same counts on a busy or idle machine).
# Usage: p2p-conn-lab/scripts/ir-per-byte.sh [MIB] [MSG_SIZE] [FRAME_SIZE]
set -euo pipefail
cd "$(dirname "$0")/../.."
mib=${1:-16}; size=${2:-65536}; frame=${3:-1024}
command -v valgrind >/dev/null || { echo "valgrind is required (apt-get install valgrind)" >&2; exit 1; }
# callgrind counts every byte a `rep movsb` moves as one instruction, so
# glibc's memcpy for copies above its rep-movsb threshold (~2 KiB) would add
# ~1 Ir/byte that is not real work. Keep memcpy on its vector loop instead.
export GLIBC_TUNABLES=${GLIBC_TUNABLES:-glibc.cpu.x86_rep_movsb_threshold=4194304}
cargo build --release -q -p p2p-conn-lab --example ir_per_byte
bin=target/release/examples/ir_per_byte
count() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" "$1" "$mib" "$size" "$frame" 2>&1 \
    | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
none=$(count none); bare=$(count bare); writer=$(count writer)
bytes=$((mib * 1048576))
awk -v n="$none" -v b="$bare" -v w="$writer" -v bytes="$bytes" -v size="$size" -v frame="$frame" 'BEGIN {
  bb = (b - n) / bytes; ww = (w - n) / bytes;
  printf "messages of %d bytes, frame %d, %d MiB\n", size, frame, bytes / 1048576;
  printf "bare seal loop : %.3f Ir/byte\n", bb;
  printf "p2p-conn writer: %.3f Ir/byte (%+.2f%% over bare)\n", ww, (ww / bb - 1) * 100;
}'
