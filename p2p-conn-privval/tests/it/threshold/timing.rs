//! The CPU cost of threshold signing, printed (never asserted): one
//! signature share (`round2::sign`), one aggregation (`aggregate`, which
//! verifies the result), and a cosigner's whole answer with its state
//! file's save. Run with `--nocapture` (and `--release` for the figures
//! `docs/performance.md` would quote) to see them.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use frost_ed25519::keys::KeyPackage;
use frost_ed25519::{round1, round2, SigningPackage};
use p2p_conn_privval::signed_msg_type;
use p2p_conn_privval::threshold::Signable;
use rand_core::OsRng;

use super::{cluster, CHAIN};
use crate::common::{temp_dir, vote};

const ROUNDS: usize = 200;

fn summary(what: &str, mut times: Vec<Duration>) {
    times.sort();
    let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e6;
    println!(
        "{what}: median {:.1} µs, p99 {:.1} µs, max {:.1} µs ({} runs)",
        at(0.5),
        at(0.99),
        at(1.0),
        times.len()
    );
}

#[test]
fn cpu_time_of_a_share_and_an_aggregation() {
    let (shares, public) = frost_ed25519::keys::generate_with_dealer(
        3,
        2,
        frost_ed25519::keys::IdentifierList::Default,
        OsRng,
    )
    .unwrap();
    let keys: Vec<KeyPackage> = shares
        .into_values()
        .map(|s| KeyPackage::try_from(s).unwrap())
        .collect();
    let message = vote_sign_bytes_sample();
    let (mut share_times, mut aggregate_times, mut commit_times) = (vec![], vec![], vec![]);
    for _ in 0..ROUNDS {
        let start = Instant::now();
        let (n1, c1) = round1::commit(keys[0].signing_share(), &mut OsRng);
        commit_times.push(start.elapsed());
        let (n2, c2) = round1::commit(keys[1].signing_share(), &mut OsRng);
        let package = SigningPackage::new(
            BTreeMap::from([(*keys[0].identifier(), c1), (*keys[1].identifier(), c2)]),
            &message,
        );
        let start = Instant::now();
        let s1 = round2::sign(&package, &n1, &keys[0]).unwrap();
        share_times.push(start.elapsed());
        let s2 = round2::sign(&package, &n2, &keys[1]).unwrap();
        let shares = BTreeMap::from([(*keys[0].identifier(), s1), (*keys[1].identifier(), s2)]);
        let start = Instant::now();
        frost_ed25519::aggregate(&package, &shares, &public).unwrap();
        aggregate_times.push(start.elapsed());
    }
    summary("2 of 3: round1::commit (one nonce)", commit_times);
    summary("2 of 3: round2::sign (one share)", share_times);
    summary("2 of 3: aggregate (with its verification)", aggregate_times);

    // A cosigner's whole answer (its guard, its share, its slot state
    // file's save with its fdatasync) and a leader's whole round.
    let dir = temp_dir("threshold-timing");
    let (mut cosigners, mut leaders) = cluster(&dir, 2, 3, 0);
    let (mut answer_times, mut round_times) = (vec![], vec![]);
    for height in 1..=ROUNDS as i64 {
        let commitments = cosigners[1].commit(1, &mut OsRng);
        leaders[0].add_commitments(2, &commitments).unwrap();
        let start = Instant::now();
        let (request, mut round) = leaders[0]
            .start(
                &mut cosigners[0],
                CHAIN,
                Signable::Vote {
                    vote: vote(signed_msg_type::PREVOTE, height, 0, 1, 1_000 + height),
                    sign_extension: false,
                },
                &[2],
                &mut OsRng,
            )
            .unwrap();
        round.add(cosigners[0].sign(&request).unwrap()).unwrap();
        let peer = Instant::now();
        let answer = cosigners[1].sign(&request).unwrap();
        answer_times.push(peer.elapsed());
        round.add(answer).unwrap();
        round.finish().unwrap();
        round_times.push(start.elapsed());
    }
    summary(
        "2 of 3: a cosigner's answer (guard, share, slot-file save)",
        answer_times,
    );
    summary(
        "2 of 3: a leader's round, in process (two answers, aggregation)",
        round_times,
    );
    std::fs::remove_dir_all(&dir).ok();
}

fn vote_sign_bytes_sample() -> Vec<u8> {
    p2p_conn_privval::vote_sign_bytes(CHAIN, &vote(signed_msg_type::PRECOMMIT, 100, 0, 1, 1_000))
}
