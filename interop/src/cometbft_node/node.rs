//! [`Node`]: a running `cometbft start --proxy_app=kvstore` (or e2e node).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, Weak};
use std::thread;
use std::time::{Duration, Instant};

use super::home::Home;
use super::rpc::rpc_get;
use super::{GoVersion, NodeBinary};
use crate::go_peer::SHORT_RUN;
use crate::process::{listening, run_ok, Feed, Proc};

/// Bound on a node's start, from `cometbft init` to `Started node`.
pub const START_LIMIT: Duration = Duration::from_secs(60);

/// The line the node logs once it is up, with its own NodeInfo.
const STARTED: &str = "Started node";

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
    /// Start a node from the `cometbft` binary `bin` (see [`node_binary`](super::node_binary))
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

    /// A node of CometBFT's e2e application (see [`e2e_node_binary`](super::e2e_node_binary)): its
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
