//! A network of real CometBFT nodes on loopback, from several release
//! lines, on one chain: for tests (and later the crawler) that need nodes
//! that peer with each other, not a single node ([`crate::cometbft_node`]).
//!
//! # Layout
//!
//! [`Network::start`] starts one node per entry of its layout, in order
//! ([`LAYOUT`] by default). Node 0 makes the chain: its genesis file (one
//! validator, its own key) is copied into every other home, so the others
//! are full nodes that follow it. Node `i` has node `i - 1` as its only
//! `persistent_peers` entry, so the nodes form a line. Every node has
//! `pex = true`, `addr_book_strict = false` and `allow_duplicate_ip = true`
//! (loopback addresses are neither routable nor distinct), empty blocks
//! every [`TIMEOUT_COMMIT`], and the listeners [`Node::start`] sets.
//!
//! The last node runs in `seed_mode`. A seed answers an *inbound* peer's
//! PEX request once and hangs up on it, so a seed in the middle of the line
//! (dialed by its successor) would keep dropping that link and the line
//! would flap. At the end of the line nobody dials it; it dials node
//! `n - 2` itself, and a seed keeps its outbound persistent peers. Node
//! `n - 2` records the seed's address (as its own source, for an inbound
//! peer), so a crawler that starts at node 0 and follows PEX answers
//! reaches every node, the seed last. Since PEX is on, the nodes also learn
//! of and dial each other over time: a node's peers include its neighbours
//! but may not be only those.
//!
//! # Which lines share a chain
//!
//! NodeInfo does not keep the lines apart: every line announces block
//! protocol 11 and the same channels, which is all `CompatibleWith` checks
//! (besides the network), at every line. The chain and the reactors do.
//! Tried with v0.38.26 making the chain: v0.39.4, v0.40.0 and v1.0.1 read
//! its genesis file and follow its blocks; v0.37.18 reads it but halts at
//! block 1 (`wrong Block.Header.AppHash`: its kvstore application computes
//! another app hash), and v0.34.35 refuses the genesis file
//! (`block.TimeIotaMs must be greater than 0`). But v1.0.1 does not keep
//! peers of the other lines: v0.38.26 and v0.40.0 each stopped their
//! v1.0.1 peer every few hundred milliseconds ("Stopping peer for error
//! ... unwrapping message: unknown message: <nil>", a message of v1's they
//! do not know), with v0.38.26 or v1.0.1 making the chain. So [`LAYOUT`]
//! mixes v0.38.26, v0.39.4 and v0.40.0, which keep each other as peers
//! (`network_peers` checks that no node stops a peer for an error).

//! # Guarantees and limits
//!
//! Nodes start one after the other, each once its predecessor listens, so
//! the first dial of each persistent peer finds it up. [`Network::start`]
//! returns once every node has started; it does not wait for peering or
//! blocks ([`Network::wait_line`], [`NetNode::height`]). Dropping the
//! network stops every node (see [`Node`]'s drop: homes stay when a test
//! fails). Nothing here is reachable beyond 127.0.0.1.

use std::path::PathBuf;
use std::thread;
use std::time::{Duration, Instant};

use crate::cometbft_go::GoVersion;
pub use crate::cometbft_node::NetPeer;
use crate::cometbft_node::{node_binary, Node};

/// The default layout: node 0 makes the chain (v0.38.26, what most chains
/// run), the last is the seed (v0.39.4); three release lines in all.
pub const LAYOUT: [GoVersion; 5] = [
    GoVersion::V038,
    GoVersion::V039,
    GoVersion::V040,
    GoVersion::V038,
    GoVersion::V039,
];

/// `timeout_commit` of every node: a block about every 300 ms.
pub const TIMEOUT_COMMIT: &str = "300ms";

/// One node of a [`Network`].
pub struct NetNode {
    /// Its place in the line (0: makes the chain).
    pub index: usize,
    /// Its release.
    pub release: GoVersion,
    /// `node-<index>`.
    pub moniker: String,
    /// Whether it runs in seed mode (the last node).
    pub seed: bool,
    /// The node: its ID (`node_id`), P2P address (`p2p_addr`), RPC
    /// address (`rpc_laddr`), version as it announces it (`version`), and
    /// its log (`log`, `log_tail`, `wait_for_log`).
    pub node: Node,
}

impl NetNode {
    /// `ID@127.0.0.1:PORT`, as `persistent_peers` and `seeds` take it.
    pub fn address(&self) -> String {
        format!("{}@{}", self.node.node_id, self.node.p2p_addr)
    }

    /// Its peers, from its own RPC `net_info`; `None` while the RPC does
    /// not answer (or answers something else).
    pub fn peers(&self) -> Option<Vec<NetPeer>> {
        self.node.peers()
    }

    /// Its latest block height (`/status`); `None` while the RPC does not
    /// answer.
    pub fn height(&self) -> Option<i64> {
        self.node.height()
    }
}

