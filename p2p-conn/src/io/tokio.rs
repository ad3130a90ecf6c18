//! tokio adapter: [`handshake`] over any `AsyncRead + AsyncWrite + Unpin`
//! transport, giving a [`SecretConnection`] that is itself `AsyncRead +
//! AsyncWrite`, and owned halves for separate tasks.
//!
//! # Cancellation
//! * [`handshake`]: dropping the future abandons the handshake; the transport
//!   is dropped with it. Nothing half-authenticated is ever returned.
//! * `poll_write` (and so `write`, `write_all`): a message is either wholly
//!   accepted (`Ready(Ok(n))`, its frames sealed and owned by the connection)
//!   or not at all (`Pending` before anything new was sealed). Dropping a
//!   `write` future loses and duplicates nothing. `write_all` may have had some
//!   chunks accepted before it is dropped, as with any `AsyncWrite`.
//! * `poll_flush` / `poll_shutdown`: safe to drop and call again; buffered
//!   sealed bytes are kept.
//! * `poll_read` / `poll_fill_buf`: safe to drop; bytes already read from the
//!   transport stay buffered for the next call.
//!
//! Both the connection and its read half implement `AsyncBufRead`, which hands
//! out plaintext straight from the receive buffer without a copy.
//!
//! # Not provided
//! No timeouts after the handshake (wrap calls in `tokio::time::timeout`), no
//! keepalive, no message framing above the byte stream.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncBufRead, AsyncRead, AsyncWrite, ReadBuf};

use crate::engine::{establish, poll_handshake, FrameReader, FrameWriter, PollIo};
use crate::proto::{Established, Handshake};
use crate::{Config, Error, Identity, PublicKey};

struct TokioIo<'a, 'b, T> {
    io: &'a mut T,
    cx: &'a mut Context<'b>,
}

fn poll_read_into<T: AsyncRead + Unpin>(
    io: &mut T,
    cx: &mut Context<'_>,
    buf: &mut [u8],
) -> Poll<io::Result<usize>> {
    let mut rb = ReadBuf::new(buf);
    match Pin::new(io).poll_read(cx, &mut rb) {
        Poll::Ready(Ok(())) => Poll::Ready(Ok(rb.filled().len())),
        Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
        Poll::Pending => Poll::Pending,
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> PollIo for TokioIo<'_, '_, T> {
    fn poll_read_some(&mut self, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        poll_read_into(self.io, self.cx, buf)
    }
    fn poll_write_some(&mut self, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.io).poll_write(self.cx, buf)
    }
    fn poll_flush_some(&mut self) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.io).poll_flush(self.cx)
    }
}

/// Run the handshake over `io` under `config.handshake_timeout`, then check the
/// peer ID if `config.expected_peer_id` is set.
pub async fn handshake<T>(
    mut io: T,
    identity: &Identity,
    config: &Config,
) -> Result<SecretConnection<T>, Error>
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    let est = run_handshake(&mut io, identity, config).await?;
    let (reader, writer, remote) = establish(est, config)?;
    Ok(SecretConnection {
        io,
        reader,
        writer,
        remote,
    })
}

/// The handshake alone, shared with the codec adapter: drive the state machine
/// over `io` under the timeout and return its keys.
pub(crate) async fn run_handshake<T>(
    io: &mut T,
    identity: &Identity,
    config: &Config,
) -> Result<Established, Error>
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    config.validate()?;
    let mut hs = Handshake::new(identity, config.handshake_params())?;
    let drive =
        std::future::poll_fn(|cx| poll_handshake(&mut hs, &mut TokioIo { io: &mut *io, cx }));
    match tokio::time::timeout(config.handshake_timeout, drive).await {
        Ok(r) => r?,
        Err(_) => return Err(Error::Timeout(config.handshake_timeout)),
    }
    Ok(hs.into_established()?)
}

/// An authenticated, encrypted byte stream over `T`.
pub struct SecretConnection<T> {
    io: T,
    reader: FrameReader,
    writer: FrameWriter,
    remote: PublicKey,
}

