//! `p2p-conn probe` against a real CometBFT node (`cometbft start
//! --proxy_app=kvstore` on loopback, see [`crate::common::cometbft_node`]), at
//! every line the suite proves: v0.34.35, v0.37.18, v0.38.26 (what most
//! chains run), v0.39.4, v0.40.0 and v1.0.1. The probe must authenticate,
//! read the node's NodeInfo and report exactly what the node says about
//! itself in its `Started node` log line, with the release line of the
//! version it announces (v0.37.18 announces 0.37.16, v0.40.0 announces
//! 0.39.0), and fail with the documented exit code and `stage` when the
//! node is not the one expected (ID, network); `dial --nodeinfo` joins it
//! as a peer.
//!
//! Each test is a function of the release, run once per release as
//! `v0_39::NAME`, `v1::NAME`, ... (see `p2p_conn_interop::per_release!`):
//! every test at v0.38.26, v0.40.0 and v1.0.1; the probe (JSON and text)
//! and `dial --nodeinfo` at v0.34.35, v0.37.18 and v0.39.4.
//! [`probe_reports_the_nodes_own_nodeinfo`] runs its own node, as it reads the
//! node's log after its probe; the other tests share one node per release.
//! Every probe runs with short connect and handshake timeouts, and every
//! process wait has a deadline. Without the Go toolchain (which builds
//! `cometbft`) each test prints a notice and passes, unless `CI=true`, where
//! it fails.

use std::path::Path;
use std::time::Duration;

use crate::common::cometbft_node::{node_binary, GoVersion, Node, MONIKER};
use crate::common::process::{run, Feed, Finished, Proc};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_p2p-conn");

/// Bound on one probe run (its own timeouts are far shorter).
const PROBE_LIMIT: Duration = Duration::from_secs(30);

/// How long the node may take to log what it made of a probe.
const NODE_REACTION: Duration = Duration::from_secs(5);

/// `p2p-conn probe TARGET ARGS` with short timeouts: its exit code and
/// output.
fn probe(target: &str, args: &[&str]) -> (i32, Finished) {
    let mut all = vec![
        "probe",
        target,
        "--connect-timeout",
        "5",
        "--handshake-timeout",
        "10",
    ];
    all.extend(args);
    let out = run(Path::new(BIN), &all, PROBE_LIMIT);
    let code = out
        .status
        .code()
        .unwrap_or_else(|| panic!("p2p-conn {all:?} died by a signal: {out:?}"));
    (code, out)
}

/// [`probe`] with `--json`, checked to exit `code`: the JSON object it
/// printed.
fn probe_json(target: &str, args: &[&str], code: i32) -> Value {
    let mut all = vec!["--json"];
    all.extend(args);
    let (got, out) = probe(target, &all);
    assert_eq!(got, code, "probe {target} {all:?}: exit code; {out:?}");
    let json: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("probe {target} {all:?}: stdout is not one JSON value ({e}): {out:?}")
    });
    assert!(
        json.is_object(),
        "probe --json printed {json}, not an object"
    );
    json
}

/// `json[key]` as a string (failing, with the whole object, otherwise).
fn text<'a>(json: &'a Value, key: &str) -> &'a str {
    json[key]
        .as_str()
        .unwrap_or_else(|| panic!("`{key}` is not a string in {json}"))
}

/// Check a failure report: `stage`, and an `error` of one non-empty line.
fn check_failure(json: &Value, stage: &str) {
    assert_eq!(text(json, "stage"), stage, "stage, in {json}");
    let error = text(json, "error");
    assert!(
        !error.trim().is_empty() && !error.contains('\n'),
        "`error` must be one non-empty line: {json}"
    );
}

/// `ID@ADDR` for the node.
fn id_at(node: &Node) -> String {
    format!("{}@{}", node.node_id, node.p2p_addr)
}

