//! A fake CometBFT network for crawl benchmarks: N nodes in this one
//! process, each its own identity and loopback listener, each speaking
//! what a crawler meets (the secret-connection handshake, the NodeInfo
//! exchange, MConnection with the PEX channel) and answering a
//! `PexRequest` with the addresses of K other nodes and J junk addresses
//! (made-up IDs at IPv6 documentation addresses, 2001:db8::/32, which
//! CometBFT's `NetAddress.Valid` refuses, so no crawler follows them even
//! with unroutable addresses allowed), so that answers can be as large as CometBFT allows while the
//! network stays N nodes. Real nodes cost too much for thousands.
//!
//! `cargo run --release -p p2p-conn-lab --bin fake-pex-network -- N K J [S]`
//!
//! With S, each node also lists the state-sync channel (`0x60`), as every
//! CometBFT node does, and answers a `SnapshotsRequest` with S snapshots
//! (0: nothing, as the kvstore application, whose crawler waits the
//! longest for a listing that never comes).
//!
//! Prints `seed ID@127.0.0.1:PORT` (node 0) and `ready N` on stdout, then
//! serves until stdin ends. Node i reports nodes i+1 .. i+K (mod N), so a
//! crawl from node 0 reaches every node. Each node answers every request
//! (it keeps no PEX rules of its own: the crawler's politeness is not
//! under test here) and holds a connection until the peer closes it.

use std::io::BufRead;
use std::net::SocketAddr;
use std::sync::Arc;

use p2p_conn::io::tokio as ptokio;
use p2p_conn::nodeinfo::{self, NodeInfo};
use p2p_conn::{Config, Identity, NodeId};
use p2p_conn_mconn::pex::{NetAddress, PexMessage, MAX_PEX_MESSAGE_SIZE, PEX_CHANNEL};
use p2p_conn_mconn::statesync::{Snapshot, StatesyncMessage, SNAPSHOT_CHANNEL};
use p2p_conn_mconn::{ChannelDescriptor, MConnConfig, MConnection, Received};
use tokio::net::TcpListener;

const NETWORK: &str = "fake-chain";

struct Node {
    identity: Identity,
    addr: SocketAddr,
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("N K J: numbers"))
        .collect();
    let (n, k, j, snapshots) = match args[..] {
        [n, k, j] => (n, k, j, None),
        [n, k, j, s] => (n, k, j, Some(s)),
        _ => panic!("usage: fake-pex-network N K J [S]"),
    };
    // The listing each node sends, one message per snapshot.
    let listing: Arc<Option<Vec<Vec<u8>>>> = Arc::new(snapshots.map(|s| {
        (0..s as u64)
            .map(|h| {
                StatesyncMessage::SnapshotsResponse(Snapshot {
                    height: 1000 - 10 * h,
                    format: 1,
                    chunks: 1,
                    hash: vec![0xab; 32],
                    metadata_len: 0,
                })
                .encode()
            })
            .collect()
    }));
    assert!(n >= 2 && k < n, "need N >= 2 and K < N");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let mut listeners = Vec::with_capacity(n);
        let mut nodes = Vec::with_capacity(n);
        for _ in 0..n {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            nodes.push(Node {
                identity: Identity::generate(),
                addr: l.local_addr().unwrap(),
            });
            listeners.push(l);
        }
        let ids: Vec<NodeId> = nodes.iter().map(|n| n.identity.node_id()).collect();
        let addrs: Vec<SocketAddr> = nodes.iter().map(|n| n.addr).collect();
        let nodes = Arc::new(nodes);
        for (i, l) in listeners.into_iter().enumerate() {
            let answer: Vec<NetAddress> = (1..=k)
                .map(|d| (i + d) % n)
                .map(|o| NetAddress {
                    id: ids[o].to_string(),
                    ip: addrs[o].ip().to_string(),
                    port: u32::from(addrs[o].port()),
                })
                .chain((0..j).map(|x| NetAddress {
                    id: Identity::generate().node_id().to_string(),
                    ip: format!("2001:db8::{:x}", x + 1),
                    port: 26656,
                }))
                .collect();
            let answer = Arc::new(PexMessage::Addrs(answer).encode());
            assert!(answer.len() <= MAX_PEX_MESSAGE_SIZE, "answer too large");
            let nodes = Arc::clone(&nodes);
            let listing = Arc::clone(&listing);
            tokio::spawn(async move {
                while let Ok((tcp, _)) = l.accept().await {
                    let nodes = Arc::clone(&nodes);
                    let answer = Arc::clone(&answer);
                    let listing = Arc::clone(&listing);
                    tokio::spawn(async move {
                        let _ =
                            serve(tcp, &nodes[i], i, &answer, listing.as_ref().as_deref()).await;
                    });
                }
            });
        }
        println!("seed {}@{}", ids[0], addrs[0]);
        println!("ready {n}");
        tokio::task::spawn_blocking(|| for _ in std::io::stdin().lock().lines() {})
            .await
            .unwrap();
    });
}

async fn serve(
    tcp: tokio::net::TcpStream,
    me: &Node,
    i: usize,
    answer: &[u8],
    listing: Option<&[Vec<u8>]>,
) -> Result<(), Box<dyn std::error::Error>> {
    let _ = tcp.set_nodelay(true);
    let mut sc = ptokio::handshake(tcp, &me.identity, &Config::default()).await?;
    let mut ours = NodeInfo::new(me.identity.node_id(), NETWORK.to_string());
    ours.listen_addr = me.addr.to_string();
    ours.moniker = format!("fake-{i}");
    ours.channels = vec![PEX_CHANNEL];
    let mut channels =
        vec![ChannelDescriptor::new(PEX_CHANNEL).with_recv_message_capacity(MAX_PEX_MESSAGE_SIZE)];
    if listing.is_some() {
        ours.channels.push(SNAPSHOT_CHANNEL);
        channels.push(ChannelDescriptor::new(SNAPSHOT_CHANNEL));
    }
    nodeinfo::tokio::write(&mut sc, &ours).await?;
    let _theirs = nodeinfo::tokio::read(&mut sc).await?;
    let (tx, mut rx) = MConnection::spawn(sc, &channels, MConnConfig::default())?;
    while let Some(event) = rx.recv().await {
        match event {
            Received::Message { channel, data } if channel == SNAPSHOT_CHANNEL => {
                if let Ok(StatesyncMessage::SnapshotsRequest) =
                    StatesyncMessage::decode(&data, MAX_PEX_MESSAGE_SIZE)
                {
                    for s in listing.unwrap_or_default() {
                        tx.send(SNAPSHOT_CHANNEL, s.clone()).await?;
                    }
                }
            }
            Received::Message { data, .. } => {
                if let Ok(PexMessage::Request) = PexMessage::decode(&data) {
                    tx.send(PEX_CHANNEL, answer.to_vec()).await?;
                }
            }
            Received::Closed(_) => break,
            _ => {}
        }
    }
    Ok(())
}
