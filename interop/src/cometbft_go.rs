//! Builds and locates the CometBFT Go peer (`interop/cometbft-go`): CometBFT's
//! own `p2p/conn.SecretConnection` compiled at the versions nodes run.
//!
//! One Go source builds against two module files: `go.mod` (v1.0.1) and
//! `go.v0.38.mod` (v0.38.26), each with its committed `go.sum`. Binaries are
//! cached as `<target>/cometbft-go/<version>/cometbft-peer` and rebuilt when a
//! source or module file is newer. The Go build cache makes a rebuild cheap;
//! the first build downloads the modules through the Go module proxy.
//!
//! The CLI (`--baseline cometbft-go*`) and the interop tests both build
//! through this module, so they run the very same binaries.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

/// A CometBFT release the Go peer is built against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GoVersion {
    /// v1.0.1: `bufio` on both sides of the socket (one write per `Write`).
    V1,
    /// v0.38.26: one socket write per sealed frame, what most chains run.
    V038,
}

impl GoVersion {
    /// Every version the test suite runs against.
    #[allow(dead_code)]
    pub const ALL: [GoVersion; 2] = [GoVersion::V1, GoVersion::V038];

    /// The CometBFT module version, as the peer reports it.
    pub fn label(self) -> &'static str {
        match self {
            GoVersion::V1 => "v1.0.1",
            GoVersion::V038 => "v0.38.26",
        }
    }

    /// The module file (in the source folder) that pins this version.
    fn modfile(self) -> &'static str {
        match self {
            GoVersion::V1 => "go.mod",
            GoVersion::V038 => "go.v0.38.mod",
        }
    }

    fn sumfile(self) -> &'static str {
        match self {
            GoVersion::V1 => "go.sum",
            GoVersion::V038 => "go.v0.38.sum",
        }
    }
}

/// Why the Go peer is not available.
#[derive(Debug)]
pub enum BuildError {
    /// No `go` command on `PATH`.
    GoMissing,
    /// `go build` ran and failed, or its output could not be placed.
    Failed(String),
}

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BuildError::GoMissing => write!(
                f,
                "the Go toolchain (`go`) is not on PATH; install Go 1.23 or later"
            ),
            BuildError::Failed(why) => write!(f, "building CometBFT Go code failed: {why}"),
        }
    }
}

impl std::error::Error for BuildError {}

/// `interop/cometbft-go` in this checkout.
pub fn source_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("cometbft-go")
}

/// Where built peers go: `$CARGO_TARGET_DIR` if set, else the workspace's
/// `target/`.
fn cache_dir(version: GoVersion) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("cometbft-go").join(version.label())
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// The peer binary for `version`, built first if missing or stale.
pub fn build(version: GoVersion) -> Result<PathBuf, BuildError> {
    let src = source_dir();
    let out = cache_dir(version).join("cometbft-peer");
    let inputs = ["main.go", version.modfile(), version.sumfile()];
    let newest_input = inputs.iter().filter_map(|f| modified(&src.join(f))).max();
    if let (Some(built), Some(input)) = (modified(&out), newest_input) {
        if built >= input {
            return Ok(out);
        }
    }
    let dir = out
        .parent()
        .ok_or_else(|| BuildError::Failed("no cache folder".into()))?;
    std::fs::create_dir_all(dir)
        .map_err(|e| BuildError::Failed(format!("creating {}: {e}", dir.display())))?;
    // Build beside the final name, then rename: concurrent builders (test
    // binaries, a CLI run) never see a half-written file.
    let tmp = dir.join(format!("cometbft-peer.{}.tmp", std::process::id()));
    let result = Command::new("go")
        .current_dir(&src)
        .args(["build", "-trimpath", "-mod=readonly"])
        .arg(format!("-modfile={}", version.modfile()))
        .arg("-o")
        .arg(&tmp)
        .arg(".")
        // Use the installed toolchain; never download another one.
        .env("GOTOOLCHAIN", "local")
        .output();
    let output = match result {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(BuildError::GoMissing),
        Err(e) => return Err(BuildError::Failed(format!("running go: {e}"))),
        Ok(o) => o,
    };
    if !output.status.success() {
        let _ = std::fs::remove_file(&tmp);
        return Err(BuildError::Failed(format!(
            "go build ({}) in {}: {}",
            version.label(),
            src.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    std::fs::rename(&tmp, &out)
        .map_err(|e| BuildError::Failed(format!("placing {}: {e}", out.display())))?;
    Ok(out)
}
