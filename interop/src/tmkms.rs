//! tmkms (iqlusion's Tendermint KMS, in Rust) as an independent remote
//! signer for the node side of p2p-conn's privval endpoint: it dials the
//! node as a validator's signer does and signs with its `softsign` backend
//! (an Ed25519 key in a file).
//!
//! - [`tmkms_binary`] installs tmkms [`VERSION`] once, with
//!   `cargo install tmkms --version =VERSION --features softsign --locked
//!   --debug` (unoptimized and without debug info: it compiles in about
//!   two thirds of a release build's time, and signs fast enough for the
//!   tests)
//!   (tmkms's own lock file), into `<target>/tmkms` (binary
//!   `<target>/tmkms/bin/tmkms`), compiling in `<target>/tmkms-build`:
//!   its own target directory, so the install never waits on the build lock
//!   of the workspace that is running the tests. `$CARGO_TARGET_DIR` or the
//!   workspace's `target/`, as for the Go peers. A binary there that reports
//!   [`VERSION`] is used as is. The install's arguments live in
//!   [`crate::tmkms_install`], which `cargo xtask ci` shares to start the
//!   same install in the background before the tests need it. The first install downloads the crate and its
//!   dependencies from crates.io and compiles about 300 crates (minutes on a
//!   small machine); later test runs start at once. Where it cannot be
//!   installed (no network, no `cargo`) the test prints a notice with
//!   cargo's error and passes, unless `CI=true`, where it fails.
//! - [`Settings`] and [`Home::write`] give tmkms a throwaway home: a
//!   `tmkms.toml` with one `[[chain]]` (its own state file), one
//!   `[[validator]]` (the node's address, the chain ID, an optional
//!   `protocol_version`, `timeout` and `max_height`) and one `[[providers.softsign]]`
//!   consensus key, and the two keys in softsign's format (the base64 of a
//!   32-byte Ed25519 seed): the consensus key and the secret-connection
//!   identity.
//! - [`Tmkms::start`] runs `tmkms start -v -c <home>/tmkms.toml` (`-v`:
//!   every request and response in the log) with its output (stdout and
//!   stderr) in `<home>/tmkms.log`; [`Tmkms::log_text`] reads it without
//!   the colour codes tmkms always writes. Dropping it kills the process
//!   and removes the home, unless the test is failing: then the home and
//!   its log stay for a look.
//!
//! What tmkms 0.15.0 does on the wire (read from its source, and seen
//! against p2p-conn's node side and real CometBFT nodes):
//! - It dials once per session and, after a failed session, again after
//!   1 s (`reconnect = true`, the default). Its socket has a read and a
//!   write timeout (`timeout`, default 10 s), the handshake included: a node
//!   that sends nothing for that long loses the session, so it must ping
//!   more often.
//! - It decodes requests as the v0.34 privval messages
//!   (`cometbft.privval.v1beta1`) whatever `protocol_version` says (`v0.38`
//!   is the default; `v0.34` only logs a deprecation warning), so fields
//!   added later (`skip_extension_signing`, a vote's `extension` and
//!   `extension_signature`) are dropped both ways: with `sign_extensions`
//!   it signs the extension and sends the vote without that signature.
//! - A double sign is answered with a `RemoteSignerError` (code 2, "double
//!   signing requested at height: H"), and the session goes on. Every other
//!   failed request ends the session without an answer: a wrong chain ID, a
//!   height, round or step regression, a vote whose validator address is
//!   not 20 bytes long, an unknown message.
//! - Its double-sign steps are proposal 0, prevote 1, precommit 2
//!   (CometBFT's FilePV has 1, 2, 3): within one height and round it signs
//!   a proposal only before the votes. The same height, round, step and
//!   block ID with another timestamp is signed again (FilePV would return
//!   its earlier signature and timestamp).
//! - `Message` fields 9 and 10 are Celestia's `SignRawBytesRequest` /
//!   `SignedRawBytesResponse` (chain ID, raw bytes, unique ID), not
//!   CometBFT v1.0's `SignBytesRequest` / `SignBytesResponse` (the bytes
//!   alone): a v1.0 `SignBytesRequest` reads as a raw-bytes request for
//!   the chain named by the bytes, and tmkms ends the session.
//! - It has no CometBFT v1.0 support: it sends the public key in
//!   `PubKeyResponse.pub_key` (field 1), which v1.0 reserves; a v1.0.1
//!   node with `priv_validator_laddr` fails to start ("can't get pubkey:
//!   encoding: unsupported key"). Real v0.34.35, v0.37.18, v0.38.26,
//!   v0.39.4 and v0.40.0 nodes (`priv_validator_laddr`, the node's
//!   `priv_validator_key.json` given to softsign as `key_format = "json"`)
//!   run their chain with it.
//! - It has no signal handler: SIGTERM ends it at once, as SIGKILL does,
//!   even in the middle of a request. It renames its new state file into
//!   place (no `fsync`) before it signs, so once it is gone the file is at
//!   or above everything it signed; a request whose mark it wrote but
//!   whose answer never left is one it would sign again (same block), and
//!   a signer that imports the file must not.
//! - `max_height` refuses a request above it before the state file is
//!   touched (the session ends, as for any failed request).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

