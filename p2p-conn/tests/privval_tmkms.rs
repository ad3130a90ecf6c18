//! The node side of privval against tmkms 0.15.0 (iqlusion's KMS, Rust,
//! `softsign` backend): an independent remote signer dials our listener
//! over `tcp://` (a secret connection, tmkms pinning our node ID) and
//! serves our requests. Every signature it returns is verified with
//! ed25519-dalek over our own sign bytes (`vote_sign_bytes`,
//! `proposal_sign_bytes`), so a difference between our canonical encoding
//! and tmkms's (its own Rust protobuf code) fails here.
//!
//! Each test runs at both `protocol_version`s tmkms offers (`v0.34`,
//! `v0.38`; tmkms 0.15.0 speaks the v0.34 privval messages at both, see
//! `p2p_conn_interop::tmkms`). Without tmkms (it is installed on first use,
//! see `tmkms_binary`) the tests print a notice and pass, unless `CI=true`.

mod common;

use std::time::Duration;

use ed25519_dalek::Verifier;
use p2p_conn::privval::{
    self, message::Sum, proposal_sign_bytes, public_key, signed_msg_type,
    vote_extension_sign_bytes, vote_sign_bytes, Decoder, Message, PingRequest, Proposal,
    PubKeyRequest, RemoteSignerError, SignProposalRequest, SignVoteRequest, Timestamp, Vote,
};
use p2p_conn::{Config, Identity, NodeId};
use p2p_conn_interop::process::scratch;
use p2p_conn_interop::tmkms::{tmkms_binary, Home, ProtocolVersion, Settings, Tmkms};
use tokio::net::{TcpListener, TcpStream};

use common::privval::block;

const CHAIN: &str = "tmkms-test-chain";
/// The consensus key tmkms is given.
const CONSENSUS_SEED: [u8; 32] = [0x5c; 32];
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
    NodeId::from_public_key(consensus_key().as_bytes())
        .as_bytes()
        .to_vec()
}

fn vote(msg_type: i32, height: i64, round: i32, block_n: u8) -> Vote {
    let mut v = common::privval::vote(msg_type, height, round, block_n, 0);
    // Distinct, with nanoseconds, so the timestamp's encoding counts.
    v.timestamp = Timestamp::new(1_700_000_000 + height * 10 + i64::from(round), 123_456_789);
    v.validator_address = validator_address();
    v.validator_index = 3;
    v
}

fn proposal(height: i64, round: i32, pol_round: i32, block_n: u8) -> Proposal {
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

/// What a request can end with.
#[derive(Debug)]
enum NodeError {
    /// tmkms's `RemoteSignerError`.
    Remote(RemoteSignerError),
    /// The connection failed, timed out or carried the wrong answer.
    Other(String),
}

impl std::fmt::Display for NodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NodeError::Remote(e) => write!(f, "RemoteSignerError {}: {}", e.code, e.description),
            NodeError::Other(why) => f.write_str(why),
        }
    }
}

/// The node's side of one tmkms session: a listener tmkms dials and the
/// connection it accepted.
struct Node {
    identity: Identity,
    listener: TcpListener,
    conn: Option<p2p_conn::io::tokio::SecretConnection<TcpStream>>,
}

impl Node {
    async fn bind() -> Node {
        Node {
            identity: Identity::generate(),
            listener: TcpListener::bind("127.0.0.1:0").await.unwrap(),
            conn: None,
        }
    }

    /// The address tmkms dials, with our node ID for it to check.
    fn addr(&self) -> String {
        let port = self.listener.local_addr().unwrap().port();
        format!("tcp://{}@127.0.0.1:{port}", self.identity.node_id())
    }

    /// Accept tmkms's next connection, checking it is tmkms's identity.
    async fn accept(&mut self, kms: &mut Tmkms) {
        self.conn = None;
        let (tcp, _) = match tokio::time::timeout(CONNECT, self.listener.accept()).await {
            Ok(accepted) => accepted.unwrap(),
            Err(_) => kms.fail("never dialed the node"),
        };
        let config = Config::default().expect_peer(Identity::from_seed(&KMS_SEED).node_id());
        match p2p_conn::io::tokio::handshake(tcp, &self.identity, &config).await {
            Ok(conn) => self.conn = Some(conn),
            Err(e) => kms.fail(&format!("handshake with tmkms failed: {e}")),
        }
    }

    async fn request(&mut self, sum: Sum) -> Result<Sum, NodeError> {
        let conn = self
            .conn
            .as_mut()
            .ok_or_else(|| NodeError::Other("no connection".into()))?;
        let mut msg = Message::default();
        msg.sum = Some(sum);
        let exchange = async {
            privval::tokio::write(conn, &msg).await?;
            privval::tokio::read(conn, &mut Decoder::new()).await
        };
        match tokio::time::timeout(REQUEST, exchange).await {
            Err(_) => Err(NodeError::Other("timed out".into())),
            Ok(Err(e)) => Err(NodeError::Other(e.to_string())),
            Ok(Ok(reply)) => reply
                .sum
                .ok_or_else(|| NodeError::Other("empty message".into())),
        }
    }

