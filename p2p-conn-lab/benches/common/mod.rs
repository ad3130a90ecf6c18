//! Helpers the benches and examples share (`halves.rs`, and
//! `examples/halves_cpu.rs` through `#[path]`).

use p2p_conn::io::tokio as ptokio;
use p2p_conn::{Config, Identity};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A tokio connection pair over loopback TCP (`TCP_NODELAY`), default config.
pub async fn pair() -> (
    ptokio::SecretConnection<TcpStream>,
    ptokio::SecretConnection<TcpStream>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let cfg = Config::default();
    let (a, b) = tokio::join!(
        async {
            let (tcp, _) = listener.accept().await.unwrap();
            tcp.set_nodelay(true).unwrap();
            ptokio::handshake(tcp, &Identity::generate(), &cfg).await
        },
        async {
            let tcp = TcpStream::connect(addr).await.unwrap();
            tcp.set_nodelay(true).unwrap();
            ptokio::handshake(tcp, &Identity::generate(), &cfg).await
        }
    );
    (a.unwrap(), b.unwrap())
}

/// Send `n` messages of `size` bytes on `w` while `r` reads as many bytes.
pub async fn duplex<R, W>(mut r: R, mut w: W, size: usize, n: u64)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let send = tokio::spawn(async move {
        let msg = vec![7u8; size];
        for _ in 0..n {
            w.write_all(&msg).await.unwrap();
        }
        w.flush().await.unwrap();
        w
    });
    let recv = tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        let mut left = size as u64 * n;
        while left > 0 {
            let k = r.read(&mut buf).await.unwrap();
            assert!(k > 0, "stream ended early");
            left -= k as u64;
        }
        r
    });
    let (_w, _r) = (send.await.unwrap(), recv.await.unwrap());
}
