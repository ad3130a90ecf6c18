//! `p2p-conn threshold split | check | show`: a validator key split into
//! share files that never hold the key, the group key the chain knows,
//! `check` passing with any t shares and failing with t−1, with shares of
//! two splits and with a tampered share, and the refusals (bounds, a key
//! file others may read, an existing output).

#![cfg(unix)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use p2p_conn_interop::privval_peer::validator_key_json;

use crate::common::process::{run, scratch, Finished};

const BIN: &str = env!("CARGO_BIN_EXE_p2p-conn");
const LIMIT: Duration = Duration::from_secs(60);

fn run_cli(args: &[&str]) -> Finished {
    run(Path::new(BIN), args, LIMIT)
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A `priv_validator_key.json` (mode 0600) in `dir` for the key of `seed`,
/// and its public key.
fn key_file(dir: &Path, seed: [u8; 32]) -> (PathBuf, [u8; 32]) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join("priv_validator_key.json");
    let (json, id) = validator_key_json(seed);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .unwrap();
    f.write_all(json.as_bytes()).unwrap();
    (path, *id.public_key().as_bytes())
}

fn split(key: &Path, t: u16, n: u16, out: &Path) -> Finished {
    run_cli(&[
        "threshold",
        "split",
        "--key",
        key.to_str().unwrap(),
        "--threshold",
        &t.to_string(),
        "--shares",
        &n.to_string(),
        "--out",
        out.to_str().unwrap(),
    ])
}

fn share_path(dir: &Path, i: u16) -> PathBuf {
    dir.join(format!("share-{i}.json"))
}

fn check(shares: &[PathBuf], extra: &[&str]) -> Finished {
    let mut args = vec!["threshold", "check"];
    for s in shares {
        args.push("--share");
        args.push(s.to_str().unwrap());
    }
    args.extend_from_slice(extra);
    run_cli(&args)
}

fn text(f: &Finished) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&f.stdout),
        String::from_utf8_lossy(&f.stderr)
    )
}

/// The key's secret scalar, clamped (RFC 8032 §5.1.5), and reduced mod l
/// (FROST's signing key).
fn scalars(seed: &[u8; 32]) -> [[u8; 32]; 2] {
    use sha2::{Digest, Sha512};
    let hash = Sha512::digest(seed);
    let mut clamped = [0u8; 32];
    clamped.copy_from_slice(&hash[..32]);
    clamped[0] &= 248;
    clamped[31] &= 127;
    clamped[31] |= 64;
    let reduced = curve25519_dalek::Scalar::from_bytes_mod_order(clamped).to_bytes();
    [clamped, reduced]
}

/// Where any form of `secret` (raw, base64 without its last characters,
/// hex either case) occurs in `bytes`.
fn holds(bytes: &[u8], secret: &[u8; 32]) -> Option<&'static str> {
    let found = |needle: &[u8]| bytes.windows(needle.len()).any(|w| w == needle);
    let encoded = b64(secret);
    if found(secret) {
        Some("raw")
    } else if found(&encoded.as_bytes()[..40]) {
        Some("base64")
    } else if found(hex::encode(secret).as_bytes()) || found(hex::encode_upper(secret).as_bytes()) {
        Some("hex")
    } else {
        None
    }
}

