//! CometBFT's Go peer (`interop/cometbft-go`) for the interop tests, built by
//! [`crate::cometbft_go`], the CLI's own builder, so the CLI and the tests
//! run the very same binaries: once per test binary and version, checked to
//! report its CometBFT version. Without the Go toolchain [`go_peer`] prints a
//! notice and the test passes, unless `CI=true`, where it fails.

use std::ffi::OsStr;
use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use p2p_conn::NodeId;

use crate::cometbft_go;
pub use crate::cometbft_go::{BuildError, GoVersion};
use crate::process::{run_ok, Feed, Proc};

/// Bound on the Go peer's short subcommands (`keygen`, `id`, `version`).
pub const SHORT_RUN: Duration = Duration::from_secs(30);

/// The Go peer binary for `version`, built once per test binary.
fn built(version: GoVersion) -> &'static Result<PathBuf, BuildError> {
    static BUILT: [OnceLock<Result<PathBuf, BuildError>>; GoVersion::ALL.len()] =
        [const { OnceLock::new() }; GoVersion::ALL.len()];
    BUILT[version.index()].get_or_init(|| cometbft_go::build(version))
}

/// The Go peer for `version`, checked to report that CometBFT version; `None`
/// (after a notice) when Go is not installed, unless `CI=true`.
pub fn go_peer(version: GoVersion, test: &str) -> Option<PathBuf> {
    match built(version) {
        Ok(bin) => {
            let out = run_ok(bin, &["version"], SHORT_RUN);
            assert_eq!(
                out.stdout_text(),
                version.label(),
                "{test}: the Go peer reports another CometBFT version"
            );
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

/// A node key written by CometBFT's own code (`cometbft-peer keygen`) at
/// `path`, and the node ID CometBFT computes for it: `keygen` and `id` must
/// print the same ID, in its canonical (lowercase hex) form.
pub fn go_keygen(bin: &Path, path: &Path) -> NodeId {
    let made = run_ok(bin, &[OsStr::new("keygen"), path.as_os_str()], SHORT_RUN).stdout_text();
    let id = run_ok(bin, &[OsStr::new("id"), path.as_os_str()], SHORT_RUN).stdout_text();
    assert_eq!(made, id, "cometbft-peer keygen and id disagree");
    let parsed: NodeId = id
        .parse()
        .unwrap_or_else(|e| panic!("cometbft-peer id printed {id:?}: {e}"));
    assert_eq!(parsed.to_string(), id, "cometbft-peer id is not canonical");
    parsed
}

/// `cometbft-peer dial <args> <addr>`.
pub fn go_dial<S: AsRef<OsStr>>(bin: &Path, args: &[S], addr: &str, feed: Feed) -> Proc {
    let mut all = vec![OsStr::new("dial")];
    all.extend(args.iter().map(AsRef::as_ref));
    all.push(OsStr::new(addr));
    Proc::spawn(bin, &all, feed)
}

/// `cometbft-peer listen <args> 127.0.0.1:0`, and the address it listens on,
/// read from its first stderr line (`listening ADDR`, see [`listening_line`])
/// by `deadline`.
pub fn go_listen<S: AsRef<OsStr>>(
    bin: &Path,
    args: &[S],
    feed: Feed,
    deadline: Instant,
) -> (Proc, String) {
    go_listen_as(bin, &["listen"], args, feed, deadline)
}

/// [`go_listen`] for any listening subcommand (`subcommand`, such as
/// `["mconn", "listen"]`, then `args`, then `127.0.0.1:0`).
pub fn go_listen_as<S: AsRef<OsStr>>(
    bin: &Path,
    subcommand: &[&str],
    args: &[S],
    feed: Feed,
    deadline: Instant,
) -> (Proc, String) {
    let mut all: Vec<&OsStr> = subcommand.iter().map(OsStr::new).collect();
    all.extend(args.iter().map(AsRef::as_ref));
    all.push(OsStr::new("127.0.0.1:0"));
    let mut peer = Proc::spawn(bin, &all, feed);
    let line = peer.next_line(deadline);
    match line.strip_prefix("listening ") {
        Some(addr) => {
            let addr = addr.to_string();
            (peer, addr)
        }
        None => peer.fail(&format!(
            "first stderr line is {line:?}, not `listening ADDR`"
        )),
    }
}

/// The Go peer's stderr line once it listens on `addr`.
pub fn listening_line(addr: &str) -> String {
    format!("listening {addr}")
}

/// The stderr line each side (the Go peer, `p2p-conn`) prints after the
/// handshake, naming the other's node ID.
pub fn peer_line(id: impl Display) -> String {
    format!("peer {id}")
}
