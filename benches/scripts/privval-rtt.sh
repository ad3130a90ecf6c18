#!/usr/bin/env bash
# Remote-signer round trips: CometBFT's own SignerClient <-> SignerServer
# with a FilePV (`cometbft-peer privval-bench`, v0.38.26 and v1.0.1) against
# p2p-conn's SignerClient <-> SignerEndpoint with a GuardedSigner
# (`privval-rtt`, benches/src/bin/privval-rtt.rs), in process over loopback
# TCP (secret connection), N sign-vote requests at increasing heights after
# a warm-up.
#
#   benches/scripts/privval-rtt.sh [ROUNDS] [N] [--unix]   (default 5, 2000)
#
# Each round runs the three once, alternating, and then p2p-conn's with
# `--no-persist` (the same key and endpoints, but no guard and no state
# file: the transport without the file system's effects; not a
# validator), so slow phases of the machine hit them all alike. Every run prints, per request: the round trip (the
# SignerClient's sign-vote call, request sent to response decoded), the time
# inside the signer (a timing wrapper around the FilePV or GuardedSigner),
# and their difference, "transport" (framing, encryption, the sockets, the
# endpoint's own work). The table gives each column's median over the rounds
# of the runs' p50 and p99.
#
# The signers are not alike: CometBFT's FilePV writes its state file to a
# temporary file opened with O_SYNC and renames it (libs/tempfile.
# WriteFileAtomic: one synced write, the directory not synced); the
# GuardedSigner writes, fsyncs the file, renames, and fsyncs the directory
# before a signature leaves: two syncs to FilePV's one. So "sign" mostly
# measures the file system. "transport" compares the
# endpoints, but on a loaded machine p2p-conn's transport p99 rose to
# milliseconds with the synced state file and not without it (the
# no-persist row): read it beside that row. Needs `go` and python3.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds="${1:-5}"
n="${2:-2000}"
unix=()
if [ "${3:-}" = --unix ]; then unix=(-unix); fi
export GOTOOLCHAIN=local
target="${CARGO_TARGET_DIR:-target}"

cargo build --release -q -p p2p-conn-benches --bin privval-rtt
rust="$target/release/privval-rtt"

tmp=$(mktemp -d)
out="$tmp/runs"
trap 'rm -rf "$tmp"' EXIT
# The same build flags as interop/src/cometbft_go.rs (GoVersion::go_flags).
(cd interop/cometbft-go &&
  go build -trimpath -mod=readonly -modfile=go.v0.38.mod -o "$tmp/peer-v0.38.26" . &&
  go build -trimpath -mod=readonly -modfile=go.mod -tags=cometbft_v1 -o "$tmp/peer-v1.0.1" .)

rust_unix=()
if [ ${#unix[@]} -gt 0 ]; then rust_unix=(--unix); fi
for round in $(seq "$rounds"); do
  for v in v0.38.26 v1.0.1; do
    printf '%s\tgo %s\n' "$("$tmp/peer-$v" privval-bench -n "$n" "${unix[@]}")" "$v" >>"$out"
  done
  printf '%s\tp2p-conn\n' "$("$rust" --n "$n" "${rust_unix[@]}")" >>"$out"
  printf '%s\tp2p-conn no-persist\n' "$("$rust" --n "$n" --no-persist "${rust_unix[@]}")" >>"$out"
  echo "round $round of $rounds done" >&2
done

echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo "n=$n per run, $rounds rounds, $([ ${#unix[@]} -gt 0 ] && echo 'Unix socket' || echo 'loopback TCP, secret connection')"
python3 - "$out" <<'EOF'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    text, who = line.rstrip("\n").split("\t")
    runs.setdefault(who, []).append(json.loads(text))
cols = ["rtt_p50_us", "rtt_p99_us", "sign_p50_us", "sign_p99_us",
        "transport_p50_us", "transport_p99_us"]
print("median over rounds, microseconds")
print(f"{'implementation':<21}" + "".join(f"{c[:-3]:>15}" for c in cols))
for who in ["go v0.38.26", "go v1.0.1", "p2p-conn", "p2p-conn no-persist"]:
    rs = runs.get(who, [])
    if not rs:
        continue
    print(f"{who:<21}" + "".join(f"{statistics.median(r[c] for r in rs):>15g}" for c in cols))
EOF
