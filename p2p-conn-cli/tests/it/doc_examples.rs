//! The documents' examples that talk to a peer, run against real `cometbft`
//! nodes. `scripts/doc-examples.py` writes each document's Rust blocks to
//! `docs/examples/` (CI builds them there with the document's own Cargo
//! line); here the same files are compiled into this test binary and
//! called with a live connection to a node, so an example a node would
//! refuse fails the suite.

use std::time::Duration;

use p2p_conn::io::tokio::handshake;
use p2p_conn::nodeinfo::{self, NodeInfo};
use p2p_conn::{Config, Identity, NodeId};
use p2p_conn_interop::cometbft_go::GoVersion;
use p2p_conn_interop::cometbft_node::{node_binary, Node};
use p2p_conn_mconn::ChannelDescriptor;

#[allow(dead_code)]
#[path = "../../../docs/examples/guide-mconn/src/ask_for_addresses.rs"]
mod guide_mconn;

/// docs/guide.md's MConnection example (`ask_for_addresses`): after our
/// handshake and a NodeInfo announcing its channels, it sends a PEX
/// request and gets the node's `PexAddrs`, and the node does not stop us.
fn guide_mconn_example_gets_addresses(version: GoVersion, test: &str) {
    let Some(bin) = node_binary(version, test) else {
        return;
    };
    let node = Node::start(&bin);
    let mark = node.log_len();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let identity = Identity::generate();
    let got = rt.block_on(async {
        let tcp = tokio::net::TcpStream::connect(&node.p2p_addr)
            .await
            .unwrap();
        let expected: NodeId = node.node_id.parse().unwrap();
        let config = Config::default().expect_peer(expected);
        let mut conn = handshake(tcp, &identity, &config).await.unwrap();
        let channels = [ChannelDescriptor::new(0x00)];
        let mut ours = NodeInfo::new(identity.node_id(), &node.network);
        ours.channels = ChannelDescriptor::ids(&channels);
        let theirs = tokio::time::timeout(
            Duration::from_secs(20),
            nodeinfo::tokio::exchange(&mut conn, &ours),
        )
        .await
        .expect("NodeInfo in time")
        .unwrap();
        assert!(ours.compatible_with(&theirs).is_empty(), "{test}");
        tokio::time::timeout(
            Duration::from_secs(30),
            guide_mconn::ask_for_addresses(conn, &channels),
        )
        .await
        .expect("an answer in time")
        .map_err(|e| e.to_string())
    });
    assert!(got.is_ok(), "{test}: {got:?}\n{}", node.log_since(mark));
    let log = node.log_since(mark);
    // Our close ends the stream, which the node may log as "Stopping peer
    // for error" with `EOF`; any other stop is the node refusing us.
    let stopped: Vec<&str> = log
        .lines()
        .filter(|l| {
            l.contains("rejected msg")
                || (l.contains("Stopping peer for error") && !l.contains("EOF"))
        })
        .collect();
    assert!(stopped.is_empty(), "{test}: {stopped:?}");
}

p2p_conn_interop::per_release! {
    v0_38: V038, v0_40: V040, v1: V1;
    [guide_mconn_example_gets_addresses]
}