use base64::Engine;

use crate::cometbft_go::target_dir;

pub use crate::tmkms_install::{FEATURES, VERSION};

/// Bound on `tmkms version`.
const SHORT_RUN: Duration = Duration::from_secs(30);

/// `<target>/tmkms`: the install root (`bin/tmkms`, cargo's records).
pub fn install_root() -> PathBuf {
    crate::tmkms_install::install_root(&target_dir())
}

/// `<target>/tmkms/bin/tmkms`.
pub fn binary_path() -> PathBuf {
    crate::tmkms_install::binary_path(&target_dir())
}

/// `<target>/tmkms-build`: the install's own target directory.
pub fn build_dir() -> PathBuf {
    crate::tmkms_install::build_dir(&target_dir())
}

/// The arguments of the install, after `cargo` (`tmkms_install`).
pub fn install_args() -> Vec<String> {
    crate::tmkms_install::install_args(&target_dir())
}

/// What `bin version` prints (trimmed), if it runs at all within
/// [`SHORT_RUN`].
fn reported_version(bin: &Path) -> Option<String> {
    if !bin.is_file() {
        return None;
    }
    let mut child = Command::new(bin)
        .arg("version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let deadline = Instant::now() + SHORT_RUN;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(10)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let out = child.wait_with_output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Why tmkms is not available.
#[derive(Debug)]
pub enum BuildError {
    /// No `cargo` to install it with.
    CargoMissing,
    /// `cargo install` failed (typically: crates.io is out of reach), or
    /// what it installed does not report [`VERSION`].
    Failed(String),
}

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BuildError::CargoMissing => write!(f, "no `cargo` to install tmkms {VERSION} with"),
            BuildError::Failed(why) => write!(f, "installing tmkms {VERSION} failed: {why}"),
        }
    }
}

impl std::error::Error for BuildError {}

/// The last `n` lines of `text`.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The tmkms binary, installed first unless `<target>/tmkms/bin/tmkms`
/// already reports [`VERSION`]. Concurrent callers (other test binaries)
/// are serialized by cargo's own locks on the install root and the build
/// directory; the second finds the first's binary.
pub fn build() -> Result<PathBuf, BuildError> {
    let bin = binary_path();
    if reported_version(&bin).as_deref() == Some(VERSION) {
        return Ok(bin);
    }
    // The cargo running the tests, where it says (cargo sets `CARGO` for
    // the processes it runs); else the one on PATH.
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let result = Command::new(&cargo)
        .args(install_args())
        .envs(crate::tmkms_install::ENV.iter().copied())
        .stdin(Stdio::null())
        .output();
    let output = match result {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(BuildError::CargoMissing),
        Err(e) => return Err(BuildError::Failed(format!("running cargo: {e}"))),
        Ok(o) => o,
    };
    if !output.status.success() {
        return Err(BuildError::Failed(format!(
            "cargo {} ({}): {}",
            install_args().join(" "),
            output.status,
            tail(&String::from_utf8_lossy(&output.stderr), 20)
        )));
    }
    match reported_version(&bin) {
        Some(v) if v == VERSION => Ok(bin),
        other => Err(BuildError::Failed(format!(
            "{} reports version {other:?} after the install",
            bin.display()
        ))),
    }
}

