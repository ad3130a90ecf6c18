//! Refusals to start (exit 1): flags, key and state files, a second
//! signer on one state file, a second name for it.

use std::path::Path;
use std::time::Instant;

use p2p_conn::{keyfile, Identity};

use super::{run_cli, sigterm, stderr, validator_key, BIN, CHAIN, LIMIT};
use crate::common::process::{run, scratch, Feed, Proc};

/// A missing state file is refused with a message saying how to get one,
/// and nothing is created; bad flags exit 1 with one line.
#[test]
fn refuses_to_start_without_a_state_file_or_with_bad_flags() {
    let dir = scratch("signer-refusals");
    let (key, _) = validator_key(&dir);
    let state = dir.join("priv_validator_state.json");
    let (key, state_s) = (key.to_str().unwrap(), state.to_str().unwrap());
    let node = "unix:///nonexistent/privval.sock";

    let out = run_cli(&[
        "signer",
        "--node",
        node,
        "--key",
        key,
        "--state",
        state_s,
        "--chain-id",
        CHAIN,
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let text = stderr(&out);
    assert!(
        text.starts_with("error: state file ")
            && text.contains("--create-state")
            && text.contains("priv_validator_state.json")
            && text.lines().count() == 1,
        "{out:?}"
    );
    assert!(
        !state.exists(),
        "no state file may be created without --create-state"
    );

    // The node's own key in place of the validator's, and no chain ID: an
    // operator's mistakes, refused before anything is created.
    let node_key = dir.join("node_key.json");
    keyfile::save_new(&Identity::generate(), &node_key).unwrap();
    let nk = node_key.to_str().unwrap();
    // A key of another type than Ed25519, named; a PIN in the key's URI.
    let secp = dir.join("secp256k1_key.json");
    std::fs::write(
        &secp,
        r#"{"address":"00","pub_key":{"type":"tendermint/PubKeySecp256k1","value":"AA=="},"priv_key":{"type":"tendermint/PrivKeySecp256k1","value":"AA=="}}"#,
    )
    .unwrap();
    std::fs::set_permissions(&secp, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let secp = secp.to_str().unwrap();
    let pin_in_uri =
        "pkcs11:token=t;object=k?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-value=123456";
    for (args, says) in [
        (vec!["--key", nk, "--chain-id", CHAIN], "node_key.json"),
        (
            vec!["--key", secp, "--chain-id", CHAIN],
            "the key type is tendermint/PrivKeySecp256k1",
        ),
        (
            vec!["--key", pin_in_uri, "--chain-id", CHAIN],
            "pin-value is refused",
        ),
        (vec!["--key", key], "--chain-id"),
        (
            vec!["--key", key, "--chain-id", CHAIN, "--any-chain"],
            "cannot be used with",
        ),
    ] {
        let mut all = vec![
            "signer",
            "--node",
            node,
            "--state",
            state_s,
            "--create-state",
        ];
        all.extend(args);
        let out = run_cli(&all);
        assert!(matches!(out.status.code(), Some(1 | 2)), "{all:?}: {out:?}");
        assert!(
            stderr(&out).contains(says),
            "{all:?} must say {says:?}: {out:?}"
        );
        assert!(!state.exists(), "{all:?} created the state file");
    }

    let noise = format!(
        "noise://{}@127.0.0.1:1",
        Identity::generate().public_key().peer_id()
    );
    let base = [
        "signer",
        "--state",
        state_s,
        "--create-state",
        "--chain-id",
        CHAIN,
    ];
    for (extra, says) in [
        (
            &["--key", key, "--node", "http://127.0.0.1:1"][..],
            "tcp://HOST:PORT, unix://PATH or noise://PEER_ID@IP:PORT",
        ),
        // noise:// (CometBFT v0.40): the signer's identity must be stable,
        // its own, and the address well formed.
        (
            &["--key", key, "--node", &noise][..],
            "noise:// needs --identity",
        ),
        (
            &["--key", key, "--node", &noise, "--identity", key][..],
            "is the validator key",
        ),
        (
            &[
                "--key",
                key,
                "--node",
                &noise,
                "--identity",
                nk,
                "--node-id",
                "f981ab195d664a8e2c6f7d6358628e05a8b5be8d",
            ][..],
            "names the node's peer ID itself",
        ),
        (
            &["--key", key, "--node", node, "--identity", nk][..],
            "--identity needs a tcp:// or noise:// address",
        ),
        (
            &["--key", key, "--node", "noise://127.0.0.1:1"][..],
            "PEER_ID a libp2p peer ID",
        ),
        // Several nodes: each once, and pins in the addresses.
        (
            &[
                "--key",
                key,
                "--node",
                "tcp://127.0.0.1:1",
                "--node",
                "tcp://127.0.0.1:1",
            ][..],
            "is given twice",
        ),
        (
            &[
                "--key",
                key,
                "--node",
                "tcp://127.0.0.1:1",
                "--node",
                node,
                "--node-id",
                "f981ab195d664a8e2c6f7d6358628e05a8b5be8d",
            ][..],
            "pin each node in its own address",
        ),
        (
            &[
                "--key",
                key,
                "--node",
                &noise.replace("127.0.0.1", "localhost"),
            ][..],
            "an IP literal with a port",
        ),
        (&["--key", key, "--node", "tcp://"][..], "missing"),
        (
            &[
                "--key",
                key,
                "--node",
                node,
                "--node-id",
                "f981ab195d664a8e2c6f7d6358628e05a8b5be8d",
            ][..],
            "--node-id needs a tcp:// address",
        ),
        (
            &["--key", key, "--node", node, "--stats-every=-1"][..],
            "--stats-every",
        ),
        (
            &[
                "--key",
                key,
                "--node",
                "tcp://f981ab195d664a8e2c6f7d6358628e05a8b5be8d@127.0.0.1:1",
                "--node-id",
                "0000000000000000000000000000000000000001",
            ][..],
            "contradicts",
        ),
        (
            &[
                "--key",
                key,
                "--node",
                "tcp://127.0.0.1:1",
                "--connection-key",
                "/nonexistent/node_key.json",
            ][..],
            "/nonexistent/node_key.json",
        ),
        (
            &[
                "--node",
                "tcp://127.0.0.1:1",
                "--key",
                "/nonexistent/key.json",
            ][..],
            "/nonexistent/key.json",
        ),
    ] {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        let out = run_cli(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {out:?}");
        let text = stderr(&out);
        assert!(
            text.starts_with("error: ") && text.contains(says) && text.lines().count() == 1,
            "{args:?}: expected one error line with {says:?}: {out:?}"
        );
    }
    assert!(
        !state.exists(),
        "flags are checked before the state file is made"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A second signer on a state file another signer is using exits 1: two
/// would each keep their own high-water mark.
#[test]
fn a_second_signer_on_one_state_file_is_refused() {
    let dir = scratch("signer-locked");
    let (key, _) = validator_key(&dir);
    let state = dir.join("priv_validator_state.json");
    // Nothing listens there: the first signer keeps dialing.
    let node = format!("unix://{}", dir.join("absent.sock").display());
    let args = [
        "signer",
        "--node",
        node.as_str(),
        "--key",
        key.to_str().unwrap(),
        "--state",
        state.to_str().unwrap(),
        "--create-state",
        "--chain-id",
        CHAIN,
    ];
    let mut first = Proc::spawn(Path::new(BIN), &args, Feed::none());
    let deadline = Instant::now() + LIMIT;
    // Its first line comes once it holds the state file.
    let line = first.next_line(deadline);
    assert!(line.contains(" signer for validator "), "{line}");
    let second = run_cli(&args);
    assert_eq!(second.status.code(), Some(1), "{second:?}");
    let text = stderr(&second);
    assert!(
        text.contains("in use by another signer") && text.lines().count() == 1,
        "{second:?}"
    );
    first.check_running("a second signer was refused");
    sigterm(&first);
    first.finish_ok(deadline);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The state file under a second name (issue #28): a symbolic link and a
/// hard link from another folder are refused at start, saying why, while
/// the first signer runs; and under a mount namespace of the test's own
/// (`unshare -m`, as root), a bind mount of the file is refused as a mount
/// point and a bind mount of its folder meets the first signer's lock.
#[test]
fn a_second_name_for_the_state_file_is_refused() {
    let dir = scratch("signer-names");
    let other = dir.join("other");
    std::fs::create_dir_all(&other).unwrap();
    let (key, _) = validator_key(&dir);
    let key = key.to_str().unwrap().to_string();
    let state = dir.join("priv_validator_state.json");
    let node = format!("unix://{}", dir.join("absent.sock").display());
    let signer_args = |state: &str| {
        [
            "signer",
            "--node",
            &node,
            "--key",
            &key,
            "--state",
            state,
            "--chain-id",
            CHAIN,
        ]
        .map(String::from)
    };
    let first_args = {
        let mut a = signer_args(state.to_str().unwrap()).to_vec();
        a.push("--create-state".into());
        a
    };
    let first_args: Vec<&str> = first_args.iter().map(String::as_str).collect();
    let mut first = Proc::spawn(Path::new(BIN), &first_args, Feed::none());
    let deadline = Instant::now() + LIMIT;
    let line = first.next_line(deadline);
    assert!(line.contains(" signer for validator "), "{line}");

    let link = other.join("state-link.json");
    std::os::unix::fs::symlink(&state, &link).unwrap();
    let hard = other.join("state-hard.json");
    for (name, says) in [(&link, "is a symbolic link"), (&hard, "has 2 names")] {
        if name == &hard {
            std::fs::hard_link(&state, &hard).unwrap();
        }
        let args = signer_args(name.to_str().unwrap());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run_cli(&args);
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        assert!(stderr(&out).contains(says), "{out:?}");
    }
    std::fs::remove_file(&hard).unwrap();

    let mounted_file = other.join("mounted.json");
    std::fs::write(&mounted_file, b"").unwrap();
    let mounted_dir = dir.join("mounted-dir");
    std::fs::create_dir_all(&mounted_dir).unwrap();
    let script = format!(
        // `timeout`: a signer that starts (the check failed) would dial
        // forever; it is stopped and the test fails on its exit code.
        "mount --bind {state} {file} && mount --bind {dir} {mdir} && \
         timeout 5 {bin} {args_file}; echo \"rc=$?\" >&2; \
         timeout 5 {bin} {args_dir}; echo \"rc=$?\" >&2",
        state = state.display(),
        file = mounted_file.display(),
        dir = dir.display(),
        mdir = mounted_dir.display(),
        bin = BIN,
        args_file = signer_args(mounted_file.to_str().unwrap())
            .map(|a| format!("'{a}'"))
            .join(" "),
        args_dir = signer_args(
            mounted_dir
                .join("priv_validator_state.json")
                .to_str()
                .unwrap()
        )
        .map(|a| format!("'{a}'"))
        .join(" "),
    );
    let ns = run(
        Path::new("unshare"),
        &["-m", "--propagation", "private", "sh", "-c", &script],
        LIMIT,
    );
    let text = stderr(&ns);
    if !text.contains("rc=") {
        let why = format!("cannot make a mount namespace (unshare -m needs root): {text}");
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("{why}");
        }
        eprintln!("skipping the bind-mount half: {why}");
    } else {
        let runs: Vec<&str> = text.split("rc=").collect();
        assert!(
            runs[0].contains("is a mount point") && runs[1].starts_with('1'),
            "a bind mount of the file: {text}"
        );
        assert!(
            runs[1].contains("in use by another signer") && runs[2].starts_with('1'),
            "a bind mount of the folder: {text}"
        );
    }

    first.check_running("second names were refused");
    sigterm(&first);
    first.finish_ok(deadline);
    std::fs::remove_dir_all(&dir).unwrap();
}