    async fn public_key(&mut self, chain_id: &str) -> Result<privval::PublicKey, NodeError> {
        let mut req = PubKeyRequest::default();
        req.chain_id = chain_id.into();
        match self.request(Sum::PubKeyRequest(req)).await? {
            Sum::PubKeyResponse(r) => match (r.error, r.pub_key) {
                (Some(e), _) => Err(NodeError::Remote(e)),
                (None, Some(pk)) => Ok(pk),
                (None, None) => Err(NodeError::Other("no key in the answer".into())),
            },
            other => Err(NodeError::Other(format!("answered {other:?}"))),
        }
    }

    async fn sign_vote(&mut self, chain_id: &str, vote: Vote) -> Result<Vote, NodeError> {
        let mut req = SignVoteRequest::default();
        req.chain_id = chain_id.into();
        req.vote = Some(vote);
        match self.request(Sum::SignVoteRequest(req)).await? {
            Sum::SignedVoteResponse(r) => match r.error {
                Some(e) => Err(NodeError::Remote(e)),
                None => Ok(r.vote),
            },
            other => Err(NodeError::Other(format!("answered {other:?}"))),
        }
    }

    async fn sign_proposal(
        &mut self,
        chain_id: &str,
        proposal: Proposal,
    ) -> Result<Proposal, NodeError> {
        let mut req = SignProposalRequest::default();
        req.chain_id = chain_id.into();
        req.proposal = Some(proposal);
        match self.request(Sum::SignProposalRequest(req)).await? {
            Sum::SignedProposalResponse(r) => match r.error {
                Some(e) => Err(NodeError::Remote(e)),
                None => Ok(r.proposal),
            },
            other => Err(NodeError::Other(format!("answered {other:?}"))),
        }
    }

    async fn ping(&mut self) -> Result<(), NodeError> {
        match self
            .request(Sum::PingRequest(PingRequest::default()))
            .await?
        {
            Sum::PingResponse(_) => Ok(()),
            other => Err(NodeError::Other(format!("answered {other:?}"))),
        }
    }
}

/// A node listening and tmkms (for `version`) dialing it, its home in a
/// scratch folder named after `test`.
async fn start(
    test: &str,
    version: ProtocolVersion,
    tune: impl FnOnce(&mut Settings),
) -> Option<(Node, Tmkms, Home)> {
    let bin = tmkms_binary(test)?;
    let node = Node::bind().await;
    let mut settings = Settings::new(CHAIN, &node.addr(), CONSENSUS_SEED, KMS_SEED);
    settings.protocol_version = Some(version);
    tune(&mut settings);
    let home = Home::write(&scratch(&test.replace("::", "-")), &settings);
    let kms = Tmkms::start(&bin, &home);
    Some((node, kms, home))
}

