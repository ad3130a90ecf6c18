// Generated from a Rust block of docs/library-guide.md; edit the document.
async fn f(tcp: tokio::net::TcpStream) -> Result<(), Box<dyn std::error::Error>> {
use p2p_conn::nodeinfo::{self, NodeInfo};
use p2p_conn::{io::tokio::handshake, Config, Identity};

let identity = Identity::generate();
let mut conn = handshake(tcp, &identity, &Config::default()).await?;
let mut ours = NodeInfo::new(identity.node_id(), "cosmoshub-4");
ours.channels = vec![0x20, 0x21, 0x22, 0x23, 0x30, 0x38, 0x40];
ours.moniker = "my-node".into();
let theirs = tokio::time::timeout(
    std::time::Duration::from_secs(20),
    nodeinfo::tokio::exchange(&mut conn, &ours),
)
.await??;
let mut broken = theirs.validate();                     // CometBFT's Validate
broken.extend(theirs.check_id(conn.remote_node_id()).err()); // ID = authenticated key
broken.extend(ours.compatible_with(&theirs));           // CompatibleWith
if !broken.is_empty() {
    for v in &broken {
        eprintln!("refusing {}: {v}", conn.remote_node_id()); // e.g. "network: ..."
    }
    return Ok(());
}
// MConnection packets follow on `conn`.
Ok(())
}
