//! Builds and locates the CometBFT Go peer (`interop/cometbft-go`): CometBFT's
//! own `p2p/conn.SecretConnection` compiled at every release line the test
//! suite proves ([`GoVersion::ALL`]: v0.34.35, v0.37.18, v0.38.26, v0.39.4,
//! v0.40.0 and v1.0.1).
//!
//! One Go source builds against one module file per line (`go.mod` for
//! v1.0.1, `go.v0.NN.mod` for the others), each with its committed checksum
//! file; v0.34.35 also needs the build tag `cometbft_v034`, which swaps
//! `cometbft.go` for `compat_v034.go` (Tendermint's import paths), and
//! v0.37.18 the tag `cometbft_v037`. Both lines have no vote extensions to
//! sign, so their tags also pick `signbytes_noext.go` over
//! `signbytes_ext.go` (`VoteExtensionSignBytes`, from v0.38). v1.0.1 builds
//! with `cometbft_v1`, which picks `privval_v1.go` (its privval messages are
//! in the api module, and its `PrivValidator` signs extensions on request)
//! over `privval_v0.go`; v0.34.35's tag picks `privval_v034.go`. Those two
//! only name what `privval_filepv.go`, one text for v0.34.35 to v0.40.0,
//! uses of the line's `privval` package. v0.40.0 builds with
//! `cometbft_v040`, which picks `privval_noise.go` (`noise://`: CometBFT's
//! `NoiseListener`, and go-libp2p's Noise transport on the signer side)
//! over `privval_nonoise.go`. The remote-signer modes (`privval_remote.go`, driven by
//! [`crate::privval_peer`]) build at every line. Binaries
//! are cached as `<target>/cometbft-go/<version>/cometbft-peer` and rebuilt
//! when a file the line's build reads ([`GoVersion::inputs`]) is newer. The
//! Go build cache makes a rebuild cheap; the first build downloads the
//! modules through the Go module proxy.
//!
//! The lab (`p2p-conn-lab bench --baseline cometbft-go*`) and the interop
//! tests build through this module, so they run the very same binaries.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

use p2p_conn_releases::Release;

/// A CometBFT release the Go peer (and a real node, see
/// [`crate::cometbft_node`]) is built at: the newest release of each line,
/// one variant per row of [`p2p_conn_releases::ALL`] (in its order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GoVersion {
    /// v0.34.35: module `github.com/tendermint/tendermint` (replaced by
    /// `github.com/cometbft/cometbft v0.34.35`); one socket write per sealed
    /// frame, frame buffers from `go-buffer-pool`.
    V034,
    /// v0.37.18: one socket write per sealed frame. Its node announces
    /// version 0.37.16.
    V037,
    /// v0.38.26: one socket write per sealed frame, what most chains run.
    V038,
    /// v0.39.4: v1.0.1's `bufio` writer and reader, backported.
    V039,
    /// v0.40.0: as v0.39.4 (the same `secret_connection.go`). Its node
    /// announces version 0.39.0.
    V040,
    /// v1.0.1: `bufio` on both sides of the socket (one write per `Write`);
    /// P2P protocol 9.
    V1,
}

/// What differs between the Go builds of the lines, one row per
/// [`GoVersion`] (in its order, the order of [`p2p_conn_releases::ALL`],
/// which says what each release is).
struct GoBuild {
    modfile: &'static str,
    sumfile: &'static str,
    tags: Option<&'static str>,
    /// The file with the line's import paths (the build tag picks it).
    api: &'static str,
    /// The file with `VoteExtensionSignBytes`, or its absence before v0.38
    /// (the build tag picks it).
    extension: &'static str,
    /// The file with the line's privval `Message` type and what the
    /// remote-signer modes use of its privval package (the build tag picks
    /// it).
    privval: &'static str,
    /// `privval_noise.go` (v0.40.0) or `privval_nonoise.go`.
    noise: &'static str,
    buffered: bool,
}

const GO_BUILDS: [GoBuild; p2p_conn_releases::ALL.len()] = [
    GoBuild {
        modfile: "go.v0.34.mod",
        sumfile: "go.v0.34.sum",
        tags: Some("cometbft_v034"),
        api: "compat_v034.go",
        extension: "signbytes_noext.go",
        privval: "privval_v034.go",
        noise: "privval_nonoise.go",
        buffered: false,
    },
    GoBuild {
        modfile: "go.v0.37.mod",
        sumfile: "go.v0.37.sum",
        tags: Some("cometbft_v037"),
        api: "cometbft.go",
        extension: "signbytes_noext.go",
        privval: "privval_v0.go",
        noise: "privval_nonoise.go",
        buffered: false,
    },
    GoBuild {
        modfile: "go.v0.38.mod",
        sumfile: "go.v0.38.sum",
        tags: None,
        api: "cometbft.go",
        extension: "signbytes_ext.go",
        privval: "privval_v0.go",
        noise: "privval_nonoise.go",
        buffered: false,
    },
    GoBuild {
        modfile: "go.v0.39.mod",
        sumfile: "go.v0.39.sum",
        tags: None,
        api: "cometbft.go",
        extension: "signbytes_ext.go",
        privval: "privval_v0.go",
        noise: "privval_nonoise.go",
        buffered: true,
    },
    GoBuild {
        modfile: "go.v0.40.mod",
        sumfile: "go.v0.40.sum",
        // Picks privval_noise.go (noise:// remote signing).
        tags: Some("cometbft_v040"),
        api: "cometbft.go",
        extension: "signbytes_ext.go",
        privval: "privval_v0.go",
        noise: "privval_noise.go",
        buffered: true,
    },
    GoBuild {
        modfile: "go.mod",
        sumfile: "go.sum",
        tags: Some("cometbft_v1"),
        api: "cometbft.go",
        extension: "signbytes_ext.go",
        privval: "privval_v1.go",
        noise: "privval_nonoise.go",
        buffered: true,
    },
];

