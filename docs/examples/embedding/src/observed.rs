// Generated from a Rust block of docs/embedding.md; edit the document.
use p2p_conn::io::queue::Sender;
use p2p_conn::stats::ConnStats;
use p2p_conn::{Config, Identity};
use tracing::Instrument;

async fn observed(identity: &Identity, addr: std::net::SocketAddr) -> Result<(), p2p_conn::Error> {
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    // The handshake's events carry this span's `addr`.
    let conn = p2p_conn::io::tokio::handshake(tcp, identity, &Config::default())
        .instrument(tracing::debug_span!("peer", %addr))
        .await?;
    let peer = conn.remote_node_id();
    let (read, write) = conn.into_split();
    let sender = Sender::with_addr(write, Some(addr), &Default::default())?;
    // … hand `sender` to the reactors and `read` to a reader task; then,
    // every few seconds:
    let q = sender.stats();
    println!("{peer}: {q}"); // "queue: 1200 messages in 10 batches (…)", then its send line
    let both = ConnStats::new(q.send, read.stats().recv);
    println!("{peer}: {both}"); // "send: 1 s of sealing needed 0.83 s of socket write (…)"
    Ok(())
}
