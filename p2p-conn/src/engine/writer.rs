//! The send side: seal messages into one buffer, hand them to the transport
//! in one write, and keep what a short write left behind.
//!
//! [`WriteCore`] is the sans-IO sealing step every writing adapter calls: it
//! knows the frame and flush sizes, seals (a prefix of) a message onto the
//! end of any [`SealBuf`], and refuses to seal once the stream is poisoned.
//! [`FrameWriter`] is [`WriteCore`] plus a write buffer it owns, for the tokio
//! and std adapters; the codec's `SecretEncoder` is [`WriteCore`] over
//! `FramedWrite`'s buffer.
//!
//! # Contract of [`FrameWriter`]
//! * A call to [`FrameWriter::poll_write_with`] first finishes writing sealed
//!   bytes left by an earlier short write. Only then does it accept new
//!   plaintext: up to one flush's worth ([`WriteCore::max_chunk`]), sealed in
//!   place into one buffer, offered to the transport in one write. It returns
//!   `Ready(Ok(n))` exactly when `n` bytes were sealed and now belong to the
//!   stream; sealed bytes the transport did not take yet stay buffered and go
//!   out first on the next call or on [`FrameWriter::poll_flush_with`].
//! * `Pending` is only returned before any new plaintext is accepted, so a
//!   dropped future loses or duplicates nothing.
//! * A transport error (other than `Interrupted`; "would block" must be
//!   signalled as `Pending`) or a zero-byte write while sealed bytes are
//!   buffered poisons the writer: those frames' nonces are spent and the
//!   peer's position in the stream is unknown, so every later call fails with
//!   [`Error::Poisoned`].
//!
//! # Flush size
//! `flush_size` is counted in sealed bytes and rounded down to whole frames
//! (at least one): [`crate::proto::FrameSize::whole_frames`]. The same number is the
//! writer's most bytes per write and the codec's backpressure boundary.
//!
//! # Memory
//! A buffer above [`WRITE_BUFFER_KEEP`] is freed once its bytes are on the
//! wire; a smaller one is kept for the next message.
//!
//! # Not provided
//! No I/O of its own, no timers, no locking.

use std::io::{self, IoSlice};
use std::task::Poll;

use super::reader::protocol_io;
use crate::proto::{SealBuf, Sealer};
use crate::Error;

/// A write buffer larger than this is freed once its bytes are on the wire
/// (sending a large message again costs one allocation, no zeroing); a smaller
/// one is kept for the next message.
pub const WRITE_BUFFER_KEEP: usize = 16 * 1024;

/// The send side's protocol state, shared by [`FrameWriter`] and the codec
/// encoder. See the module docs.
#[derive(Debug)]
pub struct WriteCore {
    sealer: Sealer,
    flush_bytes: usize,
    max_chunk: usize,
    poisoned: bool,
}

impl WriteCore {
    /// Seal with `sealer`, at most `flush_size` sealed bytes per write
    /// (rounded down to whole frames, at least one).
    pub fn new(sealer: Sealer, flush_size: usize) -> Self {
        let fs = sealer.frame_size();
        let flush_bytes = fs.whole_frames(flush_size);
        WriteCore {
            max_chunk: flush_bytes / fs.sealed_len() * fs.get(),
            flush_bytes,
            sealer,
            poisoned: false,
        }
    }

    /// Sealed bytes per write: `flush_size` rounded down to whole frames.
    pub fn flush_bytes(&self) -> usize {
        self.flush_bytes
    }

    /// Plaintext bytes that seal into [`Self::flush_bytes`].
    pub fn max_chunk(&self) -> usize {
        self.max_chunk
    }

    /// True after a failed write; see [`Error::Poisoned`].
    pub fn is_poisoned(&self) -> bool {
        self.poisoned
    }

    /// Refuse every later seal: an earlier write failed part way.
    pub fn poison(&mut self) {
        self.poisoned = true;
    }

    /// Fail with [`Error::Poisoned`] if the stream is poisoned.
    pub fn check(&self) -> io::Result<()> {
        if self.poisoned {
            Err(Error::Poisoned.into_io())
        } else {
            Ok(())
        }
    }

    /// Seal the first `len` bytes of the concatenation of `parts` (all of it
    /// when shorter) onto the end of `out` as one message. All or nothing.
    pub fn seal<S, B>(&mut self, parts: &[S], len: usize, out: &mut B) -> io::Result<usize>
    where
        S: std::ops::Deref<Target = [u8]>,
        B: SealBuf + ?Sized,
    {
        self.check()?;
        let total = len.min(parts.iter().map(|p| p.len()).sum());
        self.sealer
            .seal_append_prefix(parts, total, out)
            .map_err(protocol_io)?;
        Ok(total)
    }
}