/// A running network; see the module docs.
pub struct Network {
    /// In line order.
    pub nodes: Vec<NetNode>,
    /// The chain ID every node shares (node 0's genesis file).
    pub chain_id: String,
}

impl Network {
    /// Start one node per entry of `layout` (at least two) as the module
    /// docs say; `None` (after a notice) without Go, unless `CI=true`.
    pub fn start(layout: &[GoVersion], test: &str) -> Option<Network> {
        assert!(layout.len() >= 2, "a network needs two nodes at least");
        // Build (or find) every binary before starting any node.
        let bins: Vec<_> = layout
            .iter()
            .map(|&v| node_binary(v, test))
            .collect::<Option<_>>()?;
        let mut nodes: Vec<NetNode> = Vec::with_capacity(layout.len());
        let mut genesis: Option<PathBuf> = None;
        for (index, bin) in bins.iter().enumerate() {
            let seed = index + 1 == layout.len();
            let moniker = format!("node-{index}");
            let peers = nodes.last().map(NetNode::address).unwrap_or_default();
            let extra = [
                ("", "moniker", format!("{moniker:?}")),
                ("p2p", "persistent_peers", format!("{peers:?}")),
                ("p2p", "pex", "true".into()),
                ("p2p", "seed_mode", seed.to_string()),
                ("consensus", "create_empty_blocks", "true".into()),
                ("consensus", "create_empty_blocks_interval", "\"0s\"".into()),
                ("consensus", "timeout_commit", format!("{TIMEOUT_COMMIT:?}")),
            ];
            let node = Node::start_with(bin, &extra, genesis.as_deref());
            if let Some(first) = nodes.first() {
                assert_eq!(
                    node.network, first.node.network,
                    "{test}: node {index} is on another chain"
                );
            }
            genesis.get_or_insert_with(|| node.home.join("config/genesis.json"));
            nodes.push(NetNode {
                index,
                release: bin.version,
                moniker,
                seed,
                node,
            });
        }
        let chain_id = nodes[0].node.network.clone();
        Some(Network { nodes, chain_id })
    }

    /// The IDs of node `i`'s neighbours in the line.
    pub fn neighbours(&self, i: usize) -> Vec<&str> {
        let mut ids = Vec::new();
        if i > 0 {
            ids.push(self.nodes[i - 1].node.node_id.as_str());
        }
        if let Some(next) = self.nodes.get(i + 1) {
            ids.push(next.node.node_id.as_str());
        }
        ids
    }

    /// The nodes whose `net_info` lacks a neighbour, with what they see.
    pub fn unlinked(&self) -> Vec<(usize, Option<Vec<NetPeer>>)> {
        (0..self.nodes.len())
            .filter_map(|i| {
                let peers = self.nodes[i].peers();
                let linked = peers.as_ref().is_some_and(|peers| {
                    self.neighbours(i)
                        .iter()
                        .all(|id| peers.iter().any(|p| p.id == *id))
                });
                (!linked).then_some((i, peers))
            })
            .collect()
    }

    /// Wait up to `limit` until every node's `net_info` lists its
    /// neighbours; how long that took. Fails (with what each unlinked node
    /// saw and its log's tail) otherwise, or if a node exits.
    pub fn wait_line(&self, limit: Duration) -> Duration {
        let start = Instant::now();
        loop {
            let unlinked = self.unlinked();
            if unlinked.is_empty() {
                return start.elapsed();
            }
            for n in &self.nodes {
                n.node.check_running("we waited for the line to link up");
            }
            if start.elapsed() >= limit {
                let (i, seen) = &unlinked[0];
                self.nodes[*i].node.fail(&format!(
                    "not linked within {limit:?}: node {i} sees {seen:?}, wants {:?}; unlinked: {:?}",
                    self.neighbours(*i),
                    unlinked.iter().map(|u| u.0).collect::<Vec<_>>()
                ));
            }
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// Wait up to `limit` until every node reports a height of at least
    /// `min`; how long that took. Fails otherwise, or if a node exits.
    pub fn wait_height(&self, min: i64, limit: Duration) -> Duration {
        let start = Instant::now();
        loop {
            let behind: Vec<(usize, Option<i64>)> = self
                .nodes
                .iter()
                .map(|n| (n.index, n.height()))
                .filter(|(_, h)| !h.is_some_and(|h| h >= min))
                .collect();
            if behind.is_empty() {
                return start.elapsed();
            }
            for n in &self.nodes {
                n.node.check_running("we waited for blocks");
            }
            if start.elapsed() >= limit {
                let (i, _) = behind[0];
                self.nodes[i].node.fail(&format!(
                    "height {min} not reached within {limit:?}: (node, height) behind: {behind:?}"
                ));
            }
            thread::sleep(Duration::from_millis(100));
        }
    }
}
