// Generated from a Rust block of docs/guide.md; edit the document.
use p2p_conn::io::tokio::SecretConnection;
use p2p_conn_mconn::pex::PexMessage;
use p2p_conn_mconn::{ChannelDescriptor, MConnConfig, MConnection, Received};

/// `conn` after the handshake and the NodeInfo exchange, which announced
/// `ChannelDescriptor::ids(&channels)`: here only PEX (0x00).
pub async fn ask_for_addresses(
    conn: SecretConnection<tokio::net::TcpStream>,
    channels: &[ChannelDescriptor],
) -> Result<usize, Box<dyn std::error::Error>> {
    let (tx, mut rx) = MConnection::spawn(conn, channels, MConnConfig::default())?;
    // Each channel carries its reactor's protobuf messages; a node stops a
    // peer whose message it cannot decode.
    tx.send(0x00, PexMessage::Request.encode()).await?; // waits for room; try_send does not
    while let Some(event) = rx.recv().await {
        match event {
            Received::Message { data, .. } => {
                // A whole message, reassembled (0x00 is our only channel).
                if let PexMessage::Addrs(addrs) = PexMessage::decode(&data)? {
                    println!("{}", tx.stats()); // pings, pongs, bytes, one line per channel
                    tx.close(); // returns at once; `Closed` follows
                    return Ok(addrs.len());
                }
            }
            Received::Closed(why) => return Err(why.into()), // PongTimeout, PeerClosed { .. }, ...
            _ => {}
        }
    }
    Err("closed".into())
}
