//! What only the inside shows: a share leaves only after its mark is on
//! disk (a failing disk, injected with `atomic_file::faults`), and no
//! nonce is ever written.

use std::path::Path;

use p2p_conn::Identity;
use rand_core::OsRng;

use super::Cosigner;
use crate::atomic_file::faults::DATA_SYNC;
use crate::guard::{GuardError, Hrs, Step};
use crate::messages::{signed_msg_type, BlockId, PartSetHeader, Timestamp, Vote};
use crate::state_file::tests::temp_dir;
use crate::state_file::{self, Format, StateFileError};
use crate::threshold::{KeyShare, Leader, SignRequest, Signable, ThresholdError};
use crate::SignerError;

const CHAIN: &str = "test-chain";

fn prevote(height: i64, block: u8) -> Signable {
    Signable::Vote {
        vote: Vote {
            msg_type: signed_msg_type::PREVOTE,
            height,
            block_id: BlockId {
                hash: vec![block; 32],
                part_set_header: PartSetHeader {
                    total: 1,
                    hash: vec![!block; 32],
                },
            },
            timestamp: Timestamp::new(1_000 + height, 0),
            ..Vote::default()
        },
        sign_extension: false,
    }
}

/// Cosigners 1 and 2 of a 2-of-3 split, on slot state files in `dir`, and
/// cosigner 1's leader with 8 commitments of cosigner 2.
fn pair(dir: &Path) -> (Cosigner, Cosigner, Leader) {
    let shares = KeyShare::split(&Identity::from_seed(&[7; 32]), 2, 3, &mut OsRng).unwrap();
    let open = |share: KeyShare| {
        let path = dir.join(format!("cosigner-{}.state", share.index()));
        state_file::write_new(&path, &Default::default(), Format::Slots).unwrap();
        Cosigner::open(share, &path, CHAIN, &mut OsRng).unwrap()
    };
    let mut shares = shares.into_iter();
    let one = open(shares.next().unwrap());
    let mut two = open(shares.next().unwrap());
    let mut leader = Leader::new(&one);
    leader
        .add_commitments(2, &two.commit(8, &mut OsRng))
        .unwrap();
    (one, two, leader)
}

fn request(leader: &mut Leader, one: &mut Cosigner, signable: Signable) -> SignRequest {
    leader
        .start(one, CHAIN, signable, &[2], &mut OsRng)
        .unwrap()
        .0
}

#[test]
fn a_share_leaves_only_after_its_mark_is_saved() {
    let dir = temp_dir("threshold-disk");
    let (mut one, mut two, mut leader) = pair(&dir);
    let path = dir.join("cosigner-2.state");
    two.sign(&request(&mut leader, &mut one, prevote(1, 1)))
        .unwrap();

    let req = request(&mut leader, &mut one, prevote(2, 1));
    let id = req.commitments[1].id;
    DATA_SYNC.fail_next(1);
    match two.sign(&req) {
        Err(ThresholdError::Signer(SignerError::State(StateFileError::NotDurable { .. }))) => {}
        other => panic!("a share released over a failed save: {other:?}"),
    }
    // Its nonce is spent all the same.
    assert!(!two.pool.contains_key(&id));
    assert!(matches!(
        two.sign(&req),
        Err(ThresholdError::UnknownNonce { .. })
    ));
    // The mark in memory is what the disk may hold: a conflict is refused.
    let two_hrs = Hrs::new(2, 0, Step::Prevote);
    assert_eq!(two.state().hrs(), two_hrs);
    match two.sign(&request(&mut leader, &mut one, prevote(2, 9))) {
        Err(ThresholdError::Signer(SignerError::Refused(GuardError::Conflict { .. }))) => {}
        other => panic!("{other:?}"),
    }
    // The same vote, once the disk works: saved, then answered.
    two.sign(&request(&mut leader, &mut one, prevote(2, 1)))
        .unwrap();
    assert_eq!(state_file::load(&path).unwrap().hrs(), two_hrs);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every file a cosigner's folder holds (state files, locks, share
/// files) is searched for the nonces it made: none is there.
#[test]
fn no_nonce_is_ever_written() {
    let dir = temp_dir("threshold-nonces");
    let (mut one, mut two, mut leader) = pair(&dir);
    two.share().save_new(dir.join("share-2.json")).unwrap();
    let mut secrets: Vec<Vec<u8>> = Vec::new();
    let remember = |c: &Cosigner, secrets: &mut Vec<Vec<u8>>| {
        for nonces in c.pool.values() {
            secrets.push(nonces.hiding().serialize());
            secrets.push(nonces.binding().serialize());
        }
    };
    for height in 1..=4 {
        let req = request(&mut leader, &mut one, prevote(height, 1));
        remember(&one, &mut secrets);
        remember(&two, &mut secrets);
        one.sign(&req).unwrap();
        two.sign(&req).unwrap();
    }
    assert!(secrets.len() >= 16);
    for entry in std::fs::read_dir(&dir).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        let text = String::from_utf8_lossy(&bytes).to_string();
        for secret in &secrets {
            assert!(!bytes.windows(32).any(|w| w == secret.as_slice()));
            assert!(!text.contains(&hex::encode(secret)));
            use base64::Engine;
            assert!(!text.contains(&base64::engine::general_purpose::STANDARD.encode(secret)));
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_raised_mark_refuses_its_step_and_below_and_signs_above() {
    let dir = temp_dir("threshold-raise");
    let (mut one, mut two, mut leader) = pair(&dir);
    let mark = Hrs::new(5, 0, Step::Prevote);
    assert!(two.raise_mark(mark).unwrap());
    assert!(!two.raise_mark(Hrs::new(4, 0, Step::Precommit)).unwrap());
    assert_eq!(two.state().hrs(), mark);
    for (h, what) in [(4, "below"), (5, "at")] {
        match two.sign(&request(&mut leader, &mut one, prevote(h, 1))) {
            Err(ThresholdError::Signer(SignerError::Refused(_))) => {}
            other => panic!("a share {what} a raised mark: {other:?}"),
        }
    }
    two.sign(&request(&mut leader, &mut one, prevote(6, 1)))
        .unwrap();
}
