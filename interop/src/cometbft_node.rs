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

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::thread;
use std::time::{Duration, Instant};

use crate::cometbft_go::{go_build, target_dir, up_to_date};
pub use crate::go_peer::GoVersion;
use crate::go_peer::{BuildError, SHORT_RUN};
use crate::process::{free_port, listening, run_ok, scratch, Feed, Finished, Proc};

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

/// Bound on a node's start, from `cometbft init` to `Started node`.
pub const START_LIMIT: Duration = Duration::from_secs(60);

/// The line the node logs once it is up, with its own NodeInfo.
const STARTED: &str = "Started node";

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

/// The listeners other than P2P and RPC in a `config.toml` of `version`, as
/// `(section, key)`: [`Node::start`] turns them off.
fn other_listeners(version: GoVersion) -> &'static [(&'static str, &'static str)] {
    match version {
        // gRPC in sections of its own.
        GoVersion::V1 => &[
            ("rpc", "pprof_laddr"),
            ("grpc", "laddr"),
            ("grpc.privileged", "laddr"),
        ],
        // v0.34.35 to v0.40.0: gRPC (the broadcast API) under [rpc].
        GoVersion::V034 | GoVersion::V037 | GoVersion::V038 | GoVersion::V039 | GoVersion::V040 => {
            &[("rpc", "pprof_laddr"), ("rpc", "grpc_laddr")]
        }
    }
}

/// Set `key` in `[section]` of a `config.toml` (`""`: the top level, before
/// any section) to `value` (written as is: quote strings), failing if the
/// key is not there.
fn set_key(toml: &str, section: &str, key: &str, value: &str) -> String {
    let mut current = String::new();
    let mut done = false;
    let mut lines: Vec<String> = Vec::new();
    for line in toml.lines() {
        let trimmed = line.trim();
        if let Some(name) = trimmed.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            current = name.to_string();
        }
        let is_key = trimmed
            .strip_prefix(key)
            .is_some_and(|rest| rest.trim_start().starts_with('='));
        if !done && current == section && is_key {
            lines.push(format!("{key} = {value}"));
            done = true;
        } else {
            lines.push(line.to_string());
        }
    }
    assert!(done, "config.toml has no `{key}` in [{section}]");
    lines.join("\n") + "\n"
}

/// A node's home, made by [`Home::init`]: `cometbft init`, then the
/// config the tests want.
struct Home {
    home: PathBuf,
    p2p_port: u16,
    p2p_addr: String,
    rpc_port: u16,
    rpc_laddr: String,
    /// The genesis file's `chain_id`.
    network: String,
}

impl Home {
    /// `cometbft init` in a fresh scratch folder named `<tag>-<n>`, then
    /// both listeners on free loopback ports, no other listener and no
    /// empty blocks, then `extra` (`(section, key, value)`, written as
    /// given: quote strings), which may override any of those. With
    /// `genesis`, that file replaces the one `cometbft init` wrote (to join
    /// another node's chain).
    fn init(
        bin: &NodeBinary,
        tag: &str,
        extra: &[(&str, &str, String)],
        genesis: Option<&Path>,
    ) -> Home {
        static HOMES: AtomicUsize = AtomicUsize::new(0);
        let (release, bin) = (bin.version, bin.path.as_path());
        let n = HOMES.fetch_add(1, Ordering::Relaxed);
        let home = scratch(&format!("{tag}-{n}"));
        let init = [OsStr::new("init"), OsStr::new("--home"), home.as_os_str()];
        run_ok(bin, &init, SHORT_RUN);
        if let Some(file) = genesis {
            std::fs::copy(file, home.join("config/genesis.json"))
                .unwrap_or_else(|e| panic!("copying {file:?} into {home:?}: {e}"));
        }

        let (p2p_port, rpc_port) = (free_port(), free_port());
        let p2p_addr = format!("127.0.0.1:{p2p_port}");
        let rpc_laddr = format!("tcp://127.0.0.1:{rpc_port}");
        let config_path = home.join("config/config.toml");
        let mut config = std::fs::read_to_string(&config_path).unwrap();
        let off = other_listeners(release)
            .iter()
            .map(|&(section, key)| (section, key, "\"\"".to_string()));
        let base = [
            ("", "moniker", format!("{MONIKER:?}")),
            ("rpc", "laddr", format!("{rpc_laddr:?}")),
            ("p2p", "laddr", format!("\"tcp://{p2p_addr}\"")),
            ("p2p", "addr_book_strict", "false".into()),
            ("p2p", "allow_duplicate_ip", "true".into()),
            ("consensus", "create_empty_blocks", "false".into()),
            ("instrumentation", "prometheus", "false".into()),
        ];
        let extra = extra.iter().map(|(s, k, v)| (*s, *k, v.clone()));
        for (section, key, value) in base.into_iter().chain(off).chain(extra) {
            config = set_key(&config, section, key, &value);
        }
        std::fs::write(&config_path, config).unwrap();

        let genesis = std::fs::read(home.join("config/genesis.json")).unwrap();
        let genesis: serde_json::Value = serde_json::from_slice(&genesis).unwrap();
        let network = genesis["chain_id"]
            .as_str()
            .unwrap_or_else(|| panic!("genesis.json has no chain_id: {genesis}"))
            .to_string();
        Home {
            home,
            p2p_port,
            p2p_addr,
            rpc_port,
            rpc_laddr,
            network,
        }
    }
}

