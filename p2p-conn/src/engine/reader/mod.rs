//! The receive side: "open the sealed frames in this buffer", written once.
//!
//! [`ReadCore`] is the sans-IO step every reading adapter calls: given a
//! buffer of sealed bytes (whatever owns it), it opens every whole frame in
//! place from the front and reports how many bytes of frames it opened;
//! those frames are the caller's from then on, and `next_opened` walks their
//! data, skipping zero-length frames. It keeps no promise about the
//! caller's buffer from one call to the next, so no caller can make it treat
//! unopened bytes as opened. It also owns the plaintext that
//! arrived with the handshake's last authentication frame, so that plaintext
//! is served first, and from one place, in every adapter.
//!
//! [`FrameReader`] is [`ReadCore`] plus a receive buffer it owns, for the
//! tokio and std adapters. After each read it opens every whole frame the
//! read brought in, in one step (so the `stats` timers run once per batch,
//! never per frame), then hands out their data frame by frame. The codec's
//! `SecretDecoder` is [`ReadCore`] over `FramedRead`'s buffer: it splits the
//! frames it opened off that buffer and yields them from its own state.
//!
//! # Guarantees
//! * Only opened plaintext is ever handed out: bytes that fail to open are
//!   never shown to the caller, and every later call fails with the same
//!   error (the [`Opener`] is sticky).
//! * Zero-length frames are skipped, never reported as end of stream.
//! * End of stream between frames is clean; inside a frame it is an
//!   `UnexpectedEof` error naming how much of the frame arrived
//!   ([`ReadCore::end_of_stream`]).
//! * [`FrameReader`] is poisoned by its first error: a frame that fails to
//!   open, an end of stream inside a frame, or a transport error other than
//!   `Interrupted`, `WouldBlock` and `TimedOut` (which leave the stream
//!   intact and may be retried). Every later call returns that error again
//!   and never reads the transport, so a reset socket, which reads as a
//!   clean end of stream the second time, cannot pass for one.
//! * The receive buffer is at least one sealed frame
//!   ([`ReadCore::read_buffer_size`]), so every read can make progress.
//!
//! # Memory ([`FrameReader`])
//! The buffer is allocated on first read (never during the handshake), sized
//! to the last burst (at least one sealed frame), grown to `read_buffer_size`
//! when a read fills it, and freed whenever a read finds the transport empty
//! (`Pending`) with nothing buffered.
//!
//! # Not provided
//! No I/O of its own, no timers, no locking.

use std::io;
use std::ops::Range;
use std::task::Poll;

use crate::proto::frame::frame_data;
use crate::proto::wire::{sealed_frame_len, GROUP_FRAMES};
use crate::proto::{Opener, ProtocolError};
use crate::stats::{self, RecvRecorder, RecvStats, Transfer};

/// Plaintext that arrived with the handshake. `Debug` shows its length only.
#[derive(Default)]
struct Initial {
    bytes: Vec<u8>,
    pos: usize,
}

impl std::fmt::Debug for Initial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} bytes", self.bytes.len() - self.pos)
    }
}

/// The receive side's protocol state, shared by [`FrameReader`] and the
/// codec decoder. See the module docs.
#[derive(Debug)]
pub struct ReadCore {
    opener: Opener,
    initial: Initial,
    read_buffer_size: usize,
}

impl ReadCore {
    /// Open with `opener`, serving `initial` (the handshake's leftover
    /// plaintext) first. `read_buffer_size` is raised to one sealed frame.
    pub fn new(opener: Opener, initial: Vec<u8>, read_buffer_size: usize) -> Self {
        let read_buffer_size = read_buffer_size.max(opener.sealed_frame_len());
        ReadCore {
            opener,
            initial: Initial {
                bytes: initial,
                pos: 0,
            },
            read_buffer_size,
        }
    }

    /// Sealed bytes per frame.
    pub fn sealed_frame_len(&self) -> usize {
        self.opener.sealed_frame_len()
    }

    /// Data bytes per frame.
    pub(crate) fn frame_size(&self) -> usize {
        self.opener.frame_size().get()
    }

