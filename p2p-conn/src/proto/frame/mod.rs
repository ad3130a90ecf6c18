//! Sealed frames: layout, nonces, and the [`Sealer`] / [`Opener`] pair.
//!
//! # Wire layout (see `spec/wire-protocol.md` §4)
//!
//! ```text
//! plaintext (4 + F bytes):  LE u32 data_len | data[data_len] | zero padding[F - data_len]
//! sealed    (4 + F + 16):   ChaCha20-Poly1305(key, nonce, plaintext) = ciphertext | tag
//! nonce (12 bytes):         00 00 00 00 | LE u64 frame counter
//! ```
//!
//! `F` is the frame's data size: 1024 on the CometBFT wire (sealed frame 1044
//! bytes). Other values are a p2p-conn-only profile; both ends must agree.
//!
//! # Guarantees
//! * Every frame on the wire has exactly the same sealed length.
//! * Padding is zeroed on send and ignored on receive.
//! * Each direction's counter starts at 0 (the handshake's frame #0) and rises by
//!   one per frame. Counters `0..=u64::MAX` are each used once; after that every
//!   call fails with [`ProtocolError::NonceExhausted`] *before* sealing or
//!   opening, so a nonce is never reused and nothing wraps or panics.
//! * A seal of `n` bytes is all-or-nothing: if the counter cannot cover every
//!   frame of the message, nothing is appended.
//! * After an open fails (tag or length), the [`Opener`] refuses every later
//!   frame: the stream cannot be resynchronised.
//!
//! # Not provided
//! No I/O, no buffering policy (the adapters' engine), no rekeying.

use std::ops::Range;

use super::aead::Cipher;
use super::error::ProtocolError;
#[cfg(any(feature = "avx512", feature = "avx2"))]
use super::wire::GROUP_FRAMES;
use super::wire::{
    nonce_bytes, sealed_frame_len, sealed_len, LEN_PREFIX, MAX_FRAME_SIZE, MIN_FRAME_SIZE,
    STANDARD_FRAME_SIZE, TAG_LEN,
};

/// A frame data size that has been checked once, at the edge (in
/// [`crate::Config::validate`] or [`FrameSize::new`]): every [`Sealer`],
/// [`Opener`] and [`super::Handshake`] takes this type, so none of them
/// validates again and none can be built with an unchecked size.
#[derive(Debug, Clone, Copy)]
pub struct FrameSize(usize);

impl FrameSize {
    /// The CometBFT wire: 1024 data bytes per frame.
    pub const STANDARD: FrameSize = FrameSize(STANDARD_FRAME_SIZE);

    /// Check `frame_size` against the profile's bounds: 64 bytes to 1 MiB.
    pub fn new(frame_size: usize) -> Result<Self, ProtocolError> {
        if (MIN_FRAME_SIZE..=MAX_FRAME_SIZE).contains(&frame_size) {
            Ok(FrameSize(frame_size))
        } else {
            Err(ProtocolError::InvalidFrameSize(frame_size))
        }
    }

    /// Data bytes per frame.
    pub const fn get(self) -> usize {
        self.0
    }

    /// Sealed bytes per frame (data size + 20).
    pub const fn sealed_len(self) -> usize {
        sealed_frame_len(self.0)
    }

    /// The largest multiple of the sealed frame length that is at most
    /// `bytes`, and at least one frame: what "`flush_size` bytes" means in
    /// every adapter.
    pub(crate) const fn whole_frames(self, bytes: usize) -> usize {
        let frames = bytes / self.sealed_len();
        if frames == 0 {
            self.sealed_len()
        } else {
            frames * self.sealed_len()
        }
    }

    /// Plaintext bytes that one flush of `flush_size` sealed bytes carries
    /// at most ([`Self::whole_frames`] of full frames): the most one write
    /// call of a connection takes.
    pub(crate) const fn flush_chunk(self, flush_size: usize) -> usize {
        self.whole_frames(flush_size) / self.sealed_len() * self.0
    }
}

impl Default for FrameSize {
    fn default() -> Self {
        FrameSize::STANDARD
    }
}

/// A per-direction frame counter that refuses to wrap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counter {
    /// Next counter to use; meaningless once `exhausted`.
    next: u64,
    /// Every value `0..=u64::MAX` has been used.
    exhausted: bool,
}

