//! The adapters' error type.

use std::time::Duration;

use crate::identity::{IdentityError, NodeId};
use crate::proto::{ProtocolError, Stage};

/// Everything a connection, its handshake or its halves can fail with.
///
/// Through the `std::io` / tokio traits these travel inside `std::io::Error`;
/// [`Error::from_io`] gets the typed error back.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The peer broke the protocol (see [`ProtocolError`]). Drop the connection.
    #[error("{0}")]
    Protocol(#[from] ProtocolError),
    /// The peer closed (or reset) the connection before the handshake
    /// finished. While we await its authentication message, a likely cause is
    /// a `frame_size` mismatch: the peer could not open our frame #0 and hung up.
    #[error("{}", eof_message(*.stage, *.received, *.expected))]
    HandshakeEof {
        /// What we were waiting for.
        stage: Stage,
        /// Bytes of that message (for the authentication message: of the
        /// current sealed frame) received before the end of stream.
        received: usize,
        /// Length of that message or frame.
        expected: usize,
    },
    /// The handshake did not finish within the configured timeout (the peer
    /// stalled or the network is too slow; raise `handshake_timeout` for the latter).
    #[error("handshake timed out after {0:?}")]
    Timeout(Duration),
    /// The peer authenticated, but not as the node we expected. Probably a
    /// misconfigured address book or a man in the middle; do not retry blindly.
    #[error("peer ID mismatch: expected {expected}, peer authenticated as {actual}")]
    PeerIdMismatch {
        /// The configured expected ID.
        expected: NodeId,
        /// The ID the peer proved.
        actual: NodeId,
    },
    /// An earlier write failed part way, so the peer's view of the stream is
    /// unknown: this direction refuses to send more. Reconnect.
    #[error("connection poisoned: an earlier write failed part way, so no more bytes can be sent; reconnect")]
    Poisoned,
    /// The underlying transport failed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// A node ID string could not be parsed.
    #[error("{0}")]
    Identity(#[from] IdentityError),
    /// A configuration value is out of range.
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),
}

fn eof_message(stage: Stage, received: usize, expected: usize) -> String {
    let mut m = format!(
        "handshake failed: peer closed the connection while we awaited its {stage} ({received} of {expected} bytes received)"
    );
    if stage == Stage::AuthSignature && received > 0 {
        m.push_str(
            ": it hung up inside frame #0, so the peers' frame_size settings probably differ",
        );
    }
    m
}

impl Error {
    /// Recover the typed error from an `std::io::Error` produced by this crate's
    /// stream impls, or wrap a plain I/O error as [`Error::Io`].
    pub fn from_io(e: std::io::Error) -> Error {
        if e.get_ref().is_some_and(|inner| inner.is::<Error>()) {
            match e.into_inner().map(|b| b.downcast::<Error>()) {
                Some(Ok(b)) => *b,
                _ => unreachable!("the inner error was checked to be an Error"),
            }
        } else {
            Error::Io(e)
        }
    }

    /// Convert into an `std::io::Error` carrying this error (users have the
    /// `From` impl).
    pub(crate) fn into_io(self) -> std::io::Error {
        use std::io::ErrorKind;
        let kind = match &self {
            Error::Io(_) => {
                return match self {
                    Error::Io(e) => e,
                    _ => unreachable!(),
                }
            }
            Error::Protocol(_) => ErrorKind::InvalidData,
            Error::HandshakeEof { .. } => ErrorKind::UnexpectedEof,
            Error::Timeout(_) => ErrorKind::TimedOut,
            Error::PeerIdMismatch { .. } => ErrorKind::PermissionDenied,
            Error::Poisoned => ErrorKind::BrokenPipe,
            Error::Identity(_) | Error::InvalidConfig(_) => ErrorKind::InvalidInput,
        };
        std::io::Error::new(kind, self)
    }
}

impl From<Error> for std::io::Error {
    fn from(e: Error) -> Self {
        e.into_io()
    }
}

/// Protocol errors travel through `std::io` as [`Error::Protocol`]
/// (`ErrorKind::InvalidData`); [`Error::from_io`] gets them back.
impl From<ProtocolError> for std::io::Error {
    fn from(e: ProtocolError) -> Self {
        Error::Protocol(e).into_io()
    }
}
