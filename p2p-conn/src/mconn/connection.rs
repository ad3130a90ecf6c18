//! The tokio adapter over [`MConnCore`]: [`MConnection::spawn`] (features
//! `mconn` and `tokio`). Its design and guarantees are documented on
//! [`MConnection`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use bytes::Bytes;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, Notify, OwnedSemaphorePermit, Semaphore};

use super::{
    ChannelDescriptor, ChannelStats, Event, MConnConfig, MConnCore, MConnError, MConnStats,
};
use crate::io::tokio::{ReadHalf, SecretConnection, Split, WriteHalf};
use crate::{Error, NodeId};

/// The most bytes of packets handed to the secret connection in one write.
pub const BATCH_BYTES: usize = 64 * 1024;

/// The most bytes of received messages waiting for the [`MConnReceiver`]
/// before the reader stops reading (1 MiB).
pub const RECV_BUFFER_BYTES: usize = 1 << 20;

/// Why the connection ended.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CloseReason {
    /// The MConnection refused the peer's input, or the pong was late.
    #[error(transparent)]
    Protocol(MConnError),
    /// The secret connection failed (a read or write error, a bad frame).
    #[error("secret connection: {0}")]
    Transport(Arc<Error>),
    /// The peer ended the stream.
    #[error("the peer closed the connection")]
    PeerClosed,
    /// [`MConnSender::close`], or the [`MConnReceiver`] was dropped.
    #[error("closed locally")]
    Local,
}

impl CloseReason {
    /// The core's error, when it is one.
    pub fn protocol(&self) -> Option<&MConnError> {
        match self {
            CloseReason::Protocol(e) => Some(e),
            _ => None,
        }
    }
}

/// Why a send did not queue its message.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// The core refused it ([`MConnError::UnknownChannel`],
    /// [`MConnError::SendQueueFull`]); the connection goes on.
    #[error(transparent)]
    Refused(MConnError),
    /// The connection is closed.
    #[error("connection closed: {0}")]
    Closed(CloseReason),
}

/// What [`MConnReceiver::recv`] gives.
#[derive(Clone, Debug, PartialEq, Eq)]
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
    Closed(CloseReason),
}

impl PartialEq for CloseReason {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (CloseReason::Protocol(a), CloseReason::Protocol(b)) => a == b,
            (CloseReason::Transport(a), CloseReason::Transport(b)) => Arc::ptr_eq(a, b),
            (CloseReason::PeerClosed, CloseReason::PeerClosed)
            | (CloseReason::Local, CloseReason::Local) => true,
            _ => false,
        }
    }
}
impl Eq for CloseReason {}

struct Shared {
    core: Mutex<MConnCore>,
    peer: NodeId,
    /// Something for the writer: a message queued, a pong owed, a close.
    wake_writer: Notify,
    /// The writer drained send-queue bytes, or the connection closed.
    room: Notify,
    closing: AtomicBool,
    closed: Mutex<Option<CloseReason>>,
}

impl Shared {
    fn core(&self) -> MutexGuard<'_, MConnCore> {
        // The core never panics while locked; a poisoned lock is still
        // consistent.
        self.core.lock().unwrap_or_else(|e| e.into_inner())
    }
    fn closed(&self) -> Option<CloseReason> {
        self.closed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
    fn close(&self) {
        self.closing.store(true, Ordering::Release);
        self.wake_writer.notify_one();
    }
}

