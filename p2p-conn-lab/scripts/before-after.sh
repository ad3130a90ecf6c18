#!/usr/bin/env bash
# Side by side: two builds of the p2p-conn lab, run alternately on the same
# workloads, medians per workload (MB/s and CPU s/GiB from the bench's own
# getrusage figures).
#
#   p2p-conn-lab/scripts/before-after.sh BEFORE_BIN AFTER_BIN [ROUNDS]
#
# Build each binary in its own checkout (`cargo build --release -p
# p2p-conn-lab`, target/release/p2p-conn-lab; before the lab crate existed,
# `-p p2p-conn-cli`, target/release/p2p-conn; before the CLI crate, `-p
# p2p-conn`).
set -euo pipefail
before=$1
after=$2
rounds=${3:-5}
out=$(mktemp)
for r in $(seq 1 "$rounds"); do
  for cfg in "tokio 1048576 256" "tokio 65536 256" "std 65536 256" "codec 65536 256" "tokio 1024 32" "codec 1024 32"; do
    set -- $cfg
    for which in before after; do
      bin=$before
      [ "$which" = after ] && bin=$after
      row=$("$bin" bench --adapter "$1" --size "$2" --mib "$3" --json 2>/dev/null | grep '"kind":"run"' | head -1)
      echo "{\"which\":\"$which\",\"adapter\":\"$1\",\"size\":$2,\"row\":$row}" >>"$out"
    done
  done
done
python3 - "$out" <<'PY'
import json, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
keys = sorted({(r["adapter"], r["size"]) for r in rows}, key=lambda k: (-k[1], k[0]))
names = {1048576: "1 MiB", 65536: "64 KiB", 1024: "1 KiB"}
print("| adapter, message | before MB/s | after MB/s | after / before | CPU s/GiB before -> after |")
print("|---|---:|---:|---:|---|")
for k in keys:
    def med(which, field):
        return st.median(r["row"][field] for r in rows
                         if (r["adapter"], r["size"]) == k and r["which"] == which)
    b, a = med("before", "mb_per_s"), med("after", "mb_per_s")
    cb, ca = med("before", "cpu_s_per_gib"), med("after", "cpu_s_per_gib")
    print(f"| {k[0]}, {names.get(k[1], k[1])} | {b:.0f} | {a:.0f} | {a / b:.2f} | {cb:.2f} -> {ca:.2f} |")
PY
rm -f "$out"
