//! The one connection type both sides run over: a secret connection over
//! TCP, a buffered plaintext Unix socket, or a Noise session; and the read and write of one
//! message under a timeout.

use std::time::Duration;

use tokio::io::{AsyncBufRead, AsyncWrite, BufReader};
use tokio::net::{TcpStream, UnixStream};

use super::EndpointError;
use crate::{decode_body, tokio as pvio, Frames, Message, PrivvalError};
use p2p_conn::io::tokio::poll_decode as poll_feed;
use p2p_conn::io::tokio::SecretConnection;
use p2p_conn::{Identity, NodeId, PeerId};

/// A stream privval messages travel over.
pub(crate) trait Io: AsyncBufRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncBufRead + AsyncWrite + Unpin + Send> Io for T {}

/// An established connection and its message decoder.
pub(crate) struct Conn {
    io: Box<dyn Io>,
    frames: Frames,
    /// The peer's node ID (secret connections only).
    pub peer: Option<NodeId>,
    /// The peer's libp2p identity (`noise://` only).
    pub libp2p: Option<PeerId>,
}

impl Conn {
    pub fn new(io: Box<dyn Io>, limit: usize, peer: Option<NodeId>) -> Conn {
        Conn {
            io,
            frames: Frames::new(limit),
            peer,
            libp2p: None,
        }
    }

    /// This connection's peer proved libp2p identity `peer`.
    #[cfg_attr(not(feature = "noise"), allow(dead_code))]
    pub fn with_libp2p(mut self, peer: PeerId) -> Conn {
        self.libp2p = Some(peer);
        self
    }

    /// A secret connection over `tcp`, authenticated as `identity`;
    /// `expect` pins the peer's ID.
    pub async fn secret(
        tcp: TcpStream,
        identity: &Identity,
        expect: Option<NodeId>,
        handshake_timeout: Duration,
        limit: usize,
    ) -> Result<Conn, EndpointError> {
        let _ = tcp.set_nodelay(true);
        let mut config = p2p_conn::Config::default().handshake_timeout(handshake_timeout);
        if let Some(id) = expect {
            config = config.expect_peer(id);
        }
        let conn = p2p_conn::io::tokio::handshake(tcp, identity, &config)
            .await
            .map_err(EndpointError::Handshake)?;
        let peer = conn.remote_node_id();
        let io: Box<SecretConnection<TcpStream>> = Box::new(conn);
        Ok(Conn::new(io, limit, Some(peer)))
    }

    /// A plaintext Unix socket.
    pub fn plain(unix: UnixStream, limit: usize) -> Conn {
        Conn::new(Box::new(BufReader::new(unix)), limit, None)
    }

    /// Reads one message within `timeout`. A well-framed body that does
    /// not decode ([`PrivvalError::Malformed`],
    /// [`PrivvalError::UnknownMessage`]) leaves the stream in step (its
    /// bytes were taken): it comes back as `Ok(Err(_))` and the connection
    /// reads on. Anything else ends the connection.
    pub async fn read(
        &mut self,
        timeout: Duration,
    ) -> Result<Result<Message, PrivvalError>, EndpointError> {
        let frames = &mut self.frames;
        let io = &mut self.io;
        let body = std::future::poll_fn(|cx| poll_feed(std::pin::Pin::new(&mut *io), cx, frames));
        match tokio::time::timeout(timeout, body).await {
            Err(_) => Err(EndpointError::timeout("read", timeout)),
            Ok(Ok(body)) => Ok(decode_body(&body)),
            Ok(Err(e)) => Err(e.into()),
        }
    }

    /// Writes one message within `timeout`.
    pub async fn write(&mut self, msg: &Message, timeout: Duration) -> Result<(), EndpointError> {
        match tokio::time::timeout(timeout, pvio::write(&mut self.io, msg)).await {
            Err(_) => Err(EndpointError::timeout("write", timeout)),
            Ok(r) => Ok(r?),
        }
    }
}
