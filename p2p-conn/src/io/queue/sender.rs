//! The producers' side of a send queue: the cloneable [`Sender`], the byte
//! cap and the waiting for room.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::io::AsyncWrite;
use tokio::sync::{oneshot, Notify};

use super::inbox::Inbox;
use super::writer::{Park, Settings};
use super::{lock, CloseReason, Overflow, QueueConfig, SendError};
use crate::engine::budget::{Admission, Budget};
use crate::io::tokio::WriteHalf;
use crate::stats::clock::Ticks;
use crate::stats::{self, QueueStats, SendRecorder, Stamp};
use crate::{Error, NodeId};

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

#[derive(Default)]
pub(super) struct Counters {
    /// Counted by producers on overflow.
    pub(super) overflows: AtomicU64,
}

/// Bytes and messages queued and not yet sealed, behind `State`'s lock:
/// counted as a command is queued and taken back by the writer's per-batch
/// update, each under the lock it takes anyway.
#[derive(Default, Clone, Copy)]
pub(super) struct Pending {
    pub(super) bytes: usize,
    pub(super) messages: usize,
}

/// The writer's counters behind `State::written`, raw (times in stats
/// clock ticks): converted only when read.
#[derive(Default, Clone)]
pub(super) struct Written {
    pub(super) batches: u64,
    pub(super) messages_sent: u64,
    pub(super) largest_batch: u64,
    pub(super) queue_wait: Ticks,
    /// The write half's counters, published after each write.
    pub(super) send: SendRecorder,
}

pub(super) struct Shared {
    pub(super) peer: NodeId,
    /// Boxed: 8 bytes, not 32, for a queue made without one.
    pub(super) addr: Option<Box<SocketAddr>>,
    pub(super) overflow: Overflow,
    /// Waits for room under [`Overflow::Backpressure`] are the normal pace
    /// (the MConnection adapter's queue, one stage of its pipeline): logged
    /// at trace level, not as a warning (still counted).
    pub(super) quiet: bool,
    pub(super) settings: Settings,
    /// Message bytes queued and not sealed, against the cap (sans-IO), and
    /// how many producers wait for room, under one lock so that a release
    /// never misses a waiter.
    pub(super) budget: Mutex<Room>,
    pub(super) counters: Counters,
    pub(super) state: Mutex<State>,
}

pub(super) struct State {
    /// The commands for the writer.
    pub(super) inbox: Inbox,
    /// The write half while no writer task runs (before the first command,
    /// and whenever the queue is idle); the next command spawns a task with
    /// it. `None` while a task owns it, and once the writer has stopped
    /// (`Inbox::stopped`).
    pub(super) parked: Option<Box<dyn Park>>,
    /// The runtime the writer task runs on: the one current when it first
    /// started; later starts go there too, whoever sends.
    pub(super) runtime: Option<tokio::runtime::Handle>,
    /// Set once, when the queue stops; boxed: 8 bytes, not 32, until then.
    pub(super) closed: Option<Box<CloseReason>>,
    /// Counted by the writer alone, once per batch; allocated with the
    /// first batch (an unused queue does not hold them).
    pub(super) written: Option<Box<Written>>,
    pub(super) pending: Pending,
}

impl State {
    /// Update the writer's counters.
    pub(super) fn update_written(&mut self, f: impl FnOnce(&mut Written)) {
        f(self.written.get_or_insert_with(Box::default));
    }
}

/// The cap's state behind `Shared::budget`.
pub(super) struct Room {
    pub(super) budget: Budget,
    /// Producers waiting for room (releases skip the wake-up otherwise).
    pub(super) waiters: usize,
    /// Woken when room is given back while producers wait, or the queue
    /// stops. Made when a producer first has to wait (8 bytes, not 32,
    /// for a queue that never fills), then kept.
    pub(super) room: Option<Arc<Notify>>,
}

impl Shared {
    /// Update the writer's counters.
    pub(super) fn update_written(&self, f: impl FnOnce(&mut Written)) {
        lock(&self.state).update_written(f);
    }

