#!/usr/bin/env bash
# A file copy through the CLI beside `p2p-conn-lab bench` for the same bytes and
# message size, so the two can be compared in one run on one machine.
#
#   p2p-conn-lab/scripts/cli-copy.sh [MIB] [ROUNDS]     (default 256 MiB, 3 rounds)
#   BACKEND=avx2 p2p-conn-lab/scripts/cli-copy.sh ...  (every p2p-conn end and bench
#                                                  on that AEAD backend)
#
# Copies MIB MiB (a file in $TMPDIR) over loopback:
#   dial sends      p2p-conn dial < file       ->  p2p-conn listen > /dev/null
#   listen sends    p2p-conn listen < file     ->  p2p-conn dial > /dev/null
#   to Go           p2p-conn dial < file       ->  cometbft-peer listen > /dev/null
#   from Go         cometbft-peer dial < file  ->  p2p-conn listen > /dev/null
# (the receiving side's stdin is /dev/null; cometbft-peer is CometBFT v1.0.1's
# SecretConnection, interop/cometbft-go, writing 64 KiB per Write as the CLI
# reads 64 KiB of stdin per message), and runs `p2p-conn-lab bench --size 65536
# --mib MIB --baseline cometbft-go` for the same bytes in 64 KiB messages.
# Rounds alternate all of them. A copy's MB/s is MIB MiB over the wall time
# from the sender's start to both processes' exit (the handshake included,
# as bench's is not); its CPU is user + sys of both processes (wait4). The
# table gives medians, then each copy's MB/s over bench's p2p-conn row (and,
# for the copies with a Go end, over bench's Go row: Go's SecretConnection on
# both ends). Needs `go` (the lab builds the Go peer) and python3.
set -euo pipefail
cd "$(dirname "$0")/../.."
mib="${1:-256}"
rounds="${2:-3}"
cargo build --release -q -p p2p-conn-cli -p p2p-conn-lab
bin=target/release/p2p-conn
lab=target/release/p2p-conn-lab
# Builds the Go peer (target/cometbft-go/v1.0.1/cometbft-peer) if needed.
"$lab" bench --mib 1 --baseline cometbft-go >/dev/null
go=target/cometbft-go/v1.0.1/cometbft-peer
file=$(mktemp)
trap 'rm -f "$file"' EXIT
head -c "$((mib << 20))" /dev/urandom >"$file"

python3 - "$bin" "$go" "$file" "$mib" "$rounds" "${BACKEND:-}" <<'PY'
import json, os, statistics, subprocess, sys, time

bin, go, path, mib, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
backend = ["--backend", sys.argv[6]] if sys.argv[6] else []
size = mib << 20
null = subprocess.DEVNULL

def cpu(ru):
    return ru.ru_utime + ru.ru_stime

def copy(listener, dialer, listener_sends):
    """One copy: the listener's argv, the dialer's (without the address),
    and which of them reads the file. Returns (MB/s, CPU s)."""
    with open(path, "rb") as f:
        l = subprocess.Popen(listener, stdin=f if listener_sends else null,
                             stdout=null, stderr=subprocess.PIPE)
        line = l.stderr.readline().decode()
        if not line.startswith("listening "):
            sys.exit(f"{listener}: first stderr line {line!r}")
        addr = line.split()[1]
        t0 = time.perf_counter()
        d = subprocess.Popen(dialer + [addr], stdin=null if listener_sends else f,
                             stdout=null, stderr=subprocess.DEVNULL)
        ends, used = {}, 0.0
        while len(ends) < 2:
            pid, status, ru = os.wait4(-1, 0)
            if pid in (l.pid, d.pid):
                ends[pid] = time.perf_counter()
                used += cpu(ru)
                if os.waitstatus_to_exitcode(status) != 0:
                    err = l.stderr.read().decode() if pid == l.pid else ""
                    sys.exit(f"{'listener' if pid == l.pid else 'dialer'} failed: {err}")
        l.returncode = d.returncode = 0
        l.stderr.close()
        wall = max(ends.values()) - t0
    return size / wall / 1e6, used

ours_listen = [bin, "listen", "127.0.0.1:0"] + backend
ours_dial = [bin, "dial"] + backend
go_listen = [go, "listen", "-chunk", "65536", "127.0.0.1:0"]
go_dial = [go, "dial", "-chunk", "65536"]
cases = [
    ("p2p-conn -> p2p-conn, dial sends", ours_listen, ours_dial, False),
    ("p2p-conn -> p2p-conn, listen sends", ours_listen, ours_dial, True),
    ("p2p-conn -> Go v1.0.1 (dial sends)", go_listen, ours_dial, False),
    ("Go v1.0.1 -> p2p-conn (dial sends)", ours_listen, go_dial, False),
]
rows = {name: [] for name, *_ in cases}
bench = {}
for r in range(rounds):
    for name, l, d, ls in cases:
        rows[name].append(copy(l, d, ls))
    out = subprocess.run([bin, "bench", "--json", "--size", "65536", "--mib", str(mib),
                          "--baseline", "cometbft-go"] + backend, capture_output=True, check=True, text=True)
    for line in out.stdout.splitlines():
        row = json.loads(line)
        if row["kind"] == "run":
            bench.setdefault(row["impl"], []).append((row["mb_per_s"], row["cpu_s_per_gib"] * size / (1 << 30)))
    print(f"round {r + 1} of {rounds} done", file=sys.stderr)

def med(xs, i):
    return statistics.median(x[i] for x in xs)

print(f"{mib} MiB in 64 KiB messages over loopback, median of {rounds}"
      + (f", backend {sys.argv[6]}" if sys.argv[6] else ""))
print("| run | MB/s | CPU s (both ends) |")
print("|---|---:|---:|")
for name, xs in list(bench.items()) + list(rows.items()):
    label = f"bench, {name}" if name in bench else f"copy, {name}"
    print(f"| {label} | {med(xs, 0):.0f} | {med(xs, 1):.2f} |")
# Each copy against bench's p2p-conn row, and the copies with a Go end
# against bench's Go row too (the Go end bounds those).
ours = next(v for k, v in bench.items() if k.startswith("p2p-conn"))
theirs = next((v for k, v in bench.items() if k.startswith("cometbft-go")), None)
for name, xs in rows.items():
    line = f"{name}: copy / bench p2p-conn {med(xs, 0) / med(ours, 0):.2f}"
    if "Go" in name and theirs:
        line += f", copy / bench Go {med(xs, 0) / med(theirs, 0):.2f}"
    print(line)
PY
