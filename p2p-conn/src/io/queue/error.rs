//! Why a send queue refused a message or stopped.

use std::sync::Arc;

use crate::{Error, NodeId};

/// Why a send queue refused a message or stopped.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// [`Overflow::Error`](super::Overflow::Error): the message would take the pending bytes past the
    /// cap. Nothing was queued; the connection stays up.
    #[error("send queue to {peer} full: {pending} bytes pending, the message has {len}, max_pending_bytes is {max}")]
    Full {
        /// The peer.
        peer: NodeId,
        /// Bytes queued when the message came.
        pending: usize,
        /// The message's (or bundle's) size.
        len: usize,
        /// [`QueueConfig::max_pending_bytes`](super::QueueConfig::max_pending_bytes).
        max: usize,
    },
    /// The queue has stopped; nothing more is sent.
    #[error("send queue to {peer} closed: {reason}")]
    Closed {
        /// The peer.
        peer: NodeId,
        /// Why it stopped.
        reason: CloseReason,
    },
}

/// Why a send queue stopped.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum CloseReason {
    /// [`Sender::shutdown`](super::Sender::shutdown) was called (or every handle was dropped).
    #[error("shut down")]
    Shutdown,
    /// [`Sender::close`](super::Sender::close) was called.
    #[error("closed")]
    Closed,
    /// [`Overflow::Disconnect`](super::Overflow::Disconnect): a message would have taken the pending
    /// bytes past the cap.
    #[error("disconnected on overflow: {pending} bytes pending, a message of {len}, max_pending_bytes is {max}")]
    Overflow {
        /// Bytes queued when the message came.
        pending: usize,
        /// The message's (or bundle's) size.
        len: usize,
        /// [`QueueConfig::max_pending_bytes`](super::QueueConfig::max_pending_bytes).
        max: usize,
    },
    /// Writing failed; the connection is unusable.
    #[error("{0}")]
    Failed(Arc<Error>),
}
