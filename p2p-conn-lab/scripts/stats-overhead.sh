#!/usr/bin/env bash
# Throughput and CPU with the per-connection stats compiled in (the lab's
# default features) against compiled out (`-p p2p-conn-lab
# --no-default-features`), in one run: the two binaries alternate, ROUNDS
# times per message size, and the medians are compared. Then instruction counts of one fixed
# workload per size under callgrind (ring backend: valgrind has no AVX-512),
# which do not depend on the machine's noise.
#
#   p2p-conn-lab/scripts/stats-overhead.sh [ROUNDS]   (default 7)
#   SIZES="1024:64" CALLGRIND=0 p2p-conn-lab/scripts/stats-overhead.sh 11
#   BEFORE=target/so-main SKIP_BUILD=1 OUT=target/so-new p2p-conn-lab/scripts/stats-overhead.sh 21
# BEFORE: the OUT of this script's build of another commit; its two
# binaries then join each round (four runs, the order rotated by round)
# and a second row per size gives that commit's figures from the same
# rounds.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds="${1:-7}"
# OUT: where the two builds go; SKIP_BUILD=1 reuses binaries already there.
out="${OUT:-target/stats-overhead}"
if [ -z "${SKIP_BUILD:-}" ]; then
  cargo build --release -q -p p2p-conn-lab --target-dir "$out/stats"
  cargo build --release -q -p p2p-conn-lab --no-default-features --target-dir "$out/nostats"
fi
bin() {
  local dir
  case $1 in
    before-*) dir="$BEFORE/${1#before-}/release" ;;
    *) dir="$out/$1/release" ;;
  esac
  # A BEFORE built before the lab crate has `bench` in p2p-conn.
  if [ -x "$dir/p2p-conn-lab" ]; then echo "$dir/p2p-conn-lab"; else echo "$dir/p2p-conn"; fi
}
kinds=(stats nostats)
[ -n "${BEFORE:-}" ] && kinds+=(before-stats before-nostats)

# "<MB/s> <CPU s/GiB>" of one bench run.
run() {
  "$(bin "$1")" bench --size "$2" --mib "$3" --runtime current-thread |
    awk '/^p2p-conn \(/ { for (i = 1; i <= NF; i++) { if ($(i+1) == "MB/s") mb = $i; if ($(i+1) == "s" && $(i+2) == "CPU/GiB") cpu = $i } }
         END { print mb, cpu }'
}
median() { sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

printf '%-8s %-8s %12s %12s %14s %14s %8s\n' size rounds "MB/s stats" "MB/s off" "CPU/GiB stats" "CPU/GiB off" ratio
# SIZES: "SIZE:MIB ..." pairs.
for cfg in ${SIZES:-200:16 1024:64 65536:512}; do
  set -- "${cfg%%:*}" "${cfg##*:}"
  for b in "${kinds[@]}"; do : > "/tmp/so.$b"; done
  for r in $(seq "$rounds"); do
    for j in "${!kinds[@]}"; do
      b=${kinds[$(((j + r) % ${#kinds[@]}))]}
      run "$b" "$1" "$2" >> "/tmp/so.$b"
    done
  done
  for p in "" ${BEFORE:+before-}; do
    ms=$(cut -d' ' -f1 "/tmp/so.${p}stats" | median); mn=$(cut -d' ' -f1 "/tmp/so.${p}nostats" | median)
    cs=$(cut -d' ' -f2 "/tmp/so.${p}stats" | median); cn=$(cut -d' ' -f2 "/tmp/so.${p}nostats" | median)
    printf '%-8s %-8s %12s %12s %14s %14s %8s %s\n' "$1" "$rounds" "$ms" "$mn" "$cs" "$cn" \
      "$(awk -v a="$ms" -v b="$mn" 'BEGIN { printf "%.3f", a / b }')" "${p:+(BEFORE)}"
  done
done

[ "${CALLGRIND:-1}" = 0 ] && exit 0
echo
echo "instructions (callgrind, current-thread, ring backend):"
for cfg in "200 8" "1024 8" "65536 64"; do
  set -- $cfg
  for p in "" ${BEFORE:+before-}; do
    for b in stats nostats; do
      valgrind --tool=callgrind --callgrind-out-file="/tmp/so.cg.$b" "$(bin "$p$b")" bench \
        --size "$1" --mib "$2" --runtime current-thread --backend ring > /dev/null 2>&1
      eval "ir_$b=$(awk '/^summary:/ { print $2 }' "/tmp/so.cg.$b")"
    done
    printf '  %6s B x %3s MiB: %12s Ir with stats, %12s without: %+.2f%% %s\n' "$1" "$2" "$ir_stats" "$ir_nostats" \
      "$(awk -v a="$ir_stats" -v b="$ir_nostats" 'BEGIN { print (a / b - 1) * 100 }')" "${p:+(BEFORE)}"
  done
done
