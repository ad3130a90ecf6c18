//! A disk that fails under the signer and then works again: the signer
//! releases nothing the disk may not hold, keeps a mark at least as high
//! as what the disk may hold, and signs again once a save succeeds. The
//! faults are injected with `atomic_file::faults` (unit tests only).

use std::path::{Path, PathBuf};

use super::{GuardedSigner, Signer, SignerError};
use crate::atomic_file::faults::{DATA_SYNC, DIR_SYNC};
use crate::guard::{GuardError, Hrs, Step};
use crate::messages::{signed_msg_type, BlockId, PartSetHeader, Timestamp, Vote};
use crate::state_file::tests::temp_dir;
use crate::state_file::{self, Format, StateFileError};
use p2p_conn::Identity;

const CHAIN: &str = "test-chain";

fn prevote(height: i64, block: u8) -> Vote {
    let block_id = BlockId {
        hash: vec![block; 32],
        part_set_header: PartSetHeader {
            total: 1,
            hash: vec![block ^ 0xff; 32],
        },
    };
    Vote {
        msg_type: signed_msg_type::PREVOTE,
        height,
        block_id,
        timestamp: Timestamp::new(1_000 + height, 0),
        ..Vote::default()
    }
}

fn signer(dir: &Path, format: Format) -> (GuardedSigner, PathBuf) {
    let path = dir.join(match format {
        Format::FilePv => "priv_validator_state.json",
        _ => "signer.state",
    });
    state_file::write_new(&path, &Default::default(), format).unwrap();
    let s = GuardedSigner::open(Identity::from_seed(&[7; 32]), &path).unwrap();
    (s.with_chain_id(CHAIN), path)
}

/// The save of height 2 fails at its sync (`fail` times in a row): the
/// error names the disk, the mark in memory is at least what the disk may
/// hold, no conflict is signed meanwhile, and once the disk works the
/// same vote is served and signing goes on.
fn signs_again_after_a_failed_sync(format: Format, fail: u32) {
    let hook = match format {
        Format::FilePv => &DIR_SYNC,
        _ => &DATA_SYNC,
    };
    let dir = temp_dir(&format!("{format:?}-{fail}"));
    let (mut s, path) = signer(&dir, format);
    s.sign_vote(CHAIN, prevote(1, 1), false).unwrap();

    hook.fail_next(fail);
    let err = s.sign_vote(CHAIN, prevote(2, 1), false).unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, SignerError::State(StateFileError::NotDurable { .. })),
        "{err:?}"
    );
    assert!(text.contains("disk"), "{text}");
    assert!(!text.contains("another writer"), "{text}");
    let two = Hrs::new(2, 0, Step::Prevote);
    // What the disk may hold now: the new mark (the rename took place, or
    // the slot was written). Memory is never below it.
    assert!(state_file::load(&path).unwrap().hrs() <= two);
    assert_eq!(s.state().hrs(), two);
    // A conflict at that height is refused, disk or no disk.
    match s.sign_vote(CHAIN, prevote(2, 9), false) {
        Err(SignerError::Refused(GuardError::Conflict { .. })) => {}
        other => panic!("a conflict after a failed save: {other:?}"),
    }
    // While the disk still fails, the same vote is not released either.
    for _ in 1..fail {
        let err = s.sign_vote(CHAIN, prevote(2, 1), false).unwrap_err();
        assert!(
            matches!(err, SignerError::State(StateFileError::NotDurable { .. })),
            "{err:?}"
        );
    }
    // The disk works: the vote is served, saved first, and signing goes on.
    let again = s.sign_vote(CHAIN, prevote(2, 1), false).unwrap();
    assert!(!again.signature.is_empty());
    assert_eq!(state_file::load(&path).unwrap().hrs(), two);
    s.sign_vote(CHAIN, prevote(3, 1), false).unwrap();
    assert_eq!(
        state_file::load(&path).unwrap().hrs(),
        Hrs::new(3, 0, Step::Prevote)
    );
    // And a signer opened afresh agrees.
    drop(s);
    let s = GuardedSigner::open(Identity::from_seed(&[7; 32]), &path).unwrap();
    assert_eq!(s.state().hrs(), Hrs::new(3, 0, Step::Prevote));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_failed_directory_sync_does_not_stop_a_filepv_signer() {
    signs_again_after_a_failed_sync(Format::FilePv, 1);
    signs_again_after_a_failed_sync(Format::FilePv, 3);
}

#[test]
fn a_failed_data_sync_does_not_stop_a_slot_file_signer() {
    signs_again_after_a_failed_sync(Format::Slots, 1);
    signs_again_after_a_failed_sync(Format::Slots, 3);
}

/// A new height after a failed sync is saved and signed at once (its own
/// save makes everything before it durable).
#[test]
fn a_new_height_after_a_failed_sync_is_signed() {
    let dir = temp_dir("next");
    let (mut s, path) = signer(&dir, Format::FilePv);
    DIR_SYNC.fail_next(1);
    s.sign_vote(CHAIN, prevote(1, 1), false).unwrap_err();
    s.sign_vote(CHAIN, prevote(2, 1), false).unwrap();
    assert_eq!(
        state_file::load(&path).unwrap().hrs(),
        Hrs::new(2, 0, Step::Prevote)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
