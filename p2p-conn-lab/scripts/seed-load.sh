#!/usr/bin/env bash
# p2p-conn's seed against a CometBFT node in seed_mode, side by side: the
# same address book (B good addresses), the same load (`pex-load`: C
# clients at once for S seconds, each visit a fresh node's: handshake,
# NodeInfo, PexRequest, PexAddrs, hang up), alternating for R rounds.
# Reports per seed and round: visits per second, visit latency p50/p99,
# addresses per answer, the seed process's CPU per visit and its CPU use
# (100 % = one core busy), its RSS idle and at peak under load, (peak -
# idle) / C as RSS per connection, and the load generator's own CPU per
# visit.
#
#   p2p-conn-lab/scripts/seed-load.sh [C] [S] [B] [R] [COMETBFT_LINE]
#   SEED_LOAD_PIN=1 p2p-conn-lab/scripts/seed-load.sh ...
#   SEED_LOAD_OURS=path/to/p2p-conn p2p-conn-lab/scripts/seed-load.sh ...
#
# Defaults: 16 clients, 10 s, 1000 addresses, 3 rounds, v0.38.26 (the
# binary the test suite builds into target/cometbft-node/); p2p-conn is
# this tree's release build unless SEED_LOAD_OURS names another (an
# earlier build, for a before/after). Loopback only.
#
# Two methods, the same for both seeds. Shared (the default): the seed
# and the load generator share every core, so the load generator's own
# CPU (about as much per visit as a seed's: it runs the same handshake)
# is taken from the seed's. Pinned (SEED_LOAD_PIN=1): each seed runs on
# core 0 and the load generator on core 1 (`taskset`), as in production
# where the visitors are other machines; each runtime then sizes itself
# to one CPU (Go's GOMAXPROCS, p2p-conn's worker threads). In the pinned
# method a seed whose CPU use stays below 100 % was not saturated: the
# load generator was the bound, and the seed's capacity is 1 / its CPU
# per visit.
set -euo pipefail
cd "$(dirname "$0")/../.."
c="${1:-16}"
s="${2:-10}"
b="${3:-1000}"
rounds="${4:-3}"
line="${5:-v0.38.26}"
target="${CARGO_TARGET_DIR:-target}"
cometbft="$target/cometbft-node/$line/cometbft"
[ -x "$cometbft" ] || { echo "no $cometbft: run the test suite (or cargo test -p p2p-conn-cli --test it seed::) to build it" >&2; exit 1; }
cargo build --release -q -p p2p-conn-lab --bin pex-load
cargo build --release -q -p p2p-conn-cli
load="$target/release/pex-load"
if [ "${SEED_LOAD_PIN:-0}" = 1 ]; then
  [ "$(nproc --all)" -ge 2 ] || { echo "SEED_LOAD_PIN=1 needs 2 cores" >&2; exit 1; }
  on_seed=(taskset -c 0); on_load=(taskset -c 1); method="pinned: seed on core 0, load on core 1"
else
  on_seed=(); on_load=(); method="shared: seed and load on all $(nproc) cores"
fi
ours="${SEED_LOAD_OURS:-$target/release/p2p-conn}"
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$tmp"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# The Go seed's home, chain and node ID.
"$cometbft" init --home "$tmp/go" > /dev/null 2>&1
chain=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["chain_id"])' "$tmp/go/config/genesis.json")
go_p2p=$(free_port); go_rpc=$(free_port); our_p2p=$(free_port)
# One book for both: B good addresses at routable IPs where nothing runs
# (they are handed out, never dialed during the run).
python3 - "$b" "$tmp/book.json" <<'EOF'
import json, os, sys, datetime
n, path = int(sys.argv[1]), sys.argv[2]
now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")
addrs = []
for i in range(n):
    na = {"id": os.urandom(20).hex(), "ip": f"1.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255 or 1}", "port": 26656}
    addrs.append({"addr": na, "src": na, "buckets": [i % 64], "attempts": 0, "bucket_type": 2,
                  "last_attempt": now, "last_success": now, "last_ban_time": "0001-01-01T00:00:00Z"})
json.dump({"key": os.urandom(24).hex(), "addrs": addrs}, open(path, "w"))
EOF
cp "$tmp/book.json" "$tmp/go-book.json"
cp "$tmp/book.json" "$tmp/our-book.json"
python3 - "$tmp/go/config/config.toml" "$go_p2p" "$go_rpc" "$tmp/go-book.json" <<'EOF'
import re, sys
path, p2p, rpc, book = sys.argv[1:]
t = open(path).read()
def setk(section, key, value):
    global t
    pat = re.compile(r'(\[' + re.escape(section) + r'\][^\[]*?\n)' + re.escape(key) + r' = [^\n]*')
    t, n = pat.subn(lambda m: m.group(1) + f'{key} = {value}', t, count=1)
    assert n == 1, (section, key)
