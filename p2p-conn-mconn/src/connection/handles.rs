//! The two handles [`MConnection::spawn`](super::MConnection::spawn)
//! returns: the sender and the receiver.

use std::sync::Arc;

use tokio::sync::{mpsc, OwnedSemaphorePermit};

use super::*;
use crate::{MConnError, MConnStats};
use p2p_conn::stats::QueueStats;
use p2p_conn::NodeId;

/// The sending side of a spawned MConnection: cloneable, one per producer
/// if you like; every clone sends on the same connection.
#[derive(Clone)]
pub struct MConnSender {
    /// `pub(super)`: the unit tests read its wake-up counters.
    pub(super) shared: Arc<Shared>,
}

impl std::fmt::Debug for MConnSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MConnSender")
            .field("peer", &self.shared.peer)
            .finish_non_exhaustive()
    }
}

impl MConnSender {
    pub(super) fn new(shared: Arc<Shared>) -> MConnSender {
        MConnSender { shared }
    }

    /// The peer's node ID.
    pub fn peer(&self) -> NodeId {
        self.shared.peer
    }

    /// Queues `message` on `channel` now, or refuses it:
    /// [`MConnError::SendQueueFull`] when the channel's send queue lacks
    /// room, [`MConnError::UnknownChannel`], or the close reason.
    pub fn try_send(&self, channel: u8, message: impl Into<Vec<u8>>) -> Result<(), MConnSendError> {
        if let Some(r) = self.shared.ended() {
            return Err(MConnSendError::Closed(r));
        }
        self.shared
            .core()
            .send(channel, message.into())
            .map_err(|e| self.refused(e))?;
        self.shared.wake_writer_if_idle();
        Ok(())
    }

    fn refused(&self, e: MConnError) -> MConnSendError {
        match e {
            MConnError::SendQueueFull { .. } | MConnError::UnknownChannel(_) => {
                MConnSendError::Refused(e)
            }
            // The core has failed: the task is closing with this error.
            other => MConnSendError::Closed(
                self.shared
                    .closed()
                    .unwrap_or(MConnCloseReason::Protocol(other)),
            ),
        }
    }

    /// Queues `message` on `channel`, waiting while the channel's send
    /// queue lacks room. Refused at once: an unknown channel, a message
    /// larger than the queue's whole capacity; and a closed connection.
    /// Cancel-safe: a dropped future has queued nothing.
    pub async fn send(
        &self,
        channel: u8,
        message: impl Into<Vec<u8>>,
    ) -> Result<(), MConnSendError> {
        let mut message = Some(message.into());
        // With room, one look; without, register for the writer's wake-up
        // first and look again, so a wake-up between the two is not missed.
        if self.queue_if_room(channel, &mut message)? {
            return Ok(());
        }
        loop {
            let room = self.shared.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            if self.queue_if_room(channel, &mut message)? {
                return Ok(());
            }
            room.await;
        }
    }

    /// Queue `message` (taking it) if `channel`'s queue has room for it, or
    /// will never have (the core refuses it); `Ok(false)` leaves it for a
    /// later look.
    fn queue_if_room(
        &self,
        channel: u8,
        message: &mut Option<Vec<u8>>,
    ) -> Result<bool, MConnSendError> {
        if let Some(r) = self.shared.ended() {
            return Err(MConnSendError::Closed(r));
        }
        let mut core = self.shared.core();
        let Some(free) = core.send_room(channel) else {
            return Err(MConnSendError::Refused(MConnError::UnknownChannel(
                i32::from(channel),
            )));
        };
        let msg = message.take().expect("queued at most once");
        let cost = msg.len().max(1);
        let capacity = free + core.channel_stats(channel).map_or(0, |c| c.queued_bytes);
        if free < cost && cost <= capacity {
            *message = Some(msg);
            return Ok(false);
        }
        // It fits, or it never will: the core decides.
        let r = core.send(channel, msg);
        drop(core);
        r.map_err(|e| self.refused(e))?;
        self.shared.wake_writer_if_idle();
        Ok(true)
    }

    /// Bytes `channel`'s send queue has room for (`None`: unknown channel).
    pub fn send_room(&self, channel: u8) -> Option<usize> {
        self.shared.core().send_room(channel)
    }

    /// A snapshot of the connection's counters, per channel included.
    pub fn stats(&self) -> MConnStats {
        self.shared.core().stats()
    }

    /// The send queue's counters: batches handed over (its "messages"),
    /// writes, bytes on the wire, and how often the writer waited for room
    /// (`overflows`, the normal pace under load).
    pub fn queue_stats(&self) -> QueueStats {
        self.shared.queue.stats()
    }

    /// Why the connection ended, once it has.
    pub fn close_reason(&self) -> Option<MConnCloseReason> {
        self.shared.closed()
    }

    /// Starts a close and returns at once (it is not async): the writer
    /// sends what is queued, then shuts the stream down, within
    /// [`CLOSE_TIMEOUT`]. To know it has ended, wait for
    /// [`Received::Closed`] on the receiver ([`MConnCloseReason::Local`],
    /// unless something else ended it first).
    pub fn close(&self) {
        self.shared.close();
    }
}

/// The receiving side of a spawned MConnection. Dropping it closes the
/// connection.
pub struct MConnReceiver {
    /// `pub(super)`: the unit tests read its wake-up counters.
    pub(super) shared: Arc<Shared>,
    rx: mpsc::UnboundedReceiver<Delivery>,
    /// The batch being handed out, and the room it holds.
    current: std::vec::IntoIter<Received>,
    room: Option<OwnedSemaphorePermit>,
    done: bool,
}

impl std::fmt::Debug for MConnReceiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MConnReceiver")
            .field("peer", &self.shared.peer)
            .finish_non_exhaustive()
    }
}

impl MConnReceiver {
    pub(super) fn new(shared: Arc<Shared>, rx: mpsc::UnboundedReceiver<Delivery>) -> MConnReceiver {
        MConnReceiver {
            shared,
            rx,
            current: Vec::new().into_iter(),
            room: None,
            done: false,
        }
    }

    /// The next message, or [`Received::Closed`] once, then `None`.
    /// Cancel-safe.
    pub async fn recv(&mut self) -> Option<Received> {
        loop {
            if self.done {
                return None;
            }
            if let Some(event) = self.current.next() {
                self.done = matches!(event, Received::Closed(_));
                if self.current.len() == 0 {
                    // The batch is handed out: its room goes back.
                    self.room = None;
                }
                return Some(event);
            }
            match self.rx.recv().await {
                Some(d) => {
                    self.current = d.events.into_iter();
                    self.room = d.room;
                }
                None => self.done = true,
            }
        }
    }

    /// The peer's node ID.
    pub fn peer(&self) -> NodeId {
        self.shared.peer
    }

    /// A snapshot of the connection's counters.
    pub fn stats(&self) -> MConnStats {
        self.shared.core().stats()
    }
}

impl Drop for MConnReceiver {
    fn drop(&mut self) {
        self.shared.close();
    }
}