    /// Whether holding back a partial group for one more read can pay: the
    /// multi-frame engine is on, and the read buffer has room for a partial
    /// group (at most `GROUP_FRAMES + 1` frames' bytes) twice over, so a
    /// read after it always has space.
    fn can_hold_back(&self) -> bool {
        self.opener.opens_groups()
            && self.read_buffer_size >= 2 * (GROUP_FRAMES + 1) * self.sealed_frame_len()
    }

    /// Most raw bytes one read brings in (at least one sealed frame).
    pub fn read_buffer_size(&self) -> usize {
        self.read_buffer_size
    }

    /// The handshake's leftover plaintext not yet consumed.
    pub fn initial(&self) -> &[u8] {
        &self.initial.bytes[self.initial.pos..]
    }

    /// Mark `n` bytes of [`Self::initial`] as delivered.
    pub fn consume_initial(&mut self, n: usize) {
        let i = &mut self.initial;
        i.pos = (i.pos + n).min(i.bytes.len());
        if i.pos == i.bytes.len() {
            *i = Initial::default();
        }
    }

    /// Take all of the handshake's leftover plaintext not yet consumed.
    pub fn take_initial(&mut self) -> Vec<u8> {
        let mut i = std::mem::take(&mut self.initial);
        i.bytes.drain(..i.pos);
        i.bytes
    }

    /// Bytes of memory the leftover plaintext holds.
    pub fn initial_capacity(&self) -> usize {
        self.initial.bytes.capacity()
    }

    /// Open every whole frame at the front of `sealed` in place, in one step
    /// (so it is timed once), and return how many bytes of frames are now
    /// plaintext. With `groups_only`, open nothing but whole groups of the
    /// multi-frame engine (the caller will read more first, then ask again
    /// without it).
    ///
    /// The opened frames belong to the caller from then on: each keeps its
    /// decrypted length prefix in place, already checked against the frame
    /// size, and [`next_opened`] walks them. Nothing about `sealed` is
    /// remembered between calls, so a caller may hand a different buffer
    /// every time: whatever it holds is authenticated before it counts as
    /// opened. On a bad frame the frames before it stay opened and the error
    /// comes with them; every later call fails with that error at once.
    pub(crate) fn open_batch(&mut self, sealed: &mut [u8], groups_only: bool) -> Batch {
        let frame = self.sealed_frame_len();
        let mut b = Batch::default();
        if let Some(e) = self.opener.failure() {
            b.error = Some(e.clone());
            return b;
        }
        while sealed.len() - b.consumed >= frame {
            let rest = &mut sealed[b.consumed..];
            let grouped = self.opener.open_groups_in_place(rest);
            if grouped == 0 && groups_only {
                break;
            }
            // Frames the step opened (authenticated and decrypted in place);
            // a group's length prefixes are checked here, while the frames
            // are still ours to refuse.
            for i in 0..grouped.max(1) {
                let f = &mut rest[i * frame..(i + 1) * frame];
                let r = if grouped > 0 {
                    self.opener.opened_frame(f)
                } else {
                    self.opener.open_in_place(f)
                };
                match r {
                    Ok(data) => {
                        b.consumed += frame;
                        b.bytes += data.len();
                    }
                    Err(e) => {
                        b.error = Some(e);
                        return b;
                    }
                }
            }
        }
        b
    }

    /// The stream ended with `unopened` sealed bytes left over: fine between
    /// frames, an `UnexpectedEof` error inside one.
    pub fn end_of_stream(&self, unopened: usize) -> io::Result<()> {
        if unopened == 0 {
            return Ok(());
        }
        Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!(
                "peer closed the connection inside a frame ({unopened} of {} sealed bytes received)",
                self.sealed_frame_len()
            ),
        ))
    }
}

/// The close event of a connection's receive side (`tracing`): why it
/// ended and the final counts.
#[cfg(feature = "tracing")]
impl Drop for FrameReader {
    fn drop(&mut self) {
        let Some(peer) = &self.peer else { return };
        let cause: &dyn std::fmt::Display = match &self.failed {
            Some(f) => &f.to_io(),
            None if self.eof => &"end of stream from the peer",
            None => &"dropped by the application",
        };
        // Counts only: a close event must not wait for the clock's
        // calibration.
        let s = self.stats.counts();
        crate::events::closed(
            crate::events::Side::Recv,
            peer,
            cause,
            s.frames_opened,
            s.bytes_opened,
            s.bytes_read,
        );
    }
}

