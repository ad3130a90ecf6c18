//! A send queue for one connection: many producers, one writer task.
//!
//! A node sends to a peer from many places at once (consensus, mempool,
//! block sync). [`Sender`] is a cheap, cloneable handle; the first message
//! spawns a writer task that owns the connection's [`WriteHalf`]. Producers
//! never touch the socket.
//!
//! # Design
//! * **Batched drain.** The writer takes everything already queued, up to
//!   [`Config::max_batch_messages`] messages and one write's worth of bytes
//!   (`flush_size`), seals it as one stream into its buffer and makes one
//!   write (`FrameWriter::poll_write_backlog_with`, the sans-IO step). No
//!   timer: a lone message goes out at once; under load, messages that
//!   arrive while a write is in progress go out together in the next one.
//! * **Frames are packed.** The secret connection is a byte stream: message
//!   boundaries are not on the wire, and the application frames its own
//!   messages (as MConnection length-prefixes its packets). A batch fills
//!   frames completely: five 200-byte messages share one 1 KiB frame.
//!   Readers see the same bytes in the same order as with one write per
//!   message.
//! * **Bundles** ([`Sender::send_bundle`]) are queued as one entry, so their
//!   messages reach the wire contiguously, never interleaved with another
//!   producer's.
//! * **Byte cap.** Queued, not yet sealed message bytes are capped at
//!   [`Config::max_pending_bytes`]; [`Config::overflow`] picks what happens
//!   when a message does not fit: wait ([`Overflow::Backpressure`]), fail
//!   that send ([`Overflow::Error`]), or close the connection once
//!   ([`Overflow::Disconnect`]). Each overflow is counted and logged
//!   (`tracing` warning naming the peer's node ID, its address when given,
//!   and the setting to raise). A message (or bundle) at or above the cap
//!   is counted apart, one at a time, so a large message never trips the cap
//!   by itself. Memory held for queued messages is therefore at most the
//!   cap, plus one such large message, plus the batch being written.
//! * **Lazy.** No writer task and no write buffer until the first message.
//! * **Shutdown.** [`Sender::shutdown`] returns at once. The writer
//!   finishes what is queued, then half-closes the transport (TCP FIN); if
//!   that takes longer than [`Config::shutdown_timeout`] it stops writing
//!   and half-closes anyway. [`Sender::close`] stops at once.
//! * **One failure for everyone.** When the writer stops (write error,
//!   overflow disconnect, shutdown, close), every waiting and later call
//!   fails with the same [`SendError`], which is `Clone` and carries the
//!   cause.
//!
//! # Guarantees
//! * Messages from one producer go out in the order it queued them;
//!   messages of a bundle are contiguous.
//! * [`Sender::flush`] resolves once everything queued before it has been
//!   written to the transport (and the transport flushed).
//! * A message queued before [`Sender::shutdown`] (a disconnect reason, say)
//!   reaches the peer before the FIN whenever the queue drains within
//!   `shutdown_timeout`. It does not when the peer reads too slowly for the
//!   backlog to drain in time: at the bound the writer stops where it is,
//!   possibly inside a frame (the peer then sees an incomplete frame, never
//!   a forged one), and the FIN follows.
//!
//! # Layers
//! The batching (`engine::Backlog`, `FrameWriter::poll_write_backlog_with`)
//! and the byte accounting (`engine::budget::Budget`) are sans-IO; this
//! module adds the channel, the task, the waiting and the deadline.
//!
//! # Not provided
//! * Priorities or channels (MConnection's multiplexing): one FIFO.
//! * A std::io version: the sans-IO batch and budget steps are shared, a
//!   thread-driven writer over them would be a thin second layer.
//! * Retrying after a failure: reconnect.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use bytes::Bytes;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot, Notify};

use super::tokio::{writer_io, WriteHalf};
use crate::config::Overflow;
use crate::engine::budget::{Admission, Budget};
use crate::engine::Backlog;
use crate::stats::{self, SendStats, Stamp};
use crate::{Config, Error, NodeId};

