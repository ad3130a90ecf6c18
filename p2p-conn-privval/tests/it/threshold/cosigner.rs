//! Cosigners and leaders: what t of n sign verifies as the validator's
//! signature, a nonce serves one request, the guard refuses a conflict
//! and its mark is on disk before the share leaves.

use p2p_conn_privval::guard::{GuardError, Hrs, Step};
use p2p_conn_privval::threshold::{Cosigner, Leader, SignRequest, Signable, ThresholdError};
use p2p_conn_privval::{
    proposal_sign_bytes, signed_msg_type, state_file, vote_extension_sign_bytes, vote_sign_bytes,
    Proposal, SignerError, Timestamp,
};
use rand_core::OsRng;

use super::{cluster, verifies, CHAIN};
use crate::common::{block, temp_dir, vote};

/// Leader `at` (an index into the cluster) signs `signable` with the peers
/// `peers` (share indexes), every answer delivered: the signed result.
fn lead(
    cosigners: &mut [Cosigner],
    leaders: &mut [Leader],
    at: usize,
    signable: Signable,
    peers: &[u16],
) -> Result<Signable, ThresholdError> {
    let (request, mut round) =
        leaders[at].start(&mut cosigners[at], CHAIN, signable, peers, &mut OsRng)?;
    for c in &request.commitments {
        let cosigner = &mut cosigners[usize::from(c.signer) - 1];
        round.add(cosigner.sign(&request)?)?;
    }
    assert!(round.is_complete());
    round.finish()
}

fn as_vote(signable: Signable) -> p2p_conn_privval::Vote {
    match signable {
        Signable::Vote { vote, .. } => vote,
        other => panic!("{other:?}"),
    }
}

#[test]
fn two_of_three_sign_votes_proposals_and_extensions_the_chain_verifies() {
    let dir = temp_dir("threshold-sign");
    let (mut cosigners, mut leaders) = cluster(&dir, 2, 3, 8);
    // A prevote, led by 1 with 2; then by 3 with 1.
    let prevote = vote(signed_msg_type::PREVOTE, 1, 0, 1, 1_000);
    let signed = as_vote(
        lead(
            &mut cosigners,
            &mut leaders,
            0,
            Signable::Vote {
                vote: prevote.clone(),
                sign_extension: true,
            },
            &[2, 3],
        )
        .unwrap(),
    );
    assert!(verifies(
        &vote_sign_bytes(CHAIN, &prevote),
        &signed.signature
    ));
    assert!(signed.extension_signature.is_empty());

    // A proposal at height 2, led by 3 with 1.
    let mut proposal = Proposal::default();
    proposal.height = 2;
    proposal.pol_round = -1;
    proposal.block_id = block(2);
    proposal.timestamp = Timestamp::new(2_000, 0);
    let Signable::Proposal(signed) = lead(
        &mut cosigners,
        &mut leaders,
        2,
        Signable::Proposal(proposal.clone()),
        &[1],
    )
    .unwrap() else {
        panic!("not a proposal")
    };
    assert!(verifies(
        &proposal_sign_bytes(CHAIN, &proposal),
        &signed.signature
    ));

    // A non-nil precommit with an extension, led by 2 with 3: both
    // signatures in one round trip.
    let mut precommit = vote(signed_msg_type::PRECOMMIT, 2, 0, 2, 2_001);
    precommit.extension = b"extension".to_vec();
    let signed = as_vote(
        lead(
            &mut cosigners,
            &mut leaders,
            1,
            Signable::Vote {
                vote: precommit.clone(),
                sign_extension: true,
            },
            &[3],
        )
        .unwrap(),
    );
    assert!(verifies(
        &vote_sign_bytes(CHAIN, &precommit),
        &signed.signature
    ));
    assert!(verifies(
        &vote_extension_sign_bytes(CHAIN, &precommit),
        &signed.extension_signature
    ));
    // Each cosigner's mark is where it signed last.
    let marks: Vec<Hrs> = cosigners.iter().map(|c| c.state().hrs()).collect();
    assert_eq!(
        marks,
        [
            Hrs::new(2, 0, Step::Propose),
            Hrs::new(2, 0, Step::Precommit),
            Hrs::new(2, 0, Step::Precommit)
        ]
    );
}

/// The first request of `leader` (index) for `signable` with `peers`.
fn request(
    cosigners: &mut [Cosigner],
    leaders: &mut [Leader],
    at: usize,
    signable: Signable,
    peers: &[u16],
) -> SignRequest {
    leaders[at]
        .start(&mut cosigners[at], CHAIN, signable, peers, &mut OsRng)
        .unwrap()
        .0
}

fn prevote_of(block_n: u8) -> Signable {
    Signable::Vote {
        vote: vote(signed_msg_type::PREVOTE, 5, 0, block_n, 5_000),
        sign_extension: false,
    }
}