/// The sealed-frame writer of the tokio and std adapters: [`WriteCore`] over
/// a write buffer it owns. See the module docs for its contract.
#[derive(Debug)]
pub struct FrameWriter {
    core: WriteCore,
    buf: Vec<u8>,
    pos: usize,
}

impl FrameWriter {
    /// A writer over `core`, with no buffer allocated yet.
    pub fn new(core: WriteCore) -> Self {
        FrameWriter {
            core,
            buf: Vec::new(),
            pos: 0,
        }
    }

    /// The sealing state.
    pub fn core(&self) -> &WriteCore {
        &self.core
    }

    /// Sealed bytes waiting for the transport.
    pub fn pending(&self) -> &[u8] {
        &self.buf[self.pos..]
    }

    /// Bytes of buffer memory held.
    pub fn buffer_capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// Free the write buffer if nothing is pending (an idle connection then
    /// holds no write buffer until its next message).
    pub fn release_buffer(&mut self) {
        if self.pending().is_empty() {
            self.buf = Vec::new();
            self.pos = 0;
        }
    }

    /// Write buffered sealed bytes until none remain.
    fn poll_drain<W>(&mut self, write: &mut W) -> Poll<io::Result<()>>
    where
        W: FnMut(&[u8]) -> Poll<io::Result<usize>>,
    {
        while self.pos < self.buf.len() {
            match write(&self.buf[self.pos..]) {
                Poll::Ready(Ok(0)) => {
                    self.core.poison();
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                Poll::Ready(Ok(n)) => self.pos += n.min(self.buf.len() - self.pos),
                Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Poll::Ready(Err(e)) => {
                    self.core.poison();
                    return Poll::Ready(Err(e));
                }
                Poll::Pending => return Poll::Pending,
            }
        }
        // Everything is on the wire. Keep a small buffer for the next message;
        // give a large one back so an idle connection holds little memory.
        if self.buf.capacity() > WRITE_BUFFER_KEEP {
            self.buf = Vec::new();
        } else {
            self.buf.clear();
        }
        self.pos = 0;
        Poll::Ready(Ok(()))
    }

    /// Accept and send one message (or its first `max_chunk` bytes).
    pub fn poll_write_with<W>(&mut self, data: &[u8], write: W) -> Poll<io::Result<usize>>
    where
        W: FnMut(&[u8]) -> Poll<io::Result<usize>>,
    {
        self.poll_write_vectored_with(&[data], write)
    }

    /// Accept and send the concatenation of `parts` as one message (or its
    /// first `max_chunk` bytes): frames are filled across part boundaries and
    /// all sealed bytes go to the transport in one write.
    pub fn poll_write_vectored_with<S, W>(
        &mut self,
        parts: &[S],
        mut write: W,
    ) -> Poll<io::Result<usize>>
    where
        S: std::ops::Deref<Target = [u8]>,
        W: FnMut(&[u8]) -> Poll<io::Result<usize>>,
    {
        self.core.check()?;
        if parts.iter().all(|p| p.is_empty()) {
            return Poll::Ready(Ok(0));
        }
        match self.poll_drain(&mut write) {
            Poll::Ready(Ok(())) => {}
            other => return other.map(|r| r.map(|()| 0)),
        }
        // One write's worth: the whole message, or its first `max_chunk` bytes.
        let n = self
            .core
            .seal(parts, self.core.max_chunk(), &mut self.buf)?;
        // The message is accepted now; try to send it at once. Whatever the
        // transport does not take stays buffered for the next call.
        match self.poll_drain(&mut write) {
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            _ => Poll::Ready(Ok(n)),
        }
    }

    /// Send a whole message: accept it in `max_chunk` pieces (one transport
    /// write each), then flush. Every slice of `bufs` is advanced in place past
    /// what was accepted, so a caller that is interrupted (or whose future is
    /// dropped) can call again with the same `bufs` and send exactly the
    /// remainder.
    pub fn poll_send_with<W>(
        &mut self,
        bufs: &mut [IoSlice<'_>],
        mut write: W,
    ) -> Poll<io::Result<()>>
    where
        W: FnMut(&[u8]) -> Poll<io::Result<usize>>,
    {
        loop {
            if bufs.iter().all(|b| b.is_empty()) {
                return self.poll_flush_with(write);
            }
            match self.poll_write_vectored_with(bufs, &mut write) {
                Poll::Ready(Ok(mut n)) => {
                    for b in bufs.iter_mut() {
                        let k = n.min(b.len());
                        b.advance(k);
                        n -= k;
                        if n == 0 {
                            break;
                        }
                    }
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    /// Write every buffered sealed byte.
    pub fn poll_flush_with<W>(&mut self, mut write: W) -> Poll<io::Result<()>>
    where
        W: FnMut(&[u8]) -> Poll<io::Result<usize>>,
    {
        self.core.check()?;
        self.poll_drain(&mut write)
    }
}
