//! `GuardedSigner` and the state file: signatures verify, double signs are
//! refused, the state is on disk before a signature is returned, and
//! CometBFT's `priv_validator_state.json` / `priv_validator_key.json`
//! formats load.

mod files;
mod state_path;

use std::path::{Path, PathBuf};

use base64::Engine;
use ed25519_dalek::Verifier;
use p2p_conn::Identity;
use p2p_conn_privval::guard::{GuardError, Hrs, SignState, Step};
use p2p_conn_privval::state_file::StateFileError;
use p2p_conn_privval::{
    crypto_public_key, load_validator_key, proposal_sign_bytes, signed_msg_type, state_file,
    vote_extension_sign_bytes, vote_sign_bytes, GuardedSigner, Proposal, SharedSigner, Signer,
    SignerError, Timestamp, Vote,
};

use crate::common::{block, temp_dir, vote};

const CHAIN: &str = "test-chain";

fn key() -> Identity {
    Identity::from_seed(&[7; 32])
}

fn new_signer(dir: &Path) -> (GuardedSigner, PathBuf) {
    let path = dir.join("priv_validator_state.json");
    state_file::create_new(&path).unwrap();
    (GuardedSigner::open(key(), &path).unwrap(), path)
}

fn verify(bytes: &[u8], sig: &[u8]) -> bool {
    let vk = ed25519_dalek::VerifyingKey::from_bytes(key().public_key().as_bytes()).unwrap();
    let Ok(sig) = ed25519_dalek::Signature::from_slice(sig) else {
        return false;
    };
    vk.verify(bytes, &sig).is_ok()
}