/// A running CometBFT node; see the module docs.
pub struct Node {
    /// Its home folder (`config/`, `data/`, `node.log`).
    pub home: PathBuf,
    /// Where it accepts peers: `127.0.0.1:PORT`.
    pub p2p_addr: String,
    /// Its RPC listener, as it advertises it: `tcp://127.0.0.1:PORT`.
    pub rpc_laddr: String,
    /// Its node ID (`cometbft show-node-id`).
    pub node_id: String,
    /// Its network: the `chain_id` of its genesis file.
    pub network: String,
    /// Its software version (`cometbft version`), the one its NodeInfo
    /// announces: `1.0.1`, `0.38.26`, ... ([`GoVersion::announces`]).
    pub version: String,
    /// Its `Started node` log line, which holds its own NodeInfo (see
    /// [`info`](Self::info)).
    pub started: String,
    log_path: PathBuf,
    proc: Mutex<Option<Proc>>,
}

/// A peer as a node's RPC `net_info` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetPeer {
    pub id: String,
    pub moniker: String,
    /// Whether this node dialed it.
    pub outbound: bool,
}

impl Node {
    /// Start a node from the `cometbft` binary `bin` (see [`node_binary`])
    /// and wait until it is up.
    pub fn start(bin: &NodeBinary) -> Node {
        Node::start_with(bin, &[], None)
    }

    /// [`start`](Self::start) with `extra` settings in its `config.toml`
    /// (`(section, key, value)`, the value written as given: quote strings;
    /// they override the defaults [`start`](Self::start) sets) and, with
    /// `genesis`, that genesis file instead of its own.
    pub fn start_with(
        bin: &NodeBinary,
        extra: &[(&str, &str, String)],
        genesis: Option<&Path>,
    ) -> Node {
        Node::launch(bin, extra, genesis, "info")
    }

    /// [`start`](Self::start) with `--log_level=LEVEL` instead of `info`:
    /// `p2p:debug,*:info` has the node log each ping and pong of its
    /// MConnections (`Send Ping`, `Receive Pong`, ... with `peer=ID@ADDR`).
    pub fn start_logging(bin: &NodeBinary, level: &str) -> Node {
        Node::launch(bin, &[], None, level)
    }

    /// A node of CometBFT's e2e application (see [`e2e_node_binary`]): its
    /// home made by `bin` as [`start_with`](Self::start_with) makes one,
    /// run by `e2e` with an application config of `app` (`(key, value)`,
    /// values written as given: `snapshot_interval`, `retain_blocks`, ...;
    /// the chain ID, the built-in protocol and its data folder are set).
    pub fn start_e2e(
        bin: &NodeBinary,
        e2e: &Path,
        app: &[(&str, String)],
        extra: &[(&str, &str, String)],
    ) -> Node {
        Node::launch_with(bin, extra, None, "info", Some((e2e, app)))
    }

    fn launch(
        bin: &NodeBinary,
        extra: &[(&str, &str, String)],
        genesis: Option<&Path>,
        log_level: &str,
    ) -> Node {
        Node::launch_with(bin, extra, genesis, log_level, None)
    }