impl GoVersion {
    /// Every version the test suite runs against, oldest first: one per
    /// row of [`p2p_conn_releases::ALL`].
    pub const ALL: [GoVersion; p2p_conn_releases::ALL.len()] = [
        GoVersion::V034,
        GoVersion::V037,
        GoVersion::V038,
        GoVersion::V039,
        GoVersion::V040,
        GoVersion::V1,
    ];

    /// Its place in [`ALL`](Self::ALL), for per-version tables.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// What this release is: its label, line, announced version and P2P
    /// protocol ([`p2p_conn_releases`], the one list of them).
    pub fn release(self) -> &'static Release {
        &p2p_conn_releases::ALL[self.index()]
    }

    fn row(self) -> &'static GoBuild {
        &GO_BUILDS[self.index()]
    }

    /// The CometBFT module version, as the peer reports it: `v0.38.26`.
    pub fn label(self) -> &'static str {
        self.release().label
    }

    /// The release line: `v0.34`, `v0.37`, `v0.38`, `v0.39`, `v0.40`, `v1`.
    pub fn line(self) -> &'static str {
        self.release().line
    }

    /// The version a node of this release announces in its NodeInfo
    /// ([`Release::announces`]).
    pub fn announces(self) -> &'static str {
        self.release().announces
    }

    /// The P2P protocol version in its NodeInfo: 9 at v1.0.1, 8 before.
    pub fn p2p_protocol(self) -> u64 {
        self.release().p2p_protocol
    }

    /// Whether its `SecretConnection` buffers the socket (`bufio`: one
    /// socket write per `Write` call; v0.39.4, v0.40.0, v1.0.1) rather than
    /// writing each sealed frame on its own.
    pub fn buffered(self) -> bool {
        self.row().buffered
    }

    /// The module file (in the source folder) that pins this version.
    pub fn modfile(self) -> &'static str {
        self.row().modfile
    }

    /// The build tags this version needs (`-tags`), if any.
    pub fn tags(self) -> Option<&'static str> {
        self.row().tags
    }

    /// Every file (in the source folder) this version's build reads: the
    /// program and its MConnection mode, the file with the line's import paths, the file with (or
    /// without) `VoteExtensionSignBytes` and the vote extension fields, the
    /// file with its privval `Message` and privval package, the
    /// remote-signer modes and their FilePV part (v0.34.35 to v0.40.0;
    /// listed at v1.0.1 too, which builds `privval_v1.go` instead), the
    /// module and checksum files, the MConnection benchmark mode, the
    /// `noise://` file (v0.40.0's, or the others' stub), and one file per
    /// other subcommand.
    pub fn inputs(self) -> [&'static str; 19] {
        let row = self.row();
        [
            "main.go",
            "mconn.go",
            row.api,
            row.extension,
            row.privval,
            "privval_remote.go",
            "privval_filepv.go",
            row.modfile,
            row.sumfile,
            "mconn_bench.go",
            "peer.go",
            "keygen.go",
            "bench.go",
            "handshake.go",
            "hold.go",
            "signbytes.go",
            "privval_reencode.go",
            "privval_handle.go",
            row.noise,
        ]
    }

    /// The `go build` / `go vet` flags that select this version:
    /// `-modfile=...` and, at v0.34, v0.37, v0.40 and v1,
    /// `-tags=cometbft_v034`, `-tags=cometbft_v037`, `-tags=cometbft_v040`
    /// or `-tags=cometbft_v1`.
    pub fn go_flags(self) -> Vec<String> {
        let mut flags = vec![format!("-modfile={}", self.modfile())];
        flags.extend(self.tags().map(|t| format!("-tags={t}")));
        flags
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
                "the Go toolchain (`go`) is not on PATH; install Go 1.25 or later"
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

/// Where built binaries go: `$CARGO_TARGET_DIR` if set, else the
/// workspace's `target/`.
pub(crate) fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Whether `out` exists and is at least as new as every one of `inputs`
/// (in `dir`) that exists.
pub(crate) fn up_to_date(out: &Path, dir: &Path, inputs: &[&str]) -> bool {
    let newest_input = inputs.iter().filter_map(|f| modified(&dir.join(f))).max();
    match (modified(out), newest_input) {
        (Some(built), Some(input)) => built >= input,
        (Some(_), None) => true,
        (None, _) => false,
    }
}

/// Run `go build <args>` in `dir` (`GOTOOLCHAIN=local`: the installed
/// toolchain, never a downloaded one), writing its binary to `out` through
/// a temporary file beside it: concurrent builders (test binaries, a CLI
/// run) never see a half-written file. `what` names the build in errors.
pub(crate) fn go_build(
    dir: &Path,
    args: &[&str],
    out: &Path,
    what: &str,
) -> Result<(), BuildError> {
    let folder = out
        .parent()
        .ok_or_else(|| BuildError::Failed(format!("{what}: no cache folder")))?;
    std::fs::create_dir_all(folder)
        .map_err(|e| BuildError::Failed(format!("{what}: creating {}: {e}", folder.display())))?;
    let name = out.file_name().unwrap_or_default().to_string_lossy();
    let tmp = folder.join(format!("{name}.{}.tmp", std::process::id()));
    let result = Command::new("go")
        .current_dir(dir)
        .arg("build")
        .arg("-o")
        .arg(&tmp)
        .args(args)
        .env("GOTOOLCHAIN", "local")
        .stdin(std::process::Stdio::null())
        .output();
    let output = match result {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(BuildError::GoMissing),
        Err(e) => return Err(BuildError::Failed(format!("{what}: running go: {e}"))),
        Ok(o) => o,
    };
    if !output.status.success() {
        let _ = std::fs::remove_file(&tmp);
        return Err(BuildError::Failed(format!(
            "{what}: go build {} in {} ({}): {}",
            args.join(" "),
            dir.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    std::fs::rename(&tmp, out)
        .map_err(|e| BuildError::Failed(format!("{what}: placing {}: {e}", out.display())))
}

/// `<target>/cometbft-go/<version>/cometbft-peer`.
pub fn binary_path(version: GoVersion) -> PathBuf {
    target_dir()
        .join("cometbft-go")
        .join(version.label())
        .join("cometbft-peer")
}

/// Whether the peer binary for `version` is there and no older than its
/// sources: whether [`build`] would return at once, without running `go`.
pub fn is_built(version: GoVersion) -> bool {
    up_to_date(&binary_path(version), &source_dir(), &version.inputs())
}

/// The peer binary for `version`, built first if missing or stale.
pub fn build(version: GoVersion) -> Result<PathBuf, BuildError> {
    let src = source_dir();
    let out = binary_path(version);
    if is_built(version) {
        return Ok(out);
    }
    let flags = version.go_flags();
    let mut args = vec!["-trimpath", "-mod=readonly"];
    args.extend(flags.iter().map(String::as_str));
    args.push(".");
    go_build(
        &src,
        &args,
        &out,
        &format!("the Go peer at {}", version.label()),
    )?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every line's files are in the source folder, and each line has its
    /// own module file and label.
    #[test]
    fn every_line_has_its_files() {
        let src = source_dir();
        let mut seen = std::collections::HashSet::new();
        for (i, v) in GoVersion::ALL.into_iter().enumerate() {
            assert_eq!(v.index(), i);
            for f in v.inputs() {
                assert!(src.join(f).is_file(), "{}: no {f}", v.label());
            }
            assert!(seen.insert(v.modfile()), "{}", v.label());
            assert!(v.label().starts_with(v.line()), "{}", v.label());
        }
        assert_eq!(GoVersion::V034.inputs()[2], "compat_v034.go");
        assert_eq!(
            GoVersion::V034.go_flags(),
            ["-modfile=go.v0.34.mod", "-tags=cometbft_v034"]
        );
        assert_eq!(
            GoVersion::V037.go_flags(),
            ["-modfile=go.v0.37.mod", "-tags=cometbft_v037"]
        );
        assert_eq!(GoVersion::V037.inputs()[3], "signbytes_noext.go");
        assert_eq!(GoVersion::V038.inputs()[3], "signbytes_ext.go");
        assert_eq!(
            GoVersion::V1.go_flags(),
            ["-modfile=go.mod", "-tags=cometbft_v1"]
        );
        assert_eq!(GoVersion::V1.inputs()[4], "privval_v1.go");
        assert_eq!(GoVersion::V040.inputs()[4], "privval_v0.go");
    }

    /// Each Go build row is the release table's row of the same place:
    /// its module file names that release's line (`go.mod` for v1).
    #[test]
    fn go_builds_follow_the_release_table() {
        assert_eq!(GoVersion::ALL.len(), p2p_conn_releases::ALL.len());
        for v in GoVersion::ALL {
            let want = match v.line() {
                "v1" => "go.mod".to_string(),
                line => format!("go.{line}.mod"),
            };
            assert_eq!(v.modfile(), want, "{}", v.label());
        }
    }
}
