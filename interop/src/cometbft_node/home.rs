//! A node's home: `cometbft init`, then the config the tests want.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{GoVersion, NodeBinary, MONIKER};
use crate::go_peer::SHORT_RUN;
use crate::process::{free_port, run_ok, scratch};

/// The listeners other than P2P and RPC in a `config.toml` of `version`, as
/// `(section, key)`: [`Node::start`](super::Node::start) turns them off.
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
pub(super) struct Home {
    pub(super) home: PathBuf,
    pub(super) p2p_port: u16,
    pub(super) p2p_addr: String,
    pub(super) rpc_port: u16,
    pub(super) rpc_laddr: String,
    /// The genesis file's `chain_id`.
    pub(super) network: String,
}

impl Home {
    /// `cometbft init` in a fresh scratch folder named `<tag>-<n>`, then
    /// both listeners on free loopback ports, no other listener and no
    /// empty blocks, then `extra` (`(section, key, value)`, written as
    /// given: quote strings), which may override any of those. With
    /// `genesis`, that file replaces the one `cometbft init` wrote (to join
    /// another node's chain).
    pub(super) fn init(
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