#[test]
fn signed_vote_and_proposal_verify_and_state_is_persisted() {
    let dir = temp_dir("verify");
    let (mut s, path) = new_signer(&dir);
    let pk = s.public_key(CHAIN).unwrap();
    assert_eq!(
        pk.sum,
        Some(crypto_public_key::Key::Ed25519(
            key().public_key().as_bytes().to_vec()
        ))
    );

    let mut p = Proposal::default();
    p.height = 1;
    p.pol_round = -1;
    p.block_id = block(1);
    p.timestamp = Timestamp::new(5, 0);
    let signed = s.sign_proposal(CHAIN, p.clone()).unwrap();
    assert!(verify(&proposal_sign_bytes(CHAIN, &p), &signed.signature));

    let v = vote(signed_msg_type::PREVOTE, 1, 0, 1, 6);
    let signed = s.sign_vote(CHAIN, v.clone(), true).unwrap();
    assert!(verify(&vote_sign_bytes(CHAIN, &v), &signed.signature));
    assert!(signed.extension_signature.is_empty());
    assert!(!verify(&vote_sign_bytes("other", &v), &signed.signature));

    let on_disk = state_file::load(&path).unwrap();
    assert_eq!(on_disk.hrs(), Hrs::new(1, 0, Step::Prevote));
    assert_eq!(on_disk.sign_bytes(), vote_sign_bytes(CHAIN, &v));
    assert_eq!(on_disk.signature(), signed.signature);
    assert_eq!(&on_disk, s.state());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn double_sign_is_refused_and_state_unchanged() {
    let dir = temp_dir("double");
    let (mut s, path) = new_signer(&dir);
    let first = s
        .sign_vote(CHAIN, vote(signed_msg_type::PRECOMMIT, 4, 0, 1, 10), false)
        .unwrap();
    let before = std::fs::read(&path).unwrap();
    match s.sign_vote(CHAIN, vote(signed_msg_type::PRECOMMIT, 4, 0, 2, 10), false) {
        Err(SignerError::Refused(GuardError::Conflict { hrs })) => {
            assert_eq!(hrs, Hrs::new(4, 0, Step::Precommit))
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_eq!(std::fs::read(&path).unwrap(), before);
    // Only the timestamp differs: the earlier signature and timestamp.
    let again = s
        .sign_vote(CHAIN, vote(signed_msg_type::PRECOMMIT, 4, 0, 1, 99), false)
        .unwrap();
    assert_eq!(again.signature, first.signature);
    assert_eq!(again.timestamp, Timestamp::new(10, 0));
    assert!(verify(&vote_sign_bytes(CHAIN, &again), &again.signature));
    assert_eq!(std::fs::read(&path).unwrap(), before);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Clones of one `SharedSigner` on threads of their own, as a signer's
/// endpoints for several nodes: whichever asks first at a height signs,
/// the same request on another clone gets the same signature, a
/// conflicting one is refused on every clone, and the mark on disk is the
/// highest signed.
#[test]
fn a_shared_signer_decides_once_for_every_clone() {
    let dir = temp_dir("shared");
    let (s, path) = new_signer(&dir);
    let shared = SharedSigner::new(s);
    let handles: Vec<_> = (0..4u8)
        .map(|clone| {
            let mut mine = shared.clone();
            std::thread::spawn(move || {
                let mut out = Vec::new();
                for height in 1..=20 {
                    // Clones 0 and 1 ask for block 1, 2 and 3 for block 2,
                    // in varying order.
                    let b = 1 + clone / 2;
                    let v = vote(signed_msg_type::PREVOTE, height, 0, b, height);
                    out.push((height, b, mine.sign_vote(CHAIN, v, false)));
                }
                out
            })
        })
        .collect();
    let mut by_height: std::collections::HashMap<i64, (u8, Vec<u8>)> = Default::default();
    let (mut refused, mut signed_n) = (0, 0);
    for h in handles {
        for (height, b, r) in h.join().unwrap() {
            match r {
                Ok(signed) => {
                    signed_n += 1;
                    assert!(verify(&vote_sign_bytes(CHAIN, &signed), &signed.signature));
                    match by_height.get(&height) {
                        Some((first, sig)) => {
                            assert_eq!(*first, b, "height {height} signed for two blocks");
                            assert_eq!(sig, &signed.signature, "height {height}");
                        }
                        None => {
                            by_height.insert(height, (b, signed.signature));
                        }
                    }
                }
                Err(SignerError::Refused(_)) => refused += 1,
                Err(e) => panic!("height {height}: {e}"),
            }
        }
    }
    // Late clones are refused too (below the mark): at least the other
    // block's 40 requests are.
    assert!(refused >= 40, "{refused} refusals");
    assert!(by_height.contains_key(&20), "the last height was signed");
    assert_eq!(signed_n + refused, 80);

    // In order: the same request on another clone gets the same signature,
    // a conflicting one is refused on every clone.
    let (mut a, mut b) = (shared.clone(), shared.clone());
    let v = vote(signed_msg_type::PRECOMMIT, 21, 0, 1, 21);
    let first = a.sign_vote(CHAIN, v.clone(), false).unwrap();
    assert_eq!(
        b.sign_vote(CHAIN, v, false).unwrap().signature,
        first.signature
    );
    for c in [&mut a, &mut b] {
        let other = vote(signed_msg_type::PRECOMMIT, 21, 0, 2, 21);
        assert!(matches!(
            c.sign_vote(CHAIN, other, false),
            Err(SignerError::Refused(GuardError::Conflict { .. }))
        ));
    }
    let on_disk = state_file::load(&path).unwrap();
    assert_eq!(on_disk.hrs(), Hrs::new(21, 0, Step::Precommit));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A signer restarted on the same state file refuses to go below it.
#[test]
fn reload_refuses_to_go_backwards() {
    let dir = temp_dir("reload");
    let (mut s, path) = new_signer(&dir);
    s.sign_vote(CHAIN, vote(signed_msg_type::PREVOTE, 9, 2, 1, 10), false)
        .unwrap();
    drop(s);
    let mut s = GuardedSigner::open(key(), &path).unwrap();
    assert_eq!(s.state().hrs(), Hrs::new(9, 2, Step::Prevote));
    match s.sign_vote(CHAIN, vote(signed_msg_type::PRECOMMIT, 8, 0, 1, 10), false) {
        Err(SignerError::Refused(GuardError::HeightRegression {
            height: 8,
            last_height: 9,
        })) => {}
        other => panic!("expected a height regression, got {other:?}"),
    }
    match s.sign_vote(CHAIN, vote(signed_msg_type::PREVOTE, 9, 2, 3, 10), false) {
        Err(SignerError::Refused(GuardError::Conflict { .. })) => {}
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert!(s
        .sign_vote(CHAIN, vote(signed_msg_type::PRECOMMIT, 9, 2, 1, 10), false)
        .is_ok());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Two signers on one state file could both sign one height: the second
/// open is refused while the first lives, and allowed once it is gone.
#[test]
fn one_signer_per_state_file() {
    let dir = temp_dir("lock");
    let (first, path) = new_signer(&dir);
    match GuardedSigner::open(key(), &path) {
        Err(SignerError::StateLocked { lock, .. }) => {
            assert_eq!(lock, dir.join("priv_validator_state.json.lock"))
        }
        other => panic!("a second signer on the state file: {other:?}"),
    }
    drop(first);
    let second = GuardedSigner::open(key(), &path).unwrap();
    drop(second);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A vote CometBFT never signs (a 31-byte block hash, a timestamp in year
/// 10000) is refused by name, and neither the mark in memory nor the
/// state file moves: the node can still get a valid vote at that height
/// and round.
#[test]
fn malformed_votes_are_refused_and_the_mark_stays() {
    let dir = temp_dir("malformed");
    let (mut s, path) = new_signer(&dir);
    s.sign_vote(CHAIN, vote(signed_msg_type::PREVOTE, 2, 0, 1, 10), false)
        .unwrap();
    let mark = s.state().clone();
    let on_disk = std::fs::read(&path).unwrap();
    let mut short_hash = vote(signed_msg_type::PRECOMMIT, 2, 0, 1, 10);
    short_hash.block_id.hash.truncate(31);
    let mut late = vote(signed_msg_type::PRECOMMIT, 2, 0, 1, 10);
    late.timestamp = Timestamp::new(253_402_300_800, 0);
    for (v, field) in [(short_hash, "block_id.hash"), (late, "timestamp")] {
        match s.sign_vote(CHAIN, v, true) {
            Err(e @ SignerError::Refused(_)) => assert!(e.to_string().contains(field), "{e}"),
            other => panic!("expected a refusal naming {field}, got {other:?}"),
        }
        assert_eq!(s.state(), &mark);
        assert_eq!(std::fs::read(&path).unwrap(), on_disk);
    }
    // The valid precommit at that height and round is still signed.
    s.sign_vote(CHAIN, vote(signed_msg_type::PRECOMMIT, 2, 0, 1, 10), true)
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Raw bytes pass no guard: refused unless allowed. The canonical bytes of
/// a vote are signed through `sign_vote` only.
#[test]
fn sign_bytes_is_refused_unless_allowed() {
    let dir = temp_dir("signbytes");
    let (mut s, path) = new_signer(&dir);
    let v = vote(signed_msg_type::PREVOTE, 3, 0, 1, 10);
    let raw = vote_sign_bytes(CHAIN, &v);
    assert!(matches!(
        s.sign_bytes(&raw),
        Err(SignerError::SignBytesRefused)
    ));
    drop(s);
    let mut s = GuardedSigner::open(key(), &path)
        .unwrap()
        .allow_sign_bytes();
    let sig = s.sign_bytes(&raw).unwrap();
    assert!(verify(&raw, &sig));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// When the state cannot be written, no signature is returned and the
/// mark in memory stays where it was.
#[test]
fn no_signature_without_a_persisted_state() {
    let dir = temp_dir("nowrite");
    let (mut s, _path) = new_signer(&dir);
    s.sign_vote(CHAIN, vote(signed_msg_type::PREVOTE, 2, 0, 1, 10), false)
        .unwrap();
    let mark = s.state().clone();
    std::fs::remove_dir_all(&dir).unwrap();
    match s.sign_vote(CHAIN, vote(signed_msg_type::PRECOMMIT, 2, 0, 1, 10), false) {
        Err(SignerError::State(StateFileError::Write { .. })) => {}
        other => panic!("expected a state write error, got {other:?}"),
    }
    assert_eq!(s.state(), &mark);
}

#[test]
fn extensions_follow_filepv() {
    let dir = temp_dir("ext");
    let (mut s, _) = new_signer(&dir);
    let mut v = vote(signed_msg_type::PRECOMMIT, 3, 0, 1, 10);
    v.extension = b"vote extension".to_vec();
    let signed = s.sign_vote(CHAIN, v.clone(), true).unwrap();
    assert!(verify(
        &vote_extension_sign_bytes(CHAIN, &v),
        &signed.extension_signature
    ));
    // Re-served vote, new extension: signed afresh.
    let mut v2 = v.clone();
    v2.extension = b"another".to_vec();
    let again = s.sign_vote(CHAIN, v2.clone(), true).unwrap();
    assert_eq!(again.signature, signed.signature);
    assert!(verify(
        &vote_extension_sign_bytes(CHAIN, &v2),
        &again.extension_signature
    ));
    // Skipped (v1's skip_extension_signing).
    let skipped = s.sign_vote(CHAIN, v.clone(), false).unwrap();
    assert!(skipped.extension_signature.is_empty());
    // An extension on a prevote.
    let mut pv = vote(signed_msg_type::PREVOTE, 4, 0, 1, 10);
    pv.extension = b"x".to_vec();
    match s.sign_vote(CHAIN, pv, true) {
        Err(SignerError::Refused(GuardError::UnexpectedExtension)) => {}
        other => panic!("expected UnexpectedExtension, got {other:?}"),
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn wrong_chain_id_is_refused() {
    let dir = temp_dir("chain");
    let (s, _) = new_signer(&dir);
    let mut s = s.with_chain_id(CHAIN);
    match s.sign_vote("other", vote(signed_msg_type::PREVOTE, 1, 0, 1, 0), false) {
        Err(SignerError::WrongChainId { expected, got }) => {
            assert_eq!((expected.as_str(), got.as_str()), (CHAIN, "other"))
        }
        other => panic!("expected WrongChainId, got {other:?}"),
    }
    assert_eq!(s.state(), &SignState::default());
    std::fs::remove_dir_all(&dir).unwrap();
}
