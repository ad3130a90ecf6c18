//! Serving a scripted node over `unix://` (requests, refusals, a dropped
//! connection, SIGTERM) and the library's node endpoint over `tcp://` with
//! pins on both ends.

use std::os::unix::net::UnixListener;
use std::path::Path;
use std::time::Instant;

use ed25519_consensus::{Signature, VerificationKey};
use p2p_conn::{keyfile, Identity};
use p2p_conn_privval::endpoint::{Address, NodeEndpoint, SignerClient};
use p2p_conn_privval::guard::{Hrs, Step};
use p2p_conn_privval::testkit::message::Sum;
use p2p_conn_privval::testkit::{PingRequest, PubKeyRequest};
use p2p_conn_privval::{crypto_public_key, state_file, vote_sign_bytes};

use super::{
    count, is_rfc3339_utc_ms, json_events, prevote, sigterm, stderr, untimed, validator_key,
    ScriptedNode, BIN, CHAIN, LIMIT,
};
use crate::common::process::{scratch, Feed, Proc};

/// The scripted exchange of the module docs.
#[test]
fn serves_refuses_and_reconnects_over_unix() {
    let dir = scratch("signer-scripted");
    let (key, id) = validator_key(&dir);
    let state = dir.join("priv_validator_state.json");
    let socket = dir.join("privval.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let node = format!("unix://{}", socket.display());
    let args = [
        "signer",
        "--node",
        node.as_str(),
        "--key",
        key.to_str().unwrap(),
        "--state",
        state.to_str().unwrap(),
        "--create-state",
        "--chain-id",
        CHAIN,
        "--stats-every",
        "0",
    ];
    let signer = Proc::spawn(Path::new(BIN), &args, Feed::none());
    let vk = VerificationKey::try_from(id.public_key().as_bytes().as_slice()).unwrap();

    let mut conn = ScriptedNode::accept(&listener);
    let mut req = PubKeyRequest::default();
    req.chain_id = CHAIN.into();
    match conn.request(Sum::PubKeyRequest(req)) {
        Sum::PubKeyResponse(r) => {
            assert!(r.error.is_none(), "{r:?}");
            assert_eq!(r.pub_key_bytes, id.public_key().as_bytes(), "{r:?}");
            assert_eq!(r.pub_key_type, "ed25519");
        }
        other => panic!("expected a PubKeyResponse, got {other:?}"),
    }

    let first = conn
        .sign(CHAIN, &prevote(10, 1, 1_000))
        .expect("a new vote is signed");
    let sig: [u8; 64] = first.signature.clone().try_into().unwrap();
    vk.verify(&Signature::from(sig), &vote_sign_bytes(CHAIN, &first))
        .expect("the signature verifies");
    let mark = state_file::load(&state).unwrap();
    assert_eq!(mark.hrs(), Hrs::new(10, 0, Step::Prevote), "{mark:?}");

    // The same vote with a later timestamp: the earlier signature and
    // timestamp are re-served, as FilePV does.
    let again = conn.sign(CHAIN, &prevote(10, 1, 2_000)).expect("re-served");
    assert_eq!(again.signature, first.signature);
    assert_eq!(again.timestamp, first.timestamp);

    let conflict = conn.sign(CHAIN, &prevote(10, 2, 1_000)).unwrap_err();
    assert!(conflict.contains("conflict"), "{conflict}");
    let other_chain = conn
        .sign("other-chain", &prevote(11, 1, 1_000))
        .unwrap_err();
    assert!(other_chain.contains("other-chain"), "{other_chain}");
    let below = conn.sign(CHAIN, &prevote(9, 1, 1_000)).unwrap_err();
    assert!(below.contains("height regression"), "{below}");
    // Content CometBFT never signs, above the mark: refused by name.
    let mut short = prevote(11, 1, 1_000);
    short.block_id.hash.truncate(31);
    let short = conn.sign(CHAIN, &short).unwrap_err();
    assert!(short.contains("block_id.hash"), "{short}");
    let mut late = prevote(11, 1, 1_000);
    late.timestamp.seconds = 253_402_300_800;
    let late = conn.sign(CHAIN, &late).unwrap_err();
    assert!(late.contains("timestamp"), "{late}");
    assert_eq!(
        state_file::load(&state).unwrap(),
        mark,
        "refusals leave the mark"
    );

    // Hang up: the signer dials again by itself.
    drop(conn);
    let mut conn = ScriptedNode::accept(&listener);
    assert!(matches!(
        conn.request(Sum::PingRequest(PingRequest::default())),
        Sum::PingResponse(_)
    ));

    sigterm(&signer);
    let out = signer.finish(Instant::now() + LIMIT);
    out.assert_ok("the signer, stopped by SIGTERM");
    let text = stderr(&out);
    let lines = untimed(&text);
    let count = |needle: &str| lines.iter().filter(|l| l.contains(needle)).count();
    assert_eq!(count(&format!("connected to {node}")), 2, "{text}");
    assert!(count("disconnected: ") >= 1, "{text}");
    assert_eq!(count("refused or failed: vote height"), 5, "{text}");
    assert!(count("on disk and in this process's memory") == 1, "{text}");
    let last = lines.iter().rev().find(|l| l.starts_with("final stats: "));
    let last = last.unwrap_or_else(|| panic!("no final stats line: {text}"));
    assert!(
        last.contains("pubkey 1 (0 err")
            && last.contains("vote 7 (5 err")
            && last.contains("ping 1 (0 err")
            && last.contains("connects 2")
            && last.contains("reconnects 1")
            && last.contains("last signed height 10 round 0 step prevote (2) at 20"),
        "{last}"
    );
    assert_eq!(
        lines.last().map(String::as_str),
        Some("stopped by SIGTERM"),
        "{text}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Over `tcp://` to the library's node endpoint, each end pinning the
/// other: the node requires our `--connection-key`'s ID, we require the
/// node's (`tcp://ID@HOST:PORT`). The key and a vote signature come
/// through. A second node, not the pinned one, is never served: each
/// attempt fails on the ID, and the signer keeps dialing until SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pins_both_ends_over_tcp() {
    let dir = scratch("signer-tcp");
    let (key, validator) = validator_key(&dir);
    let connection = Identity::generate();
    let connection_key = dir.join("connection_key.json");
    keyfile::save_new(&connection, &connection_key).unwrap();
    let node_key = Identity::generate();
    let node_id = node_key.node_id();
    let endpoint = NodeEndpoint::bind(&Address::tcp("127.0.0.1:0"), node_key)
        .await
        .unwrap()
        .expect_signer(connection.node_id());
    let at = endpoint.local_addr().unwrap();
    let client = SignerClient::new(endpoint);

    let state = dir.join("priv_validator_state.json");
    let node = format!("tcp://{node_id}@{at}");
    let (key_s, state_s) = (key.to_str().unwrap(), state.to_str().unwrap());
    let ck = connection_key.to_str().unwrap();
    let args = [
        "signer",
        "--node",
        &node,
        "--key",
        key_s,
        "--state",
        state_s,
        "--create-state",
        "--chain-id",
        CHAIN,
        "--connection-key",
        ck,
        "--json",
    ];
    let signer = Proc::spawn(Path::new(BIN), &args, Feed::none());
    let pk = client.public_key(CHAIN).await.expect("the public key");
    let want = crypto_public_key::Key::Ed25519(validator.public_key().as_bytes().to_vec());
    assert_eq!(pk.sum, Some(want));
    let signed = client
        .sign_vote(CHAIN, prevote(3, 1, 100), false)
        .await
        .expect("a signed vote");
    let sig: [u8; 64] = signed.signature.clone().try_into().unwrap();
    let vk = VerificationKey::try_from(validator.public_key().as_bytes().as_slice()).unwrap();
    vk.verify(&Signature::from(sig), &vote_sign_bytes(CHAIN, &signed))
        .expect("the signature verifies");
    sigterm(&signer);
    let out = signer.finish(Instant::now() + LIMIT);
    out.assert_ok("the pinned signer, stopped by SIGTERM");
    let events = json_events(&out);
    let connected: Vec<_> = events
        .iter()
        .filter(|e| e["event"] == "connected")
        .collect();
    assert_eq!(connected.len(), 1, "{events:?}");
    assert_eq!(connected[0]["node_id"], node_id.to_string().as_str());
    for e in &events {
        let time = e["time"].as_str().unwrap_or_else(|| panic!("no time: {e}"));
        assert!(is_rfc3339_utc_ms(time), "{e}");
    }
    let stats = events.last().unwrap();
    assert_eq!(stats["event"], "stats", "{stats}");
    let last = &stats["last_signed"];
    assert!(
        last["height"] == 3 && last["round"] == 0 && last["step"] == 2,
        "{stats}"
    );
    assert!(is_rfc3339_utc_ms(last["time"].as_str().unwrap()), "{stats}");
    let start = &events[0];
    assert_eq!(start["event"], "start");
    assert_eq!(start["key"]["backend"], "file", "{start}");
    assert_eq!(
        start["connection_id"],
        connection.node_id().to_string().as_str()
    );

    // Another node at another address, while the signer pins the first.
    let impostor = NodeEndpoint::bind(&Address::tcp("127.0.0.1:0"), Identity::generate())
        .await
        .unwrap();
    let at = impostor.local_addr().unwrap();
    let impostor = SignerClient::new(impostor);
    let node = format!("tcp://{at}");
    let wrong = node_id.to_string();
    let state2 = dir.join("state2.json");
    let state2_s = state2.to_str().unwrap();
    let args = [
        "signer",
        "--node",
        &node,
        "--node-id",
        &wrong,
        "--key",
        key_s,
        "--state",
        state2_s,
        "--create-state",
        "--any-chain",
        "--json",
    ];
    let signer = Proc::spawn(Path::new(BIN), &args, Feed::none());
    // The node side completes each handshake (it pins nobody); the signer
    // then hangs up, so every ping fails: one per dial.
    let mut refused = 0;
    let deadline = Instant::now() + LIMIT;
    while refused < 2 {
        assert!(Instant::now() < deadline, "the signer did not dial twice");
        if impostor.ping().await.is_err() {
            refused += 1;
        } else {
            panic!("the signer answered a node it does not pin");
        }
    }
    sigterm(&signer);
    let out = signer.finish(Instant::now() + LIMIT);
    out.assert_ok("the signer pinned to another node, stopped by SIGTERM");
    let events = json_events(&out);
    assert_eq!(count(&events, "connected"), 0, "{events:?}");
    let mismatch = events
        .iter()
        .filter(|e| e["event"] == "connect_failed")
        .filter(|e| e["error"].as_str().is_some_and(|s| s.contains("mismatch")))
        .count();
    assert!(mismatch >= 1, "{events:?}");
    let last = events.last().unwrap();
    assert!(
        last["event"] == "stats" && last["final"] == true && last["connects"] == 0,
        "{last}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
