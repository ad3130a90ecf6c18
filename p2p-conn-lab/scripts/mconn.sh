#!/usr/bin/env bash
# MConnection side by side: CometBFT's own MConnection (`cometbft-peer
# mconn-bench`, v0.38.26 and v1.0.1, each with its release's default flush
# throttle: 100 ms and 10 ms) against p2p-conn's (`mconn-bench`,
# p2p-conn-lab/src/bin/mconn-bench.rs), both ends in one process over loopback
# TCP with the secret connection, 4 channels.
#
#   p2p-conn-lab/scripts/mconn.sh [ROUNDS]   (default 5)
#
# Each round runs the three, alternating, at: 200 B unpaced (4 x 50,000
# messages), 200 B unpaced for longer (4 x 250,000), the same with
# TCP_NOTSENT_LOWAT 128 KiB on every implementation's sending socket (what
# the kernel holds unsent, which autotuning otherwise grows to megabytes
# under saturation), 64 KiB unpaced (4 x 500), and 200 B paced at 2,000
# messages/s in all (4 x 2,000: latency without queueing, where a flush
# throttle shows).
# Go's send and receive rate limits are off (its in-code default, 512000
# B/s, would cap it), as p2p-conn's are by default. The table gives each
# column's median over the rounds. Needs `go` and python3.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds="${1:-5}"
export GOTOOLCHAIN=local
target="${CARGO_TARGET_DIR:-target}"
cargo build --release -q -p p2p-conn-lab --bin mconn-bench
rust="$target/release/mconn-bench"
tmp=$(mktemp -d)
out="$tmp/runs"
trap 'rm -rf "$tmp"' EXIT
# The same build flags as interop/src/cometbft_go.rs (GoVersion::go_flags).
(cd interop/cometbft-go &&
  go build -trimpath -mod=readonly -modfile=go.v0.38.mod -o "$tmp/peer-v0.38.26" . &&
  go build -trimpath -mod=readonly -modfile=go.mod -tags=cometbft_v1 -o "$tmp/peer-v1.0.1" .)
workloads=("200 50000 0 0" "200 250000 0 0" "200 250000 0 131072" "65536 500 0 0" "200 2000 2000 0")
for round in $(seq "$rounds"); do
  for w in "${workloads[@]}"; do
    read -r size n rate lowat <<<"$w"
    "$tmp/peer-v0.38.26" mconn-bench -size "$size" -n "$n" -channels 4 -rate "$rate" -notsent-lowat "$lowat" >>"$out"
    "$tmp/peer-v1.0.1" mconn-bench -size "$size" -n "$n" -channels 4 -rate "$rate" -notsent-lowat "$lowat" >>"$out"
    "$rust" --size "$size" --n "$n" --channels 4 --rate "$rate" --notsent-lowat "$lowat" >>"$out"
  done
  echo "round $round of $rounds done" >&2
done
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
from collections import defaultdict
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = defaultdict(list)
for r in rows:
    by[(r["size"], r["rate"], r["messages"], r["notsent_lowat"], r["impl"])].append(r)
print(f"medians of {sys.argv[2]} alternating rounds, 4 channels")
print()
print("| message | pacing | messages | TCP_NOTSENT_LOWAT | implementation | flush throttle | msg/s | MB/s | CPU s/GiB | latency p50 µs | p99 µs |")
print("|---|---|---:|---:|---|---|---:|---:|---:|---:|---:|")
for (size, rate, msgs, lowat, impl), rs in sorted(by.items(), key=lambda kv: (kv[0][1], kv[0][0], kv[0][2], kv[0][3], kv[0][4])):
    m = lambda k: statistics.median(r[k] for r in rs)
    pacing = f"{rate:.0f} msg/s" if rate else "none"
    cap = f"{lowat // 1024} KiB" if lowat else "-"
    print(f"| {size} B | {pacing} | {msgs} | {cap} | {impl} | {rs[0]['flush_throttle']} | {m('msgs_per_s'):.0f} | {m('mb_per_s'):.1f} | "
          f"{m('cpu_s_per_gib'):.2f} | {m('latency_p50_us'):.0f} | {m('latency_p99_us'):.0f} |")
PY