/// Why a send queue refused a message or stopped.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// [`Overflow::Error`]: the message would take the pending bytes past the
    /// cap. Nothing was queued; the connection stays up.
    #[error("send queue to {peer} full: {pending} bytes pending, the message has {len}, max_pending_bytes is {max}")]
    Full {
        /// The peer.
        peer: NodeId,
        /// Bytes queued when the message came.
        pending: usize,
        /// The message's (or bundle's) size.
        len: usize,
        /// [`Config::max_pending_bytes`].
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
    /// [`Sender::shutdown`] was called (or every handle was dropped).
    #[error("shut down")]
    Shutdown,
    /// [`Sender::close`] was called.
    #[error("closed")]
    Closed,
    /// [`Overflow::Disconnect`]: a message would have taken the pending
    /// bytes past the cap.
    #[error("disconnected on overflow: {pending} bytes pending, a message of {len}, max_pending_bytes is {max}")]
    Overflow {
        /// Bytes queued when the message came.
        pending: usize,
        /// The message's (or bundle's) size.
        len: usize,
        /// [`Config::max_pending_bytes`].
        max: usize,
    },
    /// Writing failed; the connection is unusable.
    #[error("{0}")]
    Failed(Arc<Error>),
}

/// Counters of a send queue (see [`Sender::stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueStats {
    /// Message bytes queued and not yet sealed (large messages included).
    pub pending_bytes: usize,
    /// Messages queued and not yet wholly sealed.
    pub pending_messages: usize,
    /// Writes of batches made.
    pub batches: u64,
    /// Messages wholly sealed into batches.
    pub messages_sent: u64,
    /// Messages that did not fit under the cap (waited, failed or
    /// disconnected, by the policy).
    pub overflows: u64,
    /// Messages in the largest batch so far.
    pub largest_batch: u64,
    /// Summed over the messages sent: the time each waited in the queue,
    /// from the call that queued it until its batch was sealed (zero
    /// without the `stats` feature).
    pub queue_wait_time: Duration,
    /// The writer's counters ([`crate::stats::SendStats`]: sealing, writes,
    /// not-ready time), as of the last batch written.
    pub send: SendStats,
}

/// Room a queued entry holds under the cap; given back when it is dropped
/// (the writer gives back a whole batch's at once, see `account`).
struct Permit {
    admission: Option<Admission>,
    shared: std::sync::Weak<Shared>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let (Some(a), Some(s)) = (self.admission.take(), self.shared.upgrade()) {
            s.release([a]);
        }
    }
}

/// A lock that keeps going after a panic elsewhere (the data are plain
/// counters and assignments, consistent at every step).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl QueueStats {
    /// Average time a sent message waited in the queue (zero before the
    /// first).
    pub fn average_queue_wait(&self) -> Duration {
        if self.messages_sent == 0 {
            Duration::ZERO
        } else {
            self.queue_wait_time.div_f64(self.messages_sent as f64)
        }
    }

    /// Average messages per batch written (0 before the first batch).
    pub fn messages_per_batch(&self) -> f64 {
        if self.batches == 0 {
            0.0
        } else {
            self.messages_sent as f64 / self.batches as f64
        }
    }
}

/// One queued message; the permit it holds is returned when it is sealed.
struct Item {
    data: Bytes,
    /// When it was queued.
    queued: Stamp,
    /// Cap accounting of the whole entry, on its last message.
    permit: Option<Permit>,
    /// A flush marker: fire once everything before it is written.
    flushed: Option<oneshot::Sender<()>>,
}

