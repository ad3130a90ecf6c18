//! Our node side of privval (`NodeEndpoint` + `SignerClient`) against
//! tmkms 0.15.0 (iqlusion's KMS, Rust, `softsign` backend): an independent
//! remote signer dials our listener over `tcp://` (a secret connection;
//! tmkms pins our node ID, we pin its) or `unix://` and serves our
//! requests. Every signature it returns is verified with ed25519-dalek
//! over our own sign bytes (`vote_sign_bytes`, `proposal_sign_bytes`), so
//! a difference between our canonical encoding and tmkms's (its own Rust
//! protobuf code) fails here. Also: tmkms's double-sign refusal arrives as
//! `EndpointError::Remote` and the session goes on; our pings keep a
//! session past tmkms's read timeout; a restarted tmkms's new connection is
//! accepted; a session tmkms ends mid-request (a v1.0.1 `SignBytesRequest`,
//! which it reads as Celestia's raw-bytes request) fails that request and
//! the next one gets the new session; what it does with vote extensions.
//!
//! Each test runs at both `protocol_version`s tmkms offers (`v0.34`,
//! `v0.38`; tmkms 0.15.0 speaks the v0.34 privval messages at both and has
//! no v1.0 support, see `p2p_conn_interop::tmkms`). Without tmkms (it is
//! installed on first use, see `tmkms_binary`) the tests print a notice and
//! pass, unless `CI=true`.

use std::time::Duration;

use ed25519_dalek::Verifier;
use p2p_conn::Identity;
use p2p_conn_interop::process::scratch;
use p2p_conn_interop::tmkms::{tmkms_binary, Home, ProtocolVersion, Settings, Tmkms};
use p2p_conn_privval::endpoint::{Address, EndpointError, NodeEndpoint, RequestKind, SignerClient};
use p2p_conn_privval::{
    crypto_public_key, proposal_sign_bytes, signed_msg_type, vote_extension_sign_bytes,
    vote_sign_bytes, Proposal, Timestamp, Vote,
};

use crate::common::block;

pub(crate) const CHAIN: &str = "tmkms-test-chain";
/// The consensus key tmkms is given.
pub(crate) const CONSENSUS_SEED: [u8; 32] = [0x5c; 32];
/// tmkms's secret-connection identity.
const KMS_SEED: [u8; 32] = [0x6b; 32];
/// Bound on tmkms's first dial (it starts, loads its keys, dials).
const CONNECT: Duration = Duration::from_secs(30);
/// Bound on one request and its response.
const REQUEST: Duration = Duration::from_secs(10);
/// The `RemoteSignerError` code tmkms answers a double sign with.
const DOUBLE_SIGN: i32 = 2;

fn consensus_key() -> ed25519_dalek::VerifyingKey {
    ed25519_dalek::SigningKey::from_bytes(&CONSENSUS_SEED).verifying_key()
}

/// The validator address of the consensus key: the first 20 bytes of the
/// SHA-256 of the public key, as for a node ID. tmkms refuses a vote whose
/// address is not 20 bytes long.
fn validator_address() -> Vec<u8> {
    p2p_conn::PublicKey::from_bytes(*consensus_key().as_bytes())
        .node_id()
        .as_bytes()
        .to_vec()
}

pub(crate) fn vote(msg_type: i32, height: i64, round: i32, block_n: u8) -> Vote {
    let mut v = crate::common::vote(msg_type, height, round, block_n, 0);
    // Distinct, with nanoseconds, so the timestamp's encoding counts.
    v.timestamp = Timestamp::new(1_700_000_000 + height * 10 + i64::from(round), 123_456_789);
    v.validator_address = validator_address();
    v.validator_index = 3;
    v
}

pub(crate) fn proposal(height: i64, round: i32, pol_round: i32, block_n: u8) -> Proposal {
    let mut p = Proposal::default();
    p.msg_type = signed_msg_type::PROPOSAL;
    p.height = height;
    p.round = round;
    p.pol_round = pol_round;
    p.block_id = block(block_n);
    p.timestamp = Timestamp::new(1_700_000_000 + height * 10 + i64::from(round), 987_654_321);
    p
}

fn verifies(sign_bytes: &[u8], sig: &[u8]) -> bool {
    match ed25519_dalek::Signature::from_slice(sig) {
        Ok(sig) => consensus_key().verify(sign_bytes, &sig).is_ok(),
        Err(_) => false,
    }
}

/// How the node listens: `tcp://` (a secret connection; tmkms pins our
/// node ID and we pin tmkms's) or `unix://` (plaintext).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Transport {
    Tcp,
    Unix,
}

