//! A scripted peer: a real p2p-conn connection that, after the handshake,
//! writes exactly the bytes a test gives it through the secret connection,
//! then holds the connection open (or closes it) as the test says. The
//! library's NodeInfo tests read from it with the library; the CLI's tests
//! point `p2p-conn probe` at it.

use std::net::SocketAddr;
use std::time::Duration;

use p2p_conn::io::tokio as ptokio;
use p2p_conn::{Config, Identity, NodeId};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How the scripted peer ends after its bytes.
#[derive(Clone, Copy)]
pub enum Then {
    /// Keep the connection open (until the test drops it).
    Hold,
    /// Half-close right away.
    Close,
}

/// A scripted peer on a loopback listener: handshakes with its own key,
/// then writes `bytes(its node ID)` through the secret connection and does
/// `then`. Returns its address and ID; it serves one connection. Runs as a
/// task on the caller's tokio runtime.
pub async fn scripted_peer(
    bytes: impl FnOnce(NodeId) -> Vec<u8> + Send + 'static,
    then: Then,
) -> (SocketAddr, NodeId) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let id = Identity::generate();
    let node_id = id.node_id();
    tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let Ok(mut conn) = ptokio::handshake(tcp, &id, &Config::default()).await else {
            return;
        };
        let _ = conn.write_all(&bytes(node_id)).await;
        let _ = conn.flush().await;
        match then {
            Then::Close => {
                let _ = conn.shutdown().await;
                let mut sink = Vec::new();
                let _ = conn.read_to_end(&mut sink).await;
            }
            Then::Hold => tokio::time::sleep(Duration::from_secs(60)).await,
        }
    });
    (addr, node_id)
}
