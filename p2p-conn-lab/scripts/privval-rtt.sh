#!/usr/bin/env bash
# Remote-signer round trips: CometBFT's own SignerClient <-> SignerServer
# with a FilePV (`cometbft-peer privval-bench`: v0.40.0 over tcp:// and
# noise://, v1.0.1 over tcp://) against p2p-conn's SignerClient <->
# SignerEndpoint with a GuardedSigner (`privval-rtt`,
# p2p-conn-lab/src/bin/privval-rtt.rs), in process over loopback TCP, N
# sign-vote requests at increasing heights after a warm-up.
#
#   p2p-conn-lab/scripts/privval-rtt.sh [ROUNDS] [N] [--unix]   (default 5, 2000)
#
# Each round runs every row once, one after the other, so slow phases of
# the machine hit them all alike. The rows: Go v0.40.0 over tcp:// (secret
# connection) and noise:// (libp2p Noise), Go v1.0.1 over tcp://; p2p-conn
# over tcp:// and noise:// with its slot state file (the default for new
# state files: one fdatasync per signature), over tcp:// with a
# priv_validator_state.json (a new file, fsync, rename, folder fsync), and
# over tcp:// with `--no-persist` (the same key and endpoints, but no guard
# and no state file: the transport without the file system; not a
# validator); and two rows in two processes, CometBFT's node side in one
# and a signer dialing it from another, what a CometBFT node sees of each
# signer: "go v0.40.0 + go, 2 procs" (CometBFT's own SignerServer with a
# FilePV) and "go v0.40.0 + p2p-conn" (p2p-conn's signer). With --unix every row runs over a Unix socket (plaintext)
# instead, without the noise rows. Every run prints, per request: the round
# trip (the SignerClient's sign-vote call, request sent to response
# decoded), the time inside the signer (a timing wrapper around the FilePV
# or GuardedSigner), and their difference, "transport" (framing,
# encryption, the sockets, the endpoint's own work). The table gives each
# column's median over the rounds of the runs' p50 and p99.
#
# The "pkcs11" rows are p2p-conn's signer with the validator key in a
# SoftHSM 2 token (a fresh token and key in a temporary folder, imported
# as docs/operator-manual.md says), named by its PKCS#11 URI (`--key`):
# in process, and as the second process of "go v0.40.0 + p2p-conn".
#
# FilePV (both lines) writes its state file to a temporary file opened
# with O_SYNC and renames it (libs/tempfile.WriteFileAtomic: one synced
# write, the directory not synced). Needs `go`, python3 and SoftHSM 2
# (softhsm2-util, /usr/lib/softhsm/libsofthsm2.so).
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds="${1:-5}"
n="${2:-2000}"
unix=()
if [ "${3:-}" = --unix ]; then unix=(-unix); fi
export GOTOOLCHAIN=local
target="${CARGO_TARGET_DIR:-target}"

cargo build --release -q -p p2p-conn-lab --bin privval-rtt
rust="$target/release/privval-rtt"

tmp=$(mktemp -d)
out="$tmp/runs"
trap 'rm -rf "$tmp"' EXIT
# The same build flags as interop/src/cometbft_go.rs (GoVersion::go_flags).
(cd interop/cometbft-go &&
  go build -trimpath -mod=readonly -modfile=go.v0.40.mod -tags=cometbft_v040 -o "$tmp/peer-v0.40.0" . &&
  go build -trimpath -mod=readonly -modfile=go.mod -tags=cometbft_v1 -o "$tmp/peer-v1.0.1" .)

# A SoftHSM 2 token of its own, with a fresh Ed25519 key imported as a
# PKCS#8 PEM (its 16-byte header, then the 32-byte seed).
hsm="$tmp/softhsm"
mkdir -p "$hsm/tokens"
printf 'directories.tokendir = %s\nobjectstore.backend = file\nlog.level = ERROR\n' "$hsm/tokens" >"$hsm/softhsm2.conf"
export SOFTHSM2_CONF="$hsm/softhsm2.conf"
softhsm2-util --init-token --free --label bench --so-pin 12345678 --pin 123456 >/dev/null
(umask 077
  { echo '-----BEGIN PRIVATE KEY-----'
    { printf '\x30\x2e\x02\x01\x00\x30\x05\x06\x03\x2b\x65\x70\x04\x22\x04\x20'; head -c 32 /dev/urandom; } | base64
    echo '-----END PRIVATE KEY-----'; } >"$hsm/key.pem"
  printf '123456\n' >"$hsm/pin")
softhsm2-util --import "$hsm/key.pem" --token bench --label validator --id 01 --pin 123456 >/dev/null
key="pkcs11:token=bench;object=validator?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-source=file:$hsm/pin"
# Extra arguments for p2p-conn's signer in mixed_run.
signer_extra=()

