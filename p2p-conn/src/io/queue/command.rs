//! What producers queue for the writer: a message ([`Item`]) or a command
//! ([`Command`]). Plain data, shared by the inbox, the shared state, the
//! senders and the writer.

use bytes::Bytes;
use tokio::sync::oneshot;

use crate::engine::budget::Admission;
use crate::stats::Stamp;

/// One queued message; the permit it holds is returned when it is sealed.
pub(super) struct Item {
    pub(super) data: Bytes,
    /// When it was queued.
    pub(super) queued: Stamp,
    /// Room the whole entry holds under the cap, on its last message. The
    /// writer gives it back once the entry is sealed (`account`, a batch's
    /// at once). Nothing else gives it back: an entry is dropped unsealed
    /// only once the queue has stopped, when the cap no longer matters (no
    /// pointer back to the queue per message, and no atomics for one).
    pub(super) permit: Option<Admission>,
    /// A flush marker: fire once everything before it is written.
    pub(super) flushed: Option<oneshot::Sender<()>>,
}

impl AsRef<[u8]> for Item {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

pub(super) enum Command {
    /// One message (or flush marker): the common case, without a list.
    Message(Item),
    /// A bundle: contiguous on the wire.
    Messages(Vec<Item>),
    Shutdown,
    /// Drop what is queued, finish the batch on the wire (within the
    /// shutdown bound), then half-close: the overflow disconnect.
    Abandon,
    Close,
}
