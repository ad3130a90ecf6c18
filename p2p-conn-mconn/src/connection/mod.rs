//! The tokio adapter over [`MConnCore`]: [`MConnection::spawn`] (feature
//! `tokio`). Its design and guarantees are documented on
//! [`MConnection`]. Here: the spawn and the state the task and the handles
//! share; `reason` (why a connection ended, what the receiver gets),
//! `task` (the reader and writer futures), `handles` (the sender and the
//! receiver), and the unit tests in `tests`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, Notify, OwnedSemaphorePermit, Semaphore};

use super::{ChannelDescriptor, MConnConfig, MConnCore, MConnError};
use p2p_conn::io::queue::{self, Overflow, QueueConfig};
use p2p_conn::io::tokio::{ReadHalf, SecretConnection, Split, WriteHalf};
use p2p_conn::NodeId;

mod handles;
mod reason;
mod task;

pub use handles::{MConnReceiver, MConnSender};
pub use reason::{LastMessage, MConnCloseReason, MConnSendError, Received};
use task::{reader, writer};

/// The most bytes of packets in one batch handed to the send queue (64 KiB).
pub(crate) const BATCH_BYTES: usize = 64 * 1024;

/// The bound on a close ([`MConnSender::close`], or dropping the
/// [`MConnReceiver`]): the time the writer has to hand what the core holds
/// to the send queue and see it written; at the bound it stops writing
/// (the send queue's default shutdown timeout, 250 ms).
pub const CLOSE_TIMEOUT: Duration = queue::DEFAULT_SHUTDOWN_TIMEOUT;

/// Batches handed to the send queue and not yet sealed, at most (two: one
/// the queue's writer takes next while the adapter cuts the other; more
/// only adds to what a message waits behind under load).
const QUEUED_BATCHES: usize = 2;

/// The most bytes of received messages waiting for the [`MConnReceiver`]
/// before the reader stops reading (256 KiB: at 160 MB/s, 1.6 ms of
/// messages; enough for the reader to run a batch ahead of an application
/// that keeps up, and no more: what waits beyond it waits in TCP's
/// buffers, where the peer's back-pressure starts).
pub const RECV_BUFFER_BYTES: usize = 256 * 1024;

/// The most bytes of received messages the reader decodes before it hands
/// them to the [`MConnReceiver`] as one batch (64 KiB, one read buffer's
/// worth by default); it hands over sooner when the input runs dry.
const RECV_BATCH_BYTES: usize = 64 * 1024;

/// How soon after our last message a peer's end of stream makes
/// [`MConnCloseReason::PeerClosed`] name that message (1 s; a CometBFT
/// node that cannot decode a message stops the peer within milliseconds).
pub(crate) const PEER_CLOSE_HINT_WINDOW: Duration = Duration::from_secs(1);

/// How often each side was woken: the writer to look for work, the
/// receiver for a batch of events. Counted per wake-up, read by the unit
/// tests that hold them to one per batch.
#[derive(Default)]
struct Wakes {
    writer: AtomicU64,
    deliveries: AtomicU64,
}

