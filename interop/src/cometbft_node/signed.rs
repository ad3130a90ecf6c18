//! [`SignedNode`]: a one-validator chain whose key lives with a remote
//! signer.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use super::home::Home;
use super::rpc::rpc_get;
use super::{GoVersion, NodeBinary};
use crate::process::{free_port, scratch, Feed, Finished, Proc};

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
/// and the listeners as [`Node::start`](super::Node::start) sets them.
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
        // The signer refuses a state file's folder the group or others may
        // write: owner only, whatever the umask.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&signer_dir, std::fs::Permissions::from_mode(0o700))
                .expect("chmod the signer folder");
        }
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
