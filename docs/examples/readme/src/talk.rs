// Generated from a Rust block of README.md; edit the document.
use p2p_conn::{io::tokio::handshake, Config, NodeId};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn talk(peer: NodeId) -> Result<(), Box<dyn std::error::Error>> {
    let identity = p2p_conn::keyfile::load("node_key.json")?;
    let tcp = tokio::net::TcpStream::connect("127.0.0.1:26656").await?;
    let config = Config::default().expect_peer(peer); // fails with Error::PeerIdMismatch otherwise
    let conn = handshake(tcp, &identity, &config).await?;
    let (mut rx, mut tx) = conn.into_split(); // TcpStream's own halves: no lock
    tx.write_all(b"ping").await?;
    tx.flush().await?;
    let mut buf = [0u8; 4];
    rx.read_exact(&mut buf).await?;
    Ok(())
}
