//! The NodeInfo exchange against CometBFT's own Go code
//! (`interop/cometbft-go`, at v0.34.35, v0.37.18, v0.38.26, v0.39.4, v0.40.0
//! and v1.0.1: a module per line, `v0_39::probe_go_listening`), two
//! processes over loopback TCP.
//!
//! The Go peer runs `p2p/transport.go`'s exchange (both directions at once,
//! `protoio` with `MaxNodeInfoSize`) and the transport's checks on our
//! NodeInfo (`Validate`, the NodeInfo ID against the connection's,
//! `CompatibleWith`), and prints the result as JSON, with our message as it
//! arrived and as CometBFT re-encodes it: they must be the same bytes.
//!
//! - `p2p-conn listen --nodeinfo` with Go dialing: both sides accept the
//!   other's NodeInfo, then data flows both ways, so no byte after the
//!   NodeInfo was lost.
//! - `p2p-conn probe` with Go listening and announcing channels: the probe
//!   reports Go's NodeInfo (p2p protocol 9 in v1.x, 8 before) and its
//!   release line, and Go
//!   accepts ours as valid but, as a node does, refuses a peer with no
//!   channel in common.
//!
//! Without the Go toolchain each test prints a notice and passes, unless
//! `CI=true`, where it fails.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::go_peer::{go_dial, go_listen, go_peer, GoVersion};
use crate::common::process::{free_port, Feed, Proc};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_p2p-conn");

/// Bound on every process of a test, from its start.
const LIMIT: Duration = Duration::from_secs(30);

/// The Go peer's `nodeinfo {JSON}` stderr line, parsed.
fn go_report(stderr: &[String]) -> Value {
    let line = stderr
        .iter()
        .find_map(|l| l.strip_prefix("nodeinfo "))
        .unwrap_or_else(|| panic!("the Go peer printed no nodeinfo line: {stderr:?}"));
    serde_json::from_str(line).unwrap_or_else(|e| panic!("Go's nodeinfo line {line:?}: {e}"))
}

/// What Go must have concluded about a NodeInfo we sent.
fn check_go_read_ours(test: &str, go: &Value, network: &str, moniker: &str) {
    assert_eq!(
        go["validate"], "",
        "{test}: CometBFT's Validate refused ours: {go}"
    );
    assert_eq!(go["id_check"], "", "{test}: {go}");
    assert_eq!(go["network"], network, "{test}: {go}");
    assert_eq!(go["moniker"], moniker, "{test}: {go}");
    assert_eq!(go["p2p"], 9, "{test}: {go}");
    assert_eq!(go["block"], 11, "{test}: {go}");
    assert_eq!(go["tx_index"], "off", "{test}: {go}");
    assert_eq!(
        go["received"], go["reencoded"],
        "{test}: CometBFT re-encodes our NodeInfo to other bytes"
    );
}

fn listen_nodeinfo_with_go_dialing(version: GoVersion, test: &str) {
    let Some(go) = go_peer(version, test) else {
        return;
    };
    let deadline = Instant::now() + LIMIT;
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut us = Proc::spawn(
        Path::new(BIN),
        &[
            "listen",
            &addr,
            "--nodeinfo",
            "--network",
            "interop-net",
            "--moniker",
            "rust-side",
        ],
        Feed::Now(b"from-rust".to_vec()),
    );
    us.wait_listening(port, deadline);
    let them = go_dial(
        &go,
        &["-nodeinfo", "-network", "interop-net"],
        &addr,
        Feed::Now(b"from-go".to_vec()),
    );
    let them = them.finish_ok(deadline);
    let us = us.finish_ok(deadline);
    let go_read = go_report(&them.stderr_lines());
    check_go_read_ours(test, &go_read, "interop-net", "rust-side");
    assert_eq!(go_read["listen_addr"], addr, "{test}: {go_read}");
    assert_eq!(go_read["compatible"], "", "{test}: {go_read}");
    let ours = us.stderr_lines();
    assert!(
        ours.iter()
            .any(|l| l.starts_with("nodeinfo moniker=\"cometbft-peer\" network=\"interop-net\"")),
        "{test}: p2p-conn's stderr: {ours:?}"
    );
    assert_eq!(them.stdout, b"from-rust", "{test}: Go printed");
    assert_eq!(us.stdout, b"from-go", "{test}: p2p-conn printed");
}

fn probe_go_listening(version: GoVersion, test: &str) {
    let Some(go) = go_peer(version, test) else {
        return;
    };
    let deadline = Instant::now() + LIMIT;
    let (them, addr) = go_listen(
        &go,
        &["-nodeinfo", "-network", "probe-net", "-channels", "4020"],
        Feed::none(),
        deadline,
    );
    // v1: the probe's own moniker; the others: one given with --moniker.
    let (moniker_args, moniker): (&[&str], &str) = match version {
        GoVersion::V1 => (&[], "p2p-conn-probe"),
        _ => (&["--moniker", "probe-side"], "probe-side"),
    };
    let mut args = vec!["probe", "--json", &addr];
    args.extend(moniker_args);
    let out = Proc::spawn(Path::new(BIN), &args, Feed::none()).finish(deadline);
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{test}: probe printed no JSON ({e}): {out:?}"));
    assert_eq!(out.status.code(), Some(0), "{test}: {out:?}");
    assert_eq!(v["moniker"], "cometbft-peer", "{test}: {v}");
    assert_eq!(v["network"], "probe-net", "{test}: {v}");
    assert_eq!(
        v["channels"],
        serde_json::json!(["40", "20"]),
        "{test}: {v}"
    );
    assert_eq!(
        v["protocol_version"]["p2p"],
        version.p2p_protocol(),
        "{test}: {v}"
    );
    assert_eq!(v["protocol_version"]["block"], 11, "{test}: {v}");
    // The Go peer announces its module version (a node may not, see
    // tests/it/cometbft_node.rs), so the line is the one its number names.
    assert_eq!(
        v["version"],
        version.label().trim_start_matches('v'),
        "{test}: {v}"
    );
    assert_eq!(
        v["release_lines"],
        serde_json::json!([version.line()]),
        "{test}: {v}"
    );
    assert_eq!(v["violations"], serde_json::json!([]), "{test}: {v}");
    // Go accepted our NodeInfo as valid and, with channels of its own,
    // refused to keep a peer that has none in common.
    let them = them.finish(deadline);
    let go_read = go_report(&them.stderr_lines());
    check_go_read_ours(test, &go_read, "probe-net", moniker);
    let compat = go_read["compatible"].as_str().unwrap();
    assert!(
        compat.contains("no common channels"),
        "{test}: Go's CompatibleWith said {compat:?}"
    );
    assert!(!them.status.success(), "{test}: Go must refuse the probe");
}

p2p_conn_interop::per_release! {
    v0_34: V034, v0_37: V037, v0_38: V038, v0_39: V039, v0_40: V040, v1: V1;
    [listen_nodeinfo_with_go_dialing, probe_go_listening]
}
