// Generated from a Rust block of docs/guide.md; edit the document.
use p2p_conn::io::tokio::SecretConnection;
use p2p_conn_mconn::{ChannelDescriptor, MConnConfig, MConnection, Received};

// `conn` after the handshake and the NodeInfo exchange (announce exactly
// these channels).
async fn run(conn: SecretConnection<tokio::net::TcpStream>) -> Result<(), Box<dyn std::error::Error>> {
    let channels = [ChannelDescriptor::new(0x20).with_priority(5), ChannelDescriptor::new(0x30)];
    let (tx, mut rx) = MConnection::spawn(conn, &channels, MConnConfig::default())?;
    tx.send(0x30, b"hello".to_vec()).await?; // waits for room; try_send does not
    while let Some(event) = rx.recv().await {
        match event {
            Received::Message { channel, data } => {
                // A whole message, reassembled.
                println!("{channel:#04x}: {} bytes", data.len());
            }
            Received::Closed(why) => eprintln!("closed: {why}"), // PongTimeout, UnknownChannel, ...
            _ => {}
        }
    }
    Ok(())
}