#[test]
fn split_shares_hold_no_secret_and_recombine_to_the_key() {
    let dir = scratch("threshold-split");
    let seed = [0x5au8; 32];
    let (key, public) = key_file(&dir, seed);
    let out = dir.join("shares");
    let f = split(&key, 2, 3, &out);
    assert!(f.status.success(), "{}", text(&f));
    let printed = String::from_utf8_lossy(&f.stdout).to_string();
    // The group key, as CometBFT prints a validator's pub_key, and its address.
    assert!(printed.contains(&b64(&public)), "{printed}");
    let address =
        hex::encode_upper(&p2p_conn::PublicKey::from_bytes(public).node_id().as_bytes()[..]);
    assert!(printed.contains(&address), "{printed}");
    assert!(
        printed.contains("move") && printed.contains("destroy"),
        "says what to do with the key file: {printed}"
    );
    let [clamped, reduced] = scalars(&seed);
    for i in 1..=3 {
        let path = share_path(&out, i);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", path.display());
        let bytes = std::fs::read(&path).unwrap();
        for (what, secret) in [
            ("seed", &seed),
            ("scalar", &clamped),
            ("reduced scalar", &reduced),
        ] {
            assert_eq!(holds(&bytes, secret), None, "share {i} holds the {what}");
        }
        let shown = run_cli(&["threshold", "show", "--share", path.to_str().unwrap()]);
        assert!(shown.status.success(), "{}", text(&shown));
        let s = String::from_utf8_lossy(&shown.stdout).to_string();
        assert!(s.contains(&format!("share {i} of 3")), "{s}");
        assert!(s.contains("threshold 2"), "{s}");
        assert!(s.contains(&b64(&public)), "{s}");
        assert!(s.contains("verifying share"), "{s}");
        let json: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        let secret = json["signing_share"].as_str().unwrap();
        assert!(!s.contains(secret), "show prints the signing share: {s}");
    }
    // Any two of three recombine to the key, against the key file or its
    // public key; one does not.
    let pub_key = b64(&public);
    for (a, b) in [(1, 2), (1, 3), (2, 3)] {
        let shares = [share_path(&out, a), share_path(&out, b)];
        let f = check(&shares, &["--key", key.to_str().unwrap()]);
        assert!(f.status.success(), "{a},{b}: {}", text(&f));
        let f = check(&shares, &["--pub-key", &pub_key]);
        assert!(f.status.success(), "{a},{b}: {}", text(&f));
        for s in &shares {
            let secret = serde_json::from_slice::<serde_json::Value>(&std::fs::read(s).unwrap())
                .unwrap()["signing_share"]
                .as_str()
                .unwrap()
                .to_string();
            assert!(!text(&f).contains(&secret), "check prints a signing share");
        }
    }
    let f = check(&[share_path(&out, 2)], &["--pub-key", &pub_key]);
    assert_eq!(f.status.code(), Some(1), "{}", text(&f));
    // Another validator's key: the shares do not recombine to it.
    let other = b64(&[7u8; 32]);
    let f = check(
        &[share_path(&out, 1), share_path(&out, 2)],
        &["--pub-key", &other],
    );
    assert_eq!(f.status.code(), Some(1), "{}", text(&f));
}

#[test]
fn check_refuses_mixed_splits_and_tampered_shares() {
    let dir = scratch("threshold-mixed");
    let (key, public) = key_file(&dir, [0x33u8; 32]);
    let (a, b) = (dir.join("a"), dir.join("b"));
    assert!(split(&key, 3, 5, &a).status.success());
    assert!(split(&key, 3, 5, &b).status.success());
    let pub_key = b64(&public);
    let three = |d: &Path, idx: [u16; 3]| idx.map(|i| share_path(d, i)).to_vec();
    assert!(check(&three(&a, [1, 3, 5]), &["--pub-key", &pub_key])
        .status
        .success());
    assert!(check(&three(&b, [2, 4, 5]), &["--pub-key", &pub_key])
        .status
        .success());
    let f = check(&three(&a, [1, 3, 5])[..2], &["--pub-key", &pub_key]);
    assert_eq!(f.status.code(), Some(1), "t-1 shares: {}", text(&f));
    let mixed = vec![share_path(&a, 1), share_path(&a, 2), share_path(&b, 3)];
    let f = check(&mixed, &["--pub-key", &pub_key]);
    assert_eq!(f.status.code(), Some(1), "two splits: {}", text(&f));

    // A share whose signing share was changed: one character of it.
    let path = share_path(&a, 2);
    let mut json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let mut secret = json["signing_share"].as_str().unwrap().to_string();
    let c = if secret.starts_with('A') { "B" } else { "A" };
    secret.replace_range(0..1, c);
    json["signing_share"] = serde_json::Value::String(secret);
    let tampered = dir.join("tampered.json");
    {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tampered)
            .unwrap();
        f.write_all(json.to_string().as_bytes()).unwrap();
    }
    let f = check(
        &[share_path(&a, 1), tampered.clone(), share_path(&a, 3)],
        &["--pub-key", &pub_key],
    );
    assert_eq!(f.status.code(), Some(1), "tampered: {}", text(&f));
    assert!(
        text(&f).contains("tampered.json"),
        "names the file: {}",
        text(&f)
    );
    let f = run_cli(&["threshold", "show", "--share", tampered.to_str().unwrap()]);
    assert_eq!(f.status.code(), Some(1), "show tampered: {}", text(&f));
}

