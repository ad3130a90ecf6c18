#!/usr/bin/env bash
# Where one command's CPU goes: perf samples grouped into AEAD
# (ChaCha20-Poly1305 in any library), kernel, memory copies and compares, and
# the rest.
#
#   p2p-conn-lab/scripts/cpu-breakdown.sh COMMAND [ARGS...]
#   e.g. p2p-conn-lab/scripts/cpu-breakdown.sh target/release/p2p-conn-lab bench --size 65536 --mib 1024
#        p2p-conn-lab/scripts/cpu-breakdown.sh target/cometbft-go/v1.0.1/cometbft-peer bench -size 65536 -mib 1024
#
# Needs perf (apt-get install linux-perf) and python3. Multiply the shares by
# the command's own CPU seconds per GiB for seconds per GiB.
set -euo pipefail
data=$(mktemp)
trap 'rm -f "$data"' EXIT
perf record -q -e cpu-clock -F 2000 -o "$data" "$@"
perf report -i "$data" --no-children --sort dso,symbol -g none --percent-limit 0 2>/dev/null |
python3 -c '
import re, sys
cats = {"aead": 0.0, "kernel": 0.0, "copy/compare": 0.0, "other user": 0.0}
for line in sys.stdin:
    m = re.match(r"\s+([\d.]+)%\s+(\S+)\s+\[(.)\]\s+(\S+)", line)
    if not m:
        continue
    pct, kind, sym = float(m.group(1)), m.group(3), m.group(4)
    if kind == "k":
        cats["kernel"] += pct
    elif re.search(r"chacha|poly|aead|Cipher::|seal|open_in_place", sym, re.I):
        cats["aead"] += pct
    elif re.search(r"mem(cmp|move|cpy|set|eqbody)", sym):
        cats["copy/compare"] += pct
    else:
        cats["other user"] += pct
print("  ".join(f"{k} {v:.1f}%" for k, v in cats.items()))
'
