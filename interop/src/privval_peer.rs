//! The Go peer's remote-signer modes (`interop/cometbft-go/privval_remote.go`)
//! for the privval endpoint tests and benchmarks: CometBFT's own privval
//! package at a release line, as a signer ([`go_privval_signer`]: its
//! `SignerServer` with a `FilePV`, dialing the node), as a node
//! ([`go_privval_node`]: `SignerListenerEndpoint` and `SignerClient`, which
//! signs and verifies a fixed sequence and reports in JSON), and as an
//! in-process benchmark ([`go_privval_bench`]). Binaries come from
//! [`crate::go_peer::go_peer`].
//!
//! The helpers parse what the modes print (`pubkey <hex>`, `listening
//! <addr>`, one JSON line) and fail by panicking, with the process's stderr,
//! when a line is missing or malformed. They check nothing about the
//! results: the tests do.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::go_peer::SHORT_RUN;
use crate::process::{run_ok, Feed, Finished, Proc};

/// A CometBFT `priv_validator_key.json` for the key of `seed`, as FilePV
/// writes it (`address`, `pub_key`, `priv_key`), and that key.
pub fn validator_key_json(seed: [u8; 32]) -> (String, p2p_conn::Identity) {
    use base64::Engine;
    let id = p2p_conn::Identity::from_seed(&seed);
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let public = id.public_key();
    let mut private = seed.to_vec();
    private.extend_from_slice(public.as_bytes());
    let json = format!(
        "{{\n  \"address\": \"{}\",\n  \"pub_key\": {{\n    \"type\": \"tendermint/PubKeyEd25519\",\n    \"value\": \"{}\"\n  }},\n  \"priv_key\": {{\n    \"type\": \"tendermint/PrivKeyEd25519\",\n    \"value\": \"{}\"\n  }}\n}}",
        to_hex(id.node_id().as_bytes()).to_uppercase(),
        b64(public.as_bytes()),
        b64(&private),
    );
    (json, id)
}

/// Lowercase or uppercase hex to bytes; `None` if it is not hex.
pub fn from_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Lowercase hex of `bytes`.
pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `cometbft-peer privval-keygen -key KEY -state STATE`: a new
/// `priv_validator_key.json` and `priv_validator_state.json` written by
/// CometBFT's `GenFilePV`, and the public key it printed.
pub fn go_privval_keygen(bin: &Path, key: &Path, state: &Path) -> Vec<u8> {
    let args: Vec<OsString> = vec![
        "privval-keygen".into(),
        "-key".into(),
        key.into(),
        "-state".into(),
        state.into(),
    ];
    let out = run_ok(bin, &args, SHORT_RUN).stdout_text();
    from_hex(&out).unwrap_or_else(|| panic!("privval-keygen printed {out:?}, not a hex key"))
}

/// A running `cometbft-peer privval-signer`: CometBFT's `SignerServer`
/// dialing a node. Its stdin stays open (it serves) until it is stopped or
/// dropped, which kills it.
pub struct GoSigner {
    pub proc: Proc,
    /// The public key it announced (`pubkey <hex>` on stderr).
    pub public_key: Vec<u8>,
}

/// Start `cometbft-peer privval-signer -addr ADDR -key KEY -state STATE
/// -chain-id CHAIN` (the key files are generated first if missing) and read
/// its `pubkey` line by `deadline`. On `noise://` (v0.40), `noise_key` is
/// its libp2p identity (`-noise-key`, a node_key.json).
pub fn go_privval_signer(
    bin: &Path,
    addr: &str,
    key: &Path,
    state: &Path,
    chain_id: &str,
    noise_key: Option<&Path>,
    deadline: Instant,
) -> GoSigner {
    let mut args: Vec<OsString> = vec![
        "privval-signer".into(),
        "-addr".into(),
        addr.into(),
        "-key".into(),
        key.into(),
        "-state".into(),
        state.into(),
        "-chain-id".into(),
        chain_id.into(),
    ];
    if let Some(k) = noise_key {
        args.extend(["-noise-key".into(), k.into()]);
    }
    // The signer writes nothing on stdout: its stdin stays open until it
    // exits or is killed.
    let mut proc = Proc::spawn(bin, &args, Feed::AfterOutput(usize::MAX, Vec::new()));
    let line = proc.next_line(deadline);
    let public_key = match line.strip_prefix("pubkey ").and_then(from_hex) {
        Some(key) => key,
        None => proc.fail(&format!("first stderr line is {line:?}, not `pubkey HEX`")),
    };
    GoSigner { proc, public_key }
}