impl AsRef<[u8]> for Item {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

enum Command {
    Messages(Vec<Item>),
    Shutdown,
    /// Drop what is queued, finish the batch on the wire (within the
    /// shutdown bound), then half-close: the overflow disconnect.
    Abandon,
    Close,
}

#[derive(Default)]
struct Counters {
    pending_bytes: AtomicUsize,
    pending_messages: AtomicUsize,
    batches: AtomicU64,
    messages_sent: AtomicU64,
    overflows: AtomicU64,
    largest_batch: AtomicU64,
    queue_wait_nanos: AtomicU64,
    /// The writer's counters, published after each batch.
    send: Mutex<SendStats>,
}

type Starter = Box<dyn FnOnce(mpsc::UnboundedReceiver<Command>) + Send>;

struct Shared {
    peer: NodeId,
    addr: Option<SocketAddr>,
    max: usize,
    overflow: Overflow,
    tx: mpsc::UnboundedSender<Command>,
    /// Message bytes queued and not sealed, against the cap (sans-IO), and
    /// how many producers wait for room, under one lock so that a release
    /// never misses a waiter.
    budget: Mutex<Room>,
    /// Woken when room is given back while producers wait, or the queue
    /// stops.
    room: Notify,
    counters: Counters,
    state: Mutex<State>,
}

struct State {
    /// Spawns the writer task; taken by the first command.
    starter: Option<(Starter, mpsc::UnboundedReceiver<Command>)>,
    /// Set once, when the queue stops.
    closed: Option<CloseReason>,
}

/// The cap's state behind `Shared::budget`.
struct Room {
    budget: Budget,
    /// Producers waiting for room (releases skip the wake-up otherwise).
    waiters: usize,
}

impl Shared {
    /// Give back room under the cap and wake producers waiting for it.
    fn release(&self, admissions: impl IntoIterator<Item = Admission>) {
        let wake = {
            let mut r = lock(&self.budget);
            admissions.into_iter().for_each(|a| r.budget.release(a));
            r.waiters > 0
        };
        if wake {
            self.room.notify_waiters();
        }
    }
}

/// A cloneable handle to one connection's send queue. See the module docs.
#[derive(Clone)]
pub struct Sender {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Sender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sender")
            .field("peer", &self.shared.peer)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl Sender {
    /// A queue over `half`, with the queue settings of `config` (validated
    /// here). Spawns nothing yet: the writer task starts, on the current
    /// tokio runtime, with the first message or [`Self::shutdown`].
    pub fn new<W>(half: WriteHalf<W>, config: &Config) -> Result<Sender, Error>
    where
        W: AsyncWrite + Unpin + Send + 'static,
    {
        Self::with_addr(half, None, config)
    }

    /// As [`Self::new`], naming the peer's address in overflow warnings.
    pub fn with_addr<W>(
        half: WriteHalf<W>,
        addr: Option<SocketAddr>,
        config: &Config,
    ) -> Result<Sender, Error>
    where
        W: AsyncWrite + Unpin + Send + 'static,
    {
        config.validate()?;
        let (tx, rx) = mpsc::unbounded_channel();
        let peer = half.remote_node_id();
        let settings = Settings {
            max_batch_messages: config.max_batch_messages,
            shutdown_timeout: config.shutdown_timeout,
        };
        let shared = Arc::new_cyclic(|weak: &std::sync::Weak<Shared>| {
            let weak = weak.clone();
            let starter: Starter = Box::new(move |rx| {
                tokio::spawn(run(half, rx, settings, weak));
            });
            Shared {
                peer,
                addr,
                max: config.max_pending_bytes,
                overflow: config.overflow,
                tx,
                budget: Mutex::new(Room {
                    budget: Budget::new(config.max_pending_bytes),
                    waiters: 0,
                }),
                room: Notify::new(),
                counters: Counters::default(),
                state: Mutex::new(State {
                    starter: Some((starter, rx)),
                    closed: None,
                }),
            }
        });
        Ok(Sender { shared })
    }

    /// Queue one message. Returns once it is queued (under
    /// [`Overflow::Backpressure`], after waiting for room); it is written
    /// later, in order. An empty message queues nothing.
    pub async fn send(&self, msg: impl Into<Bytes>) -> Result<(), SendError> {
        self.send_bundle([msg.into()]).await
    }

    /// Queue several messages that reach the wire contiguously, never
    /// interleaved with other producers' messages. Counted against the cap
    /// as one entry of their total size.
    pub async fn send_bundle(
        &self,
        msgs: impl IntoIterator<Item = Bytes>,
    ) -> Result<(), SendError> {
        let msgs: Vec<Bytes> = msgs.into_iter().filter(|m| !m.is_empty()).collect();
        let len: usize = msgs.iter().map(Bytes::len).sum();
        if len == 0 {
            return self.check_open();
        }
        let permit = self.admit(len).await?;
        let queued = stats::now();
        let n = msgs.len();
        let last = n - 1;
        let mut permit = Some(permit);
        let items = msgs
            .into_iter()
            .enumerate()
            .map(|(i, data)| Item {
                data,
                queued,
                permit: if i == last { permit.take() } else { None },
                flushed: None,
            })
            .collect();
        // Counted before the hand-off, so the writer's decrement can never
        // come first; taken back if the queue closed in between.
        let c = &self.shared.counters;
        c.pending_bytes.fetch_add(len, Ordering::Relaxed);
        c.pending_messages.fetch_add(n, Ordering::Relaxed);
        let r = self.command(Command::Messages(items));
        if r.is_err() {
            // Saturating: a stopping writer may have zeroed them already.
            let take_back = |counter: &AtomicUsize, k: usize| {
                let _ = counter.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                    Some(v.saturating_sub(k))
                });
            };
            take_back(&c.pending_bytes, len);
            take_back(&c.pending_messages, n);
        }
        r
    }

