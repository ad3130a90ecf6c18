#!/usr/bin/env bash
# Throughput against message size for p2p-conn, CometBFT Go v1.0.1 and
# tendermint-p2p 0.41, drawn from the CLI's own `bench --json` lines.
#
#   p2p-conn-lab/scripts/plot.sh [ROUNDS]   run the benchmarks (default 5 rounds),
#                                      then draw
#   p2p-conn-lab/scripts/plot.sh draw       only redraw from the committed data
#
# For each message size (200 B, 1 KiB, 4 KiB, 64 KiB, 1 MiB) it runs
# `p2p-conn-lab bench --json --baseline cometbft-go --repeat ROUNDS` and the same
# with `--baseline tendermint-p2p` (p2p-conn: tokio adapter, default backend,
# alternating with the baseline in every round), and writes every line to
# docs/img/throughput.jsonl. The plot (p2p-conn-lab/examples/plot_throughput.rs,
# plotters' SVG backend) takes each implementation's median MB/s over all of
# its runs at a size: docs/img/throughput.svg. Needs `go` for the Go baseline
# (the CLI builds the Go peer). About a minute on 2 cores (5 rounds); run it
# on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
data=docs/img/throughput.jsonl
svg=docs/img/throughput.svg
mkdir -p docs/img

if [ "${1:-}" != draw ]; then
  rounds="${1:-5}"
  cargo build --release -q -p p2p-conn-lab
  bin=target/release/p2p-conn-lab
  out=$(mktemp)
  trap 'rm -f "$out"' EXIT
  # size:MiB pairs: about half a second to a few seconds per run here.
  for pair in 200:16 1024:64 4096:128 65536:512 1048576:512; do
    size=${pair%%:*}
    mib=${pair##*:}
    for baseline in cometbft-go tendermint-p2p; do
      "$bin" bench --json --size "$size" --mib "$mib" --baseline "$baseline" --repeat "$rounds" >>"$out"
    done
    echo "$size B done" >&2
  done
  chmod 644 "$out"
  mv "$out" "$data"
  trap - EXIT
fi

cargo run -q -p p2p-conn-lab --example plot_throughput -- "$data" "$svg"