/// Sign `vote` and check the answer: the signature verifies over our sign
/// bytes of what we sent, and every other field came back as sent.
async fn sign_and_check_vote(node: &mut Node, kms: &mut Tmkms, sent: Vote) {
    let what = format!("type {} at {}/{}", sent.msg_type, sent.height, sent.round);
    let signed = match node.sign_vote(CHAIN, sent.clone()).await {
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
}

async fn sign_and_check_proposal(node: &mut Node, kms: &mut Tmkms, sent: Proposal) {
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
}

/// Heights `from..=to`, each as a node signs it: the proposal (tmkms's step
/// 0, so before the votes), a prevote and a precommit for the block.
async fn sign_heights(node: &mut Node, kms: &mut Tmkms, from: i64, to: i64) {
    for h in from..=to {
        let b = h as u8;
        sign_and_check_proposal(node, kms, proposal(h, 0, -1, b)).await;
        sign_and_check_vote(node, kms, vote(signed_msg_type::PREVOTE, h, 0, b)).await;
        sign_and_check_vote(node, kms, vote(signed_msg_type::PRECOMMIT, h, 0, b)).await;
    }
}

/// A conflicting precommit at `height`/0 (signed for block `height`) is
/// refused with tmkms's double-sign error.
async fn conflicting_precommit_is_refused(node: &mut Node, height: i64) {
    let conflict = vote(signed_msg_type::PRECOMMIT, height, 0, height as u8 + 100);
    match node.sign_vote(CHAIN, conflict).await {
        Err(NodeError::Remote(e)) => {
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

/// The public key, a run of heights (proposals, prevotes and precommits;
/// round 1 of the last height after nil votes in round 0, with a POL
/// round), a refused double sign after which the session goes on, a ping.
async fn signs_and_refuses_double_signs(version: ProtocolVersion, test: &str) {
    let Some((mut node, mut kms, home)) = start(test, version, |_| ()).await else {
        return;
    };
    node.accept(&mut kms).await;

    let pk = node.public_key(CHAIN).await.expect("public key");
    assert_eq!(
        pk.sum,
        Some(public_key::Sum::Ed25519(
            consensus_key().as_bytes().to_vec()
        )),
        "tmkms answered another key than the one it was given"
    );

    sign_heights(&mut node, &mut kms, 1, 4).await;
    // Height 5: nil votes in round 0, then the block in round 1 with POL
    // round 0.
    sign_and_check_vote(&mut node, &mut kms, vote(signed_msg_type::PREVOTE, 5, 0, 0)).await;
    sign_and_check_vote(
        &mut node,
        &mut kms,
        vote(signed_msg_type::PRECOMMIT, 5, 0, 0),
    )
    .await;
    sign_and_check_proposal(&mut node, &mut kms, proposal(5, 1, 0, 5)).await;
    sign_and_check_vote(&mut node, &mut kms, vote(signed_msg_type::PREVOTE, 5, 1, 5)).await;
    sign_and_check_vote(
        &mut node,
        &mut kms,
        vote(signed_msg_type::PRECOMMIT, 5, 1, 5),
    )
    .await;

    // The same HRS for another block: refused, and the session goes on.
    match node
        .sign_vote(CHAIN, vote(signed_msg_type::PRECOMMIT, 5, 1, 6))
        .await
    {
        Err(NodeError::Remote(e)) => assert_eq!(e.code, DOUBLE_SIGN, "{e:?}"),
        other => panic!("a conflicting precommit at 5/1 got {other:?}"),
    }
    node.ping().await.expect("ping after the refusal");
    sign_heights(&mut node, &mut kms, 6, 6).await;
    conflicting_precommit_is_refused(&mut node, 6).await;

    // One connection throughout, and tmkms recorded the last signature.
    assert_eq!(
        kms.count_in_log("connected to validator successfully"),
        1,
        "tmkms reconnected"
    );
    let state = home.state().expect("tmkms's state file");
    assert!(state.contains("\"height\":\"6\""), "{state}");
}

/// tmkms is stopped and started again: the node accepts its new
/// connection, and the state file tmkms kept still refuses a double sign.
async fn reconnects_after_a_restart(version: ProtocolVersion, test: &str) {
    let Some((mut node, mut kms, _home)) = start(test, version, |_| ()).await else {
        return;
    };
    node.accept(&mut kms).await;
    sign_heights(&mut node, &mut kms, 1, 2).await;

    kms.restart();
    node.accept(&mut kms).await;
    let pk = node
        .public_key(CHAIN)
        .await
        .expect("public key after the restart");
    assert_eq!(
        pk.sum,
        Some(public_key::Sum::Ed25519(
            consensus_key().as_bytes().to_vec()
        ))
    );
    conflicting_precommit_is_refused(&mut node, 2).await;
    sign_heights(&mut node, &mut kms, 3, 3).await;
}

/// tmkms drops a session it reads nothing on for its `timeout`; pings
/// answered every 500 ms keep a 2 s timeout's session alive for 5 s.
async fn pings_keep_the_session(version: ProtocolVersion, test: &str) {
    let Some((mut node, mut kms, _home)) = start(test, version, |s| s.timeout_secs = Some(2)).await
    else {
        return;
    };
    node.accept(&mut kms).await;
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        node.ping().await.expect("ping");
    }
    sign_heights(&mut node, &mut kms, 1, 1).await;
    assert_eq!(
        kms.count_in_log("connected to validator successfully"),
        1,
        "tmkms dropped the pinged session"
    );
}

/// `sign_extensions = true` and a non-nil precommit with an extension: the
/// vote's signature verifies over our sign bytes, which leave the
/// extension out. tmkms 0.15.0 computes the extension signature but sends
/// its v0.34 `Vote`, which has neither the extension nor its signature
/// (seen here: both come back empty); a later tmkms that sends the
/// signature must make it verify over our extension sign bytes.
async fn extension_signing(version: ProtocolVersion, test: &str) {
    let Some((mut node, mut kms, _home)) = start(test, version, |s| s.sign_extensions = true).await
    else {
        return;
    };
    node.accept(&mut kms).await;
    let mut sent = vote(signed_msg_type::PRECOMMIT, 1, 0, 1);
    sent.extension = b"an extension".to_vec();
    let signed = match node.sign_vote(CHAIN, sent.clone()).await {
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
    [signs_and_refuses_double_signs, reconnects_after_a_restart, pings_keep_the_session, extension_signing]
}
