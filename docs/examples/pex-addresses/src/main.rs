// Generated from a Rust block of docs/library-guide.md; edit the document.
#![deny(warnings)]
//! Dial a CometBFT node, exchange NodeInfo, run MConnection, ask for PEX
//! addresses and print them: `cargo run -- ID@HOST:PORT`.

use std::time::Duration;

use p2p_conn::io::tokio::handshake;
use p2p_conn::nodeinfo::{self, NodeInfo};
use p2p_conn::{Config, Identity, NodeId};
use p2p_conn_mconn::pex::{AddrPolicy, PexMessage, MAX_PEX_MESSAGE_SIZE, PEX_CHANNEL};
use p2p_conn_mconn::{ChannelDescriptor, MConnConfig, MConnection, Received};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let usage = "usage: pex-addresses ID@HOST:PORT";
    let arg = std::env::args().nth(1).ok_or(usage)?;
    let (id, addr) = arg.split_once('@').ok_or("the address is ID@HOST:PORT")?;
    let expected: NodeId = id.parse()?;
    let step = Duration::from_secs(20); // CometBFT's handshake timeout, per step

    // 1. The secret connection, to the node the address names.
    let identity = Identity::generate(); // or p2p_conn::keyfile::load("node_key.json")?
    let tcp = tokio::time::timeout(step, tokio::net::TcpStream::connect(addr)).await??;
    tcp.set_nodelay(true)?;
    let config = Config::default().expect_peer(expected);
    let mut conn = handshake(tcp, &identity, &config).await?; // within its handshake_timeout, 20 s

    // 2. NodeInfo: read the node's, then announce its network and exactly
    //    the channels MConnection will run. A channel is a descriptor:
    //    its ID, then optionally its priority and its caps, e.g.
    //    ChannelDescriptor::new(0x20).with_priority(5).with_recv_message_capacity(1 << 20).
    //    PEX as CometBFT declares it: a PexAddrs is at most 64000 bytes.
    let channels = [ChannelDescriptor::new(PEX_CHANNEL)
        .with_priority(1)
        .with_recv_message_capacity(MAX_PEX_MESSAGE_SIZE)];
    let theirs = tokio::time::timeout(step, nodeinfo::tokio::read(&mut conn)).await??;
    let mut ours = NodeInfo::new(identity.node_id(), &theirs.network);
    ours.moniker = "pex-addresses".into();
    ours.channels = ChannelDescriptor::ids(&channels);
    tokio::time::timeout(step, nodeinfo::tokio::write(&mut conn, &ours)).await??;
    let mut broken = theirs.validate(); // CometBFT's rules, each by name
    broken.extend(theirs.check_id(conn.remote_node_id()).err());
    broken.extend(ours.compatible_with(&theirs));
    if let Some(rule) = broken.first() {
        return Err(format!("refusing the node: {rule}").into());
    }
    let channel_ids: Vec<String> = theirs.channels.iter().map(|c| format!("{c:02x}")).collect();
    println!("node      {}", conn.remote_node_id());
    println!("moniker   {}", theirs.moniker);
    println!("network   {}", theirs.network);
    println!("version   {}", theirs.version);
    println!("listen    {}", theirs.listen_addr);
    println!("channels  {}", channel_ids.join(" "));

    // 3. MConnection on our channels: one PexRequest, then its PexAddrs.
    let (tx, mut rx) = MConnection::spawn(conn, &channels, MConnConfig::default())?;
    tx.send(PEX_CHANNEL, PexMessage::Request.encode()).await?;
    let addrs = loop {
        match tokio::time::timeout(step, rx.recv()).await? {
            Some(Received::Message { data, .. }) => {
                if let PexMessage::Addrs(addrs) = PexMessage::decode(&data)? {
                    break addrs;
                }
            }
            Some(Received::Closed(why)) => return Err(why.into()),
            Some(_) => {} // `Received` is #[non_exhaustive]
            None => return Err("the connection ended".into()),
        }
    };
    tx.close(); // returns at once; `Closed` follows once the FIN is sent
    while let Some(event) = rx.recv().await {
        if let Received::Closed(_) = event {
            break;
        }
    }

    // 4. The addresses, checked as a node's address book checks them.
    println!("addresses {}", addrs.len());
    for addr in &addrs {
        match addr.validate(AddrPolicy::AcceptUnroutable) {
            Ok(peer) if peer.is_routable() => println!("  {peer}"),
            Ok(peer) => println!("  {peer} (not publicly routable)"),
            Err(why) => println!("  {addr} refused: {why}"),
        }
    }
    Ok(())
}
