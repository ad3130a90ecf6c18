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

use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::task::Poll;

use crate::proto::{SealBuf, Sealer};
use crate::stats::{self, SendRecorder, SendStats, Stamp, Transfer};
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
    /// Both at most `config::MAX_BUFFER_SIZE` (64 MiB), so `u32`: 8 bytes
    /// less in every connection's write half.
    flush_bytes: u32,
    max_chunk: u32,
    poisoned: bool,
}

/// A size under the flush cap, as stored.
fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl WriteCore {
    /// Seal with `sealer`, at most `flush_size` sealed bytes per write
    /// (rounded down to whole frames, at least one).
    pub fn new(sealer: Sealer, flush_size: usize) -> Self {
        // `Config` refuses more; capped here too so that both sizes fit
        // their `u32`s exactly (whole frames).
        let flush_size = flush_size.min(crate::config::MAX_BUFFER_SIZE);
        let fs = sealer.frame_size();
        let flush_bytes = fs.whole_frames(flush_size);
        WriteCore {
            max_chunk: to_u32(fs.flush_chunk(flush_size)),
            flush_bytes: to_u32(flush_bytes),
            sealer,
            poisoned: false,
        }
    }

    /// Sealed bytes per write: `flush_size` rounded down to whole frames.
    pub fn flush_bytes(&self) -> usize {
        self.flush_bytes as usize
    }

    /// Plaintext bytes that seal into [`Self::flush_bytes`].
    pub fn max_chunk(&self) -> usize {
        self.max_chunk as usize
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
            .map_err(io::Error::from)?;
        Ok(total)
    }

    /// As [`Self::seal`], over a sequence of slices whose summed length is
    /// `total` or more.
    pub fn seal_parts<'a, I, B>(&mut self, parts: I, total: usize, out: &mut B) -> io::Result<usize>
    where
        I: IntoIterator<Item = &'a [u8]>,
        B: SealBuf + ?Sized,
    {
        self.check()?;
        self.sealer
            .seal_append_parts(parts, total, out)
            .map_err(io::Error::from)?;
        Ok(total)
    }
}

/// Messages waiting for [`FrameWriter::poll_write_backlog_with`], oldest
/// first. A message may be partly sealed already (the front one, when it was
/// larger than one write); zero-length items are markers that leave the
/// backlog once everything before them is sealed.
#[derive(Debug)]
pub struct Backlog<M> {
    queue: VecDeque<M>,
    /// Bytes of the front message already sealed.
    offset: usize,
    /// Unsealed bytes in the backlog.
    bytes: usize,
}

impl<M> Default for Backlog<M> {
    fn default() -> Self {
        Backlog {
            queue: VecDeque::new(),
            offset: 0,
            bytes: 0,
        }
    }
}

impl<M: AsRef<[u8]>> Backlog<M> {
    /// An empty backlog.
    pub fn new() -> Self {
        Self::default()
    }

    /// Queue `m` behind everything already queued.
    pub fn push(&mut self, m: M) {
        self.bytes += m.as_ref().len();
        self.queue.push_back(m);
    }

    /// Items queued (markers included).
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Nothing queued.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Plaintext bytes not sealed yet.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Remove `n` sealed bytes from the front, moving every item that is
    /// now wholly sealed (and every marker reached) to `done`, at most
    /// `items` of them.
    fn consume(&mut self, mut n: usize, items: usize, done: &mut Vec<M>) {
        self.bytes -= n;
        let mut taken = 0;
        while let Some(front) = self.queue.front() {
            let rest = front.as_ref().len() - self.offset;
            if taken == items || rest > n {
                self.offset += n;
                return;
            }
            n -= rest;
            self.offset = 0;
            taken += 1;
            if let Some(m) = self.queue.pop_front() {
                done.push(m);
            }
        }
    }
}

