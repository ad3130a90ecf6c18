//! Test doubles and helpers shared by this crate's tests, its fuzz targets
//! and anyone testing code built on p2p-conn (feature `testkit`; never
//! enable it in production builds).
//!
//! # Handshake pumps
//! [`feed`], [`pump`] and [`run_handshakes`] drive [`Handshake`] state
//! machines against each other in memory, with no transport; [`seeded_rng`]
//! and [`deterministic_handshake`] make every byte of a run repeatable (a
//! fuzzer replaying an input needs that).
//!
//! # The I/O double
//! [`pipe`] makes two connected [`End`]s over in-memory byte queues, one per
//! direction. An `End` is both tokio `AsyncRead + AsyncWrite` and std
//! `Read + Write`, so the tokio, blocking and codec adapters all run over the
//! same transport. A [`Control`] handle (kept by the test while the connection
//! owns the `End`) reads the [`Counters`] and changes the fault [`Plan`]s:
//!
//! * bounded capacity per direction: a write takes at most the free room;
//!   with no room it is `Pending` (tokio, waker registered) / `WouldBlock`
//!   (std, non-blocking mode) or waits (std, blocking mode);
//! * std blocking mode: a read waits for data or end of stream, a write for
//!   room; a call that waits [`DEADLOCK_LIMIT`] fails with `TimedOut`
//!   ("... deadlock") instead of hanging the test;
//! * scripted or seeded-random faults per call, in either mode: short
//!   reads/writes (random, or in random pieces of at most N bytes), `Pending`
//!   (tokio: the waker is woken at once) / `WouldBlock`, `Interrupted`, and a
//!   hard error at a chosen call number or after a chosen number of bytes;
//! * counters of calls, bytes, sizes, `Pending`/`WouldBlock` and errors, and a
//!   log of every byte each end wrote (the wire).
//!
//! A fresh [`pipe`] is clean, blocking and unbounded; [`connect`] / [`pair`]
//! run the real handshake on both ends (one in a helper thread), then switch
//! both ends to non-blocking, reset the counters and set the capacity, so
//! faults only start once the test installs a plan.
//!
//! # Not provided
//! Real sockets, timing faults (delays), or anything for production use.
#![allow(missing_docs)]

use std::future::Future;
use std::io::{self, IoSlice, Read, Write};
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use rand_core::SeedableRng;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::io::{blocking, tokio as ptokio};
use crate::proto::{Established, Handshake, HandshakeParams, ProtocolError};
use crate::{Config, Error, Identity};

/// A blocking std call of the double that waits this long is a deadlock: it
/// fails with `ErrorKind::TimedOut` (every wait in these tests is otherwise
/// over within milliseconds).
pub const DEADLOCK_LIMIT: Duration = Duration::from_secs(3);

// ---------------------------------------------------------------------------
// Handshake pumps

/// A ChaCha20 RNG seeded from `seed`: a real CSPRNG with a known seed, for
/// repeatable handshakes in tests and fuzz targets.
pub fn seeded_rng(seed: u64) -> rand_chacha::ChaCha20Rng {
    rand_chacha::ChaCha20Rng::seed_from_u64(seed)
}

/// An identity and a handshake whose every byte follows from `seed`.
pub fn deterministic_handshake(seed: u64, params: HandshakeParams) -> (Identity, Handshake) {
    let mut rng = seeded_rng(seed);
    let mut identity_seed = [0u8; 32];
    rand_core::RngCore::fill_bytes(&mut rng, &mut identity_seed);
    let identity = Identity::from_seed(&identity_seed);
    let hs = Handshake::new_with_rng(&identity, params, &mut rng);
    (identity, hs)
}

/// Feed `bytes` into the handshake's read side, in as few calls as it allows.
/// Stops with an error if the handshake wants no more input while bytes are
/// left (a [`ProtocolError::Misuse`]).
pub fn feed(hs: &mut Handshake, mut bytes: &[u8]) -> Result<(), ProtocolError> {
    while !bytes.is_empty() {
        let buf = hs.read_buffer();
        if buf.is_empty() {
            return Err(ProtocolError::Misuse("the handshake wants no more input"));
        }
        let n = buf.len().min(bytes.len());
        buf[..n].copy_from_slice(&bytes[..n]);
        hs.advance_read(n)?;
        bytes = &bytes[n..];
    }
    Ok(())
}

