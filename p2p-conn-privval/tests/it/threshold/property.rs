//! The safety property: several leaders asking n cosigners to sign
//! conflicting votes and proposals, their requests delivered in any
//! order, never aggregate two signatures of different sign bytes for one
//! height, round and step.

use std::collections::BTreeMap;

use p2p_conn_privval::guard::{Hrs, Step};
use p2p_conn_privval::threshold::{SignRequest, Signable, SigningRound};
use p2p_conn_privval::{
    proposal_sign_bytes, signed_msg_type, vote_sign_bytes, Proposal, Timestamp,
};
use proptest::prelude::*;
use rand_core::OsRng;

use super::{cluster, verifies, CHAIN};
use crate::common::{block, temp_dir, vote};

/// One leader's attempt: who leads, at which HRS (height 1..=2, round
/// 0..=1, step: 0 propose, 1 prevote, 2 precommit), for which block
/// (1..=3), and its order of preference among the peers.
#[derive(Debug, Clone)]
struct Attempt {
    leader: usize,
    height: i64,
    round: i32,
    step: u8,
    block: u8,
    peers: Vec<u16>,
}

fn signable(a: &Attempt) -> Signable {
    let secs = 1_000 + a.height;
    match a.step {
        0 => {
            let mut p = Proposal::default();
            p.height = a.height;
            p.round = a.round;
            p.pol_round = -1;
            p.block_id = block(a.block);
            p.timestamp = Timestamp::new(secs, 0);
            Signable::Proposal(p)
        }
        step => Signable::Vote {
            vote: vote(
                if step == 1 {
                    signed_msg_type::PREVOTE
                } else {
                    signed_msg_type::PRECOMMIT
                },
                a.height,
                a.round,
                a.block,
                secs,
            ),
            // Precommits carry extensions, signed in the same round trip.
            sign_extension: true,
        },
    }
}

fn hrs_and_bytes(signable: &Signable) -> (Hrs, Vec<u8>) {
    match signable {
        Signable::Proposal(p) => (
            Hrs::new(p.height, p.round, Step::Propose),
            proposal_sign_bytes(CHAIN, p),
        ),
        Signable::Vote { vote, .. } => (
            Hrs::new(
                vote.height,
                vote.round,
                Step::of_vote_type(vote.msg_type).unwrap(),
            ),
            vote_sign_bytes(CHAIN, vote),
        ),
        other => panic!("{other:?}"),
    }
}

fn attempts(n: u16) -> impl Strategy<Value = Vec<Attempt>> {
    let peers: Vec<u16> = (1..=n).collect();
    prop::collection::vec(
        (
            0..usize::from(n),
            1..=2i64,
            0..=1i32,
            0..=2u8,
            1..=3u8,
            Just(peers).prop_shuffle(),
        )
            .prop_map(|(leader, height, round, step, block, peers)| Attempt {
                leader,
                height,
                round,
                step,
                block,
                peers,
            }),
        2..=8,
    )
}

/// Runs the attempts, delivering every request to its cosigners in the
/// order `order` shuffles them into; the signatures aggregated, by HRS.
/// Every one verifies under the validator's key.
fn run(t: u16, n: u16, attempts: &[Attempt], order: &[usize]) -> BTreeMap<Hrs, Vec<Vec<u8>>> {
    let dir = temp_dir(&format!("threshold-property-{t}-{n}"));
    let (mut cosigners, mut leaders) = cluster(&dir, t, n, 12);
    let mut rounds: Vec<(SignRequest, Option<SigningRound>)> = Vec::new();
    for a in attempts {
        let started = leaders[a.leader].start(
            &mut cosigners[a.leader],
            CHAIN,
            signable(a),
            &a.peers,
            &mut OsRng,
        );
        if let Ok((request, round)) = started {
            rounds.push((request, Some(round)));
        }
    }
    // Every (request, cosigner) delivery, in the order given.
    let mut deliveries: Vec<(usize, u16)> = rounds
        .iter()
        .enumerate()
        .flat_map(|(r, (req, _))| req.commitments.iter().map(move |c| (r, c.signer)))
        .collect();
    let mut shuffled = Vec::with_capacity(deliveries.len());
    for &pick in order {
        if deliveries.is_empty() {
            break;
        }
        shuffled.push(deliveries.remove(pick % deliveries.len()));
    }
    shuffled.append(&mut deliveries);

    let mut signed: BTreeMap<Hrs, Vec<Vec<u8>>> = BTreeMap::new();
    for (r, signer) in shuffled {
        let (request, round) = &mut rounds[r];
        let Ok(answer) = cosigners[usize::from(signer) - 1].sign(request) else {
            // Refused: this round never completes.
            *round = None;
            continue;
        };
        let Some(gathering) = round else { continue };
        if gathering.add(answer).unwrap() {
            let done = round.take().unwrap().finish().unwrap();
            let (hrs, bytes) = hrs_and_bytes(&done);
            let signature = match &done {
                Signable::Proposal(p) => p.signature.clone(),
                Signable::Vote { vote, .. } => vote.signature.clone(),
                other => panic!("{other:?}"),
            };
            assert!(
                verifies(&bytes, &signature),
                "{hrs}: a signature that does not verify"
            );
            signed.entry(hrs).or_default().push(bytes);
        }
    }
    std::fs::remove_dir_all(&dir).ok();
    signed
}