/// Runs an [`MConnCore`] over a live secret connection:
/// [`MConnection::spawn`] (features `mconn` and `tokio`).
///
/// ```no_run
/// # async fn f(conn: p2p_conn::io::tokio::SecretConnection<tokio::net::TcpStream>)
/// # -> Result<(), Box<dyn std::error::Error>> {
/// use p2p_conn::mconn::{ChannelDescriptor, MConnConfig, MConnection, Received};
///
/// // `conn`: after the handshake (and, with a node, the NodeInfo exchange
/// // announcing exactly these channels).
/// let channels = [ChannelDescriptor::new(0x20).with_priority(5), ChannelDescriptor::new(0x30)];
/// let (tx, mut rx) = MConnection::spawn(conn, &channels, MConnConfig::default())?;
/// tx.send(0x30, b"hello".to_vec()).await?; // waits for room in 0x30's queue
/// while let Some(event) = rx.recv().await {
///     match event {
///         Received::Message { channel, data } => println!("{channel:#04x}: {} bytes", data.len()),
///         Received::Closed(why) => println!("closed: {why}"),
///         _ => {}
///     }
/// }
/// # Ok(())
/// # }
/// ```
///
/// # Design
/// - [`MConnection::spawn`] takes an established [`SecretConnection`] (after
///   the handshake and, for a node, the NodeInfo exchange), splits it into
///   its owned halves and spawns **one task** that owns both: a reader and a
///   writer future polled together. When either ends, the other is dropped
///   and the connection is closed. It returns an [`MConnSender`] (cloneable:
///   any number of producers) and an [`MConnReceiver`] (the events).
/// - The [`MConnCore`] sits behind a mutex the task and the senders share,
///   held only for one core call. Nothing here re-implements a protocol
///   rule: caps, packet order, keepalive and rate limits are the core's.
/// - The reader takes the opened plaintext straight from the secret
///   connection's receive buffer (`AsyncBufRead`, no copy) into
///   [`MConnCore::handle_input`]; a ping wakes the writer for the pong.
/// - The writer asks [`MConnCore::poll_transmit`] for a batch of up to
///   [`BATCH_BYTES`] and hands it to the secret connection in one write
///   (sealed as a whole: never a write per packet; one transport write when
///   the connection's `flush_size` holds the sealed batch, as the default
///   128 KiB does), again while the core has more. No flush timer: a batch is whatever is pending when the
///   writer runs. It sleeps until [`MConnCore::poll_timeout`] (the next
///   ping, the pong deadline, a rate limit's release) or a wake-up, and
///   runs [`MConnCore::handle_timeout`]: a late pong closes the connection
///   with [`MConnError::PongTimeout`].
/// - Received messages go to the [`MConnReceiver`] through a queue bounded
///   in bytes ([`RECV_BUFFER_BYTES`]): when the application does not keep
///   up, the reader stops reading (TCP back-pressure to the peer), as
///   CometBFT's `onReceive` does. While it waits it does not read pings
///   either, so a peer's pongs keep coming only while the application reads.
///
/// # Guarantees
/// - Memory bounded on any input: the core's caps (one packet buffer, each
///   channel's reassembly under its `recv_message_capacity`), plus at most
///   [`RECV_BUFFER_BYTES`] of delivered messages waiting in the receive
///   queue, plus one message over that (a message larger than the whole
///   buffer still passes, alone). Sends: each channel's
///   `send_queue_capacity`, and one batch buffer.
/// - [`MConnSender::send`] waits for room in the channel's send queue (the
///   core's byte cap) and [`MConnSender::try_send`] refuses at once
///   ([`MConnError::SendQueueFull`]); a message larger than the queue's whole
///   capacity is refused by both. Neither copies the message.
/// - Every end is one [`CloseReason`], delivered once as
///   [`Received::Closed`] and returned by every later send: a protocol
///   error from the core (unknown channel, a message over the receive cap,
///   a late pong, a malformed packet, ...), a transport error, the peer's
///   end of stream, or a local close.
/// - `tracing` events (feature `tracing`, debug level): `mconn up` (peer,
///   channels), `mconn closed` (peer, cause, bytes, pings and pongs each
///   way) and, at close, `mconn channel` per channel (peer, channel,
///   messages and bytes each way).
///
/// # Not provided
/// - No reconnecting, peer manager or reactor dispatch; messages of every
///   channel arrive on the one [`MConnReceiver`], in the peer's order.
/// - No linger: [`MConnSender::close`] (and dropping the
///   [`MConnReceiver`]) sends what is queued and shuts the stream down,
///   but does not wait for the peer to read it, and stops early while the
///   send rate limit holds a packet back.
/// - Needs a tokio runtime with the time driver.
#[derive(Debug)]
pub enum MConnection {}

impl MConnection {
    /// Runs an MConnection with `channels` over `conn` on a task of its own
    /// (see [`MConnection`]). Refuses a configuration the core
    /// refuses. Needs a tokio runtime.
    pub fn spawn<T>(
        conn: SecretConnection<T>,
        channels: &[ChannelDescriptor],
        config: MConnConfig,
    ) -> Result<(MConnSender, MConnReceiver), MConnError>
    where
        T: Split,
        T::Read: Send + 'static,
        T::Write: Send + 'static,
    {
        let (read, write) = conn.into_split();
        Self::spawn_split(read, write, channels, config)
    }

