#!/usr/bin/env bash
# Crawl rate and memory on a large network on this machine: a fake network
# of N MConnection peers in one process (p2p-conn-lab/src/bin/fake-pex-network.rs),
# each answering a PexRequest with K real neighbours and J junk addresses
# (IPv6 documentation addresses, which CometBFT's rules refuse: recorded,
# never followed), crawled from node 0 with
# `p2p-conn crawl --allow-unroutable --max-nodes N`, in table mode and with
# --json, under GNU time: nodes found, wall time, nodes/s, CPU, peak RSS.
#
#   p2p-conn-lab/scripts/crawl-scale.sh [N] [K] [J] [P2P_CONN_BINARY...]
#
# Defaults: 1000 nodes, 10 neighbours, 90 junk addresses (100 per answer:
# 100,000 reported in all); J = 990 gives CometBFT-sized answers (about
# 1,000 addresses, under its 64,000-byte message cap). Each binary given
# (default: target/release/p2p-conn, built first) is run in turn on the
# same network, so an old and a new build can be compared side by side.
# With SNAPSHOTS=S in the environment, each node also lists the state-sync
# channel and offers S snapshots (0: none, as the kvstore application):
# the crawl then asks each node for its listing.
set -euo pipefail
cd "$(dirname "$0")/../.."
n="${1:-1000}"
k="${2:-10}"
j="${3:-90}"
shift $(( $# < 3 ? $# : 3 ))
target="${CARGO_TARGET_DIR:-target}"
cargo build --release -q -p p2p-conn-lab --bin fake-pex-network
bins=("$@")
if [ ${#bins[@]} -eq 0 ]; then
  cargo build --release -q -p p2p-conn-cli
  bins=("$target/release/p2p-conn")
fi
# One file descriptor per listener, and the crawl's sockets.
ulimit -n $(( n + 4096 )) 2>/dev/null || true
tmp=$(mktemp -d)
fifo="$tmp/stdin"
mkfifo "$fifo"
"$target/release/fake-pex-network" "$n" "$k" "$j" ${SNAPSHOTS:+"$SNAPSHOTS"} < "$fifo" > "$tmp/net" &
net=$!
exec 3> "$fifo"
trap 'exec 3>&-; wait "$net" 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 1 600); do
  grep -q '^ready' "$tmp/net" 2>/dev/null && break
  sleep 0.1
done
seed=$(sed -n 's/^seed //p' "$tmp/net")
echo "fake network: $n nodes, $k neighbours + $j junk addresses per answer${SNAPSHOTS:+, $SNAPSHOTS snapshots each}; seed $seed"
grep -m1 'model name' /proc/cpuinfo | sed 's/.*: /cpu: /'
echo "cpus: $(nproc); $(grep -q avx512ifma /proc/cpuinfo && echo with || echo without) AVX-512 IFMA"
printf '%-28s %-6s %8s %8s %8s %8s %9s\n' binary mode found wall_s nodes/s cpu_s rss_mib
for bin in "${bins[@]}"; do
  for mode in table json; do
    flags=(crawl --allow-unroutable --max-nodes "$n" --concurrency 16 --timeout 10)
    [ "$mode" = json ] && flags+=(--json)
    /usr/bin/time -f '%e %U %S %M' -o "$tmp/time" "$bin" "${flags[@]}" "$seed" > "$tmp/out" 2> "$tmp/err"
    read -r wall user sys rss < "$tmp/time"
    if [ "$mode" = json ]; then
      found=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sum(1 for x in d["nodes"] if x["status"]=="ok"))' "$tmp/out")
    else
      found=$(grep -c ' ok ' "$tmp/out" || true)
    fi
    python3 - "$bin" "$mode" "$found" "$wall" "$user" "$sys" "$rss" <<'EOF'
import sys
b, mode, found, wall, user, sys_, rss = sys.argv[1:]
wall = float(wall)
print(f"{b[-28:]:<28} {mode:<6} {found:>8} {wall:>8.2f} {int(found)/wall if wall else 0:>8.0f} {float(user)+float(sys_):>8.2f} {int(rss)/1024:>9.1f}")
EOF
  done
done
