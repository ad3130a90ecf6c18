//! A network of real CometBFT nodes from three release lines
//! ([`p2p_conn_interop::cometbft_network`]): it links up as a line and
//! makes blocks that reach its far end.
//!
//! Without Go the test prints a notice and passes; with `CI=true` it fails.

use std::time::{Duration, Instant};

use p2p_conn_interop::cometbft_network::{Network, LAYOUT};

/// Bound on the line linking up, once every node has started.
const LINK_LIMIT: Duration = Duration::from_secs(30);

/// Bound on every node reaching [`MIN_HEIGHT`] after that.
const BLOCKS_LIMIT: Duration = Duration::from_secs(30);

/// Blocks every node must have: a few, made by node 0 and passed along the
/// line.
const MIN_HEIGHT: i64 = 3;

#[test]
fn network_peers() {
    let test = "network_peers";
    let started = Instant::now();
    let Some(net) = Network::start(&LAYOUT, test) else {
        return;
    };
    let start_time = started.elapsed();
    assert_eq!(net.nodes.len(), LAYOUT.len());
    // Distinct nodes, each announcing its release's version, one chain.
    for (i, n) in net.nodes.iter().enumerate() {
        assert_eq!(n.node.version, n.release.announces(), "{test}: node {i}");
        assert_eq!(n.node.network, net.chain_id, "{test}: node {i}");
        assert_eq!(n.seed, i + 1 == net.nodes.len(), "{test}: node {i}");
        for m in &net.nodes[..i] {
            assert_ne!(n.node.node_id, m.node.node_id, "{test}: node {i}");
            assert_ne!(n.node.p2p_addr, m.node.p2p_addr, "{test}: node {i}");
        }
    }
    let lines: std::collections::HashSet<_> = net.nodes.iter().map(|n| n.release).collect();
    assert!(lines.len() >= 2, "{test}: one release line only");

    let linked = net.wait_line(LINK_LIMIT);
    // Each node's `net_info` names its neighbours by their own monikers,
    // and the link each dialed (to its predecessor) is outbound there.
    for (i, n) in net.nodes.iter().enumerate() {
        let peers = n.peers().expect("net_info answered a moment ago");
        if i > 0 {
            let prev = &net.nodes[i - 1];
            let p = peers.iter().find(|p| p.id == prev.node.node_id).unwrap();
            assert_eq!(p.moniker, prev.moniker, "{test}: node {i}");
            assert!(p.outbound, "{test}: node {i} did not dial node {}", i - 1);
        }
    }
    let blocks = net.wait_height(MIN_HEIGHT, BLOCKS_LIMIT);
    // Still a line: no link flapped (the seed hangs up only on peers that
    // dial it, and none does).
    let unlinked = net.unlinked();
    assert!(unlinked.is_empty(), "{test}: unlinked again: {unlinked:?}");
    // No node dropped a peer for an error of its own. An `EOF` is the
    // other end hanging up (the seed after answering, a duplicate link
    // closed); if that end had an error, its own log says so here. With
    // v0.38.26 making the chain and v1.0.1 beside it, v0.38.26 stopped its
    // v1.0.1 peer every few hundred milliseconds ("unwrapping message:
    // unknown message: <nil>", a message of v1's it does not know), and
    // the line flapped.
    for (i, n) in net.nodes.iter().enumerate() {
        let log = n.node.log();
        let bad = log
            .lines()
            .find(|l| l.contains("Stopping peer for error") && !l.contains("err=EOF"));
        if let Some(line) = bad {
            panic!("{test}: node {i} ({}) {line}", n.release.label());
        }
    }
    let heights: Vec<_> = net.nodes.iter().map(|n| n.height()).collect();
    eprintln!(
        "{test}: {} nodes ({}) started in {start_time:.1?}, linked {linked:.1?} later, \
         height {MIN_HEIGHT} everywhere {blocks:.1?} after that; heights {heights:?}",
        net.nodes.len(),
        net.nodes
            .iter()
            .map(|n| n.release.label())
            .collect::<Vec<_>>()
            .join(", ")
    );
}
