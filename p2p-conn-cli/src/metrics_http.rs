//! Prometheus's text format over a plain HTTP/1.1 responder: GET
//! /metrics, one response per connection, for `signer --metrics` and
//! `seed --metrics`. What is rendered is the caller's.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::inbound;

/// What renders the metrics' text, called once per request.
pub type Render = Arc<dyn Fn() -> String + Send + Sync>;

/// Most connections open at once, and from one IP address ([`inbound`]:
/// when full, the oldest still sending its request is closed).
const LIMITS: inbound::Limits = inbound::Limits {
    max_open: 32,
    max_per_ip: 8,
};

/// Serve GET /metrics on `listener` until dropped: one response per
/// connection, requests read up to 8 KiB within 5 s, at most [`LIMITS`]
/// connections open.
pub async fn serve(listener: tokio::net::TcpListener, render: Render) {
    inbound::serve(listener, inbound::Gate::new(LIMITS), move |mut conn, _, pass| {
        let render = render.clone();
        async move {
            let mut req = Vec::with_capacity(512);
            let read = async {
                let mut buf = [0u8; 1024];
                while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 8192 {
                    let n = conn.read(&mut buf).await?;
                    if n == 0 {
                        break;
                    }
                    req.extend_from_slice(&buf[..n]);
                }
                Ok::<_, std::io::Error>(())
            };
            if tokio::time::timeout(Duration::from_secs(5), read)
                .await
                .is_err()
            {
                return;
            }
            pass.serving();
            let line = req.split(|&b| b == b'\n').next().unwrap_or_default();
            let line = String::from_utf8_lossy(line);
            let mut parts = line.split_whitespace();
            let (status, body) = match (parts.next(), parts.next()) {
                (Some("GET"), Some("/metrics")) => ("200 OK", render()),
                (Some("GET"), Some(_)) => ("404 Not Found", "GET /metrics\n".to_string()),
                _ => ("405 Method Not Allowed", "GET /metrics\n".to_string()),
            };
            let head = format!(
                "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = conn.write_all(head.as_bytes()).await;
            let _ = conn.write_all(body.as_bytes()).await;
            let _ = conn.shutdown().await;
        }
    })
    .await
}

/// Bind `addr` for [`serve`] (called before anything is served, so a
/// taken port stops the command at start).
pub fn bind(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    let l = std::net::TcpListener::bind(addr)?;
    l.set_nonblocking(true)?;
    Ok(l)
}
