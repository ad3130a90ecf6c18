#!/usr/bin/env bash
# Side-by-side comparison with CometBFT's own Go SecretConnection (v1.0.1 and
# v0.38.26) for 200 B, 1 KiB, 64 KiB and 1 MiB messages, plus handshakes.
#
#   p2p-conn-lab/scripts/cometbft-go.sh [ROUNDS]              (default 5)
#   p2p-conn-lab/scripts/cometbft-go.sh ROUNDS producers N    (N producers share a connection)
#   p2p-conn-lab/scripts/cometbft-go.sh ROUNDS lines          (64 KiB and 200 B against
#                                                         v0.38.26, v0.39.4, v0.40.0, v1.0.1)
#   p2p-conn-lab/scripts/cometbft-go.sh ROUNDS headline       (64 KiB and 1 MiB against the
#                                                         same four lines: the figures
#                                                         docs/performance.md's headline quotes)
#   p2p-conn-lab/scripts/cometbft-go.sh ROUNDS backends       (64 KiB and 1 MiB: the avx2 backend
#                                                         against Go v1.0.1 and v0.38.26,
#                                                         beside ring and the default backend)
#   p2p-conn-lab/scripts/cometbft-go.sh ROUNDS allcore        (64 KiB over one connection and over
#                                                         as many at once as there are cores,
#                                                         against v1.0.1, and on ring)
#
# Each round runs, per message size, `p2p-conn-lab bench` once with the tokio
# adapter against `--baseline cometbft-go`, once with the std adapter against
# `--baseline cometbft-go-0.38`, and once with the tokio adapter on the ring
# backend (what a CPU without AVX-512 IFMA runs), so all implementations
# alternate within every round. p2p-conn rows name their AEAD backend. The table gives the medians over the rounds of MB/s,
# messages/s and CPU seconds (user+sys) per GiB, and the ratios of p2p-conn
# over each Go version. Needs `go` (the CLI builds the Go peer) and python3.
#
# With `producers N`: 200 B and 1 KiB messages (PAIRS="SIZE:MIB ...",
# default "200:512 1024:1024") from N producers sharing one connection:
# p2p-conn's send queue against Go v1.0.1 and v0.38.26 (N goroutines calling
# `Write` on one `SecretConnection`) and tendermint-p2p (N threads behind a
# mutex), and p2p-conn's plain writer behind a shared lock; then the same
# paced at 100k messages/s for send-to-receive latency (p50, p99).
#
# With `allcore`: each round runs `p2p-conn-lab bench --all-cores` (N = the
# cores the process may use) with 64 KiB messages, 1 GiB per run (split
# evenly over the N connections), once on the default backend against
# `--baseline cometbft-go` (v1.0.1, the faster Go line; its peer runs N
# pairs in one process) and once on the ring backend; every invocation
# alternates one connection and N. The table puts the one-connection and
# all-core medians side by side, with each implementation's scaling (N
# over 1) and p2p-conn's ratios over Go at 1 and at N.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds="${1:-5}"
cargo build --release -q -p p2p-conn-lab
bin=target/release/p2p-conn-lab
out=$(mktemp)
trap 'rm -f "$out"' EXIT

producers=0
lines=0
allcore=0
backends=0
if [ "${2:-}" = producers ]; then
  producers="${3:?producers N}"
elif [ "${2:-}" = lines ]; then
  lines=1
elif [ "${2:-}" = headline ]; then
  lines=2
elif [ "${2:-}" = allcore ]; then
  allcore=1
elif [ "${2:-}" = backends ]; then
  backends=1
fi