    /// Wait until everything queued before this call has been written to the
    /// transport.
    pub async fn flush(&self) -> Result<(), SendError> {
        let (tx, rx) = oneshot::channel();
        self.command(Command::Messages(vec![Item {
            data: Bytes::new(),
            queued: stats::now(),
            permit: None,
            flushed: Some(tx),
        }]))?;
        rx.await.map_err(|_| self.closed_error())
    }

    /// Finish what is queued, then half-close the transport; after
    /// [`Config::shutdown_timeout`], half-close anyway. Returns at once;
    /// later sends fail with [`CloseReason::Shutdown`].
    pub fn shutdown(&self) {
        let _ = self.command(Command::Shutdown);
        self.mark_closed(CloseReason::Shutdown);
    }

    /// Stop now: nothing more is written, queued messages are dropped, the
    /// transport half is dropped (for a TCP half that sends the FIN, possibly
    /// inside a frame). Returns at once.
    pub fn close(&self) {
        let _ = self.command(Command::Close);
        self.mark_closed(CloseReason::Closed);
    }

    /// The queue's counters.
    pub fn stats(&self) -> QueueStats {
        let c = &self.shared.counters;
        QueueStats {
            pending_bytes: c.pending_bytes.load(Ordering::Relaxed),
            pending_messages: c.pending_messages.load(Ordering::Relaxed),
            batches: c.batches.load(Ordering::Relaxed),
            messages_sent: c.messages_sent.load(Ordering::Relaxed),
            overflows: c.overflows.load(Ordering::Relaxed),
            largest_batch: c.largest_batch.load(Ordering::Relaxed),
            queue_wait_time: Duration::from_nanos(c.queue_wait_nanos.load(Ordering::Relaxed)),
            send: *lock(&c.send),
        }
    }

    /// The peer this queue sends to.
    pub fn peer(&self) -> NodeId {
        self.shared.peer
    }

    /// Why the queue stopped, if it has.
    pub fn close_reason(&self) -> Option<CloseReason> {
        self.lock().closed.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        lock(&self.shared.state)
    }

    fn closed_error(&self) -> SendError {
        SendError::Closed {
            peer: self.shared.peer,
            reason: self.close_reason().unwrap_or(CloseReason::Shutdown),
        }
    }

    fn check_open(&self) -> Result<(), SendError> {
        match self.close_reason() {
            Some(_) => Err(self.closed_error()),
            None => Ok(()),
        }
    }

