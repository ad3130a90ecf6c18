//! The writer task of a send queue: owns the write half, drains the queue
//! in batches, bounds the shutdown. It ends whenever the queue goes idle,
//! parking the half in the shared state (`State::parked`); the next
//! command spawns it again.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::oneshot;

use super::command::{Command, Item};
use super::shared::{Park, Settings, Shared};
use super::{lock, CloseReason};
use crate::engine::writer::Backlog;
use crate::io::tokio::{writer_io, WriteHalf};
use crate::{stats, Error};

impl<W> Park for WriteHalf<W>
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    fn start(self: Box<Self>, shared: Arc<Shared>, rt: &tokio::runtime::Handle) {
        rt.spawn(run(self, shared));
    }
}

/// The writer task: owns the write half, drains the queue in batches, and
/// parks the half again when the queue goes idle.
async fn run<W>(mut half: Box<WriteHalf<W>>, shared: Arc<Shared>)
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    let settings = shared.settings;
    let mut rx = Rx::new(&shared);
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
        while let Some(cmd) = rx.try_recv() {
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
            // Idle: park the half and end the task, unless a command came
            // meanwhile (checked under the lock producers queue under, so
            // none is left behind). The task's memory, its batch lists and
            // the inbox's deques go with it; the write buffer keeps its own
            // rule; the next command spawns the task again.
            let mut st = lock(&shared.state);
            if !rx.is_empty() || !st.inbox.is_empty() {
                continue;
            }
            if st.inbox.senders_gone() {
                drop(st);
                senders_gone = true;
                ctl.start_deadline();
                continue;
            }
            st.update_written(|w| w.send = half.engines.recorder().clone());
            st.inbox.park();
            st.parked = Some(half);
            return;
        }
        // Seal the next batch once the last one is on the wire, and give its
        // room back before writing it: a peer that has read a message never
        // finds its room still taken.
        if half.engines.pending().is_empty() && !backlog.is_empty() {
            if let Err(e) =
                half.engines
                    .seal_backlog(&mut backlog, settings.max_batch_messages(), &mut done)
            {
                break Err(CloseReason::Failed(Arc::new(Error::from_io(e))));
            }
            account(&shared, &mut done, &mut waiting);
        }
        // Write it (or finish the last one), while watching for `close` and
        // the shutdown bound.
        let write = poll_fn(|cx| {
            let me = &mut *half;
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
                shared.update_written(|w| w.send = half.engines.recorder().clone());
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
    {
        let s = &*shared;
        let (w, pending) = s.written();
        tracing::debug!(
            peer = %s.peer,
            addr = s.addr.as_deref().map(tracing::field::display),
            %reason,
            messages = w.messages_sent,
            batches = w.batches,
            dropped_messages = pending.messages,
            "send queue stopped"
        );
        // Later commands fail; what is still queued is dropped here (with
        // the permits it holds), outside the lock.
        let queued = {
            let mut st = lock(&s.state);
            st.closed.get_or_insert_with(|| Box::new(reason));
            st.pending = Default::default();
            st.inbox.stop()
        };
        drop(queued);
        s.wake_waiters();
    }
    if outcome.is_ok() {
        // Graceful: FIN after what was written (the bound has been applied
        // to the drain; the FIN itself gets a short grace).
        let grace = ctl
            .deadline
            .map(|d| d.saturating_duration_since(tokio::time::Instant::now()))
            .unwrap_or(settings.shutdown_timeout())
            .max(Duration::from_millis(10));
        let _ = tokio::time::timeout(grace, half.io.shutdown()).await;
    }
    // Dropping the half closes the transport's write side.
}

/// The writer task's control state.
pub(super) struct Control {
    pub(super) settings: Settings,
    /// Set by shutdown (or an overflow disconnect, or every handle gone):
    /// when the drain must stop.
    pub(super) deadline: Option<tokio::time::Instant>,
    /// An overflow disconnect dropped the queue: queue nothing new.
    pub(super) abandoned: bool,
}

impl Control {
    /// Start the shutdown bound (once).
    fn start_deadline(&mut self) {
        let t = self.settings.shutdown_timeout();
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
        Command::Message(item) if ctl.abandoned => {
            if item.flushed.is_some() {
                backlog.push(item);
            }
        }
        Command::Message(item) => backlog.push(item),
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
    // The batch's room goes back under one lock, with at most one wake-up
    // (taken from the items in place: no list of its own).
    if done.iter().any(|i| i.permit.is_some()) {
        s.release(done.iter_mut().filter_map(|i| i.permit.take()));
    }
    // One clock reading per batch; each message's wait is measured to it.
    let sealed = (!done.is_empty()).then(stats::now);
    let mut waited = stats::clock::Ticks::default();
    for mut item in done.drain(..) {
        if let Some(w) = item.flushed.take() {
            waiting.push_back(w);
        } else {
            bytes += item.data.len();
            messages += 1;
            if let Some(t) = sealed {
                waited += stats::clock::between(item.queued, t);
            }
        }
    }
    let mut st = lock(&s.state);
    // Saturating: a stopped queue has zeroed them.
    st.pending.bytes = st.pending.bytes.saturating_sub(bytes);
    st.pending.messages = st.pending.messages.saturating_sub(messages);
    st.update_written(|w| {
        w.messages_sent += messages as u64;
        w.batches += 1;
        w.largest_batch = w.largest_batch.max(messages as u64);
        w.queue_wait += waited;
    });
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

/// The writer's end: borrows the shared state for the task's life.
pub(super) struct Rx<'a> {
    shared: &'a Shared,
    /// Taken from the shared deque, not yet handed out.
    local: VecDeque<Command>,
}

impl<'a> Rx<'a> {
    pub(super) fn new(shared: &'a Shared) -> Rx<'a> {
        Rx {
            shared,
            local: VecDeque::new(),
        }
    }

    /// The next command if one is queued: `Some(Ok)`; `Some(Err(()))` when
    /// none is and the senders are gone; `None` when none is yet.
    fn take(&mut self) -> Option<Result<Command, ()>> {
        if let Some(v) = self.local.pop_front() {
            return Some(Ok(v));
        }
        let mut st = lock(&self.shared.state);
        // Everything queued, under one lock: the deques swap.
        st.inbox.take_all(&mut self.local);
        match self.local.pop_front() {
            Some(v) => Some(Ok(v)),
            None if st.inbox.senders_gone() => Some(Err(())),
            None => None,
        }
    }

    /// The next command already queued, if any.
    pub(super) fn try_recv(&mut self) -> Option<Command> {
        match self.take() {
            Some(Ok(v)) => Some(v),
            _ => None,
        }
    }

    /// Nothing taken and not handed out.
    pub(super) fn is_empty(&self) -> bool {
        self.local.is_empty()
    }

    /// Wait for the next command; `None` once every sender is gone and
    /// nothing is left.
    pub(super) async fn recv(&mut self) -> Option<Command> {
        poll_fn(|cx| self.poll_recv(cx)).await
    }

    fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<Command>> {
        if let Some(r) = self.take() {
            return Poll::Ready(r.ok());
        }
        let mut st = lock(&self.shared.state);
        // A command (or the senders' end) that came after the look above.
        if let Some(v) = st.inbox.pop() {
            return Poll::Ready(Some(v));
        }
        if st.inbox.senders_gone() {
            return Poll::Ready(None);
        }
        st.inbox.wait(cx.waker());
        Poll::Pending
    }
}
