#!/usr/bin/env bash
# Kernel-side cost per message for small messages, p2p-conn against CometBFT
# Go: syscalls, context switches and TCP segments per message, plus CPU time.
#
#   p2p-conn-lab/scripts/per-message.sh [SIZE] [MIB]     (default 200 16)
#
# Needs perf (apt-get install linux-perf) with syscall tracepoints (run as
# root), and `go` (the Go peers are built by the CLI). TCP segments come from
# /proc/net/snmp, so run it on an otherwise quiet machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
size="${1:-200}"
mib="${2:-16}"
cargo build --release -q -p p2p-conn-lab
bin=target/release/p2p-conn-lab
# Build (or reuse) the Go peers: --baseline name and the release it builds.
go_peers="cometbft-go:v1.0.1 cometbft-go-0.40:v0.40.0 cometbft-go-0.39:v0.39.4 cometbft-go-0.38:v0.38.26"
for pair in $go_peers; do
  "$bin" bench --mib 1 --repeat 1 --baseline "${pair%%:*}" >/dev/null
done
messages=$(( (mib * 1048576 + size - 1) / size ))
events='syscalls:sys_enter_sendto,syscalls:sys_enter_write,syscalls:sys_enter_recvfrom,syscalls:sys_enter_read,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_futex,syscalls:sys_enter_nanosleep,context-switches,task-clock'
segs() { awk '/^Tcp:/ && $0 ~ /[0-9]/ {print $12}' /proc/net/snmp; }

printf '%-30s %9s %7s %7s %7s %7s %7s %7s %9s\n' implementation 'msg/s' writes reads polls futex sleeps ctxsw 'segments'
run() {
  local name=$1; shift
  local before after stat
  before=$(segs)
  stat=$(perf stat -x, -e "$events" "$@" 2>&1 >/tmp/per-message.out)
  after=$(segs)
  python3 - "$name" "$messages" "$((after - before))" "$stat" /tmp/per-message.out <<'PY'
import json, sys
name, messages, segments, stat, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
count = {}
for line in stat.splitlines():
    f = line.split(",")
    if len(f) > 2 and f[0].replace(".", "").isdigit():
        count[f[2]] = float(f[0])
def per(*names):
    return sum(count.get(n, 0) for n in names) / messages
text = open(out).read()
rate = None
for l in text.splitlines():
    l = l.strip()
    if l.startswith("{"):
        d = json.loads(l)
        rate = d["messages"] / d["seconds"]
    elif "msg/s" in l:
        rate = float(l.split("MB/s")[1].split()[0])
print(f"{name:<30} {rate:9.0f} {per('syscalls:sys_enter_sendto','syscalls:sys_enter_write'):7.2f} "
      f"{per('syscalls:sys_enter_recvfrom','syscalls:sys_enter_read'):7.2f} "
      f"{per('syscalls:sys_enter_epoll_wait','syscalls:sys_enter_epoll_pwait'):7.2f} "
      f"{per('syscalls:sys_enter_futex'):7.3f} {per('syscalls:sys_enter_nanosleep'):7.3f} "
      f"{per('context-switches'):7.2f} {segments / messages:9.2f}")
PY
}
run "p2p-conn (std)" "$bin" bench --size "$size" --mib "$mib" --adapter std
run "p2p-conn (tokio)" "$bin" bench --size "$size" --mib "$mib" --adapter tokio
run "p2p-conn (tokio, 1 thread)" "$bin" bench --size "$size" --mib "$mib" --runtime current-thread
for pair in $go_peers; do
  v=${pair##*:}
  run "cometbft-go $v" "target/cometbft-go/$v/cometbft-peer" bench -size "$size" -mib "$mib"
done
GOMAXPROCS=1 run "cometbft-go v1.0.1 (1 proc)" target/cometbft-go/v1.0.1/cometbft-peer bench -size "$size" -mib "$mib"
echo "(per message; writes = sendto+write, reads = recvfrom+read, polls = epoll waits, segments = TCP segments sent, both directions)"
