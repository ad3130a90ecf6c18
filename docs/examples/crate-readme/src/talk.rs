// Generated from a Rust block of p2p-conn/README.md; edit the document.
use p2p_conn::{io::tokio::handshake, Config, Identity};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn talk() -> Result<(), p2p_conn::Error> {
    let identity = Identity::generate();
    let tcp = tokio::net::TcpStream::connect("127.0.0.1:26656").await?;
    let conn = handshake(tcp, &identity, &Config::default()).await?;
    println!("peer {}", conn.remote_node_id());
    let (mut rx, mut tx) = conn.into_split();
    tx.write_all(b"ping").await?;
    tx.flush().await?;
    let mut buf = [0u8; 4];
    rx.read_exact(&mut buf).await?;
    Ok(())
}
