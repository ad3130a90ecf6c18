//! tokio-util codec adapter: a [`SecretEncoder`] / [`SecretDecoder`] pair for
//! `FramedWrite` / `FramedRead` (or [`SecretCodec`] for `Framed`), with no
//! `BufWriter` in between. Both are views of the engine, not copies of it:
//! the encoder is the engine's `WriteCore`, the decoder its `ReadCore`,
//! each working on tokio-util's buffer instead of one of its own.
//!
//! * The encoder seals each item straight into `FramedWrite`'s buffer: one item
//!   is one logical message, split into frames with no copy of sealed bytes.
//!   [`handshake`] sets the backpressure boundary to `flush_size` rounded
//!   down to whole frames (the same number the tokio and std writers use), so
//!   `FramedWrite` writes the buffer (one transport write) once it holds a
//!   flush's worth, and on every flush.
//! * The decoder opens every whole frame in `FramedRead`'s buffer in place
//!   (`ReadCore::open_batch`), splits the opened frames off that buffer
//!   into its own state, and yields each frame's data as a [`Bytes`] slice
//!   of them: no copy. One read fills the buffer with as many frames as the
//!   transport has (up to `read_buffer_size`, at least one sealed frame).
//! * The decoder trusts nothing about the buffer it is handed: frames it
//!   opened ahead are its own, so a caller that hands it a different buffer
//!   on every call (driving it directly, or rebuilding `FramedParts` with a
//!   fresh read buffer) still gets only bytes the peer sealed, in order.
//! * Items are frame payloads, not your messages: message boundaries are not on
//!   the wire. A message of more than one frame arrives as several items; an
//!   item never mixes two of the sender's writes only because every write
//!   starts a new frame, which other implementations need not do.
//!   Zero-length frames yield nothing.
//! * Plaintext that arrived with the handshake belongs to the decoder: it is
//!   its first item. The decoder never passes transport bytes through
//!   unopened. [`handshake`] and [`handshake_split`] wrap the transport in
//!   [`WithInitial`], which makes `FramedRead` ask the decoder at once
//!   instead of after the peer's next bytes; a decoder built with
//!   [`SecretCodec::new`] and used without it still yields those bytes first,
//!   only later.
//!
//! # Cancellation
//! Dropping a [`handshake`] / [`handshake_split`] future abandons the
//! handshake and drops the transport. Afterwards `Framed`'s own contracts
//! apply: an item passed to `feed`/`send` is sealed into the write buffer when
//! the sink accepts it (so it is never half-sealed), and stays there across a
//! dropped `flush`; a dropped `next()` loses nothing (undecoded bytes stay in
//! the read buffer).
//!
//! # Not provided
//! Flow control beyond `FramedWrite`'s boundary: a single huge item is sealed
//! whole into the write buffer; split very large messages yourself.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_util::codec::{Decoder, Encoder, Framed, FramedRead, FramedWrite};

use crate::engine::reader::next_opened;
use crate::engine::{establish, ReadCore, WriteCore};
use crate::events::Handshaking;
use crate::io::tokio::{run_handshake, Split};
use crate::proto::Established;
use crate::{Config, Error, Identity, PublicKey};

/// Seals items into frames. Encodes anything that is `AsRef<[u8]>`.
#[derive(Debug)]
pub struct SecretEncoder {
    core: WriteCore,
}

impl SecretEncoder {
    /// `FramedWrite`'s backpressure boundary: `flush_size` rounded down to
    /// whole sealed frames.
    pub fn flush_bytes(&self) -> usize {
        self.core.flush_bytes()
    }
}

impl<T: AsRef<[u8]>> Encoder<T> for SecretEncoder {
    type Error = io::Error;

    fn encode(&mut self, item: T, dst: &mut BytesMut) -> io::Result<()> {
        let item = item.as_ref();
        self.core.seal(&[item], item.len(), dst).map(|_| ())
    }
}

/// Opens frames; yields each frame's data as a zero-copy [`Bytes`], after
/// the plaintext that arrived with the handshake.
pub struct SecretDecoder {
    core: ReadCore,
    /// Set by [`WithInitial`] when it has handed `FramedRead` one placeholder
    /// byte (so that it decodes at once); the decoder drops that byte.
    placeholder: Option<Arc<AtomicBool>>,
    /// Whole frames this decoder opened and split off the caller's buffer;
    /// `opened[next..]` are not yet yielded.
    opened: Bytes,
    next: usize,
}