/// What [`ReadCore::open_batch`] did.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    /// Bytes of whole frames opened from the front.
    pub(crate) consumed: usize,
    /// Plaintext bytes in them.
    pub(crate) bytes: usize,
    /// The frame after them failed to open.
    pub(crate) error: Option<ProtocolError>,
}

/// The data of the next frame with data among the opened frames of
/// `opened[*at..]` (whole sealed frames for `frame_size`, opened by
/// [`ReadCore::open_batch`]), skipping zero-length frames; `at` moves past
/// it. `None` when every opened frame is delivered.
pub(crate) fn next_opened(
    opened: &[u8],
    frame_size: usize,
    at: &mut usize,
) -> Option<Range<usize>> {
    let sealed_frame = sealed_frame_len(frame_size);
    while opened.len().saturating_sub(*at) >= sealed_frame {
        let start = *at;
        *at += sealed_frame;
        // `open_batch` checked every prefix; a bad one (never) reads as empty.
        let data = frame_data(&opened[start..*at], frame_size).unwrap_or(0..0);
        if !data.is_empty() {
            return Some(start + data.start..start + data.end);
        }
    }
    None
}

/// The buffered frame reader of the tokio and std adapters: [`ReadCore`] over
/// a receive buffer it owns. See the module docs.
pub struct FrameReader {
    core: ReadCore,
    buf: Vec<u8>,
    /// Opened frames not yet delivered are `buf[next_frame..start]`;
    /// unopened sealed bytes are `buf[start..end]`.
    next_frame: usize,
    start: usize,
    end: usize,
    /// Opened, undelivered plaintext of the current frame within `buf`.
    plain: Range<usize>,
    eof: bool,
    /// Size to allocate the next time the buffer is (re)allocated.
    next_alloc: usize,
    /// The read function returns `Pending` rather than blocking (tokio).
    nonblocking: bool,
    /// The last read filled all the space it was given: more is likely
    /// queued in the transport.
    last_read_full: bool,
    /// The error that ended this stream, returned again by every later call
    /// (after the data of frames opened before it).
    failed: Option<ReadFailure>,
    stats: RecvRecorder,
    /// The authenticated peer, named by the close event.
    #[cfg(feature = "tracing")]
    /// Its node ID, not its 32-byte key: the event names the ID.
    peer: Option<crate::NodeId>,
}

/// Why a [`FrameReader`] stopped: kept so that every later call fails the
/// same way instead of reading on (a reset socket reads as a clean end of
/// stream the second time; a bad frame must never be skipped).
#[derive(Debug, Clone)]
enum ReadFailure {
    Protocol(ProtocolError),
    Io(io::ErrorKind, String),
}

impl ReadFailure {
    fn to_io(&self) -> io::Error {
        match self {
            ReadFailure::Protocol(e) => e.clone().into(),
            ReadFailure::Io(kind, msg) => io::Error::new(*kind, msg.clone()),
        }
    }
}

/// Transport errors a caller may retry after: they leave the stream intact.
fn is_transient(kind: io::ErrorKind) -> bool {
    matches!(
        kind,
        io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

impl std::fmt::Debug for FrameReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Lengths only: the buffer holds decrypted application data.
        f.debug_struct("FrameReader")
            .field("core", &self.core)
            .field("plaintext_buffered", &self.plain.len())
            .field("sealed_buffered", &(self.end - self.start))
            .field("buffer_capacity", &self.buf.capacity())
            .field("eof", &self.eof)
            .field("failed", &self.failed.is_some())
            .finish()
    }
}

impl FrameReader {
    /// A reader over `core`, with no buffer allocated yet.
    pub fn new(core: ReadCore) -> Self {
        FrameReader {
            core,
            buf: Vec::new(),
            next_frame: 0,
            start: 0,
            end: 0,
            plain: 0..0,
            eof: false,
            next_alloc: 0,
            nonblocking: false,
            last_read_full: false,
            failed: None,
            stats: RecvRecorder::default(),
            #[cfg(feature = "tracing")]
            peer: None,
        }
    }

