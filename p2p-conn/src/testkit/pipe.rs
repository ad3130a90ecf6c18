//! The I/O double: two connected [`End`]s over in-memory byte queues, one
//! per direction, each both tokio `AsyncRead + AsyncWrite` and std
//! `Read + Write`, and the [`Control`] handle a test keeps.

use std::io::{self, Read, Write};
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::plans::{Counters, Fault, Faults, Plan};
use super::rng::Rng;
use crate::engine::unpoll;

/// A blocking std call of the double that waits this long is a deadlock: it
/// fails with `ErrorKind::TimedOut` (every wait in these tests is otherwise
/// over within milliseconds).
pub const DEADLOCK_LIMIT: Duration = Duration::from_secs(3);

/// One direction: bytes written by one end, not yet read by the other.
struct Lane {
    buf: Vec<u8>,
    head: usize,
    capacity: usize,
    /// Every byte ever accepted, in order.
    wire: Vec<u8>,
    /// The writing end shut down: the reader sees end of stream once drained.
    closed: bool,
    /// The reading end is gone: writes fail with `BrokenPipe`.
    reader_gone: bool,
    read_waker: Option<Waker>,
    write_waker: Option<Waker>,
}

impl Lane {
    fn new() -> Self {
        Lane {
            buf: Vec::new(),
            head: 0,
            capacity: usize::MAX,
            wire: Vec::new(),
            closed: false,
            reader_gone: false,
            read_waker: None,
            write_waker: None,
        }
    }
    fn queued(&self) -> usize {
        self.buf.len() - self.head
    }
    fn room(&self) -> usize {
        self.capacity.saturating_sub(self.queued())
    }
    /// Where the waker of a `Pending` writer (`write`) or reader waits.
    fn waker_slot(&mut self, write: bool) -> &mut Option<Waker> {
        if write {
            &mut self.write_waker
        } else {
            &mut self.read_waker
        }
    }
    fn wake_all(&mut self) {
        if let Some(w) = self.read_waker.take() {
            w.wake();
        }
        if let Some(w) = self.write_waker.take() {
            w.wake();
        }
    }
}

struct EndState {
    reads: Faults,
    writes: Faults,
    rng: Rng,
    counters: Counters,
    blocking: bool,
}

impl EndState {
    /// Decide what this call does; `offered` is the caller's buffer length
    /// (at least 1), `possible` how many bytes could move.
    fn draw(&mut self, write: bool, offered: usize, possible: usize) -> Fault {
        let d = if write {
            &mut self.writes
        } else {
            &mut self.reads
        };
        d.draw(&mut self.rng, offered, possible)
    }

    /// Draw this call's fault and carry out the ones that move no bytes:
    /// `Ok(n)` means move `n` bytes (`n > 0`); `Err(result)` is the call's
    /// result (an error, end of stream, or `Pending` with the waker woken or
    /// registered in `lane`). The same for reads and writes of one end.
    fn start(
        &mut self,
        lane: &mut Lane,
        write: bool,
        offered: usize,
        possible: usize,
        waker: Option<&Waker>,
    ) -> Result<usize, Poll<io::Result<usize>>> {
        let fault = self.draw(write, offered, possible);
        let c = &mut self.counters;
        let pending = if write {
            &mut c.write_pending
        } else {
            &mut c.read_pending
        };
        match fault {
            Fault::Fail(io::ErrorKind::WriteZero) if write => {
                c.errors += 1;
                Err(Poll::Ready(Ok(0)))
            }
            Fault::Fail(kind) => {
                c.errors += 1;
                Err(Poll::Ready(Err(kind.into())))
            }
            Fault::Interrupted => {
                c.interrupted += 1;
                Err(Poll::Ready(Err(io::ErrorKind::Interrupted.into())))
            }
            Fault::Pending => {
                *pending += 1;
                if let Some(w) = waker {
                    w.wake_by_ref();
                }
                Err(Poll::Pending)
            }
            _ if possible == 0 && !write && lane.closed => {
                c.eofs += 1;
                Err(Poll::Ready(Ok(0)))
            }
            _ if possible == 0 => {
                *pending += 1;
                if let Some(w) = waker {
                    *lane.waker_slot(write) = Some(w.clone());
                }
                Err(Poll::Pending)
            }
            Fault::Short(k) => Ok(k.min(possible)),
            Fault::Pass => Ok(possible),
        }
    }

