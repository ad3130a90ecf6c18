//! The privval endpoints against CometBFT's own remote-signer code at each
//! release line (`cometbft-peer privval-signer` / `privval-node`,
//! `interop/cometbft-go/privval_remote.go`, driven through
//! `p2p_conn_interop::privval_peer`).
//!
//! - `go_signer_serves_go_node_*`: CometBFT's signer against CometBFT's
//!   node, both Go: the harness itself works at that line (the node
//!   verifies every signature with CometBFT's code and sees the double
//!   sign refused), and reports a failure when there is one (a signer for
//!   another chain).
//!
//! Without the Go toolchain each test prints a notice and passes, unless
//! `CI=true`, where it fails.

use std::path::Path;
use std::time::{Duration, Instant};

use p2p_conn_interop::cometbft_go::GoVersion;
use p2p_conn_interop::go_peer::go_peer;
use p2p_conn_interop::privval_peer::{
    go_privval_keygen, go_privval_node, go_privval_signer, NodeReport, NodeRun,
};
use p2p_conn_interop::process::scratch;

const CHAIN: &str = "privval-interop";
/// Heights each node run signs (a proposal, a prevote, a precommit each).
const HEIGHTS: u32 = 8;
/// Bound on one node run, start to report.
const RUN: Duration = Duration::from_secs(90);

/// A Go node run against a Go signer with keys made by `privval-keygen`:
/// the node's report and whether it exited 0.
fn go_against_go(
    bin: &Path,
    dir: &Path,
    node: &NodeRun,
    signer_chain: &str,
) -> (NodeReport, bool, Vec<u8>) {
    let key = dir.join("priv_validator_key.json");
    let state = dir.join("priv_validator_state.json");
    let made = go_privval_keygen(bin, &key, &state);
    let deadline = Instant::now() + RUN;
    let go_node = go_privval_node(bin, node, deadline);
    let signer = go_privval_signer(bin, &go_node.addr, &key, &state, signer_chain, deadline);
    assert_eq!(
        signer.public_key, made,
        "privval-signer announced another key"
    );
    let (report, out) = go_node.report(deadline);
    let why = signer.stop();
    if !out.status.success() && report.error.is_empty() {
        panic!("privval-node failed without saying why: {out:?}; signer: {why}");
    }
    (report, out.status.success(), made)
}

fn check_complete(report: &NodeReport, key: &[u8], test: &str) {
    let n = u64::from(HEIGHTS);
    assert_eq!(report.error, "", "{test}: {report:?}");
    assert_eq!(report.public_key, key, "{test}: the node got another key");
    assert_eq!(report.proposals, n, "{test}: {report:?}");
    assert_eq!(report.votes, 2 * n, "{test}: {report:?}");
    assert_eq!(report.verified, 3 * n, "{test}: {report:?}");
    assert!(report.double_sign_refused, "{test}: {report:?}");
}

/// CometBFT's signer serves CometBFT's node over loopback TCP (secret
/// connection), with an extension payload on the precommits where the line
/// has extensions.
fn go_signer_serves_go_node_tcp(version: GoVersion, test: &str) {
    let Some(bin) = go_peer(version, test) else {
        return;
    };
    let dir = scratch(&test.replace("::", "-"));
    let mut run = NodeRun::tcp(CHAIN, HEIGHTS);
    run.extensions = !matches!(version, GoVersion::V034 | GoVersion::V037);
    let (report, ok, key) = go_against_go(&bin, &dir, &run, CHAIN);
    check_complete(&report, &key, test);
    assert!(ok, "{test}: privval-node exited non-zero: {report:?}");
}

/// The same over a Unix socket (plaintext).
fn go_signer_serves_go_node_unix(version: GoVersion, test: &str) {
    let Some(bin) = go_peer(version, test) else {
        return;
    };
    let dir = scratch(&test.replace("::", "-"));
    let mut run = NodeRun::tcp(CHAIN, HEIGHTS);
    run.addr = format!("unix://{}", dir.join("privval.sock").display());
    let (report, ok, key) = go_against_go(&bin, &dir, &run, CHAIN);
    check_complete(&report, &key, test);
    assert!(ok, "{test}: privval-node exited non-zero: {report:?}");
}

/// A signer for another chain refuses the node's requests: the node
/// reports the error, signs nothing and exits non-zero.
fn go_node_reports_a_signer_for_another_chain(version: GoVersion, test: &str) {
    let Some(bin) = go_peer(version, test) else {
        return;
    };
    let dir = scratch(&test.replace("::", "-"));
    let run = NodeRun::tcp(CHAIN, HEIGHTS);
    let (report, ok, _) = go_against_go(&bin, &dir, &run, "another-chain");
    assert!(!ok, "{test}: privval-node exited 0: {report:?}");
    assert_ne!(report.error, "", "{test}: {report:?}");
    assert_eq!(report.verified, 0, "{test}: {report:?}");
    assert!(!report.double_sign_refused, "{test}: {report:?}");
}

p2p_conn_interop::per_release! {
    v0_34: V034, v0_37: V037, v0_38: V038, v0_39: V039, v0_40: V040, v1: V1;
    [
        go_signer_serves_go_node_tcp,
        go_signer_serves_go_node_unix,
        go_node_reports_a_signer_for_another_chain,
    ]
}