impl Counter {
    fn starting_at(next: u64) -> Self {
        Counter {
            next,
            exhausted: false,
        }
    }

    /// How many counters remain (up to 2^64).
    fn remaining(&self) -> u128 {
        if self.exhausted {
            0
        } else {
            u128::from(u64::MAX - self.next) + 1
        }
    }

    /// Take one counter value.
    fn take(&mut self) -> Result<u64, ProtocolError> {
        if self.exhausted {
            return Err(ProtocolError::NonceExhausted);
        }
        let n = self.next;
        match n.checked_add(1) {
            Some(next) => self.next = next,
            None => self.exhausted = true,
        }
        Ok(n)
    }
}

/// A growable byte buffer that frames can be sealed onto the end of.
///
/// Implemented for `Vec<u8>` and (feature `codec`) `bytes::BytesMut`, so the
/// std/tokio writers and the tokio-util encoder seal straight into their own
/// buffers.
pub trait SealBuf: std::ops::DerefMut<Target = [u8]> {
    /// Reserve room for `additional` more bytes.
    fn reserve_more(&mut self, additional: usize);
    /// Append bytes.
    fn put_slice(&mut self, s: &[u8]);
    /// Append `n` zero bytes.
    fn put_zeros(&mut self, n: usize);
}

impl SealBuf for Vec<u8> {
    fn reserve_more(&mut self, additional: usize) {
        self.reserve(additional);
    }
    fn put_slice(&mut self, s: &[u8]) {
        self.extend_from_slice(s);
    }
    fn put_zeros(&mut self, n: usize) {
        self.resize(self.len() + n, 0);
    }
}

#[cfg(feature = "codec")]
impl SealBuf for bytes::BytesMut {
    fn reserve_more(&mut self, additional: usize) {
        self.reserve(additional);
    }
    fn put_slice(&mut self, s: &[u8]) {
        self.extend_from_slice(s);
    }
    fn put_zeros(&mut self, n: usize) {
        self.resize(self.len() + n, 0);
    }
}

/// Seals outgoing frames for one direction of a connection.
#[derive(Debug)]
pub struct Sealer {
    cipher: Cipher,
    counter: Counter,
    frame_size: usize,
}

impl Sealer {
    /// A sealer whose first frame uses counter 0 (a handshake's
    /// [`super::Established`] hands out the connection's).
    pub(crate) fn new(cipher: Cipher, frame_size: FrameSize) -> Self {
        Self::with_counter(cipher, frame_size, 0)
    }

    /// A sealer whose next frame uses `counter`: for tests that need a
    /// counter near exhaustion (`testkit::sealer_at`); a real connection
    /// always starts at 0.
    pub(crate) fn with_counter(cipher: Cipher, frame_size: FrameSize, counter: u64) -> Self {
        Sealer {
            cipher,
            counter: Counter::starting_at(counter),
            frame_size: frame_size.get(),
        }
    }

    /// Data bytes per frame.
    pub fn frame_size(&self) -> FrameSize {
        FrameSize(self.frame_size)
    }

    /// Sealed bytes per frame (outside: `frame_size().sealed_len()`).
    pub(crate) fn sealed_frame_len(&self) -> usize {
        sealed_frame_len(self.frame_size)
    }

    /// Frames needed for `len` plaintext bytes (an empty message needs none).
    pub(crate) fn frames_for(&self, len: usize) -> usize {
        len.div_ceil(self.frame_size)
    }

    /// Sealed bytes produced for `len` plaintext bytes.
    pub fn sealed_len(&self, len: usize) -> usize {
        sealed_len(len, self.frame_size)
    }

    /// Seal all of `data` as consecutive frames appended to `out`.
    ///
    /// All-or-nothing: when the counter cannot cover every frame, nothing is
    /// appended and [`ProtocolError::NonceExhausted`] is returned. An empty
    /// `data` appends nothing. Returns the number of frames appended.
    pub fn seal_append<B: SealBuf + ?Sized>(
        &mut self,
        data: &[u8],
        out: &mut B,
    ) -> Result<usize, ProtocolError> {
        self.seal_append_vectored(&[data], out)
    }

