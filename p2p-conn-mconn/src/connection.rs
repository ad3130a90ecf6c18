//! The tokio adapter over [`MConnCore`]: [`MConnection::spawn`] (feature
//! `tokio`). Its design and guarantees are documented on
//! [`MConnection`].

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, Notify, OwnedSemaphorePermit, Semaphore};

use super::{
    ChannelDescriptor, ChannelStats, Event, MConnConfig, MConnCore, MConnError, MConnStats,
};
use p2p_conn::io::queue::{self, Overflow, QueueConfig};
use p2p_conn::io::tokio::{ReadHalf, SecretConnection, Split, WriteHalf};
use p2p_conn::stats::QueueStats;
use p2p_conn::{Error, NodeId};

/// The most bytes of packets in one batch handed to the send queue.
pub const BATCH_BYTES: usize = 64 * 1024;

/// The bound on a close ([`MConnSender::close`], or dropping the
/// [`MConnReceiver`]): the time the writer has to hand what the core holds
/// to the send queue and see it written; at the bound it stops writing
/// (the send queue's default shutdown timeout, 250 ms).
pub const CLOSE_TIMEOUT: Duration = queue::DEFAULT_SHUTDOWN_TIMEOUT;

/// Batches handed to the send queue and not yet sealed, at most.
const QUEUED_BATCHES: usize = 4;

/// The most bytes of received messages waiting for the [`MConnReceiver`]
/// before the reader stops reading (1 MiB).
pub const RECV_BUFFER_BYTES: usize = 1 << 20;

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
    /// within [`PEER_CLOSE_HINT_WINDOW`] of our last message: a CometBFT
    /// node stops a peer at once when a reactor cannot decode its message
    /// (in its log: `rejected msg`, `Stopping peer for error`), and this is
    /// as much of that as the connection can see.
    #[error("the peer closed the connection{}", peer_closed_hint(after_message))]
    PeerClosed {
        /// Our last message, when the end followed it closely.
        after_message: Option<LastMessage>,
    },
    /// [`MConnSender::close`], or the [`MConnReceiver`] was dropped.
    #[error("closed locally")]
    Local,
}

/// How soon after our last message a peer's end of stream makes
/// [`MConnCloseReason::PeerClosed`] name that message (1 s; a CometBFT
/// node that cannot decode a message stops the peer within milliseconds).
pub const PEER_CLOSE_HINT_WINDOW: Duration = Duration::from_secs(1);

/// Our last message before a peer closed the connection
/// ([`MConnCloseReason::PeerClosed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

struct Shared {
    core: Mutex<MConnCore>,
    peer: NodeId,
    /// Something for the writer: a message queued, a pong owed, a close.
    wake_writer: Notify,
    /// The writer drained send-queue bytes, or the connection closed.
    room: Notify,
    closing: AtomicBool,
    closed: Mutex<Option<MConnCloseReason>>,
    /// The send queue over the write half: its writer task seals and
    /// writes the batches.
    queue: queue::Sender,
}