    fn launch_with(
        bin: &NodeBinary,
        extra: &[(&str, &str, String)],
        genesis: Option<&Path>,
        log_level: &str,
        e2e: Option<(&Path, &[(&str, String)])>,
    ) -> Node {
        let Home {
            home,
            p2p_port,
            p2p_addr,
            rpc_laddr,
            network,
            ..
        } = Home::init(bin, "cometbft-node", extra, genesis);
        let bin = bin.path.as_path();
        let show_id = [
            OsStr::new("show-node-id"),
            OsStr::new("--home"),
            home.as_os_str(),
        ];
        let node_id = run_ok(bin, &show_id, SHORT_RUN).stdout_text();
        let version = run_ok(bin, &["version"], SHORT_RUN).stdout_text();

        let log_path = home.join("node.log");
        let log = std::fs::File::create(&log_path).unwrap();
        let mut cmd = match e2e {
            None => {
                let mut cmd = Command::new(bin);
                cmd.arg("start")
                    .arg("--home")
                    .arg(&home)
                    .arg("--proxy_app=kvstore")
                    .arg(format!("--log_level={log_level}"));
                cmd
            }
            Some((e2e_bin, app)) => {
                // The e2e node reads its CometBFT config from
                // $CMTHOME/config and its application's from the file.
                let mut toml = format!(
                    "chain_id = {network:?}\nprotocol = \"builtin\"\ndir = {:?}\n",
                    home.join("app").display().to_string()
                );
                for (k, v) in app {
                    toml.push_str(&format!("{k} = {v}\n"));
                }
                let app_file = home.join("app.toml");
                std::fs::write(&app_file, toml).unwrap();
                let mut cmd = Command::new(e2e_bin);
                cmd.arg(&app_file).env("CMTHOME", &home);
                cmd
            }
        };
        cmd.stdin(Stdio::null()).stdout(log);
        let mut node = Node {
            proc: Mutex::new(Some(Proc::start(&mut cmd, Feed::none()))),
            home,
            p2p_addr,
            rpc_laddr,
            node_id,
            network,
            version,
            started: String::new(),
            log_path,
        };
        let deadline = Instant::now() + START_LIMIT;
        // The whole `Started node` line (up to its line end), once the p2p
        // listener is up too.
        // `cometbft start` logs `Started node` with the node's NodeInfo; the
        // e2e node, which starts the node itself, only the service's start.
        let marker = if e2e.is_some() {
            "msg=\"Starting Node service\""
        } else {
            STARTED
        };
        let started = |log: String| {
            let line = log.lines().find(|line| line.contains(marker))?;
            let end = log.find(line)? + line.len();
            (log[end..].starts_with('\n') && listening(p2p_port)).then(|| line.to_string())
        };
        node.started = loop {
            if let Some(line) = started(node.log()) {
                break line;
            }
            node.check_running("starting");
            if Instant::now() >= deadline {
                node.fail(&format!(
                    "no `{STARTED}` or no listener on {} within {START_LIMIT:?}",
                    node.p2p_addr
                ));
            }
            thread::sleep(Duration::from_millis(50));
        };
        node
    }

    /// A node of `bin`'s release shared by the tests of this test binary
    /// that run at the same time: the first starts it, the last to drop its
    /// `Arc` stops it (a node in a `static` would outlive the test binary).
    pub fn shared(bin: &NodeBinary) -> Arc<Node> {
        static SHARED: [Mutex<Weak<Node>>; GoVersion::ALL.len()] =
            [const { Mutex::new(Weak::new()) }; GoVersion::ALL.len()];
        let mut shared = SHARED[bin.version.index()]
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(node) = shared.upgrade() {
            return node;
        }
        let node = Arc::new(Node::start(bin));
        *shared = Arc::downgrade(&node);
        node
    }