# size:MiB pairs: about half a second to a second per run on 2 cores.
for round in $(seq "$rounds"); do
  if [ "$allcore" = 1 ]; then
    p=(--repeat 1 --json --size 65536 --mib 1024 --all-cores --adapter tokio)
    "$bin" bench "${p[@]}" --baseline cometbft-go >>"$out"
    "$bin" bench "${p[@]}" --backend avx2 >>"$out"
    "$bin" bench "${p[@]}" --backend ring >>"$out"
  elif [ "$backends" = 1 ]; then
    # Every backend this CPU runs against the Go lines, in one round: the
    # AVX2 engine is what a CPU without AVX-512 IFMA runs by default (on
    # one with it, chosen with --backend; Go's assembly uses AVX2 at most).
    for pair in 65536:1024 1048576:1024; do
      size=${pair%%:*}
      mib=${pair##*:}
      p=(--repeat 1 --json --size "$size" --mib "$mib" --adapter tokio)
      "$bin" bench "${p[@]}" --backend avx2 --baseline cometbft-go >>"$out"
      "$bin" bench "${p[@]}" --backend avx2 --baseline cometbft-go-0.38 >>"$out"
      "$bin" bench "${p[@]}" --backend ring >>"$out"
      "$bin" bench "${p[@]}" >>"$out"
    done
  elif [ "$producers" -gt 0 ]; then
    # At least 0.5 s per p2p-conn run (bench's "too short" line).
    for pair in ${PAIRS:-200:512 1024:1024}; do
      size=${pair%%:*}
      mib=${pair##*:}
      p=(--json --size "$size" --mib "$mib" --producers "$producers")
      "$bin" bench --repeat 1 "${p[@]}" --baseline cometbft-go >>"$out"
      "$bin" bench --repeat 1 "${p[@]}" --baseline cometbft-go-0.38 >>"$out"
      "$bin" bench --repeat 1 "${p[@]}" --send-path lock >>"$out"
      "$bin" bench --repeat 1 "${p[@]}" --baseline tendermint-p2p >>"$out"
      # Latency at 100k messages/s, about half what Go sustains here, over
      # an eighth of the bytes (1 to 2 s a run).
      p=(--json --size "$size" --mib "$((mib / 8))" --producers "$producers" --rate 100000)
      "$bin" bench --repeat 1 "${p[@]}" --baseline cometbft-go >>"$out"
      "$bin" bench --repeat 1 "${p[@]}" --send-path lock --baseline cometbft-go-0.38 >>"$out"
    done
  elif [ "$lines" != 0 ]; then
    # The release lines side by side: the tokio adapter against each Go
    # line in turn, so every line alternates with p2p-conn in every round.
    pairs="65536:512 200:16"
    # headline: 1 GiB per run, above bench's 0.5 s "too short" line.
    [ "$lines" = 2 ] && pairs="65536:1024 1048576:1024"
    for pair in $pairs; do
      size=${pair%%:*}
      mib=${pair##*:}
      for baseline in cometbft-go-0.38 cometbft-go-0.39 cometbft-go-0.40 cometbft-go; do
        "$bin" bench --repeat 1 --json --size "$size" --mib "$mib" --adapter tokio --baseline "$baseline" >>"$out"
      done
    done
  else
    for pair in 200:16 1024:64 65536:512 1048576:512; do
      size=${pair%%:*}
      mib=${pair##*:}
      "$bin" bench --repeat 1 --json --size "$size" --mib "$mib" --adapter tokio --baseline cometbft-go >>"$out"
      "$bin" bench --repeat 1 --json --size "$size" --mib "$mib" --adapter std --baseline cometbft-go-0.38 >>"$out"
      "$bin" bench --repeat 1 --json --size "$size" --mib "$mib" --adapter tokio --backend ring >>"$out"
    done
    "$bin" bench --repeat 1 --json --handshakes 500 --adapter tokio --baseline cometbft-go >>"$out"
  fi
  echo "round $round of $rounds done" >&2
done

python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
from collections import defaultdict

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
runs = [r for r in rows if r["kind"] == "run"]
for r in runs:
    if r["impl"].startswith("p2p-conn") and r["mode"] == "transfer":
        r["impl"] = f'{r["impl"]} [{r["backend"]}]'
many = max((r.get("connections") or 1) for r in runs)
if many > 1:
    # allcore: one connection and `many` side by side.
    by = defaultdict(list)
    for r in runs:
        by[(r["impl"], r["connections"])].append(r)
    def med(key, impl, n):
        vals = [r[key] for r in by[(impl, n)] if r[key] is not None]
        return statistics.median(vals) if vals else None
    impls = sorted({r["impl"] for r in runs}, key=lambda i: (not i.startswith("p2p-conn"), i))
    print(f"medians of {sys.argv[2]} alternating rounds, 64 KiB messages, 1 GiB per run; "
          f"all cores = {many} connections at once (aggregate MB/s over the run's wall time, "
          f"the whole process's CPU)")
    print()
    print(f"| implementation | MB/s, 1 conn | MB/s, {many} conns | scaling | msg/s, 1 conn | msg/s, {many} conns "
          f"| CPU s/GiB, 1 conn | CPU s/GiB, {many} conns |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for impl in impls:
        a, b = med("mb_per_s", impl, 1), med("mb_per_s", impl, many)
        if None in (a, b):
            continue
        ma, mb = med("msgs_per_s", impl, 1), med("msgs_per_s", impl, many)
        ca, cb = med("cpu_s_per_gib", impl, 1), med("cpu_s_per_gib", impl, many)
        print(f"| {impl} | {a:.1f} | {b:.1f} | {b / a:.2f}x | {ma:.0f} | {mb:.0f} | {ca:.3f} | {cb:.3f} |")
    print()
    print(f"| p2p-conn | over | throughput ratio, 1 conn | throughput ratio, {many} conns "
          f"| CPU ratio, 1 conn | CPU ratio, {many} conns |")
    print("|---|---|---:|---:|---:|---:|")
    for mine in [i for i in impls if i.startswith("p2p-conn")]:
        for go in [i for i in impls if not i.startswith("p2p-conn")]:
            cells = []
            for key, inv in (("mb_per_s", False), ("cpu_s_per_gib", True)):
                for n in (1, many):
                    x, y = med(key, mine, n), med(key, go, n)
                    cells.append("-" if None in (x, y) else f"{(y / x if inv else x / y):.2f}x")
            print(f"| {mine} | {go} | {' | '.join(cells)} |")
    sys.exit(0)
paced = [r for r in runs if r.get("latency_p50_us") is not None]
runs = [r for r in runs if r.get("latency_p50_us") is None]
by = defaultdict(list)
for r in runs:
    by[(r["mode"], r["size"], r["impl"])].append(r)

def med(key, mode, size, impl):
    vals = [r[key] for r in by[(mode, size, impl)] if r[key] is not None]
    return statistics.median(vals) if vals else None

ours = sorted({r["impl"] for r in runs if r["impl"].startswith("p2p-conn") and r["mode"] == "transfer"})
theirs = sorted({r["impl"] for r in runs if not r["impl"].startswith("p2p-conn") and r["mode"] == "transfer"})
impls = ours + theirs
print(f"medians of {sys.argv[2]} alternating rounds")
print()
print("| message | implementation | MB/s | msg/s | CPU s/GiB |")
print("|---|---|---:|---:|---:|")
for size in sorted({r["size"] for r in runs if r["mode"] == "transfer"}):
    for impl in impls:
        mb = med("mb_per_s", "transfer", size, impl)
        if mb is None:
            continue
        msgs = med("msgs_per_s", "transfer", size, impl)
        cpu = med("cpu_s_per_gib", "transfer", size, impl)
        print(f"| {size} B | {impl} | {mb:.1f} | {msgs:.0f} | {cpu:.3f} |")
print()
print("| message | p2p-conn | over | throughput ratio | CPU ratio (less CPU per GiB) |")
# Every p2p-conn row against every other implementation.
print("|---|---|---|---:|---:|")
for size in sorted({r["size"] for r in runs if r["mode"] == "transfer"}):
    for mine in ours:
        for go in impls[len(ours):]:
            a, b = med("mb_per_s", "transfer", size, mine), med("mb_per_s", "transfer", size, go)
            ca, cb = med("cpu_s_per_gib", "transfer", size, mine), med("cpu_s_per_gib", "transfer", size, go)
            if None in (a, b, ca, cb):
                continue
            print(f"| {size} B | {mine} | {go} | {a / b:.2f}x | {cb / ca:.2f}x |")
if paced:
    lat = defaultdict(list)
    for r in paced:
        lat[(r["size"], r["impl"])].append(r)
    print()
    print("| message | implementation (paced) | msg/s | CPU s/GiB | latency p50 µs | latency p99 µs |")
    print("|---|---|---:|---:|---:|---:|")
    for (size, impl), rs in sorted(lat.items()):
        m = lambda k: statistics.median(r[k] for r in rs)
        print(f"| {size} B | {impl} | {m('msgs_per_s'):.0f} | {m('cpu_s_per_gib'):.3f} | {m('latency_p50_us'):.0f} | {m('latency_p99_us'):.0f} |")
hs = [k for k in by if k[0] == "handshakes"]
if hs:
    print()
    print("| handshakes (sequential, loopback) | per second | CPU µs each (dialer process) |")
    print("|---|---:|---:|")
    for k in sorted(hs):
        rate = med("msgs_per_s", *k)
        cpu = med("cpu_s_per_handshake", *k)
        print(f"| {k[2]} | {rate:.0f} | {cpu * 1e6:.0f} |")
PY