    /// Seal the concatenation of `parts` as one message: frames are filled
    /// across part boundaries exactly as if the parts were one slice. Same
    /// all-or-nothing rule as [`Self::seal_append`].
    pub fn seal_append_vectored<S, B>(
        &mut self,
        parts: &[S],
        out: &mut B,
    ) -> Result<usize, ProtocolError>
    where
        S: std::ops::Deref<Target = [u8]>,
        B: SealBuf + ?Sized,
    {
        let total: usize = parts.iter().map(|p| p.len()).sum();
        self.seal_append_prefix(parts, total, out)
    }

    /// Seal the first `len` bytes of the concatenation of `parts` (all of it
    /// if it is shorter) as one message, as [`Self::seal_append_vectored`]
    /// does. Returns the number of frames appended.
    pub fn seal_append_prefix<S, B>(
        &mut self,
        parts: &[S],
        len: usize,
        out: &mut B,
    ) -> Result<usize, ProtocolError>
    where
        S: std::ops::Deref<Target = [u8]>,
        B: SealBuf + ?Sized,
    {
        let total = len.min(parts.iter().map(|p| p.len()).sum());
        self.seal_append_parts(parts.iter().map(|p| &p[..]), total, out)
    }

    /// As [`Self::seal_append_prefix`], over any sequence of slices (the
    /// send queue's backlog, without a list of its own); `total` must not
    /// exceed their summed length.
    pub(crate) fn seal_append_parts<'a, I, B>(
        &mut self,
        parts: I,
        total: usize,
        out: &mut B,
    ) -> Result<usize, ProtocolError>
    where
        I: IntoIterator<Item = &'a [u8]>,
        B: SealBuf + ?Sized,
    {
        let frames = self.frames_for(total);
        if (frames as u128) > self.counter.remaining() {
            return Err(ProtocolError::NonceExhausted);
        }
        out.reserve_more(frames * self.sealed_frame_len());
        let first_frame = out.len();
        let first_counter = self.counter.next;
        // Frames `0..grouped` are laid out here and sealed together at the
        // end by the multi-frame engine; the rest one at a time as we go.
        let grouped = self.grouped_frames(frames);
        let mut index = 0;
        let mut parts = parts.into_iter().filter(|p| !p.is_empty());
        let mut current: &[u8] = parts.next().unwrap_or(&[]);
        let mut left = total;
        while left > 0 {
            let take = left.min(self.frame_size);
            let counter = self.counter.take()?;
            let start = out.len();
            // Lengths fit: take <= MAX_FRAME_SIZE < u32::MAX.
            out.put_slice(&(take as u32).to_le_bytes());
            let mut need = take;
            while need > 0 {
                if current.is_empty() {
                    // A caller's `total` beyond the parts is a bug here, not
                    // a loop without end.
                    current = parts.next().expect("seal: total exceeds the parts");
                    continue;
                }
                let k = need.min(current.len());
                out.put_slice(&current[..k]);
                current = &current[k..];
                need -= k;
            }
            if index < grouped {
                out.put_zeros(self.frame_size - take + TAG_LEN);
            } else {
                self.finish_frame(start, take, counter, out);
            }
            index += 1;
            left -= take;
        }
        self.seal_grouped(first_counter, &mut out[first_frame..], grouped);
        Ok(frames)
    }

    /// How many of a message's `frames` the multi-frame engine seals: whole
    /// groups of standard frames when this cipher has the engine, else 0.
    fn grouped_frames(&self, frames: usize) -> usize {
        #[cfg(any(feature = "avx512", feature = "avx2"))]
        if self.cipher.group_engine(self.frame_size).is_some() {
            return frames / GROUP_FRAMES * GROUP_FRAMES;
        }
        let _ = frames;
        0
    }

    /// Seal the first `grouped` frames of `out` (laid out as plaintext,
    /// counters from `first_counter`) with the multi-frame engine.
    fn seal_grouped(&self, first_counter: u64, out: &mut [u8], grouped: usize) {
        if grouped == 0 {
            return;
        }
        #[cfg(any(feature = "avx512", feature = "avx2"))]
        if let Some(engine) = self.cipher.group_engine(self.frame_size) {
            // The counter check at the top covered every frame, so
            // `first_counter + grouped - 1` did not wrap.
            engine.seal_groups(first_counter, &mut out[..grouped * self.sealed_frame_len()]);
            return;
        }
        let _ = (first_counter, out);
        unreachable!("grouped_frames is 0 without the multi-frame engine")
    }

    /// Pad the frame whose plaintext starts at `start` and carries `len` data
    /// bytes, seal it in place and append its tag.
    fn finish_frame<B: SealBuf + ?Sized>(
        &mut self,
        start: usize,
        len: usize,
        counter: u64,
        out: &mut B,
    ) {
        out.put_zeros(self.frame_size - len + TAG_LEN);
        let plain_end = start + LEN_PREFIX + self.frame_size;
        self.cipher.warm();
        let tag = self
            .cipher
            .seal_in_place(&nonce_bytes(counter), &mut out[start..plain_end]);
        out[plain_end..plain_end + TAG_LEN].copy_from_slice(&tag);
    }

    #[cfg(any(test, feature = "testkit"))]
    /// Seal one frame carrying `chunk` (at most `frame_size` bytes; may be empty).
    fn seal_one<B: SealBuf + ?Sized>(
        &mut self,
        chunk: &[u8],
        out: &mut B,
    ) -> Result<(), ProtocolError> {
        let counter = self.counter.take()?;
        let start = out.len();
        out.put_slice(&(chunk.len() as u32).to_le_bytes());
        out.put_slice(chunk);
        self.finish_frame(start, chunk.len(), counter, out);
        Ok(())
    }

    /// Free the cipher's expanded key until the next frame (see
    /// [`Cipher`]): an idle connection then holds only its 32-byte key.
    pub(crate) fn release_key(&mut self) {
        self.cipher.release();
    }

    /// Seal exactly one frame even when `chunk` is empty (the handshake's frame
    /// #0 helper and tests use this; application writes never send empty frames).
    #[cfg(any(test, feature = "testkit"))]
    pub(crate) fn seal_frame<B: SealBuf + ?Sized>(
        &mut self,
        chunk: &[u8],
        out: &mut B,
    ) -> Result<(), ProtocolError> {
        if chunk.len() > self.frame_size {
            return Err(ProtocolError::ChunkTooLarge {
                len: chunk.len(),
                max: self.frame_size,
            });
        }
        self.seal_one(chunk, out)
    }
}