/// Our node side listening (its client waits up to [`CONNECT`] for a
/// signer) and tmkms (at `version`) dialing it, tmkms's home in a scratch
/// folder named after `test`.
pub(crate) async fn start(
    test: &str,
    version: ProtocolVersion,
    transport: Transport,
    tune_node: impl FnOnce(NodeEndpoint) -> NodeEndpoint,
    tune_kms: impl FnOnce(&mut Settings),
) -> Option<(SignerClient, Tmkms, Home)> {
    let bin = tmkms_binary(test)?;
    let dir = scratch(&test.replace("::", "-"));
    let identity = Identity::generate();
    let node_id = identity.node_id();
    let (endpoint, kms_addr) = match transport {
        Transport::Tcp => {
            let endpoint = NodeEndpoint::bind(&Address::tcp("127.0.0.1:0"), identity)
                .await
                .unwrap()
                .expect_signer(Identity::from_seed(&KMS_SEED).node_id());
            let local = endpoint.local_addr().unwrap();
            (endpoint, format!("tcp://{node_id}@{local}"))
        }
        Transport::Unix => {
            let path = dir.join("node.sock");
            let endpoint = NodeEndpoint::bind(&Address::unix(&path), identity)
                .await
                .unwrap();
            (endpoint, format!("unix://{}", path.display()))
        }
    };
    let client = SignerClient::new(tune_node(endpoint.accept_timeout(CONNECT)));
    let mut settings = Settings::new(CHAIN, &kms_addr, CONSENSUS_SEED, KMS_SEED);
    settings.protocol_version = Some(version);
    tune_kms(&mut settings);
    let home = Home::write(&dir, &settings);
    let mut kms = Tmkms::start(&bin, &home);
    if let Err(e) = client.wait_for_signer().await {
        kms.fail(&format!("never connected: {e}"));
    }
    Some((client, kms, home))
}

/// Sign `vote` and check the answer: the signature verifies over our sign
/// bytes of what we sent, and every other field came back as sent. The
/// signed vote.
pub(crate) async fn sign_and_check_vote(node: &SignerClient, kms: &mut Tmkms, sent: Vote) -> Vote {
    let what = format!("type {} at {}/{}", sent.msg_type, sent.height, sent.round);
    let signed = match node.sign_vote(CHAIN, sent.clone(), false).await {
        Ok(v) => v,
        Err(e) => kms.fail(&format!("signing the {what} vote: {e}")),
    };
    assert!(
        verifies(&vote_sign_bytes(CHAIN, &sent), &signed.signature),
        "tmkms's signature of the {what} vote does not verify over our sign bytes"
    );
    let mut unsigned = signed.clone();
    unsigned.signature = Vec::new();
    assert_eq!(unsigned, sent, "tmkms changed the {what} vote");
    signed
}

pub(crate) async fn sign_and_check_proposal(
    node: &SignerClient,
    kms: &mut Tmkms,
    sent: Proposal,
) -> Proposal {
    let what = format!("proposal at {}/{}", sent.height, sent.round);
    let signed = match node.sign_proposal(CHAIN, sent.clone()).await {
        Ok(p) => p,
        Err(e) => kms.fail(&format!("signing the {what}: {e}")),
    };
    assert!(
        verifies(&proposal_sign_bytes(CHAIN, &sent), &signed.signature),
        "tmkms's signature of the {what} does not verify over our sign bytes"
    );
    let mut unsigned = signed.clone();
    unsigned.signature = Vec::new();
    assert_eq!(unsigned, sent, "tmkms changed the {what}");
    signed
}

/// Heights `from..=to`, each as a node signs it: the proposal (tmkms's step
/// 0, so before the votes), a prevote and a precommit for the block.
async fn sign_heights(node: &SignerClient, kms: &mut Tmkms, from: i64, to: i64) {
    for h in from..=to {
        let b = h as u8;
        sign_and_check_proposal(node, kms, proposal(h, 0, -1, b)).await;
        sign_and_check_vote(node, kms, vote(signed_msg_type::PREVOTE, h, 0, b)).await;
        sign_and_check_vote(node, kms, vote(signed_msg_type::PRECOMMIT, h, 0, b)).await;
    }
}

/// A conflicting precommit at `height`/0 (signed for block `height`) is
/// refused with tmkms's double-sign error.
async fn conflicting_precommit_is_refused(node: &SignerClient, height: i64) {
    let conflict = vote(signed_msg_type::PRECOMMIT, height, 0, height as u8 + 100);
    match node.sign_vote(CHAIN, conflict, false).await {
        Err(EndpointError::Remote(e)) => {
            assert_eq!(e.code, DOUBLE_SIGN, "{e:?}");
            assert!(
                e.description.contains("double signing"),
                "{:?}",
                e.description
            );
        }
        other => panic!("a conflicting precommit at {height}/0 got {other:?}"),
    }
}

