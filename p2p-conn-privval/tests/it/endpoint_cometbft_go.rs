//! The privval endpoints against CometBFT's own remote-signer code at each
//! release line (`cometbft-peer privval-signer` / `privval-node`,
//! `interop/cometbft-go/privval_remote.go`, driven through
//! `p2p_conn_interop::privval_peer`).
//!
//! - `our_node_with_go_signer_*`: CometBFT's signer (`SignerServer` with a
//!   `FilePV` from its own `priv_validator_key.json`) dials p2p-conn's
//!   `NodeEndpoint`; p2p-conn's `SignerClient` gets the key file's public
//!   key, has votes and proposals signed and verifies them with
//!   ed25519-dalek over p2p-conn's own sign bytes (the vote extension's
//!   too, from v0.38), and gets a `RemoteSignerError` for a double sign.
//! - `go_node_with_our_signer_*`: p2p-conn's `SignerEndpoint` with a
//!   `GuardedSigner` (a fresh state file) dials CometBFT's node side
//!   (`SignerListenerEndpoint` and `SignerClient`), which verifies every
//!   signature with CometBFT's code and must see the double sign refused.
//! - `go_signer_serves_go_node_*`: CometBFT's signer against CometBFT's
//!   node, both Go: the harness itself works at that line, and reports a
//!   failure when there is one (a signer for another chain).
//!
//! Each runs over `tcp://` (secret connection) and `unix://` (plaintext),
//! and at v0.40.0 over `noise://` too (`v0_40_*_noise`: CometBFT's own
//! `NoiseListener` on the node side, go-libp2p's Noise on the signer side),
//! with the identity checks both ways (`v0_40_noise_*`).
//!
//! Without the Go toolchain each test prints a notice and passes, unless
//! `CI=true`, where it fails.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ed25519_dalek::{Signature, Verifier, VerifyingKey};
use p2p_conn::Identity;
use p2p_conn_interop::cometbft_go::GoVersion;
use p2p_conn_interop::go_peer::go_peer;
use p2p_conn_interop::privval_peer::{
    go_privval_keygen, go_privval_node, go_privval_signer, NodeReport, NodeRun,
};
use p2p_conn_interop::process::scratch;
use p2p_conn_privval::endpoint::{
    Address, EndpointError, NodeEndpoint, SignerClient, SignerEndpoint,
};
use p2p_conn_privval::guard::{Hrs, Step};
use p2p_conn_privval::{
    crypto_public_key, load_validator_key, proposal_sign_bytes, signed_msg_type, state_file,
    vote_extension_sign_bytes, vote_sign_bytes, GuardedSigner, Proposal, Timestamp,
};

use crate::common::{block, vote};

const CHAIN: &str = "privval-interop";
/// Heights each node run signs (a proposal, a prevote, a precommit each).
const HEIGHTS: u32 = 8;
/// Bound on one node run, start to report.
const RUN: Duration = Duration::from_secs(90);

/// Whether the line has vote extensions (v0.38 and later): its signer
/// signs a non-nil precommit's extension.
fn has_extensions(version: GoVersion) -> bool {
    !matches!(version, GoVersion::V034 | GoVersion::V037)
}

fn runtime() -> tokio::runtime::Runtime {
    // Multi-thread: the GuardedSigner syncs its state file on the
    // endpoint's task (see the endpoint module's docs).
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// The transports the tests run over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Transport {
    Tcp,
    Unix,
    /// v0.40.0 only.
    Noise,
}

/// Where our node listens: on `noise://`, accepting the signer `signer`.
fn address(dir: &Path, transport: Transport, signer: Option<&Identity>) -> Address {
    match transport {
        Transport::Unix => Address::unix(dir.join("privval.sock")),
        Transport::Tcp => Address::tcp("127.0.0.1:0"),
        Transport::Noise => Address::noise(
            signer.expect("a noise signer").public_key().peer_id(),
            "127.0.0.1:0".parse().unwrap(),
        ),
    }
}

/// A fresh stable identity, saved as a node_key.json for the Go side.
fn identity_file(dir: &Path, name: &str) -> (Identity, PathBuf) {
    let path = dir.join(name);
    let id = Identity::generate();
    p2p_conn::keyfile::save_new(&id, &path).unwrap();
    (id, path)
}