/// Where a decrypted frame's data lies: its little-endian length prefix
/// announces `LEN_PREFIX..LEN_PREFIX + len`, and a length above
/// `frame_size` (or a frame too short for its prefix) is the peer's error.
/// The one place this rule is written.
pub(crate) fn frame_data(frame: &[u8], frame_size: usize) -> Result<Range<usize>, ProtocolError> {
    let prefix: [u8; LEN_PREFIX] = frame
        .get(..LEN_PREFIX)
        .and_then(|p| p.try_into().ok())
        .unwrap_or([0xff; LEN_PREFIX]);
    let len = u32::from_le_bytes(prefix) as usize;
    if len > frame_size || LEN_PREFIX + len > frame.len() {
        return Err(ProtocolError::FrameTooLarge {
            len: len as u64,
            max: frame_size,
        });
    }
    Ok(LEN_PREFIX..LEN_PREFIX + len)
}

/// Opens incoming frames for one direction of a connection.
#[derive(Debug)]
pub struct Opener {
    cipher: Cipher,
    counter: Counter,
    frame_size: usize,
    failed: Option<ProtocolError>,
}

impl Opener {
    /// An opener whose first frame uses counter 0 (a handshake's
    /// [`super::Established`] hands out the connection's).
    pub(crate) fn new(cipher: Cipher, frame_size: FrameSize) -> Self {
        Self::with_counter(cipher, frame_size, 0)
    }

    /// An opener whose next frame uses `counter` (tests only:
    /// `testkit::opener_at`).
    pub(crate) fn with_counter(cipher: Cipher, frame_size: FrameSize, counter: u64) -> Self {
        Opener {
            cipher,
            counter: Counter::starting_at(counter),
            frame_size: frame_size.get(),
            failed: None,
        }
    }

    /// Data bytes per frame.
    pub fn frame_size(&self) -> FrameSize {
        FrameSize(self.frame_size)
    }

    /// Sealed bytes per frame (outside: `frame_size().sealed_len()`).
    pub(crate) fn sealed_frame_len(&self) -> usize {
        sealed_frame_len(self.frame_size)
    }