/// The public key tmkms was given.
async fn check_public_key(node: &SignerClient, kms: &mut Tmkms) {
    match node.public_key(CHAIN).await {
        Ok(pk) => assert_eq!(
            pk.sum,
            Some(crypto_public_key::Key::Ed25519(
                consensus_key().as_bytes().to_vec()
            )),
            "tmkms answered another key than the one it was given"
        ),
        Err(e) => kms.fail(&format!("public key: {e}")),
    }
}

/// The public key, a run of heights (proposals, prevotes and precommits;
/// round 1 of the last height after nil votes in round 0, with a POL
/// round), a refused double sign after which the session goes on, a ping;
/// one connection throughout.
async fn exercise(node: &SignerClient, kms: &mut Tmkms, home: &Home) {
    check_public_key(node, kms).await;
    sign_heights(node, kms, 1, 4).await;
    // Height 5: nil votes in round 0, then the block in round 1 with POL
    // round 0.
    sign_and_check_vote(node, kms, vote(signed_msg_type::PREVOTE, 5, 0, 0)).await;
    sign_and_check_vote(node, kms, vote(signed_msg_type::PRECOMMIT, 5, 0, 0)).await;
    sign_and_check_proposal(node, kms, proposal(5, 1, 0, 5)).await;
    sign_and_check_vote(node, kms, vote(signed_msg_type::PREVOTE, 5, 1, 5)).await;
    sign_and_check_vote(node, kms, vote(signed_msg_type::PRECOMMIT, 5, 1, 5)).await;

    // The same HRS for another block: refused, and the session goes on.
    match node
        .sign_vote(CHAIN, vote(signed_msg_type::PRECOMMIT, 5, 1, 6), false)
        .await
    {
        Err(EndpointError::Remote(e)) => assert_eq!(e.code, DOUBLE_SIGN, "{e:?}"),
        other => panic!("a conflicting precommit at 5/1 got {other:?}"),
    }
    node.ping().await.expect("ping after the refusal");
    sign_heights(node, kms, 6, 6).await;
    conflicting_precommit_is_refused(node, 6).await;

    // One connection throughout, on both sides; every request counted,
    // the two refusals as errors.
    assert_eq!(
        kms.count_in_log("connected to validator successfully"),
        1,
        "tmkms reconnected"
    );
    let stats = node.stats().snapshot();
    assert_eq!((stats.connects, stats.disconnects), (1, 0), "{stats}");
    let votes = stats.kind(RequestKind::SignVote);
    assert_eq!((votes.count, votes.errors), (16, 2), "{stats}");
    let proposals = stats.kind(RequestKind::SignProposal);
    assert_eq!((proposals.count, proposals.errors), (6, 0), "{stats}");
    let state = home.state().expect("tmkms's state file");
    assert!(state.contains("\"height\":\"6\""), "{state}");
}

async fn signs_and_refuses_double_signs(version: ProtocolVersion, test: &str) {
    let Some((node, mut kms, home)) = start(test, version, Transport::Tcp, |n| n, |_| ()).await
    else {
        return;
    };
    exercise(&node, &mut kms, &home).await;
}

/// The same over `unix://`: plaintext, no handshake.
async fn signs_over_a_unix_socket(version: ProtocolVersion, test: &str) {
    let Some((node, mut kms, home)) = start(test, version, Transport::Unix, |n| n, |_| ()).await
    else {
        return;
    };
    exercise(&node, &mut kms, &home).await;
}

/// Requests until one succeeds, at most `tries`: a request on a
/// connection that has just died fails, and drops it; the next accepts
/// anew.
pub(crate) async fn public_key_within(
    node: &SignerClient,
    kms: &mut Tmkms,
    tries: usize,
    why: &str,
) {
    let mut failures = Vec::new();
    for _ in 0..tries {
        match node.public_key(CHAIN).await {
            Ok(pk) => {
                assert_eq!(
                    pk.sum,
                    Some(crypto_public_key::Key::Ed25519(
                        consensus_key().as_bytes().to_vec()
                    ))
                );
                return;
            }
            Err(e) => failures.push(e.to_string()),
        }
    }
    kms.fail(&format!("no public key {why}: {failures:?}"))
}

/// tmkms is stopped and started again: our client drops the dead
/// connection and accepts the new one, and the state file tmkms kept
/// still refuses a double sign.
async fn reconnects_after_a_restart(version: ProtocolVersion, test: &str) {
    let Some((node, mut kms, _home)) = start(test, version, Transport::Tcp, |n| n, |_| ()).await
    else {
        return;
    };
    sign_heights(&node, &mut kms, 1, 2).await;

    kms.restart();
    public_key_within(&node, &mut kms, 2, "after the restart").await;
    let stats = node.stats().snapshot();
    assert_eq!((stats.connects, stats.disconnects), (2, 1), "{stats}");
    assert_eq!(
        kms.count_in_log("connected to validator successfully"),
        2,
        "tmkms's sessions"
    );
    conflicting_precommit_is_refused(&node, 2).await;
    sign_heights(&node, &mut kms, 3, 3).await;
}