    /// The writer's counters as last updated, and what is pending.
    pub(super) fn written(&self) -> (Written, Pending) {
        let st = lock(&self.state);
        (
            st.written.as_deref().cloned().unwrap_or_default(),
            st.pending,
        )
    }

    /// Give back room under the cap and wake producers waiting for it.
    pub(super) fn release(&self, admissions: impl IntoIterator<Item = Admission>) {
        let wake = {
            let mut r = lock(&self.budget);
            admissions.into_iter().for_each(|a| r.budget.release(a));
            if r.waiters > 0 {
                r.room.clone()
            } else {
                None
            }
        };
        if let Some(room) = wake {
            room.notify_waiters();
        }
    }

    /// Wake every producer waiting for room (the queue stopped).
    pub(super) fn wake_waiters(&self) {
        let room = lock(&self.budget).room.clone();
        if let Some(room) = room {
            room.notify_waiters();
        }
    }
}

/// A cloneable handle to one connection's send queue. See the module docs.
pub struct Sender {
    shared: Arc<Shared>,
}

impl Clone for Sender {
    fn clone(&self) -> Self {
        self.lock().inbox.add_sender();
        Sender {
            shared: self.shared.clone(),
        }
    }
}

impl Drop for Sender {
    /// The last handle ends the queue: a running writer finishes what is
    /// queued and half-closes within the shutdown bound; a parked one is
    /// started to half-close, on the runtime it ran on (a queue that never
    /// ran just drops its half).
    fn drop(&mut self) {
        let mut st = self.lock();
        let Some(waker) = st.inbox.drop_sender() else {
            return;
        };
        let parked = st.parked.take();
        let rt = st.runtime.clone();
        if parked.is_some() && rt.is_none() {
            st.inbox.stop();
        }
        drop(st);
        match (parked, rt) {
            (Some(half), Some(rt)) => half.start(self.shared.clone(), &rt),
            (half, _) => drop(half),
        }
        if let Some(w) = waker {
            w.wake();
        }
    }
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
    /// A queue over `half` with the settings `config` (validated here).
    /// Spawns nothing yet: the writer task starts, on the current tokio
    /// runtime, with the first message or [`Self::shutdown`], ends when the
    /// queue goes idle, and starts again, on that runtime, with the next.
    pub fn new<W>(half: WriteHalf<W>, config: &QueueConfig) -> Result<Sender, Error>
    where
        W: AsyncWrite + Unpin + Send + 'static,
    {
        Self::with_addr(half, None, config)
    }

    /// As [`Self::new`], naming the peer's address in overflow warnings.
    pub fn with_addr<W>(
        half: WriteHalf<W>,
        addr: Option<SocketAddr>,
        config: &QueueConfig,
    ) -> Result<Sender, Error>
    where
        W: AsyncWrite + Unpin + Send + 'static,
    {
        Self::build(half, addr, config, false)
    }

    /// As [`Self::new`], logging waits for room at trace level: for a
    /// queue whose producer is one writer that is expected to outpace the
    /// transport (the MConnection adapter).
    #[cfg(feature = "mconn")]
    pub(crate) fn pipeline_stage<W>(
        half: WriteHalf<W>,
        config: &QueueConfig,
    ) -> Result<Sender, Error>
    where
        W: AsyncWrite + Unpin + Send + 'static,
    {
        Self::build(half, None, config, true)
    }

    fn build<W>(
        half: WriteHalf<W>,
        addr: Option<SocketAddr>,
        config: &QueueConfig,
        quiet: bool,
    ) -> Result<Sender, Error>
    where
        W: AsyncWrite + Unpin + Send + 'static,
    {
        config.validate()?;
        let peer = half.remote_node_id();
        let settings = Settings::new(config);
        // The half is boxed, as the parked writer: the task's future then
        // holds a pointer, not the half, and no start-up closure is needed.
        let half: Box<dyn Park> = Box::new(half);
        let shared = Arc::new(Shared {
            peer,
            addr: addr.map(Box::new),
            overflow: config.overflow,
            quiet: quiet && config.overflow == Overflow::Backpressure,
            settings,
            budget: Mutex::new(Room {
                budget: Budget::new(config.max_pending_bytes),
                waiters: 0,
                room: None,
            }),
            counters: Counters::default(),
            state: Mutex::new(State {
                inbox: Inbox::new(),
                parked: Some(half),
                runtime: None,
                closed: None,
                written: None,
                pending: Pending::default(),
            }),
        });
        Ok(Sender { shared })
    }

