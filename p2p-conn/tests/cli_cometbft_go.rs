//! The `p2p-conn` binary against CometBFT's own Go `SecretConnection`
//! (`interop/cometbft-go`, built against CometBFT v1.0.1 and v0.38.26), both
//! run as a user would: two processes over loopback TCP.
//!
//! For each Go version, `p2p-conn listen` with the Go peer dialing and
//! `p2p-conn dial ID@ADDR` with the Go peer listening. Keys cross over: the
//! Go peer loads a key written by `p2p-conn keygen`, and `p2p-conn` loads one
//! written by CometBFT's code (`cometbft-peer keygen`); both tools must
//! compute the same node ID for each file. Each side checks the other's ID
//! (`--peer-id` / `ID@ADDR` on ours, `-peer-id` on Go's) and prints
//! `peer <id>`.
//!
//! Data flows both ways with half-close, one side finishing well before the
//! other: in the listen tests Go's stdin stays open until Go has printed all
//! of ours (so `p2p-conn` has half-closed and must keep reading); in the dial
//! tests ours stays open until `p2p-conn` has printed all of Go's (so Go has
//! half-closed and must keep reading). Both must exit 0 with every byte
//! delivered.
//!
//! Without the Go toolchain each test prints a notice and passes, unless
//! `CI=true`, where it fails.

#[allow(dead_code)]
#[path = "../src/bin/p2p-conn/cometbft_go.rs"]
mod cometbft_go;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, OnceLock};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use cometbft_go::{BuildError, GoVersion};

const BIN: &str = env!("CARGO_BIN_EXE_p2p-conn");

/// Bound on every process of a test, from its start.
const LIMIT: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------
// The Go peer

fn built(version: GoVersion) -> &'static Result<PathBuf, BuildError> {
    static V1: OnceLock<Result<PathBuf, BuildError>> = OnceLock::new();
    static V038: OnceLock<Result<PathBuf, BuildError>> = OnceLock::new();
    let cell = match version {
        GoVersion::V1 => &V1,
        GoVersion::V038 => &V038,
    };
    cell.get_or_init(|| cometbft_go::build(version))
}

/// The Go peer for `version`, checked to report that CometBFT version; `None`
/// (after a notice) when Go is not installed, unless `CI=true`.
fn go_peer(version: GoVersion, test: &str) -> Option<PathBuf> {
    match built(version) {
        Ok(bin) => {
            let out = run_to_end(bin, &["version"]);
            assert_eq!(out.stdout_text(), version.label(), "{test}");
            Some(bin.clone())
        }
        Err(e @ BuildError::GoMissing) => {
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!("{test}: {e} (CI=true: the CometBFT Go interop tests must run)");
            }
            eprintln!("skipping {test}: {e}");
            None
        }
        Err(e @ BuildError::Failed(_)) => panic!("{test}: {e}"),
    }
}

// ---------------------------------------------------------------------------
// Processes

/// When a process gets its stdin.
enum Feed {
    /// All of it at once, then end of file.
    Now(Vec<u8>),
    /// All of it once the receiver fires (or after [`LIMIT`]), then end of
    /// file; until then stdin stays open and empty.
    After(mpsc::Receiver<()>, Vec<u8>),
}

/// A running process with its stdin fed and its stdout and stderr drained by
/// threads. Dropping it kills the process if it has not been waited for.
struct Proc {
    what: String,
    child: Child,
    waited: bool,
    stdout: Option<JoinHandle<Vec<u8>>>,
    stderr: Option<JoinHandle<Vec<String>>>,
    /// Each stderr line as it arrives (the drain thread keeps them all too).
    lines: mpsc::Receiver<String>,
}

struct Finished {
    status: ExitStatus,
    stdout: Vec<u8>,
    stderr: Vec<String>,
}

impl Finished {
    fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).trim().to_string()
    }
}

