//! Threshold signing on the network (feature `threshold-cluster`): three
//! cosigners of a 2-of-3 split over loopback, cosigner 1 leading for a
//! node played by our `NodeEndpoint` + `SignerClient`, its
//! `ThresholdSigner` served by our `SignerEndpoint` unchanged. Every
//! signature is checked with `verify_strict` under the validator's key.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use p2p_conn::Identity;
use p2p_conn_privval::cosign_net::{Cluster, ClusterConfig, Member, NetEvent};
use p2p_conn_privval::endpoint::{Address, NodeEndpoint, SignerClient, SignerEndpoint};
use p2p_conn_privval::state_file::{self, Format};
use p2p_conn_privval::threshold::cluster::ThresholdSigner;
use p2p_conn_privval::threshold::{Cosigner, KeyShare};
use p2p_conn_privval::{
    crypto_public_key, proposal_sign_bytes, signed_msg_type, vote_extension_sign_bytes,
    vote_sign_bytes, GuardedSigner, Proposal, Timestamp, Vote,
};
use rand_core::OsRng;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::common::{block, temp_dir, vote};

pub(crate) const CHAIN: &str = "cluster-chain";
pub(crate) const CLUSTER: [u8; 32] = [0x7c; 32];
/// Bounds a hang; never a speed assertion.
pub(crate) const LIMIT: Duration = Duration::from_secs(30);

pub(crate) fn validator() -> Identity {
    Identity::from_seed(&[0x5a; 32])
}

pub(crate) fn net_key(index: u16) -> Identity {
    Identity::from_seed(&[0x40 + index as u8; 32])
}

pub(crate) fn verifies(msg: &[u8], sig: &[u8]) -> bool {
    let vk = ed25519_dalek::VerifyingKey::from_bytes(validator().public_key().as_bytes()).unwrap();
    ed25519_dalek::Signature::from_slice(sig).is_ok_and(|s| vk.verify_strict(msg, &s).is_ok())
}

/// A 2-of-3 split, its state files, and the members' addresses.
pub(crate) struct Lab {
    pub(crate) dir: PathBuf,
    shares: Vec<String>,
    pub(crate) members: Vec<Member>,
    addrs: Vec<String>,
}

impl Lab {
    pub(crate) async fn new(tag: &str) -> (Lab, Vec<TcpListener>) {
        Lab::split(tag, 2, 3).await
    }

    /// A `t`-of-`n` split.
    pub(crate) async fn split(tag: &str, t: u16, n: u16) -> (Lab, Vec<TcpListener>) {
        let dir = temp_dir(tag);
        let shares = KeyShare::split(&validator(), t, n, &mut OsRng)
            .unwrap()
            .iter()
            .map(|s| s.to_json().to_string())
            .collect();
        let (mut listeners, mut members, mut addrs) = (vec![], vec![], vec![]);
        for i in 1..=n {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap().to_string();
            members.push(Member::new(i, net_key(i).node_id(), addr.clone()));
            addrs.push(addr);
            listeners.push(l);
            let path = dir.join(format!("cosigner-{i}.state"));
            state_file::write_new(&path, &Default::default(), Format::Slots).unwrap();
        }
        let lab = Lab {
            dir,
            shares,
            members,
            addrs,
        };
        (lab, listeners)
    }

    pub(crate) fn cosigner(&self, i: u16) -> Cosigner {
        let pk = *validator().public_key().as_bytes();
        let share = KeyShare::parse(&self.shares[usize::from(i) - 1], &pk).unwrap();
        let path = self.dir.join(format!("cosigner-{i}.state"));
        Cosigner::open(share, path, CHAIN, &mut OsRng).unwrap()
    }

    /// Start cosigner `i`; its transport's events go to the receiver. A test
    /// awaits [`ThresholdSigner::caught_up`] of the cosigners it starts
    /// before it signs: one catching up would take the mark of a share the
    /// leader signs meanwhile, and refuse that step.
    pub(crate) fn start(&self, i: u16, listener: TcpListener) -> (ThresholdSigner, Peers) {
        self.start_pinging(i, listener, Duration::from_millis(200))
    }

