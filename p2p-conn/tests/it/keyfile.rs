//! `p2p_conn::keyfile`: CometBFT `node_key.json` parsing, errors that never
//! carry the secret, and `save_new`, which never replaces a file.

use crate::common::process::scratch;
use base64::Engine;
use p2p_conn::keyfile::{self, KeyFileError, KeyFileProblem};
use p2p_conn::Identity;

fn names_in(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

fn b64(raw: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(raw)
}

fn node_key(value: &str) -> String {
    format!(r#"{{"priv_key":{{"type":"tendermint/PrivKeyEd25519","value":"{value}"}}}}"#)
}

/// Whether a problem is the expected kind.
type Check = fn(KeyFileProblem) -> bool;

fn problem(r: Result<Identity, KeyFileError>) -> KeyFileProblem {
    match r {
        Err(KeyFileError::Invalid { problem, .. }) => problem,
        other => panic!("expected an invalid-key error, got {other:?}"),
    }
}

/// `to_json` writes CometBFT's compact layout with base64(seed || public
/// key); `parse` reads it back and accepts other layouts of the same JSON.
#[test]
fn roundtrip_and_cometbft_layout() {
    let seed: [u8; 32] = std::array::from_fn(|i| i as u8 + 1);
    let id = Identity::from_seed(&seed);
    let json = keyfile::to_json(&id);
    let mut raw = seed.to_vec();
    raw.extend_from_slice(id.public_key().as_bytes());
    assert_eq!(*json, node_key(&b64(&raw)));
    let back = keyfile::parse(&json).unwrap();
    assert_eq!(back.public_key(), id.public_key());
    // Any JSON layout is accepted, and whitespace around the value.
    let pretty = format!(
        "{{\n  \"priv_key\": {{\n    \"type\": \"tendermint/PrivKeyEd25519\",\n    \"value\": \" {} \"\n  }}\n}}\n",
        b64(&raw)
    );
    assert_eq!(keyfile::parse(&pretty).unwrap().node_id(), id.node_id());
}

/// Each kind of problem is told apart, and no message carries the value.
#[test]
fn parse_reports_the_kind_of_problem_without_content() {
    let id = Identity::generate();
    let good: String = keyfile::to_json(&id).as_str().to_owned();
    let v: serde_json::Value = serde_json::from_str(&good).unwrap();
    let secret = v["priv_key"]["value"].as_str().unwrap().to_string();
    let raw = base64::engine::general_purpose::STANDARD
        .decode(&secret)
        .unwrap();
    let other = Identity::generate();
    let mut mismatched = raw.clone();
    mismatched[32..].copy_from_slice(other.public_key().as_bytes());
    let ty = "tendermint/PrivKeyEd25519";
    let cases: Vec<(String, Check)> = vec![
        (format!("{good} trailing {secret}"), |p| {
            matches!(p, KeyFileProblem::NotJson { .. })
        }),
        (good[..good.len() - 10].to_string(), |p| {
            matches!(p, KeyFileProblem::NotJson { .. })
        }),
        (format!(r#"{{"priv_key":"{secret}"}}"#), |p| {
            matches!(
                p,
                KeyFileProblem::MissingField {
                    field: "priv_key",
                    ..
                }
            )
        }),
        (
            format!(r#"{{"priv_key":{{"value":"{secret}","type":5}}}}"#),
            |p| {
                matches!(
                    p,
                    KeyFileProblem::MissingField {
                        field: "priv_key.type",
                        ..
                    }
                )
            },
        ),
        (
            format!(r#"{{"priv_key":{{"type":"{ty}","value":["{secret}"]}}}}"#),
            |p| {
                matches!(
                    p,
                    KeyFileProblem::MissingField {
                        field: "priv_key.value",
                        ..
                    }
                )
            },
        ),
        (
            format!(r#"{{"priv_key":{{"type":"{secret}","value":"{ty}"}}}}"#),
            |p| matches!(p, KeyFileProblem::UnsupportedKeyType),
        ),
        (good.replace("PrivKeyEd25519", "PrivKeySecp256k1"), |p| {
            matches!(p, KeyFileProblem::UnsupportedKeyType)
        }),
        (node_key(&format!("{secret}!")), |p| {
            matches!(p, KeyFileProblem::NotBase64)
        }),
        (node_key(&b64(&raw[..32])), |p| {
            matches!(p, KeyFileProblem::WrongLength { bytes: 32 })
        }),
        (node_key(&b64(&mismatched)), |p| {
            matches!(p, KeyFileProblem::PublicKeyMismatch)
        }),
        ("{}".to_string(), |p| {
            matches!(
                p,
                KeyFileProblem::MissingField {
                    field: "priv_key",
                    ..
                }
            )
        }),
    ];
    for (json, expected) in cases {
        let r = keyfile::parse(&json);
        let msg = match &r {
            Err(e) => e.to_string(),
            Ok(_) => panic!("accepted {json}"),
        };
        let p = problem(r);
        assert!(expected(p), "{json}: wrong problem {p:?}");
        for w in secret.as_bytes().windows(8) {
            let w = std::str::from_utf8(w).unwrap();
            assert!(!msg.contains(w), "message echoes the secret: {msg}");
        }
        // Debug output carries no content either.
        assert!(!format!("{p:?}").contains(&secret[..8]));
    }
}

#[test]
fn load_names_the_path_and_rejects_huge_and_binary_files() {
    let dir = scratch("load");
    let path = dir.join("node_key.json");
    std::fs::write(&path, "not json").unwrap();
    let e = keyfile::load(&path).unwrap_err();
    assert!(
        matches!(&e, KeyFileError::Invalid { path: Some(p), problem: KeyFileProblem::NotJson { line: 1, .. } } if *p == path),
        "{e:?}"
    );
    assert!(e.to_string().contains(path.to_str().unwrap()), "{e}");

    std::fs::write(&path, [0xffu8, 0xfe, b'{']).unwrap();
    assert!(matches!(
        keyfile::load(&path),
        Err(KeyFileError::Invalid {
            problem: KeyFileProblem::NotUtf8,
            ..
        })
    ));

    std::fs::write(&path, vec![b' '; keyfile::MAX_KEY_FILE_BYTES + 1]).unwrap();
    assert!(matches!(
        keyfile::load(&path),
        Err(KeyFileError::TooLarge { .. })
    ));

    let missing = dir.join("missing.json");
    let e = keyfile::load(&missing).unwrap_err();
    assert!(
        matches!(&e, KeyFileError::Read { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    );
    assert!(e.to_string().contains("missing.json"), "{e}");
}

#[test]
fn save_new_writes_a_loadable_owner_only_file_and_no_temp() {
    let dir = scratch("save");
    let path = dir.join("node_key.json");
    let id = Identity::generate();
    keyfile::save_new(&id, &path).unwrap();
    assert_eq!(keyfile::load(&path).unwrap().node_id(), id.node_id());
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        *keyfile::to_json(&id)
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "mode {mode:o}");
    }
    assert_eq!(names_in(&dir), ["node_key.json"]);
}

#[test]
fn save_new_never_replaces_an_existing_file() {
    let dir = scratch("exists");
    let path = dir.join("node_key.json");
    std::fs::write(&path, b"precious").unwrap();
    let e = keyfile::save_new(&Identity::generate(), &path).unwrap_err();
    assert!(
        matches!(&e, KeyFileError::AlreadyExists { path: p } if *p == path),
        "{e:?}"
    );
    assert!(e.to_string().contains("already exists"), "{e}");
    assert_eq!(std::fs::read(&path).unwrap(), b"precious");
    assert_eq!(names_in(&dir), ["node_key.json"]);

    // Not even a dangling symlink is written through.
    #[cfg(unix)]
    {
        let target = dir.join("target.json");
        let link = dir.join("link.json");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = keyfile::save_new(&Identity::generate(), &link).unwrap_err();
        assert!(matches!(e, KeyFileError::AlreadyExists { .. }), "{e:?}");
        assert!(!target.exists());
        assert_eq!(names_in(&dir), ["link.json", "node_key.json"]);
    }
}

/// Many threads racing to create one key file: exactly one wins, the file is
/// the winner's key, and no temporary file is left.
#[test]
fn save_new_racing_writers_exactly_one_wins() {
    let dir = scratch("race");
    let path = dir.join("node_key.json");
    let ids: Vec<Identity> = (0..8).map(|_| Identity::generate()).collect();
    let barrier = std::sync::Barrier::new(ids.len());
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = ids
            .iter()
            .map(|id| {
                let (barrier, path) = (&barrier, &path);
                s.spawn(move || {
                    barrier.wait();
                    keyfile::save_new(id, path)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let winners: Vec<usize> = results
        .iter()
        .enumerate()
        .filter(|(_, r)| r.is_ok())
        .map(|(i, _)| i)
        .collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    for r in &results {
        if let Err(e) = r {
            assert!(matches!(e, KeyFileError::AlreadyExists { .. }), "{e:?}");
        }
    }
    assert_eq!(
        keyfile::load(&path).unwrap().node_id(),
        ids[winners[0]].node_id()
    );
    assert_eq!(names_in(&dir), ["node_key.json"]);
}

#[test]
fn save_new_failures_leave_nothing_behind() {
    let dir = scratch("fail");
    // The parent does not exist: a write error, nothing created.
    let e = keyfile::save_new(&Identity::generate(), dir.join("no/such/dir/k.json")).unwrap_err();
    assert!(matches!(e, KeyFileError::Write { .. }), "{e:?}");
    assert!(names_in(&dir).is_empty());
    // A path that names no file.
    let e = keyfile::save_new(&Identity::generate(), "/").unwrap_err();
    assert!(matches!(e, KeyFileError::NotAFilePath { .. }), "{e:?}");
}