    /// [`spawn`](Self::spawn) over halves already split (for transports
    /// without owned halves of their own, through
    /// [`SecretConnection::into_split_locked`]).
    pub fn spawn_split<R, W>(
        read: ReadHalf<R>,
        write: WriteHalf<W>,
        channels: &[ChannelDescriptor],
        config: MConnConfig,
    ) -> Result<(MConnSender, MConnReceiver), MConnError>
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let core = MConnCore::new(config, channels, Instant::now())?;
        let peer = read.remote_node_id();
        let shared = Arc::new(Shared {
            core: Mutex::new(core),
            peer,
            wake_writer: Notify::new(),
            room: Notify::new(),
            closing: AtomicBool::new(false),
            closed: Mutex::new(None),
        });
        let (tx, rx) = mpsc::unbounded_channel();
        let buffer = Arc::new(Semaphore::new(RECV_BUFFER_BYTES));
        #[cfg(feature = "tracing")]
        {
            let ids: Vec<String> = channels.iter().map(|c| format!("{:#04x}", c.id)).collect();
            tracing::debug!(%peer, channels = %ids.join(","), "mconn up");
        }
        let task = Arc::clone(&shared);
        let events = tx.clone();
        let permits = Arc::clone(&buffer);
        tokio::spawn(async move {
            let reason = tokio::select! {
                r = reader(&task, read, &events, &permits) => r,
                r = writer(&task, write) => r,
            };
            finish(&task, reason, &events);
        });
        drop(tx);
        Ok((
            MConnSender {
                shared: Arc::clone(&shared),
            },
            MConnReceiver {
                shared,
                rx,
                done: false,
            },
        ))
    }
}

fn finish(
    shared: &Shared,
    reason: CloseReason,
    events: &mpsc::UnboundedSender<(Received, Option<OwnedSemaphorePermit>)>,
) {
    shared.closing.store(true, Ordering::Release);
    *shared.closed.lock().unwrap_or_else(|e| e.into_inner()) = Some(reason.clone());
    #[cfg(feature = "tracing")]
    {
        let stats = shared.core().stats();
        let peer = shared.peer;
        tracing::debug!(
            %peer,
            cause = %reason,
            bytes_in = stats.bytes_in,
            bytes_out = stats.bytes_out,
            pings_sent = stats.pings_sent,
            pongs_received = stats.pongs_received,
            pings_received = stats.pings_received,
            pongs_sent = stats.pongs_sent,
            "mconn closed"
        );
        for c in &stats.channels {
            tracing::debug!(
                %peer,
                channel = %format_args!("{:#04x}", c.id),
                messages_sent = c.messages_sent,
                bytes_sent = c.bytes_sent,
                messages_received = c.messages_received,
                bytes_received = c.bytes_received,
                "mconn channel"
            );
        }
    }
    shared.room.notify_waiters();
    let _ = events.send((Received::Closed(reason), None));
}

async fn reader<R: AsyncRead + Unpin>(
    shared: &Shared,
    mut read: ReadHalf<R>,
    events: &mpsc::UnboundedSender<(Received, Option<OwnedSemaphorePermit>)>,
    buffer: &Arc<Semaphore>,
) -> CloseReason {
    loop {
        let input = match read.fill_buf().await {
            Ok([]) => return CloseReason::PeerClosed,
            Ok(b) => b,
            Err(e) => return CloseReason::Transport(Arc::new(Error::from_io(e))),
        };
        let (used, event, held) = {
            let mut core = shared.core();
            match core.handle_input(Instant::now(), input) {
                Ok((used, event)) => {
                    let held = event.is_none() && used < input.len();
                    (used, event, held.then(|| core.poll_timeout()).flatten())
                }
                Err(e) => return CloseReason::Protocol(e),
            }
        };
        read.consume(used);
        match event {
            Some(Event::Message { channel, data }) => {
                let want = data.len().clamp(1, RECV_BUFFER_BYTES) as u32;
                let Ok(permit) = Arc::clone(buffer).acquire_many_owned(want).await else {
                    return CloseReason::Local;
                };
                let data = Bytes::from(data);
                if events
                    .send((Received::Message { channel, data }, Some(permit)))
                    .is_err()
                {
                    return CloseReason::Local;
                }
            }
            Some(Event::Ping) => shared.wake_writer.notify_one(),
            Some(_) | None => {}
        }
        if let Some(at) = held {
            // The receive rate limit holds the next packet back.
            tokio::time::sleep_until(at.into()).await;
        }
    }
}

async fn writer<W: AsyncWrite + Unpin>(shared: &Shared, mut write: WriteHalf<W>) -> CloseReason {
    let mut batch = Vec::with_capacity(BATCH_BYTES);
    loop {
        let closing = shared.closing.load(Ordering::Acquire);
        let wake = shared.wake_writer.notified();
        let (n, next) = {
            let mut core = shared.core();
            let now = Instant::now();
            if let Err(e) = core.handle_timeout(now) {
                return CloseReason::Protocol(e);
            }
            batch.clear();
            let n = core.poll_transmit(now, &mut batch, BATCH_BYTES);
            (n, core.poll_timeout())
        };
        if n > 0 {
            shared.room.notify_waiters();
            if let Err(e) = write.send(&batch).await {
                return CloseReason::Transport(Arc::new(e));
            }
            continue;
        }
        if closing {
            let _ = write.shutdown().await;
            return CloseReason::Local;
        }
        let Some(next) = next else {
            // Only after a failure, which returned above.
            return CloseReason::Local;
        };
        tokio::select! {
            () = wake => {}
            () = tokio::time::sleep_until(next.into()) => {}
        }
    }
}