    /// Name the peer in this reader's close event (`tracing`).
    #[allow(unused_variables)]
    pub(crate) fn set_peer(&mut self, peer: crate::PublicKey) {
        #[cfg(feature = "tracing")]
        {
            self.peer = Some(peer.node_id());
        }
    }

    /// This reader's counters (all zero without the `stats` feature).
    pub fn stats(&self) -> RecvStats {
        self.stats.snapshot()
    }

    /// Tell the reader its read function returns `Pending` instead of
    /// blocking (the tokio adapter). It then reads once more, when the last
    /// read filled its buffer, before it opens fewer frames than a group one
    /// at a time, so the multi-frame engine gets whole groups. A blocking
    /// reader never does: that read could wait for bytes the peer only sends
    /// after it has seen the data already here.
    #[cfg(feature = "tokio")]
    pub(crate) fn set_nonblocking(&mut self, nonblocking: bool) {
        self.nonblocking = nonblocking;
    }

    /// Bytes of buffer memory held.
    pub fn buffer_capacity(&self) -> usize {
        self.buf.capacity() + self.core.initial_capacity()
    }

    /// Size the buffer before a read: at least one sealed frame, grown to the
    /// configured size once a read fills it.
    fn prepare_buffer(&mut self) {
        let want = self
            .next_alloc
            .clamp(self.core.sealed_frame_len(), self.core.read_buffer_size());
        if self.buf.len() < want {
            self.buf.resize(want, 0);
        }
    }

    /// [`Self::release_buffer`], and the cipher's expanded key (rebuilt on
    /// the next frame): everything an idle reader can give back.
    pub fn release_buffers(&mut self) {
        self.release_buffer();
        self.core.opener.release_key();
    }

    /// Free the receive buffer if it holds no undelivered bytes.
    pub fn release_buffer(&mut self) {
        if self.start == self.end && self.plain.is_empty() && self.next_frame == self.start {
            self.buf = Vec::new();
            self.next_frame = 0;
            self.start = 0;
            self.end = 0;
            self.plain = 0..0;
        }
    }

    /// Plaintext ready to be consumed (empty when none is buffered).
    pub fn available(&self) -> &[u8] {
        let initial = self.core.initial();
        if !initial.is_empty() {
            initial
        } else {
            &self.buf[self.plain.clone()]
        }
    }

    /// Mark `n` bytes of [`Self::available`] as delivered.
    pub fn consume(&mut self, n: usize) {
        if !self.core.initial().is_empty() {
            self.core.consume_initial(n);
        } else {
            self.plain.start = (self.plain.start + n).min(self.plain.end);
        }
    }

    /// Make plaintext available, reading if needed. `Ready(Ok(0))` is a clean
    /// end of stream; otherwise `Ready(Ok(n))` means [`Self::available`] holds
    /// `n > 0` bytes.
    pub fn poll_fill_with<R>(&mut self, read: R) -> Poll<io::Result<usize>>
    where
        R: FnMut(&mut [u8]) -> Poll<io::Result<usize>>,
    {
        let r = self.fill(read);
        if let Poll::Ready(Err(e)) = &r {
            if self.failed.is_none() && !is_transient(e.kind()) {
                self.failed = Some(ReadFailure::Io(e.kind(), e.to_string()));
            }
        }
        r
    }

    /// Make the next opened frame's data current; its length, or `None`
    /// when no opened plaintext is left.
    fn next_plain(&mut self) -> Option<usize> {
        let avail = self.available().len();
        if avail > 0 {
            return Some(avail);
        }
        let frame_size = self.core.frame_size();
        self.plain = next_opened(&self.buf[..self.start], frame_size, &mut self.next_frame)?;
        Some(self.plain.len())
    }