/// Probing the node by `ID@ADDR` succeeds and reports the node's NodeInfo
/// field for field as the node itself logs it at start (`Started node ...
/// nodeInfo="{ProtocolVersion:{P2P:9 Block:11 App:1} ... Channels:40202122
/// 233038606100 ...}"`, `P2P:8` before v1), with no rule violations.
///
/// The node must see the probe get past authentication: it logs no `auth
/// failure` (a probe that gave up during the secret handshake or the NodeInfo
/// exchange shows as `Inbound Peer rejected ... err="auth failure: handshake
/// failed: EOF"`, which is what `p2p-conn dial ID@ADDR` with an empty stdin
/// gets, as it never sends a NodeInfo), but rejects the probe for its
/// NodeInfo, which announces no channels: `Inbound Peer rejected module=p2p
/// err="incompatible: peer has no common channels. Our channels: 402021...
/// ; Peer channels: " numPeers=0`.
fn probe_reports_the_nodes_own_nodeinfo(version: GoVersion, test: &str) {
    let Some(bin) = node_binary(version, test) else {
        return;
    };
    let node = Node::start(&bin);
    let mark = node.log_len();
    let json = probe_json(&id_at(&node), &[], 0);

    assert_eq!(text(&json, "node_id"), node.node_id, "{json}");
    assert_eq!(text(&json, "expected_id"), node.node_id, "{json}");
    assert_eq!(json["id_matches"], Value::Bool(true), "{json}");
    assert_eq!(text(&json, "network"), node.network, "{json}");
    // What the release announces, which is not always its own number
    // (v0.37.18 says 0.37.16, v0.40.0 says 0.39.0).
    assert_eq!(node.version, version.announces(), "`cometbft version`");
    assert_eq!(text(&json, "version"), node.version, "{json}");
    assert_eq!(
        node.info("Version"),
        node.version,
        "the node's own NodeInfo"
    );
    check_release_line(version, &json);
    let versions = &json["protocol_version"];
    assert_eq!(versions["p2p"], version.p2p_protocol(), "{json}");
    assert_eq!(versions["block"], 11, "{json}");
    for (key, field) in [("p2p", "P2P"), ("block", "Block"), ("app", "App")] {
        assert_eq!(
            versions[key].as_u64().map(|v| v.to_string()).as_deref(),
            Some(node.info(field)),
            "protocol_version.{key}, in {json}"
        );
    }
    assert_eq!(text(&json, "moniker"), MONIKER, "{json}");
    let listen_addr = text(&json, "listen_addr");
    assert!(!listen_addr.is_empty(), "{json}");
    assert_eq!(listen_addr, node.info("ListenAddr"), "{json}");
    assert_eq!(listen_addr, format!("tcp://{}", node.p2p_addr), "{json}");
    assert_eq!(text(&json, "tx_index"), node.info("TxIndex"), "{json}");
    assert_eq!(text(&json, "rpc_address"), node.rpc_laddr, "{json}");
    assert_eq!(
        text(&json, "rpc_address"),
        node.info("RPCAddress"),
        "{json}"
    );

    let channels: Vec<&str> = json["channels"]
        .as_array()
        .unwrap_or_else(|| panic!("`channels` is not an array in {json}"))
        .iter()
        .map(|c| {
            c.as_str()
                .unwrap_or_else(|| panic!("channel {c} is no string"))
        })
        .collect();
    assert!(!channels.is_empty(), "{json}");
    for c in &channels {
        assert!(
            c.len() == 2 && c.bytes().all(|b| b.is_ascii_hexdigit()),
            "channel {c:?} is not two hex digits, in {json}"
        );
    }
    assert!(
        channels
            .concat()
            .eq_ignore_ascii_case(node.info("Channels")),
        "channels {channels:?}, but the node has {}",
        node.info("Channels")
    );
    assert_eq!(json["violations"], Value::Array(Vec::new()), "{json}");
    assert!(
        text(&json, "address").contains(&node.p2p_addr),
        "`address` is not what was dialed, in {json}"
    );

    let rejected = "Inbound Peer rejected";
    let reacted = node.wait_for_log_since(mark, rejected, NODE_REACTION);
    let log = node.log_since(mark);
    assert!(
        reacted,
        "the node logged no {rejected:?} within {NODE_REACTION:?} of the probe:\n{log}"
    );
    let auth = log.lines().filter(|l| l.contains("auth failure"));
    assert_eq!(
        auth.collect::<Vec<_>>(),
        Vec::<&str>::new(),
        "the probe did not get past authentication (NodeInfo exchange) at the node"
    );
    let reason = "incompatible: peer has no common channels";
    assert!(
        log.lines()
            .any(|l| l.contains(rejected) && l.contains(reason)),
        "the node did not reject the probe with {reason:?}:\n{log}"
    );
}