/// tmkms drops a session it reads nothing on for its `timeout`. With a
/// 2 s timeout and our client's ping every 500 ms, 5 s without a request
/// keep the one session: the pings are answered.
async fn pings_keep_the_session(version: ProtocolVersion, test: &str) {
    let Some((node, mut kms, _home)) = start(
        test,
        version,
        Transport::Tcp,
        |n| n.ping_interval(Duration::from_millis(500)),
        |s| s.timeout_secs = Some(2),
    )
    .await
    else {
        return;
    };
    check_public_key(&node, &mut kms).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    sign_heights(&node, &mut kms, 1, 1).await;
    let stats = node.stats().snapshot();
    let pings = stats.kind(RequestKind::Ping);
    assert!(pings.count >= 1 && pings.errors == 0, "{stats}");
    assert_eq!((stats.connects, stats.disconnects), (1, 0), "{stats}");
    assert_eq!(
        kms.count_in_log("connected to validator successfully"),
        1,
        "tmkms dropped the pinged session"
    );
}

/// A v1.0.1 `SignBytesRequest` is, to tmkms 0.15.0, Celestia's raw-bytes
/// request (the same field number) for the chain its bytes name (here not
/// even a valid chain ID): tmkms ends the session without an answer. Our client reports the request
/// failed (no signature), and the next request gets tmkms's new session.
async fn sign_bytes_ends_the_session(version: ProtocolVersion, test: &str) {
    let Some((node, mut kms, _home)) = start(test, version, Transport::Tcp, |n| n, |_| ()).await
    else {
        return;
    };
    match node.sign_bytes(b"raw bytes").await {
        Err(EndpointError::Remote(e)) => panic!("tmkms answered SignBytes with an error: {e:?}"),
        Err(_) => {}
        Ok(sig) => panic!("tmkms answered SignBytes with a signature: {sig:?}"),
    }
    public_key_within(&node, &mut kms, 1, "after tmkms ended the session").await;
    let stats = node.stats().snapshot();
    assert_eq!((stats.connects, stats.disconnects), (2, 1), "{stats}");
}

/// `sign_extensions = true` and a non-nil precommit with an extension: the
/// vote's signature verifies over our sign bytes, which leave the
/// extension out. tmkms 0.15.0 computes the extension signature but sends
/// its v0.34 `Vote`, which has neither the extension nor its signature
/// (seen here: both come back empty); a later tmkms that sends the
/// signature must make it verify over our extension sign bytes.
async fn extension_signing(version: ProtocolVersion, test: &str) {
    let Some((node, mut kms, _home)) = start(
        test,
        version,
        Transport::Tcp,
        |n| n,
        |s| s.sign_extensions = true,
    )
    .await
    else {
        return;
    };
    let mut sent = vote(signed_msg_type::PRECOMMIT, 1, 0, 1);
    sent.extension = b"an extension".to_vec();
    let signed = match node.sign_vote(CHAIN, sent.clone(), false).await {
        Ok(v) => v,
        Err(e) => kms.fail(&format!("signing a precommit with an extension: {e}")),
    };
    assert!(
        verifies(&vote_sign_bytes(CHAIN, &sent), &signed.signature),
        "the signature of a precommit with an extension does not verify over our sign bytes"
    );
    assert!(
        kms.wait_for_log("signed vote extension", 1, REQUEST),
        "tmkms did not sign the extension"
    );
    if signed.extension_signature.is_empty() {
        eprintln!("{test}: tmkms sent no extension signature (its v0.34 Vote has no field for it)");
    } else {
        assert!(
            verifies(
                &vote_extension_sign_bytes(CHAIN, &sent),
                &signed.extension_signature
            ),
            "tmkms's extension signature does not verify over our extension sign bytes"
        );
    }
}

macro_rules! per_version {
    ($($module:ident: $version:ident),+; $tests:tt) => {$(
        per_version!(@module $module, $version, $tests);
    )+};
    (@module $module:ident, $version:ident, [$($test:ident),+]) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    super::$test(
                        p2p_conn_interop::tmkms::ProtocolVersion::$version,
                        concat!("privval_tmkms::", stringify!($module), "::", stringify!($test)),
                    )
                    .await;
                }
            )+
        }
    };
}

per_version! {
    v0_34: V034, v0_38: V038;
    [
        signs_and_refuses_double_signs,
        signs_over_a_unix_socket,
        reconnects_after_a_restart,
        pings_keep_the_session,
        sign_bytes_ends_the_session,
        extension_signing
    ]
}
