#!/usr/bin/env bash
# Instructions and clock reads per message on the send queue's path, under
# callgrind (deterministic: they do not depend on the machine's noise). One
# fixed workload: `p2p-conn-lab bench --producers P` (through `io::queue::Sender`,
# both ends in one process, every byte verified) on the current-thread
# runtime with the ring backend (valgrind has no AVX-512).
#
#   p2p-conn-lab/scripts/queue-callgrind.sh [SIZE] [MIB] [PRODUCERS]   (default 1024 4 4)
#   BIN=path/to/p2p-conn-lab p2p-conn-lab/scripts/queue-callgrind.sh        (another build)
#   SKIP_RUN=1 OUT=file p2p-conn-lab/scripts/queue-callgrind.sh ...     (re-read a profile)
#
# Prints instructions per message: in total (both ends, the bench's own
# message making and checking included, the handshakes taken out), in the
# AEAD (ring's seal and open), beyond it, and inclusive in the producer's
# `Sender::send`, the writer's per-batch accounting and malloc/free; and
# clock reads (`clock_gettime` calls) per message. Callgrind counts user
# space only: the kernel's copies are not in these figures.
set -euo pipefail
cd "$(dirname "$0")/../.."
size="${1:-1024}"
mib="${2:-4}"
producers="${3:-4}"
if [ -z "${BIN:-}" ]; then
  cargo build --release -q -p p2p-conn-lab
  BIN=target/release/p2p-conn-lab
fi
out="${OUT:-/tmp/queue-callgrind.out}"
[ -n "${SKIP_RUN:-}" ] || valgrind --tool=callgrind --callgrind-out-file="$out" "$BIN" bench --size "$size" --mib "$mib" \
  --producers "$producers" --runtime current-thread --backend ring --repeat 1 > /tmp/queue-callgrind.bench 2>&1
python3 - "$out" "$size" "$mib" <<'PY'
import re, subprocess, sys
path, size, mib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
messages = (mib * 1048576 + size - 1) // size
total = 0
for line in open(path):
    if line.startswith("summary:") or line.startswith("totals:"):
        total = int(line.split()[1])
# Calls into clock_gettime, from the call records (cfn= then calls=).
names, calls, cfn = {}, 0, None
for line in open(path):
    m = re.match(r"c?fn=\((\d+)\)(?: (.*))?", line)
    if m:
        if m.group(2):
            names[m.group(1)] = m.group(2)
        if line.startswith("cfn="):
            cfn = names.get(m.group(1), "")
        continue
    if line.startswith("calls=") and cfn is not None:
        if re.search(r"(^|[^_a-z])(__)?clock_gettime", cfn) and "vdso" not in cfn:
            calls += int(line.split("=")[1].split()[0])
        cfn = None
print(f"{size} B x {messages} messages, {sys.argv[3]} MiB, current-thread, ring backend")
print(f"  total            {total / messages:10.0f} Ir/message ({total} Ir)")
ann = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", path],
                     capture_output=True, text=True).stdout
# Inclusive cost per function, summed over the files its code came from
# (callgrind lists inlined code per file).
funcs = {}
for l in ann.splitlines():
    m = re.match(r"\s*([\d,]+) \([ \d.]+%\)\s+[^:]*:(.*?)(?: \[[^\]]*\])?$", l)
    if m:
        funcs[m.group(2)] = funcs.get(m.group(2), 0) + int(m.group(1).replace(",", ""))
def inclusive(pat):
    """Largest inclusive count of a function whose name matches `pat`."""
    return max([v for f, v in funcs.items() if re.fullmatch(pat, f)] or [0])
seal_aead = inclusive(r".*chacha20_poly1305_seal_avx2")
aead = seal_aead + inclusive(r".*chacha20_poly1305_open_avx2")
handshake = inclusive(r"p2p_conn::io::tokio::run_handshake::\{\{closure\}\}")
alloc = sum(inclusive(f) for f in ("malloc", "free", "realloc"))
send = inclusive(r"p2p_conn::io::queue::sender::Sender::send(_bundle)?::\{\{closure\}\}")
account = inclusive(r"p2p_conn::io::queue::writer::account")
def row(label, ir):
    print(f"  {label:<34} {ir / messages:8.0f} Ir/message")
row("total (both ends, handshakes out)", total - handshake)
row("AEAD (ring seal + open)", aead)
row("beyond the AEAD", total - handshake - aead)
row("  producer: Sender::send", send)
row("  writer: account (counters, room)", account)
row("  malloc + free + realloc", alloc)
print(f"  clock reads      {calls / messages:10.3f} per message ({calls} clock_gettime calls)")
PY