    /// [`Lab::start`], pinging every `ping`.
    pub(crate) fn start_pinging(
        &self,
        i: u16,
        listener: TcpListener,
        ping: Duration,
    ) -> (ThresholdSigner, Peers) {
        let (tx, rx) = mpsc::unbounded_channel();
        let config = ClusterConfig::new(CLUSTER, i, net_key(i), self.members.clone())
            .retry(Duration::from_millis(20), Duration::from_millis(200))
            .ping_interval(ping)
            .on_event(move |e| match e {
                NetEvent::Connected { peer, .. } => drop(tx.send((*peer, true))),
                NetEvent::Disconnected { peer, .. } => drop(tx.send((*peer, false))),
                _ => {}
            });
        let (cluster, requests) = Cluster::start(config, listener).unwrap();
        (
            ThresholdSigner::start(self.cosigner(i), cluster, requests).unwrap(),
            Peers {
                rx,
                up: Default::default(),
            },
        )
    }

    /// Start cosigner `i` again at its address, once the old listener
    /// has let it go.
    pub(crate) async fn restart(&self, i: u16) -> (ThresholdSigner, Peers) {
        let listener = self.rebind(i).await;
        self.start(i, listener)
    }

    /// Member `i`'s address again, once the old listener has let it go.
    pub(crate) async fn rebind(&self, i: u16) -> TcpListener {
        let start = Instant::now();
        let listener = loop {
            match TcpListener::bind(&self.addrs[usize::from(i) - 1]).await {
                Ok(l) => break l,
                Err(e) => assert!(start.elapsed() < LIMIT, "rebind: {e}"),
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        listener
    }
}

/// A member's view of its peers, from its transport's events.
pub(crate) struct Peers {
    pub(crate) rx: mpsc::UnboundedReceiver<(u16, bool)>,
    pub(crate) up: std::collections::BTreeSet<u16>,
}

impl Peers {
    /// Wait until the events say `peer` is connected.
    pub(crate) async fn connected(&mut self, peer: u16) {
        tokio::time::timeout(LIMIT, async {
            while !self.up.contains(&peer) {
                let (p, up) = self.rx.recv().await.expect("events ended");
                if up {
                    self.up.insert(p);
                } else {
                    self.up.remove(&p);
                }
            }
        })
        .await
        .expect("peer connected within the limit");
    }

    /// Forget what was seen: wait for new connections from here on.
    pub(crate) fn forget(&mut self, peer: u16) {
        self.up.remove(&peer);
    }
}

/// A node served by `signer` through our signer endpoint.
pub(crate) async fn node_for<S: p2p_conn_privval::Signer + Send + 'static>(
    signer: S,
) -> (SignerClient, tokio::task::JoinHandle<()>) {
    let node = NodeEndpoint::bind(&Address::tcp("127.0.0.1:0"), Identity::generate())
        .await
        .unwrap();
    let addr = node.address();
    let client = SignerClient::new(node);
    let task = tokio::spawn(async move {
        let mut signer = signer;
        let _ = SignerEndpoint::new(addr, Identity::generate())
            .run(&mut signer)
            .await;
    });
    tokio::time::timeout(LIMIT, client.wait_for_signer())
        .await
        .unwrap()
        .unwrap();
    (client, task)
}

fn proposal(height: i64, block_n: u8) -> Proposal {
    let mut p = Proposal::default();
    p.msg_type = signed_msg_type::PROPOSAL;
    p.height = height;
    p.pol_round = -1;
    p.block_id = block(block_n);
    p.timestamp = Timestamp::new(1_700_000_000 + height, 0);
    p
}

/// Height `h`'s proposal, prevote and precommit (with an extension),
/// each signature verified under the validator's key.
pub(crate) async fn sign_height(client: &SignerClient, h: i64) {
    let p = client.sign_proposal(CHAIN, proposal(h, 1)).await.unwrap();
    assert!(
        verifies(&proposal_sign_bytes(CHAIN, &p), &p.signature),
        "proposal {h}"
    );
    for t in [signed_msg_type::PREVOTE, signed_msg_type::PRECOMMIT] {
        let mut v = vote(t, h, 0, 1, 1_700_000_000 + h);
        v.validator_address = validator().node_id().as_bytes().to_vec();
        if t == signed_msg_type::PRECOMMIT {
            v.extension = b"ext".to_vec();
        }
        let signed = client.sign_vote(CHAIN, v, false).await.unwrap();
        assert!(
            verifies(&vote_sign_bytes(CHAIN, &signed), &signed.signature),
            "vote {h} {t}"
        );
        if t == signed_msg_type::PRECOMMIT {
            let ext = vote_extension_sign_bytes(CHAIN, &signed);
            assert!(verifies(&ext, &signed.extension_signature), "extension {h}");
        }
    }
}

pub(crate) fn prevote(h: i64) -> Vote {
    vote(signed_msg_type::PREVOTE, h, 0, 1, 1_700_000_000 + h)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_of_three_sign_for_a_node_with_one_down_and_none_with_two() {
    let (lab, mut ls) = Lab::new("cluster-run").await;
    let (c3, _) = lab.start(3, ls.pop().unwrap());
    let (c2, _) = lab.start(2, ls.pop().unwrap());
    let (c1, mut ev1) = lab.start(1, ls.pop().unwrap());
    ev1.connected(2).await;
    ev1.connected(3).await;
    for c in [&c1, &c2, &c3] {
        c.caught_up().await.unwrap();
    }
    let (client, _serving) = node_for(c1).await;

    let pk = client.public_key(CHAIN).await.unwrap();
    assert_eq!(
        pk.sum,
        Some(crypto_public_key::Key::Ed25519(
            validator().public_key().as_bytes().to_vec()
        ))
    );
    for h in 1..=20 {
        sign_height(&client, h).await;
    }
    // Height 20's precommit again, at a later timestamp: signed again
    // with the timestamp signed before (each guard's rule), as a single
    // signer re-serves it.
    let mut again = vote(signed_msg_type::PRECOMMIT, 20, 0, 1, 1_700_000_999);
    again.validator_address = validator().node_id().as_bytes().to_vec();
    again.extension = b"ext".to_vec();
    let signed = client.sign_vote(CHAIN, again, false).await.unwrap();
    assert_eq!(signed.timestamp, Timestamp::new(1_700_000_020, 0));
    assert!(verifies(
        &vote_sign_bytes(CHAIN, &signed),
        &signed.signature
    ));

    // Cosigner 3 stops: the chain of requests goes on with 2.
    drop(c3);
    for h in 21..=30 {
        sign_height(&client, h).await;
    }

    // Cosigner 2 stops too: one share is not a signature.
    drop(c2);
    let refused = client.sign_vote(CHAIN, prevote(31), false).await;
    assert!(
        refused.is_err(),
        "a signature with one cosigner: {refused:?}"
    );

    // Cosigner 2 comes back: signing resumes. Its catch-up raised its
    // mark to the leader's (height 31's prevote, the leader's share of
    // the refused request), so it signs from the next step on: round 1.
    ev1.forget(2);
    let (c2, _) = lab.restart(2).await;
    ev1.connected(2).await;
    c2.caught_up().await.unwrap();
    let next = vote(signed_msg_type::PREVOTE, 31, 1, 1, 1_700_000_031);
    let signed = client.sign_vote(CHAIN, next, false).await.unwrap();
    assert!(verifies(
        &vote_sign_bytes(CHAIN, &signed),
        &signed.signature
    ));
    sign_height(&client, 32).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_leaders_asked_conflicting_votes_make_at_most_one_signature() {
    let (lab, mut ls) = Lab::new("cluster-two-leaders").await;
    let (_c3, _) = lab.start(3, ls.pop().unwrap());
    let (c2, mut ev2) = lab.start(2, ls.pop().unwrap());
    let (c1, mut ev1) = lab.start(1, ls.pop().unwrap());
    for (ev, peers) in [(&mut ev1, [2, 3]), (&mut ev2, [1, 3])] {
        for p in peers {
            ev.connected(p).await;
        }
    }
    for c in [&c1, &c2, &_c3] {
        c.caught_up().await.unwrap();
    }
    let (node1, _s1) = node_for(c1).await;
    let (node2, _s2) = node_for(c2).await;
    let mut signatures = 0;
    for h in 1..=10 {
        let a = vote(signed_msg_type::PREVOTE, h, 0, 1, 1_700_000_000 + h);
        let b = vote(signed_msg_type::PREVOTE, h, 0, 2, 1_700_000_000 + h);
        let (ra, rb) = tokio::join!(
            node1.sign_vote(CHAIN, a, false),
            node2.sign_vote(CHAIN, b, false)
        );
        let ok: Vec<Vote> = [ra, rb].into_iter().filter_map(Result::ok).collect();
        assert!(ok.len() <= 1, "height {h}: two conflicting signatures");
        for v in &ok {
            assert!(verifies(&vote_sign_bytes(CHAIN, v), &v.signature));
        }
        signatures += ok.len();
    }
    println!("conflicting pairs signed once: {signatures} of 10");
}

fn summary(what: &str, mut times: Vec<Duration>) {
    times.sort();
    let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e6;
    println!(
        "{what}: p50 {:.0} µs, p99 {:.0} µs ({} requests)",
        at(0.5),
        at(0.99),
        times.len()
    );
}

async fn time_votes(client: &SignerClient, n: i64) -> Vec<Duration> {
    let mut times = Vec::with_capacity(n as usize);
    for h in 1..=n {
        let started = Instant::now();
        let signed = client.sign_vote(CHAIN, prevote(h), false).await.unwrap();
        times.push(started.elapsed());
        assert!(verifies(
            &vote_sign_bytes(CHAIN, &signed),
            &signed.signature
        ));
    }
    times
}

/// The sign round trip at the node, printed (never asserted): the 2-of-3
/// cluster beside a single `GuardedSigner` over the same endpoint. Run
/// with `--release --nocapture` for the figures in docs/performance.md.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn round_trip_of_a_threshold_signature_at_the_node() {
    let n: i64 = std::env::var("THRESHOLD_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let (lab, mut ls) = Lab::new("cluster-timing").await;
    let (_c3, _) = lab.start(3, ls.pop().unwrap());
    let (_c2, _) = lab.start(2, ls.pop().unwrap());
    let (c1, mut ev1) = lab.start(1, ls.pop().unwrap());
    ev1.connected(2).await;
    ev1.connected(3).await;
    for c in [&c1, &_c2, &_c3] {
        c.caught_up().await.unwrap();
    }
    let (client, _serving) = node_for(c1).await;
    summary("2-of-3 cluster", time_votes(&client, n).await);

    let single = lab.dir.join("single.state");
    state_file::create_new(&single).unwrap();
    let (client, _serving) = node_for(GuardedSigner::open(validator(), &single).unwrap()).await;
    summary("single GuardedSigner", time_votes(&client, n).await);
}

// The payloads as spec/threshold.md §3.1 gives them, declared again here
// so the spec's field numbers are checked too.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct SpecCommitment {
    #[prost(uint32, tag = "1")]
    pub(crate) signer: u32,
    #[prost(uint64, tag = "2")]
    pub(crate) id: u64,
    #[prost(bytes = "vec", tag = "3")]
    pub(crate) hiding: Vec<u8>,
    #[prost(bytes = "vec", tag = "4")]
    pub(crate) binding: Vec<u8>,
}
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct SpecCommitRequest {
    #[prost(uint32, tag = "1")]
    pub(crate) count: u32,
}
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct SpecCommitResponse {
    #[prost(message, repeated, tag = "1")]
    pub(crate) commitments: Vec<SpecCommitment>,
}

/// Answer a commitments request (spec §3.1) by hand with `cosigner`'s
/// fresh commitments, as a member played by a test does.
pub(crate) fn answer_commitments(
    cosigner: &mut Cosigner,
    incoming: p2p_conn_privval::cosign_net::Incoming,
) {
    use prost::Message as _;
    let count = SpecCommitRequest::decode(&incoming.payload()[..])
        .unwrap()
        .count;
    let commitments = cosigner
        .commit(count as usize, &mut OsRng)
        .iter()
        .map(|c| SpecCommitment {
            signer: u32::from(c.signer),
            id: c.id,
            hiding: c.commitments.hiding().serialize().unwrap(),
            binding: c.commitments.binding().serialize().unwrap(),
        })
        .collect();
    let answer = SpecCommitResponse { commitments }.encode_to_vec();
    incoming.respond(Ok(answer.into()));
}
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct SpecSignRequest {
    #[prost(string, tag = "1")]
    pub(crate) chain_id: String,
    #[prost(message, optional, tag = "2")]
    pub(crate) vote: Option<Vote>,
    #[prost(message, optional, tag = "3")]
    pub(crate) proposal: Option<Proposal>,
    #[prost(bool, tag = "4")]
    pub(crate) sign_extension: bool,
    #[prost(message, repeated, tag = "5")]
    pub(crate) commitments: Vec<SpecCommitment>,
    #[prost(message, repeated, tag = "6")]
    pub(crate) extension_commitments: Vec<SpecCommitment>,
}
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct SpecSignResponse {
    #[prost(uint32, tag = "1")]
    pub(crate) signer: u32,
    #[prost(bytes = "vec", tag = "2")]
    pub(crate) share: Vec<u8>,
    #[prost(bytes = "vec", tag = "3")]
    pub(crate) extension_share: Vec<u8>,
}

/// A member played by hand (its transport only) asks cosigner 1 for
/// commitments, sends it garbage and an unknown kind, and a sign request
/// that does not name it among the signers: refused; one that does is
/// answered with a share.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cosigner_answers_by_the_spec_and_refuses_what_does_not_hold() {
    use p2p_conn_privval::cosign_net::NetError;
    use p2p_conn_privval::threshold::cluster::{KIND_COMMITMENTS, KIND_SIGN};
    use prost::Message as _;

    let (lab, mut ls) = Lab::new("cluster-spec").await;
    let _l3 = ls.pop().unwrap();
    let l2 = ls.pop().unwrap();
    let (_c1, _) = lab.start(1, ls.pop().unwrap());
    let (tx, rx) = mpsc::unbounded_channel();
    let config = ClusterConfig::new(CLUSTER, 2, net_key(2), lab.members.clone())
        .retry(Duration::from_millis(20), Duration::from_millis(200))
        .on_event(move |e| {
            if let NetEvent::Connected { peer, .. } = e {
                let _ = tx.send((*peer, true));
            }
        });
    let (raw, _requests) = Cluster::start(config, l2).unwrap();
    let mut ev2 = Peers {
        rx,
        up: Default::default(),
    };
    ev2.connected(1).await;
    let deadline = || Instant::now() + LIMIT;

    let ask = SpecCommitRequest { count: 3 }.encode_to_vec();
    let answer = raw
        .request(1, KIND_COMMITMENTS, ask.into(), deadline())
        .await
        .unwrap();
    let list = SpecCommitResponse::decode(&answer[..]).unwrap().commitments;
    assert_eq!(list.len(), 3);
    for c in &list {
        assert_eq!((c.signer, c.hiding.len(), c.binding.len()), (1, 32, 32));
    }

    for (kind, payload) in [
        (KIND_SIGN, vec![0xff; 9]),
        (KIND_COMMITMENTS, vec![0x08, 0xff]),
        (99, Vec::new()),
    ] {
        match raw.request(1, kind, payload.into(), deadline()).await {
            Err(NetError::Refused { peer: 1, .. }) => {}
            other => panic!("kind {kind}: {other:?}"),
        }
    }

    // Cosigner 1's commitment and one more, credited to `other`.
    let request = |other: u32, mine: &SpecCommitment| {
        let mut theirs = list[2].clone();
        theirs.signer = other;
        SpecSignRequest {
            chain_id: CHAIN.into(),
            vote: Some(prevote(5)),
            commitments: vec![mine.clone(), theirs],
            ..Default::default()
        }
        .encode_to_vec()
    };
    match raw
        .request(1, KIND_SIGN, request(3, &list[0]).into(), deadline())
        .await
    {
        Err(NetError::Refused { message, .. }) => {
            assert!(message.contains("not among"), "{message}")
        }
        other => panic!("a request naming 1 and 3, from 2: {other:?}"),
    }
    let answer = raw
        .request(1, KIND_SIGN, request(2, &list[1]).into(), deadline())
        .await
        .unwrap();
    let share = SpecSignResponse::decode(&answer[..]).unwrap();
    assert_eq!((share.signer, share.share.len()), (1, 32));
    assert!(share.extension_share.is_empty());
}

/// Member 2 played by hand hands out real commitments (its share's
/// cosigner makes them) but fails every sign request, with a refusal or
/// with garbage: each request the leader sends it is started again with
/// cosigner 3 within the node's request, and the node gets every
/// signature. The leader pings every 10 ms, so the order of its peers by
/// round trip changes often and member 2 is asked first now and then.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_peer_that_fails_is_replaced_within_the_request() {
    use p2p_conn_privval::threshold::cluster::{KIND_COMMITMENTS, KIND_SIGN};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    let (lab, mut ls) = Lab::new("cluster-retry").await;
    let (_c3, _) = lab.start(3, ls.pop().unwrap());
    let l2 = ls.pop().unwrap();
    let mut cosigner2 = lab.cosigner(2);
    let config = ClusterConfig::new(CLUSTER, 2, net_key(2), lab.members.clone())
        .retry(Duration::from_millis(20), Duration::from_millis(200));
    let (_raw, mut requests) = Cluster::start(config, l2).unwrap();
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = asked.clone();
    tokio::spawn(async move {
        while let Some(incoming) = requests.next().await {
            match incoming.kind() {
                KIND_COMMITMENTS => {
                    answer_commitments(&mut cosigner2, incoming);
                }
                KIND_SIGN => {
                    let n = counter.fetch_add(1, Ordering::SeqCst);
                    if n.is_multiple_of(2) {
                        incoming.respond(Err("refused by hand".into()));
                    } else {
                        incoming.respond(Ok(vec![0xff; 40].into()));
                    }
                }
                _ => incoming.respond(Err("unknown".into())),
            }
        }
    });
    let (c1, mut ev1) = lab.start_pinging(1, ls.pop().unwrap(), Duration::from_millis(10));
    ev1.connected(2).await;
    ev1.connected(3).await;
    for c in [&c1, &_c3] {
        c.caught_up().await.unwrap();
    }
    let (client, _serving) = node_for(c1).await;
    let started = Instant::now();
    let mut h = 0;
    while asked.load(Ordering::SeqCst) < 4 {
        assert!(started.elapsed() < LIMIT, "member 2 was never asked");
        h += 1;
        let signed = client.sign_vote(CHAIN, prevote(h), false).await.unwrap();
        assert!(verifies(
            &vote_sign_bytes(CHAIN, &signed),
            &signed.signature
        ));
    }
    println!(
        "{h} votes signed; member 2 asked {} times",
        asked.load(Ordering::SeqCst)
    );
}