#[test]
fn split_refuses_bad_bounds_loose_keys_and_existing_files() {
    let dir = scratch("threshold-refuse");
    let (key, _) = key_file(&dir, [0x11u8; 32]);
    for (t, n, why) in [
        (1, 3, "at least 2"),
        (2, 4, "more than half"),
        (4, 3, "more than half"),
        (9, 17, "16"),
    ] {
        let out = dir.join(format!("out-{t}-{n}"));
        let f = split(&key, t, n, &out);
        assert_eq!(f.status.code(), Some(1), "{t} of {n}: {}", text(&f));
        assert!(text(&f).contains(why), "{t} of {n}: {}", text(&f));
        assert!(!share_path(&out, 1).exists(), "{t} of {n} wrote a share");
    }
    // 2t > n says why: two sets of t cosigners share one.
    let f = split(&key, 2, 4, &dir.join("why"));
    assert!(text(&f).contains("share"), "{}", text(&f));

    // A key file the group may read.
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap();
    let out = dir.join("loose");
    let f = split(&key, 2, 3, &out);
    assert_eq!(f.status.code(), Some(1), "{}", text(&f));
    assert!(text(&f).contains("chmod 600"), "{}", text(&f));
    assert!(!share_path(&out, 1).exists());
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();

    // An existing output: nothing replaced, nothing written.
    let out = dir.join("existing");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(share_path(&out, 2), b"keep me").unwrap();
    let f = split(&key, 2, 3, &out);
    assert_eq!(f.status.code(), Some(1), "{}", text(&f));
    assert!(text(&f).contains("share-2.json"), "{}", text(&f));
    assert_eq!(std::fs::read(share_path(&out, 2)).unwrap(), b"keep me");
    assert!(!share_path(&out, 1).exists() && !share_path(&out, 3).exists());
}

/// The key `cometbft init` writes (v1.0.1's FilePV), split 2 of 3: the
/// group key is the `pub_key` in the file, and the shares check against
/// the key file itself.
#[test]
fn splits_the_key_cometbft_init_writes() {
    use p2p_conn_interop::cometbft_go::GoVersion;
    use p2p_conn_interop::cometbft_node::node_binary;
    let test = "splits_the_key_cometbft_init_writes";
    let Some(bin) = node_binary(GoVersion::V1, test) else {
        return;
    };
    let dir = scratch("threshold-cometbft");
    let home = dir.join("home");
    crate::common::process::run_ok(
        &bin.path,
        &["init", "--home", home.to_str().unwrap()],
        LIMIT,
    );
    let key = home.join("config/priv_validator_key.json");
    let file: serde_json::Value = serde_json::from_slice(&std::fs::read(&key).unwrap()).unwrap();
    let pub_key = file["pub_key"]["value"].as_str().unwrap().to_string();
    let address = file["address"].as_str().unwrap().to_string();
    let out = dir.join("shares");
    let f = split(&key, 2, 3, &out);
    assert!(f.status.success(), "{}", text(&f));
    let printed = String::from_utf8_lossy(&f.stdout).to_string();
    assert!(
        printed.contains(&format!("pub_key {pub_key} (address {address})")),
        "{printed}"
    );
    let f = check(
        &[share_path(&out, 3), share_path(&out, 1)],
        &["--key", key.to_str().unwrap()],
    );
    assert!(f.status.success(), "{}", text(&f));
    assert!(text(&f).contains(&pub_key), "{}", text(&f));
}