    /// Counter of the next frame to open (meaningless after exhaustion).
    #[cfg(any(test, feature = "testkit"))]
    pub(crate) fn next_counter(&self) -> u64 {
        self.counter.next
    }

    /// Open one sealed frame in place and return the range of its data bytes
    /// within `frame`. `frame` must be exactly `frame_size().sealed_len()` bytes.
    ///
    /// The counter advances only on success. Any failure is sticky: every later
    /// call returns the same error.
    pub fn open_in_place(&mut self, frame: &mut [u8]) -> Result<Range<usize>, ProtocolError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let r = self.open_inner(frame);
        if let Err(e) = &r {
            self.failed = Some(e.clone());
        }
        r
    }

    /// Open, with the multi-frame engine, as many whole groups of standard
    /// frames at the front of `sealed` as it holds, and return how many
    /// frames are now plaintext in place (0 without the engine, with fewer
    /// than a group, or after a failure). It stops before the first frame
    /// whose tag fails, leaving it sealed: [`Self::open_in_place`] then
    /// reports it. The counter advances past every frame opened; the caller
    /// takes each one's data with [`Self::opened_frame`], in order.
    pub(crate) fn open_groups_in_place(&mut self, sealed: &mut [u8]) -> usize {
        #[cfg(any(feature = "avx512", feature = "avx2"))]
        if let Some(engine) = self
            .cipher
            .group_engine(self.frame_size)
            .filter(|_| self.failed.is_none())
        {
            let frames = sealed.len() / self.sealed_frame_len() / GROUP_FRAMES * GROUP_FRAMES;
            // Leave exhaustion to the one-frame path, which reports it.
            if frames == 0 || frames as u128 > self.counter.remaining() {
                return 0;
            }
            let sealed = &mut sealed[..frames * self.sealed_frame_len()];
            let opened = engine.open_groups(self.counter.next, sealed);
            for _ in 0..opened {
                // Cannot fail: `remaining` covered every frame.
                let _ = self.counter.take();
            }
            return opened;
        }
        let _ = sealed;
        0
    }

    /// Whether [`Self::open_groups_in_place`] can open anything at all
    /// (the multi-frame engine, standard frames, no failure yet).
    pub(crate) fn opens_groups(&self) -> bool {
        #[cfg(any(feature = "avx512", feature = "avx2"))]
        return self.failed.is_none() && self.cipher.group_engine(self.frame_size).is_some();
        #[cfg(not(any(feature = "avx512", feature = "avx2")))]
        false
    }

    /// The data range of a frame [`Self::open_groups_in_place`] opened
    /// (`frame` is its `frame_size().sealed_len()` bytes, now plaintext).
    /// Checks the length prefix; errors are sticky as in
    /// [`Self::open_in_place`].
    pub(crate) fn opened_frame(&mut self, frame: &[u8]) -> Result<Range<usize>, ProtocolError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let r = self.data_range(frame);
        if let Err(e) = &r {
            self.failed = Some(e.clone());
        }
        r
    }

    /// The data range a decrypted frame's length prefix announces.
    fn data_range(&self, frame: &[u8]) -> Result<Range<usize>, ProtocolError> {
        frame_data(frame, self.frame_size)
    }

    /// The error that stopped this opener, if any (every later call
    /// returns it).
    pub(crate) fn failure(&self) -> Option<&ProtocolError> {
        self.failed.as_ref()
    }

    /// Free the cipher's expanded key until the next frame (see [`Cipher`]).
    pub(crate) fn release_key(&mut self) {
        self.cipher.release();
    }

    fn open_inner(&mut self, frame: &mut [u8]) -> Result<Range<usize>, ProtocolError> {
        if frame.len() != self.sealed_frame_len() {
            return Err(ProtocolError::WrongFrameLength {
                len: frame.len(),
                expected: self.sealed_frame_len(),
            });
        }
        if self.counter.exhausted {
            return Err(ProtocolError::NonceExhausted);
        }
        let counter = self.counter.next;
        self.cipher.warm();
        self.cipher
            .open_in_place(&nonce_bytes(counter), frame)
            .map_err(|_| ProtocolError::FrameAuthentication { counter })?;
        self.counter.take()?;
        self.data_range(frame)
    }
}

#[cfg(test)]
mod tests;
