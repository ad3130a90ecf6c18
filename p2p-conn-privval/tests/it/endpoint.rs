//! The privval endpoints against each other and against hostile peers, over
//! real sockets: our `SignerEndpoint` serving a `GuardedSigner`, our
//! `NodeEndpoint` + `SignerClient` asking; tcp:// (secret connection) and
//! unix:// (plaintext); restarts, pings, timeouts, hostile frames.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ed25519_dalek::Verifier;
use p2p_conn::Identity;
use p2p_conn_privval::endpoint::{
    Address, EndpointError, NodeEndpoint, RequestKind, SignerClient, SignerEndpoint, SignerEvent,
    StatsHandle,
};
use p2p_conn_privval::testkit::{encode, message::Sum, Message, PingRequest};
use p2p_conn_privval::{
    crypto_public_key, proposal_sign_bytes, signed_msg_type, state_file, vote_extension_sign_bytes,
    vote_sign_bytes, GuardedSigner, Proposal, Timestamp,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::{block, temp_dir, vote};

const CHAIN: &str = "endpoint-chain";

fn validator_key() -> Identity {
    Identity::from_seed(&[9; 32])
}

fn signer_in(dir: &Path) -> GuardedSigner {
    let path = dir.join("priv_validator_state.json");
    state_file::create_new(&path).unwrap();
    GuardedSigner::open(validator_key(), &path).unwrap()
}

fn verify(bytes: &[u8], sig: &[u8]) -> bool {
    let vk =
        ed25519_dalek::VerifyingKey::from_bytes(validator_key().public_key().as_bytes()).unwrap();
    ed25519_dalek::Signature::from_slice(sig).is_ok_and(|s| vk.verify(bytes, &s).is_ok())
}

type Events = Arc<Mutex<Vec<SignerEvent>>>;

/// Starts our signer endpoint for `addr` on its own task: returns its
/// stats, its events and the task (abort it to stop the signer).
fn spawn_signer(
    addr: Address,
    signer: GuardedSigner,
    tune: impl FnOnce(SignerEndpoint) -> SignerEndpoint,
) -> (StatsHandle, Events, tokio::task::JoinHandle<()>) {
    let events: Events = Arc::default();
    let sink = events.clone();
    let ep = tune(SignerEndpoint::new(addr, Identity::from_seed(&[3; 32])))
        .on_event(move |e| sink.lock().unwrap().push(e.clone()));
    let stats = ep.stats();
    let task = tokio::spawn(async move {
        let mut signer = signer;
        let _ = ep.run(&mut signer).await;
    });
    (stats, events, task)
}

async fn wait_until(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn proposal(height: i64, round: i32, block_n: u8) -> Proposal {
    let mut p = Proposal::default();
    p.msg_type = signed_msg_type::PROPOSAL;
    p.height = height;
    p.round = round;
    p.pol_round = -1;
    p.block_id = block(block_n);
    p.timestamp = Timestamp::new(1_700_000_000 + height, 0);
    p
}

/// Public key, a run of prevotes, precommits (with extensions) and
/// proposals, each signature verified over our own sign bytes; a double
/// sign is refused with the guard's reason and the connection serves on.
async fn sign_run(client: &SignerClient) {
    let pk = client.public_key(CHAIN).await.unwrap();
    assert_eq!(
        pk.sum,
        Some(crypto_public_key::Key::Ed25519(
            validator_key().public_key().as_bytes().to_vec()
        ))
    );
    for h in 1..=5 {
        let p = client
            .sign_proposal(CHAIN, proposal(h, 0, 1))
            .await
            .unwrap();
        assert!(verify(&proposal_sign_bytes(CHAIN, &p), &p.signature));
        for t in [signed_msg_type::PREVOTE, signed_msg_type::PRECOMMIT] {
            let mut v = vote(t, h, 0, 1, 1_700_000_000 + h);
            v.validator_address = validator_key().node_id().as_bytes().to_vec();
            if t == signed_msg_type::PRECOMMIT {
                v.extension = b"ext".to_vec();
            }
            let signed = client.sign_vote(CHAIN, v, false).await.unwrap();
            assert!(verify(&vote_sign_bytes(CHAIN, &signed), &signed.signature));
            if t == signed_msg_type::PRECOMMIT {
                assert!(verify(
                    &vote_extension_sign_bytes(CHAIN, &signed),
                    &signed.extension_signature
                ));
            } else {
                assert!(signed.extension_signature.is_empty());
            }
        }
    }
    // Height 5's precommit for another block: refused, nothing signed.
    let conflicting = vote(signed_msg_type::PRECOMMIT, 5, 0, 2, 1_700_000_005);
    match client.sign_vote(CHAIN, conflicting, true).await {
        Err(EndpointError::Remote(e)) => {
            assert!(e.description.contains("conflicting data"), "{e:?}")
        }
        other => panic!("double sign not refused: {other:?}"),
    }
    // Raw bytes: refused by the GuardedSigner's default, the session goes on.
    match client.sign_bytes(b"anything").await {
        Err(EndpointError::Remote(e)) => assert!(e.description.contains("raw bytes"), "{e:?}"),
        other => panic!("raw bytes signed: {other:?}"),
    }
    // skip_extension_signing (v1): the extension stays unsigned.
    let v = vote(signed_msg_type::PRECOMMIT, 6, 0, 1, 1_700_000_006);
    let signed = client.sign_vote(CHAIN, v, true).await.unwrap();
    assert!(signed.extension_signature.is_empty());
    assert!(verify(&vote_sign_bytes(CHAIN, &signed), &signed.signature));
    client.ping().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_signer_serves_node_and_refuses_double_sign() {
    let dir = temp_dir("tcp");
    let node = NodeEndpoint::bind(&Address::tcp("127.0.0.1:0"), Identity::from_seed(&[1; 32]))
        .await
        .unwrap();
    let addr = node.address();
    let client = SignerClient::new(node);
    let (stats, events, task) = spawn_signer(addr, signer_in(&dir), |e| e);
    sign_run(&client).await;
    let s = stats.snapshot();
    assert_eq!(s.connects, 1, "{s}");
    assert_eq!(s.kind(RequestKind::SignVote).count, 12);
    assert_eq!(s.kind(RequestKind::SignVote).errors, 1);
    assert_eq!(s.kind(RequestKind::SignProposal).count, 5);
    assert_eq!(s.kind(RequestKind::SignBytes).errors, 1);
    assert!(s.kind(RequestKind::SignVote).p99.is_some());
    let c = client.stats().snapshot();
    assert_eq!(c.kind(RequestKind::SignVote).count, 12, "{c}");
    assert_eq!(c.kind(RequestKind::SignVote).errors, 1);
    // The signer saw the node's ID; the refused request is in the events.
    let ev = events.lock().unwrap().clone();
    assert!(ev.iter().any(
        |e| matches!(e, SignerEvent::Connected { node: Some(id), .. }
        if *id == Identity::from_seed(&[1; 32]).node_id())
    ));
    assert!(ev.iter().any(|e| matches!(
        e,
        SignerEvent::Served {
            kind: RequestKind::SignVote,
            height: 5,
            msg_type: 2,
            error: Some(_),
            ..
        }
    )));
    // The state file holds the high-water mark.
    let st = state_file::load(dir.join("priv_validator_state.json")).unwrap();
    assert_eq!(st.hrs().height, 6);
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unix_signer_serves_node() {
    let dir = temp_dir("unix");
    let sock = dir.join("pv.sock");
    let node = NodeEndpoint::bind(&Address::unix(&sock), Identity::generate())
        .await
        .unwrap();
    let client = SignerClient::new(node);
    let (stats, events, task) = spawn_signer(Address::unix(&sock), signer_in(&dir), |e| e);
    sign_run(&client).await;
    assert_eq!(stats.snapshot().connects, 1);
    assert!(events
        .lock()
        .unwrap()
        .iter()
        .any(|e| matches!(e, SignerEvent::Connected { node: None, .. })));
    task.abort();
    drop(client);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_chain_is_refused_and_the_signer_serves_on() {
    let dir = temp_dir("chain");
    let node = NodeEndpoint::bind(&Address::tcp("127.0.0.1:0"), Identity::generate())
        .await
        .unwrap();
    let addr = node.address();
    let client = SignerClient::new(node);
    let (stats, _, task) = spawn_signer(addr, signer_in(&dir).with_chain_id(CHAIN), |e| e);
    let v = vote(signed_msg_type::PREVOTE, 1, 0, 1, 1);
    match client.sign_vote("other-chain", v.clone(), false).await {
        Err(EndpointError::Remote(e)) => assert!(e.description.contains("other-chain"), "{e:?}"),
        other => panic!("wrong chain not refused: {other:?}"),
    }
    assert!(matches!(
        client.public_key("other-chain").await,
        Err(EndpointError::Remote(_))
    ));
    let signed = client.sign_vote(CHAIN, v, false).await.unwrap();
    assert!(verify(&vote_sign_bytes(CHAIN, &signed), &signed.signature));
    assert_eq!(stats.snapshot().connects, 1);
    task.abort();
}

/// A node that restarts (listener gone, then back on the same port): the
/// signer dials again by itself, within its capped backoff.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signer_reconnects_when_the_node_restarts() {
    let dir = temp_dir("restart");
    let node = NodeEndpoint::bind(&Address::tcp("127.0.0.1:0"), Identity::generate())
        .await
        .unwrap();
    let addr = node.address();
    let client = SignerClient::new(node);
    let (stats, events, task) = spawn_signer(addr.clone(), signer_in(&dir), |e| e);
    client.ping().await.unwrap();
    drop(client); // the listener and the connection close
    wait_until("the disconnect", Duration::from_secs(10), || {
        stats.snapshot().disconnects == 1
    })
    .await;
    // Down for a while: the signer retries, backing off to its 500 ms cap.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let node = NodeEndpoint::bind(&addr, Identity::generate())
        .await
        .unwrap();
    let client = SignerClient::new(node);
    let start = Instant::now();
    let v = vote(signed_msg_type::PREVOTE, 1, 0, 1, 1);
    let signed = client.sign_vote(CHAIN, v, false).await.unwrap();
    assert!(verify(&vote_sign_bytes(CHAIN, &signed), &signed.signature));
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(stats.snapshot().connects, 2);
    let failed: Vec<Duration> = events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            SignerEvent::ConnectFailed { retry_in, .. } => Some(*retry_in),
            _ => None,
        })
        .collect();
    assert!(failed.len() >= 3, "{failed:?}");
    assert!(
        failed.iter().all(|d| *d <= Duration::from_millis(500)),
        "{failed:?}"
    );
    task.abort();
}

/// Pings keep an idle connection alive past the signer's read timeout; with
/// no pings the signer drops the connection at its read timeout and dials
/// again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pings_keep_an_idle_connection_and_silence_ends_it() {
    let dir = temp_dir("ping");
    let node = NodeEndpoint::bind(&Address::tcp("127.0.0.1:0"), Identity::generate())
        .await
        .unwrap()
        .ping_interval(Duration::from_millis(100));
    let addr = node.address();
    let client = SignerClient::new(node);
    let (stats, _, task) = spawn_signer(addr, signer_in(&dir), |e| {
        e.read_timeout(Duration::from_millis(400))
    });
    client.wait_for_signer().await.unwrap();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let s = stats.snapshot();
    assert!(s.kind(RequestKind::Ping).count >= 5, "{s}");
    assert_eq!(s.connects, 1, "{s}");
    assert_eq!(s.disconnects, 0, "{s}");
    task.abort();
    drop(client);

    // A node that accepts and then says nothing.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = Address::tcp(silent.local_addr().unwrap().to_string());
    let (stats, events, task) = spawn_signer(addr, signer_in(&temp_dir("silent")), |e| {
        e.read_timeout(Duration::from_millis(300))
    });
    let node_key = Identity::generate();
    for _ in 0..2 {
        let (tcp, _) = silent.accept().await.unwrap();
        let conn = p2p_conn::io::tokio::handshake(tcp, &node_key, &Default::default())
            .await
            .unwrap();
        let ev = events.clone();
        let before = stats.snapshot().disconnects;
        wait_until("the read timeout", Duration::from_secs(5), || {
            stats.snapshot().disconnects > before
        })
        .await;
        drop(conn);
        assert!(ev.lock().unwrap().iter().any(|e| matches!(e,
            SignerEvent::Disconnected { reason } if reason.contains("read timed out"))));
    }
    task.abort();
}

/// Hostile frames from the node's side: an unknown oneof field and a
/// response where a request belongs get no answer and the connection serves
/// on; an oversized length and a truncated message end the connection and
/// the signer dials again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_frames_get_typed_errors_and_the_signer_carries_on() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = Address::tcp(listener.local_addr().unwrap().to_string());
    let (stats, events, task) = spawn_signer(addr, signer_in(&temp_dir("hostile")), |e| e);
    let node_key = Identity::generate();
    let accept = || async {
        let (tcp, _) = listener.accept().await.unwrap();
        p2p_conn::io::tokio::handshake(tcp, &node_key, &Default::default())
            .await
            .unwrap()
    };
    let ping = encode(&Message::from(Sum::PingRequest(PingRequest::default())));
    let pong = [2u8, 0x42, 0]; // PingResponse: field 8, empty
    let mut conn = accept().await;
    // Field 11 (not in any line) and a PubKeyResponse (a response).
    conn.write_all(&[2, 0x5a, 0]).await.unwrap();
    conn.write_all(&[2, 0x12, 0]).await.unwrap();
    // Bad protobuf: field 1 claims 5 bytes, has 1.
    conn.write_all(&[3, 0x0a, 5, 0]).await.unwrap();
    conn.write_all(&ping).await.unwrap();
    conn.flush().await.unwrap();
    let mut got = [0u8; 3];
    conn.read_exact(&mut got).await.unwrap();
    assert_eq!(got, pong);
    let s = stats.snapshot();
    assert_eq!(s.kind(RequestKind::Other).count, 3, "{s}");
    assert_eq!(s.kind(RequestKind::Other).errors, 3, "{s}");
    assert_eq!(s.connects, 1);

    // A length far over the limit: dropped, nothing allocated, redial.
    conn.write_all(&[0xff, 0xff, 0xff, 0xff, 0x0f])
        .await
        .unwrap();
    conn.flush().await.unwrap();
    let mut rest = Vec::new();
    let _ = conn.read_to_end(&mut rest).await;
    let mut conn = accept().await;
    // The signer counts a connect once its side of the handshake returns,
    // which can be after ours: wait for it rather than race it.
    wait_until("the second connect", Duration::from_secs(5), || {
        stats.snapshot().connects == 2
    })
    .await;
    assert_eq!(stats.snapshot().connects, 2);
    // Truncated: half a message, then the node hangs up.
    conn.write_all(&[10, 0x3a, 0]).await.unwrap();
    conn.flush().await.unwrap();
    drop(conn);
    let mut conn = accept().await;
    conn.write_all(&ping).await.unwrap();
    conn.flush().await.unwrap();
    conn.read_exact(&mut got).await.unwrap();
    assert_eq!(got, pong);
    let reasons: Vec<String> = events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            SignerEvent::Disconnected { reason } => Some(reason.clone()),
            _ => None,
        })
        .collect();
    assert!(reasons[0].contains("limit is 10240"), "{reasons:?}");
    assert!(reasons[1].contains("ended after"), "{reasons:?}");
    task.abort();
}