/// The sealed-frame writer of the tokio and std adapters: [`WriteCore`] over
/// a write buffer it owns. See the module docs for its contract.
#[derive(Debug)]
pub struct FrameWriter {
    core: WriteCore,
    buf: Vec<u8>,
    pos: usize,
    stats: SendRecorder,
    /// The authenticated peer, named by the close event.
    #[cfg(feature = "tracing")]
    /// Its node ID, not its 32-byte key: the event names the ID.
    peer: Option<crate::NodeId>,
}

/// The close event of a connection's send side (`tracing`): why it ended
/// and the final counts.
#[cfg(feature = "tracing")]
impl Drop for FrameWriter {
    fn drop(&mut self) {
        let Some(peer) = &self.peer else { return };
        let unsent;
        let cause: &dyn std::fmt::Display = if self.core.is_poisoned() {
            &"a write failed part way (poisoned)"
        } else if !self.pending().is_empty() {
            unsent = format!("dropped with {} sealed bytes unsent", self.pending().len());
            &unsent
        } else {
            &"dropped by the application"
        };
        // Counts only: a close event must not wait for the clock's
        // calibration.
        let s = self.stats.counts();
        crate::events::closed(
            crate::events::Side::Send,
            peer,
            cause,
            s.frames_sealed,
            s.bytes_sealed,
            s.bytes_written,
        );
    }
}

impl FrameWriter {
    /// A writer over `core`, with no buffer allocated yet.
    pub fn new(core: WriteCore) -> Self {
        FrameWriter {
            core,
            buf: Vec::new(),
            pos: 0,
            stats: SendRecorder::default(),
            #[cfg(feature = "tracing")]
            peer: None,
        }
    }

    /// Name the peer in this writer's close event (`tracing`).
    #[allow(unused_variables)]
    pub(crate) fn set_peer(&mut self, peer: crate::PublicKey) {
        #[cfg(feature = "tracing")]
        {
            self.peer = Some(peer.node_id());
        }
    }

    /// This writer's counters (all zero without the `stats` feature).
    pub fn stats(&self) -> SendStats {
        self.stats.snapshot()
    }