    /// Queue one message. Returns once it is queued (under
    /// [`Overflow::Backpressure`], after waiting for room); it is written
    /// later, in order. An empty message queues nothing.
    pub async fn send(&self, msg: impl Into<Bytes>) -> Result<(), SendError> {
        let data = msg.into();
        if data.is_empty() {
            return self.check_open();
        }
        let len = data.len();
        let permit = self.admit(len).await?;
        // One message is one command: no list of its own.
        let item = Item {
            data,
            queued: stats::now(),
            permit: Some(permit),
            flushed: None,
        };
        self.hand_off(Command::Message(item), len, 1)
    }

    /// Queue several messages that reach the wire contiguously, never
    /// interleaved with other producers' messages. Counted against the cap
    /// as one entry of their total size.
    pub async fn send_bundle(
        &self,
        msgs: impl IntoIterator<Item = Bytes>,
    ) -> Result<(), SendError> {
        // One list for the bundle; its stamp is set again once admitted.
        // Sized once from the caller's iterator (the filter would hide its
        // length and make the list grow step by step).
        let unset = stats::now();
        let msgs = msgs.into_iter();
        let mut items: Vec<Item> = Vec::with_capacity(msgs.size_hint().0);
        items.extend(msgs.filter(|m| !m.is_empty()).map(|data| Item {
            data,
            queued: unset,
            permit: None,
            flushed: None,
        }));
        let len: usize = items.iter().map(|i| i.data.len()).sum();
        if len == 0 {
            return self.check_open();
        }
        let permit = self.admit(len).await?;
        let queued = stats::now();
        let n = items.len();
        items.iter_mut().for_each(|i| i.queued = queued);
        // Cap accounting of the whole entry rides on its last message.
        items[n - 1].permit = Some(permit);
        self.hand_off(Command::Messages(items), len, n)
    }

    /// Hand `cmd` to the writer, counting `len` bytes in `n` messages as
    /// pending (under the lock that queues it, so the writer's decrement
    /// never comes first, and nothing is counted if the queue has stopped).
    fn hand_off(&self, cmd: Command, len: usize, n: usize) -> Result<(), SendError> {
        self.command_counted(
            cmd,
            Pending {
                bytes: len,
                messages: n,
            },
        )
    }

    /// Wait until everything queued before this call has been written to the
    /// transport.
    pub async fn flush(&self) -> Result<(), SendError> {
        let (tx, rx) = oneshot::channel();
        self.command(Command::Message(Item {
            data: Bytes::new(),
            queued: stats::now(),
            permit: None,
            flushed: Some(tx),
        }))?;
        rx.await.map_err(|_| self.closed_error())
    }

