//! A cosigner catches up on its peers' marks before it signs
//! (`spec/threshold.md` §2), and a leader's retry keeps its own share of
//! the deadline. Loopback, in-process, with `threshold_cluster`'s lab.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use p2p_conn_privval::cosign_net::{Cluster, ClusterConfig, NetError, NetEvent, Requests};
use p2p_conn_privval::state_file::{self, Format};
use p2p_conn_privval::{signed_msg_type, vote_sign_bytes, Vote};
use prost::Message as _;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::common::vote;
use crate::threshold_cluster::{
    answer_commitments, net_key, node_for, prevote, sign_height, verifies, Lab, Peers,
    SpecCommitRequest, SpecCommitResponse, SpecSignRequest, SpecSignResponse, CHAIN, CLUSTER,
    LIMIT,
};

/// `KIND_COMMITMENTS`, `KIND_SIGN` and `KIND_MARK` as spec §3.1 numbers
/// them.
const COMMITMENTS: u32 = 1;
const SIGN: u32 = 2;
const MARK: u32 = 3;

/// `MarkResponse` as spec §3.1 gives it.
#[derive(Clone, PartialEq, prost::Message)]
struct SpecMark {
    #[prost(int64, tag = "1")]
    height: i64,
    #[prost(int32, tag = "2")]
    round: i32,
    #[prost(int32, tag = "3")]
    step: i32,
}

/// Member `i` played by hand: its transport only, and the events of its
/// connections.
fn raw_member(lab: &Lab, i: u16, listener: TcpListener) -> (Cluster, Requests, Peers) {
    let (tx, rx) = mpsc::unbounded_channel();
    let config = ClusterConfig::new(CLUSTER, i, net_key(i), lab.members.clone())
        .retry(Duration::from_millis(20), Duration::from_millis(200))
        .on_event(move |e| match e {
            NetEvent::Connected { peer, .. } => drop(tx.send((*peer, true))),
            NetEvent::Disconnected { peer, .. } => drop(tx.send((*peer, false))),
            _ => {}
        });
    let (cluster, requests) = Cluster::start(config, listener).unwrap();
    let peers = Peers {
        rx,
        up: Default::default(),
    };
    (cluster, requests, peers)
}

/// Replace cosigner `i`'s state file by a fresh one (as if restored from
/// the wrong backup).
fn fresh_state(lab: &Lab, i: u16) {
    let path = lab.dir.join(format!("cosigner-{i}.state"));
    std::fs::remove_file(&path).unwrap();
    state_file::write_new(&path, &Default::default(), Format::Slots).unwrap();
}

fn precommit(h: i64) -> Vote {
    vote(signed_msg_type::PRECOMMIT, h, 0, 2, 1_700_000_500 + h)
}

/// A 2-of-3 cluster signs to height 10; cosigner 3 comes back on a fresh
/// state file. Member 2, played by hand, asks it for shares: below and at
/// the cluster's mark it refuses, above it signs.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cosigner_restored_on_a_fresh_state_file_refuses_below_the_clusters_mark() {
    let (lab, mut ls) = Lab::new("catchup-fresh").await;
    let (c3, _) = lab.start(3, ls.pop().unwrap());
    let (c2, _) = lab.start(2, ls.pop().unwrap());
    let (c1, mut ev1) = lab.start(1, ls.pop().unwrap());
    ev1.connected(2).await;
    ev1.connected(3).await;
    for c in [&c1, &c2, &c3] {
        c.caught_up().await.unwrap();
    }
    let (client, _serving) = node_for(c1).await;
    for h in 1..=10 {
        sign_height(&client, h).await;
    }
    drop(c3);
    drop(c2);
    fresh_state(&lab, 3);

    let (raw, mut requests, mut ev2) = raw_member(&lab, 2, lab.rebind(2).await);
    tokio::spawn(async move {
        while let Some(incoming) = requests.next().await {
            incoming.respond(Err("member 2 serves nothing".into()));
        }
    });
    let (c3, _) = lab.restart(3).await;
    ev2.connected(3).await;
    c3.caught_up().await.unwrap();
    let deadline = || Instant::now() + LIMIT;

    let ask = SpecCommitRequest { count: 8 }.encode_to_vec();
    let answer = raw
        .request(3, COMMITMENTS, ask.into(), deadline())
        .await
        .unwrap();
    let mut list = SpecCommitResponse::decode(&answer[..])
        .unwrap()
        .commitments
        .into_iter();
    let mut ask_share = |v: Vote| {
        let mine = list.next().unwrap();
        let mut theirs = list.next().unwrap();
        theirs.signer = 2;
        let request = SpecSignRequest {
            chain_id: CHAIN.into(),
            vote: Some(v),
            commitments: vec![mine, theirs],
            ..Default::default()
        };
        raw.request(3, SIGN, request.encode_to_vec().into(), deadline())
    };
    // Below the mark (height 10's precommit), and at it: refused.
    for (what, v) in [
        ("a prevote at 5", prevote(5)),
        ("a prevote at 10", prevote(10)),
        ("a precommit at 10", precommit(10)),
    ] {
        match ask_share(v).await {
            Err(NetError::Refused { .. }) => {}
            other => panic!("{what}, below the cluster's mark: {other:?}"),
        }
    }
    // Above it: a share.
    let answer = ask_share(prevote(11)).await.unwrap();
    let share = SpecSignResponse::decode(&answer[..]).unwrap();
    assert_eq!((share.signer, share.share.len()), (3, 32));
}

