//! Key files: errors never echo the secret; keygen never replaces a path.

use std::time::Duration;

use super::{run_cli, spawn};
use crate::common::process::scratch;

/// Every 8-byte window of `secret` that occurs in `text`, if any.
fn leaked_window(text: &str, secret: &str) -> Option<String> {
    let s = secret.as_bytes();
    s.windows(8)
        .find(|w| text.as_bytes().windows(8).any(|t| t == *w))
        .map(|w| String::from_utf8_lossy(w).into_owned())
}

#[test]
fn malformed_key_file_never_echoes_the_secret() {
    use base64::Engine;
    let dir = scratch("leak");
    // A valid-looking secret: base64 of 64 random-ish bytes (88 characters).
    let raw: Vec<u8> = (0..64u32)
        .map(|i| (i.wrapping_mul(97) ^ 0x5a) as u8)
        .collect();
    let secret = base64::engine::general_purpose::STANDARD.encode(&raw);
    let ty = "tendermint/PrivKeyEd25519";
    let cases = [
        // priv_key is the bare value instead of an object.
        ("bare", format!(r#"{{"priv_key":"{secret}"}}"#)),
        // "type" and "value" swapped by a hand edit.
        (
            "swapped",
            format!(r#"{{"priv_key":{{"type":"{secret}","value":"{ty}"}}}}"#),
        ),
        // A field of the wrong type right after the value.
        (
            "wrong-field-type",
            format!(r#"{{"priv_key":{{"value":"{secret}","type":5}}}}"#),
        ),
        // Trailing garbage after a complete document.
        (
            "trailing",
            format!(r#"{{"priv_key":{{"type":"{ty}","value":"{secret}"}}}} {secret}"#),
        ),
        // Not base64.
        (
            "not-base64",
            format!(r#"{{"priv_key":{{"type":"{ty}","value":"{secret}!!{secret}"}}}}"#),
        ),
        // Truncated in the middle of the value.
        (
            "truncated",
            format!(r#"{{"priv_key":{{"type":"{ty}","value":"{secret}"#),
        ),
    ];
    for (name, json) in cases {
        let path = dir.join(format!("{name}.json"));
        std::fs::write(&path, &json).unwrap();
        let p = path.to_str().unwrap();
        for args in [
            vec!["id", "--key", p],
            vec!["listen", "127.0.0.1:0", "--key", p],
        ] {
            let out = spawn(&args, b"").finish_within(Duration::from_secs(10));
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{name} {args:?}: {err}");
            assert_eq!(err.lines().count(), 1, "{name} {args:?}: {err}");
            assert!(err.starts_with("error: "), "{name} {args:?}: {err}");
            if let Some(w) = leaked_window(&err, &secret) {
                panic!("{name} {args:?}: stderr echoes the secret ({w:?}): {err}");
            }
            assert!(err.contains(p), "{name}: error must name the file: {err}");
        }
    }
}

#[test]
fn keygen_never_replaces_an_existing_path() {
    let dir = scratch("keygen-existing");
    let existing = dir.join("node_key.json");
    std::fs::write(&existing, b"precious").unwrap();
    let out = run_cli(&["keygen", "--out", existing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("error: ") && err.contains("already exists"),
        "{err}"
    );
    assert_eq!(std::fs::read(&existing).unwrap(), b"precious");

    // A dangling symlink is an existing path too: writing through it would
    // create a key wherever it points.
    #[cfg(unix)]
    {
        let target = dir.join("elsewhere.json");
        let link = dir.join("link.json");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let out = run_cli(&["keygen", "--out", link.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("already exists"),
            "{out:?}"
        );
        assert!(!target.exists(), "keygen wrote through a symlink");
        assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
    }
    // Nothing but what the test made is left in the directory (no temp files).
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let expected: &[&str] = if cfg!(unix) {
        &["link.json", "node_key.json"]
    } else {
        &["node_key.json"]
    };
    assert_eq!(names, expected);
}

// ---------------------------------------------------------------------------
// Data transfer: no side exits 0 before both directions are done.