    /// A field of the NodeInfo the node logged about itself at start
    /// (`Started node ... nodeInfo="{ProtocolVersion:{P2P:9 Block:11 App:1}
    /// DefaultNodeID:... ListenAddr:... Network:... Version:... Channels:...
    /// Moniker:... Other:{TxIndex:... RPCAddress:...}}"`, `P2P:8` before v1),
    /// e.g. `P2P`, `Channels` (hex digits, two per channel) or `RPCAddress`.
    pub fn info(&self, field: &str) -> &str {
        let line = &self.started;
        let at = [" ", "{"]
            .iter()
            .find_map(|before| line.find(&format!("{before}{field}:")))
            .unwrap_or_else(|| panic!("no {field} in the node's `{STARTED}` line: {line}"));
        let value = &line[at + 1 + field.len() + 1..];
        let end = value.find([' ', '}', '"']).unwrap_or(value.len());
        &value[..end]
    }

    /// `GET path` (`/net_info`, `/status`) on the node's own RPC, over
    /// loopback: its JSON answer, or `None` while it does not answer.
    pub fn rpc(&self, path: &str) -> Option<serde_json::Value> {
        let port = self.rpc_laddr.rsplit(':').next()?.parse().ok()?;
        rpc_get(port, path)
    }

    /// Its latest block height (`/status`); `None` while the RPC does not
    /// answer.
    pub fn height(&self) -> Option<i64> {
        let status = self.rpc("/status")?;
        status["result"]["sync_info"]["latest_block_height"]
            .as_str()?
            .parse()
            .ok()
    }

    /// Its peers, from its own RPC `net_info`; `None` while the RPC does
    /// not answer (or answers something else).
    pub fn peers(&self) -> Option<Vec<NetPeer>> {
        let info = self.rpc("/net_info")?;
        info["result"]["peers"]
            .as_array()?
            .iter()
            .map(|p| {
                Some(NetPeer {
                    id: p["node_info"]["id"].as_str()?.to_string(),
                    moniker: p["node_info"]["moniker"].as_str()?.to_string(),
                    outbound: p["is_outbound"].as_bool()?,
                })
            })
            .collect()
    }

    /// The node IDs its `net_info` lists (none while the RPC does not
    /// answer).
    pub fn peer_ids(&self) -> Vec<String> {
        self.peers()
            .unwrap_or_default()
            .into_iter()
            .map(|p| p.id)
            .collect()
    }

    /// Everything the node has logged so far.
    pub fn log(&self) -> String {
        String::from_utf8_lossy(&std::fs::read(&self.log_path).unwrap_or_default()).into_owned()
    }

    /// How much the node has logged so far: a mark for [`log_since`](Self::log_since).
    pub fn log_len(&self) -> usize {
        std::fs::metadata(&self.log_path).map_or(0, |m| m.len() as usize)
    }

    /// What the node has logged after `mark` (a [`log_len`](Self::log_len)).
    pub fn log_since(&self, mark: usize) -> String {
        let log = std::fs::read(&self.log_path).unwrap_or_default();
        String::from_utf8_lossy(&log[mark.min(log.len())..]).into_owned()
    }

    /// The last `n` lines of the log, for failure messages.
    pub fn log_tail(&self, n: usize) -> String {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// Wait up to `timeout` until the log holds `needle`: whether it does.
    pub fn wait_for_log(&self, needle: &str, timeout: Duration) -> bool {
        self.wait_for_log_since(0, needle, timeout)
    }

    /// Wait up to `timeout` until the log after `mark` holds `needle`:
    /// whether it does. Fails if the node dies meanwhile.
    pub fn wait_for_log_since(&self, mark: usize, needle: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if self.log_since(mark).contains(needle) {
                return true;
            }
            self.check_running(&format!("we waited for {needle:?} in its log"));
            if Instant::now() >= deadline {
                return false;
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// Fail at once if the node has exited (with its status and stderr; its
    /// log stays in its home).
    pub fn check_running(&self, doing: &str) {
        let mut proc = self.proc.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(proc) = proc.as_mut() {
            proc.check_running(&format!("{doing} (log: {})", self.log_path.display()));
        }
    }

    /// Kill the node and fail with `msg`, its stderr and its last log lines.
    pub fn fail(&self, msg: &str) -> ! {
        let tail = self.log_tail(20);
        let proc = self.proc.lock().unwrap_or_else(|e| e.into_inner()).take();
        let stopped = proc.map(|p| p.stop(Duration::ZERO)).unwrap_or_default();
        panic!(
            "CometBFT node ({}): {msg}; {stopped}; last log lines:\n{tail}",
            self.home.display()
        );
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let proc = self
            .proc
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        drop(proc); // kills the node and reaps it
        if !thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.home);
        }
    }
}

/// How a [`SignedNode`] listens for its remote signer
/// (`priv_validator_laddr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SignerTransport {
    /// `tcp://127.0.0.1:PORT` on a free port: a secret connection.
    Tcp,
    /// `unix://<home>/privval.sock`: plaintext.
    Unix,
    /// `noise://SIGNER_PEER_ID@127.0.0.1:PORT` (v0.40.0): libp2p Noise, the
    /// node's identity its `node_key.json`, the signer's a key file made
    /// for it ([`SignedNode::signer_identity`]).
    Noise,
}

