//! Why a connection ended, and what the receiver and a refused send give.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::MConnError;
use p2p_conn::Error;

/// Why the connection ended.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MConnCloseReason {
    /// The MConnection refused the peer's input, or the pong was late.
    #[error(transparent)]
    Protocol(MConnError),
    /// The secret connection failed (a read or write error, a bad frame).
    #[error("secret connection: {0}")]
    Transport(Arc<Error>),
    /// The peer ended the stream. `after_message` is set when it did so
    /// within 1 s of our last message: a CometBFT
    /// node stops a peer at once when a reactor cannot decode its message
    /// (in its log: `rejected msg`, `Stopping peer for error`), and this is
    /// as much of that as the connection can see.
    #[error("the peer closed the connection{}", peer_closed_hint(after_message))]
    PeerClosed {
        /// Our last message, when the end followed it closely.
        after_message: Option<LastMessage>,
    },
    /// [`MConnSender::close`](crate::MConnSender::close), or the
    /// [`MConnReceiver`](crate::MConnReceiver) was dropped.
    #[error("closed locally")]
    Local,
}

/// Our last message before a peer closed the connection
/// ([`MConnCloseReason::PeerClosed`]).
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct LastMessage {
    /// Its channel.
    pub channel: u8,
    /// From its last packet handed to the send queue to the end of stream.
    pub before_close: Duration,
}

fn peer_closed_hint(after: &Option<LastMessage>) -> String {
    match after {
        None => String::new(),
        Some(m) => format!(
            " {:.3} s after our message on channel {:#04x}: a CometBFT node stops a peer \
             whose message its reactor cannot decode or does not take on that channel, \
             so check that message's encoding (the node logs `rejected msg`)",
            m.before_close.as_secs_f64(),
            m.channel
        ),
    }
}

impl MConnCloseReason {
    /// The core's error, when it is one.
    pub fn protocol(&self) -> Option<&MConnError> {
        match self {
            MConnCloseReason::Protocol(e) => Some(e),
            _ => None,
        }
    }
}

/// Why a send did not queue its message.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MConnSendError {
    /// The core refused it ([`MConnError::UnknownChannel`],
    /// [`MConnError::SendQueueFull`]); the connection goes on.
    #[error(transparent)]
    Refused(MConnError),
    /// The connection is closed.
    #[error("connection closed: {0}")]
    Closed(MConnCloseReason),
}

/// What [`MConnReceiver::recv`](crate::MConnReceiver::recv) gives.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Received {
    /// A whole message on a channel.
    Message {
        /// The channel.
        channel: u8,
        /// The message.
        data: Bytes,
    },
    /// The connection ended; nothing follows.
    Closed(MConnCloseReason),
}

impl PartialEq for MConnCloseReason {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (MConnCloseReason::Protocol(a), MConnCloseReason::Protocol(b)) => a == b,
            (MConnCloseReason::Transport(a), MConnCloseReason::Transport(b)) => Arc::ptr_eq(a, b),
            (
                MConnCloseReason::PeerClosed { after_message: a },
                MConnCloseReason::PeerClosed { after_message: b },
            ) => a == b,
            (MConnCloseReason::Local, MConnCloseReason::Local) => true,
            _ => false,
        }
    }
}
impl Eq for MConnCloseReason {}