    /// Record why the queue stopped (the first reason wins).
    fn mark_closed(&self, reason: CloseReason) {
        let mut st = self.lock();
        if st.closed.is_none() {
            st.closed = Some(reason);
        }
        // Never started: nothing to drain, and the half is dropped (closing
        // the transport) unless shutdown starts the task below.
        st.starter = None;
        drop(st);
        // Producers waiting for room learn that the queue stopped.
        self.shared.room.notify_waiters();
    }

    /// Start the writer if needed and hand it `cmd`.
    fn command(&self, cmd: Command) -> Result<(), SendError> {
        {
            let mut st = self.lock();
            let shutting_down = matches!(cmd, Command::Shutdown);
            if st.closed.is_some() && !shutting_down {
                drop(st);
                return Err(self.closed_error());
            }
            if let Some((start, rx)) = st.starter.take() {
                start(rx);
            }
        }
        self.shared.tx.send(cmd).map_err(|_| self.closed_error())
    }

    /// Reserve room for `len` bytes under the cap, by the overflow policy.
    async fn admit(&self, len: usize) -> Result<Permit, SendError> {
        self.check_open()?;
        let s = &self.shared;
        let permit = |admission| Permit {
            admission: Some(admission),
            shared: Arc::downgrade(&self.shared),
        };
        let pending = {
            let mut r = lock(&s.budget);
            if let Some(a) = r.budget.try_admit(len) {
                return Ok(permit(a));
            }
            r.budget.pending()
        };
        s.counters.overflows.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            peer = %s.peer,
            addr = ?s.addr,
            pending_bytes = pending,
            message_bytes = len,
            max_pending_bytes = s.max,
            policy = ?s.overflow,
            "send queue full; raise Config::max_pending_bytes if this peer is expected to lag"
        );
        match s.overflow {
            Overflow::Backpressure => {
                // Count ourselves as waiting (under the budget's lock, so a
                // release sees it), and register for a wake-up before each
                // look, so a release between the look and the wait is not
                // missed.
                lock(&s.budget).waiters += 1;
                let _waiting = Waiting(&s.budget);
                loop {
                    let room = s.room.notified();
                    tokio::pin!(room);
                    room.as_mut().enable();
                    self.check_open()?;
                    if let Some(a) = lock(&s.budget).budget.try_admit(len) {
                        return Ok(permit(a));
                    }
                    room.await;
                }
            }
            Overflow::Error => Err(SendError::Full {
                peer: s.peer,
                pending,
                len,
                max: s.max,
            }),
            Overflow::Disconnect => {
                self.mark_closed(CloseReason::Overflow {
                    pending,
                    len,
                    max: s.max,
                });
                let _ = s.tx.send(Command::Abandon);
                Err(self.closed_error())
            }
        }
    }
}

/// Counts a producer waiting for room until it stops waiting (also when its
/// future is dropped).
struct Waiting<'a>(&'a Mutex<Room>);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        lock(self.0).waiters -= 1;
    }
}

/// The writer task's settings.
#[derive(Clone, Copy)]
struct Settings {
    max_batch_messages: usize,
    shutdown_timeout: Duration,
}

