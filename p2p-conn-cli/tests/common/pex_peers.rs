//! Fake PEX peers on loopback, for the seed's tests: each a p2p-conn node
//! of its own identity (the handshake, the NodeInfo exchange on a given
//! network, MConnection with the PEX channel) that answers every
//! `PexRequest` with a fixed list and holds the connection until the other
//! side closes it. They keep no PEX rules of their own.

use std::net::SocketAddr;
use std::sync::Arc;

use p2p_conn::io::tokio as ptokio;
use p2p_conn::nodeinfo::{self, NodeInfo};
use p2p_conn::{Config, Identity};
use p2p_conn_mconn::pex::{NetAddress, PexMessage, MAX_PEX_MESSAGE_SIZE, PEX_CHANNEL};
use p2p_conn_mconn::{ChannelDescriptor, MConnConfig, MConnection, Received};

/// Starts `n` peers on `network`, on a thread of their own that lives as
/// long as the test process; peer `i` answers with `answer(i, all)`, where
/// `all` holds every peer's address. Returns `all`.
pub fn spawn(
    network: &str,
    n: usize,
    answer: impl Fn(usize, &[NetAddress]) -> Vec<NetAddress>,
) -> Vec<NetAddress> {
    let mut listeners = Vec::with_capacity(n);
    let mut all = Vec::with_capacity(n);
    for _ in 0..n {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let identity = Identity::generate();
        let addr = l.local_addr().unwrap();
        all.push(NetAddress {
            id: identity.node_id().to_string(),
            ip: addr.ip().to_string(),
            port: u32::from(addr.port()),
        });
        listeners.push((l, identity, addr));
    }
    let peers: Vec<_> = listeners
        .into_iter()
        .enumerate()
        .map(|(i, (l, identity, addr))| {
            let bytes = PexMessage::Addrs(answer(i, &all)).encode();
            assert!(bytes.len() <= MAX_PEX_MESSAGE_SIZE, "answer {i} too large");
            (l, Arc::new(identity), addr, Arc::new(bytes))
        })
        .collect();
    let network = network.to_string();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            for (l, identity, addr, bytes) in peers {
                let l = tokio::net::TcpListener::from_std(l).unwrap();
                let network = network.clone();
                tokio::spawn(async move {
                    while let Ok((tcp, _)) = l.accept().await {
                        let (identity, bytes) = (Arc::clone(&identity), Arc::clone(&bytes));
                        let network = network.clone();
                        tokio::spawn(async move {
                            let _ = serve(tcp, &identity, addr, &network, &bytes).await;
                        });
                    }
                });
            }
            std::future::pending::<()>().await;
        });
    });
    all
}

async fn serve(
    tcp: tokio::net::TcpStream,
    identity: &Identity,
    addr: SocketAddr,
    network: &str,
    answer: &[u8],
) -> Result<(), Box<dyn std::error::Error>> {
    let _ = tcp.set_nodelay(true);
    let mut sc = ptokio::handshake(tcp, identity, &Config::default()).await?;
    let mut ours = NodeInfo::new(identity.node_id(), network.to_string());
    ours.listen_addr = addr.to_string();
    ours.channels = vec![PEX_CHANNEL];
    nodeinfo::tokio::write(&mut sc, &ours).await?;
    let _ = nodeinfo::tokio::read(&mut sc).await?;
    let pex = ChannelDescriptor::new(PEX_CHANNEL).with_recv_message_capacity(MAX_PEX_MESSAGE_SIZE);
    let (tx, mut rx) = MConnection::spawn(sc, &[pex], MConnConfig::default())?;
    while let Some(event) = rx.recv().await {
        match event {
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