/// `timeout_commit` of a [`SignedNode`]: short, so that blocks flow.
pub const SIGNED_TIMEOUT_COMMIT: &str = "200ms";

/// `timeout_propose` of a [`SignedNode`] (CometBFT's default is 3 s): a
/// round whose proposal could not be signed (the signer was away) ends
/// sooner.
pub const SIGNED_TIMEOUT_PROPOSE: &str = "1s";

/// A one-validator chain whose validator key lives only with a remote
/// signer: `cometbft init` in a throwaway home, then `priv_validator_key.json`
/// and `priv_validator_state.json` moved out of the home into a signer
/// folder of their own ([`key_file`](Self::key_file),
/// [`state_file`](Self::state_file)), `priv_validator_laddr` set
/// ([`SignerTransport`]), empty blocks on (`create_empty_blocks = true`,
/// interval 0, `timeout_commit` [`SIGNED_TIMEOUT_COMMIT`], `timeout_propose`
/// [`SIGNED_TIMEOUT_PROPOSE`]; the key names are the same at every line),
/// and the listeners as [`Node::start`] sets them.
///
/// The node is not started by [`init`](Self::init): [`start`](Self::start)
/// spawns it and returns at once, because a node with
/// `priv_validator_laddr` asks its signer for the public key inside its own
/// start, and exits ("can't get pubkey: ... endpoint connection timed
/// out") if no signer has connected within its accept timeout (3 s). Start
/// the signer (or have one dialing already), then wait for blocks with
/// [`wait_height`](Self::wait_height). [`kill`](Self::kill) and
/// [`start`](Self::start) again (or [`restart`](Self::restart)) run the
/// node again on the same home, ports and socket path.
///
/// What the node does with the key files it lost: at every start it makes
/// a FilePV of its own (`LoadOrGenFilePV` in `DefaultNewNode`, every line),
/// a fresh random key in `config/` and `data/`, which it never uses while
/// `priv_validator_laddr` is set and which is not the genesis validator
/// ([`node_made_key`](Self::node_made_key)). The validator's key exists only
/// in the signer folder.
///
/// Every start appends to one log, `node.log` in the home. Dropping a
/// `SignedNode` kills the node and removes the home and the signer folder,
/// unless the test is failing: then both stay for a look.
pub struct SignedNode {
    /// The release.
    pub version: GoVersion,
    /// The node's home folder.
    pub home: PathBuf,
    /// The folder the validator's key and state files were moved to.
    pub signer_dir: PathBuf,
    /// The validator's `priv_validator_key.json` (in [`signer_dir`](Self::signer_dir)).
    pub key_file: PathBuf,
    /// The validator's `priv_validator_state.json` (in [`signer_dir`](Self::signer_dir)),
    /// as `cometbft init` wrote it: height 0, nothing signed.
    pub state_file: PathBuf,
    /// `priv_validator_laddr`: `tcp://127.0.0.1:PORT`, `unix:///PATH` or
    /// `noise://SIGNER_PEER_ID@127.0.0.1:PORT`.
    pub laddr: String,
    /// What the signer dials: `laddr`, except on `noise://`, where it names
    /// the node's peer ID (from its `node_key.json`) instead.
    pub signer_dials: String,
    /// On `noise://`, the signer's identity (a `node_key.json` in
    /// [`signer_dir`](Self::signer_dir), which `laddr` names).
    pub signer_identity: Option<PathBuf>,
    /// The chain: the `chain_id` of the genesis file.
    pub chain_id: String,
    /// The node's RPC port on 127.0.0.1 ([`height`](Self::height)).
    pub rpc_port: u16,
    /// Its P2P address, `127.0.0.1:PORT`.
    pub p2p_addr: String,
    /// Its node ID (from its `node_key.json`).
    pub node_id: String,
    /// The validator's public key, base64, as the key file and the genesis
    /// file both give it.
    pub validator_pub_key: String,
    bin: PathBuf,
    socket: Option<PathBuf>,
    log_path: PathBuf,
    /// The log's length when the node last started.
    start_mark: Mutex<usize>,
    proc: Mutex<Option<Proc>>,
}