impl Wakes {
    fn count(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

struct Shared {
    core: Mutex<MConnCore>,
    peer: NodeId,
    /// Something for the writer: a message queued, a pong owed, a close.
    wake_writer: Notify,
    /// The writer found nothing to hand over and waits for
    /// [`wake_writer`](Self::wake_writer). Set and cleared under the core's
    /// lock by the writer, taken by whoever queues something after it: the
    /// writer is woken once per batch, not once per message.
    writer_idle: AtomicBool,
    /// Wake-ups of the writer and batches handed to the receiver.
    wakes: Wakes,
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
    /// Wake the writer for something just queued in the core, if it waits
    /// for work; a busy writer takes it with its next batch.
    fn wake_writer_if_idle(&self) {
        if self.writer_idle.swap(false, Ordering::AcqRel) {
            self.wake_writer.notify_one();
        }
    }
    /// The close reason, looked up only once the connection is closing.
    fn ended(&self) -> Option<MConnCloseReason> {
        if self.closing.load(Ordering::Acquire) {
            self.closed()
        } else {
            None
        }
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
///   held only for one core call (the reader: one stretch of plaintext).
///   Nothing here re-implements a protocol rule: caps, packet order,
///   keepalive and rate limits are the core's.
/// - **Wake-ups per batch, not per message.** A send wakes the writer only
///   when the writer waits for work (a flag it sets, under the core's lock,
///   when [`MConnCore::poll_transmit`] finds nothing); a writer that is
///   busy, or waiting for the send queue, takes what was queued meanwhile
///   with its next batch. A writer woken from waiting yields to the tasks
///   already runnable before it cuts a batch (a yield, not a timer), so
///   producers woken together (by one timer tick, one event) share a batch
///   and a write. The reader hands the [`MConnReceiver`] batches of
///   messages, one channel item and one wake-up each, and the receiver
///   gives their room back once per batch.
/// - The reader takes the opened plaintext straight from the secret
///   connection's receive buffer (`AsyncBufRead`, no copy) into
///   [`MConnCore::handle_input`], packet after packet, and reads on while
///   the read half has input ready without waiting: everything that
///   arrived together (up to 64 KiB of messages) is one
///   batch for the receiver, handed over when the input runs dry, the
///   batch is full, or the receive rate limit holds the next packet. A
///   ping wakes the writer for the pong.
/// - The writer asks [`MConnCore::poll_transmit`] for a batch of up to
///   64 KiB of packets (pongs and pings first, as the core orders
///   them) and hands it, as one [`Bytes`](bytes::Bytes), to the send queue, whose own
///   writer task seals it as a whole and writes it (never a write per
///   packet; the queue packs batches waiting together into one write of up
///   to the connection's `flush_size`), again while the core has more. No
///   flush timer: a batch is whatever is pending when the writer runs. The
///   send queue holds at most two batches
///   ([`Overflow::Backpressure`], 128 KiB, under 1 ms of a
///   loopback link; enough to keep the queue's writer busy while the next
///   batch is cut): past that the writer waits, the core's per-channel
///   queues fill, and [`MConnSender::send`] waits, so a peer that reads
///   slowly slows the producers. Those waits
///   are the normal pace under load; the queue counts them
///   ([`QueueStats::overflows`](p2p_conn::stats::QueueStats::overflows),
///   [`MConnSender::queue_stats`]) and logs
///   them at trace level only. The writer sleeps until
///   [`MConnCore::poll_timeout`] (the next ping, the pong deadline, a rate
///   limit's release) or a wake-up, and runs [`MConnCore::handle_timeout`]:
///   a late pong closes the connection with [`MConnError::PongTimeout`].
/// - Received messages go to the [`MConnReceiver`] through a queue bounded
///   in bytes ([`RECV_BUFFER_BYTES`], 256 KiB): when the application does
///   not keep up, the reader stops reading (TCP back-pressure to the peer),
///   as CometBFT's `onReceive` does. While it waits it does not read pings
///   either, so a peer's pongs keep coming only while the application reads.
/// - **What waits in front of the application** under load is therefore
///   bounded in bytes at every stage this adapter owns: each channel's
///   `send_queue_capacity` (the application's choice), two batches in the
///   send queue and the one being written, and the receive buffer. What the
///   kernel's socket buffers hold is not (see Not provided).
///
/// # Guarantees
/// - Memory bounded on any input: the core's caps (one packet buffer, each
///   channel's reassembly under its `recv_message_capacity`), plus at most
///   [`RECV_BUFFER_BYTES`] of delivered messages waiting in the receive
///   queue, plus the batch the reader holds while it waits for room (at
///   most 64 KiB, plus the message that filled it; a message
///   larger than the whole buffer still passes, alone). Sends: each
///   channel's `send_queue_capacity`, one batch buffer, and at most
///   two 64 KiB batches in the send queue plus the one it is
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
/// - No bound on the kernel's socket buffers: TCP's autotuning grows them
///   to megabytes (Linux's `tcp_wmem` and `tcp_rmem` maxima), and when the
///   receiving side is the slower one they fill before any of the queues
///   above, so under saturation most of a message's wait is there. The
///   socket is the application's (this adapter sees only the secret
///   connection's halves): cap it there (`SO_SNDBUF`, `SO_RCVBUF`,
///   `TCP_NOTSENT_LOWAT`) when latency under saturation matters.
///   `TCP_NOTSENT_LOWAT` at 128 KiB on the sending socket (on Linux,
///   `socket2::SockRef::from(&tcp).set_tcp_notsent_lowat(128 * 1024)`
///   before the handshake) roughly halved the p99 of a saturated
///   connection in the project's benchmark, at no cost in CPU.
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
            writer_idle: AtomicBool::new(false),
            wakes: Wakes::default(),
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
            MConnSender::new(Arc::clone(&shared)),
            MConnReceiver::new(shared, rx),
        ))
    }
}

fn finish(shared: &Shared, reason: MConnCloseReason, events: &Deliveries) {
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
    let _ = events.send(Delivery {
        events: vec![Received::Closed(reason)],
        room: None,
    });
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

/// Received events on their way to the [`MConnReceiver`]: one batch, with
/// the room it holds in the receive buffer (released once the receiver
/// has handed out its last event).
struct Delivery {
    events: Vec<Received>,
    room: Option<OwnedSemaphorePermit>,
}

type Deliveries = mpsc::UnboundedSender<Delivery>;

#[cfg(test)]
mod tests;