    /// Finish what is queued, then half-close the transport; after
    /// [`QueueConfig::shutdown_timeout`], half-close anyway. Returns at once;
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
        let (w, pending) = self.shared.written();
        QueueStats {
            pending_bytes: pending.bytes,
            pending_messages: pending.messages,
            batches: w.batches,
            messages_sent: w.messages_sent,
            overflows: c.overflows.load(Ordering::Relaxed),
            largest_batch: w.largest_batch,
            // Raw ticks until here: converted only when read.
            queue_wait_time: w.queue_wait.to_duration(),
            send: w.send.snapshot(),
        }
    }

    /// The peer this queue sends to.
    pub fn peer(&self) -> NodeId {
        self.shared.peer
    }

    /// Why the queue stopped, if it has.
    pub fn close_reason(&self) -> Option<CloseReason> {
        self.lock().closed.as_deref().cloned()
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
        st.closed.get_or_insert_with(|| Box::new(reason));
        drop(st);
        // Producers waiting for room learn that the queue stopped.
        self.shared.wake_waiters();
    }

    /// Hand `cmd` to the writer, starting a task with the parked half if
    /// none runs. One lock: the command is queued and the writer's state
    /// read together, so a writer that parks never leaves a command behind.
    fn command(&self, cmd: Command) -> Result<(), SendError> {
        self.command_counted(cmd, Pending::default())
    }

    /// As [`Self::command`], counting `add` as pending once it is queued.
    fn command_counted(&self, cmd: Command, add: Pending) -> Result<(), SendError> {
        let mut st = self.lock();
        // Shutdown and the overflow disconnect follow the close they cause.
        let follows_close = matches!(cmd, Command::Shutdown | Command::Abandon);
        if st.closed.is_some() && !follows_close {
            drop(st);
            return Err(self.closed_error());
        }
        if st.inbox.stopped() {
            drop(st);
            return Err(self.closed_error());
        }
        st.pending.bytes += add.bytes;
        st.pending.messages += add.messages;
        if st.parked.is_none() {
            // A task runs.
            let waker = st.inbox.push(cmd);
            drop(st);
            // Woken outside the lock, once per wait.
            if let Some(w) = waker {
                w.wake();
            }
            return Ok(());
        }
        if matches!(cmd, Command::Close) {
            // Nothing is queued or being written: drop the half here.
            st.closed
                .get_or_insert_with(|| Box::new(CloseReason::Closed));
            st.inbox.stop();
            let half = st.parked.take();
            drop(st);
            drop(half);
            return Ok(());
        }
        // Panics outside a runtime before the first start, as `tokio::spawn`
        // does; the runtime is kept for later starts.
        let rt = match &st.runtime {
            Some(rt) => rt.clone(),
            None => st.runtime.insert(tokio::runtime::Handle::current()).clone(),
        };
        let _ = st.inbox.push(cmd);
        let half = st.parked.take();
        drop(st);
        if let Some(half) = half {
            half.start(self.shared.clone(), &rt);
        }
        Ok(())
    }

    /// Reserve room for `len` bytes under the cap, by the overflow policy.
    /// With room, one lock: whether the queue is open is checked when the
    /// message is queued (`command`); without, here first, so that a
    /// stopped queue reports that rather than an overflow.
    async fn admit(&self, len: usize) -> Result<Admission, SendError> {
        let s = &self.shared;
        let (pending, max) = {
            let mut r = lock(&s.budget);
            if let Some(a) = r.budget.try_admit(len) {
                return Ok(a);
            }
            (r.budget.pending(), r.budget.max())
        };
        self.check_open()?;
        s.counters.overflows.fetch_add(1, Ordering::Relaxed);
        if s.quiet {
            tracing::trace!(
                peer = %s.peer,
                pending_bytes = pending,
                message_bytes = len,
                "send queue full; waiting for room"
            );
        } else {
            tracing::warn!(
                peer = %s.peer,
                addr = ?s.addr.as_deref(),
                pending_bytes = pending,
                message_bytes = len,
                max_pending_bytes = max,
                policy = ?s.overflow,
                "send queue full; raise QueueConfig::max_pending_bytes if this peer is expected to lag"
            );
        }
        match s.overflow {
            Overflow::Backpressure => {
                // Count ourselves as waiting (under the budget's lock, so a
                // release sees it), and register for a wake-up before each
                // look, so a release between the look and the wait is not
                // missed.
                let room = {
                    let mut r = lock(&s.budget);
                    r.waiters += 1;
                    r.room.get_or_insert_with(Default::default).clone()
                };
                let _waiting = Waiting(&s.budget);
                loop {
                    let room = room.notified();
                    tokio::pin!(room);
                    room.as_mut().enable();
                    self.check_open()?;
                    if let Some(a) = lock(&s.budget).budget.try_admit(len) {
                        return Ok(a);
                    }
                    room.await;
                }
            }
            Overflow::Error => Err(SendError::Full {
                peer: s.peer,
                pending,
                len,
                max,
            }),
            Overflow::Disconnect => {
                self.mark_closed(CloseReason::Overflow { pending, len, max });
                let _ = self.command(Command::Abandon);
                Err(self.closed_error())
            }
        }
    }
}

/// Counts a producer waiting for room until it stops waiting (also when its
/// future is dropped).
pub(super) struct Waiting<'a>(&'a Mutex<Room>);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        lock(self.0).waiters -= 1;
    }
}