#[test]
fn a_nonce_serves_one_request_and_none_survives_a_restart() {
    let dir = temp_dir("threshold-nonce");
    let (mut cosigners, mut leaders) = cluster(&dir, 2, 3, 4);
    let req = request(&mut cosigners, &mut leaders, 0, prevote_of(1), &[2]);
    cosigners[1].sign(&req).unwrap();
    let again = cosigners[1].sign(&req).unwrap_err();
    assert!(
        matches!(again, ThresholdError::UnknownNonce { .. }),
        "{again:?}"
    );

    // A commitment that is not the pooled nonce's: refused, and spent.
    let mut forged = request(&mut cosigners, &mut leaders, 0, prevote_of(1), &[2]);
    let genuine = forged.commitments[1];
    forged.commitments[1].commitments = forged.commitments[0].commitments;
    assert!(matches!(
        cosigners[1].sign(&forged),
        Err(ThresholdError::UnknownNonce { .. })
    ));
    forged.commitments[1] = genuine;
    assert!(matches!(
        cosigners[1].sign(&forged),
        Err(ThresholdError::UnknownNonce { .. })
    ));

    // Not chosen.
    let req = request(&mut cosigners, &mut leaders, 0, prevote_of(1), &[2]);
    assert!(matches!(
        cosigners[2].sign(&req),
        Err(ThresholdError::NotChosen)
    ));

    // A restart: the stocked commitments name nonces no longer held.
    let req = request(&mut cosigners, &mut leaders, 0, prevote_of(1), &[2]);
    let restarted = cosigners.remove(1);
    let share = restarted.share().clone();
    drop(restarted);
    let path = dir.join("cosigner-2.state");
    let mut back = Cosigner::open(share, &path, CHAIN, &mut OsRng).unwrap();
    assert_eq!(back.nonces(), 0);
    assert!(matches!(
        back.sign(&req),
        Err(ThresholdError::UnknownNonce { .. })
    ));
    // Its mark came back from its state file.
    assert_eq!(back.state().hrs(), Hrs::new(5, 0, Step::Prevote));
}

#[test]
fn a_cosigner_refuses_a_conflict_and_its_mark_is_on_disk_first() {
    let dir = temp_dir("threshold-conflict");
    let (mut cosigners, mut leaders) = cluster(&dir, 2, 3, 4);
    // Leaders 1 and 3 both ask cosigner 2, for two blocks at one HRS.
    let a = request(&mut cosigners, &mut leaders, 0, prevote_of(1), &[2]);
    let b = request(&mut cosigners, &mut leaders, 2, prevote_of(2), &[2]);
    cosigners[1].sign(&a).unwrap();
    let on_disk = state_file::load(dir.join("cosigner-2.state")).unwrap();
    let Signable::Vote { vote: va, .. } = &a.signable else {
        unreachable!()
    };
    assert_eq!(on_disk.sign_bytes(), vote_sign_bytes(CHAIN, va).as_slice());
    assert_eq!(on_disk.hrs(), Hrs::new(5, 0, Step::Prevote));
    match cosigners[1].sign(&b) {
        Err(ThresholdError::Signer(SignerError::Refused(GuardError::Conflict { hrs }))) => {
            assert_eq!(hrs, Hrs::new(5, 0, Step::Prevote))
        }
        other => panic!("{other:?}"),
    }
    // The same block again, from another leader: signed (same bytes).
    let c = request(&mut cosigners, &mut leaders, 2, prevote_of(1), &[2]);
    cosigners[1].sign(&c).unwrap();
    // Another chain: refused.
    let mut d = request(&mut cosigners, &mut leaders, 0, prevote_of(1), &[2]);
    d.chain_id = "other-chain".into();
    assert!(matches!(
        cosigners[1].sign(&d),
        Err(ThresholdError::Signer(SignerError::WrongChainId { .. }))
    ));
}

#[test]
fn a_timestamp_only_change_is_signed_with_the_earlier_timestamp() {
    let dir = temp_dir("threshold-timestamp");
    let (mut cosigners, mut leaders) = cluster(&dir, 2, 3, 4);
    let first = vote(signed_msg_type::PREVOTE, 5, 0, 1, 5_000);
    let signable = |v: &p2p_conn_privval::Vote| Signable::Vote {
        vote: v.clone(),
        sign_extension: false,
    };
    lead(&mut cosigners, &mut leaders, 0, signable(&first), &[2]).unwrap();
    let mut later = first.clone();
    later.timestamp = Timestamp::new(5_009, 0);
    match lead(&mut cosigners, &mut leaders, 0, signable(&later), &[2]) {
        Err(ThresholdError::Signer(_)) | Ok(_) => panic!("signed a new timestamp"),
        Err(ThresholdError::EarlierTimestamp { timestamp }) => {
            assert_eq!(timestamp, first.timestamp);
            later.timestamp = timestamp;
        }
        Err(other) => panic!("{other:?}"),
    }
    let signed = as_vote(lead(&mut cosigners, &mut leaders, 0, signable(&later), &[2]).unwrap());
    assert!(verifies(&vote_sign_bytes(CHAIN, &first), &signed.signature));
}

#[test]
fn a_request_that_does_not_hold_together_is_refused() {
    let dir = temp_dir("threshold-bad-request");
    let (mut cosigners, mut leaders) = cluster(&dir, 2, 3, 4);
    // Too few commitments.
    let mut short = request(&mut cosigners, &mut leaders, 0, prevote_of(1), &[2]);
    short.commitments.truncate(1);
    short.commitments[0] =
        request(&mut cosigners, &mut leaders, 0, prevote_of(1), &[2]).commitments[1];
    assert!(matches!(
        cosigners[1].sign(&short),
        Err(ThresholdError::BadRequest(_))
    ));
    // An extension asked of a prevote: extension commitments for none.
    let mut ext = request(&mut cosigners, &mut leaders, 0, prevote_of(1), &[2]);
    let more = request(&mut cosigners, &mut leaders, 0, prevote_of(1), &[2]);
    ext.extension_commitments = more.commitments;
    assert!(matches!(
        cosigners[1].sign(&ext),
        Err(ThresholdError::BadRequest(_))
    ));
    // Too few peers stocked.
    let (mut lone, mut lone_leaders) = cluster(&temp_dir("threshold-lone"), 3, 5, 0);
    assert!(matches!(
        lone_leaders[0].start(&mut lone[0], CHAIN, prevote_of(1), &[2, 3], &mut OsRng),
        Err(ThresholdError::NotEnoughCommitments { have: 1, need: 3 })
    ));
}