setk("rpc", "laddr", f'"tcp://127.0.0.1:{rpc}"')
setk("p2p", "laddr", f'"tcp://127.0.0.1:{p2p}"')
setk("p2p", "seed_mode", "true")
setk("p2p", "addr_book_file", f'"{book}"')
setk("p2p", "addr_book_strict", "false")
setk("p2p", "allow_duplicate_ip", "true")
setk("p2p", "max_num_inbound_peers", "200")
open(path, "w").write(t)
EOF
"${on_seed[@]}" "$cometbft" start --home "$tmp/go" --proxy_app=kvstore --log_level=error > "$tmp/go.log" 2>&1 &
go_pid=$!; pids+=("$go_pid")
go_id=$("$cometbft" show-node-id --home "$tmp/go")
"$ours" keygen --out "$tmp/our_key.json" > "$tmp/our_id"
our_id=$(cat "$tmp/our_id")
"${on_seed[@]}" "$ours" seed --listen "127.0.0.1:$our_p2p" --network "$chain" --key "$tmp/our_key.json" \
  --book "$tmp/our-book.json" --max-inbound 200 --max-per-ip 200 --recrawl-every 3600 \
  > "$tmp/ours.log" 2>&1 &
our_pid=$!; pids+=("$our_pid")
for port in "$go_p2p" "$our_p2p"; do
  for _ in $(seq 1 100); do
    python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' "$port" 2>/dev/null && break
    sleep 0.2
  done
done
sleep 2

rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

echo "seed load: $c clients x ${s} s, book of $b good addresses, $rounds rounds, CometBFT $line seed_mode against p2p-conn seed"
grep -m1 'model name' /proc/cpuinfo | sed 's/.*: /cpu: /'
echo "cpus: $(nproc); $(grep -q avx512ifma /proc/cpuinfo && echo with || echo without) AVX-512 IFMA; method $method; load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-10s %5s %10s %8s %8s %9s %10s %6s %9s %9s %10s %11s\n' seed round visits/s p50_ms p99_ms addrs cpu_ms/vis cpu% rss_idle rss_peak kib/conn load_ms/vis
for r in $(seq 1 "$rounds"); do
  for who in go ours; do
    if [ "$who" = go ]; then pid=$go_pid; seed="$go_id@127.0.0.1:$go_p2p"; else pid=$our_pid; seed="$our_id@127.0.0.1:$our_p2p"; fi
    idle=$(rss_kib "$pid"); t0=$(cpu_ticks "$pid"); w0=$(date +%s.%N)
    "${on_load[@]}" "$load" "$seed" "$chain" "$c" "$s" > "$tmp/load.out" &
    lp=$!
    peak=$idle
    while kill -0 "$lp" 2>/dev/null; do
      cur=$(rss_kib "$pid"); [ "$cur" -gt "$peak" ] && peak=$cur
      sleep 0.1
    done
    wait "$lp"
    t1=$(cpu_ticks "$pid"); w1=$(date +%s.%N)
    out=$(cat "$tmp/load.out")
    python3 - "$who" "$r" "$out" "$idle" "$peak" "$t0" "$t1" "$hz" "$c" "$w0" "$w1" <<'EOF'
import re, sys
who, r, out, idle, peak, t0, t1, hz, c, w0, w1 = sys.argv[1:]
m = dict(re.findall(r'(visits|rate|p50|p99|failures|addrs/answer|ticks) ([\d.]+)', out))
visits = int(m["visits"])
cpu_s = (int(t1) - int(t0)) / int(hz)
cpu_ms = cpu_s * 1e3 / max(visits, 1)
busy = 100 * cpu_s / (float(w1) - float(w0))
load_ms = int(m["ticks"]) / int(hz) * 1e3 / max(visits, 1)
per = (int(peak) - int(idle)) / int(c)
print(f"{who:<10} {r:>5} {float(m['rate']):>10.1f} {float(m['p50']):>8.2f} {float(m['p99']):>8.2f} {float(m['addrs/answer']):>9.1f} {cpu_ms:>10.3f} {busy:>6.0f} {int(idle)/1024:>8.1f}M {int(peak)/1024:>8.1f}M {per:>10.1f} {load_ms:>11.3f}" + (f"  failures {m['failures']}: {out.split('(first failure: ')[-1]}" if m['failures'] != '0' else ""))
EOF
  done
done