fn proposal(height: i64, block_n: u8) -> Proposal {
    let mut p = Proposal::default();
    p.msg_type = signed_msg_type::PROPOSAL;
    p.height = height;
    p.round = 0;
    p.pol_round = -1;
    p.block_id = block(block_n);
    p.timestamp = Timestamp::new(1_700_000_000 + height, 0);
    p
}

fn check_signature(key: &VerifyingKey, msg: &[u8], signature: &[u8], what: &str) {
    let sig = Signature::from_slice(signature)
        .unwrap_or_else(|e| panic!("{what}: {} bytes are no signature: {e}", signature.len()));
    key.verify(msg, &sig)
        .unwrap_or_else(|e| panic!("{what}: the signature does not verify: {e}"));
}

/// CometBFT's signer dials p2p-conn's node endpoint.
fn our_node_with_go_signer(version: GoVersion, test: &str, transport: Transport) {
    let Some(bin) = go_peer(version, test) else {
        return;
    };
    let dir = scratch(&test.replace("::", "-"));
    let key = dir.join("priv_validator_key.json");
    let state = dir.join("priv_validator_state.json");
    let made = go_privval_keygen(&bin, &key, &state);
    let from_file = load_validator_key(&key).unwrap();
    assert_eq!(
        from_file.public_key().as_bytes().as_slice(),
        made.as_slice(),
        "{test}: privval-keygen printed another key than its key file holds"
    );
    let extensions = has_extensions(version);
    let deadline = Instant::now() + RUN;
    let (signer_id, signer_id_file) = identity_file(&dir, "signer_node_key.json");
    let noise = (transport == Transport::Noise).then_some(signer_id_file.as_path());
    runtime().block_on(async {
        let node = NodeEndpoint::bind(
            &address(&dir, transport, Some(&signer_id)),
            Identity::generate(),
        )
        .await
        .unwrap()
        .accept_timeout(Duration::from_secs(30));
        let signer_addr = node.address().to_string();
        let client = SignerClient::new(node);
        let mut signer =
            go_privval_signer(&bin, &signer_addr, &key, &state, CHAIN, noise, deadline);
        assert_eq!(signer.public_key, made, "{test}: privval-signer's key");

        let pk = client.public_key(CHAIN).await.unwrap();
        let Some(crypto_public_key::Key::Ed25519(bytes)) = pk.sum else {
            panic!("{test}: not an Ed25519 key: {pk:?}");
        };
        assert_eq!(bytes, made, "{test}: the key the signer sent");
        let vk = VerifyingKey::from_bytes(bytes.as_slice().try_into().unwrap()).unwrap();

        for height in 1..=i64::from(HEIGHTS) {
            let sent = proposal(height, 1);
            let signed = client.sign_proposal(CHAIN, sent.clone()).await.unwrap();
            let bytes = proposal_sign_bytes(CHAIN, &signed);
            assert_eq!(
                bytes,
                proposal_sign_bytes(CHAIN, &sent),
                "{test}: proposal {height} came back changed"
            );
            check_signature(
                &vk,
                &bytes,
                &signed.signature,
                &format!("{test}: proposal {height}"),
            );
            for msg_type in [signed_msg_type::PREVOTE, signed_msg_type::PRECOMMIT] {
                let mut sent = vote(msg_type, height, 0, 1, 1_700_000_000 + height);
                sent.validator_address = vec![0; 20];
                let precommit = msg_type == signed_msg_type::PRECOMMIT;
                if precommit && extensions {
                    sent.extension = format!("extension at {height}").into_bytes();
                }
                let signed = client.sign_vote(CHAIN, sent.clone(), false).await.unwrap();
                let what = format!("{test}: vote type {msg_type} at {height}");
                let bytes = vote_sign_bytes(CHAIN, &signed);
                assert_eq!(
                    bytes,
                    vote_sign_bytes(CHAIN, &sent),
                    "{what} came back changed"
                );
                check_signature(&vk, &bytes, &signed.signature, &what);
                if precommit && extensions {
                    assert_eq!(signed.extension, sent.extension, "{what}: extension");
                    let ext = vote_extension_sign_bytes(CHAIN, &signed);
                    check_signature(
                        &vk,
                        &ext,
                        &signed.extension_signature,
                        &format!("{what}, extension"),
                    );
                } else {
                    assert!(
                        signed.extension_signature.is_empty(),
                        "{what}: an extension signature"
                    );
                }
            }
        }

        // A precommit for another block at the last height, round and step
        // signed: FilePV refuses it with an error response.
        let conflict = vote(
            signed_msg_type::PRECOMMIT,
            i64::from(HEIGHTS),
            0,
            2,
            1_700_000_000,
        );
        match client.sign_vote(CHAIN, conflict, false).await {
            Err(EndpointError::Remote(e)) => {
                assert!(!e.description.is_empty(), "{test}: an empty refusal");
            }
            other => panic!("{test}: the double sign got {other:?}, not a RemoteSignerError"),
        }
        // The refusal dropped nothing: the next height still signs.
        let next = proposal(i64::from(HEIGHTS) + 1, 1);
        let signed = client.sign_proposal(CHAIN, next).await.unwrap();
        check_signature(
            &vk,
            &proposal_sign_bytes(CHAIN, &signed),
            &signed.signature,
            test,
        );
        signer.check_running("p2p-conn's node asked for signatures");
        drop(signer.stop());
    });
}