/// The sending side of a spawned MConnection: cloneable, one per producer
/// if you like; every clone sends on the same connection.
#[derive(Clone)]
pub struct MConnSender {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for MConnSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MConnSender")
            .field("peer", &self.shared.peer)
            .finish_non_exhaustive()
    }
}

impl MConnSender {
    /// The peer's node ID.
    pub fn peer(&self) -> NodeId {
        self.shared.peer
    }

    /// Queues `message` on `channel` now, or refuses it:
    /// [`MConnError::SendQueueFull`] when the channel's send queue lacks
    /// room, [`MConnError::UnknownChannel`], or the close reason.
    pub fn try_send(&self, channel: u8, message: impl Into<Vec<u8>>) -> Result<(), SendError> {
        if let Some(r) = self.shared.closed() {
            return Err(SendError::Closed(r));
        }
        self.shared
            .core()
            .send(channel, message.into())
            .map_err(|e| self.refused(e))?;
        self.shared.wake_writer.notify_one();
        Ok(())
    }

    fn refused(&self, e: MConnError) -> SendError {
        match e {
            MConnError::SendQueueFull { .. } | MConnError::UnknownChannel(_) => {
                SendError::Refused(e)
            }
            // The core has failed: the task is closing with this error.
            other => {
                SendError::Closed(self.shared.closed().unwrap_or(CloseReason::Protocol(other)))
            }
        }
    }

    /// Queues `message` on `channel`, waiting while the channel's send
    /// queue lacks room. Refused at once: an unknown channel, a message
    /// larger than the queue's whole capacity; and a closed connection.
    /// Cancel-safe: a dropped future has queued nothing.
    pub async fn send(&self, channel: u8, message: impl Into<Vec<u8>>) -> Result<(), SendError> {
        let message = message.into();
        let cost = message.len().max(1);
        loop {
            let room = self.shared.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            if let Some(r) = self.shared.closed() {
                return Err(SendError::Closed(r));
            }
            {
                let mut core = self.shared.core();
                let Some(free) = core.send_room(channel) else {
                    return Err(SendError::Refused(MConnError::UnknownChannel(i32::from(
                        channel,
                    ))));
                };
                let stats = core.channel_stats(channel).unwrap_or_default();
                if free >= cost || cost > free + stats.queued_bytes {
                    // It fits, or it never will: the core decides.
                    let r = core.send(channel, message);
                    drop(core);
                    r.map_err(|e| self.refused(e))?;
                    self.shared.wake_writer.notify_one();
                    return Ok(());
                }
            }
            room.await;
        }
    }

    /// Bytes `channel`'s send queue has room for (`None`: unknown channel).
    pub fn send_room(&self, channel: u8) -> Option<usize> {
        self.shared.core().send_room(channel)
    }

    /// A snapshot of the connection's counters, per channel included.
    pub fn stats(&self) -> MConnStats {
        self.shared.core().stats()
    }

    /// One channel's counters (`None`: unknown channel).
    pub fn channel_stats(&self, channel: u8) -> Option<ChannelStats> {
        self.shared.core().channel_stats(channel)
    }

    /// Why the connection ended, once it has.
    pub fn close_reason(&self) -> Option<CloseReason> {
        self.shared.closed()
    }

    /// Closes the connection after sending what is queued (the writer
    /// drains the send queues, then shuts the stream down);
    /// [`Received::Closed`] with [`CloseReason::Local`] follows unless
    /// something else ended it first.
    pub fn close(&self) {
        self.shared.close();
    }
}

/// The receiving side of a spawned MConnection. Dropping it closes the
/// connection.
pub struct MConnReceiver {
    shared: Arc<Shared>,
    rx: mpsc::UnboundedReceiver<(Received, Option<OwnedSemaphorePermit>)>,
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
    /// The next message, or [`Received::Closed`] once, then `None`.
    /// Cancel-safe.
    pub async fn recv(&mut self) -> Option<Received> {
        if self.done {
            return None;
        }
        match self.rx.recv().await {
            Some((event, _permit)) => {
                self.done = matches!(event, Received::Closed(_));
                Some(event)
            }
            None => {
                self.done = true;
                None
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