/// A node authenticating as another ID than expected (`ID@ADDR` or
/// `--peer-id`) exits 5, stage `id_mismatch`, naming the ID the node proved.
fn probe_fails_on_another_node_id(version: GoVersion, test: &str) {
    let Some(bin) = node_binary(version, test) else {
        return;
    };
    let node = Node::shared(&bin);
    // A valid ID that is not the node's (one digit changed).
    let first = if node.node_id.starts_with('0') {
        "1"
    } else {
        "0"
    };
    let wrong = format!("{first}{}", &node.node_id[1..]);

    let at = format!("{wrong}@{}", node.p2p_addr);
    let by_flag = ["--peer-id", &wrong];
    for (target, args) in [
        (at.as_str(), &[][..]),
        (node.p2p_addr.as_str(), &by_flag[..]),
    ] {
        let json = probe_json(target, args, 5);
        check_failure(&json, "id_mismatch");
        assert_eq!(text(&json, "node_id"), node.node_id, "{json}");
    }
}

/// Probing a plain address (no ID to check) succeeds, reports the node's ID
/// and leaves the ID check out (`expected_id` and `id_matches` null).
fn probe_without_an_id_reports_the_node_id(version: GoVersion, test: &str) {
    let Some(bin) = node_binary(version, test) else {
        return;
    };
    let node = Node::shared(&bin);
    let json = probe_json(&node.p2p_addr, &[], 0);
    assert_eq!(text(&json, "node_id"), node.node_id, "{json}");
    assert_eq!(json["expected_id"], Value::Null, "{json}");
    assert_eq!(json["id_matches"], Value::Null, "{json}");
    assert_eq!(text(&json, "network"), node.network, "{json}");
}

/// `--network` other than the node's exits 8, stage `network`, still naming
/// the node's network; the node's own network passes.
fn probe_fails_on_another_network(version: GoVersion, test: &str) {
    let Some(bin) = node_binary(version, test) else {
        return;
    };
    let node = Node::shared(&bin);
    let json = probe_json(&id_at(&node), &["--network", "wrong-chain"], 8);
    check_failure(&json, "network");
    assert_eq!(text(&json, "network"), node.network, "{json}");
    assert_eq!(text(&json, "node_id"), node.node_id, "{json}");

    let json = probe_json(&id_at(&node), &["--network", &node.network], 0);
    assert_eq!(text(&json, "network"), node.network, "{json}");
}