    fn fill<R>(&mut self, mut read: R) -> Poll<io::Result<usize>>
    where
        R: FnMut(&mut [u8]) -> Poll<io::Result<usize>>,
    {
        // The clock reading that ended the last read: the start of opening
        // what it brought in.
        let mut read_end = None;
        loop {
            if let Some(n) = self.next_plain() {
                return Poll::Ready(Ok(n));
            }
            if let Some(f) = &self.failed {
                return Poll::Ready(Err(f.to_io()));
            }
            // Hold back a partial group for one more read when more is
            // likely queued and the read cannot block.
            let groups_only =
                self.nonblocking && self.last_read_full && !self.eof && self.core.can_hold_back();
            // Open every whole frame here in one step (one clock reading
            // pair per batch, not per frame).
            if self.end - self.start >= self.core.sealed_frame_len() {
                let t0 = read_end.take().unwrap_or_else(stats::now);
                let batch = self
                    .core
                    .open_batch(&mut self.buf[self.start..self.end], groups_only);
                let frames = batch.consumed / self.core.sealed_frame_len();
                if frames > 0 {
                    self.stats.opened(t0, frames, batch.bytes);
                }
                self.next_frame = self.start;
                self.start += batch.consumed;
                if let Some(e) = batch.error {
                    // Deliver the frames before it first.
                    self.failed = Some(ReadFailure::Protocol(e));
                    continue;
                }
                if batch.consumed > 0 {
                    continue;
                }
            }
            if self.eof {
                self.core.end_of_stream(self.end - self.start)?;
                return Poll::Ready(Ok(0));
            }
            // Every opened frame is delivered (`next_plain` found none), so
            // the buffer may move.
            let sealed = self.core.sealed_frame_len();
            if self.start == self.end {
                self.start = 0;
                self.end = 0;
            } else if self.buf.len() - self.start < sealed || groups_only {
                // Room for the rest of a frame; or, holding back a partial
                // group, keep it at the front.
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            self.next_frame = self.start;
            self.prepare_buffer();
            if groups_only {
                // A full read after the frames held back: the buffer grows by
                // at most a partial group (`can_hold_back`), so holding back
                // never costs an extra read.
                let need = self.end + self.core.read_buffer_size();
                if self.buf.len() < need {
                    self.buf.resize(need, 0);
                }
            }
            // One read brings in at most `read_buffer_size` bytes.
            let space = (self.buf.len() - self.end).min(self.core.read_buffer_size());
            let t0 = stats::now();
            self.stats.attempt(t0);
            match read(&mut self.buf[self.end..self.end + space]) {
                Poll::Ready(Ok(0)) => {
                    self.stats.read(
                        t0,
                        Transfer::Bytes {
                            n: 0,
                            offered: space,
                        },
                    );
                    self.eof = true;
                }
                Poll::Ready(Ok(n)) => {
                    let n = n.min(space);
                    read_end = Some(self.stats.read(t0, Transfer::Bytes { n, offered: space }));
                    self.end += n;
                    self.last_read_full = n == space;
                    // A read that filled the buffer means more is queued: use
                    // the full size from now on. Otherwise remember roughly
                    // how much arrives at once.
                    self.next_alloc = if n == space {
                        self.core.read_buffer_size()
                    } else {
                        (self.end - self.start).next_power_of_two()
                    };
                }
                Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Poll::Ready(Err(e)) => {
                    self.stats.read(t0, Transfer::Failed);
                    return Poll::Ready(Err(e));
                }
                Poll::Pending if groups_only => {
                    // Nothing more queued after all: open the frames here
                    // one at a time (the waker stays registered, so a later
                    // wake-up is merely early). A probe, not a wait: not
                    // counted as not ready.
                    self.last_read_full = false;
                }
                Poll::Pending => {
                    self.stats.not_ready(t0);
                    // Nothing buffered and nothing arriving: the connection is
                    // idle, so give the buffer back until data comes.
                    if self.start == self.end {
                        self.release_buffer();
                    }
                    return Poll::Pending;
                }
            }
        }
    }

    /// Copy plaintext into `out`, reading if needed.
    pub fn poll_read_with<R>(&mut self, out: &mut [u8], read: R) -> Poll<io::Result<usize>>
    where
        R: FnMut(&mut [u8]) -> Poll<io::Result<usize>>,
    {
        if out.is_empty() {
            return Poll::Ready(Ok(0));
        }
        match self.poll_fill_with(read) {
            Poll::Ready(Ok(0)) => Poll::Ready(Ok(0)),
            Poll::Ready(Ok(_)) => {
                let avail = self.available();
                let n = avail.len().min(out.len());
                out[..n].copy_from_slice(&avail[..n]);
                self.consume(n);
                Poll::Ready(Ok(n))
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests;
