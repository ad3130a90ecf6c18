//! The nodes' RPC, as the tests ask it.

use std::time::Duration;

/// `GET path` on the node's RPC at 127.0.0.1:`port` (HTTP/1.0, short
/// timeouts): the JSON body, or `None` if there is no answer or no JSON.
pub(super) fn rpc_get(port: u16, path: &str) -> Option<serde_json::Value> {
    use std::io::{Read, Write};
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut tcp = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    tcp.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    tcp.set_write_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(tcp, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut reply = Vec::new();
    tcp.take(1 << 20).read_to_end(&mut reply).ok()?;
    let at = reply.windows(4).position(|w| w == b"\r\n\r\n")?;
    serde_json::from_slice(&reply[at + 4..]).ok()
}