impl Shared {
    fn core(&self) -> MutexGuard<'_, MConnCore> {
        // The core never panics while locked; a poisoned lock is still
        // consistent.
        self.core.lock().unwrap_or_else(|e| e.into_inner())
    }
    fn closed(&self) -> Option<MConnCloseReason> {
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
/// [`MConnection::spawn`] (features `tokio`).
///
/// ```no_run
/// # async fn f(conn: p2p_conn::io::tokio::SecretConnection<tokio::net::TcpStream>)
/// # -> Result<(), Box<dyn std::error::Error>> {
/// use p2p_conn_mconn::pex::PexMessage;
/// use p2p_conn_mconn::{ChannelDescriptor, MConnConfig, MConnection, Received};
///
/// // `conn`: after the handshake (and, with a node, the NodeInfo exchange
/// // announcing exactly these channels).
/// // A CometBFT node stops a peer whose message a reactor cannot decode:
/// // send each channel's own protobuf messages (here PEX's request).
/// let channels = [ChannelDescriptor::new(0x00)];
/// let (tx, mut rx) = MConnection::spawn(conn, &channels, MConnConfig::default())?;
/// tx.send(0x00, PexMessage::Request.encode()).await?; // waits for room in 0x00's queue
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
///   its owned halves and spawns **one task** that drives both: a reader
///   future over the read half and a writer future over the crate's send
///   queue ([`p2p_conn::io::queue`]), made over the write half, polled
///   together. When either ends, the other is dropped and the connection
///   is closed. It returns an [`MConnSender`] (cloneable:
///   any number of producers) and an [`MConnReceiver`] (the events).
/// - The [`MConnCore`] sits behind a mutex the task and the senders share,
///   held only for one core call. Nothing here re-implements a protocol
///   rule: caps, packet order, keepalive and rate limits are the core's.
/// - The reader takes the opened plaintext straight from the secret
///   connection's receive buffer (`AsyncBufRead`, no copy) into
///   [`MConnCore::handle_input`]; a ping wakes the writer for the pong.
/// - The writer asks [`MConnCore::poll_transmit`] for a batch of up to
///   [`BATCH_BYTES`] of packets (pongs and pings first, as the core orders
///   them) and hands it, as one [`Bytes`], to the send queue, whose own
///   writer task seals it as a whole and writes it (never a write per
///   packet; the queue packs batches waiting together into one write of up
///   to the connection's `flush_size`), again while the core has more. No
///   flush timer: a batch is whatever is pending when the writer runs. The
///   send queue holds at most four batches
///   ([`Overflow::Backpressure`], `4 * BATCH_BYTES`): past that the writer
///   waits, the core's per-channel queues fill, and [`MConnSender::send`]
///   waits, so a peer that reads slowly slows the producers. Those waits
///   are the normal pace under load; the queue counts them
///   ([`QueueStats::overflows`], [`MConnSender::queue_stats`]) and logs
///   them at trace level only. The writer sleeps until
///   [`MConnCore::poll_timeout`] (the next ping, the pong deadline, a rate
///   limit's release) or a wake-up, and runs [`MConnCore::handle_timeout`]:
///   a late pong closes the connection with [`MConnError::PongTimeout`].
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
///   `send_queue_capacity`, one batch buffer, and at most
///   `4 * BATCH_BYTES` of batches in the send queue plus the one it is
///   writing.
/// - [`MConnSender::send`] waits for room in the channel's send queue (the
///   core's byte cap) and [`MConnSender::try_send`] refuses at once
///   ([`MConnError::SendQueueFull`]); a message larger than the queue's whole
///   capacity is refused by both. Neither copies the message.
/// - Every end is one [`MConnCloseReason`], delivered once as
///   [`Received::Closed`] and returned by every later send: a protocol
///   error from the core (unknown channel, a message over the receive cap,
///   a late pong, a malformed packet, ...), a transport error, the peer's
///   end of stream, or a local close.
/// - `tracing` events (feature `tracing`, debug level): `mconn up` (peer,
///   channels), `mconn closed` (peer, cause, bytes, pings and pongs each
///   way) and, at close, `mconn channel` per channel (peer, channel,
///   messages and bytes each way); the send queue's `send queue stopped`.
/// - A close ([`MConnSender::close`], dropping the [`MConnReceiver`]) is
///   bounded: the writer hands over what the core's queues hold and waits
///   for it to be written for at most [`CLOSE_TIMEOUT`] from the close,
///   then (all written) shuts the send queue down, which sends the FIN
///   within the queue's shutdown timeout (the same 250 ms), or (not all
///   written: a peer that stopped reading) stops the queue at once, which
///   drops the write half, possibly inside a frame. Either way the task
///   ends, and [`Received::Closed`] comes, within [`CLOSE_TIMEOUT`] of the
///   close. Any other end (a protocol error, a late pong, a transport
///   error, the peer's end of stream) stops the queue at once.
///
/// # Not provided
/// - No reconnecting, peer manager or reactor dispatch; messages of every
///   channel arrive on the one [`MConnReceiver`], in the peer's order.
/// - No linger: [`MConnSender::close`] (and dropping the
///   [`MConnReceiver`]) sends what is queued (within [`CLOSE_TIMEOUT`]) and
///   shuts the stream down, but does not wait for the peer to read it, and
///   stops early while the send rate limit holds a packet back.
/// - A write error is seen when the writer next hands the send queue a
///   batch (or by the reader, as a reset): the queue's writer task does
///   not wake the MConnection's.
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
        let queue_config = QueueConfig::default()
            .max_pending_bytes(QUEUED_BATCHES * BATCH_BYTES)
            .overflow(Overflow::Backpressure)
            .shutdown_timeout(CLOSE_TIMEOUT)
            // One producer (this adapter's writer) that outpaces the socket.
            .waits_are_normal(true);
        let queue = queue::Sender::new(write, &queue_config)
            .expect("the adapter's queue settings are valid");
        let shared = Arc::new(Shared {
            core: Mutex::new(core),
            peer,
            wake_writer: Notify::new(),
            room: Notify::new(),
            closing: AtomicBool::new(false),
            closed: Mutex::new(None),
            queue,
        });
        let (tx, rx) = mpsc::unbounded_channel();
        let buffer = Arc::new(Semaphore::new(RECV_BUFFER_BYTES));
        #[cfg(feature = "tokio")]
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
                r = writer(&task) => r,
            };
            // After a graceful close the writer has shut the queue down and
            // this does nothing; any other end stops it now.
            task.queue.close();
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
    reason: MConnCloseReason,
    events: &mpsc::UnboundedSender<(Received, Option<OwnedSemaphorePermit>)>,
) {
    shared.closing.store(true, Ordering::Release);
    *shared.closed.lock().unwrap_or_else(|e| e.into_inner()) = Some(reason.clone());
    #[cfg(feature = "tokio")]
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

/// The peer's end of stream, naming our last message when it came within
/// [`PEER_CLOSE_HINT_WINDOW`] of it.
fn peer_closed(shared: &Shared) -> MConnCloseReason {
    let last = shared.core().last_message_sent();
    let after_message = last.and_then(|(channel, at)| {
        let before_close = at.elapsed();
        (before_close <= PEER_CLOSE_HINT_WINDOW).then_some(LastMessage {
            channel,
            before_close,
        })
    });
    MConnCloseReason::PeerClosed { after_message }
}

async fn reader<R: AsyncRead + Unpin>(
    shared: &Shared,
    mut read: ReadHalf<R>,
    events: &mpsc::UnboundedSender<(Received, Option<OwnedSemaphorePermit>)>,
    buffer: &Arc<Semaphore>,
) -> MConnCloseReason {
    loop {
        let input = match read.fill_buf().await {
            Ok([]) => return peer_closed(shared),
            Ok(b) => b,
            Err(e) => return MConnCloseReason::Transport(Arc::new(Error::from_io(e))),
        };
        let (used, event, held) = {
            let mut core = shared.core();
            match core.handle_input(Instant::now(), input) {
                Ok((used, event)) => {
                    let held = event.is_none() && used < input.len();
                    (used, event, held.then(|| core.poll_timeout()).flatten())
                }
                Err(e) => return MConnCloseReason::Protocol(e),
            }
        };
        read.consume(used);
        match event {
            Some(Event::Message { channel, data }) => {
                let want = data.len().clamp(1, RECV_BUFFER_BYTES) as u32;
                let Ok(permit) = Arc::clone(buffer).acquire_many_owned(want).await else {
                    return MConnCloseReason::Local;
                };
                let data = Bytes::from(data);
                if events
                    .send((Received::Message { channel, data }, Some(permit)))
                    .is_err()
                {
                    return MConnCloseReason::Local;
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

async fn writer(shared: &Shared) -> MConnCloseReason {
    let queue = &shared.queue;
    let mut batch = Vec::with_capacity(BATCH_BYTES);
    // Set by a close: when the writer stops handing over and writing.
    let mut deadline = None;
    loop {
        let wake = shared.wake_writer.notified();
        close_deadline(shared, &mut deadline);
        let (n, next) = {
            let mut core = shared.core();
            let now = Instant::now();
            if let Err(e) = core.handle_timeout(now) {
                return MConnCloseReason::Protocol(e);
            }
            batch.clear();
            let n = core.poll_transmit(now, &mut batch, BATCH_BYTES);
            (n, core.poll_timeout())
        };
        if n > 0 {
            shared.room.notify_waiters();
            let send = queue.send(take_batch(&mut batch));
            if let Err(r) = hand_over(shared, send, &mut deadline).await {
                return r;
            }
            continue;
        }
        if let Some(at) = deadline {
            // The core's queues are empty: wait for the send queue to
            // write them, then half-close. Past the bound the task's end
            // stops the queue.
            return match tokio::time::timeout_at(at, queue.flush()).await {
                Ok(Ok(())) => {
                    queue.shutdown();
                    MConnCloseReason::Local
                }
                Ok(Err(e)) => queue_failure(e),
                Err(_) => MConnCloseReason::Local,
            };
        }
        let Some(next) = next else {
            // Only after a failure, which returned above.
            return MConnCloseReason::Local;
        };
        tokio::select! {
            () = wake => {}
            () = tokio::time::sleep_until(next.into()) => {}
        }
    }
}

/// Start the close bound once the connection is closing.
fn close_deadline(shared: &Shared, deadline: &mut Option<tokio::time::Instant>) {
    if deadline.is_none() && shared.closing.load(Ordering::Acquire) {
        *deadline = Some(tokio::time::Instant::now() + CLOSE_TIMEOUT);
    }
}

/// Await the send queue's `send` (waiting while it holds four batches),
/// watching for a close, and for the close bound once there is one.
async fn hand_over(
    shared: &Shared,
    send: impl Future<Output = Result<(), queue::SendError>>,
    deadline: &mut Option<tokio::time::Instant>,
) -> Result<(), MConnCloseReason> {
    tokio::pin!(send);
    loop {
        let wake = shared.wake_writer.notified();
        tokio::pin!(wake);
        wake.as_mut().enable();
        close_deadline(shared, deadline);
        let bound = async {
            match *deadline {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = &mut send => return r.map_err(queue_failure),
            // Past the bound: the task's end stops the queue.
            () = bound => return Err(MConnCloseReason::Local),
            // A close, or another wake-up (a ping, a message): the batch
            // after this one takes it in.
            () = &mut wake, if deadline.is_none() => {}
        }
    }
}

/// The batch as [`Bytes`]: the buffer itself when mostly full, else a
/// copy (a small batch does not pin a 64 KiB buffer while it waits).
fn take_batch(batch: &mut Vec<u8>) -> Bytes {
    if batch.len() * 2 >= batch.capacity() {
        Bytes::from(std::mem::replace(batch, Vec::with_capacity(BATCH_BYTES)))
    } else {
        Bytes::copy_from_slice(batch)
    }
}

/// Why the send queue stopped, as the connection's close reason.
fn queue_failure(e: queue::SendError) -> MConnCloseReason {
    match e {
        queue::SendError::Closed {
            reason: queue::CloseReason::Failed(e),
            ..
        } => MConnCloseReason::Transport(e),
        // Stopped by this connection (only at its end), or full (not under
        // back-pressure).
        _ => MConnCloseReason::Local,
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
    pub fn try_send(&self, channel: u8, message: impl Into<Vec<u8>>) -> Result<(), MConnSendError> {
        if let Some(r) = self.shared.closed() {
            return Err(MConnSendError::Closed(r));
        }
        self.shared
            .core()
            .send(channel, message.into())
            .map_err(|e| self.refused(e))?;
        self.shared.wake_writer.notify_one();
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
        let message = message.into();
        let cost = message.len().max(1);
        loop {
            let room = self.shared.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            if let Some(r) = self.shared.closed() {
                return Err(MConnSendError::Closed(r));
            }
            {
                let mut core = self.shared.core();
                let Some(free) = core.send_room(channel) else {
                    return Err(MConnSendError::Refused(MConnError::UnknownChannel(
                        i32::from(channel),
                    )));
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