    /// The counters as recorded (times still in clock ticks), for a copy
    /// converted later.
    #[cfg(feature = "queue")]
    pub(crate) fn recorder(&self) -> &SendRecorder {
        &self.stats
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

    /// [`Self::release_buffer`], and the cipher's expanded key (rebuilt on
    /// the next frame) when nothing is pending.
    pub fn release_buffers(&mut self) {
        self.release_buffer();
        if self.pending().is_empty() {
            self.core.sealer.release_key();
        }
    }

    /// Free the write buffer if nothing is pending (an idle connection then
    /// holds no write buffer until its next message).
    pub fn release_buffer(&mut self) {
        if self.pending().is_empty() {
            self.buf = Vec::new();
            self.pos = 0;
        }
    }

    /// Write buffered sealed bytes until none remain. `start`: a clock
    /// reading taken just before, if any (one reading ends a seal step and
    /// starts the write after it); the clock is read only when there is
    /// something to write.
    fn poll_drain<W>(&mut self, write: &mut W, start: Option<Stamp>) -> Poll<io::Result<()>>
    where
        W: FnMut(&[u8]) -> Poll<io::Result<usize>>,
    {
        let mut start = start;
        while self.pos < self.buf.len() {
            let t0 = *start.get_or_insert_with(stats::now);
            self.stats.attempt(t0);
            let offered = self.buf.len() - self.pos;
            match write(&self.buf[self.pos..]) {
                Poll::Ready(Ok(0)) => {
                    self.stats.wrote(t0, Transfer::Failed);
                    self.core.poison();
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                Poll::Ready(Ok(n)) => {
                    let n = n.min(offered);
                    start = Some(self.stats.wrote(t0, Transfer::Bytes { n, offered }));
                    self.pos += n;
                }
                Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::Interrupted => start = None,
                Poll::Ready(Err(e)) => {
                    self.stats.wrote(t0, Transfer::Failed);
                    self.core.poison();
                    return Poll::Ready(Err(e));
                }
                Poll::Pending => {
                    self.stats.not_ready(t0);
                    return Poll::Pending;
                }
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
        match self.poll_drain(&mut write, None) {
            Poll::Ready(Ok(())) => {}
            other => return other.map(|r| r.map(|()| 0)),
        }
        // One write's worth: the whole message, or its first `max_chunk` bytes.
        let start = stats::now();
        let before = self.buf.len();
        let n = self
            .core
            .seal(parts, self.core.max_chunk(), &mut self.buf)?;
        let sealed = self.sealed_step(start, before, n);
        // The message is accepted now; try to send it at once. Whatever the
        // transport does not take stays buffered for the next call.
        match self.poll_drain(&mut write, Some(sealed)) {
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            _ => Poll::Ready(Ok(n)),
        }
    }

    /// Seal one write's worth from the front of `backlog` and offer it to
    /// the transport in one write: every queued message that fits (at most
    /// `max_messages` of them and [`WriteCore::max_chunk`] bytes), as one
    /// stream (frames are filled across message boundaries), or the first
    /// `max_chunk` bytes of a larger front message. Items wholly sealed move
    /// to `done`, in order. Returns the plaintext bytes sealed.
    ///
    /// Same contract as [`Self::poll_write_vectored_with`]: sealed bytes of
    /// an earlier short write go out first, and `Pending` is only returned
    /// before anything new is sealed.
    pub fn poll_write_backlog_with<M, W>(
        &mut self,
        backlog: &mut Backlog<M>,
        max_messages: usize,
        done: &mut Vec<M>,
        mut write: W,
    ) -> Poll<io::Result<usize>>
    where
        M: AsRef<[u8]>,
        W: FnMut(&[u8]) -> Poll<io::Result<usize>>,
    {
        self.core.check()?;
        match self.poll_drain(&mut write, None) {
            Poll::Ready(Ok(())) => {}
            other => return other.map(|r| r.map(|()| 0)),
        }
        let (n, sealed) = self.seal_batch(backlog, max_messages, done)?;
        match self.poll_drain(&mut write, Some(sealed)) {
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            _ => Poll::Ready(Ok(n)),
        }
    }

    /// The sealing half of [`Self::poll_write_backlog_with`], for a caller
    /// that must act between sealing and writing (the send queue gives the
    /// sealed messages' room back first, so a peer that has read them never
    /// finds the room still taken): seal one write's worth from the front of
    /// `backlog` into the write buffer and move wholly sealed items to
    /// `done`; write it with [`Self::poll_flush_with`]. Seals nothing while
    /// sealed bytes are pending (returns 0).
    pub fn seal_backlog<M: AsRef<[u8]>>(
        &mut self,
        backlog: &mut Backlog<M>,
        max_messages: usize,
        done: &mut Vec<M>,
    ) -> io::Result<usize> {
        self.core.check()?;
        if !self.pending().is_empty() {
            return Ok(0);
        }
        self.seal_batch(backlog, max_messages, done).map(|(n, _)| n)
    }

    /// Seal one batch from `backlog` onto the buffer; the plaintext bytes
    /// sealed and the clock reading that ended the seal step.
    fn seal_batch<M: AsRef<[u8]>>(
        &mut self,
        backlog: &mut Backlog<M>,
        max_messages: usize,
        done: &mut Vec<M>,
    ) -> io::Result<(usize, Stamp)> {
        let budget = self.core.max_chunk();
        let offset = backlog.offset;
        // The front message's unsealed rest, then whole messages: walked
        // twice (to size the batch, then to seal it), never collected.
        let parts = || {
            backlog.queue.iter().enumerate().map(move |(i, m)| {
                let m = m.as_ref();
                if i == 0 {
                    &m[offset..]
                } else {
                    m
                }
            })
        };
        let mut items = 0;
        let mut total = 0;
        for (i, rest) in parts().enumerate() {
            if items == max_messages.max(1) || (i > 0 && total + rest.len() > budget) {
                break;
            }
            total += rest.len();
            items += 1;
        }
        let start = stats::now();
        let before = self.buf.len();
        let n = self
            .core
            .seal_parts(parts().take(items), total.min(budget), &mut self.buf)?;
        let sealed = self.sealed_step(start, before, n);
        backlog.consume(n, items, done);
        Ok((n, sealed))
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
        self.poll_drain(&mut write, None)
    }

    /// Record a seal step that started at `start` and appended to the
    /// buffer from `before`, sealing `n` plaintext bytes; returns its end.
    #[inline]
    fn sealed_step(&mut self, start: Stamp, before: usize, n: usize) -> Stamp {
        let end = stats::now();
        let frames = (self.buf.len() - before) / self.core.sealer.frame_size().sealed_len();
        self.stats.sealed(start, end, frames, n);
        end
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::aead::Cipher;
    use crate::proto::wire::STANDARD_SEALED_FRAME;
    use crate::proto::{Backend, FrameSize, Opener};

    fn writer(flush_size: usize) -> (FrameWriter, Opener) {
        let key = [6u8; 32];
        let b = Backend::default();
        (
            FrameWriter::new(WriteCore::new(
                Sealer::new(Cipher::new(b, &key), FrameSize::STANDARD),
                flush_size,
            )),
            Opener::new(Cipher::new(b, &key), FrameSize::STANDARD),
        )
    }

    /// Open every frame of `wire` and return the data stream.
    fn open_all(o: &mut Opener, wire: &mut [u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for f in wire.chunks_mut(STANDARD_SEALED_FRAME) {
            let r = o.open_in_place(f).unwrap();
            out.extend_from_slice(&f[r]);
        }
        out
    }

    /// One batch call: the write sizes it made and what it sealed.
    fn batch(
        w: &mut FrameWriter,
        backlog: &mut Backlog<Vec<u8>>,
        max_messages: usize,
        done: &mut Vec<Vec<u8>>,
        wire: &mut Vec<u8>,
    ) -> (Vec<usize>, usize) {
        let mut writes = Vec::new();
        let r = w.poll_write_backlog_with(backlog, max_messages, done, |b: &[u8]| {
            writes.push(b.len());
            wire.extend_from_slice(b);
            Poll::Ready(Ok(b.len()))
        });
        match r {
            Poll::Ready(Ok(n)) => (writes, n),
            other => panic!("{other:?}"),
        }
    }

    /// `seal_backlog` seals without writing, and seals nothing while an
    /// earlier batch is still pending.
    #[test]
    fn seal_backlog_seals_then_waits_for_the_write() {
        let (mut w, mut o) = writer(128 * 1024);
        let mut backlog = Backlog::new();
        for i in 0..3u8 {
            backlog.push(vec![i; 500]);
        }
        let mut done = Vec::new();
        assert_eq!(w.seal_backlog(&mut backlog, 2, &mut done).unwrap(), 1000);
        assert_eq!(done.len(), 2, "two messages sealed, in order");
        assert_eq!(w.pending().len(), STANDARD_SEALED_FRAME);
        assert_eq!(
            w.seal_backlog(&mut backlog, 2, &mut done).unwrap(),
            0,
            "pending first"
        );
        let mut wire = Vec::new();
        let r = w.poll_flush_with(|b: &[u8]| {
            wire.extend_from_slice(b);
            Poll::Ready(Ok(b.len()))
        });
        assert!(matches!(r, Poll::Ready(Ok(()))));
        assert_eq!(w.seal_backlog(&mut backlog, 2, &mut done).unwrap(), 500);
        assert!(backlog.is_empty());
        assert_eq!(
            open_all(&mut o, &mut wire),
            [vec![0u8; 500], vec![1u8; 500]].concat()
        );
    }

    #[test]
    fn small_messages_share_frames_and_one_write() {
        let (mut w, mut o) = writer(128 * 1024);
        let mut backlog = Backlog::new();
        let msgs: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 200]).collect();
        for m in &msgs {
            backlog.push(m.clone());
        }
        assert_eq!(backlog.bytes(), 1000);
        let (mut done, mut wire) = (Vec::new(), Vec::new());
        let (writes, n) = batch(&mut w, &mut backlog, 64, &mut done, &mut wire);
        // Five 200-byte messages: 1000 bytes in one frame, one write.
        assert_eq!((writes, n), (vec![STANDARD_SEALED_FRAME], 1000));
        assert_eq!(done, msgs);
        assert!(backlog.is_empty() && backlog.bytes() == 0);
        assert_eq!(open_all(&mut o, &mut wire), msgs.concat());
    }

    #[test]
    fn batches_respect_the_message_and_byte_budgets() {
        // flush_size of 4 frames: 4096 bytes of plaintext per write.
        let (mut w, mut o) = writer(4 * STANDARD_SEALED_FRAME);
        let mut backlog = Backlog::new();
        let mut all = Vec::new();
        // 3 small, one of 10,000 bytes (sent 4096 at a time), then a marker
        // (empty) and 2 small.
        let items: Vec<Vec<u8>> = vec![
            vec![1; 100],
            vec![2; 100],
            vec![3; 100],
            vec![4; 10_000],
            vec![],
            vec![5; 3000],
            vec![6; 3000],
        ];
        for m in &items {
            backlog.push(m.clone());
            all.extend_from_slice(m);
        }
        let (mut done, mut wire) = (Vec::new(), Vec::new());
        // At most 2 messages: the first two only.
        let (_, n) = batch(&mut w, &mut backlog, 2, &mut done, &mut wire);
        assert_eq!((n, done.len()), (200, 2));
        // Next: the third message, not the 10,000-byte one (it would
        // exceed the budget behind it).
        let (_, n) = batch(&mut w, &mut backlog, 64, &mut done, &mut wire);
        assert_eq!((n, done.len()), (100, 3));
        // The big one at the front: 4096, 4096, then its last 1808 with the
        // marker and nothing more (1808 + 3000 > 4096).
        for expect in [4096, 4096] {
            let (writes, n) = batch(&mut w, &mut backlog, 64, &mut done, &mut wire);
            assert_eq!((writes.len(), n, done.len()), (1, expect, 3));
        }
        let (_, n) = batch(&mut w, &mut backlog, 64, &mut done, &mut wire);
        assert_eq!((n, done.len()), (1808, 5), "the marker leaves with it");
        let (_, n) = batch(&mut w, &mut backlog, 64, &mut done, &mut wire);
        assert_eq!((n, done.len()), (3000, 6));
        let (_, n) = batch(&mut w, &mut backlog, 64, &mut done, &mut wire);
        assert_eq!((n, done.len()), (3000, 7));
        assert_eq!(done, items);
        assert!(backlog.is_empty());
        assert_eq!(open_all(&mut o, &mut wire), all);
    }

    #[test]
    fn a_short_write_keeps_the_batch_and_pending_comes_before_sealing() {
        let (mut w, mut o) = writer(128 * 1024);
        let mut backlog = Backlog::new();
        backlog.push(vec![7u8; 3000]);
        let mut done = Vec::new();
        let mut wire = Vec::new();
        // The transport takes 100 bytes, then would block.
        let mut calls = 0;
        let r = w.poll_write_backlog_with(&mut backlog, 64, &mut done, |b: &[u8]| {
            calls += 1;
            if calls == 1 {
                wire.extend_from_slice(&b[..100]);
                Poll::Ready(Ok(100))
            } else {
                Poll::Pending
            }
        });
        assert!(matches!(r, Poll::Ready(Ok(3000))));
        assert_eq!(done.len(), 1, "sealed: it belongs to the stream now");
        backlog.push(vec![8u8; 10]);
        // Still blocked: nothing new is sealed.
        let r = w.poll_write_backlog_with(&mut backlog, 64, &mut done, |_: &[u8]| Poll::Pending);
        assert!(r.is_pending());
        assert_eq!(backlog.len(), 1);
        let (_, n) = batch(&mut w, &mut backlog, 64, &mut done, &mut wire);
        assert_eq!(n, 10);
        let mut expect = vec![7u8; 3000];
        expect.extend_from_slice(&[8u8; 10]);
        assert_eq!(open_all(&mut o, &mut wire), expect);
    }
}