/// The writer task: owns the write half, drains the queue in batches.
async fn run<W>(
    mut half: WriteHalf<W>,
    mut rx: mpsc::UnboundedReceiver<Command>,
    settings: Settings,
    shared: std::sync::Weak<Shared>,
) where
    W: AsyncWrite + Unpin + Send + 'static,
{
    let mut backlog: Backlog<Item> = Backlog::new();
    let mut done: Vec<Item> = Vec::new();
    // Flush markers whose preceding bytes are sealed; fired once written.
    let mut waiting: VecDeque<oneshot::Sender<()>> = VecDeque::new();
    let mut ctl = Control {
        settings,
        deadline: None,
        abandoned: false,
    };
    let mut senders_gone = false;
    let outcome: Result<(), CloseReason> = loop {
        // Take every command already queued.
        let mut close_now = false;
        while let Ok(cmd) = rx.try_recv() {
            close_now |= apply(cmd, &mut backlog, &mut ctl);
        }
        if close_now {
            break Err(CloseReason::Closed);
        }
        let idle = backlog.is_empty() && half.engines.pending().is_empty();
        if idle {
            // Everything sealed is written.
            if let Err(e) = release_flushed(&mut half.io, &mut waiting, ctl.deadline).await {
                break Err(e);
            }
            if ctl.deadline.is_some() || senders_gone {
                break Ok(());
            }
            match rx.recv().await {
                Some(cmd) => {
                    if apply(cmd, &mut backlog, &mut ctl) {
                        break Err(CloseReason::Closed);
                    }
                    continue;
                }
                None => {
                    senders_gone = true;
                    ctl.start_deadline();
                    continue;
                }
            }
        }
        // Seal the next batch once the last one is on the wire, and give its
        // room back before writing it: a peer that has read a message never
        // finds its room still taken.
        if half.engines.pending().is_empty() && !backlog.is_empty() {
            if let Err(e) =
                half.engines
                    .seal_backlog(&mut backlog, settings.max_batch_messages, &mut done)
            {
                break Err(CloseReason::Failed(Arc::new(Error::from_io(e))));
            }
            match shared.upgrade() {
                Some(s) => account(&s, &mut done, &mut waiting),
                None => done.drain(..).for_each(|i| waiting.extend(i.flushed)),
            }
        }
        // Write it (or finish the last one), while watching for `close` and
        // the shutdown bound.
        let write = poll_fn(|cx| {
            let me = &mut half;
            me.engines.poll_flush_with(writer_io(&mut me.io, cx))
        });
        let result = tokio::select! {
            r = write => Some(r),
            cmd = rx.recv(), if !senders_gone => {
                match cmd {
                    Some(cmd) => {
                        if apply(cmd, &mut backlog, &mut ctl) {
                            break Err(CloseReason::Closed);
                        }
                    }
                    None => {
                        senders_gone = true;
                        ctl.start_deadline();
                    }
                }
                None
            }
            _ = sleep_until(ctl.deadline) => break Ok(()),
        };
        match result {
            None => {}
            Some(Err(e)) => break Err(CloseReason::Failed(Arc::new(Error::from_io(e)))),
            Some(Ok(())) => {
                if let Some(s) = shared.upgrade() {
                    *lock(&s.counters.send) = half.engines.stats();
                }
                // Everything sealed is written: release the flush waiters
                // now, not only when the queue runs empty.
                if let Err(e) = release_flushed(&mut half.io, &mut waiting, ctl.deadline).await {
                    break Err(e);
                }
            }
        }
    };
    // Stop: record why (the first reason wins), then half-close the
    // transport unless the writer failed.
    let reason = outcome.clone().err().unwrap_or(CloseReason::Shutdown);
    if let Some(s) = shared.upgrade() {
        let c = &s.counters;
        tracing::debug!(
            peer = %s.peer,
            addr = s.addr.map(tracing::field::display),
            %reason,
            messages = c.messages_sent.load(Ordering::Relaxed),
            batches = c.batches.load(Ordering::Relaxed),
            dropped_messages = c.pending_messages.load(Ordering::Relaxed),
            "send queue stopped"
        );
        lock(&s.state).closed.get_or_insert(reason);
        s.room.notify_waiters();
        // What is still queued is dropped with the task.
        s.counters.pending_bytes.store(0, Ordering::Relaxed);
        s.counters.pending_messages.store(0, Ordering::Relaxed);
    }
    if outcome.is_ok() {
        // Graceful: FIN after what was written (the bound has been applied
        // to the drain; the FIN itself gets a short grace).
        let grace = ctl
            .deadline
            .map(|d| d.saturating_duration_since(tokio::time::Instant::now()))
            .unwrap_or(settings.shutdown_timeout)
            .max(Duration::from_millis(10));
        let _ = tokio::time::timeout(grace, half.io.shutdown()).await;
    }
    // Dropping the half closes the transport's write side.
}

/// The writer task's control state.
struct Control {
    settings: Settings,
    /// Set by shutdown (or an overflow disconnect, or every handle gone):
    /// when the drain must stop.
    deadline: Option<tokio::time::Instant>,
    /// An overflow disconnect dropped the queue: queue nothing new.
    abandoned: bool,
}