    /// Account for `n` bytes this call moved through `lane`, and wake the
    /// other side of it.
    fn moved(&mut self, lane: &mut Lane, write: bool, n: usize) {
        if let Some(w) = lane.waker_slot(!write).take() {
            w.wake();
        }
        let d = if write {
            &mut self.writes
        } else {
            &mut self.reads
        };
        d.moved(n);
        let c = &mut self.counters;
        let (calls, bytes, sizes) = if write {
            (&mut c.writes, &mut c.written, &mut c.write_sizes)
        } else {
            (&mut c.reads, &mut c.read_bytes, &mut c.read_sizes)
        };
        *calls += 1;
        *bytes += n as u64;
        sizes.push(n);
    }
}

struct State {
    lanes: [Lane; 2],
    ends: [EndState; 2],
}

struct Net {
    state: Mutex<State>,
    changed: Condvar,
}

impl Net {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
    /// A std call of end `side` in blocking mode (`waker` is `None`) waits
    /// while `stalled` holds, at most [`DEADLOCK_LIMIT`]: then it fails with
    /// `TimedOut`. tokio and non-blocking calls go on at once.
    fn block<'a>(
        &self,
        guard: MutexGuard<'a, State>,
        side: usize,
        waker: Option<&Waker>,
        stalled: impl Fn(&State) -> bool,
    ) -> io::Result<MutexGuard<'a, State>> {
        if waker.is_some() {
            return Ok(guard);
        }
        let (mut guard, timeout) = self
            .changed
            .wait_timeout_while(guard, DEADLOCK_LIMIT, |st| {
                st.ends[side].blocking && stalled(st)
            })
            .unwrap_or_else(|e| e.into_inner());
        if !timeout.timed_out() {
            return Ok(guard);
        }
        guard.ends[side].counters.errors += 1;
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("test double: a blocking call waited {DEADLOCK_LIMIT:?} (deadlock)"),
        ))
    }
}

/// Two connected ends over a fresh, clean, blocking pipe with unbounded
/// capacity.
pub fn pipe() -> (End, End) {
    let end = |seed| EndState {
        reads: Faults::default(),
        writes: Faults::default(),
        rng: Rng::new(seed),
        counters: Counters::default(),
        blocking: true,
    };
    let net = Arc::new(Net {
        state: Mutex::new(State {
            lanes: [Lane::new(), Lane::new()],
            ends: [end(1), end(2)],
        }),
        changed: Condvar::new(),
    });
    (
        End {
            net: net.clone(),
            side: 0,
        },
        End { net, side: 1 },
    )
}

// ---------------------------------------------------------------------------
// One end

/// One end of a [`pipe`]: tokio `AsyncRead + AsyncWrite` and std
/// `Read + Write`. Dropping it is end of stream for the peer's reads and
/// `BrokenPipe` for the peer's writes.
pub struct End {
    net: Arc<Net>,
    side: usize,
}

impl End {
    /// A handle on this end for the test.
    pub fn control(&self) -> Control {
        Control {
            net: self.net.clone(),
            side: self.side,
        }
    }

    /// Shut down this end's writing direction (the peer reads end of stream).
    pub fn close_write(&self) {
        self.control().close_write();
    }

    /// `waker` is `None` for std calls.
    fn read_impl(&self, buf: &mut [u8], waker: Option<&Waker>) -> Poll<io::Result<usize>> {
        let (me, other) = (self.side, 1 - self.side);
        let mut guard = self.net.lock();
        guard.ends[me].counters.read_calls += 1;
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let empty = |st: &State| st.lanes[other].queued() == 0 && !st.lanes[other].closed;
        guard = match self.net.block(guard, me, waker, empty) {
            Ok(guard) => guard,
            Err(e) => return Poll::Ready(Err(e)),
        };
        let st = &mut *guard;
        let (end, lane) = (&mut st.ends[me], &mut st.lanes[other]);
        let possible = buf.len().min(lane.queued());
        let n = match end.start(lane, false, buf.len(), possible, waker) {
            Ok(n) => n,
            Err(result) => return result,
        };
        buf[..n].copy_from_slice(&lane.buf[lane.head..lane.head + n]);
        lane.head += n;
        if lane.head == lane.buf.len() {
            lane.buf.clear();
            lane.head = 0;
        } else if lane.head > 1 << 20 && lane.head > lane.buf.len() / 2 {
            lane.buf.drain(..lane.head);
            lane.head = 0;
        }
        end.moved(lane, false, n);
        self.net.changed.notify_all();
        Poll::Ready(Ok(n))
    }