/// The node side's own timeouts: no signer within the accept timeout, and
/// a signer that never answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_side_times_out() {
    let node = NodeEndpoint::bind(&Address::tcp("127.0.0.1:0"), Identity::generate())
        .await
        .unwrap()
        .accept_timeout(Duration::from_millis(200))
        .read_timeout(Duration::from_millis(300))
        .ping_interval(Duration::ZERO);
    let addr = node.local_addr().unwrap();
    let client = SignerClient::new(node);
    assert!(matches!(
        client.ping().await,
        Err(EndpointError::NoSigner(d)) if d == Duration::from_millis(200)
    ));
    // A signer that handshakes and then reads without answering.
    let mute = tokio::spawn(async move {
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut conn =
            p2p_conn::io::tokio::handshake(tcp, &Identity::generate(), &Default::default())
                .await
                .unwrap();
        let mut sink = Vec::new();
        let _ = conn.read_to_end(&mut sink).await;
    });
    match client.public_key(CHAIN).await {
        Err(EndpointError::Timeout { what: "read", .. }) => {}
        other => panic!("expected a read timeout, got {other:?}"),
    }
    assert!(!client.is_connected().await);
    let s = client.stats().snapshot();
    assert_eq!((s.connects, s.disconnects), (1, 1), "{s}");
    mute.abort();
}