fn no_two_sign_bytes_per_hrs(t: u16, n: u16, attempts: &[Attempt], order: &[usize]) {
    for (hrs, mut all) in run(t, n, attempts, order) {
        all.sort();
        all.dedup();
        assert_eq!(
            all.len(),
            1,
            "{t} of {n}: {hrs} signed with {} different sign bytes",
            all.len()
        );
    }
}

proptest! {
    #![proptest_config(p2p_conn_interop::proptest_config(48))]

    #[test]
    fn two_of_three_never_sign_two_sign_bytes_for_one_hrs(
        attempts in attempts(3),
        order in prop::collection::vec(any::<usize>(), 0..32),
    ) {
        no_two_sign_bytes_per_hrs(2, 3, &attempts, &order);
    }

    #[test]
    fn three_of_five_never_sign_two_sign_bytes_for_one_hrs(
        attempts in attempts(5),
        order in prop::collection::vec(any::<usize>(), 0..48),
    ) {
        no_two_sign_bytes_per_hrs(3, 5, &attempts, &order);
    }
}

/// The harness is not vacuous: conflicting attempts at one HRS, each
/// delivered whole before the next, sign the first and refuse the rest;
/// attempts at rising HRS all sign.
#[test]
fn the_property_harness_signs_what_it_may() {
    let at = |leader, block, height, peers: &[u16]| Attempt {
        leader,
        height,
        round: 0,
        step: 1,
        block,
        peers: peers.to_vec(),
    };
    let attempts = [
        at(0, 1, 1, &[2, 3]),
        at(2, 2, 1, &[2, 1]),
        at(1, 1, 2, &[3, 1]),
    ];
    // Deliveries in request order: index 0 every time.
    let signed = run(2, 3, &attempts, &[0; 8]);
    let hrs = |h| Hrs::new(h, 0, Step::Prevote);
    assert_eq!(signed.len(), 2, "{signed:?}");
    assert_eq!(signed[&hrs(1)].len(), 1);
    assert_eq!(signed[&hrs(2)].len(), 1);
}

/// How a hostile leader bends a genuine request: which commitments it
/// keeps (by position, repeats allowed), what it changes in each.
#[derive(Debug, Clone)]
struct Bend {
    keep: Vec<usize>,
    signer: Option<u16>,
    id: Option<u64>,
    swap_commitments: bool,
    extension: bool,
    chain: bool,
}

fn bends() -> impl Strategy<Value = Vec<Bend>> {
    prop::collection::vec(
        (
            prop::collection::vec(0..4usize, 0..5),
            prop::option::of(0..6u16),
            prop::option::of(any::<u64>()),
            any::<bool>(),
            any::<bool>(),
            prop::bool::weighted(0.1),
        )
            .prop_map(
                |(keep, signer, id, swap_commitments, extension, chain)| Bend {
                    keep,
                    signer,
                    id,
                    swap_commitments,
                    extension,
                    chain,
                },
            ),
        1..12,
    )
}

proptest! {
    #![proptest_config(p2p_conn_interop::proptest_config(64))]

    /// Bent requests (commitments dropped, repeated, renumbered, swapped,
    /// the extension's dropped, another chain) get errors, never a panic,
    /// and no nonce answers two requests.
    #[test]
    fn hostile_requests_get_errors_and_a_nonce_answers_once(bends in bends()) {
        let dir = temp_dir("threshold-hostile");
        let (mut cosigners, mut leaders) = cluster(&dir, 2, 3, 24);
        let mut answered = std::collections::BTreeSet::new();
        for (height, bend) in (1..).zip(&bends) {
            let attempt = Attempt { leader: 0, height, round: 0, step: 2, block: 1, peers: vec![2] };
            let (genuine, _) = leaders[0]
                .start(&mut cosigners[0], CHAIN, signable(&attempt), &[2], &mut OsRng)
                .unwrap();
            let mut request = genuine.clone();
            request.commitments = bend
                .keep
                .iter()
                .map(|&k| genuine.commitments[k % genuine.commitments.len()])
                .collect();
            for c in &mut request.commitments {
                if let Some(signer) = bend.signer {
                    c.signer = signer;
                }
                if let Some(id) = bend.id {
                    c.id = id;
                }
            }
            if bend.swap_commitments && request.commitments.len() == 2 {
                let first = request.commitments[0].commitments;
                request.commitments[0].commitments = request.commitments[1].commitments;
                request.commitments[1].commitments = first;
            }
            if !bend.extension {
                request.extension_commitments.clear();
            }
            if bend.chain {
                request.chain_id = "other-chain".into();
            }
            if let Ok(answer) = cosigners[1].sign(&request) {
                let mine = request.commitments.iter().find(|c| c.signer == 2).unwrap();
                prop_assert!(answered.insert(mine.id), "nonce {} answered twice", mine.id);
                prop_assert_eq!(answer.signer, 2);
            }
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}