impl<T> std::fmt::Debug for SecretConnection<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretConnection")
            .field("peer", &self.remote.node_id())
            .finish_non_exhaustive()
    }
}

impl<T> SecretConnection<T> {
    crate::io::connection_accessors!();
}

impl<T: AsyncRead + AsyncWrite> SecretConnection<T> {
    /// Split into owned read and write halves for separate tasks (through
    /// `tokio::io::split`).
    pub fn into_split(self) -> (ReadHalf<T>, WriteHalf<T>) {
        let (r, w) = tokio::io::split(self.io);
        (
            ReadHalf {
                io: r,
                reader: self.reader,
                remote: self.remote,
            },
            WriteHalf {
                io: w,
                writer: self.writer,
                remote: self.remote,
            },
        )
    }
}

fn poll_read_impl<R: AsyncRead + Unpin>(
    reader: &mut FrameReader,
    io: &mut R,
    cx: &mut Context<'_>,
    buf: &mut ReadBuf<'_>,
) -> Poll<io::Result<()>> {
    let out = buf.initialize_unfilled();
    match reader.poll_read_with(out, |b| poll_read_into(io, cx, b)) {
        Poll::Ready(Ok(n)) => {
            buf.advance(n);
            Poll::Ready(Ok(()))
        }
        Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
        Poll::Pending => Poll::Pending,
    }
}

fn poll_fill_buf_impl<'a, R: AsyncRead + Unpin>(
    reader: &'a mut FrameReader,
    io: &mut R,
    cx: &mut Context<'_>,
) -> Poll<io::Result<&'a [u8]>> {
    match reader.poll_fill_with(|b| poll_read_into(io, cx, b)) {
        Poll::Ready(Ok(_)) => Poll::Ready(Ok(reader.available())),
        Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
        Poll::Pending => Poll::Pending,
    }
}

/// `AsyncRead`, and `AsyncBufRead` handing out opened plaintext straight from
/// the receive buffer (no copy into a caller's buffer), for the whole
/// connection and the read half alike.
macro_rules! impl_async_read {
    ($ty:ident, $bound:path) => {
        impl<T: $bound> AsyncRead for $ty<T> {
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &mut ReadBuf<'_>,
            ) -> Poll<io::Result<()>> {
                let me = self.get_mut();
                poll_read_impl(&mut me.reader, &mut me.io, cx, buf)
            }
        }

        impl<T: $bound> AsyncBufRead for $ty<T> {
            fn poll_fill_buf(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
            ) -> Poll<io::Result<&[u8]>> {
                let me = self.get_mut();
                poll_fill_buf_impl(&mut me.reader, &mut me.io, cx)
            }
            fn consume(self: Pin<&mut Self>, amt: usize) {
                self.get_mut().reader.consume(amt);
            }
        }
    };
}

fn poll_write_impl<W: AsyncWrite + Unpin>(
    writer: &mut FrameWriter,
    io: &mut W,
    cx: &mut Context<'_>,
    data: &[u8],
) -> Poll<io::Result<usize>> {
    writer.poll_write_with(data, |b| Pin::new(&mut *io).poll_write(cx, b))
}

