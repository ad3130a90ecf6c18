//! The connection's task: the reader and the writer futures it polls
//! together.

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use tokio::io::{AsyncBufRead, AsyncRead};
use tokio::sync::Semaphore;

use super::*;
use crate::Event;
use p2p_conn::io::queue;
use p2p_conn::io::tokio::ReadHalf;
use p2p_conn::Error;

/// What the reader has decoded and not yet delivered.
#[derive(Default)]
struct RecvBatch {
    events: Vec<Received>,
    /// Their cost in the receive buffer (an empty message counts one byte).
    bytes: usize,
    /// A ping came: the writer owes a pong.
    ping: bool,
    /// The receive rate limit holds the next packet back until then.
    held: Option<Instant>,
}

pub(super) async fn reader<R: AsyncRead + Unpin>(
    shared: &Shared,
    mut read: ReadHalf<R>,
    events: &Deliveries,
    buffer: &Arc<Semaphore>,
) -> MConnCloseReason {
    let mut batch = RecvBatch::default();
    loop {
        let end = poll_fn(|cx| collect(cx, shared, &mut read, &mut batch)).await;
        if std::mem::take(&mut batch.ping) {
            shared.wake_writer_if_idle();
        }
        // What came before an end is delivered before it.
        if !batch.events.is_empty() {
            if let Err(r) = deliver(shared, events, buffer, &mut batch).await {
                return r;
            }
        }
        if let Some(r) = end {
            return r;
        }
        if let Some(at) = batch.held.take() {
            // The receive rate limit holds the next packet back.
            tokio::time::sleep_until(at.into()).await;
        }
    }
}

/// Decode what the read half holds into `batch`, reading on while input
/// is ready: `Ready(None)` with a batch to deliver (the input ran dry, the
/// batch reached [`RECV_BATCH_BYTES`], or the rate limit holds the next
/// packet), `Ready(Some(_))` at the end (after whatever `batch` holds),
/// `Pending` only with nothing decoded. One core lock and one clock
/// reading per stretch of plaintext, not per packet.
fn collect<R: AsyncRead + Unpin>(
    cx: &mut Context<'_>,
    shared: &Shared,
    read: &mut ReadHalf<R>,
    batch: &mut RecvBatch,
) -> Poll<Option<MConnCloseReason>> {
    loop {
        if batch.bytes >= RECV_BATCH_BYTES {
            return Poll::Ready(None);
        }
        let input = match Pin::new(&mut *read).poll_fill_buf(cx) {
            Poll::Pending if batch.events.is_empty() && !batch.ping => return Poll::Pending,
            Poll::Pending => return Poll::Ready(None),
            Poll::Ready(Ok([])) => return Poll::Ready(Some(peer_closed(shared))),
            Poll::Ready(Ok(b)) => b,
            Poll::Ready(Err(e)) => {
                return Poll::Ready(Some(MConnCloseReason::Transport(Arc::new(Error::from_io(
                    e,
                )))))
            }
        };
        let mut used = 0;
        let mut failed = None;
        {
            let mut core = shared.core();
            let now = Instant::now();
            while used < input.len() && batch.bytes < RECV_BATCH_BYTES {
                match core.handle_input(now, &input[used..]) {
                    Ok((n, event)) => {
                        used += n;
                        match event {
                            Some(Event::Message { channel, data }) => {
                                batch.bytes += data.len().max(1);
                                let data = Bytes::from(data);
                                batch.events.push(Received::Message { channel, data });
                            }
                            Some(Event::Ping) => batch.ping = true,
                            Some(_) => {}
                            None if used < input.len() => {
                                batch.held = core.poll_timeout();
                                break;
                            }
                            None => {}
                        }
                    }
                    Err(e) => {
                        failed = Some(MConnCloseReason::Protocol(e));
                        break;
                    }
                }
            }
        }
        Pin::new(&mut *read).consume(used);
        if failed.is_some() {
            return Poll::Ready(failed);
        }
        if batch.held.is_some() {
            return Poll::Ready(None);
        }
    }
}

/// Hand `batch` to the receiver once the receive buffer has room for it
/// (a batch larger than the whole buffer waits for all of it), with one
/// wake-up of the receiver.
async fn deliver(
    shared: &Shared,
    events: &Deliveries,
    buffer: &Arc<Semaphore>,
    batch: &mut RecvBatch,
) -> Result<(), MConnCloseReason> {
    let want = batch.bytes.clamp(1, RECV_BUFFER_BYTES) as u32;
    let Ok(room) = Arc::clone(buffer).acquire_many_owned(want).await else {
        return Err(MConnCloseReason::Local);
    };
    batch.bytes = 0;
    let delivery = Delivery {
        events: std::mem::take(&mut batch.events),
        room: Some(room),
    };
    Wakes::count(&shared.wakes.deliveries);
    events.send(delivery).map_err(|_| MConnCloseReason::Local)
}

pub(super) async fn writer(shared: &Shared) -> MConnCloseReason {
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
            // Idle from here when nothing was pending (under the lock that
            // queues messages, so none is missed).
            shared.writer_idle.store(n == 0, Ordering::Release);
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
            () = wake => {
                Wakes::count(&shared.wakes.writer);
                // Let the tasks already runnable (other producers woken
                // with the one that woke us) queue theirs first: one
                // batch for all of them rather than one each.
                tokio::task::yield_now().await;
            }
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

/// Await the send queue's `send` (waiting while it holds two batches),
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
            () = &mut wake, if deadline.is_none() => Wakes::count(&shared.wakes.writer),
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