impl std::fmt::Debug for SecretDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Lengths only: the opened frames are decrypted application data.
        f.debug_struct("SecretDecoder")
            .field("core", &self.core)
            .field("opened_buffered", &(self.opened.len() - self.next))
            .finish()
    }
}

impl SecretDecoder {
    fn new(core: ReadCore) -> Self {
        SecretDecoder {
            core,
            placeholder: None,
            opened: Bytes::new(),
            next: 0,
        }
    }

    /// The next opened frame's data, if any is left.
    fn next_opened(&mut self) -> Option<Bytes> {
        let frame_size = self.core.frame_size();
        let item = next_opened(&self.opened, frame_size, &mut self.next)
            .map(|data| self.opened.slice(data));
        if item.is_none() {
            // Every opened frame is yielded: let go of their buffer.
            self.opened = Bytes::new();
            self.next = 0;
        }
        item
    }
}

impl Decoder for SecretDecoder {
    type Item = Bytes;
    type Error = io::Error;

    fn decode(&mut self, src: &mut BytesMut) -> io::Result<Option<Bytes>> {
        if let Some(flag) = &self.placeholder {
            if flag.swap(false, Ordering::AcqRel) {
                src.advance(1);
                self.placeholder = None;
            }
        }
        if !self.core.initial().is_empty() {
            return Ok(Some(Bytes::from(self.core.take_initial())));
        }
        if let Some(item) = self.next_opened() {
            return Ok(Some(item));
        }
        // The decoder cannot read more itself: open every whole frame here,
        // and take them out of the caller's buffer.
        let batch = self.core.open_batch(src, false);
        if batch.consumed > 0 {
            self.opened = src.split_to(batch.consumed).freeze();
            if let Some(item) = self.next_opened() {
                return Ok(Some(item));
            }
        }
        if let Some(e) = batch.error {
            // After the frames before it; sticky in `ReadCore`.
            return Err(e.into());
        }
        // Make room for a full read (many frames), and always for the rest
        // of the current frame.
        let want = self.core.read_buffer_size();
        let spare = src.capacity() - src.len();
        if spare < (want / 2).max(self.core.sealed_frame_len()) {
            src.reserve(want);
        }
        Ok(None)
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> io::Result<Option<Bytes>> {
        match self.decode(src)? {
            Some(item) => Ok(Some(item)),
            None => self.core.end_of_stream(src.len()).map(|()| None),
        }
    }
}

/// Encoder and decoder in one, for `Framed`.
#[derive(Debug)]
pub struct SecretCodec {
    encoder: SecretEncoder,
    decoder: SecretDecoder,
    remote: PublicKey,
}

impl SecretCodec {
    /// Build the codec from a handshake you drove yourself (see
    /// [`crate::proto::Handshake`]); checks `config.expected_peer_id`. The
    /// decoder owns the plaintext that arrived with the handshake and yields
    /// it as its first item. Prefer [`handshake`] / [`handshake_split`],
    /// which also deliver that item without waiting for the peer's next
    /// bytes.
    pub fn new(est: Established, config: &Config) -> Result<Self, Error> {
        let (read, write, remote) = establish(est, config)?;
        Ok(SecretCodec {
            encoder: SecretEncoder { core: write },
            decoder: SecretDecoder::new(read),
            remote,
        })
    }

    /// The peer's authenticated public key.
    pub fn remote_public_key(&self) -> PublicKey {
        self.remote
    }

    /// Separate encoder and decoder, for `FramedWrite` and `FramedRead`.
    pub fn split(self) -> (SecretEncoder, SecretDecoder) {
        (self.encoder, self.decoder)
    }