/// Move up to `max` bytes of what `from` has to send into `to` (no more than
/// `to` asks for), append them to `wire`, and return how many moved.
pub fn pump(
    from: &mut Handshake,
    to: &mut Handshake,
    max: usize,
    wire: &mut Vec<u8>,
) -> Result<usize, ProtocolError> {
    let out = from.outgoing();
    let want = to.read_buffer();
    let n = out.len().min(want.len()).min(max);
    want[..n].copy_from_slice(&out[..n]);
    wire.extend_from_slice(&out[..n]);
    from.advance_outgoing(n);
    to.advance_read(n)?;
    Ok(n)
}

/// What [`run_handshakes`] returns: both sides' results and every byte each
/// side sent.
#[derive(Debug)]
pub struct HandshakeRun {
    pub a: Established,
    pub b: Established,
    pub a_wire: Vec<u8>,
    pub b_wire: Vec<u8>,
}

/// Drive two handshakes against each other, `chunk` bytes at a time per
/// direction (1 exercises every split point), to completion.
pub fn run_handshakes(
    mut a: Handshake,
    mut b: Handshake,
    chunk: usize,
) -> Result<HandshakeRun, ProtocolError> {
    let (mut a_wire, mut b_wire) = (Vec::new(), Vec::new());
    while !(a.is_finished() && b.is_finished()) {
        let moved = pump(&mut a, &mut b, chunk.max(1), &mut a_wire)?
            + pump(&mut b, &mut a, chunk.max(1), &mut b_wire)?;
        if moved == 0 {
            return Err(ProtocolError::Misuse("the handshakes stalled"));
        }
    }
    Ok(HandshakeRun {
        a: a.into_established()?,
        b: b.into_established()?,
        a_wire,
        b_wire,
    })
}

// ---------------------------------------------------------------------------
// Randomness for plans and payloads

/// splitmix64: deterministic randomness for fault plans and payloads.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }
    /// True with probability `pct` / 100.
    pub fn percent(&mut self, pct: u32) -> bool {
        self.next_u64() % 100 < u64::from(pct)
    }
}

/// `len` pseudo-random bytes; different seeds differ from the first byte on
/// with overwhelming probability.
pub fn payload(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed ^ 0x5eed_0000_0000_0000);
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        out.extend_from_slice(&rng.next_u64().to_le_bytes());
    }
    out.truncate(len);
    out
}

// ---------------------------------------------------------------------------
// Fault plans and counters

/// What one read or write call of the double does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Move as many bytes as possible.
    Pass,
    /// Move at most this many bytes (at least 1 when any can move).
    Short(usize),
    /// Move nothing: tokio wakes the waker and returns `Pending`, std returns
    /// `WouldBlock`.
    Pending,
    /// Move nothing, return `ErrorKind::Interrupted`.
    Interrupted,
    /// Move nothing, return this error; for a write, `WriteZero` means
    /// return `Ok(0)` (the way a transport reports it).
    Fail(io::ErrorKind),
}

/// Percent chance per call of each random fault (checked in this order:
/// pending, interrupted, short).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rates {
    pub pending: u32,
    pub interrupted: u32,
    pub short: u32,
}

/// The faults of one direction (reads or writes) of one end. Call numbers and
/// byte counts start at zero when the plan is installed.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// Faults for the next calls, in order; then random faults by `rates`.
    pub script: Vec<Fault>,
    /// Random faults once the script is used up (seeded by [`Control::seed`]).
    pub rates: Rates,
    /// Every call from this 1-based call number on fails with this error.
    pub fail_at_call: Option<(u64, io::ErrorKind)>,
    /// Exactly this many bytes move (a call crossing the limit is cut short);
    /// every call after that fails with this error.
    pub fail_after_bytes: Option<(u64, io::ErrorKind)>,
    /// Each call moves at most a random 1..=`max_piece` bytes of the buffer
    /// it is given (and no more than can move).
    pub max_piece: Option<usize>,
}