impl Control {
    /// Start the shutdown bound (once).
    fn start_deadline(&mut self) {
        let t = self.settings.shutdown_timeout;
        self.deadline
            .get_or_insert_with(|| tokio::time::Instant::now() + t);
    }
}

/// Apply one command to the writer's state; `true` means stop now.
fn apply(cmd: Command, backlog: &mut Backlog<Item>, ctl: &mut Control) -> bool {
    match cmd {
        // After an overflow disconnect nothing new is queued (a producer
        // that raced it is dropped here; its permit goes with it). Flush
        // markers stay, so their waiters learn the outcome.
        Command::Messages(items) if ctl.abandoned => items
            .into_iter()
            .filter(|i| i.flushed.is_some())
            .for_each(|i| backlog.push(i)),
        Command::Messages(items) => items.into_iter().for_each(|i| backlog.push(i)),
        Command::Shutdown => ctl.start_deadline(),
        Command::Abandon => {
            // Queued messages go (their permits with them); the batch already
            // sealed still goes out, within the bound, so the peer sees
            // whole frames when it reads in time.
            *backlog = Backlog::new();
            ctl.abandoned = true;
            ctl.start_deadline();
        }
        Command::Close => return true,
    }
    false
}

/// Update the counters for the items the last batch sealed, give their room
/// back, and move its flush markers to `waiting` (released once the batch is
/// written).
fn account(s: &Shared, done: &mut Vec<Item>, waiting: &mut VecDeque<oneshot::Sender<()>>) {
    let mut bytes = 0;
    let mut messages = 0;
    let mut room = Vec::new();
    // One clock reading per batch; each message's wait is measured to it.
    let sealed = (!done.is_empty()).then(stats::now);
    let mut waited = Duration::ZERO;
    for mut item in done.drain(..) {
        if let Some(w) = item.flushed.take() {
            waiting.push_back(w);
        } else {
            bytes += item.data.len();
            messages += 1;
            if let Some(t) = sealed {
                waited += stats::between(item.queued, t);
            }
        }
        room.extend(item.permit.as_mut().and_then(|p| p.admission.take()));
    }
    // The batch's room goes back under one lock, with at most one wake-up.
    if !room.is_empty() {
        s.release(room);
    }
    let c = &s.counters;
    c.pending_bytes.fetch_sub(bytes, Ordering::Relaxed);
    c.pending_messages.fetch_sub(messages, Ordering::Relaxed);
    c.messages_sent
        .fetch_add(messages as u64, Ordering::Relaxed);
    c.batches.fetch_add(1, Ordering::Relaxed);
    c.largest_batch
        .fetch_max(messages as u64, Ordering::Relaxed);
    c.queue_wait_nanos
        .fetch_add(waited.as_nanos() as u64, Ordering::Relaxed);
}

/// Everything sealed so far is written: flush the transport, then tell the
/// flush waiters (if any).
async fn release_flushed<W: AsyncWrite + Unpin>(
    io: &mut W,
    waiting: &mut VecDeque<oneshot::Sender<()>>,
    deadline: Option<tokio::time::Instant>,
) -> Result<(), CloseReason> {
    if waiting.is_empty() {
        return Ok(());
    }
    bounded(deadline, io.flush()).await?;
    waiting.drain(..).for_each(|w| {
        let _ = w.send(());
    });
    Ok(())
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// Run `f` within the shutdown bound, when there is one.
async fn bounded<F>(deadline: Option<tokio::time::Instant>, f: F) -> Result<(), CloseReason>
where
    F: std::future::Future<Output = std::io::Result<()>>,
{
    let r = match deadline {
        Some(d) => match tokio::time::timeout_at(d, f).await {
            Ok(r) => r,
            Err(_) => return Ok(()),
        },
        None => f.await,
    };
    r.map_err(|e| CloseReason::Failed(Arc::new(Error::Io(e))))
}