impl GoSigner {
    /// Fail if the signer has exited (it serves until stopped).
    pub fn check_running(&mut self, doing: &str) {
        self.proc.check_running(doing);
    }

    /// Kill it; its status and stderr, for a diagnostic.
    pub fn stop(self) -> String {
        self.proc.stop(Duration::ZERO)
    }
}

/// What `cometbft-peer privval-node` asks of a signer.
#[derive(Clone, Debug)]
pub struct NodeRun {
    /// `tcp://127.0.0.1:0` (a secret connection), `unix://PATH` or, at
    /// v0.40, `noise://SIGNER_PEER_ID@127.0.0.1:0`.
    pub addr: String,
    pub chain_id: String,
    /// Heights: a proposal, a prevote and a precommit at each.
    pub n: u32,
    /// A non-empty vote extension on the precommits (v0.38 and later).
    pub extensions: bool,
    /// How long the node waits for the signer to connect.
    pub wait: Duration,
    /// On `noise://`, the node's key (`-noise-key`, a node_key.json; a
    /// fresh key without).
    pub noise_key: Option<PathBuf>,
}

impl NodeRun {
    /// Over loopback TCP, `n` heights, no extension payload, a minute's
    /// wait.
    pub fn tcp(chain_id: &str, n: u32) -> NodeRun {
        NodeRun {
            addr: "tcp://127.0.0.1:0".into(),
            chain_id: chain_id.into(),
            n,
            extensions: false,
            wait: Duration::from_secs(60),
            noise_key: None,
        }
    }
}

/// A running `cometbft-peer privval-node`, listening on `addr`.
pub struct GoNode {
    pub proc: Proc,
    /// Where it listens, as the signer dials it (`tcp://127.0.0.1:PORT`,
    /// `unix://PATH`, `noise://NODE_PEER_ID@127.0.0.1:PORT`).
    pub addr: String,
}

/// privval-node's JSON line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeReport {
    /// The public key its `SignerClient` got.
    pub public_key: Vec<u8>,
    pub votes: u64,
    pub proposals: u64,
    /// Signatures (votes, proposals) CometBFT's code verified.
    pub verified: u64,
    /// Whether the conflicting precommit was refused.
    pub double_sign_refused: bool,
    pub rtt_p50_us: u64,
    pub rtt_p99_us: u64,
    /// What failed, `""` if nothing did.
    pub error: String,
}

fn field_u64(v: &Value, name: &str, line: &str) -> u64 {
    v.get(name)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("no number {name:?} in {line:?}"))
}

impl NodeReport {
    /// Parse privval-node's JSON line.
    pub fn parse(line: &str) -> NodeReport {
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("privval-node printed {line:?}: {e}"));
        let text = |name: &str| {
            v.get(name)
                .and_then(Value::as_str)
                .unwrap_or_else(|| panic!("no string {name:?} in {line:?}"))
                .to_string()
        };
        let key = text("pubkey");
        let rtt = v
            .get("rtt_us")
            .unwrap_or_else(|| panic!("no rtt_us in {line:?}"));
        NodeReport {
            public_key: from_hex(&key).unwrap_or_else(|| panic!("pubkey {key:?} is not hex")),
            votes: field_u64(&v, "votes", line),
            proposals: field_u64(&v, "proposals", line),
            verified: field_u64(&v, "verified", line),
            double_sign_refused: v
                .get("double_sign_refused")
                .and_then(Value::as_bool)
                .unwrap_or_else(|| panic!("no double_sign_refused in {line:?}")),
            rtt_p50_us: field_u64(rtt, "p50", line),
            rtt_p99_us: field_u64(rtt, "p99", line),
            error: text("error"),
        }
    }
}

