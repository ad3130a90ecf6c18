//! The one read path, write path and handshake driver that every adapter uses.
//!
//! Each engine is driven through closures shaped like `poll_read` /
//! `poll_write` (`FnMut(&mut [u8]) -> Poll<io::Result<usize>>`). The tokio
//! adapter passes its transport's poll methods; the std adapter passes blocking
//! calls wrapped in `Poll::Ready` (mapping `WouldBlock` to `Pending`); tests pass
//! scripted fakes. So the buffering, cancellation and poisoning rules below are
//! written once.
//!
//! # Handshake driver ([`poll_handshake`])
//! Writes everything the state machine has to send and flushes the transport
//! before it reads, and reads exactly what the state machine asks for. On a non-blocking transport both
//! directions progress in the same poll; on a blocking one a short or
//! interrupted write can never leave both peers waiting in `read`.
//!
//! # Writer ([`FrameWriter`])
//! * A call to [`FrameWriter::poll_write_with`] first finishes writing sealed
//!   bytes left by an earlier short write. Only then does it accept new
//!   plaintext: up to `flush_size` sealed bytes' worth, sealed in place into
//!   one buffer, offered to the transport in one write. It returns `Ready(Ok(n))`
//!   exactly when `n` bytes were sealed and now belong to the stream; sealed
//!   bytes the transport did not take yet stay buffered and go out first on the
//!   next call or on [`FrameWriter::poll_flush_with`].
//! * `Pending` is only returned before any new plaintext is accepted, so a
//!   dropped future loses or duplicates nothing.
//! * A transport error (other than `Interrupted`; "would block" must be
//!   signalled as `Pending`) or a zero-byte write while sealed bytes are
//!   buffered poisons the writer: those frames'
//!   nonces are spent and the peer's position in the stream is unknown, so every
//!   later call fails with [`Error::Poisoned`].
//!
//! # Reader ([`FrameReader`])
//! * One read fills the receive buffer with as many sealed frames as the
//!   transport has; frames are opened in place and their plaintext handed out
//!   from there, leftovers first, before the next read.
//! * The buffer is allocated on first read (never during the handshake).
//! * Zero-length frames are skipped; end of stream between frames is a clean
//!   `Ok(0)`; end of stream inside a frame is `UnexpectedEof`.
//! * A frame that fails to open kills the reader for good.
//!
//! # Memory
//! * Reader: the buffer is sized to the last burst (at least one sealed frame)
//!   and grows to `read_buffer_size` when a read fills it; it is freed whenever
//!   a read finds the transport empty (`Pending`) with nothing buffered.
//! * Writer: a buffer above [`WRITE_BUFFER_KEEP`] is freed once its bytes are
//!   on the wire; a smaller one is kept for the next message.
//!
//! # Not provided
//! No locking (each engine has one owner: a connection or one of its halves),
//! no timers, no I/O of its own.

use std::io::{self, IoSlice};
use std::ops::Range;
use std::task::Poll;

use crate::proto::{Handshake, Opener, ProtocolError, Sealer};
use crate::Error;

/// A write buffer larger than this is freed once its bytes are on the wire
/// (sending a large message again costs one allocation, no zeroing); a smaller
/// one is kept for the next message.
pub const WRITE_BUFFER_KEEP: usize = 16 * 1024;

fn protocol_io(e: ProtocolError) -> io::Error {
    Error::Protocol(e).into_io()
}

/// A transport the handshake driver can both read and write, shaped like
/// `poll_read` / `poll_write`.
pub trait PollIo {
    /// Read some bytes into `buf`.
    fn poll_read_some(&mut self, buf: &mut [u8]) -> Poll<io::Result<usize>>;
    /// Write some bytes of `buf`.
    fn poll_write_some(&mut self, buf: &[u8]) -> Poll<io::Result<usize>>;
    /// Push written bytes out of any buffering in the transport. The default
    /// does nothing, for transports that do not buffer.
    fn poll_flush_some(&mut self) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// The peer hanging up during the handshake (cleanly or with a reset) is
/// reported as such, with how far the current message got.
fn hung_up(hs: &Handshake, e: Option<io::Error>) -> Error {
    match e {
        Some(e)
            if !matches!(
                e.kind(),
                io::ErrorKind::ConnectionReset
                    | io::ErrorKind::ConnectionAborted
                    | io::ErrorKind::BrokenPipe
            ) =>
        {
            Error::Io(e)
        }
        _ => {
            let (received, expected) = hs.read_progress();
            Error::HandshakeEof {
                stage: hs.stage(),
                received,
                expected,
            }
        }
    }
}

/// Drive a [`Handshake`] to completion: write whatever it has to send and read
/// exactly what it asks for, both in the same poll so neither side waits on
/// the other.
pub fn poll_handshake<T: PollIo + ?Sized>(
    hs: &mut Handshake,
    io: &mut T,
) -> Poll<Result<(), Error>> {
    loop {
        // Write everything we have before reading: on a blocking transport a
        // read would otherwise wait for a peer that is waiting for our bytes.
        while !hs.outgoing().is_empty() {
            match io.poll_write_some(hs.outgoing()) {
                Poll::Ready(Ok(0)) => {
                    return Poll::Ready(Err(Error::Io(io::ErrorKind::WriteZero.into())))
                }
                Poll::Ready(Ok(n)) => hs.advance_outgoing(n),
                Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Poll::Ready(Err(e)) => return Poll::Ready(Err(hung_up(hs, Some(e)))),
                Poll::Pending => break,
            }
        }
        // A buffering transport (a `BufWriter`, say) must pass our message on
        // before we wait for the peer's answer.
        let flushed = hs.outgoing().is_empty()
            && match io.poll_flush_some() {
                Poll::Ready(Ok(())) => true,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(hung_up(hs, Some(e)))),
                Poll::Pending => false,
            };
        if hs.is_finished() {
            return if flushed {
                Poll::Ready(Ok(()))
            } else {
                Poll::Pending
            };
        }
        let buf = hs.read_buffer();
        if buf.is_empty() {
            // Only our last bytes are left to write, and the transport is busy.
            return Poll::Pending;
        }
        match io.poll_read_some(buf) {
            Poll::Ready(Ok(0)) => return Poll::Ready(Err(hung_up(hs, None))),
            Poll::Ready(Ok(n)) => hs.advance_read(n)?,
            Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
            Poll::Ready(Err(e)) => return Poll::Ready(Err(hung_up(hs, Some(e)))),
            Poll::Pending => return Poll::Pending,
        }
    }
}

