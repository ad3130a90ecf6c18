//! Loopback TCP pairs: one connection's two ends, raw or handshaken by an
//! adapter with fresh identities. `TCP_NODELAY` is on at both ends, as
//! CometBFT sets it on every connection.

use std::net::{TcpListener, TcpStream};

use crate::io::{blocking, tokio as ptokio};
use crate::{Config, Identity};

/// The two ends of one loopback std connection: (dialed, accepted).
pub fn std_tcp_pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    let dialed = TcpStream::connect(listener.local_addr().expect("local addr")).expect("connect");
    let (accepted, _) = listener.accept().expect("accept");
    for s in [&dialed, &accepted] {
        s.set_nodelay(true).expect("TCP_NODELAY");
    }
    (dialed, accepted)
}

/// The two ends of one loopback tokio connection: (dialed, accepted).
pub async fn tokio_tcp_pair() -> (tokio::net::TcpStream, tokio::net::TcpStream) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("local addr");
    let (accepted, dialed) = tokio::join!(listener.accept(), tokio::net::TcpStream::connect(addr));
    let (accepted, dialed) = (accepted.expect("accept").0, dialed.expect("connect"));
    for s in [&dialed, &accepted] {
        s.set_nodelay(true).expect("TCP_NODELAY");
    }
    (dialed, accepted)
}

/// Both ends of one loopback connection, handshaken by the tokio adapter
/// with fresh identities and `cfg`: (accepting end, dialing end).
pub async fn tokio_secret_pair(
    cfg: &Config,
) -> (
    ptokio::SecretConnection<tokio::net::TcpStream>,
    ptokio::SecretConnection<tokio::net::TcpStream>,
) {
    let (dialed, accepted) = tokio_tcp_pair().await;
    let (ia, ib) = (Identity::generate(), Identity::generate());
    let (a, b) = tokio::join!(
        ptokio::handshake(accepted, &ia, cfg),
        ptokio::handshake(dialed, &ib, cfg)
    );
    (
        a.expect("accepting end's handshake"),
        b.expect("dialing end's handshake"),
    )
}

/// Both ends of one loopback connection, handshaken by the std adapter
/// (the dialing end on a helper thread) with fresh identities and `cfg`:
/// (accepting end, dialing end).
pub fn std_secret_pair(
    cfg: &Config,
) -> (
    blocking::SecretConnection<TcpStream>,
    blocking::SecretConnection<TcpStream>,
) {
    let (dialed, accepted) = std_tcp_pair();
    let (ia, ib) = (Identity::generate(), Identity::generate());
    std::thread::scope(|s| {
        let dialer = s.spawn(|| blocking::handshake(dialed, &ib, cfg));
        let a = blocking::handshake(accepted, &ia, cfg).expect("accepting end's handshake");
        let b = dialer
            .join()
            .expect("dialing thread")
            .expect("dialing end's handshake");
        (a, b)
    })
}