impl Proc {
    /// Start `bin args`; `seen` fires once the process has written that many
    /// bytes to stdout.
    fn spawn(
        bin: &Path,
        args: &[&str],
        feed: Feed,
        seen: Option<(usize, mpsc::Sender<()>)>,
    ) -> Proc {
        let name = bin.file_name().unwrap().to_string_lossy();
        let what = format!("{name} {}", args.join(" "));
        let mut child = Command::new(bin)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
        let mut input = child.stdin.take().unwrap();
        thread::spawn(move || {
            let data = match feed {
                Feed::Now(data) => data,
                Feed::After(go, data) => {
                    let _ = go.recv_timeout(LIMIT);
                    data
                }
            };
            // An early exit shows in the status and output; a broken pipe
            // here adds nothing.
            let _ = input.write_all(&data);
            // Dropping `input` ends the process's stdin.
        });
        let mut out = child.stdout.take().unwrap();
        let stdout = thread::spawn(move || {
            let mut all = Vec::new();
            let mut buf = vec![0u8; 64 * 1024];
            let mut seen = seen;
            loop {
                match out.read(&mut buf) {
                    Ok(0) | Err(_) => return all,
                    Ok(n) => all.extend_from_slice(&buf[..n]),
                }
                if let Some((at, tx)) = &seen {
                    if all.len() >= *at {
                        let _ = tx.send(());
                        seen = None;
                    }
                }
            }
        });
        let err = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::channel();
        let stderr = thread::spawn(move || {
            let mut all = Vec::new();
            for line in BufReader::new(err).lines() {
                let Ok(line) = line else { break };
                let _ = tx.send(line.clone());
                all.push(line);
            }
            all
        });
        Proc {
            what,
            child,
            waited: false,
            stdout: Some(stdout),
            stderr: Some(stderr),
            lines,
        }
    }

    /// Kill the process and fail with `msg` and everything it wrote on
    /// stderr.
    fn fail(&mut self, msg: &str) -> ! {
        let _ = self.child.kill();
        let status = self.child.wait();
        self.waited = true;
        let stderr = self.stderr.take().map(|h| h.join().unwrap_or_default());
        panic!(
            "{}: {msg}; status {status:?}; stderr: {:?}",
            self.what,
            stderr.unwrap_or_default()
        );
    }

