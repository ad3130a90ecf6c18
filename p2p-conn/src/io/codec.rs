//! tokio-util codec adapter: a [`SecretEncoder`] / [`SecretDecoder`] pair for
//! `FramedWrite` / `FramedRead` (or [`SecretCodec`] for `Framed`), with no
//! `BufWriter` in between.
//!
//! * The encoder seals each item straight into `FramedWrite`'s buffer: one item
//!   is one logical message, split into frames with no copy of sealed bytes.
//!   [`handshake`] sets the backpressure boundary to `flush_size`, so
//!   `FramedWrite` writes the buffer (one transport write) once it holds a
//!   flush's worth, and on every flush.
//! * The decoder opens each frame in place in `FramedRead`'s buffer and yields
//!   its data as a [`Bytes`] slice of that buffer: no copy. One read fills the
//!   buffer with as many frames as the transport has (the read capacity is
//!   `read_buffer_size`).
//! * Items are frame payloads, not your messages: message boundaries are not on
//!   the wire. A message of more than one frame arrives as several items; an
//!   item never mixes two of the sender's writes only because every write
//!   starts a new frame, which other implementations need not do.
//!   Zero-length frames yield nothing.
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
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_util::codec::{Decoder, Encoder, Framed, FramedRead, FramedWrite};

use crate::engine::check_peer;
use crate::proto::{Established, Opener, ProtocolError, Sealer};
use crate::{Config, Error, Identity, PublicKey};

fn protocol_io(e: ProtocolError) -> io::Error {
    Error::Protocol(e).into_io()
}

/// Seals items into frames. Encodes anything that is `AsRef<[u8]>`.
#[derive(Debug)]
pub struct SecretEncoder {
    sealer: Sealer,
}

impl<T: AsRef<[u8]>> Encoder<T> for SecretEncoder {
    type Error = io::Error;

    fn encode(&mut self, item: T, dst: &mut BytesMut) -> io::Result<()> {
        self.sealer
            .seal_append(item.as_ref(), dst)
            .map(|_| ())
            .map_err(protocol_io)
    }
}

/// Opens frames; yields each frame's data as a zero-copy [`Bytes`].
///
/// The first `initial` bytes of its input are plaintext that arrived with the
/// handshake (see [`WithInitial`]) and are passed through unopened.
#[derive(Debug)]
pub struct SecretDecoder {
    opener: Opener,
    initial: usize,
    read_capacity: usize,
}

impl Decoder for SecretDecoder {
    type Item = Bytes;
    type Error = io::Error;

    fn decode(&mut self, src: &mut BytesMut) -> io::Result<Option<Bytes>> {
        if self.initial > 0 {
            if src.is_empty() {
                return Ok(None);
            }
            let n = self.initial.min(src.len());
            self.initial -= n;
            return Ok(Some(src.split_to(n).freeze()));
        }
        let sealed = self.opener.sealed_frame_len();
        loop {
            if src.len() < sealed {
                // Make room for a full read (many frames), not just the rest of
                // this one.
                if src.capacity() - src.len() < self.read_capacity / 2 {
                    src.reserve(self.read_capacity);
                }
                return Ok(None);
            }
            let mut frame = src.split_to(sealed);
            let range = self.opener.open_in_place(&mut frame).map_err(protocol_io)?;
            if !range.is_empty() {
                return Ok(Some(frame.freeze().slice(range)));
            }
        }
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> io::Result<Option<Bytes>> {
        match self.decode(src)? {
            Some(item) => Ok(Some(item)),
            None if src.is_empty() => Ok(None),
            None => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "peer closed the connection inside a frame ({} of {} sealed bytes received)",
                    src.len(),
                    self.opener.sealed_frame_len()
                ),
            )),
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
    /// Build the codec from a finished handshake (see [`crate::proto::Handshake`]).
    /// Checks `config.expected_peer_id`.
    ///
    /// Also returns the application bytes that arrived with the handshake
    /// (usually none). They must reach the decoder first, ahead of the
    /// transport's bytes: wrap the transport in [`WithInitial`] with them.
    pub fn new(est: Established, config: &Config) -> Result<(Self, Bytes), Error> {
        check_peer(&est, config)?;
        let initial = Bytes::from(est.initial_plaintext);
        let codec = SecretCodec {
            encoder: SecretEncoder { sealer: est.sealer },
            decoder: SecretDecoder {
                opener: est.opener,
                initial: initial.len(),
                read_capacity: config.read_buffer_size.max(1),
            },
            remote: est.remote_public_key,
        };
        Ok((codec, initial))
    }

    /// The peer's authenticated public key.
    pub fn remote_public_key(&self) -> PublicKey {
        self.remote
    }

    /// Separate encoder and decoder, for `FramedWrite` and `FramedRead`.
    pub fn split(self) -> (SecretEncoder, SecretDecoder) {
        (self.encoder, self.decoder)
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

/// A transport whose reads first return plaintext the handshake already
/// received (application bytes that followed the peer's authentication
/// message), then the transport's own bytes. Writes pass straight through.
///
/// `FramedRead` only decodes after a read, so these bytes have to come through
/// the transport for the decoder to hand them out without waiting for the
/// peer's next frame; [`SecretDecoder`] passes them through unopened.
#[derive(Debug)]
pub struct WithInitial<T> {
    initial: Bytes,
    inner: T,
}

impl<T> WithInitial<T> {
    /// Put `initial` in front of `inner`'s bytes.
    pub fn new(inner: T, initial: Bytes) -> Self {
        WithInitial { initial, inner }
    }
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
        if !me.initial.is_empty() {
            let n = me.initial.len().min(buf.remaining());
            buf.put_slice(&me.initial.split_to(n));
            return Poll::Ready(Ok(()));
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
/// `Framed` transport with the read capacity and backpressure boundary set
/// from `config`.
pub async fn handshake<T>(
    mut io: T,
    identity: &Identity,
    config: &Config,
) -> Result<Framed<WithInitial<T>, SecretCodec>, Error>
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    let est = crate::io::tokio::run_handshake(&mut io, identity, config).await?;
    let (codec, initial) = SecretCodec::new(est, config)?;
    let mut framed = Framed::with_capacity(
        WithInitial::new(io, initial),
        codec,
        config.read_buffer_size,
    );
    framed.set_backpressure_boundary(config.flush_size);
    Ok(framed)
}

/// Read and write halves for separate tasks.
pub type FramedHalves<T> = (
    FramedRead<WithInitial<tokio::io::ReadHalf<T>>, SecretDecoder>,
    FramedWrite<tokio::io::WriteHalf<T>, SecretEncoder>,
);

/// Run the handshake and return `FramedRead` / `FramedWrite` halves (through
/// `tokio::io::split`), configured from `config`.
pub async fn handshake_split<T>(
    mut io: T,
    identity: &Identity,
    config: &Config,
) -> Result<(FramedHalves<T>, PublicKey), Error>
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    let est = crate::io::tokio::run_handshake(&mut io, identity, config).await?;
    let (codec, initial) = SecretCodec::new(est, config)?;
    let remote = codec.remote_public_key();
    let (enc, dec) = codec.split();
    let (r, w) = tokio::io::split(io);
    let read =
        FramedRead::with_capacity(WithInitial::new(r, initial), dec, config.read_buffer_size);
    let mut write = FramedWrite::new(w, enc);
    write.set_backpressure_boundary(config.flush_size);
    Ok(((read, write), remote))
}