/// A 3-of-5 cluster; member 4, played by hand, reports a mark at height
/// 2^60 and serves nothing else. Cosigner 5 comes back on a fresh state
/// file with cosigner 2 down: the leader then needs 1, 3 and 5, and
/// signs, as one lying peer is below the rule's (t−1)-th highest report.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_peer_reporting_a_huge_mark_does_not_stall_the_cluster() {
    let (lab, mut ls) = Lab::split("catchup-hostile", 3, 5).await;
    let (c5, _) = lab.start(5, ls.pop().unwrap());
    let (_raw4, mut requests, _) = raw_member(&lab, 4, ls.pop().unwrap());
    let reported = Arc::new(AtomicUsize::new(0));
    let counter = reported.clone();
    tokio::spawn(async move {
        while let Some(incoming) = requests.next().await {
            if incoming.kind() == MARK {
                counter.fetch_add(1, Ordering::SeqCst);
                let huge = SpecMark {
                    height: 1 << 60,
                    round: 0,
                    step: 3,
                };
                incoming.respond(Ok(huge.encode_to_vec().into()));
            } else {
                incoming.respond(Err("member 4 serves nothing else".into()));
            }
        }
    });
    let (_c3, _) = lab.start(3, ls.pop().unwrap());
    let (c2, _) = lab.start(2, ls.pop().unwrap());
    let (c1, mut ev1) = lab.start(1, ls.pop().unwrap());
    for p in [2, 3, 4, 5] {
        ev1.connected(p).await;
    }
    for c in [&c1, &c2, &_c3, &c5] {
        c.caught_up().await.unwrap();
    }
    let (client, _serving) = node_for(c1).await;
    for h in 1..=3 {
        sign_height(&client, h).await;
    }
    drop(c5);
    drop(c2);
    fresh_state(&lab, 5);
    ev1.forget(5);
    let (c5, _) = lab.restart(5).await;
    ev1.connected(5).await;
    c5.caught_up().await.unwrap();
    for h in 4..=5 {
        sign_height(&client, h).await;
    }
    assert!(
        reported.load(Ordering::SeqCst) >= 1,
        "cosigner 5 never asked member 4 for its mark"
    );
}

/// Member 2, played by hand, hands out real commitments and never
/// answers a sign request. Leader 1 with a 4 s deadline: each time it
/// asks member 2 first, the retry with cosigner 3 still has its half.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_peer_that_hangs_leaves_the_retry_its_share_of_the_deadline() {
    let (lab, mut ls) = Lab::new("catchup-hang").await;
    let (c3, _) = lab.start(3, ls.pop().unwrap());
    let mut cosigner2 = lab.cosigner(2);
    let (_raw, mut requests, _) = raw_member(&lab, 2, ls.pop().unwrap());
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = asked.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Some(incoming) = requests.next().await {
            match incoming.kind() {
                COMMITMENTS => {
                    answer_commitments(&mut cosigner2, incoming);
                }
                SIGN => {
                    counter.fetch_add(1, Ordering::SeqCst);
                    // Never answered while the test runs.
                    held.push(incoming);
                }
                _ => incoming.respond(Err("unknown".into())),
            }
        }
    });
    let (c1, mut ev1) = lab.start_pinging(1, ls.pop().unwrap(), Duration::from_millis(10));
    ev1.connected(2).await;
    ev1.connected(3).await;
    c3.caught_up().await.unwrap();
    c1.caught_up().await.unwrap();
    let (client, _serving) = node_for(c1.deadline(Duration::from_secs(4))).await;
    let started = Instant::now();
    let mut h = 0;
    while asked.load(Ordering::SeqCst) < 2 {
        assert!(started.elapsed() < LIMIT, "member 2 was never asked");
        h += 1;
        let signed = client.sign_vote(CHAIN, prevote(h), false).await;
        let signed = signed.unwrap_or_else(|e| panic!("vote {h}: {e}"));
        assert!(verifies(
            &vote_sign_bytes(CHAIN, &signed),
            &signed.signature
        ));
    }
}
