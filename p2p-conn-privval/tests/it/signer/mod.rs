//! `GuardedSigner` and the state file: signatures verify, double signs are
//! refused, the state is on disk before a signature is returned, and
//! CometBFT's `priv_validator_state.json` / `priv_validator_key.json`
//! formats load.

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

/// The issue #28 double sign, through a second name for the state file: a
/// signer on `D/priv_validator_state.json`, a symbolic link to it from
/// another folder, and a second signer on the link. The lock beside the
/// link is another file, so the second signer used to start from the same
/// mark and sign a conflicting prevote. A symlinked state file is refused,
/// with or without a signer on its target, and the link is left as it is.
#[cfg(unix)]
#[test]
fn a_symlinked_state_file_is_refused() {
    let dir = temp_dir("symlink");
    let other = temp_dir("symlink-other");
    let (mut first, path) = new_signer(&dir);
    let link = other.join("state-link.json");
    std::os::unix::fs::symlink(&path, &link).unwrap();
    first
        .sign_vote(CHAIN, vote(signed_msg_type::PREVOTE, 2, 0, 1, 10), false)
        .unwrap();
    let err = GuardedSigner::open(key(), &link)
        .map(|mut second| {
            second.sign_vote(CHAIN, vote(signed_msg_type::PREVOTE, 2, 0, 2, 10), false)
        })
        .expect_err("a second signer through a symbolic link must not start");
    let text = err.to_string();
    assert!(
        text.contains("symbolic link") && text.contains(path.to_str().unwrap()),
        "{text}"
    );
    drop(first);
    let err = GuardedSigner::open(key(), &link).expect_err("a symlink is refused alone too");
    assert!(err.to_string().contains("symbolic link"), "{err}");
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&other).unwrap();
}

/// A folder reached through a symbolic link and a path with `.` in it name
/// the same lock file, so the second signer is refused as locked.
#[cfg(unix)]
#[test]
fn another_path_to_the_same_folder_meets_the_lock() {
    let dir = temp_dir("dir-alias");
    let other = temp_dir("dir-alias-other");
    let (first, path) = new_signer(&dir);
    let linked_dir = other.join("linked");
    std::os::unix::fs::symlink(&dir, &linked_dir).unwrap();
    for alias in [
        linked_dir.join("priv_validator_state.json"),
        dir.join(".").join("priv_validator_state.json"),
        other
            .join("..")
            .join(dir.file_name().unwrap())
            .join("priv_validator_state.json"),
    ] {
        match GuardedSigner::open(key(), &alias) {
            Err(SignerError::StateLocked { .. }) => {}
            other => panic!("{}: {other:?}", alias.display()),
        }
    }
    drop(first);
    drop(path);
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&other).unwrap();
}

/// A hard link is a second name for the same file that no path check can
/// see from the other name: a state file with more than one name is
/// refused under either name, until the extra name is gone.
#[cfg(unix)]
#[test]
fn a_hard_linked_state_file_is_refused() {
    let dir = temp_dir("hardlink");
    let other = temp_dir("hardlink-other");
    let (first, path) = new_signer(&dir);
    let link = other.join("state-hard.json");
    std::fs::hard_link(&path, &link).unwrap();
    let err = GuardedSigner::open(key(), &link)
        .expect_err("a second signer through a hard link must not start");
    assert!(err.to_string().contains("2 names"), "{err}");
    drop(first);
    let err = GuardedSigner::open(key(), &path).expect_err("refused under its first name too");
    assert!(err.to_string().contains("2 names"), "{err}");
    std::fs::remove_file(&link).unwrap();
    GuardedSigner::open(key(), &path).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&other).unwrap();
}