impl SignedNode {
    /// Make the home and the signer folder (see the type's docs); the node
    /// is not started.
    pub fn init(bin: &NodeBinary, transport: SignerTransport) -> SignedNode {
        Self::make(bin, transport, None)
    }

    /// A second node of the same validator: another home on this node's
    /// chain (its genesis file, this node as its persistent peer), whose
    /// validator key is the one [`key_file`](Self::key_file) holds, so one
    /// signer (with one [`state_file`](Self::state_file)) serves both. On
    /// `noise://` its laddr names the same signer identity. Its own
    /// `cometbft init` key files are deleted: only the signer has the key.
    pub fn twin(&self, bin: &NodeBinary, transport: SignerTransport) -> SignedNode {
        Self::make(bin, transport, Some(self))
    }

    fn make(bin: &NodeBinary, transport: SignerTransport, of: Option<&SignedNode>) -> SignedNode {
        static SIGNERS: AtomicUsize = AtomicUsize::new(0);
        let n = SIGNERS.fetch_add(1, Ordering::Relaxed);
        let signer_dir = scratch(&format!("cometbft-signer-{n}"));
        // The home is made by `Home::init`; the socket goes in the signer
        // folder, which exists already (a Unix socket path must stay under
        // about 100 bytes).
        let port = free_port();
        let identity = signer_dir.join("signer_node_key.json");
        let (laddr, socket) = match transport {
            SignerTransport::Tcp => (format!("tcp://127.0.0.1:{port}"), None),
            SignerTransport::Noise => {
                let id = match of.and_then(|o| o.signer_identity.as_ref()) {
                    Some(shared) => {
                        std::fs::copy(shared, &identity)
                            .unwrap_or_else(|e| panic!("copying {shared:?}: {e}"));
                        p2p_conn::keyfile::load(&identity).unwrap()
                    }
                    None => {
                        let id = p2p_conn::Identity::generate();
                        p2p_conn::keyfile::save_new(&id, &identity)
                            .unwrap_or_else(|e| panic!("writing {identity:?}: {e}"));
                        id
                    }
                };
                let peer = id.public_key().peer_id();
                (format!("noise://{peer}@127.0.0.1:{port}"), None)
            }
            SignerTransport::Unix => {
                let path = signer_dir.join("privval.sock");
                assert!(
                    path.as_os_str().len() < 100,
                    "{path:?} is too long for a Unix socket path; set TMPDIR shorter"
                );
                (format!("unix://{}", path.display()), Some(path))
            }
        };
        let extra = [
            ("", "priv_validator_laddr", format!("{laddr:?}")),
            ("consensus", "create_empty_blocks", "true".to_string()),
            ("consensus", "create_empty_blocks_interval", "\"0s\"".into()),
            (
                "consensus",
                "timeout_commit",
                format!("{SIGNED_TIMEOUT_COMMIT:?}"),
            ),
            (
                "consensus",
                "timeout_propose",
                format!("{SIGNED_TIMEOUT_PROPOSE:?}"),
            ),
        ];
        let mut extra = extra.to_vec();
        if let Some(first) = of {
            extra.push((
                "p2p",
                "persistent_peers",
                format!("\"{}@{}\"", first.node_id, first.p2p_addr),
            ));
        }
        let genesis = of.map(|o| o.home.join("config/genesis.json"));
        let Home {
            home,
            rpc_port,
            network,
            p2p_addr,
            ..
        } = Home::init(bin, "cometbft-validator", &extra, genesis.as_deref());
        let node_key = home.join("config/node_key.json");
        let node_id = p2p_conn::keyfile::load(&node_key)
            .unwrap_or_else(|e| panic!("reading {node_key:?}: {e}"))
            .node_id()
            .to_string();

        let (signer_dials, signer_identity) = match transport {
            SignerTransport::Noise => {
                let node = p2p_conn::keyfile::load(&node_key)
                    .unwrap_or_else(|e| panic!("reading {node_key:?}: {e}"));
                let peer = node.public_key().peer_id();
                (format!("noise://{peer}@127.0.0.1:{port}"), Some(identity))
            }
            _ => (laddr.clone(), None),
        };
        let (key_file, state_file) = match of {
            Some(first) => (first.key_file.clone(), first.state_file.clone()),
            None => (
                signer_dir.join("priv_validator_key.json"),
                signer_dir.join("priv_validator_state.json"),
            ),
        };
        for (from, to) in [
            ("config/priv_validator_key.json", &key_file),
            ("data/priv_validator_state.json", &state_file),
        ] {
            if of.is_some() {
                // A twin's own key is no validator's: only the signer has
                // the validator key.
                std::fs::remove_file(home.join(from))
                    .unwrap_or_else(|e| panic!("removing {from} from {home:?}: {e}"));
                continue;
            }
            std::fs::rename(home.join(from), to)
                .unwrap_or_else(|e| panic!("moving {from} out of {home:?}: {e}"));
        }
        let key: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&key_file).unwrap()).unwrap();
        let validator_pub_key = key["pub_key"]["value"]
            .as_str()
            .unwrap_or_else(|| panic!("{key_file:?} has no pub_key.value"))
            .to_string();
        let genesis = std::fs::read(home.join("config/genesis.json")).unwrap();
        let genesis: serde_json::Value = serde_json::from_slice(&genesis).unwrap();
        let validators = genesis["validators"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(
            validators.len() == 1
                && validators[0]["pub_key"]["value"].as_str() == Some(&validator_pub_key),
            "genesis.json must have the moved key as its one validator: {genesis}"
        );

        SignedNode {
            version: bin.version,
            log_path: home.join("node.log"),
            home,
            signer_dir,
            key_file,
            state_file,
            laddr,
            signer_dials,
            signer_identity,
            chain_id: network,
            rpc_port,
            p2p_addr,
            node_id,
            validator_pub_key,
            bin: bin.path.clone(),
            socket,
            start_mark: Mutex::new(0),
            proc: Mutex::new(None),
        }
    }

    /// Spawn the node (`cometbft start --proxy_app=kvstore`) and return at
    /// once: it now waits up to 3 s for its signer. A socket file a killed
    /// node left behind is removed first (the node's listen would fail on
    /// it).
    pub fn start(&self) {
        let mut proc = self.proc.lock().unwrap_or_else(|e| e.into_inner());
        assert!(proc.is_none(), "the node is running already");
        if let Some(socket) = &self.socket {
            let _ = std::fs::remove_file(socket);
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .unwrap();
        *self.start_mark.lock().unwrap_or_else(|e| e.into_inner()) = self.log_len();
        let mut cmd = Command::new(&self.bin);
        cmd.arg("start")
            .arg("--home")
            .arg(&self.home)
            .args(["--proxy_app=kvstore", "--log_level=info"])
            .stdin(Stdio::null())
            .stdout(log);
        *proc = Some(Proc::start(&mut cmd, Feed::none()));
    }

    /// Kill the node (SIGKILL) and reap it: its status and stderr.
    pub fn kill(&self) -> String {
        let proc = self.proc.lock().unwrap_or_else(|e| e.into_inner()).take();
        proc.expect("the node is not running").stop(Duration::ZERO)
    }

    /// [`kill`](Self::kill), then [`start`](Self::start) on the same home.
    pub fn restart(&self) {
        self.kill();
        self.start();
    }

    /// Wait up to `limit` for the running node to exit: its status and
    /// output, or `None` if it still runs (it is left running).
    pub fn wait_exit(&self, limit: Duration) -> Option<Finished> {
        let deadline = Instant::now() + limit;
        loop {
            {
                let mut proc = self.proc.lock().unwrap_or_else(|e| e.into_inner());
                let running = proc.as_mut().expect("the node was not started");
                if running.has_exited() {
                    return Some(proc.take().unwrap().finish_within(Duration::from_secs(5)));
                }
            }
            if Instant::now() >= deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// The latest block height the node's RPC reports (`/status`,
    /// `sync_info.latest_block_height`); `None` while the RPC does not
    /// answer.
    pub fn height(&self) -> Option<i64> {
        let status = rpc_get(self.rpc_port, "/status")?;
        status["result"]["sync_info"]["latest_block_height"]
            .as_str()?
            .parse()
            .ok()
    }

    /// `GET path` on the node's RPC: the JSON body, `None` without one.
    pub fn rpc(&self, path: &str) -> Option<serde_json::Value> {
        rpc_get(self.rpc_port, path)
    }

    /// Wait up to `limit` until the node reports a height of at least
    /// `min`: that height. Fails, with the node's log, if the node exits
    /// or the height is not reached in time.
    pub fn wait_height(&self, min: i64, limit: Duration) -> i64 {
        let deadline = Instant::now() + limit;
        let mut last = None;
        loop {
            if let Some(h) = self.height() {
                if h >= min {
                    return h;
                }
                last = Some(h);
            }
            self.check_running(&format!("we waited for height {min}"));
            if Instant::now() >= deadline {
                self.fail(&format!(
                    "height {min} not reached within {limit:?} (last seen: {last:?})"
                ));
            }
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// The public key (base64) of the FilePV the node made for itself at
    /// start (see the type's docs), if it made one.
    pub fn node_made_key(&self) -> Option<String> {
        let file = std::fs::read(self.home.join("config/priv_validator_key.json")).ok()?;
        let key: serde_json::Value = serde_json::from_slice(&file).ok()?;
        key["pub_key"]["value"].as_str().map(String::from)
    }

    /// Everything the node has logged so far, over all its starts.
    pub fn log(&self) -> String {
        String::from_utf8_lossy(&std::fs::read(&self.log_path).unwrap_or_default()).into_owned()
    }

    /// What the node logged since it last started.
    pub fn log_since_start(&self) -> String {
        let mark = *self.start_mark.lock().unwrap_or_else(|e| e.into_inner());
        let log = std::fs::read(&self.log_path).unwrap_or_default();
        String::from_utf8_lossy(&log[mark.min(log.len())..]).into_owned()
    }

    fn log_len(&self) -> usize {
        std::fs::metadata(&self.log_path).map_or(0, |m| m.len() as usize)
    }

    /// The last `n` lines of the log, for failure messages.
    pub fn log_tail(&self, n: usize) -> String {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// Fail at once if the node has exited (with its status and stderr).
    pub fn check_running(&self, doing: &str) {
        let exited = {
            let mut proc = self.proc.lock().unwrap_or_else(|e| e.into_inner());
            let running = proc.as_mut().expect("the node was not started");
            running.has_exited()
        };
        if exited {
            self.fail(&format!("the node exited while {doing}"));
        }
    }

    /// Kill the node and fail with `msg`, its stderr and its last log lines.
    pub fn fail(&self, msg: &str) -> ! {
        let tail = self.log_tail(30);
        let proc = self.proc.lock().unwrap_or_else(|e| e.into_inner()).take();
        let stopped = proc.map(|p| p.stop(Duration::ZERO)).unwrap_or_default();
        panic!(
            "CometBFT {} validator ({}): {msg}; {stopped}; last log lines:\n{tail}",
            self.version.label(),
            self.home.display()
        );
    }
}

impl Drop for SignedNode {
    fn drop(&mut self) {
        let proc = self
            .proc
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        drop(proc); // kills the node and reaps it
        if !thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.home);
            let _ = std::fs::remove_dir_all(&self.signer_dir);
        }
    }
}

/// `GET path` on the node's RPC at 127.0.0.1:`port` (HTTP/1.0, short
/// timeouts): the JSON body, or `None` if there is no answer or no JSON.
fn rpc_get(port: u16, path: &str) -> Option<serde_json::Value> {
    use std::io::{Read, Write};
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut tcp = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    tcp.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    tcp.set_write_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(tcp, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut reply = Vec::new();
    tcp.take(1 << 20).read_to_end(&mut reply).ok()?;
    let at = reply.windows(4).position(|w| w == b"\r\n\r\n")?;
    serde_json::from_slice(&reply[at + 4..]).ok()
}
