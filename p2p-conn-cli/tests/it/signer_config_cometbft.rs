//! One `p2p-conn signer --config` serving two real CometBFT chains, each a
//! one-validator chain with its own validator key: v1.0.1 over `tcp://`
//! and v0.38.26 over `unix://`. Both chains commit blocks; every signature
//! of each chain verifies under that chain's key (and not the other's);
//! each chain's state file moves, and only with its own chain's heights.
//! Without the Go toolchain the test prints a notice and passes, unless
//! `CI=true`, where it fails.

#![cfg(unix)]

use std::path::Path;
use std::time::Duration;

use crate::common::cometbft_node::{node_binary, GoVersion, SignedNode, SignerTransport};
use crate::common::process::{scratch, Feed, Proc};
use base64::Engine as _;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use p2p_conn_privval::state_file;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_p2p-conn");

/// Bound on a chain reaching a height (a node start and a few blocks at
/// ~200 ms each).
const BLOCKS_LIMIT: Duration = Duration::from_secs(60);

fn verification_key(node: &SignedNode) -> ed25519_consensus::VerificationKey {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(&node.validator_pub_key)
        .unwrap();
    ed25519_consensus::VerificationKey::try_from(bytes.as_slice()).unwrap()
}

#[test]
fn one_config_signs_two_real_chains_with_two_keys() {
    let test = "signer_config_cometbft::one_config_signs_two_real_chains_with_two_keys";
    let (Some(v1), Some(v038)) = (
        node_binary(GoVersion::V1, test),
        node_binary(GoVersion::V038, test),
    ) else {
        return;
    };
    let a = SignedNode::init(&v1, SignerTransport::Tcp);
    let b = SignedNode::init(&v038, SignerTransport::Unix);
    assert_ne!(a.chain_id, b.chain_id, "two chains");
    assert_ne!(a.validator_pub_key, b.validator_pub_key, "two keys");
    let mut config = String::from("json = true\nstats_every = 0\n\n");
    for n in [&a, &b] {
        config += &format!(
            "[[chain]]\nid = \"{}\"\nkey = \"{}\"\nstate = \"{}\"\n\n",
            n.chain_id,
            n.key_file.display(),
            n.state_file.display()
        );
    }
    for n in [&a, &b] {
        config += &format!(
            "[[node]]\naddress = \"{}\"\nchain = \"{}\"\n\n",
            n.signer_dials, n.chain_id
        );
    }
    let dir = scratch("signer-config-cometbft");
    let path = dir.join("signer.toml");
    std::fs::write(&path, &config).unwrap();
    let signer = Proc::spawn(
        Path::new(BIN),
        &["signer", "--config", path.to_str().unwrap()],
        Feed::none(),
    );
    a.start();
    b.start();
    let ha = a.wait_height(4, BLOCKS_LIMIT);
    let hb = b.wait_height(4, BLOCKS_LIMIT);
    kill(
        Pid::from_raw(i32::try_from(signer.id()).unwrap()),
        Signal::SIGTERM,
    )
    .unwrap();
    let out = signer.finish_within(Duration::from_secs(10));
    out.assert_ok("the signer of two chains, stopped by SIGTERM");
    a.kill();
    b.kill();

    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}")))
        .collect();
    let starts: Vec<&Value> = events.iter().filter(|e| e["event"] == "start").collect();
    assert_eq!(starts.len(), 2, "a start event per chain: {starts:?}");
    for (node, height) in [(&a, ha), (&b, hb)] {
        let key = verification_key(node);
        let other = verification_key(if std::ptr::eq(node, &a) { &b } else { &a });
        let mut signed = 0;
        for e in events.iter().filter(|e| {
            e["event"] == "served"
                && e["node"] == node.signer_dials.as_str()
                && matches!(e["kind"].as_str(), Some("vote" | "proposal"))
                && e["signature"].is_string()
        }) {
            let sig: [u8; 64] = hex::decode(e["signature"].as_str().unwrap())
                .unwrap()
                .try_into()
                .unwrap();
            let bytes = hex::decode(e["sign_bytes"].as_str().unwrap()).unwrap();
            key.verify(&sig.into(), &bytes).unwrap_or_else(|err| {
                panic!(
                    "{}: not signed with its chain's key ({err}): {e}",
                    node.chain_id
                )
            });
            assert!(
                other.verify(&sig.into(), &bytes).is_err(),
                "{}: signed with the other chain's key: {e}",
                node.chain_id
            );
            signed += 1;
        }
        let mark = state_file::load(&node.state_file).unwrap().hrs();
        assert!(
            signed > 0 && mark.height >= height,
            "{}: {signed} signatures; its state file is at {mark}, the chain at {height}",
            node.chain_id
        );
        let start = starts
            .iter()
            .find(|s| s["chain_id"] == node.chain_id.as_str())
            .unwrap_or_else(|| panic!("no start event for {}", node.chain_id));
        assert_eq!(start["pub_key"], node.validator_pub_key.as_str(), "{start}");
        eprintln!(
            "{}: height {height}, {signed} signatures, state file at {mark}",
            node.chain_id
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