    fn write_impl(&self, buf: &[u8], waker: Option<&Waker>) -> Poll<io::Result<usize>> {
        let me = self.side;
        let mut guard = self.net.lock();
        guard.ends[me].counters.write_calls += 1;
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let full = |st: &State| st.lanes[me].room() == 0 && !st.lanes[me].reader_gone;
        guard = match self.net.block(guard, me, waker, full) {
            Ok(guard) => guard,
            Err(e) => return Poll::Ready(Err(e)),
        };
        let st = &mut *guard;
        let (end, lane) = (&mut st.ends[me], &mut st.lanes[me]);
        if lane.closed || lane.reader_gone {
            end.counters.errors += 1;
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        let possible = buf.len().min(lane.room());
        let n = match end.start(lane, true, buf.len(), possible, waker) {
            Ok(n) => n,
            Err(result) => return result,
        };
        lane.buf.extend_from_slice(&buf[..n]);
        lane.wire.extend_from_slice(&buf[..n]);
        end.moved(lane, true, n);
        self.net.changed.notify_all();
        Poll::Ready(Ok(n))
    }
}

impl Drop for End {
    fn drop(&mut self) {
        let mut st = self.net.lock();
        st.lanes[self.side].closed = true;
        st.lanes[self.side].wake_all();
        st.lanes[1 - self.side].reader_gone = true;
        st.lanes[1 - self.side].wake_all();
        self.net.changed.notify_all();
    }
}

impl Read for End {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        unpoll(self.read_impl(buf, None))
    }
}

impl Write for End {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        unpoll(self.write_impl(buf, None))
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl AsyncRead for End {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let dst = buf.initialize_unfilled();
        match self.read_impl(dst, Some(cx.waker())) {
            Poll::Ready(Ok(n)) => {
                buf.advance(n);
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncWrite for End {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.write_impl(buf, Some(cx.waker()))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.close_write();
        Poll::Ready(Ok(()))
    }
}

// ---------------------------------------------------------------------------
// The test's handle

/// The test's handle on one [`End`] (valid after the `End` moved into a
/// connection).
#[derive(Clone)]
pub struct Control {
    net: Arc<Net>,
    side: usize,
}

impl Control {
    /// This end's counters so far.
    pub fn counters(&self) -> Counters {
        self.net.lock().ends[self.side].counters.clone()
    }
    /// Zero this end's counters.
    pub fn reset_counters(&self) {
        self.net.lock().ends[self.side].counters = Counters::default();
    }
    /// Install the fault plan of this end's writes (its call and byte
    /// positions restart at zero).
    pub fn set_write_plan(&self, plan: Plan) {
        self.net.lock().ends[self.side].writes = Faults::new(plan);
    }
    /// Install the fault plan of this end's reads.
    pub fn set_read_plan(&self, plan: Plan) {
        self.net.lock().ends[self.side].reads = Faults::new(plan);
    }
    /// Seed this end's random faults.
    pub fn seed(&self, seed: u64) {
        self.net.lock().ends[self.side].rng = Rng::new(seed);
    }
    /// Blocking (std calls wait for data or room, at most
    /// [`DEADLOCK_LIMIT`]) or non-blocking (they return `WouldBlock`). tokio
    /// calls never block.
    pub fn set_blocking(&self, blocking: bool) {
        self.net.lock().ends[self.side].blocking = blocking;
        self.net.changed.notify_all();
    }
    /// Most bytes this end's writes may have queued for the peer.
    pub fn set_capacity(&self, capacity: usize) {
        let mut st = self.net.lock();
        st.lanes[self.side].capacity = capacity.max(1);
        st.lanes[self.side].wake_all();
        self.net.changed.notify_all();
    }
    /// Shut down this end's writing direction: the peer reads end of stream
    /// after the queued bytes; later writes of this end fail.
    pub fn close_write(&self) {
        let mut st = self.net.lock();
        st.lanes[self.side].closed = true;
        st.lanes[self.side].wake_all();
        self.net.changed.notify_all();
    }
    /// Bytes this end's writes accepted and its reads returned so far (the
    /// cheap part of [`Self::counters`]).
    pub fn bytes(&self) -> (u64, u64) {
        let st = self.net.lock();
        let c = &st.ends[self.side].counters;
        (c.written, c.read_bytes)
    }
    /// Every byte this end ever wrote, in order.
    pub fn wire(&self) -> Vec<u8> {
        self.net.lock().lanes[self.side].wire.clone()
    }
    /// Length of [`Self::wire`].
    pub fn wire_len(&self) -> usize {
        self.net.lock().lanes[self.side].wire.len()
    }
    /// Bytes this end wrote that the peer has not read yet.
    pub fn queued(&self) -> usize {
        self.net.lock().lanes[self.side].queued()
    }
}