/// The tmkms binary for `test`, installed once per test binary (see
/// [`build`]); `None` (after a notice) when it cannot be installed, unless
/// `CI=true`, where the test fails.
pub fn tmkms_binary(test: &str) -> Option<PathBuf> {
    static BUILT: OnceLock<Result<PathBuf, BuildError>> = OnceLock::new();
    match BUILT.get_or_init(build) {
        Ok(bin) => Some(bin.clone()),
        Err(e) => {
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!("{test}: {e} (CI=true: the tmkms interop tests must run)");
            }
            eprintln!("skipping {test}: {e}");
            None
        }
    }
}

/// The `protocol_version` values tmkms 0.15.0 accepts in `[[validator]]`.
/// Neither changes what it sends (see the module docs): it speaks the v0.34
/// privval messages, which every CometBFT line reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProtocolVersion {
    /// `"v0.34"` (deprecated in tmkms 0.15.0: a warning at each session).
    V034,
    /// `"v0.38"`, tmkms 0.15.0's default.
    V038,
}

impl ProtocolVersion {
    /// Both, oldest first.
    pub const ALL: [ProtocolVersion; 2] = [ProtocolVersion::V034, ProtocolVersion::V038];

    /// As `tmkms.toml` spells it: `v0.34`, `v0.38`.
    pub fn label(self) -> &'static str {
        match self {
            ProtocolVersion::V034 => "v0.34",
            ProtocolVersion::V038 => "v0.38",
        }
    }
}

/// What a tmkms home is written for.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The chain ID (`[[chain]] id`, `[[validator]] chain_id`, the
    /// softsign key's `chain_ids`).
    pub chain_id: String,
    /// The node's privval address as tmkms dials it:
    /// `tcp://NODE_ID@127.0.0.1:PORT` (a secret connection; tmkms checks
    /// the node's ID when it is given) or `unix:///path` (plaintext).
    pub addr: String,
    /// `protocol_version`; `None` leaves it out.
    pub protocol_version: Option<ProtocolVersion>,
    /// The consensus key's Ed25519 seed.
    pub consensus_seed: [u8; 32],
    /// The secret-connection identity's Ed25519 seed.
    pub identity_seed: [u8; 32],
    /// `timeout` (seconds) on tmkms's socket reads and writes; `None`
    /// leaves tmkms's default, 10 s.
    pub timeout_secs: Option<u16>,
    /// `[[chain]] sign_extensions`.
    pub sign_extensions: bool,
    /// `[[validator]] max_height`: tmkms refuses to sign above it, before
    /// it touches its state file; `None` leaves it out.
    pub max_height: Option<u64>,
}

impl Settings {
    /// Settings for `chain_id` and `addr`, with the given keys, no
    /// `protocol_version`, the default timeout and no extension signing.
    pub fn new(
        chain_id: &str,
        addr: &str,
        consensus_seed: [u8; 32],
        identity_seed: [u8; 32],
    ) -> Settings {
        Settings {
            chain_id: chain_id.to_string(),
            addr: addr.to_string(),
            protocol_version: None,
            consensus_seed,
            identity_seed,
            timeout_secs: None,
            sign_extensions: false,
            max_height: None,
        }
    }