/// Names made while a signer runs. A hard link taken then would keep the
/// old mark once the signer's next save renames a new file into place,
/// and a second signer could start from it; a file moved away would leave
/// the running signer writing a new one while another signer takes the
/// moved one. So before each save the signer checks that its state file is
/// still the file it wrote, with one name: otherwise it signs nothing
/// until that is mended.
#[cfg(unix)]
#[test]
fn a_name_made_while_running_stops_signing() {
    let dir = temp_dir("running");
    let other = temp_dir("running-other");
    let (mut s, path) = new_signer(&dir);
    s.sign_vote(CHAIN, vote(signed_msg_type::PREVOTE, 2, 0, 1, 10), false)
        .unwrap();
    let mark = s.state().clone();

    let link = other.join("state-hard.json");
    std::fs::hard_link(&path, &link).unwrap();
    let err = s
        .sign_vote(CHAIN, vote(signed_msg_type::PREVOTE, 3, 0, 1, 10), false)
        .expect_err("no signature while the state file has a second name");
    assert!(err.to_string().contains("2 names"), "{err}");
    assert_eq!(s.state(), &mark);
    std::fs::remove_file(&link).unwrap();
    s.sign_vote(CHAIN, vote(signed_msg_type::PREVOTE, 3, 0, 1, 10), false)
        .unwrap();

    // Moved to another folder: a second signer may open it there (its
    // lock is beside it), and only that one signs.
    let moved = other.join("moved.json");
    std::fs::rename(&path, &moved).unwrap();
    let mut second = GuardedSigner::open(key(), &moved).unwrap();
    second
        .sign_vote(CHAIN, vote(signed_msg_type::PREVOTE, 4, 0, 2, 10), false)
        .unwrap();
    let err = s
        .sign_vote(CHAIN, vote(signed_msg_type::PREVOTE, 4, 0, 1, 10), false)
        .expect_err("the first signer must not sign once its file is gone");
    assert!(err.to_string().contains("no longer"), "{err}");
    assert!(!path.exists(), "nothing was written in its place");
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&other).unwrap();
}

