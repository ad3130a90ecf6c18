//! A real CometBFT node (`cometbft start --proxy_app=kvstore`) on loopback,
//! at each release the Go peer is built against ([`GoVersion::ALL`]:
//! v0.34.35, v0.37.18, v0.38.26, v0.39.4, v0.40.0 and v1.0.1), for testing
//! the CLI against the node software itself rather than against the secret
//! connection alone ([`crate::go_peer`]).
//!
//! The `cometbft` binary of a release is built from the Go module proxy with
//! `go install github.com/cometbft/cometbft/cmd/cometbft@<version>`, except
//! v0.34.35, which `go install` refuses (its `go.mod` has replace
//! directives): that one is built in `interop/cometbft-node/v0.34`, a module
//! that replaces `github.com/tendermint/tendermint` with it as chains do
//! (see that folder's README). Each is cached as
//! `<target>/cometbft-node/<version>/cometbft` (`$CARGO_TARGET_DIR` or the
//! workspace's `target/`), once for all test binaries. Without the Go
//! toolchain [`node_binary`] prints a notice and the test passes, unless
//! `CI=true`, where it fails; a failed build always fails.
//!
//! [`Node::start`] gives each node a throwaway home (`cometbft init`) with
//! both listeners on free loopback ports, no other listener (gRPC, pprof and
//! Prometheus stay off, wherever the release's `config.toml` keeps them) and
//! no empty blocks (a quiet log, little CPU), and waits for `Started node`.
//! The node's log (its logger writes to stdout) goes to `node.log` in the
//! home; its stderr (the database's notices, a Go panic) shows when it dies.
//! Dropping a [`Node`] kills it and removes the home, unless the test is
//! failing: then the home and its log stay for a look.
//!
//! [`SignedNode`] is a one-validator chain whose validator key lives only
//! with a remote signer (`priv_validator_laddr`, `tcp://` or `unix://`),
//! with empty blocks every ~200 ms: it starts without waiting, since the
//! node waits for its signer inside its own start, and it can be killed
//! and started again on the same home.
//!
//! The module's files: this one builds and finds the binaries; `home.rs`
//! makes a node's home and config; `node.rs` runs a [`Node`]; `signed.rs`
//! a [`SignedNode`] and its signer's folder; `rpc.rs` asks a node's RPC.

mod home;
mod node;
mod rpc;
mod signed;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use crate::cometbft_go::{go_build, target_dir, up_to_date};
use crate::go_peer::BuildError;
pub use crate::go_peer::GoVersion;
pub use node::{NetPeer, Node, START_LIMIT};
pub use signed::{SignedNode, SignerTransport, SIGNED_TIMEOUT_COMMIT, SIGNED_TIMEOUT_PROPOSE};

/// The package `go install` builds (v0.37 and later).
const PACKAGE: &str = "github.com/cometbft/cometbft/cmd/cometbft";

/// v0.34.35's node: built in `interop/cometbft-node/v0.34`, a module of
/// our own that replaces `github.com/tendermint/tendermint` with
/// `github.com/cometbft/cometbft v0.34.35` (`go install` refuses that
/// release, whose `go.mod` has replace directives), by the package path
/// the module keeps.
const V034_PACKAGE: &str = "github.com/tendermint/tendermint/cmd/cometbft";

/// The moniker every test node gets (the default is the host name).
pub const MONIKER: &str = "p2p-conn-test";

/// `<target>/cometbft-node/<version>/cometbft`, e.g. `v1.0.1`.
pub fn binary_path(version: GoVersion) -> PathBuf {
    target_dir()
        .join("cometbft-node")
        .join(version.label())
        .join("cometbft")
}

/// The module that builds v0.34.35's node.
fn v034_module() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("cometbft-node/v0.34")
}

/// The `cometbft` binary of `version`, built unless already cached: with
/// `go install` from the Go module proxy, except v0.34.35 (see
/// [`V034_PACKAGE`]), which is rebuilt when its module file changes.
pub fn build(version: GoVersion) -> Result<PathBuf, BuildError> {
    let out = binary_path(version);
    let what = format!("cometbft {} node", version.label());
    if version == GoVersion::V034 {
        let module = v034_module();
        if !up_to_date(&out, &module, &["go.mod", "go.sum"]) {
            let args = ["-trimpath", "-mod=readonly", V034_PACKAGE];
            go_build(&module, &args, &out, &what)?;
        }
        return Ok(out);
    }
    if out.is_file() {
        return Ok(out);
    }
    go_install(PACKAGE, "cometbft", version, &out, &what)
}

