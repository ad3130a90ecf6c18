//! The channel from the producers to the writer task: a `VecDeque` and the
//! writer's waker, kept in the queue's shared state under the same lock as
//! the writer's state ([`super::sender::State`]), so that one lock per
//! message both queues a command and learns whether a writer task runs.
//! It replaces tokio's unbounded channel, which allocated a 512-byte
//! channel and an 800-byte block of 32 slots per queue before any message,
//! and a new block every 32 messages after; and then a channel of its own
//! (a second lock per message, and its own allocation).
//!
//! The writer takes everything queued under one lock (the two deques swap)
//! and is woken at most once per wait. Both deques go when the writer ends
//! (it ends whenever the queue goes idle).

use std::collections::VecDeque;
use std::future::poll_fn;
use std::task::{Context, Poll, Waker};

use super::lock;
use super::sender::{Command, Shared};

/// The producers' side of the channel, inside the shared state's lock.
pub(super) struct Inbox {
    queue: VecDeque<Command>,
    /// The writer, when it waits for a command.
    waker: Option<Waker>,
    /// Every `Sender` handle is gone.
    senders_gone: bool,
    /// `Sender` handles alive (the last one's drop ends the queue).
    handles: u32,
    /// The writer has stopped for good: commands are refused.
    stopped: bool,
}

impl Inbox {
    /// An empty inbox: nothing allocated.
    pub(super) const fn new() -> Inbox {
        Inbox {
            queue: VecDeque::new(),
            waker: None,
            senders_gone: false,
            handles: 1,
            stopped: false,
        }
    }

    /// Queue `cmd`; returns the writer's waker, to wake outside the lock.
    pub(super) fn push(&mut self, cmd: Command) -> Option<Waker> {
        self.queue.push_back(cmd);
        self.waker.take()
    }

    /// One more `Sender` handle.
    pub(super) fn add_sender(&mut self) {
        self.handles += 1;
    }

    /// One `Sender` handle fewer. `Some` when it was the last: every
    /// handle is gone, with the writer's waker to wake outside the lock.
    pub(super) fn drop_sender(&mut self) -> Option<Option<Waker>> {
        self.handles -= 1;
        if self.handles > 0 {
            return None;
        }
        self.senders_gone = true;
        Some(self.waker.take())
    }

    pub(super) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    pub(super) fn senders_gone(&self) -> bool {
        self.senders_gone
    }

    pub(super) fn stopped(&self) -> bool {
        self.stopped
    }

    /// The writer stopped for good: refuse later commands, forget its
    /// waker, hand back what is queued (to drop outside the lock) and the
    /// deque's memory.
    pub(super) fn stop(&mut self) -> VecDeque<Command> {
        self.stopped = true;
        self.waker = None;
        std::mem::take(&mut self.queue)
    }

    /// The writer parks: forget its waker, give the deque's memory back.
    pub(super) fn park(&mut self) {
        debug_assert!(self.queue.is_empty());
        self.waker = None;
        self.queue = VecDeque::new();
    }
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
        std::mem::swap(&mut st.inbox.queue, &mut self.local);
        match self.local.pop_front() {
            Some(v) => Some(Ok(v)),
            None if st.inbox.senders_gone => Some(Err(())),
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
        if let Some(v) = st.inbox.queue.pop_front() {
            return Poll::Ready(Some(v));
        }
        if st.inbox.senders_gone {
            return Poll::Ready(None);
        }
        match &mut st.inbox.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            w => *w = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}
