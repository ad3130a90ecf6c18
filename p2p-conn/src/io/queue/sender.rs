//! The producers' side of a send queue: the cloneable [`Sender`], the byte
//! cap and the waiting for room.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::io::AsyncWrite;
use tokio::sync::oneshot;

use super::command::{Command, Item};
use super::inbox::Inbox;
use super::shared::{Counters, Park, Pending, Room, Settings, Shared, State};
use super::{lock, CloseReason, Overflow, QueueConfig, SendError};
use crate::engine::budget::{Admission, Budget};
use crate::io::tokio::WriteHalf;
use crate::stats::{self, QueueStats};
use crate::{Error, NodeId};

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
        Self::build(half, addr, config)
    }

    fn build<W>(
        half: WriteHalf<W>,
        addr: Option<SocketAddr>,
        config: &QueueConfig,
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
            quiet: config.waits_are_normal && config.overflow == Overflow::Backpressure,
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