/// Without `--json` the probe prints, for people, the node's ID and network,
/// and the version the node announces with its release line (naming the
/// release that announces a stale version: `0.39.0 (release line v0.39 or
/// v0.40: v0.40.0 announces 0.39.0)`).
fn probe_prints_the_node_id_and_network(version: GoVersion, test: &str) {
    let Some(bin) = node_binary(version, test) else {
        return;
    };
    let node = Node::shared(&bin);
    let (code, out) = probe(&id_at(&node), &[]);
    assert_eq!(code, 0, "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    for (what, value) in [("node ID", &node.node_id), ("network", &node.network)] {
        assert!(
            stdout.contains(value.as_str()),
            "no {what} {value} in {out:?}"
        );
    }
    let line = stdout
        .lines()
        .find(|l| l.starts_with("version "))
        .unwrap_or_else(|| panic!("{test}: no version line in {stdout}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words.get(1), Some(&version.announces()), "{test}: {line}");
    assert!(
        line.contains(&format!("release line {}", version.line()))
            || line.contains(&format!(" or {}", version.line())),
        "{test}: {line}"
    );
    let stale = version.label().trim_start_matches('v') != version.announces();
    assert_eq!(
        line.contains(&format!(
            "{} announces {}",
            version.label(),
            version.announces()
        )),
        stale,
        "{test}: {line}"
    );
}

/// The JSON's `release_lines` hold the node's line, and only it unless
/// another tested release announces the same version; `version_note` names
/// the release whose node announces a stale version.
fn check_release_line(version: GoVersion, json: &Value) {
    let lines = json["release_lines"]
        .as_array()
        .unwrap_or_else(|| panic!("`release_lines` is not an array in {json}"));
    assert!(
        lines.contains(&Value::from(version.line())),
        "`release_lines` lack {}: {json}",
        version.line()
    );
    let stale = version.label().trim_start_matches('v') != version.announces();
    match version {
        // A v0.39.0 node announces 0.39.0 too.
        GoVersion::V040 => assert_eq!(lines, &["v0.39", "v0.40"], "{json}"),
        _ => assert_eq!(lines.len(), 1, "{json}"),
    }
    let note = format!("{} announces {}", version.label(), version.announces());
    assert_eq!(
        json["version_note"],
        if stale {
            Value::from(note)
        } else {
            Value::Null
        },
        "{json}"
    );
}

/// `p2p-conn dial --nodeinfo --channels 20` (announcing the consensus
/// state channel) talks to the node as a CometBFT peer: the node accepts the
/// NodeInfo, starts an MConnection for it (`Starting MConnection service
/// ... peer=<our ID>@...`), and its consensus reactor sends its round state
/// at once, which arrives on stdout as MConnection bytes: a length-prefixed
/// `Packet` holding a `PacketMsg` (tag `1a`) on channel `0x20` (`08 20`).
/// Our stdin ends once that packet is printed; the node then sees our FIN
/// and stops the peer, and `dial` exits 0.
fn dial_nodeinfo_joins_as_a_peer(version: GoVersion, test: &str) {
    let Some(bin) = node_binary(version, test) else {
        return;
    };
    let node = Node::start(&bin);
    let own = crate::common::our_node_key(test);
    let (key, our_id) = (own.path.as_str(), own.id.clone());
    let mark = node.log_len();
    let out = Proc::spawn(
        Path::new(BIN),
        &[
            "dial",
            &id_at(&node),
            "--key",
            key,
            "--nodeinfo",
            "--channels",
            "20",
            "--handshake-timeout",
            "10",
        ],
        Feed::UntilOutput(Vec::new(), 5),
    )
    .finish_within(PROBE_LIMIT);
    out.assert_ok(test);
    let packet = &out.stdout;
    assert!(
        packet.len() >= 5 && packet[1] == 0x1a && packet[3..5] == [0x08, 0x20],
        "{test}: stdout does not start with a PacketMsg on channel 0x20: {:02x?}",
        &packet[..packet.len().min(16)]
    );
    let started = format!("peer={our_id}@");
    let joined = node.wait_for_log_since(mark, &started, NODE_REACTION);
    let log = node.log_since(mark);
    assert!(
        joined && log.contains("Starting MConnection service"),
        "{test}: the node started no MConnection for {our_id}:\n{log}"
    );
    assert!(!log.contains("auth failure"), "{test}:\n{log}");
    let _ = std::fs::remove_dir_all(&own.dir);
}

/// `p2p-conn id --libp2p` prints what v0.40.0's own `cometbft
/// show-node-id --libp2p` prints, for a key the node made and for one
/// `p2p-conn keygen` made.
#[test]
fn v0_40_libp2p_peer_ids_match_show_node_id() {
    use crate::common::process::{run_ok, scratch};
    let Some(node) = node_binary(GoVersion::V040, "v0_40_libp2p_peer_ids_match_show_node_id")
    else {
        return;
    };
    let limit = Duration::from_secs(30);
    let home = scratch("libp2p-id");
    let h = home.to_str().unwrap();
    run_ok(&node.path, &["init", "--home", h], limit);
    let key = home.join("config/node_key.json");
    let k = key.to_str().unwrap();
    let theirs = |args: &[&str]| run_ok(&node.path, args, limit).stdout_text();
    let ours = |args: &[&str]| run_ok(Path::new(BIN), args, limit).stdout_text();
    for round in 0..2 {
        if round == 1 {
            std::fs::remove_file(&key).unwrap();
            ours(&["keygen", "--out", k]);
        }
        let go = theirs(&["show-node-id", "--libp2p", "--home", h]);
        assert!(go.starts_with("12D3KooW") && go.len() == 52, "{go:?}");
        assert_eq!(ours(&["id", "--libp2p", "--key", k]), go, "round {round}");
        // The plain node ID agrees too, and is another string.
        let hex = theirs(&["show-node-id", "--home", h]);
        assert_eq!(ours(&["id", "--key", k]), hex, "round {round}");
        assert_ne!(hex, go);
    }
    let _ = std::fs::remove_dir_all(&home);
}

// The full set at v0.38 (what most chains run), v0.40 (the newest line) and
// v1; the rest of the lines get the probe (JSON and text) and a real peer.
p2p_conn_interop::per_release! {
    v0_38: V038, v0_40: V040, v1: V1;
    [
        probe_reports_the_nodes_own_nodeinfo,
        probe_fails_on_another_node_id,
        probe_without_an_id_reports_the_node_id,
        probe_fails_on_another_network,
        probe_prints_the_node_id_and_network,
        dial_nodeinfo_joins_as_a_peer,
    ]
}

p2p_conn_interop::per_release! {
    v0_34: V034, v0_37: V037, v0_39: V039;
    [
        probe_reports_the_nodes_own_nodeinfo,
        probe_prints_the_node_id_and_network,
        dial_nodeinfo_joins_as_a_peer,
    ]
}