fn our_node_with_go_signer_tcp(version: GoVersion, test: &str) {
    our_node_with_go_signer(version, test, Transport::Tcp);
}

fn our_node_with_go_signer_unix(version: GoVersion, test: &str) {
    our_node_with_go_signer(version, test, Transport::Unix);
}

/// p2p-conn's signer (GuardedSigner, fresh state file) dials CometBFT's
/// node side.
fn go_node_with_our_signer(version: GoVersion, test: &str, transport: Transport) {
    let Some(bin) = go_peer(version, test) else {
        return;
    };
    let dir = scratch(&test.replace("::", "-"));
    let state = dir.join("priv_validator_state.json");
    state_file::create_new(&state).unwrap();
    let validator = Identity::generate();
    let expected = validator.public_key().as_bytes().to_vec();
    let mut signer = GuardedSigner::open(validator, &state)
        .unwrap()
        .with_chain_id(CHAIN);
    let mut run = NodeRun::tcp(CHAIN, HEIGHTS);
    run.extensions = has_extensions(version);
    let ours = Identity::generate();
    if transport != Transport::Tcp {
        run.addr = address(&dir, transport, Some(&ours)).to_string();
    }
    let deadline = Instant::now() + RUN;
    let node = go_privval_node(&bin, &run, deadline);
    let addr: Address = node
        .addr
        .parse()
        .unwrap_or_else(|e| panic!("{test}: privval-node listens on {:?}: {e}", node.addr));
    if transport == Transport::Noise {
        assert!(
            matches!(addr, Address::Noise { .. }),
            "{test}: privval-node listens on {addr}"
        );
    }
    let rt = runtime();
    let endpoint = SignerEndpoint::new(addr, ours);
    let serving = rt.spawn(async move {
        let _ = endpoint.run(&mut signer).await;
    });
    let (report, out) = node.report(deadline);
    serving.abort();
    let n = u64::from(HEIGHTS);
    assert_eq!(report.error, "", "{test}: {report:?}; {out:?}");
    assert_eq!(
        report.public_key, expected,
        "{test}: the node got another key"
    );
    assert_eq!(report.proposals, n, "{test}: {report:?}");
    assert_eq!(report.votes, 2 * n, "{test}: {report:?}");
    assert_eq!(report.verified, 3 * n, "{test}: {report:?}");
    assert!(report.double_sign_refused, "{test}: {report:?}");
    assert!(
        out.status.success(),
        "{test}: privval-node exited non-zero: {out:?}"
    );
    // The refused precommit left the high-water mark where it was.
    let left = state_file::load(&state).unwrap();
    assert_eq!(
        left.hrs(),
        Hrs::new(i64::from(HEIGHTS), 0, Step::Precommit),
        "{test}"
    );
}

fn go_node_with_our_signer_tcp(version: GoVersion, test: &str) {
    go_node_with_our_signer(version, test, Transport::Tcp);
}