    /// Wrap `io` so that `FramedRead` asks the decoder for the handshake's
    /// plaintext at once.
    fn prime<T>(&mut self, io: T) -> WithInitial<T> {
        let flag =
            (!self.decoder.core.initial().is_empty()).then(|| Arc::new(AtomicBool::new(false)));
        self.decoder.placeholder = flag.clone();
        WithInitial {
            inner: io,
            placeholder: flag,
        }
    }
}

impl<T: AsRef<[u8]>> Encoder<T> for SecretCodec {
    type Error = io::Error;
    fn encode(&mut self, item: T, dst: &mut BytesMut) -> io::Result<()> {
        self.encoder.encode(item, dst)
    }
}

impl Decoder for SecretCodec {
    type Item = Bytes;
    type Error = io::Error;
    fn decode(&mut self, src: &mut BytesMut) -> io::Result<Option<Bytes>> {
        self.decoder.decode(src)
    }
    fn decode_eof(&mut self, src: &mut BytesMut) -> io::Result<Option<Bytes>> {
        self.decoder.decode_eof(src)
    }
}

/// The transport under a [`handshake`]'s `Framed` (or a [`handshake_split`]'s
/// `FramedRead`). When the handshake brought plaintext along, its first read
/// yields one placeholder byte, so that `FramedRead` calls the decoder at
/// once; the decoder drops the byte and yields the plaintext it owns. Every
/// other call passes straight through. No public constructor: it is only
/// ever paired with its own decoder.
#[derive(Debug)]
pub struct WithInitial<T> {
    inner: T,
    placeholder: Option<Arc<AtomicBool>>,
}

impl<T> WithInitial<T> {
    /// The wrapped transport.
    pub fn get_ref(&self) -> &T {
        &self.inner
    }
    /// The wrapped transport, mutably.
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.inner
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for WithInitial<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        if buf.remaining() > 0 {
            if let Some(flag) = me.placeholder.take() {
                buf.put_slice(&[0]);
                flag.store(true, Ordering::Release);
                return Poll::Ready(Ok(()));
            }
        }
        Pin::new(&mut me.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for WithInitial<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, data)
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// Run the handshake (as [`crate::io::tokio::handshake`]) and return a
/// `Framed` transport with the read buffer size and backpressure boundary
/// set from `config`.
pub async fn handshake<T>(
    mut io: T,
    identity: &Identity,
    config: &Config,
) -> Result<Framed<WithInitial<T>, SecretCodec>, Error>
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    let events = Handshaking::start(|| None);
    let r = async {
        let est = run_handshake(&mut io, identity, config).await?;
        SecretCodec::new(est, config)
    }
    .await;
    events.finish(r.as_ref().map(|c| c.remote.node_id()));
    let mut codec = r?;
    let capacity = codec.decoder.core.read_buffer_size();
    let boundary = codec.encoder.flush_bytes();
    let io = codec.prime(io);
    let mut framed = Framed::with_capacity(io, codec, capacity);
    framed.set_backpressure_boundary(boundary);
    Ok(framed)
}

/// `FramedRead` / `FramedWrite` halves for separate tasks, over transport
/// halves `R` and `W`.
pub type FramedHalves<R, W> = (
    FramedRead<WithInitial<R>, SecretDecoder>,
    FramedWrite<W, SecretEncoder>,
);

/// Run the handshake and return `FramedRead` / `FramedWrite` halves over the
/// transport's own owned halves ([`Split`]: no lock), configured from
/// `config`.
pub async fn handshake_split<T>(
    mut io: T,
    identity: &Identity,
    config: &Config,
) -> Result<(FramedHalves<T::Read, T::Write>, PublicKey), Error>
where
    T: AsyncRead + AsyncWrite + Unpin + Split,
{
    let events = Handshaking::start(|| None);
    let r = match run_handshake(&mut io, identity, config).await {
        Ok(est) => framed_halves(est, config, io, T::split),
        Err(e) => Err(e),
    };
    events.finish(r.as_ref().map(|(_, pk)| pk.node_id()));
    r
}

/// [`handshake_split`] for any transport, through `tokio::io::split` (a lock
/// on every poll).
pub async fn handshake_split_locked<T>(
    mut io: T,
    identity: &Identity,
    config: &Config,
) -> Result<
    (
        FramedHalves<tokio::io::ReadHalf<T>, tokio::io::WriteHalf<T>>,
        PublicKey,
    ),
    Error,
>
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    let events = Handshaking::start(|| None);
    let r = match run_handshake(&mut io, identity, config).await {
        Ok(est) => framed_halves(est, config, io, tokio::io::split),
        Err(e) => Err(e),
    };
    events.finish(r.as_ref().map(|(_, pk)| pk.node_id()));
    r
}

fn framed_halves<T, R, W>(
    est: Established,
    config: &Config,
    io: T,
    split: impl FnOnce(T) -> (R, W),
) -> Result<(FramedHalves<R, W>, PublicKey), Error> {
    let mut codec = SecretCodec::new(est, config)?;
    let (r, w) = split(io);
    let r = codec.prime(r);
    let remote = codec.remote;
    let (enc, dec) = codec.split();
    let capacity = dec.core.read_buffer_size();
    let mut write = FramedWrite::new(w, enc);
    write.set_backpressure_boundary(write.encoder().flush_bytes());
    Ok(((FramedRead::with_capacity(r, dec, capacity), write), remote))
}
