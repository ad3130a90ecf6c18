//! SoftHSM 2 tokens for the PKCS#11 tests: each test its own token folder
//! (a `softhsm2.conf` whose `directories.tokendir` is in the test's scratch
//! folder, given to every process that opens it as `SOFTHSM2_CONF`), a
//! token, and validator keys imported the way docs/operator-manual.md
//! tells operators to: the Ed25519 seed of a `priv_validator_key.json` as
//! a PKCS#8 PEM, then `softhsm2-util --import`.
//!
//! Without SoftHSM (`softhsm2-util` or its module missing) a test skips
//! with a notice, unless `CI=true`, where it fails (`.ci/run` installs the
//! `softhsm2` and `opensc` packages).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where Debian's `softhsm2` package puts the PKCS#11 module.
pub const MODULE: &str = "/usr/lib/softhsm/libsofthsm2.so";

/// The user PIN of every test token (in the PIN file beside it).
pub const PIN: &str = "246810";
const SO_PIN: &str = "13579135";

/// PKCS#8 `PrivateKeyInfo` of an Ed25519 key (RFC 8410) up to the 32-byte
/// seed: version 0, algorithm 1.3.101.112, an OCTET STRING holding the
/// OCTET STRING of the seed.
pub const PKCS8_ED25519_PREFIX: [u8; 16] = [
    0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
];

/// A SoftHSM 2 token folder of one test, with one initialised token.
#[derive(Debug, Clone)]
pub struct SoftHsm {
    /// The `softhsm2.conf` to give as `SOFTHSM2_CONF`.
    pub conf: PathBuf,
    /// A file holding [`PIN`], mode 600.
    pub pin_file: PathBuf,
    /// The token's label.
    pub token: String,
}

/// Is SoftHSM installed? `Err` says what is missing.
fn installed() -> Result<(), String> {
    if !Path::new(MODULE).exists() {
        return Err(format!(
            "SoftHSM 2's module {MODULE} is missing (apt-get install softhsm2)"
        ));
    }
    match Command::new("softhsm2-util").arg("--version").output() {
        Ok(out) if out.status.success() => Ok(()),
        _ => Err("softhsm2-util is missing (apt-get install softhsm2)".into()),
    }
}

/// Can `test` run? `false` (after a notice) without SoftHSM, unless
/// `CI=true`, where it panics.
pub fn available(test: &str) -> bool {
    match installed() {
        Ok(()) => true,
        Err(e) => {
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!("{test}: {e} (CI=true: the PKCS#11 tests must run)");
            }
            eprintln!("skipping {test}: {e}");
            false
        }
    }
}

impl SoftHsm {
    /// A token folder in `dir` (created) with its configuration, and a
    /// token labelled `token` initialised in it; `None` (after a notice)
    /// without SoftHSM, unless `CI=true`.
    pub fn new(test: &str, dir: &Path, token: &str) -> Option<SoftHsm> {
        if !available(test) {
            return None;
        }
        let hsm = SoftHsm::configure(dir, token);
        hsm.init_token();
        Some(hsm)
    }

    /// The configuration and PIN file in `dir`, no token yet.
    pub fn configure(dir: &Path, token: &str) -> SoftHsm {
        let tokens = dir.join("tokens");
        std::fs::create_dir_all(&tokens).unwrap();
        let conf = dir.join("softhsm2.conf");
        std::fs::write(
            &conf,
            format!(
                "directories.tokendir = {}\nobjectstore.backend = file\nlog.level = ERROR\n\
                 slots.removable = false\n",
                tokens.display()
            ),
        )
        .unwrap();
        let pin_file = dir.join("pin");
        write_private(&pin_file, format!("{PIN}\n").as_bytes());
        SoftHsm {
            conf,
            pin_file,
            token: token.to_owned(),
        }
    }

    /// A command with this token folder's `SOFTHSM2_CONF`.
    pub fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        cmd.env("SOFTHSM2_CONF", &self.conf);
        cmd
    }

    fn run(&self, what: &str, cmd: &mut Command) {
        let out = cmd
            .output()
            .unwrap_or_else(|e| panic!("{what}: cannot run: {e}"));
        assert!(
            out.status.success(),
            "{what} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn init_token(&self) {
        self.run(
            "softhsm2-util --init-token",
            self.command("softhsm2-util").args([
                "--init-token",
                "--free",
                "--label",
                &self.token,
                "--so-pin",
                SO_PIN,
                "--pin",
                PIN,
            ]),
        );
    }

    /// Import the Ed25519 key of the `priv_validator_key.json` at
    /// `key_file` as `label`, `CKA_ID` `id` (hex).
    pub fn import_validator_key(&self, key_file: &Path, label: &str, id: &str) {
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(key_file).unwrap()).unwrap();
        let value = json["priv_key"]["value"].as_str().expect("priv_key.value");
        let raw = base64_decode(value);
        self.import_seed(raw[..32].try_into().unwrap(), label, id);
    }

    /// Import the Ed25519 key of `seed` as `label`, `CKA_ID` `id` (hex): a
    /// PKCS#8 PEM in a file of mode 600, `softhsm2-util --import`, the
    /// file removed.
    pub fn import_seed(&self, seed: &[u8; 32], label: &str, id: &str) {
        use base64::Engine;
        let mut der = PKCS8_ED25519_PREFIX.to_vec();
        der.extend_from_slice(seed);
        let pem = format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            base64::engine::general_purpose::STANDARD.encode(&der)
        );
        let pem_file = self.conf.with_file_name(format!("{label}.pem"));
        write_private(&pem_file, pem.as_bytes());
        self.run(
            "softhsm2-util --import",
            self.command("softhsm2-util")
                .arg("--import")
                .arg(&pem_file)
                .args([
                    "--token",
                    &self.token,
                    "--label",
                    label,
                    "--id",
                    id,
                    "--pin",
                    PIN,
                ]),
        );
        std::fs::remove_file(&pem_file).unwrap();
    }

    /// Generate an EC P-256 key pair `label` in the token with
    /// `pkcs11-tool` (opensc): a key the signer must refuse.
    pub fn generate_p256(&self, label: &str, id: &str) {
        self.run(
            "pkcs11-tool --keypairgen",
            self.command("pkcs11-tool").args([
                "--module",
                MODULE,
                "--token-label",
                &self.token,
                "--login",
                "--pin",
                PIN,
                "--keypairgen",
                "--key-type",
                "EC:prime256v1",
                "--label",
                label,
                "--id",
                id,
            ]),
        );
    }

    /// The URI of the key `label` in this token, its PIN from the PIN
    /// file.
    pub fn uri(&self, label: &str) -> String {
        format!(
            "pkcs11:token={};object={label}?module-path={MODULE}&pin-source=file:{}",
            self.token,
            self.pin_file.display()
        )
    }
}

fn base64_decode(s: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(s.trim())
        .unwrap()
}

/// Write `bytes` to a new file of mode 600.
fn write_private(path: &Path, bytes: &[u8]) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .unwrap();
    f.write_all(bytes).unwrap();
}
