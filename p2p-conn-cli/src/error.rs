//! The CLI's one error type. Every command returns `Result<_, CliError>`;
//! `main` prints the error as one line, `error: <message>`, and exits 1, or
//! for the commands that talk to a peer (`listen`, `dial`, `probe`) with the
//! code of the stage it stopped at ([`CliError::stage`], [`crate::exit`]).
//!
//! Errors of p2p-conn and of the crates the CLI uses keep their own words
//! (`#[error(transparent)]`), except in the commands that talk to a peer
//! (`listen`, `dial`, `probe`), which word a connection's failure by its
//! cause: [`CliError::Connection`].

use std::net::SocketAddr;
use std::time::Duration;

use p2p_conn::{Error, ProtocolError};

use crate::exit::Stage;

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// A flag out of range, or flags that contradict each other (the
    /// message names them).
    #[error("{0}")]
    Usage(String),
    /// A step of a run failed; the message says which and how.
    #[error("{0}")]
    Failed(String),
    /// `listen`, `dial`, `probe`: the connection failed, worded by its cause
    /// (handshake, authentication, peer-ID mismatch, timeout, I/O; see
    /// [`describe`]).
    #[error("{}", describe(.0))]
    Connection(Error),
    /// `listen`'s accept, or setting up the accepted or dialed socket
    /// (the stage `connect`).
    #[error("connect failed: {0}")]
    Socket(std::io::Error),
    /// `listen --nodeinfo`, `dial --nodeinfo`, `probe`: the NodeInfo step.
    #[error(transparent)]
    NodeInfo(#[from] NodeInfoFailure),
    /// The TCP connect of a dialing command failed (the stage `connect`,
    /// as the exit-code table names it).
    #[error("connect failed: no TCP connection to {host}: {source}")]
    Connect {
        host: String,
        source: std::io::Error,
    },
    /// The TCP connect of a dialing command did not finish in time (the
    /// stage `connect`: the stage `timeout` is the handshake's).
    #[error("connect failed: no TCP connection to {host} within {limit:?}")]
    ConnectTimeout { host: String, limit: Duration },
    /// `listen` could not bind its address.
    #[error("I/O error: cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    /// The tokio runtime did not start.
    #[error("I/O error: cannot start the runtime: {0}")]
    Runtime(std::io::Error),
    /// Copying between stdin, the connection and stdout.
    #[error(transparent)]
    Copy(#[from] CopyError),
    #[error(transparent)]
    P2p(#[from] Error),
    /// `signer`: the key file, the state file, or a refusal.
    #[error(transparent)]
    Signer(#[from] p2p_conn_privval::SignerError),
    /// `signer`: the endpoint stopped (an invalid configuration).
    #[error(transparent)]
    Endpoint(#[from] p2p_conn_privval::endpoint::EndpointError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    KeyFile(#[from] p2p_conn::keyfile::KeyFileError),
    #[error(transparent)]
    NodeId(#[from] p2p_conn::IdentityError),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

impl CliError {
    /// [`CliError::Usage`] with `msg`.
    pub fn usage(msg: impl Into<String>) -> Self {
        CliError::Usage(msg.into())
    }

    /// [`CliError::Failed`] with `msg`.
    pub fn failed(msg: impl Into<String>) -> Self {
        CliError::Failed(msg.into())
    }

    /// The stage a connection command stopped at, and so its exit code:
    /// the one rule for `listen`, `dial` and `probe`.
    pub(crate) fn stage(&self) -> Stage {
        match self {
            CliError::Connect { .. } | CliError::ConnectTimeout { .. } | CliError::Socket(_) => {
                Stage::Connect
            }
            CliError::Listen { .. } => Stage::Usage,
            CliError::Connection(e) => match e {
                Error::Timeout(_) => Stage::Timeout,
                Error::PeerIdMismatch { .. } => Stage::IdMismatch,
                Error::InvalidConfig(_) | Error::Identity(_) => Stage::Usage,
                _ => Stage::Handshake,
            },
            CliError::NodeInfo(f) => match f {
                NodeInfoFailure::Exchange(_) | NodeInfoFailure::Rejected(_) => Stage::NodeInfo,
                NodeInfoFailure::Timeout(_) => Stage::Timeout,
                NodeInfoFailure::Network(_) => Stage::Network,
            },
            CliError::Copy(CopyError::Send(_) | CopyError::Recv(_) | CopyError::Mconn(_)) => {
                Stage::Connection
            }
            _ => Stage::Usage,
        }
    }
}

/// Said of a reset: p2p-conn (`listen`, `dial`) resets a connection whose
/// peer it refuses after the handshake (wrong ID, NodeInfo), since the
/// protocol has no refusal message.
pub(crate) const MAY_HAVE_REFUSED: &str = ": it may have refused us (see its own error)";

/// One line naming the cause: handshake, authentication, peer-ID mismatch,
/// timeout, or I/O.
pub(crate) fn describe(e: &Error) -> String {
    match e {
        Error::Protocol(
            p @ (ProtocolError::InvalidSignature
            | ProtocolError::UnsupportedKeyType(_)
            | ProtocolError::MalformedAuthMessage(_)),
        ) => format!("authentication failed: {p}"),
        // Frame #0 carries the peer's authentication: still the handshake.
        Error::Protocol(p @ ProtocolError::FrameAuthentication { counter: 0 }) => {
            format!("handshake failed: {p}")
        }
        Error::Protocol(
            p @ (ProtocolError::FrameAuthentication { .. } | ProtocolError::FrameTooLarge { .. }),
        ) => {
            format!("connection failed: {p}")
        }
        Error::Protocol(p @ ProtocolError::MalformedEphemeralMessage(m)) => match http_start(m) {
            Some(b) => format!(
                "handshake failed: the peer answered in HTTP (its first byte is {b:#04x}, '{}', \
                 not the handshake's 0x22): probably the RPC port (26657), not the P2P port (26656)",
                char::from(b)
            ),
            None => format!("handshake failed: {p}"),
        },
        Error::Protocol(p) => format!("handshake failed: {p}"),
        Error::HandshakeEof { .. } => e.to_string(),
        Error::Timeout(d) => format!("timeout: handshake did not finish within {d:?}"),
        Error::PeerIdMismatch { .. } => e.to_string(),
        Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionReset => {
            format!("I/O error: the peer reset the connection{MAY_HAVE_REFUSED} ({io})")
        }
        Error::Io(io) => format!("I/O error: {io}"),
        other => other.to_string(),
    }
}

/// The first byte of a malformed ephemeral-key message (the library reads
/// only that one before it fails, names it, `length prefix 0x48, ...`, and
/// says when it is how an HTTP server answers) if the peer answered in
/// HTTP.
fn http_start(detail: &str) -> Option<u8> {
    if !detail.contains("answered in HTTP") {
        return None;
    }
    let hex = detail.strip_prefix("length prefix 0x")?.get(..2)?;
    u8::from_str_radix(hex, 16).ok()
}

/// How the NodeInfo step failed; the stage (exit code) each means is
/// [`CliError::stage`]'s.
#[derive(Debug, thiserror::Error)]
pub enum NodeInfoFailure {
    /// The exchange failed: I/O, or a NodeInfo that does not decode.
    #[error("NodeInfo exchange failed: {0}")]
    Exchange(String),
    /// The peer's NodeInfo did not come (or ours did not go) in time.
    #[error("{0}")]
    Timeout(String),
    /// The peer's NodeInfo breaks a rule, or is incompatible with ours other
    /// than by network.
    #[error("{0}")]
    Rejected(String),
    /// The peer's NodeInfo is fine but for its network.
    #[error("{0}")]
    Network(String),
}

/// Where a copy failed: the message says which side and, for the peer, why.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    #[error("I/O error: reading stdin: {0}")]
    Stdin(std::io::Error),
    #[error("I/O error: writing stdout: {0}")]
    Stdout(std::io::Error),
    /// Sending to the peer (the p2p-conn error inside the I/O error, if any).
    #[error("{}", sending(.0))]
    Send(Error),
    /// Receiving from the peer.
    #[error("{}", receiving(.0))]
    Recv(Error),
    /// `--mconn`: the MConnection ended on an error.
    #[error("connection failed: MConnection: {0}")]
    Mconn(p2p_conn_mconn::MConnCloseReason),
}

impl CopyError {
    pub(crate) fn send(e: std::io::Error) -> Self {
        CopyError::Send(Error::from_io(e))
    }

    pub(crate) fn recv(e: std::io::Error) -> Self {
        CopyError::Recv(Error::from_io(e))
    }
}

fn sending(e: &Error) -> String {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset};
    match e {
        Error::Io(io) if io.kind() == ConnectionReset => format!(
            "connection failed: the peer reset the connection before all of stdin was sent{} ({io})",
            MAY_HAVE_REFUSED
        ),
        Error::Io(io) if matches!(io.kind(), BrokenPipe | ConnectionAborted) => format!(
            "connection failed: the peer closed or reset the connection before all of stdin was sent ({io})"
        ),
        Error::Io(io) => format!("connection failed: sending to the peer: {io}"),
        other => describe(other),
    }
}

fn receiving(e: &Error) -> String {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionReset};
    match e {
        Error::Io(io) if matches!(io.kind(), ConnectionReset | ConnectionAborted) => {
            format!(
                "connection failed: the peer reset the connection{} ({io})",
                MAY_HAVE_REFUSED
            )
        }
        Error::Io(io) => format!("connection failed: receiving from the peer: {io}"),
        other => describe(other),
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Cursor, Read, Write};

    use p2p_conn::{Config, Identity};

    use super::*;

    /// A peer that sends `answer` and takes whatever is written to it.
    struct Answers(Cursor<&'static [u8]>);

    impl Read for Answers {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.0.read(buf)
        }
    }

    impl Write for Answers {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn handshake_with(answer: &'static [u8]) -> String {
        let peer = Answers(Cursor::new(answer));
        match p2p_conn::io::blocking::handshake(peer, &Identity::generate(), &Config::default()) {
            Ok(_) => panic!("a handshake with {answer:?} succeeded"),
            Err(e) => describe(&e),
        }
    }

    /// The library's own failure on an HTTP answer gets the hint (so this
    /// fails if the library rewords its detail); other first bytes do not.
    #[test]
    fn an_http_answer_is_named() {
        let http = handshake_with(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n");
        assert_eq!(
            http,
            "handshake failed: the peer answered in HTTP (its first byte is 0x48, 'H', not \
             the handshake's 0x22): probably the RPC port (26657), not the P2P port (26656)"
        );
        // An HTTP/0.9-style error page, no status line (Python's http.server
        // answers a malformed request line so).
        let html = handshake_with(b"<!DOCTYPE HTML>\n<html lang=\"en\">\n<head>\n");
        assert!(
            html.starts_with(
                "handshake failed: the peer answered in HTTP (its first byte is 0x3c, '<',"
            ),
            "{html}"
        );
        let other = handshake_with(&[0xff; 64]);
        assert!(
            other.starts_with("handshake failed: malformed ephemeral-key message"),
            "{other}"
        );
        assert!(!other.contains("HTTP"), "{other}");
    }
}