    /// The next stderr line, by `deadline`.
    fn next_line(&mut self, deadline: Instant) -> String {
        match self
            .lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            Ok(line) => line,
            Err(mpsc::RecvTimeoutError::Timeout) => self.fail("no stderr line in time"),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                self.fail("closed stderr before the expected line")
            }
        }
    }

    /// Wait for the exit by `deadline` (killing the process and failing
    /// otherwise) and collect the output.
    fn finish(mut self, deadline: Instant) -> Finished {
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(5)),
                Ok(None) => self.fail("still running at the deadline"),
                Err(e) => self.fail(&format!("wait failed: {e}")),
            }
        };
        self.waited = true;
        Finished {
            status,
            stdout: self.stdout.take().unwrap().join().unwrap(),
            stderr: self.stderr.take().unwrap().join().unwrap(),
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if !self.waited {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Run a short command that must exit 0.
fn run_to_end(bin: &Path, args: &[&str]) -> Finished {
    let proc = Proc::spawn(bin, args, Feed::Now(Vec::new()), None);
    let what = proc.what.clone();
    let out = proc.finish(Instant::now() + LIMIT);
    assert!(
        out.status.success(),
        "{what}: exited {}; stderr: {:?}",
        out.status,
        out.stderr
    );
    out
}

fn check_ok(what: &str, out: &Finished) {
    assert!(
        out.status.success(),
        "{what} exited {}; stderr: {:?}",
        out.status,
        out.stderr
    );
}

/// Check `got` byte for byte, naming the first bad offset.
fn check_bytes(what: &str, got: &[u8], expected: &[u8]) {
    if got == expected {
        return;
    }
    let at = got
        .iter()
        .zip(expected)
        .position(|(a, b)| a != b)
        .unwrap_or(got.len().min(expected.len()));
    let show = |b: &[u8]| format!("{:02x?}", &b[at.min(b.len())..(at + 16).min(b.len())]);
    panic!(
        "{what}: got {} bytes, expected {}; first difference at byte {at}: got {} expected {}",
        got.len(),
        expected.len(),
        show(got),
        show(expected),
    );
}

/// `len` SplitMix64 bytes from `seed`.
fn pseudo_random(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out.truncate(len);
    out
}

fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("p2p-conn-cli-go-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Whether something listens on 127.0.0.1:`port`. A probe connection would
/// be accepted as the listener's one connection, so on Linux this reads
/// `/proc/net/tcp` (a socket in state 0A, LISTEN); elsewhere it tries to
/// bind the port, which can race with the listener's own bind.
fn listening(port: u16) -> bool {
    match std::fs::read_to_string("/proc/net/tcp") {
        Ok(table) => {
            let local = format!("0100007F:{port:04X}");
            table.lines().skip(1).any(|line| {
                let mut fields = line.split_whitespace().skip(1);
                fields.next() == Some(local.as_str()) && fields.nth(1) == Some("0A")
            })
        }
        Err(_) => std::net::TcpListener::bind(("127.0.0.1", port)).is_err(),
    }
}

/// Wait until the listener listens on `port`.
fn wait_bound(port: u16, listener: &mut Proc, deadline: Instant) {
    while !listening(port) {
        if let Ok(Some(status)) = listener.child.try_wait() {
            listener.fail(&format!("exited ({status}) before binding port {port}"));
        }
        if Instant::now() >= deadline {
            listener.fail(&format!("never bound port {port}"));
        }
        thread::sleep(Duration::from_millis(10));
    }
}

// ---------------------------------------------------------------------------
// Keys

/// Two key files, each loaded by the other tool.
struct Keys {
    /// Written by `p2p-conn keygen`; the Go peer loads it.
    for_go: PathBuf,
    /// Its node ID (both tools agree).
    go_id: String,
    /// Written by `cometbft-peer keygen` (CometBFT's `LoadOrGenNodeKey`);
    /// `p2p-conn` loads it.
    for_us: PathBuf,
    /// Its node ID (both tools agree).
    our_id: String,
}

fn keys(go: &Path, dir: &Path) -> Keys {
    let bin = Path::new(BIN);
    let for_go = dir.join("written_by_p2p_conn.json");
    let for_us = dir.join("written_by_cometbft.json");
    let (g, u) = (for_go.to_str().unwrap(), for_us.to_str().unwrap());

    let go_id = run_to_end(bin, &["keygen", "--out", g]).stdout_text();
    assert_eq!(go_id.len(), 40, "p2p-conn keygen printed {go_id:?}");
    assert_eq!(run_to_end(bin, &["id", "--key", g]).stdout_text(), go_id);
    assert_eq!(
        run_to_end(go, &["id", g]).stdout_text(),
        go_id,
        "CometBFT computes another ID for a key written by p2p-conn keygen"
    );

    let our_id = run_to_end(go, &["keygen", u]).stdout_text();
    assert_eq!(our_id.len(), 40, "cometbft-peer keygen printed {our_id:?}");
    assert_eq!(run_to_end(go, &["id", u]).stdout_text(), our_id);
    assert_eq!(
        run_to_end(bin, &["id", "--key", u]).stdout_text(),
        our_id,
        "p2p-conn computes another ID for a key written by CometBFT"
    );
    assert_ne!(go_id, our_id);
    Keys {
        for_go,
        go_id,
        for_us,
        our_id,
    }
}

// ---------------------------------------------------------------------------
// Exchanges

/// `p2p-conn listen` with the Go peer dialing (`-chunk chunk`). Go's stdin
/// stays open until Go has printed all of ours.
fn cli_listens(version: GoVersion, test: &str, chunk: usize) {
    let Some(go) = go_peer(version, test) else {
        return;
    };
    let dir = scratch(test);
    let k = keys(&go, &dir);
    let ours = pseudo_random((2 << 20) + 77, 0xA5 ^ version as u64);
    let theirs = pseudo_random((2 << 20) + 1001, 0x5A ^ version as u64);
    let deadline = Instant::now() + LIMIT;

    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let for_us = k.for_us.to_str().unwrap();
    let mut us = Proc::spawn(
        Path::new(BIN),
        &["listen", &addr, "--key", for_us, "--peer-id", &k.go_id],
        Feed::Now(ours.clone()),
        None,
    );
    wait_bound(port, &mut us, deadline);
    let (seen_tx, seen) = mpsc::channel();
    let chunk = chunk.to_string();
    let them = Proc::spawn(
        &go,
        &[
            "dial",
            "-key",
            k.for_go.to_str().unwrap(),
            "-chunk",
            &chunk,
            "-peer-id",
            &k.our_id,
            &addr,
        ],
        Feed::After(seen, theirs.clone()),
        Some((ours.len(), seen_tx)),
    );
    let (them_what, us_what) = (them.what.clone(), us.what.clone());
    let them = them.finish(deadline);
    check_ok(&them_what, &them);
    let us = us.finish(deadline);
    check_ok(&us_what, &us);
    assert_eq!(us.stderr, [format!("peer {}", k.go_id)], "{test}: ours");
    assert_eq!(them.stderr, [format!("peer {}", k.our_id)], "{test}: Go's");
    check_bytes(&format!("{test}: Go printed"), &them.stdout, &ours);
    check_bytes(&format!("{test}: p2p-conn printed"), &us.stdout, &theirs);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `p2p-conn dial ID@ADDR` with the Go peer listening (`-chunk chunk`). Our
/// stdin stays open until `p2p-conn` has printed all of Go's.
fn cli_dials(version: GoVersion, test: &str, chunk: usize) {
    let Some(go) = go_peer(version, test) else {
        return;
    };
    let dir = scratch(test);
    let k = keys(&go, &dir);
    let ours = pseudo_random((3 << 20) + 5, 0xC3 ^ version as u64);
    let theirs = pseudo_random((2 << 20) + 1001, 0x3C ^ version as u64);
    let deadline = Instant::now() + LIMIT;

    let chunk = chunk.to_string();
    let mut them = Proc::spawn(
        &go,
        &[
            "listen",
            "-key",
            k.for_go.to_str().unwrap(),
            "-chunk",
            &chunk,
            "-peer-id",
            &k.our_id,
            "127.0.0.1:0",
        ],
        Feed::Now(theirs.clone()),
        None,
    );
    let line = them.next_line(deadline);
    let Some(addr) = line.strip_prefix("listening ") else {
        them.fail(&format!(
            "first stderr line is {line:?}, not `listening ADDR`"
        ))
    };
    let target = format!("{}@{addr}", k.go_id);
    let (seen_tx, seen) = mpsc::channel();
    let us = Proc::spawn(
        Path::new(BIN),
        &["dial", &target, "--key", k.for_us.to_str().unwrap()],
        Feed::After(seen, ours.clone()),
        Some((theirs.len(), seen_tx)),
    );
    // Go first: if it fails, its error is the story (and dropping `us`
    // kills p2p-conn, which would wait for its stdin).
    let (them_what, us_what) = (them.what.clone(), us.what.clone());
    let them = them.finish(deadline);
    check_ok(&them_what, &them);
    let us = us.finish(deadline);
    check_ok(&us_what, &us);
    assert_eq!(us.stderr, [format!("peer {}", k.go_id)], "{test}: ours");
    assert_eq!(
        them.stderr,
        [line.clone(), format!("peer {}", k.our_id)],
        "{test}: Go's"
    );
    check_bytes(&format!("{test}: Go printed"), &them.stdout, &ours);
    check_bytes(&format!("{test}: p2p-conn printed"), &us.stdout, &theirs);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn v1_cli_listens_go_dials() {
    cli_listens(GoVersion::V1, "v1_cli_listens_go_dials", 1025);
}

#[test]
fn v038_cli_listens_go_dials() {
    cli_listens(GoVersion::V038, "v038_cli_listens_go_dials", 1025);
}

#[test]
fn v1_cli_dials_go_listens() {
    cli_dials(GoVersion::V1, "v1_cli_dials_go_listens", 1 << 20);
}

#[test]
fn v038_cli_dials_go_listens() {
    cli_dials(GoVersion::V038, "v038_cli_dials_go_listens", 1 << 20);
}

/// The readiness probe the listen tests rely on.
#[test]
fn listening_probe_sees_a_listener() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    assert!(listening(port));
    drop(listener);
    // A process another test is spawning right now may hold a copy of the
    // socket until it execs (close-on-exec), so give it a moment.
    let start = Instant::now();
    while listening(port) {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "port {port} still listening"
        );
        thread::sleep(Duration::from_millis(5));
    }
}