/// `noise://` against hostile nodes over real sockets: a handshake length
/// over the limit, a node with another identity, a node that stalls the
/// handshake, and one that sends garbage after it. Each ends in a typed
/// error within its bound and the signer dials again; then a genuine node
/// is served.
#[cfg(feature = "noise")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_noise_nodes_get_typed_errors_and_the_signer_redials() {
    use p2p_conn::noise::{self, Role};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let node_key = Identity::generate();
    let addr = Address::noise(
        node_key.public_key().peer_id(),
        listener.local_addr().unwrap(),
    );
    let (stats, events, task) = spawn_signer(addr, signer_in(&temp_dir("hostile-noise")), |e| e);
    let started = Instant::now();
    let failures = |events: &Events| -> Vec<String> {
        events
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| match e {
                SignerEvent::ConnectFailed { error, .. } => Some(error.clone()),
                SignerEvent::Disconnected { reason } => Some(reason.clone()),
                _ => None,
            })
            .collect()
    };

    // 1. A length of 65535 for message 2: refused before its body.
    let (mut tcp, _) = listener.accept().await.unwrap();
    let mut msg1 = [0u8; 34];
    tcp.read_exact(&mut msg1).await.unwrap();
    assert_eq!(&msg1[..2], &[0, 32], "message 1 is an ephemeral key");
    tcp.write_all(&[0xff, 0xff]).await.unwrap();
    let mut rest = Vec::new();
    let _ = tcp.read_to_end(&mut rest).await;
    assert!(rest.is_empty(), "the signer sent more after refusing");

    // 2. A node that proves another identity: refused at message 2, before
    // the signer reveals its own.
    let (tcp, _) = listener.accept().await.unwrap();
    let impostor = Identity::generate();
    let r = noise::handshake(
        tcp,
        Role::Responder,
        &impostor,
        None,
        Duration::from_secs(5),
    )
    .await;
    assert!(
        r.is_err(),
        "the signer finished a handshake with an impostor"
    );

    // 3. A node that accepts and says nothing: the handshake times out.
    let (stalled, _) = listener.accept().await.unwrap();
    let stall_start = Instant::now();
    let (tcp, _) = listener.accept().await.unwrap();
    let stalled_for = stall_start.elapsed();
    drop(stalled);
    assert!(
        stalled_for >= Duration::from_secs(4) && stalled_for < Duration::from_secs(8),
        "the stalled handshake took {stalled_for:?}"
    );

    // 4. A genuine handshake, then garbage where a frame belongs.
    let stream = noise::handshake(
        tcp,
        Role::Responder,
        &node_key,
        None,
        Duration::from_secs(5),
    )
    .await
    .unwrap();
    stream.get_ref().writable().await.unwrap();
    stream
        .get_ref()
        .try_write(&[0, 40, 1, 2, 3, 4, 5, 6, 7, 8])
        .unwrap();
    let mut garbage = [0u8; 34];
    garbage[..2].copy_from_slice(&[0, 32]);
    stream.get_ref().try_write(&garbage[2..]).unwrap();

    // 5. A genuine node, served.
    let (tcp, _) = listener.accept().await.unwrap();
    let mut stream = noise::handshake(
        tcp,
        Role::Responder,
        &node_key,
        None,
        Duration::from_secs(5),
    )
    .await
    .unwrap();
    assert_eq!(
        stream.remote_peer(),
        Identity::from_seed(&[3; 32]).public_key().peer_id()
    );
    stream
        .write_all(&encode(&Message::from(Sum::PingRequest(
            PingRequest::default(),
        ))))
        .await
        .unwrap();
    stream.flush().await.unwrap();
    let mut pong = [0u8; 3];
    stream.read_exact(&mut pong).await.unwrap();
    assert_eq!(pong, [2, 0x42, 0]);
    assert!(started.elapsed() < Duration::from_secs(15));

    let seen = failures(&events);
    let has = |needle: &str| seen.iter().any(|e| e.contains(needle));
    assert!(has("handshake message of 65535 bytes"), "{seen:?}");
    assert!(has("expected peer"), "{seen:?}");
    assert!(has("did not finish within"), "{seen:?}");
    assert!(has("failed authentication"), "{seen:?}");
    assert_eq!(
        stats.snapshot().connects,
        2,
        "the garbage node's and the genuine one"
    );
    task.abort();
}