impl Plan {
    /// No faults.
    pub fn clean() -> Self {
        Plan::default()
    }
    /// Random faults at these rates.
    pub fn random(rates: Rates) -> Self {
        Plan {
            rates,
            ..Plan::default()
        }
    }
    /// These faults for the next calls, then none.
    pub fn script(faults: &[Fault]) -> Self {
        Plan {
            script: faults.to_vec(),
            ..Plan::default()
        }
    }
    /// `bytes` more bytes, then `kind` on every call.
    pub fn fail_after_bytes(mut self, bytes: u64, kind: io::ErrorKind) -> Self {
        self.fail_after_bytes = Some((bytes, kind));
        self
    }
    /// `kind` from the `call`-th call (1-based) on.
    pub fn fail_at_call(mut self, call: u64, kind: io::ErrorKind) -> Self {
        self.fail_at_call = Some((call, kind));
        self
    }
    /// Move bytes in random pieces of 1..=`max` bytes.
    pub fn max_piece(mut self, max: usize) -> Self {
        self.max_piece = Some(max);
        self
    }
}

/// What one end's transport saw. Reset by [`Control::reset_counters`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Every write call (including those returning errors or `Pending`).
    pub write_calls: u64,
    /// Write calls that returned `Ok(n)` with `n > 0`.
    pub writes: u64,
    /// Bytes those writes accepted.
    pub written: u64,
    /// Size of each successful write, in order.
    pub write_sizes: Vec<usize>,
    /// Every read call.
    pub read_calls: u64,
    /// Read calls that returned `Ok(n)` with `n > 0`.
    pub reads: u64,
    /// Bytes those reads returned.
    pub read_bytes: u64,
    /// Size of each successful read, in order.
    pub read_sizes: Vec<usize>,
    /// Reads that returned `Ok(0)` at end of stream.
    pub eofs: u64,
    /// Writes that returned `Pending` / `WouldBlock` (injected or no room).
    pub write_pending: u64,
    /// Reads that returned `Pending` / `WouldBlock` (injected or no data).
    pub read_pending: u64,
    /// Calls that returned `Interrupted`.
    pub interrupted: u64,
    /// Calls that returned any other error.
    pub errors: u64,
}

impl Counters {
    /// All `Pending` / `WouldBlock` results.
    pub fn pending(&self) -> u64 {
        self.write_pending + self.read_pending
    }
}

// ---------------------------------------------------------------------------
// The shared state

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

/// Plan and position of one direction of one end.
#[derive(Default)]
struct Dir {
    plan: Plan,
    calls: u64,
    bytes: u64,
}

struct EndState {
    reads: Dir,
    writes: Dir,
    rng: Rng,
    counters: Counters,
    blocking: bool,
}

