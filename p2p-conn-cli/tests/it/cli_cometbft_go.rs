//! The `p2p-conn` binary against CometBFT's own Go `SecretConnection`
//! (`interop/cometbft-go`, built at every line the suite proves: v0.34.35,
//! v0.37.18, v0.38.26, v0.39.4, v0.40.0 and v1.0.1), both run as a user
//! would: two processes over loopback TCP.
//!
//! For each Go version (a module per line: `v0_39::cli_listens_go_dials`),
//! `p2p-conn listen` with the Go peer dialing and `p2p-conn dial ID@ADDR`
//! with the Go peer listening. Keys cross over: the
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

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::check_bytes;
use crate::common::go_peer::{
    go_dial, go_keygen, go_listen, go_peer, listening_line, peer_line, GoVersion,
};
use crate::common::payload;
use crate::common::process::{free_port, run_ok, scratch, Feed, Proc};

const BIN: &str = env!("CARGO_BIN_EXE_p2p-conn");

/// Bound on every process of a test, from its start.
const LIMIT: Duration = Duration::from_secs(30);

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

impl Keys {
    /// The Go peer's flags: our key for it, `-chunk chunk`, and our ID to
    /// check.
    fn go_args(&self, chunk: usize) -> [String; 6] {
        [
            "-key".into(),
            self.for_go.to_str().unwrap().into(),
            "-chunk".into(),
            chunk.to_string(),
            "-peer-id".into(),
            self.our_id.clone(),
        ]
    }
}

fn keys(go: &Path, dir: &Path) -> Keys {
    let bin = Path::new(BIN);
    let for_go = dir.join("written_by_p2p_conn.json");
    let for_us = dir.join("written_by_cometbft.json");
    let (g, u) = (for_go.to_str().unwrap(), for_us.to_str().unwrap());

    let go_id = run_ok(bin, &["keygen", "--out", g], LIMIT).stdout_text();
    assert_eq!(go_id.len(), 40, "p2p-conn keygen printed {go_id:?}");
    assert_eq!(run_ok(bin, &["id", "--key", g], LIMIT).stdout_text(), go_id);
    assert_eq!(
        run_ok(go, &["id", g], LIMIT).stdout_text(),
        go_id,
        "CometBFT computes another ID for a key written by p2p-conn keygen"
    );

    // `keygen` and `id` agree (checked there).
    let our_id = go_keygen(go, &for_us).to_string();
    assert_eq!(
        run_ok(bin, &["id", "--key", u], LIMIT).stdout_text(),
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
    let dir = scratch(&test.replace("::", "-"));
    let k = keys(&go, &dir);
    let ours = payload((2 << 20) + 77, 0xA5 ^ version as u64);
    let theirs = payload((2 << 20) + 1001, 0x5A ^ version as u64);
    let deadline = Instant::now() + LIMIT;

    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let for_us = k.for_us.to_str().unwrap();
    let mut us = Proc::spawn(
        Path::new(BIN),
        &["listen", &addr, "--key", for_us, "--peer-id", &k.go_id],
        Feed::Now(ours.clone()),
    );
    us.wait_listening(port, deadline);
    let them = go_dial(
        &go,
        &k.go_args(chunk),
        &addr,
        Feed::AfterOutput(ours.len(), theirs.clone()),
    );
    let them = them.finish_ok(deadline);
    let us = us.finish_ok(deadline);
    assert_eq!(
        us.stderr_lines(),
        [listening_line(&addr), peer_line(&k.go_id)],
        "{test}: ours"
    );
    assert_eq!(them.stderr_lines(), [peer_line(&k.our_id)], "{test}: Go's");
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
    let dir = scratch(&test.replace("::", "-"));
    let k = keys(&go, &dir);
    let ours = payload((3 << 20) + 5, 0xC3 ^ version as u64);
    let theirs = payload((2 << 20) + 1001, 0x3C ^ version as u64);
    let deadline = Instant::now() + LIMIT;

    let (them, addr) = go_listen(&go, &k.go_args(chunk), Feed::Now(theirs.clone()), deadline);
    let target = format!("{}@{addr}", k.go_id);
    let us = Proc::spawn(
        Path::new(BIN),
        &["dial", &target, "--key", k.for_us.to_str().unwrap()],
        Feed::AfterOutput(theirs.len(), ours.clone()),
    );
    // Go first: if it fails, its error is the story (and dropping `us`
    // kills p2p-conn, which would wait for its stdin).
    let them = them.finish_ok(deadline);
    let us = us.finish_ok(deadline);
    assert_eq!(us.stderr_lines(), [peer_line(&k.go_id)], "{test}: ours");
    assert_eq!(
        them.stderr_lines(),
        [listening_line(&addr), peer_line(&k.our_id)],
        "{test}: Go's"
    );
    check_bytes(&format!("{test}: Go printed"), &them.stdout, &ours);
    check_bytes(&format!("{test}: p2p-conn printed"), &us.stdout, &theirs);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `p2p-conn listen`, Go dialing and writing 1025-byte chunks.
fn cli_listens_go_dials(version: GoVersion, test: &str) {
    cli_listens(version, test, 1025);
}

/// `p2p-conn dial`, Go listening and writing 1 MiB chunks.
fn cli_dials_go_listens(version: GoVersion, test: &str) {
    cli_dials(version, test, 1 << 20);
}

/// CometBFT v1.0.1's Go peer dials `p2p-conn listen --count-io` and sends
/// 16 MiB in 64 KiB writes: every byte arrives, and the listener's stdout
/// takes at most one write(2) per 32 KiB on average (it gathers the frames
/// ready; the old loop wrote each 1 KiB frame alone: 16384 writes).
#[test]
fn go_sends_cli_writes_stdout_in_large_chunks() {
    let test = "go_sends_cli_writes_stdout_in_large_chunks";
    let Some(go) = go_peer(GoVersion::V1, test) else {
        return;
    };
    const BYTES: usize = 16 << 20;
    let data = payload(BYTES, 0x16);
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut us = Proc::spawn(
        Path::new(BIN),
        &["listen", "127.0.0.1:0", "--count-io"],
        Feed::none(),
    );
    let line = us.next_line(deadline);
    let addr = line
        .strip_prefix("listening ")
        .unwrap_or_else(|| us.fail(&format!("first line {line:?}")))
        .to_string();
    let them = go_dial(&go, &["-chunk", "65536"], &addr, Feed::Now(data.clone()));
    them.finish_ok(deadline);
    let us = us.finish_ok(deadline);
    check_bytes(&format!("{test}: p2p-conn printed"), &us.stdout, &data);
    let lines = us.stderr_lines();
    let io = lines
        .iter()
        .find(|l| l.starts_with("io "))
        .unwrap_or_else(|| panic!("{test}: no io line: {lines:?}"));
    let writes: usize = io
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("stdout-writes="))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{test}: {io}"));
    assert!(writes <= BYTES / (32 << 10), "{test}: {io}");
    assert!(
        io.contains(&format!("stdout-bytes={BYTES}")),
        "{test}: {io}"
    );
}

p2p_conn_interop::per_release! {
    v0_34: V034, v0_37: V037, v0_38: V038, v0_39: V039, v0_40: V040, v1: V1;
    [
        cli_listens_go_dials,
        cli_dials_go_listens,
    ]
}