/// The sealed-frame writer. See the module docs for its contract.
#[derive(Debug)]
pub struct FrameWriter {
    sealer: Sealer,
    buf: Vec<u8>,
    pos: usize,
    max_chunk: usize,
    poisoned: bool,
}

impl FrameWriter {
    /// A writer sealing with `sealer`, at most `flush_size` sealed bytes per
    /// write (rounded down to whole frames, at least one).
    pub fn new(sealer: Sealer, flush_size: usize) -> Self {
        let frames = (flush_size / sealer.sealed_frame_len()).max(1);
        let max_chunk = frames * sealer.frame_size();
        FrameWriter {
            sealer,
            buf: Vec::new(),
            pos: 0,
            max_chunk,
            poisoned: false,
        }
    }

    /// Most plaintext bytes accepted by one call (one socket write's worth).
    pub fn max_chunk(&self) -> usize {
        self.max_chunk
    }

    /// Sealed bytes waiting for the transport.
    pub fn pending(&self) -> &[u8] {
        &self.buf[self.pos..]
    }

    /// True after a failed write; see [`Error::Poisoned`].
    pub fn is_poisoned(&self) -> bool {
        self.poisoned
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

    fn poisoned_err() -> io::Error {
        Error::Poisoned.into_io()
    }

    /// Write buffered sealed bytes until none remain.
    fn poll_drain<W>(&mut self, write: &mut W) -> Poll<io::Result<()>>
    where
        W: FnMut(&[u8]) -> Poll<io::Result<usize>>,
    {
        while self.pos < self.buf.len() {
            match write(&self.buf[self.pos..]) {
                Poll::Ready(Ok(0)) => {
                    self.poisoned = true;
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                Poll::Ready(Ok(n)) => self.pos += n.min(self.buf.len() - self.pos),
                Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Poll::Ready(Err(e)) => {
                    self.poisoned = true;
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
        if self.poisoned {
            return Poll::Ready(Err(Self::poisoned_err()));
        }
        let total: usize = parts.iter().map(|p| p.len()).sum();
        if total == 0 {
            return Poll::Ready(Ok(0));
        }
        match self.poll_drain(&mut write) {
            Poll::Ready(Ok(())) => {}
            other => return other.map(|r| r.map(|()| 0)),
        }
        // One write's worth: the whole message, or its first `max_chunk` bytes.
        let n = total.min(self.max_chunk);
        let sealed = self
            .sealer
            .seal_append_prefix(parts, n, &mut self.buf)
            .map(|_| n);
        let n = match sealed {
            Ok(n) => n,
            Err(e) => return Poll::Ready(Err(protocol_io(e))),
        };
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
        if self.poisoned {
            return Poll::Ready(Err(Self::poisoned_err()));
        }
        self.poll_drain(&mut write)
    }
}

/// The buffered frame reader. See the module docs for its contract.
#[derive(Debug)]
pub struct FrameReader {
    opener: Opener,
    buf: Vec<u8>,
    buf_size: usize,
    /// Unopened sealed bytes are `buf[start..end]`.
    start: usize,
    end: usize,
    /// Opened, undelivered plaintext within `buf`.
    plain: Range<usize>,
    /// Plaintext that arrived with the handshake, served first.
    leftover: Vec<u8>,
    leftover_pos: usize,
    eof: bool,
    broken: Option<ProtocolError>,
    /// Size to allocate the next time the buffer is (re)allocated.
    next_alloc: usize,
}

impl FrameReader {
    /// A reader opening with `opener`, reading up to `read_buffer_size` bytes
    /// per read (at least one sealed frame), serving `initial` first.
    pub fn new(opener: Opener, read_buffer_size: usize, initial: Vec<u8>) -> Self {
        let buf_size = read_buffer_size.max(opener.sealed_frame_len());
        FrameReader {
            opener,
            buf: Vec::new(),
            buf_size,
            start: 0,
            end: 0,
            plain: 0..0,
            leftover: initial,
            leftover_pos: 0,
            eof: false,
            broken: None,
            next_alloc: 0,
        }
    }

    /// Bytes of buffer memory held.
    pub fn buffer_capacity(&self) -> usize {
        self.buf.capacity() + self.leftover.capacity()
    }

    /// Size the buffer before a read: at least one sealed frame, grown to the
    /// configured size once a read fills it.
    fn prepare_buffer(&mut self, sealed: usize) {
        let want = self.next_alloc.clamp(sealed, self.buf_size);
        if self.buf.len() < want {
            self.buf.resize(want, 0);
        }
    }

    /// Free the receive buffer if it holds no undelivered bytes.
    pub fn release_buffer(&mut self) {
        if self.start == self.end && self.plain.is_empty() {
            self.buf = Vec::new();
            self.start = 0;
            self.end = 0;
            self.plain = 0..0;
        }
    }

    /// Plaintext ready to be consumed (empty when none is buffered).
    pub fn available(&self) -> &[u8] {
        if self.leftover_pos < self.leftover.len() {
            &self.leftover[self.leftover_pos..]
        } else {
            &self.buf[self.plain.clone()]
        }
    }

    /// Mark `n` bytes of [`Self::available`] as delivered.
    pub fn consume(&mut self, n: usize) {
        if self.leftover_pos < self.leftover.len() {
            self.leftover_pos = (self.leftover_pos + n).min(self.leftover.len());
            if self.leftover_pos == self.leftover.len() {
                self.leftover = Vec::new();
                self.leftover_pos = 0;
            }
        } else {
            self.plain.start = (self.plain.start + n).min(self.plain.end);
        }
    }

    /// Make plaintext available, reading if needed. `Ready(Ok(0))` is a clean
    /// end of stream; otherwise `Ready(Ok(n))` means [`Self::available`] holds
    /// `n > 0` bytes.
    pub fn poll_fill_with<R>(&mut self, mut read: R) -> Poll<io::Result<usize>>
    where
        R: FnMut(&mut [u8]) -> Poll<io::Result<usize>>,
    {
        loop {
            let avail = self.available().len();
            if avail > 0 {
                return Poll::Ready(Ok(avail));
            }
            if let Some(e) = &self.broken {
                return Poll::Ready(Err(protocol_io(e.clone())));
            }
            let sealed = self.opener.sealed_frame_len();
            if self.end - self.start >= sealed {
                let at = self.start;
                match self.opener.open_in_place(&mut self.buf[at..at + sealed]) {
                    Ok(r) => {
                        self.plain = at + r.start..at + r.end;
                        self.start += sealed;
                        continue;
                    }
                    Err(e) => {
                        self.broken = Some(e.clone());
                        return Poll::Ready(Err(protocol_io(e)));
                    }
                }
            }
            if self.eof {
                if self.start == self.end {
                    return Poll::Ready(Ok(0));
                }
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "peer closed the connection inside a frame ({} of {} sealed bytes received)",
                        self.end - self.start,
                        sealed
                    ),
                )));
            }
            if self.start == self.end {
                self.start = 0;
                self.end = 0;
            } else if self.buf.len() - self.start < sealed {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            self.prepare_buffer(sealed);
            let space = self.buf.len() - self.end;
            match read(&mut self.buf[self.end..]) {
                Poll::Ready(Ok(0)) => self.eof = true,
                Poll::Ready(Ok(n)) => {
                    let n = n.min(space);
                    self.end += n;
                    // A read that filled the buffer means more is queued: use
                    // the full size from now on. Otherwise remember roughly
                    // how much arrives at once.
                    self.next_alloc = if n == space {
                        self.buf_size
                    } else {
                        (self.end - self.start).next_power_of_two()
                    };
                }
                Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => {
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

/// Check the authenticated peer against `config.expected_peer_id`.
pub(crate) fn check_peer(
    est: &crate::proto::Established,
    config: &crate::Config,
) -> Result<(), Error> {
    if let Some(expected) = config.expected_peer_id {
        let actual = est.remote_public_key.node_id();
        if actual != expected {
            return Err(Error::PeerIdMismatch { expected, actual });
        }
    }
    Ok(())
}

/// Check the peer against the configured expectation and build the engines.
pub(crate) fn establish(
    est: crate::proto::Established,
    config: &crate::Config,
) -> Result<(FrameReader, FrameWriter, crate::PublicKey), Error> {
    check_peer(&est, config)?;
    let remote = est.remote_public_key;
    Ok((
        FrameReader::new(est.opener, config.read_buffer_size, est.initial_plaintext),
        FrameWriter::new(est.sealer, config.flush_size),
        remote,
    ))
}