    /// The `tmkms.toml` for a home in `dir`.
    pub fn config_toml(&self, dir: &Path) -> String {
        let q = |s: &str| toml_string(s);
        let path = |name: &str| q(&dir.join(name).display().to_string());
        let chain = q(&self.chain_id);
        let mut validator = format!(
            "addr = {}\nchain_id = {chain}\nreconnect = true\nsecret_key = {}\n",
            q(&self.addr),
            path(IDENTITY_KEY)
        );
        if let Some(v) = self.protocol_version {
            validator.push_str(&format!("protocol_version = {}\n", q(v.label())));
        }
        if let Some(t) = self.timeout_secs {
            validator.push_str(&format!("timeout = {t}\n"));
        }
        if let Some(h) = self.max_height {
            // tmkms reads a height as a string.
            validator.push_str(&format!("max_height = \"{h}\"\n"));
        }
        format!(
            "# Written by p2p-conn-interop for a test.\n\
             [[chain]]\n\
             id = {chain}\n\
             key_format = {{ type = \"hex\" }}\n\
             sign_extensions = {}\n\
             state_file = {}\n\
             \n\
             [[validator]]\n\
             {validator}\
             \n\
             [[providers.softsign]]\n\
             chain_ids = [{chain}]\n\
             key_type = \"consensus\"\n\
             path = {}\n",
            self.sign_extensions,
            path(STATE_FILE),
            path(CONSENSUS_KEY),
        )
    }
}

/// A TOML basic string.
fn toml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

const CONFIG: &str = "tmkms.toml";
const STATE_FILE: &str = "priv_validator_state.json";
const CONSENSUS_KEY: &str = "consensus.key";
const IDENTITY_KEY: &str = "kms-identity.key";
const LOG: &str = "tmkms.log";

/// A tmkms home folder (see [`Home::write`]).
#[derive(Clone, Debug)]
pub struct Home {
    /// The folder.
    pub dir: PathBuf,
    /// `tmkms.toml`.
    pub config: PathBuf,
    /// The chain's state file (tmkms writes it: the last signed height,
    /// round, step and block ID).
    pub state_file: PathBuf,
    /// The consensus key, in softsign's format (the base64 of the seed).
    pub consensus_key: PathBuf,
    /// Where [`Tmkms::start`] sends tmkms's output.
    pub log: PathBuf,
}

impl Home {
    /// Write `tmkms.toml` and both keys (softsign's format: the base64 of
    /// the seed, mode 0600) into `dir`, which must exist. The state file is
    /// left to tmkms, which starts it at height 0.
    pub fn write(dir: &Path, settings: &Settings) -> Home {
        let b64 = base64::engine::general_purpose::STANDARD;
        for (name, seed) in [
            (CONSENSUS_KEY, &settings.consensus_seed),
            (IDENTITY_KEY, &settings.identity_seed),
        ] {
            write_secret(&dir.join(name), b64.encode(seed).as_bytes());
        }
        let config = dir.join(CONFIG);
        std::fs::write(&config, settings.config_toml(dir))
            .unwrap_or_else(|e| panic!("writing {}: {e}", config.display()));
        Home {
            dir: dir.to_path_buf(),
            config,
            state_file: dir.join(STATE_FILE),
            consensus_key: dir.join(CONSENSUS_KEY),
            log: dir.join(LOG),
        }
    }

    /// The state file's contents, if tmkms has written it.
    pub fn state(&self) -> Option<String> {
        std::fs::read_to_string(&self.state_file).ok()
    }
}

fn write_secret(path: &Path, data: &[u8]) {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options
        .open(path)
        .and_then(|mut f| f.write_all(data))
        .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}

/// A running `tmkms start`; see the module docs. Dropping it kills the
/// process.
pub struct Tmkms {
    child: Option<Child>,
    /// Its output, appended over restarts of the same home.
    pub log: PathBuf,
    config: PathBuf,
    home: PathBuf,
    bin: PathBuf,
}

impl Tmkms {
    /// `bin start -v -c <home>/tmkms.toml`, its stdout and stderr appended
    /// to `home.log`.
    pub fn start(bin: &Path, home: &Home) -> Tmkms {
        let mut kms = Tmkms {
            child: None,
            log: home.log.clone(),
            config: home.config.clone(),
            home: home.dir.clone(),
            bin: bin.to_path_buf(),
        };
        kms.restart();
        kms
    }

