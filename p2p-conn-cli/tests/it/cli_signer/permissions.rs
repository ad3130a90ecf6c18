//! The start refuses a validator key or a state file the group or others
//! may read or write, and a state file's folder they may write, with the
//! `chmod` that fixes it; from the flags and from a config alike; a
//! connection identity others may read; a PKCS#11 key's PIN file others
//! may read; and a config file the group or others may write.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::config::{write_config, TestChain};
use super::{run_cli, stderr, CHAIN};
use crate::common::process::scratch;

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn loose_key_state_or_folder_permissions_stop_the_start() {
    let dir = scratch("signer-permissions");
    let a = TestChain::new(&dir, CHAIN);
    let folder = a.state.parent().unwrap().to_path_buf();
    let config = write_config(
        &dir,
        "signer.toml",
        &format!("{}{}", a.table(), a.node(&a.socket)),
    );
    let node = format!("unix://{}", a.socket.display());
    let flags = [
        "signer",
        "--node",
        &node,
        "--key",
        a.key.to_str().unwrap(),
        "--state",
        a.state.to_str().unwrap(),
        "--create-state",
        "--chain-id",
        CHAIN,
    ];
    let from_config = ["signer", "--config", config.to_str().unwrap()];
    let cases: [(&Path, u32, &str, String); 4] = [
        (
            &a.key,
            0o644,
            "validator key",
            format!("chmod 600 {}", a.key.display()),
        ),
        (
            &a.key,
            0o640,
            "validator key",
            format!("chmod 600 {}", a.key.display()),
        ),
        (
            &folder,
            0o775,
            "the folder of state file",
            format!("chmod go-w {}", folder.display()),
        ),
        (
            &folder,
            0o1777,
            "the folder of state file",
            format!("chmod go-w {}", folder.display()),
        ),
    ];
    for (path, mode, what, fix) in &cases {
        let before = std::fs::metadata(path).unwrap().permissions().mode() & 0o7777;
        chmod(path, *mode);
        for args in [&flags[..], &from_config[..]] {
            let out = run_cli(args);
            assert_eq!(out.status.code(), Some(1), "{mode:o} {args:?}: {out:?}");
            let text = stderr(&out);
            assert!(
                text.starts_with(&format!("error: {what} "))
                    && text.contains(fix)
                    && text.lines().count() == 1,
                "{mode:o} {args:?} must say {what:?} and {fix:?}: {text}"
            );
            assert!(!a.state.exists(), "nothing is created: {text}");
        }
        chmod(path, before);
    }

    // A config the group may write: it could name another state file.
    chmod(&config, 0o664);
    let out = run_cli(&from_config);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let text = stderr(&out);
    assert!(
        text.contains("config file ") && text.contains(&format!("chmod go-w {}", config.display())),
        "{text}"
    );
    chmod(&config, 0o644);

    // A connection identity others may read: whoever reads it may pose
    // as the signer.
    let identity = dir.join("connection_key.json");
    p2p_conn::keyfile::save_new(&p2p_conn::Identity::generate(), &identity).unwrap();
    chmod(&identity, 0o644);
    let out = run_cli(&[
        "signer",
        "--node",
        "tcp://127.0.0.1:9",
        "--identity",
        identity.to_str().unwrap(),
        "--key",
        a.key.to_str().unwrap(),
        "--state",
        a.state.to_str().unwrap(),
        "--create-state",
        "--chain-id",
        CHAIN,
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let text = stderr(&out);
    assert!(
        text.starts_with("error: connection identity ")
            && text.contains(&format!("chmod 600 {}", identity.display())),
        "{text}"
    );
    assert!(!a.state.exists(), "nothing is created: {text}");

    // A PKCS#11 key whose PIN file others may read: refused before the
    // token is opened (the module path need not exist).
    let pin = dir.join("validator.pin");
    std::fs::write(&pin, "123456\n").unwrap();
    chmod(&pin, 0o644);
    let uri = format!(
        "pkcs11:token=t;object=k?module-path=/nonexistent/module.so&pin-source=file:{}",
        pin.display()
    );
    let out = run_cli(&[
        "signer",
        "--node",
        "tcp://127.0.0.1:9",
        "--key",
        &uri,
        "--state",
        a.state.to_str().unwrap(),
        "--create-state",
        "--chain-id",
        CHAIN,
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let text = stderr(&out);
    assert!(
        text.starts_with("error: PIN file ")
            && text.contains(&format!("chmod 600 {}", pin.display()))
            && !text.contains("123456"),
        "{text}"
    );
    assert!(!a.state.exists(), "nothing is created: {text}");

    // An existing state file the group may read.
    std::fs::write(&a.state, b"").unwrap();
    chmod(&a.state, 0o640);
    for args in [&flags[..], &from_config[..]] {
        let out = run_cli(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {out:?}");
        let text = stderr(&out);
        assert!(
            text.starts_with("error: state file ")
                && text.contains(&format!("chmod 600 {}", a.state.display())),
            "{args:?}: {text}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
