//! The state file's path: symlinks, hard links, another name for the same
//! folder, a file replaced or a name made while the signer runs, stale
//! temporary files.

use super::*;

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