impl EndState {
    /// Decide what this call does; `offered` is the caller's buffer length
    /// (at least 1), `possible` how many bytes could move.
    fn draw(&mut self, write: bool, offered: usize, possible: usize) -> Fault {
        let rng = &mut self.rng;
        let d = if write {
            &mut self.writes
        } else {
            &mut self.reads
        };
        d.calls += 1;
        if let Some((at, kind)) = d.plan.fail_at_call {
            if d.calls >= at {
                return Fault::Fail(kind);
            }
        }
        let mut cap = possible;
        if let Some(max) = d.plan.max_piece {
            cap = cap.min(rng.range(1, max.min(offered).max(1)));
        }
        if let Some((limit, kind)) = d.plan.fail_after_bytes {
            let left = limit.saturating_sub(d.bytes);
            if left == 0 {
                return Fault::Fail(kind);
            }
            cap = cap.min(usize::try_from(left).unwrap_or(usize::MAX));
        }
        let fault = if !d.plan.script.is_empty() {
            d.plan.script.remove(0)
        } else {
            let r = d.plan.rates;
            if rng.percent(r.pending) {
                Fault::Pending
            } else if rng.percent(r.interrupted) {
                Fault::Interrupted
            } else if cap > 1 && rng.percent(r.short) {
                Fault::Short(rng.range(1, cap - 1))
            } else {
                Fault::Pass
            }
        };
        match fault {
            Fault::Pass if cap < possible => Fault::Short(cap),
            Fault::Short(k) => Fault::Short(k.clamp(1, cap.max(1))),
            other => other,
        }
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
        d.bytes += n as u64;
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
        reads: Dir::default(),
        writes: Dir::default(),
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

fn unpoll<T>(p: Poll<io::Result<T>>) -> io::Result<T> {
    match p {
        Poll::Ready(r) => r,
        Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
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
        self.net.lock().ends[self.side].writes = Dir {
            plan,
            ..Dir::default()
        };
    }
    /// Install the fault plan of this end's reads.
    pub fn set_read_plan(&self, plan: Plan) {
        self.net.lock().ends[self.side].reads = Dir {
            plan,
            ..Dir::default()
        };
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

// ---------------------------------------------------------------------------
// Connections over the double

/// Run `f` to completion on a fresh current-thread tokio runtime (with the
/// timer the handshake timeout needs).
pub fn block_on<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("tokio runtime")
        .block_on(f)
}

/// Connect two ends: `a` runs on this thread and `b` on a helper thread, both
/// over a clean blocking pipe. Afterwards both ends are non-blocking, their
/// counters are zero and each direction holds at most `capacity` bytes.
pub fn connect<A, B>(
    capacity: usize,
    a: impl FnOnce(End) -> A,
    b: impl FnOnce(End) -> B + Send,
) -> (A, Control, B, Control)
where
    B: Send,
{
    let (ea, eb) = pipe();
    let (ca, cb) = (ea.control(), eb.control());
    let (a, b) = std::thread::scope(|s| {
        let hb = s.spawn(move || b(eb));
        let a = a(ea);
        (a, hb.join().expect("handshake thread panicked"))
    });
    for c in [&ca, &cb] {
        c.set_blocking(false);
        c.set_capacity(capacity);
        c.reset_counters();
    }
    (a, ca, b, cb)
}

/// Both ends through [`Conn`] adapters with the real handshake.
pub fn pair<A: Conn, B: Conn>(
    config_a: &Config,
    config_b: &Config,
    capacity: usize,
) -> (A, Control, B, Control) {
    let (ia, ib) = (Identity::generate(), Identity::generate());
    let (a, ca, b, cb) = connect(
        capacity,
        |e| A::handshake(e, &ia, config_a),
        |e| B::handshake(e, &ib, config_b),
    );
    let a = a.unwrap_or_else(|e| panic!("{} handshake: {e}", A::NAME));
    let b = b.unwrap_or_else(|e| panic!("{} handshake: {e}", B::NAME));
    (a, ca, b, cb)
}

/// A connection of one adapter driven without blocking: every call makes one
/// attempt, and "would have to wait" is `ErrorKind::WouldBlock` (std over a
/// non-blocking `End`; tokio polled once with a no-op waker, its future
/// dropped when `Pending`).
pub trait Conn: Sized + Send {
    const NAME: &'static str;
    /// The adapter's handshake over `end` (blocks this thread until done).
    fn handshake(end: End, identity: &Identity, config: &Config) -> Result<Self, Error>;
    fn try_write(&mut self, data: &[u8]) -> io::Result<usize>;
    fn try_write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize>;
    fn try_flush(&mut self) -> io::Result<()>;
    /// Flush, then end the stream for the peer.
    fn try_shutdown(&mut self) -> io::Result<()>;
    fn try_send(&mut self, msg: &[u8]) -> Result<(), Error>;
    fn try_send_vectored(&mut self, bufs: &mut [IoSlice<'_>]) -> Result<(), Error>;
    fn try_read(&mut self, buf: &mut [u8]) -> io::Result<usize>;
    fn buffer_capacity(&self) -> usize;
}

pub type TokioConn = ptokio::SecretConnection<End>;
pub type StdConn = blocking::SecretConnection<End>;

struct NoopWake;

impl Wake for NoopWake {
    fn wake(self: Arc<Self>) {}
}

/// Poll once with a no-op waker; `Pending` becomes `WouldBlock`.
pub fn poll_once<T>(f: impl FnOnce(&mut Context<'_>) -> Poll<io::Result<T>>) -> io::Result<T> {
    let waker = Waker::from(Arc::new(NoopWake));
    let mut cx = Context::from_waker(&waker);
    unpoll(f(&mut cx))
}

/// Poll `fut` once with a no-op waker: `Some(output)` if it finished.
pub fn now_or_never<F: Future>(fut: F) -> Option<F::Output> {
    let waker = Waker::from(Arc::new(NoopWake));
    let mut cx = Context::from_waker(&waker);
    let fut = std::pin::pin!(fut);
    match fut.poll(&mut cx) {
        Poll::Ready(v) => Some(v),
        Poll::Pending => None,
    }
}

fn would_block() -> Error {
    Error::Io(io::ErrorKind::WouldBlock.into())
}

impl Conn for TokioConn {
    const NAME: &'static str = "tokio";
    fn handshake(end: End, identity: &Identity, config: &Config) -> Result<Self, Error> {
        block_on(ptokio::handshake(end, identity, config))
    }
    fn try_write(&mut self, data: &[u8]) -> io::Result<usize> {
        poll_once(|cx| Pin::new(&mut *self).poll_write(cx, data))
    }
    fn try_write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        poll_once(|cx| Pin::new(&mut *self).poll_write_vectored(cx, bufs))
    }
    fn try_flush(&mut self) -> io::Result<()> {
        poll_once(|cx| Pin::new(&mut *self).poll_flush(cx))
    }
    fn try_shutdown(&mut self) -> io::Result<()> {
        poll_once(|cx| Pin::new(&mut *self).poll_shutdown(cx))
    }
    fn try_send(&mut self, msg: &[u8]) -> Result<(), Error> {
        now_or_never(self.send(msg)).unwrap_or_else(|| Err(would_block()))
    }
    fn try_send_vectored(&mut self, bufs: &mut [IoSlice<'_>]) -> Result<(), Error> {
        now_or_never(self.send_vectored(bufs)).unwrap_or_else(|| Err(would_block()))
    }
    fn try_read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        poll_once(|cx| {
            let mut rb = ReadBuf::new(buf);
            Pin::new(&mut *self)
                .poll_read(cx, &mut rb)
                .map_ok(|()| rb.filled().len())
        })
    }
    fn buffer_capacity(&self) -> usize {
        crate::io::SecretStream::buffer_capacity(self)
    }
}

impl Conn for StdConn {
    const NAME: &'static str = "std";
    fn handshake(end: End, identity: &Identity, config: &Config) -> Result<Self, Error> {
        blocking::handshake(end, identity, config)
    }
    fn try_write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.write(data)
    }
    fn try_write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.write_vectored(bufs)
    }
    fn try_flush(&mut self) -> io::Result<()> {
        self.flush()
    }
    fn try_shutdown(&mut self) -> io::Result<()> {
        self.flush()?;
        self.get_ref().close_write();
        Ok(())
    }
    fn try_send(&mut self, msg: &[u8]) -> Result<(), Error> {
        self.send(msg)
    }
    fn try_send_vectored(&mut self, bufs: &mut [IoSlice<'_>]) -> Result<(), Error> {
        self.send_vectored(bufs)
    }
    fn try_read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read(buf)
    }
    fn buffer_capacity(&self) -> usize {
        crate::io::SecretStream::buffer_capacity(self)
    }
}

/// True for the error a non-blocking call returns when it would have to wait.
pub fn is_would_block(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::WouldBlock
}

/// Sealed bytes of `len` plaintext bytes with `frame`-byte frames.
pub fn sealed_len(len: usize, frame: usize) -> usize {
    len.div_ceil(frame) * (frame + 20)
}
