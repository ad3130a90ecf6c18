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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

    /// Sealed bytes per frame.
    pub fn sealed_frame_len(&self) -> usize {
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

    /// Sealed bytes per frame.
    pub fn sealed_frame_len(&self) -> usize {
        sealed_frame_len(self.frame_size)
    }

    /// Counter of the next frame to open (meaningless after exhaustion).
    #[cfg(any(test, feature = "testkit"))]
    pub(crate) fn next_counter(&self) -> u64 {
        self.counter.next
    }

    /// Open one sealed frame in place and return the range of its data bytes
    /// within `frame`. `frame` must be exactly [`Self::sealed_frame_len`] bytes.
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
    /// (`frame` is its [`Self::sealed_frame_len`] bytes, now plaintext).
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
mod tests {
    use super::super::aead::Backend;
    use super::super::wire::STANDARD_SEALED_FRAME;
    use super::*;

    fn pair(backend: Backend, fs: usize, counter: u64) -> (Sealer, Opener) {
        let key = [3u8; 32];
        (
            Sealer::with_counter(
                Cipher::new(backend, &key),
                FrameSize::new(fs).unwrap(),
                counter,
            ),
            Opener::with_counter(
                Cipher::new(backend, &key),
                FrameSize::new(fs).unwrap(),
                counter,
            ),
        )
    }

    #[test]
    fn nonce_layout() {
        assert_eq!(hex::encode(nonce_bytes(0)), "000000000000000000000000");
        assert_eq!(hex::encode(nonce_bytes(1)), "000000000100000000000000");
        assert_eq!(hex::encode(nonce_bytes(256)), "000000000001000000000000");
    }

    #[test]
    fn split_sizes_and_roundtrip() {
        for &b in Backend::ALL {
            for (len, frames) in [
                (0usize, 0usize),
                (1, 1),
                (1023, 1),
                (1024, 1),
                (1025, 2),
                (4096, 4),
            ] {
                let (mut s, mut o) = pair(b, 1024, 0);
                let data: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
                let mut out = Vec::new();
                assert_eq!(s.seal_append(&data, &mut out).unwrap(), frames);
                assert_eq!(out.len(), frames * STANDARD_SEALED_FRAME);
                let mut got = Vec::new();
                for f in out.chunks_mut(STANDARD_SEALED_FRAME) {
                    let r = o.open_in_place(f).unwrap();
                    got.extend_from_slice(&f[r]);
                }
                assert_eq!(got, data);
            }
        }
    }

    #[test]
    fn padding_is_zero_on_send() {
        for &backend in Backend::ALL {
            let (mut s, _) = pair(backend, 1024, 0);
            let mut out = Vec::new();
            s.seal_append(b"abc", &mut out).unwrap();
            let c = Cipher::new(Backend::RustCrypto, &[3u8; 32]);
            c.open_in_place(&nonce_bytes(0), &mut out).unwrap();
            assert_eq!(&out[..7], &[3, 0, 0, 0, b'a', b'b', b'c']);
            assert!(out[7..1028].iter().all(|&b| b == 0));
        }
    }

    #[test]
    fn nonce_exhaustion_is_an_error_not_a_wrap() {
        for &backend in Backend::ALL {
            let (mut s, mut o) = pair(backend, 1024, u64::MAX - 1);
            let mut out = Vec::new();
            // Three frames need counters MAX-1, MAX, and one more: refused whole.
            assert_eq!(
                s.seal_append(&[1u8; 3000], &mut out),
                Err(ProtocolError::NonceExhausted)
            );
            assert!(out.is_empty());
            // Two frames fit exactly.
            assert_eq!(s.seal_append(&[1u8; 2000], &mut out).unwrap(), 2);
            assert_eq!(
                s.seal_append(b"x", &mut out),
                Err(ProtocolError::NonceExhausted)
            );
            assert_eq!(
                s.seal_frame(b"", &mut out),
                Err(ProtocolError::NonceExhausted)
            );
            assert_eq!(out.len(), 2 * STANDARD_SEALED_FRAME);
            for f in out.chunks_mut(STANDARD_SEALED_FRAME) {
                o.open_in_place(f).unwrap();
            }
            let mut extra = vec![0u8; STANDARD_SEALED_FRAME];
            assert_eq!(
                o.open_in_place(&mut extra),
                Err(ProtocolError::NonceExhausted)
            );
        }
    }

    #[test]
    fn failures_are_sticky() {
        let (mut s, mut o) = pair(Backend::RustCrypto, 1024, 0);
        let mut out = Vec::new();
        s.seal_append(&[9u8; 2048], &mut out).unwrap();
        out[10] ^= 0x80;
        let (a, b) = out.split_at_mut(STANDARD_SEALED_FRAME);
        assert_eq!(
            o.open_in_place(a),
            Err(ProtocolError::FrameAuthentication { counter: 0 })
        );
        // The second frame is intact but the stream is dead.
        assert!(o.open_in_place(b).is_err());
    }

    #[test]
    fn length_above_frame_size_is_rejected() {
        for &backend in Backend::ALL {
            let c = Cipher::new(backend, &[3u8; 32]);
            let mut plain = vec![0u8; 1028];
            plain[..4].copy_from_slice(&1025u32.to_le_bytes());
            let tag = c.seal_in_place(&nonce_bytes(0), &mut plain);
            plain.extend_from_slice(&tag);
            let (_, mut o) = pair(backend, 1024, 0);
            assert_eq!(
                o.open_in_place(&mut plain),
                Err(ProtocolError::FrameTooLarge {
                    len: 1025,
                    max: 1024
                })
            );
        }
    }

    #[test]
    fn vectored_equals_contiguous() {
        for &backend in Backend::ALL {
            let data: Vec<u8> = (0..5000u32).map(|i| (i * 13) as u8).collect();
            for cuts in [
                vec![0usize, 5000],
                vec![0, 0, 1, 1024, 1025, 4999, 5000],
                vec![0, 3000, 3000, 5000],
            ] {
                let parts: Vec<&[u8]> = cuts.windows(2).map(|w| &data[w[0]..w[1]]).collect();
                let (mut a, _) = pair(backend, 1024, 0);
                let (mut b, _) = pair(backend, 1024, 0);
                let mut x = Vec::new();
                let mut y = Vec::new();
                a.seal_append(&data, &mut x).unwrap();
                b.seal_append_vectored(&parts, &mut y).unwrap();
                assert_eq!(x, y, "{cuts:?}");
            }
            // A prefix seals exactly what sealing that prefix alone would.
            let parts: [&[u8]; 3] = [&data[..100], &data[100..3000], &data[3000..]];
            for len in [0usize, 1, 100, 1024, 2500, 5000, 9999] {
                let (mut a, _) = pair(backend, 1024, 0);
                let (mut b, _) = pair(backend, 1024, 0);
                let mut x = Vec::new();
                let mut y = Vec::new();
                a.seal_append(&data[..len.min(data.len())], &mut x).unwrap();
                b.seal_append_prefix(&parts, len, &mut y).unwrap();
                assert_eq!(x, y, "prefix {len}");
            }
            let (mut a, _) = pair(backend, 1024, 0);
            let mut x = Vec::new();
            let empty: [&[u8]; 2] = [&[], &[]];
            assert_eq!(a.seal_append_vectored(&empty, &mut x).unwrap(), 0);
            assert!(x.is_empty());
        }
    }

    #[test]
    fn non_standard_frame_size() {
        for &backend in Backend::ALL {
            let (mut s, mut o) = pair(backend, 16384, 0);
            let data = vec![5u8; 40000];
            let mut out = Vec::new();
            assert_eq!(s.seal_append(&data, &mut out).unwrap(), 3);
            let mut got = Vec::new();
            for f in out.chunks_mut(sealed_frame_len(16384)) {
                let r = o.open_in_place(f).unwrap();
                got.extend_from_slice(&f[r]);
            }
            assert_eq!(got, data);
            assert!(FrameSize::new(MIN_FRAME_SIZE - 1).is_err());
            assert!(FrameSize::new(MAX_FRAME_SIZE + 1).is_err());
            assert!(FrameSize::new(MIN_FRAME_SIZE).is_ok());
            assert!(FrameSize::new(MAX_FRAME_SIZE).is_ok());
            let fs = FrameSize::STANDARD;
            assert_eq!(fs.whole_frames(0), 1044);
            assert_eq!(fs.whole_frames(1043), 1044);
            assert_eq!(fs.whole_frames(2 * 1044 + 1043), 2 * 1044);
            assert_eq!(fs.whole_frames(128 * 1024), 125 * 1044);
        }
    }

    /// Messages of every size around group boundaries, through every
    /// backend: the grouped sealing (`Avx512`) writes the very bytes the
    /// one-frame backends write, and every opener reads them back.
    #[test]
    fn grouped_sealing_is_byte_identical() {
        let sizes = [
            1usize,
            1024,
            15 * 1024,
            16 * 1024 - 1,
            16 * 1024,
            16 * 1024 + 1,
            17 * 1024,
            32 * 1024,
            33 * 1024 + 5,
            64 * 1024,
            100 * 1024 + 999,
        ];
        for counter in [0u64, 0xFFFF_FFF5, u64::MAX - 200] {
            for &len in &sizes {
                let data: Vec<u8> = (0..len).map(|i| (i * 13 + len) as u8).collect();
                // Two parts split off-frame, as a vectored write would.
                let cut = len / 3;
                let parts = [&data[..cut], &data[cut..]];
                let mut wires = Vec::new();
                for &b in Backend::ALL {
                    let (mut s, _) = pair(b, 1024, counter);
                    let mut out = vec![0xEE; 7]; // sealing appends after existing bytes
                    s.seal_append_vectored(&parts, &mut out).unwrap();
                    wires.push((b, out));
                }
                for (b, wire) in &wires[1..] {
                    assert!(
                        wire == &wires[0].1,
                        "{len} bytes at {counter:#x}: {b} differs"
                    );
                }
                for &b in Backend::ALL {
                    let (_, mut o) = pair(b, 1024, counter);
                    let mut wire = wires[0].1[7..].to_vec();
                    let mut got = Vec::new();
                    for f in wire.chunks_mut(STANDARD_SEALED_FRAME) {
                        let r = o.open_in_place(f).unwrap();
                        got.extend_from_slice(&f[r]);
                    }
                    assert_eq!(got, data, "{len} bytes opened by {b}");
                }
            }
        }
    }

    /// The all-or-nothing nonce rule holds for grouped sealing too.
    #[test]
    fn grouped_sealing_stops_at_nonce_exhaustion() {
        for &b in Backend::ALL {
            // 20 counters left: a 20-frame message fits, a 21-frame one not.
            let (mut s, _) = pair(b, 1024, u64::MAX - 19);
            let mut out = Vec::new();
            assert_eq!(
                s.seal_append(&[1u8; 21 * 1024], &mut out),
                Err(ProtocolError::NonceExhausted)
            );
            assert!(out.is_empty());
            assert_eq!(s.seal_append(&[1u8; 20 * 1024], &mut out), Ok(20));
            assert_eq!(
                s.seal_append(&[1u8], &mut out),
                Err(ProtocolError::NonceExhausted)
            );
        }
    }

    /// Group opening: frames up to a bad one open, the bad one is reported
    /// with its counter by the one-frame path, and the failure sticks.
    #[cfg(any(feature = "avx512", feature = "avx2"))]
    #[test]
    fn group_open_stops_before_a_bad_frame() {
        for &b in Backend::ALL {
            group_open_stops_before_a_bad_frame_with(b);
        }
    }

    #[cfg(any(feature = "avx512", feature = "avx2"))]
    fn group_open_stops_before_a_bad_frame_with(b: Backend) {
        let (mut s, _) = pair(b, 1024, 5);
        let data: Vec<u8> = (0..40 * 1024).map(|i| (i % 251) as u8).collect();
        let mut wire = Vec::new();
        s.seal_append(&data, &mut wire).unwrap();
        wire[21 * STANDARD_SEALED_FRAME + 100] ^= 1;
        let (_, mut o) = pair(b, 1024, 5);
        let opened = o.open_groups_in_place(&mut wire);
        if !b.accelerated() {
            assert_eq!(opened, 0);
            return;
        }
        // Group 0 (frames 0..16) opens; group 1 stops at frame 21.
        assert_eq!(opened, 21);
        assert_eq!(o.next_counter(), 5 + 21);
        for i in 0..21 {
            let f = &wire[i * STANDARD_SEALED_FRAME..(i + 1) * STANDARD_SEALED_FRAME];
            let r = o.opened_frame(f).unwrap();
            assert_eq!(&f[r], &data[i * 1024..(i + 1) * 1024]);
        }
        let bad = &mut wire[21 * STANDARD_SEALED_FRAME..22 * STANDARD_SEALED_FRAME];
        let err = ProtocolError::FrameAuthentication { counter: 26 };
        assert_eq!(o.open_in_place(bad), Err(err.clone()));
        assert_eq!(
            o.open_groups_in_place(&mut wire[22 * STANDARD_SEALED_FRAME..]),
            0
        );
        assert_eq!(o.opened_frame(&[0u8; STANDARD_SEALED_FRAME]), Err(err));
    }

    /// A frame inside a group that decrypts to a length above the frame
    /// size is an error at that frame, as on the one-frame path.
    #[cfg(any(feature = "avx512", feature = "avx2"))]
    #[test]
    fn group_open_checks_each_length_prefix() {
        for &b in Backend::ALL.iter().filter(|b| b.accelerated()) {
            group_open_checks_each_length_prefix_with(b);
        }
    }

    #[cfg(any(feature = "avx512", feature = "avx2"))]
    fn group_open_checks_each_length_prefix_with(b: Backend) {
        let key = [3u8; 32];
        let c = Cipher::new(b, &key);
        let mut wire = Vec::new();
        for i in 0..16u64 {
            let mut plain = vec![0u8; LEN_PREFIX + 1024];
            let len: u32 = if i == 9 { 1025 } else { 10 };
            plain[..4].copy_from_slice(&len.to_le_bytes());
            let tag = c.seal_in_place(&nonce_bytes(i), &mut plain);
            wire.extend_from_slice(&plain);
            wire.extend_from_slice(&tag);
        }
        let mut o = Opener::new(Cipher::new(b, &key), FrameSize::STANDARD);
        assert_eq!(o.open_groups_in_place(&mut wire), 16);
        for i in 0..9 {
            let f = &wire[i * STANDARD_SEALED_FRAME..(i + 1) * STANDARD_SEALED_FRAME];
            assert_eq!(o.opened_frame(f), Ok(LEN_PREFIX..LEN_PREFIX + 10));
        }
        let f = &wire[9 * STANDARD_SEALED_FRAME..10 * STANDARD_SEALED_FRAME];
        let err = ProtocolError::FrameTooLarge {
            len: 1025,
            max: 1024,
        };
        assert_eq!(o.opened_frame(f), Err(err.clone()));
        assert_eq!(o.open_in_place(&mut [0u8; STANDARD_SEALED_FRAME]), Err(err));
    }

    /// A frame sealed by hand around `plain` (length prefix, data, padding
    /// as given) under counter `counter`.
    fn hand_sealed(backend: Backend, counter: u64, plain: &[u8]) -> Vec<u8> {
        let c = Cipher::new(backend, &[3u8; 32]);
        let mut f = plain.to_vec();
        let tag = c.seal_in_place(&nonce_bytes(counter), &mut f);
        f.extend_from_slice(&tag);
        f
    }

    /// Short frames whose padding holds stale non-zero bytes (CometBFT's Go
    /// sender reuses its frame buffer without clearing it): the padding is
    /// ignored and the data arrives intact.
    #[test]
    fn stale_padding_is_ignored() {
        for &b in Backend::ALL {
            let mut plain = vec![0xA5u8; LEN_PREFIX + 1024];
            plain[..4].copy_from_slice(&3u32.to_le_bytes());
            plain[4..7].copy_from_slice(b"abc");
            let mut f = hand_sealed(b, 0, &plain);
            let (_, mut o) = pair(b, 1024, 0);
            let r = o.open_in_place(&mut f).unwrap();
            assert_eq!(&f[r], b"abc", "{b}");
        }
    }

    /// Length fields past the frame size, up to u32::MAX: refused, never
    /// read past the frame.
    #[test]
    fn length_fields_of_1025_and_u32_max_are_refused() {
        for &b in Backend::ALL {
            for len in [1025u32, u32::MAX] {
                let mut plain = vec![0u8; LEN_PREFIX + 1024];
                plain[..4].copy_from_slice(&len.to_le_bytes());
                let mut f = hand_sealed(b, 0, &plain);
                let (_, mut o) = pair(b, 1024, 0);
                assert_eq!(
                    o.open_in_place(&mut f),
                    Err(ProtocolError::FrameTooLarge {
                        len: u64::from(len),
                        max: 1024
                    }),
                    "{b}, length {len}"
                );
            }
        }
    }

    /// A replayed frame and a skipped one both fail at that frame, with the
    /// counter the opener expected, and the failure sticks.
    #[test]
    fn replayed_and_skipped_frames_fail() {
        for &b in Backend::ALL {
            let (mut s, _) = pair(b, 1024, 0);
            let mut wire = Vec::new();
            for i in 0..3u8 {
                s.seal_frame(&[i; 10], &mut wire).unwrap();
            }
            let frame = |i: usize| {
                wire[i * STANDARD_SEALED_FRAME..(i + 1) * STANDARD_SEALED_FRAME].to_vec()
            };
            // Replay: frame 0 twice.
            let (_, mut o) = pair(b, 1024, 0);
            assert!(o.open_in_place(&mut frame(0)).is_ok());
            let replay = o.open_in_place(&mut frame(0));
            assert_eq!(
                replay,
                Err(ProtocolError::FrameAuthentication { counter: 1 }),
                "{b}"
            );
            assert_eq!(o.open_in_place(&mut frame(1)), replay, "sticky");
            // Skip: frame 1 missing.
            let (_, mut o) = pair(b, 1024, 0);
            assert!(o.open_in_place(&mut frame(0)).is_ok());
            assert_eq!(
                o.open_in_place(&mut frame(2)),
                Err(ProtocolError::FrameAuthentication { counter: 1 }),
                "{b}"
            );
        }
    }

    /// The receiving side refuses to open past the last counter, without
    /// wrapping, like the sending side.
    #[test]
    fn nonce_exhaustion_on_receive() {
        for &b in Backend::ALL {
            let (mut s, mut o) = pair(b, 1024, u64::MAX);
            let mut wire = Vec::new();
            s.seal_frame(b"last", &mut wire).unwrap();
            let r = o.open_in_place(&mut wire).unwrap();
            assert_eq!(&wire[r], b"last");
            let mut again = hand_sealed(b, 0, &[0u8; LEN_PREFIX + 1024]);
            assert_eq!(
                o.open_in_place(&mut again),
                Err(ProtocolError::NonceExhausted),
                "{b}"
            );
        }
    }
}
