//! The channel from the producers to the writer task: a `VecDeque` under a
//! lock, and the writer's waker. It replaces tokio's unbounded channel,
//! which allocated a 512-byte channel and an 800-byte block of 32 slots per
//! queue before any message, and a new block every 32 messages after.
//!
//! The writer takes everything queued under one lock (the two deques swap),
//! is woken at most once per wait, and gives both deques back
//! ([`Rx::release`]) when the queue goes idle.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use super::lock;

struct State<T> {
    queue: VecDeque<T>,
    /// The writer, when it waits for a command.
    waker: Option<Waker>,
    /// The sending side was dropped (every `Sender` handle gone).
    senders_gone: bool,
    /// The receiving side was dropped (the writer stopped).
    receiver_gone: bool,
}

struct Inner<T> {
    state: Mutex<State<T>>,
}

/// The producers' end (one, in the queue's shared state).
pub(super) struct Tx<T> {
    inner: Arc<Inner<T>>,
}

/// The writer's end.
pub(super) struct Rx<T> {
    inner: Arc<Inner<T>>,
    /// Taken from the shared deque, not yet handed out.
    local: VecDeque<T>,
}

/// A channel with nothing allocated until the first command.
pub(super) fn channel<T>() -> (Tx<T>, Rx<T>) {
    let inner = Arc::new(Inner {
        state: Mutex::new(State {
            queue: VecDeque::new(),
            waker: None,
            senders_gone: false,
            receiver_gone: false,
        }),
    });
    (
        Tx {
            inner: inner.clone(),
        },
        Rx {
            inner,
            local: VecDeque::new(),
        },
    )
}

impl<T> Tx<T> {
    /// Queue `value`; gives it back when the writer has stopped.
    pub(super) fn send(&self, value: T) -> Result<(), T> {
        let waker = {
            let mut st = lock(&self.inner.state);
            if st.receiver_gone {
                return Err(value);
            }
            st.queue.push_back(value);
            st.waker.take()
        };
        // Woken outside the lock, once per wait.
        if let Some(w) = waker {
            w.wake();
        }
        Ok(())
    }
}

impl<T> Drop for Tx<T> {
    fn drop(&mut self) {
        let waker = {
            let mut st = lock(&self.inner.state);
            st.senders_gone = true;
            st.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl<T> Rx<T> {
    /// The next command if one is queued: `Some(Ok)`; `Some(Err(()))` when
    /// none is and the senders are gone; `None` when none is yet.
    fn take(&mut self) -> Option<Result<T, ()>> {
        if let Some(v) = self.local.pop_front() {
            return Some(Ok(v));
        }
        let mut st = lock(&self.inner.state);
        // Everything queued, under one lock: the deques swap.
        std::mem::swap(&mut st.queue, &mut self.local);
        match self.local.pop_front() {
            Some(v) => Some(Ok(v)),
            None if st.senders_gone => Some(Err(())),
            None => None,
        }
    }

    /// The next command already queued, if any.
    pub(super) fn try_recv(&mut self) -> Option<T> {
        match self.take() {
            Some(Ok(v)) => Some(v),
            _ => None,
        }
    }

    /// Wait for the next command; `None` once every sender is gone and
    /// nothing is left.
    pub(super) async fn recv(&mut self) -> Option<T> {
        poll_fn(|cx| self.poll_recv(cx)).await
    }

    fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        if let Some(r) = self.take() {
            return Poll::Ready(r.ok());
        }
        let mut st = lock(&self.inner.state);
        // A command (or the senders' end) that came after the look above.
        if let Some(v) = st.queue.pop_front() {
            return Poll::Ready(Some(v));
        }
        if st.senders_gone {
            return Poll::Ready(None);
        }
        match &mut st.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            w => *w = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    /// Give both deques' memory back (the queue went idle).
    pub(super) fn release(&mut self) {
        if self.local.is_empty() {
            self.local = VecDeque::new();
        }
        let mut st = lock(&self.inner.state);
        if st.queue.is_empty() {
            st.queue = VecDeque::new();
        }
    }
}

impl<T> Drop for Rx<T> {
    fn drop(&mut self) {
        // Later sends fail; what is queued is dropped here (with the
        // permits it holds), outside the lock.
        let queued = {
            let mut st = lock(&self.inner.state);
            st.receiver_gone = true;
            st.waker = None;
            std::mem::take(&mut st.queue)
        };
        drop(queued);
    }
}