    /// Start it again (killing it first if it runs), with the same home:
    /// its state file carries over.
    pub fn restart(&mut self) {
        self.kill();
        let log = File::options()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap_or_else(|e| panic!("opening {}: {e}", self.log.display()));
        let err = log.try_clone().unwrap();
        let child = Command::new(&self.bin)
            .arg("start")
            .arg("-v")
            .arg("-c")
            .arg(&self.config)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("{}: cannot start: {e}", self.bin.display()));
        self.child = Some(child);
    }

    /// Its process ID while it runs (to signal it).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Wait up to `limit` for it to exit (after a signal the caller sent):
    /// its status, or `None` if it still runs (it is left running).
    pub fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            let child = self.child.as_mut()?;
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kill it and reap it (nothing if it is not running).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Everything it has written so far, without its colour codes.
    pub fn log_text(&self) -> String {
        strip_ansi(&String::from_utf8_lossy(
            &std::fs::read(&self.log).unwrap_or_default(),
        ))
    }

    /// How many times its log holds `needle`.
    pub fn count_in_log(&self, needle: &str) -> usize {
        self.log_text().matches(needle).count()
    }

    /// Wait up to `timeout` until its log holds `needle` at least `times`
    /// times: whether it does. Fails if tmkms exits meanwhile.
    pub fn wait_for_log(&mut self, needle: &str, times: usize, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if self.count_in_log(needle) >= times {
                return true;
            }
            self.check_running(&format!("we waited for {needle:?} in its log"));
            if Instant::now() >= deadline {
                return false;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Fail at once, with its log, if it has exited.
    pub fn check_running(&mut self, doing: &str) {
        let exited = match self.child.as_mut() {
            Some(child) => child.try_wait().ok().flatten(),
            None => None,
        };
        if let Some(status) = exited {
            self.child = None;
            self.fail(&format!("exited ({status}) while {doing}"));
        }
    }

    /// Kill it and fail with `msg` and its log's last lines.
    pub fn fail(&mut self, msg: &str) -> ! {
        self.kill();
        panic!(
            "tmkms ({}): {msg}; last log lines:\n{}",
            self.config.display(),
            tail(&self.log_text(), 40)
        );
    }
}

impl Drop for Tmkms {
    fn drop(&mut self) {
        self.kill();
        if !thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.home);
        }
    }
}

/// `text` without ANSI escape sequences (`ESC [ ... letter`).
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        if chars.next() == Some('[') {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_names_every_file_and_quotes_strings() {
        let mut s = Settings::new(
            "test-chain",
            "tcp://0123456789abcdef0123456789abcdef01234567@127.0.0.1:1",
            [1; 32],
            [2; 32],
        );
        s.protocol_version = Some(ProtocolVersion::V038);
        s.timeout_secs = Some(3);
        s.max_height = Some(7);
        let toml = s.config_toml(Path::new("/h\"ome"));
        for line in [
            "id = \"test-chain\"",
            "chain_ids = [\"test-chain\"]",
            "protocol_version = \"v0.38\"",
            "timeout = 3",
            "max_height = \"7\"",
            "secret_key = \"/h\\\"ome/kms-identity.key\"",
            "path = \"/h\\\"ome/consensus.key\"",
            "state_file = \"/h\\\"ome/priv_validator_state.json\"",
            "sign_extensions = false",
        ] {
            assert!(toml.lines().any(|l| l == line), "no `{line}` in:\n{toml}");
        }
        let plain = Settings::new("c", "unix:///x", [1; 32], [2; 32]).config_toml(Path::new("/h"));
        assert!(!plain.contains("protocol_version"), "{plain}");
        assert!(!plain.contains("timeout"), "{plain}");
    }

    #[test]
    fn colour_codes_are_stripped() {
        let line = "\u{1b}[2m2026\u{1b}[0m \u{1b}[32m INFO\u{1b}[0m signed Prevote";
        assert_eq!(strip_ansi(line), "2026  INFO signed Prevote");
    }

    #[test]
    fn install_pins_the_version_and_its_own_folders() {
        let args = install_args();
        let joined = args.join(" ");
        assert!(
            joined.starts_with(&format!(
                "install tmkms --version ={VERSION} --features softsign --locked --debug --root "
            )),
            "{joined}"
        );
        assert_eq!(args[args.len() - 2], "--target-dir");
        assert_ne!(install_root(), build_dir());
        assert!(binary_path().starts_with(install_root()));
    }
}