fn go_node_with_our_signer_unix(version: GoVersion, test: &str) {
    go_node_with_our_signer(version, test, Transport::Unix);
}

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
    let signer = go_privval_signer(
        bin,
        &go_node.addr,
        &key,
        &state,
        signer_chain,
        None,
        deadline,
    );
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
    run.extensions = has_extensions(version);
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
        our_node_with_go_signer_tcp,
        our_node_with_go_signer_unix,
        go_node_with_our_signer_tcp,
        go_node_with_our_signer_unix,
        go_signer_serves_go_node_tcp,
        go_signer_serves_go_node_unix,
        go_node_reports_a_signer_for_another_chain,
    ]
}

/// v0.40.0's `noise://`: CometBFT's signer (go-libp2p Noise) dials our node
/// side, which accepts only that signer's peer ID.
#[test]
fn v0_40_our_node_with_go_signer_noise() {
    our_node_with_go_signer(
        GoVersion::V040,
        "v0_40_our_node_with_go_signer_noise",
        Transport::Noise,
    );
}

/// v0.40.0's `noise://`: our signer dials CometBFT's `NoiseListener`, which
/// allows our peer ID only, and serves its `SignerClient`.
#[test]
fn v0_40_go_node_with_our_signer_noise() {
    go_node_with_our_signer(
        GoVersion::V040,
        "v0_40_go_node_with_our_signer_noise",
        Transport::Noise,
    );
}

/// Our signer against a v0.40.0 `NoiseListener` that is not what it
/// expects: a node that allows another signer closes us after the
/// handshake, and a node whose identity is not the one our address names
/// is refused by us before we reveal ours. Either way the node signs
/// nothing and we keep redialing.
#[test]
fn v0_40_noise_identities_are_checked_both_ways() {
    let test = "v0_40_noise_identities_are_checked_both_ways";
    let Some(bin) = go_peer(GoVersion::V040, test) else {
        return;
    };
    let dir = scratch(test);
    let rt = runtime();
    for case in ["node allows another signer", "signer expects another node"] {
        let ours = Identity::generate();
        let allowed = if case == "node allows another signer" {
            Identity::generate()
        } else {
            ours.clone()
        };
        let mut run = NodeRun::tcp(CHAIN, 1);
        run.wait = Duration::from_secs(3);
        run.addr = address(&dir, Transport::Noise, Some(&allowed)).to_string();
        let deadline = Instant::now() + RUN;
        let node = go_privval_node(&bin, &run, deadline);
        let mut addr: Address = node.addr.parse().unwrap();
        if case == "signer expects another node" {
            let Address::Noise { addr: at, .. } = addr else {
                panic!("{test}: {addr}");
            };
            addr = Address::noise(Identity::generate().public_key().peer_id(), at);
        }
        let errors = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = errors.clone();
        let connected = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let c = connected.clone();
        let endpoint = SignerEndpoint::new(addr, ours).on_event(move |e| match e {
            p2p_conn_privval::endpoint::SignerEvent::ConnectFailed { error, .. } => {
                seen.lock().unwrap().push(error.clone())
            }
            p2p_conn_privval::endpoint::SignerEvent::Disconnected { reason } => {
                seen.lock().unwrap().push(reason.clone())
            }
            p2p_conn_privval::endpoint::SignerEvent::Connected { .. } => {
                c.store(true, std::sync::atomic::Ordering::SeqCst)
            }
            _ => {}
        });
        let state = dir.join(format!("state-{}.json", case.len()));
        state_file::create_new(&state).unwrap();
        let mut signer = GuardedSigner::open(Identity::generate(), &state)
            .unwrap()
            .with_chain_id(CHAIN);
        let serving = rt.spawn(async move {
            let _ = endpoint.run(&mut signer).await;
        });
        let (report, out) = node.report(deadline);
        serving.abort();
        assert!(!out.status.success(), "{test}: {case}: {report:?}");
        assert_eq!(report.verified, 0, "{test}: {case}: {report:?}");
        let errors = errors.lock().unwrap().clone();
        assert!(!errors.is_empty(), "{test}: {case}: no failed dial seen");
        if case == "signer expects another node" {
            assert!(
                !connected.load(std::sync::atomic::Ordering::SeqCst),
                "{test}: {case}: connected"
            );
            assert!(
                errors.iter().all(|e| e.contains("expected peer")),
                "{test}: {case}: {errors:?}"
            );
        }
    }
}
