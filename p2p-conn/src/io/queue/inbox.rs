//! The channel from the producers to the writer task: a `VecDeque` and the
//! writer's waker, kept in the queue's shared state under the same lock as
//! the writer's state ([`super::shared::State`]), so that one lock per
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
use std::task::Waker;

use super::command::Command;

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

    /// Everything queued, into `local` (empty): the deques swap, so the
    /// writer takes it all under one lock.
    pub(super) fn take_all(&mut self, local: &mut VecDeque<Command>) {
        std::mem::swap(&mut self.queue, local);
    }

    /// The first command queued, if any.
    pub(super) fn pop(&mut self) -> Option<Command> {
        self.queue.pop_front()
    }

    /// The writer waits: wake `waker` at the next command (or the senders'
    /// end).
    pub(super) fn wait(&mut self, waker: &Waker) {
        match &mut self.waker {
            Some(w) if w.will_wake(waker) => {}
            w => *w = Some(waker.clone()),
        }
    }

    /// The writer parks: forget its waker, give the deque's memory back.
    pub(super) fn park(&mut self) {
        debug_assert!(self.queue.is_empty());
        self.waker = None;
        self.queue = VecDeque::new();
    }
}