go_run() { # LABEL VERSION ARGS...
  local label="$1" v="$2"
  shift 2
  printf '%s\t%s\n' "$("$tmp/peer-$v" privval-bench -n "$n" "$@")" "$label" >>"$out"
}
# CometBFT's node side (privval-bench -external) with a signer in a second
# process dialing it: p2p-conn's (privval-rtt --serve) or CometBFT's own
# SignerServer with a FilePV (privval-bench -serve), what a CometBFT node
# sees of each signer. The node times each round trip, the signer each
# signature; the two lists pair by index into the same JSON line as the
# other rows.
mixed_run() { # LABEL SIGNER(rust|go) ARGS...
  local label="$1" signer="$2"
  shift 2
  "$tmp/peer-v0.40.0" privval-bench -n "$n" -external "$@" >"$tmp/node.out" 2>"$tmp/node.err" &
  local node=$! addr=""
  for _ in $(seq 200); do
    addr=$(sed -n 's/^listening //p' "$tmp/node.err")
    [ -n "$addr" ] && break
    sleep 0.05
  done
  if [ "$signer" = rust ]; then
    "$rust" --serve "$addr" --n "$n" ${signer_extra[@]+"${signer_extra[@]}"} >"$tmp/signer.out"
  else
    "$tmp/peer-v0.40.0" privval-bench -serve "$addr" -n "$n" >"$tmp/signer.out"
  fi
  wait "$node"
  python3 - "$tmp/node.out" "$tmp/signer.out" "$label" >>"$out" <<'EOF'
import json, sys
node = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
signer = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])
def pct(xs, q):
    s = sorted(xs)
    return s[max(0, min(int(q * len(s) + 0.999999) - 1, len(s) - 1))]
t = [r - x for r, x in zip(node["rtts_us"], signer["signs_us"])]
print(json.dumps({"rtt_p50_us": node["rtt_p50_us"], "rtt_p99_us": node["rtt_p99_us"],
                  "sign_p50_us": signer["sign_p50_us"], "sign_p99_us": signer["sign_p99_us"],
                  "transport_p50_us": pct(t, 0.5), "transport_p99_us": pct(t, 0.99)})
      + "\t" + sys.argv[3])
EOF
}
rust_run() { # LABEL ARGS...
  local label="$1"
  shift
  printf '%s\t%s\n' "$("$rust" --n "$n" "$@")" "$label" >>"$out"
}
for round in $(seq "$rounds"); do
  if [ ${#unix[@]} -gt 0 ]; then
    go_run "go v0.40.0" v0.40.0 -unix
    go_run "go v1.0.1" v1.0.1 -unix
    mixed_run "go v0.40.0 + go, 2 procs" go -unix
    mixed_run "go v0.40.0 + p2p-conn" rust -unix
    signer_extra=(--key "$key")
    mixed_run "go v0.40.0 + p2p-conn pkcs11" rust -unix
    signer_extra=()
    rust_run "p2p-conn" --unix
    rust_run "p2p-conn pkcs11" --unix --key "$key"
    rust_run "p2p-conn json state" --unix --state json
    rust_run "p2p-conn no-persist" --unix --no-persist
  else
    go_run "go v0.40.0" v0.40.0
    go_run "go v0.40.0 noise" v0.40.0 -noise
    go_run "go v1.0.1" v1.0.1
    mixed_run "go v0.40.0 + go, 2 procs" go
    mixed_run "go v0.40.0 + p2p-conn" rust
    signer_extra=(--key "$key")
    mixed_run "go v0.40.0 + p2p-conn pkcs11" rust
    signer_extra=()
    rust_run "p2p-conn"
    rust_run "p2p-conn pkcs11" --key "$key"
    rust_run "p2p-conn noise" --noise
    rust_run "p2p-conn json state" --state json
    rust_run "p2p-conn no-persist" --no-persist
  fi
  echo "round $round of $rounds done" >&2
done

echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo "n=$n per run, $rounds rounds, $([ ${#unix[@]} -gt 0 ] && echo 'Unix socket' || echo 'loopback TCP: secret connection, or noise')"
python3 - "$out" <<'EOF'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    text, who = line.rstrip("\n").split("\t")
    runs.setdefault(who, []).append(json.loads(text))
cols = ["rtt_p50_us", "rtt_p99_us", "sign_p50_us", "sign_p99_us",
        "transport_p50_us", "transport_p99_us"]
print("median over rounds, microseconds")
print(f"{'implementation':<30}" + "".join(f"{c[:-3]:>15}" for c in cols))
for who in ["go v0.40.0", "go v0.40.0 noise", "go v1.0.1",
            "go v0.40.0 + go, 2 procs", "go v0.40.0 + p2p-conn",
            "go v0.40.0 + p2p-conn pkcs11",
            "p2p-conn", "p2p-conn pkcs11", "p2p-conn noise",
            "p2p-conn json state", "p2p-conn no-persist"]:
    rs = runs.get(who, [])
    if not rs:
        continue
    print(f"{who:<30}" + "".join(f"{statistics.median(r[c] for r in rs):>15g}" for c in cols))
EOF