fn poll_write_vectored_impl<W: AsyncWrite + Unpin>(
    writer: &mut FrameWriter,
    io: &mut W,
    cx: &mut Context<'_>,
    bufs: &[IoSlice<'_>],
) -> Poll<io::Result<usize>> {
    writer.poll_write_vectored_with(bufs, |b| Pin::new(&mut *io).poll_write(cx, b))
}

async fn send_impl<W: AsyncWrite + Unpin>(
    writer: &mut FrameWriter,
    io: &mut W,
    bufs: &mut [IoSlice<'_>],
) -> io::Result<()> {
    std::future::poll_fn(|cx| {
        writer.poll_send_with(bufs, |b| Pin::new(&mut *io).poll_write(cx, b))
    })
    .await?;
    std::future::poll_fn(|cx| Pin::new(&mut *io).poll_flush(cx)).await
}

fn poll_flush_impl<W: AsyncWrite + Unpin>(
    writer: &mut FrameWriter,
    io: &mut W,
    cx: &mut Context<'_>,
) -> Poll<io::Result<()>> {
    match writer.poll_flush_with(|b| Pin::new(&mut *io).poll_write(cx, b)) {
        Poll::Ready(Ok(())) => Pin::new(io).poll_flush(cx),
        other => other,
    }
}

fn poll_shutdown_impl<W: AsyncWrite + Unpin>(
    writer: &mut FrameWriter,
    io: &mut W,
    cx: &mut Context<'_>,
) -> Poll<io::Result<()>> {
    match poll_flush_impl(writer, io, cx) {
        Poll::Ready(Ok(())) => Pin::new(io).poll_shutdown(cx),
        other => other,
    }
}

macro_rules! impl_async_write {
    ($ty:ident, $bound:path) => {
        impl<T: $bound> AsyncWrite for $ty<T> {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                data: &[u8],
            ) -> Poll<io::Result<usize>> {
                let me = self.get_mut();
                poll_write_impl(&mut me.writer, &mut me.io, cx, data)
            }
            fn poll_write_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                let me = self.get_mut();
                poll_write_vectored_impl(&mut me.writer, &mut me.io, cx, bufs)
            }
            fn is_write_vectored(&self) -> bool {
                true
            }
            fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                let me = self.get_mut();
                poll_flush_impl(&mut me.writer, &mut me.io, cx)
            }
            fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                let me = self.get_mut();
                poll_shutdown_impl(&mut me.writer, &mut me.io, cx)
            }
        }

        impl<T: $bound> $ty<T> {
            /// Send `msg` as one logical message and flush: one transport write
            /// per `flush_size` sealed bytes, and the call returns once every
            /// byte is handed to the transport.
            ///
            /// Cancellation: like `write_all` + `flush`; if the future is
            /// dropped, the pieces already accepted (whole `flush_size` chunks)
            /// stay queued and go out with the next write or flush.
            pub async fn send(&mut self, msg: &[u8]) -> Result<(), Error> {
                self.send_vectored(&mut [IoSlice::new(msg)]).await
            }

            /// Send the concatenation of `bufs` as one logical message (frames
            /// are filled across slice boundaries) and flush. `bufs` is advanced
            /// past what was accepted. Same cancellation rule as [`Self::send`].
            pub async fn send_vectored(&mut self, bufs: &mut [IoSlice<'_>]) -> Result<(), Error> {
                send_impl(&mut self.writer, &mut self.io, bufs)
                    .await
                    .map_err(Error::from_io)
            }
        }
    };
}

/// Bound alias for the whole-connection impls.
pub trait Duplex: AsyncRead + AsyncWrite + Unpin {}
impl<T: AsyncRead + AsyncWrite + Unpin> Duplex for T {}

impl_async_write!(SecretConnection, Duplex);
impl_async_read!(SecretConnection, Duplex);

/// The receiving half of a split [`SecretConnection`].
pub struct ReadHalf<T> {
    io: tokio::io::ReadHalf<T>,
    reader: FrameReader,
    remote: PublicKey,
}

impl<T> ReadHalf<T> {
    /// The peer's authenticated public key.
    pub fn remote_public_key(&self) -> PublicKey {
        self.remote
    }
}

/// The sending half of a split [`SecretConnection`].
pub struct WriteHalf<T> {
    io: tokio::io::WriteHalf<T>,
    writer: FrameWriter,
    remote: PublicKey,
}

impl<T> WriteHalf<T> {
    /// The peer's authenticated public key.
    pub fn remote_public_key(&self) -> PublicKey {
        self.remote
    }
}

/// Bound alias for the write half impls.
pub trait Sink: AsyncWrite {}
impl<T: AsyncWrite> Sink for T {}

impl_async_write!(WriteHalf, Sink);

/// Bound alias for the read half impls.
pub trait Source: AsyncRead {}
impl<T: AsyncRead> Source for T {}

impl_async_read!(ReadHalf, Source);