/// Start `cometbft-peer privval-node` as `run` says and read its
/// `listening ADDR` line by `deadline`.
pub fn go_privval_node(bin: &Path, run: &NodeRun, deadline: Instant) -> GoNode {
    let mut args: Vec<OsString> = vec![
        "privval-node".into(),
        "-addr".into(),
        (&run.addr).into(),
        "-chain-id".into(),
        (&run.chain_id).into(),
        "-n".into(),
        run.n.to_string().into(),
        "-wait".into(),
        format!("{}ms", run.wait.as_millis()).into(),
    ];
    if run.extensions {
        args.push("-exts".into());
    }
    if let Some(k) = &run.noise_key {
        args.extend(["-noise-key".into(), k.into()]);
    }
    let mut proc = Proc::spawn(bin, &args, Feed::none());
    let line = proc.next_line(deadline);
    match line.strip_prefix("listening ") {
        Some(addr) => GoNode {
            addr: addr.to_string(),
            proc,
        },
        None => proc.fail(&format!(
            "first stderr line is {line:?}, not `listening ADDR`"
        )),
    }
}

impl GoNode {
    /// Wait for its exit by `deadline`: its report (the last stdout line)
    /// and the process's output. The report is there whether it exited 0
    /// or not; a missing report fails.
    pub fn report(self, deadline: Instant) -> (NodeReport, Finished) {
        let out = self.proc.finish(deadline);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let Some(line) = stdout.lines().last() else {
            panic!("privval-node printed no report: {out:?}");
        };
        (NodeReport::parse(line), out)
    }
}

/// privval-bench's JSON line (and the benches crate's own equivalent's):
/// per-request figures in microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BenchReport {
    pub n: u64,
    pub rtt_p50_us: u64,
    pub rtt_p99_us: u64,
    pub sign_p50_us: u64,
    pub sign_p99_us: u64,
    pub transport_p50_us: u64,
    pub transport_p99_us: u64,
}

impl BenchReport {
    /// Parse a bench JSON line (fields other than these are ignored).
    pub fn parse(line: &str) -> BenchReport {
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("privval bench printed {line:?}: {e}"));
        BenchReport {
            n: field_u64(&v, "n", line),
            rtt_p50_us: field_u64(&v, "rtt_p50_us", line),
            rtt_p99_us: field_u64(&v, "rtt_p99_us", line),
            sign_p50_us: field_u64(&v, "sign_p50_us", line),
            sign_p99_us: field_u64(&v, "sign_p99_us", line),
            transport_p50_us: field_u64(&v, "transport_p50_us", line),
            transport_p99_us: field_u64(&v, "transport_p99_us", line),
        }
    }
}

/// `cometbft-peer privval-bench -n N [-unix]`, within `limit`.
pub fn go_privval_bench(bin: &Path, n: u32, unix: bool, limit: Duration) -> BenchReport {
    let mut args: Vec<OsString> = vec!["privval-bench".into(), "-n".into(), n.to_string().into()];
    if unix {
        args.push("-unix".into());
    }
    let out = run_ok(bin, &args, limit);
    BenchReport::parse(&out.stdout_text())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips() {
        assert_eq!(from_hex("00ff7A"), Some(vec![0, 0xff, 0x7a]));
        assert_eq!(from_hex("0"), None);
        assert_eq!(from_hex("zz"), None);
        assert_eq!(to_hex(&[0, 0xff, 0x7a]), "00ff7a");
    }

    #[test]
    fn parses_the_reports() {
        let node = NodeReport::parse(
            r#"{"pubkey":"0a0b","votes":4,"proposals":2,"verified":6,"double_sign_refused":true,"rtt_us":{"p50":10,"p99":30},"error":""}"#,
        );
        assert_eq!(node.public_key, [10, 11]);
        assert_eq!((node.votes, node.proposals, node.verified), (4, 2, 6));
        assert!(node.double_sign_refused);
        assert_eq!((node.rtt_p50_us, node.rtt_p99_us), (10, 30));
        let bench = BenchReport::parse(
            r#"{"n":5,"rtt_p50_us":1,"rtt_p99_us":2,"sign_p50_us":3,"sign_p99_us":4,"transport_p50_us":5,"transport_p99_us":6,"warmup":7}"#,
        );
        assert_eq!(bench.n, 5);
        assert_eq!(bench.transport_p99_us, 6);
    }
}