/// `go install PACKAGE@VERSION` of a main package of CometBFT's module,
/// its binary `name` placed at `out`.
fn go_install(
    package: &str,
    name: &str,
    version: GoVersion,
    out: &Path,
    what: &str,
) -> Result<PathBuf, BuildError> {
    let out = out.to_path_buf();
    let version = version.label();
    let failed = |doing: &str, e: &dyn std::fmt::Display| {
        BuildError::Failed(format!("{what}: {doing}: {e}"))
    };
    let dir = out.parent().expect("the cache path has a folder");
    // `go install` into a folder of this process's own, then rename: other
    // test binaries may be building at the same moment, and none may see a
    // half-written binary.
    let gobin = dir.join(format!("gobin.{}.tmp", std::process::id()));
    let _ = std::fs::remove_dir_all(&gobin);
    std::fs::create_dir_all(&gobin).map_err(|e| failed(&format!("creating {gobin:?}"), &e))?;
    let result = Command::new("go")
        .current_dir(&gobin)
        .arg("install")
        // The Go peer's build flag (cometbft_go::build): with it, CometBFT's
        // packages and dependencies that the peer already compiled come
        // from Go's build cache (a v0.38.26 node built in 49 s after the
        // peer against 182 s from an empty cache, on a busy 2-core machine).
        .arg("-trimpath")
        .arg(format!("{package}@{version}"))
        .env("GOBIN", &gobin)
        // Use the installed toolchain; never download another one.
        .env("GOTOOLCHAIN", "local")
        .stdin(Stdio::null())
        .output();
    let placed = match result {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(BuildError::GoMissing),
        Err(e) => Err(failed("running go", &e)),
        Ok(o) if !o.status.success() => Err(failed(
            &format!("go install {package}@{version} ({})", o.status),
            &String::from_utf8_lossy(&o.stderr).trim(),
        )),
        Ok(_) => std::fs::rename(gobin.join(name), &out)
            .map_err(|e| failed(&format!("placing {out:?}"), &e)),
    };
    let _ = std::fs::remove_dir_all(&gobin);
    placed.map(|()| out)
}

/// CometBFT's end-to-end test node (`test/e2e/node`): CometBFT with its
/// e2e application built in, which takes state-sync snapshots every
/// `snapshot_interval` blocks and has CometBFT prune blocks older than
/// `retain_blocks` (the kvstore application of `cometbft start` does
/// neither).
const E2E_PACKAGE: &str = "github.com/cometbft/cometbft/test/e2e/node";

/// The e2e node of `version` for `test` (beside its `cometbft`, in
/// `target/cometbft-node/<version>/e2e-node`), built once; `None` (after a
/// notice) when Go is not installed, unless `CI=true`.
pub fn e2e_node_binary(version: GoVersion, test: &str) -> Option<PathBuf> {
    static BUILT: [OnceLock<Result<PathBuf, BuildError>>; GoVersion::ALL.len()] =
        [const { OnceLock::new() }; GoVersion::ALL.len()];
    let built = BUILT[version.index()].get_or_init(|| {
        let out = binary_path(version).with_file_name("e2e-node");
        if out.is_file() {
            return Ok(out);
        }
        if let Some(dir) = out.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let what = format!("cometbft {} e2e node", version.label());
        go_install(E2E_PACKAGE, "node", version, &out, &what)
    });
    let e = match built {
        Ok(path) => return Some(path.clone()),
        Err(e) => e,
    };
    let must_run = std::env::var("CI").as_deref() == Ok("true");
    if must_run || !matches!(e, BuildError::GoMissing) {
        panic!("{test}: {e} (the e2e node tests need it)");
    }
    eprintln!("skipping {test}: {e}");
    None
}

/// A `cometbft` binary and the release it is (see [`node_binary`]).
#[derive(Clone, Debug)]
pub struct NodeBinary {
    pub path: PathBuf,
    pub version: GoVersion,
}

/// The `cometbft` binary of `version` for `test`, built once per test binary
/// and version; `None` (after a notice) when Go is not installed, unless
/// `CI=true`.
pub fn node_binary(version: GoVersion, test: &str) -> Option<NodeBinary> {
    static BUILT: [OnceLock<Result<PathBuf, BuildError>>; GoVersion::ALL.len()] =
        [const { OnceLock::new() }; GoVersion::ALL.len()];
    let e = match BUILT[version.index()].get_or_init(|| build(version)) {
        Ok(path) => {
            return Some(NodeBinary {
                path: path.clone(),
                version,
            })
        }
        Err(e) => e,
    };
    let must_run = std::env::var("CI").as_deref() == Ok("true");
    if must_run || !matches!(e, BuildError::GoMissing) {
        panic!("{test}: {e} (the CometBFT node tests need it)");
    }
    eprintln!("skipping {test}: {e}");
    None
}
