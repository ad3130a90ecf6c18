// Generated from a Rust block of docs/embedding.md; edit the document.
use p2p_conn::io::queue::{Bytes, Overflow, QueueConfig, Sender};
use p2p_conn::io::tokio::handshake;
use p2p_conn::{Config, Identity, NodeId};
use tokio::io::{AsyncRead, AsyncReadExt};

async fn connect(identity: &Identity, peer: NodeId, addr: &str) -> Result<Sender, p2p_conn::Error> {
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?; // as CometBFT (Go sets it on every TCP connection)
    let peer_addr = tcp.peer_addr().ok();
    let config = Config::default().expect_peer(peer);
    let conn = handshake(tcp, identity, &config).await?;
    let (rx, tx) = conn.into_split();
    // One sender per connection; clone it into every reactor. Its settings
    // are its own, checked here.
    let queue = QueueConfig::default()
        .max_pending_bytes(1 << 20) // per peer; the default
        .overflow(Overflow::Disconnect); // a peer that stops reading is dropped
    let sender = Sender::with_addr(tx, peer_addr, &queue)?;
    tokio::spawn(async move {
        // Ok at a clean end of stream (not authenticated: your protocol
        // says when it is done), Err when the peer broke the framing or
        // the connection failed.
        let _end = read_messages(rx, |msg| {
            // ... hand `msg` to its reactor ...
            drop(msg);
        })
        .await;
    });
    Ok(sender)
}

/// The reader task's loop, for messages framed as a 4-byte big-endian
/// length and then that many bytes (`framed` below; MConnection frames its
/// packets with a uvarint length instead). The stream carries no message
/// boundaries and the send queue packs frames across messages, so a message
/// can end in the middle of what one read returns: read by length, never
/// chunk by chunk.
async fn read_messages<R: AsyncRead + Unpin>(
    mut rx: R,
    mut handle: impl FnMut(Vec<u8>),
) -> std::io::Result<()> {
    const MAX_MESSAGE: usize = 1 << 20; // refused before anything is allocated
    loop {
        let mut len = [0u8; 4];
        let got = rx.read(&mut len).await?;
        if got == 0 {
            return Ok(()); // end of stream between two messages
        }
        rx.read_exact(&mut len[got..]).await?; // an end inside a message is an error
        let len = u32::from_be_bytes(len) as usize;
        if len > MAX_MESSAGE {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "message too large"));
        }
        let mut msg = vec![0; len];
        rx.read_exact(&mut msg).await?;
        handle(msg);
    }
}

/// One message as `read_messages` reads it: its length, then its bytes, as
/// a bundle (contiguous on the wire, never split by another producer's
/// message).
fn framed(msg: &'static [u8]) -> [Bytes; 2] {
    let len = u32::try_from(msg.len()).expect("message under 4 GiB");
    [Bytes::copy_from_slice(&len.to_be_bytes()), Bytes::from_static(msg)]
}

async fn reactors(sender: Sender) {
    // From anywhere, concurrently:
    sender.send_bundle(framed(b"vote")).await.ok();
    // Messages that must stay together on the wire: one bundle.
    let [l1, m1] = framed(b"part 1");
    let [l2, m2] = framed(b"part 2");
    sender.send_bundle([l1, m1, l2, m2]).await.ok();
    // Leaving: queue the reason, then shut down (returns at once; the FIN
    // follows once the queue drains, or after `shutdown_timeout`).
    sender.send_bundle(framed(b"bye: shutting down")).await.ok();
    sender.shutdown();
}
