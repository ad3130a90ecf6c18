//! The leader's side and the pool's bound: commitments only from their
//! own cosigner, answers only from the cosigners chosen, a wrong share
//! named, and a pool that keeps the newest nonces.

use frost_ed25519::Identifier;
use p2p_conn_privval::signed_msg_type;
use p2p_conn_privval::threshold::{Signable, ThresholdError, MAX_NONCES};
use rand_core::OsRng;

use super::{cluster, CHAIN};
use crate::common::{temp_dir, vote};

fn prevote(height: i64) -> Signable {
    Signable::Vote {
        vote: vote(signed_msg_type::PREVOTE, height, 0, 1, 1_000 + height),
        sign_extension: false,
    }
}

#[test]
fn a_leader_stocks_commitments_only_from_their_own_cosigner() {
    let (mut cosigners, mut leaders) = cluster(&temp_dir("threshold-stock"), 2, 3, 0);
    let of_two = cosigners[1].commit(2, &mut OsRng);
    for from in [0, 1, 3, 4] {
        assert!(
            matches!(
                leaders[0].add_commitments(from, &of_two),
                Err(ThresholdError::BadRequest(_))
            ),
            "from {from}"
        );
    }
    assert_eq!(leaders[0].stock(2), 0);
    leaders[0].add_commitments(2, &of_two).unwrap();
    assert_eq!(leaders[0].stock(2), 2);
}

#[test]
fn the_pool_keeps_the_newest_nonces() {
    let (mut cosigners, mut leaders) = cluster(&temp_dir("threshold-pool"), 2, 3, 0);
    let oldest = cosigners[1].commit(1, &mut OsRng);
    cosigners[1].commit(MAX_NONCES, &mut OsRng);
    assert_eq!(cosigners[1].nonces(), MAX_NONCES);
    leaders[0].add_commitments(2, &oldest).unwrap();
    let (request, _) = leaders[0]
        .start(&mut cosigners[0], CHAIN, prevote(1), &[2], &mut OsRng)
        .unwrap();
    assert!(matches!(
        cosigners[1].sign(&request),
        Err(ThresholdError::UnknownNonce { id }) if id == oldest[0].id
    ));
}

#[test]
fn a_round_takes_only_the_answers_it_asked_for_and_names_a_wrong_share() {
    let (mut cosigners, mut leaders) = cluster(&temp_dir("threshold-round"), 2, 3, 2);
    let (request, mut round) = leaders[0]
        .start(&mut cosigners[0], CHAIN, prevote(1), &[2], &mut OsRng)
        .unwrap();
    let own = cosigners[0].sign(&request).unwrap();
    let peer = cosigners[1].sign(&request).unwrap();
    assert!(!round.add(own).unwrap());
    assert!(matches!(round.add(own), Err(ThresholdError::BadRequest(_))));
    let mut stranger = peer;
    stranger.signer = 3;
    assert!(matches!(
        round.add(stranger),
        Err(ThresholdError::BadRequest(_))
    ));
    // Cosigner 2's answer carrying cosigner 1's share.
    let mut wrong = peer;
    wrong.share = own.share;
    assert!(round.add(wrong).unwrap());
    match round.finish() {
        Err(ThresholdError::Frost(frost_ed25519::Error::InvalidSignatureShare { culprits })) => {
            assert_eq!(culprits, vec![Identifier::try_from(2).unwrap()])
        }
        other => panic!("{other:?}"),
    }
}