/// Another writer replaced the state file (a restored backup, a FilePV
/// started on it): the running signer's mark may now be wrong either way,
/// so it signs nothing and says to restart it.
#[test]
fn a_state_file_replaced_under_the_signer_stops_signing() {
    let dir = temp_dir("replaced");
    let (mut s, path) = new_signer(&dir);
    s.sign_vote(CHAIN, vote(signed_msg_type::PREVOTE, 5, 0, 1, 10), false)
        .unwrap();
    state_file::save(
        &path,
        &SignState::new(Hrs::new(1, 0, Step::Precommit), vec![], vec![]),
    )
    .unwrap();
    let before = std::fs::read(&path).unwrap();
    let err = s
        .sign_vote(CHAIN, vote(signed_msg_type::PREVOTE, 6, 0, 1, 10), false)
        .expect_err("no signature over a file another writer replaced");
    assert!(err.to_string().contains("replaced"), "{err}");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "the other writer's file stays"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A `kill -9` during a save leaves `.NAME.<16 hex>.tmp` behind: they are
/// removed when the next signer opens the state file (it holds the lock,
/// so no save of another signer is under way). Other files stay.
#[test]
fn stale_temporary_files_are_removed_at_open() {
    let dir = temp_dir("stale");
    let path = dir.join("priv_validator_state.json");
    state_file::create_new(&path).unwrap();
    let stale = [
        ".priv_validator_state.json.0123456789abcdef.tmp",
        ".priv_validator_state.json.fedcba9876543210.tmp",
    ];
    let kept = [
        ".priv_validator_state.json.notes.tmp",
        ".priv_validator_state.json.0123456789abcde.tmp",
        ".other.json.0123456789abcdef.tmp",
        "priv_validator_state.json.bak",
    ];
    for name in stale.iter().chain(&kept) {
        std::fs::write(dir.join(name), b"{").unwrap();
    }
    let s = GuardedSigner::open(key(), &path).unwrap();
    for name in stale {
        assert!(!dir.join(name).exists(), "{name} is still there");
    }
    for name in kept {
        assert!(dir.join(name).exists(), "{name} was removed");
    }
    drop(s);
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

/// A state file as CometBFT's FilePV writes it (`cmtjson.MarshalIndent`,
/// two-space indent: height a string, signature base64, signbytes
/// upper-case hex), here for a precommit at 12/0.
#[test]
fn filepv_state_file_round_trips() {
    let v = vote(signed_msg_type::PRECOMMIT, 12, 0, 1, 1_700_000_000);
    let bytes = vote_sign_bytes(CHAIN, &v);
    let sig = vec![0x5a; 64];
    let json = format!(
        "{{\n  \"height\": \"12\",\n  \"round\": 0,\n  \"step\": 3,\n  \"signature\": \"{}\",\n  \"signbytes\": \"{}\"\n}}",
        base64::engine::general_purpose::STANDARD.encode(&sig),
        hex::encode_upper(&bytes)
    );
    let state = state_file::parse(&json).unwrap();
    assert_eq!(state.hrs(), Hrs::new(12, 0, Step::Precommit));
    assert_eq!(state.sign_bytes(), bytes);
    assert_eq!(state.signature(), sig);
    assert_eq!(state_file::to_json(&state), json);
    // `cometbft init`'s initial state.
    let init = "{\n  \"height\": \"0\",\n  \"round\": 0,\n  \"step\": 0\n}";
    assert_eq!(state_file::parse(init).unwrap(), SignState::default());
    assert_eq!(state_file::to_json(&SignState::default()), init);
}

#[test]
fn state_file_load_errors_are_typed() {
    use state_file::StateFileProblem as P;
    let cases: [(&str, P); 6] = [
        ("{", P::NotJson { line: 1, column: 1 }),
        ("[]", P::NotObject),
        (
            r#"{"height":"x","round":0,"step":0}"#,
            P::BadField {
                field: "height",
                expected: "an int64 (a decimal string)",
            },
        ),
        (
            r#"{"height":"1","round":0,"step":4}"#,
            P::BadStep { step: 4 },
        ),
        (
            r#"{"height":"1","round":0,"step":1,"signbytes":"zz"}"#,
            P::BadField {
                field: "signbytes",
                expected: "hex",
            },
        ),
        (
            r#"{"height":"1","round":0,"step":1,"signbytes":"0A"}"#,
            P::SignBytesWithoutSignature,
        ),
    ];
    for (json, want) in cases {
        assert_eq!(state_file::parse(json), Err(want), "{json}");
    }
    let dir = temp_dir("loaderr");
    let path = dir.join("s.json");
    match state_file::load(&path) {
        Err(StateFileError::Read { source, .. }) => {
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound)
        }
        other => panic!("expected StateRead, got {other:?}"),
    }
    std::fs::write(&path, "not json").unwrap();
    assert!(matches!(
        GuardedSigner::open(key(), &path),
        Err(SignerError::State(StateFileError::Invalid { .. }))
    ));
    std::fs::write(&path, vec![b' '; state_file::MAX_STATE_FILE_BYTES + 1]).unwrap();
    assert!(matches!(
        state_file::load(&path),
        Err(StateFileError::TooLarge { .. })
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `priv_validator_key.json` as `cometbft init` writes it.
#[test]
fn validator_key_file_loads_and_checks_its_public_parts() {
    let dir = temp_dir("key");
    let id = key();
    let mut raw = [7u8; 32].to_vec();
    raw.extend_from_slice(id.public_key().as_bytes());
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let file = |address: &str, pub_key: &str| {
        format!(
            "{{\n  \"address\": \"{address}\",\n  \"pub_key\": {{\n    \"type\": \"tendermint/PubKeyEd25519\",\n    \"value\": \"{pub_key}\"\n  }},\n  \"priv_key\": {{\n    \"type\": \"tendermint/PrivKeyEd25519\",\n    \"value\": \"{}\"\n  }}\n}}",
            b64(&raw)
        )
    };
    let address = hex::encode_upper(id.node_id().as_bytes());
    let path = dir.join("priv_validator_key.json");
    std::fs::write(&path, file(&address, &b64(id.public_key().as_bytes()))).unwrap();
    let loaded = load_validator_key(&path).unwrap();
    assert_eq!(loaded.public_key(), id.public_key());

    std::fs::write(&path, file(&address, &b64(&[1; 32]))).unwrap();
    assert!(matches!(
        load_validator_key(&path),
        Err(SignerError::KeyMismatch {
            field: "pub_key.value",
            ..
        })
    ));
    std::fs::write(
        &path,
        file(&"AB".repeat(20), &b64(id.public_key().as_bytes())),
    )
    .unwrap();
    assert!(matches!(
        load_validator_key(&path),
        Err(SignerError::KeyMismatch {
            field: "address",
            ..
        })
    ));

    // A node_key.json (priv_key only) is a node's p2p identity, not its
    // validator key: refused, naming it.
    std::fs::write(
        &path,
        format!(
            "{{\"priv_key\":{{\"type\":\"tendermint/PrivKeyEd25519\",\"value\":\"{}\"}}}}",
            b64(&raw)
        ),
    )
    .unwrap();
    let err = load_validator_key(&path).expect_err("a node_key.json is not a validator key");
    assert!(err.to_string().contains("node_key.json"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

const FILEPV: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/filepv-v1.0.1");
const FILEPV_VOTE_SIG: &str = "7c87114e6bd1bc6f32d7ce38d3b5df9bfd9b925b901e4743920436e696ec0d3e9c88c98205908f2f8e444fe23620a5ea712cc214d521ddf0d2d40ad210b36e0d";
const FILEPV_EXT_SIG: &str = "0431d6f5ec89b3df9f3ea738e0b6424da45f3ee2dde06bb97d2b55a7c57688c4c11b5ea23413440d749eac43afbffeaa1386fcc8ec1ba7b7203c0f547e81350d";

/// The vote FilePV signed for `tests/data/filepv-v1.0.1` (its README).
fn filepv_vote() -> Vote {
    let mut v = Vote::default();
    v.msg_type = signed_msg_type::PRECOMMIT;
    v.height = 12;
    v.block_id.hash = vec![1; 32];
    v.block_id.part_set_header.total = 1;
    v.block_id.part_set_header.hash = vec![0xfe; 32];
    v.timestamp = Timestamp::new(1_700_000_000, 0);
    v.extension = b"vote extension".to_vec();
    v
}

/// Files CometBFT v1.0.1's FilePV wrote: they load, re-serialise byte for
/// byte, and a GuardedSigner started from FilePV's initial state signs
/// FilePV's vote into the same signatures and the same state file.
#[test]
fn filepv_files_move_to_us_and_back() {
    let key_path = Path::new(FILEPV).join("priv_validator_key.json");
    let key = load_validator_key(&key_path).unwrap();
    assert_eq!(key.public_key(), self::key().public_key());

    let filepv_state =
        std::fs::read_to_string(Path::new(FILEPV).join("priv_validator_state.json")).unwrap();
    let parsed = state_file::parse(&filepv_state).unwrap();
    assert_eq!(state_file::to_json(&parsed), filepv_state);
    assert_eq!(parsed.hrs(), Hrs::new(12, 0, Step::Precommit));
    assert_eq!(parsed.sign_bytes(), vote_sign_bytes(CHAIN, &filepv_vote()));
    assert_eq!(hex::encode(parsed.signature()), FILEPV_VOTE_SIG);
    let init =
        std::fs::read_to_string(Path::new(FILEPV).join("priv_validator_state_init.json")).unwrap();
    assert_eq!(state_file::parse(&init).unwrap(), SignState::default());
    assert_eq!(state_file::to_json(&SignState::default()), init);

    // From FilePV's initial state to FilePV's state after the vote.
    let dir = temp_dir("filepv");
    let path = dir.join("priv_validator_state.json");
    std::fs::write(&path, &init).unwrap();
    let mut s = GuardedSigner::open(key.clone(), &path).unwrap();
    let signed = s.sign_vote(CHAIN, filepv_vote(), true).unwrap();
    assert_eq!(hex::encode(&signed.signature), FILEPV_VOTE_SIG);
    assert_eq!(hex::encode(&signed.extension_signature), FILEPV_EXT_SIG);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), filepv_state);

    // From FilePV's state: the same HRS re-served, lower refused.
    drop(s); // one signer per state file
    std::fs::write(&path, &filepv_state).unwrap();
    let mut s = GuardedSigner::open(key, &path).unwrap();
    let mut later = filepv_vote();
    later.timestamp = Timestamp::new(1_700_000_009, 0);
    let again = s.sign_vote(CHAIN, later, true).unwrap();
    assert_eq!(hex::encode(&again.signature), FILEPV_VOTE_SIG);
    assert_eq!(again.timestamp, Timestamp::new(1_700_000_000, 0));
    let mut lower = filepv_vote();
    lower.height = 11;
    assert!(matches!(
        s.sign_vote(CHAIN, lower, true),
        Err(SignerError::Refused(GuardError::HeightRegression { .. }))
    ));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), filepv_state);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// FilePV's own state file (v1.0.1) imported into a slot file and exported
/// back is byte for byte FilePV's, and a signer on the slot file keeps the
/// mark across restarts; a running signer's state file cannot be copied.
#[test]
fn a_mark_moves_between_filepv_and_a_slot_file_unchanged() {
    use p2p_conn_privval::convert_state_file;
    use p2p_conn_privval::state_file::Format;
    let dir = temp_dir("slots");
    let filepv = PathBuf::from(FILEPV).join("priv_validator_state.json");
    let slots = dir.join("signer.state");
    let back = dir.join("priv_validator_state.json");
    let imported = convert_state_file(&filepv, &slots, Format::Slots).unwrap();
    assert_eq!(state_file::format_of(&slots).unwrap(), Format::Slots);
    assert_eq!(std::fs::metadata(&slots).unwrap().len(), 8192);
    assert_eq!(state_file::load(&slots).unwrap(), imported);
    convert_state_file(&slots, &back, Format::FilePv).unwrap();
    assert_eq!(
        std::fs::read(&back).unwrap(),
        std::fs::read(&filepv).unwrap()
    );
    // Never over an existing file.
    assert!(convert_state_file(&filepv, &slots, Format::Slots).is_err());

    // A signer on the slot file: the mark survives a restart, and the file
    // keeps its size and identity (saved in place).
    let inode = |p: &Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).unwrap());
    let before = inode(&slots);
    let above = imported.hrs().height + 1;
    {
        let mut s = GuardedSigner::open(key(), &slots).unwrap();
        for h in above..above + 5 {
            s.sign_vote(CHAIN, vote(signed_msg_type::PREVOTE, h, 0, 1, h), false)
                .unwrap();
        }
        // Locked while it runs.
        let copy = dir.join("copy.state");
        assert!(matches!(
            convert_state_file(&slots, &copy, Format::Slots),
            Err(SignerError::StateLocked { .. })
        ));
        assert!(!copy.exists());
    }
    assert_eq!(inode(&slots), before);
    assert_eq!(std::fs::metadata(&slots).unwrap().len(), 8192);
    let mut s = GuardedSigner::open(key(), &slots).unwrap();
    assert_eq!(s.state().hrs(), Hrs::new(above + 4, 0, Step::Prevote));
    assert!(matches!(
        s.sign_vote(
            CHAIN,
            vote(signed_msg_type::PREVOTE, above + 4, 0, 2, 1),
            false
        ),
        Err(SignerError::Refused(GuardError::Conflict { .. }))
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A slot file damaged in both slots is refused at open, naming the
/// problem; one damaged slot falls back to the other.
#[test]
fn a_damaged_slot_file_falls_back_or_is_refused() {
    let dir = temp_dir("slots-damaged");
    let path = dir.join("signer.state");
    state_file::write_new(&path, &Default::default(), state_file::Format::Slots).unwrap();
    {
        let mut s = GuardedSigner::open(key(), &path).unwrap();
        s.sign_vote(CHAIN, vote(signed_msg_type::PREVOTE, 3, 0, 1, 3), false)
            .unwrap();
        s.sign_vote(CHAIN, vote(signed_msg_type::PREVOTE, 4, 0, 1, 4), false)
            .unwrap();
    }
    let mut bytes = std::fs::read(&path).unwrap();
    // Save 3 (height 4) is in slot 1: damage it, and height 3 is the mark.
    bytes[4096 + 20] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    assert_eq!(
        GuardedSigner::open(key(), &path).unwrap().state().hrs(),
        Hrs::new(3, 0, Step::Prevote)
    );
    bytes[20] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    match GuardedSigner::open(key(), &path) {
        Err(SignerError::State(StateFileError::Invalid { problem, .. })) => {
            assert!(
                problem.to_string().contains("neither of its two slots"),
                "{problem}"
            )
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
