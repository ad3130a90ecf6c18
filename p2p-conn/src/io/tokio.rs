//! tokio adapter: [`handshake`] over any `AsyncRead + AsyncWrite + Unpin`
//! transport, giving a [`SecretConnection`] that is itself `AsyncRead +
//! AsyncWrite + AsyncBufRead`, and owned halves for separate tasks.
//!
//! # Halves
//! * [`SecretConnection::into_split`]: for transports with owned halves of
//!   their own ([`Split`]: tokio's `TcpStream` and `UnixStream`), the halves
//!   wrap those: no lock, no shared state.
//! * [`SecretConnection::into_split_locked`]: any transport, through
//!   `tokio::io::split` (a lock taken on every poll).
//! * Both halves have every accessor of the connection
//!   (`remote_node_id`, …), and [`ReadHalf::reunite`] puts either kind back
//!   together.
//!
//! # Cancellation
//! * [`handshake`]: dropping the future abandons the handshake; the transport
//!   is dropped with it. Nothing half-authenticated is ever returned.
//! * `poll_write` (and so `write`, `write_all`): a message is either wholly
//!   accepted (`Ready(Ok(n))`, its frames sealed and owned by the connection)
//!   or not at all (`Pending` before anything new was sealed). Dropping a
//!   `write` future loses and duplicates nothing. `write_all` may have had some
//!   chunks accepted before it is dropped, as with any `AsyncWrite`.
//! * `send` / `send_vectored`: like `write_all` + `flush`; if the future is
//!   dropped, the pieces already accepted (whole `flush_size` chunks) stay
//!   queued and go out with the next write or flush.
//! * `poll_flush` / `poll_shutdown`: safe to drop and call again; buffered
//!   sealed bytes are kept.
//! * `poll_read` / `poll_fill_buf`: safe to drop; bytes already read from the
//!   transport stay buffered for the next call.
//!
//! # Not provided
//! No timeouts after the handshake (wrap calls in `tokio::time::timeout`), no
//! keepalive, no message framing above the byte stream. The handshake timeout
//! needs a tokio runtime with the time driver enabled.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncBufRead, AsyncRead, AsyncWrite, ReadBuf};

use super::{ReadSide, Reads, ReuniteError, SecretStream, Whole, WriteSide, Writes};
use crate::engine::{poll_handshake, HasReader, HasWriter, PollIo};
use crate::events::Handshaking;
use crate::proto::{Established, Handshake};
use crate::{Config, Error, Identity};

/// Marker: the stream implements tokio's `AsyncRead` / `AsyncWrite`.
#[derive(Debug)]
pub enum Tokio {}

/// An authenticated, encrypted byte stream over `T`.
pub type SecretConnection<T> = SecretStream<T, Whole, Tokio>;
/// The receiving half of a [`SecretConnection`], over transport half `R`.
pub type ReadHalf<R> = SecretStream<R, ReadSide, Tokio>;
/// The sending half of a [`SecretConnection`], over transport half `W`.
pub type WriteHalf<W> = SecretStream<W, WriteSide, Tokio>;

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
    Pin::new(io)
        .poll_read(cx, &mut rb)
        .map_ok(|()| rb.filled().len())
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

/// Drive a delimited-message decoder ([`crate::delimited::Feed`]) from
/// what `stream` has buffered until a message is complete, consuming only
/// its bytes: the tokio loop of every protobuf layer above the connection
/// (NodeInfo, privval, MConnection). Cancel-safe: a partial message is in
/// `decoder`, and the stream has consumed exactly what it holds.
pub fn poll_decode<S, D>(
    mut stream: Pin<&mut S>,
    cx: &mut Context<'_>,
    decoder: &mut D,
) -> Poll<Result<D::Item, D::Error>>
where
    S: AsyncBufRead + ?Sized,
    D: crate::delimited::Feed,
{
    loop {
        let buf = match stream.as_mut().poll_fill_buf(cx) {
            Poll::Ready(Ok(buf)) => buf,
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e.into())),
            Poll::Pending => return Poll::Pending,
        };
        if buf.is_empty() {
            return Poll::Ready(Err(decoder.end_of_stream()));
        }
        let (used, done) = decoder.feed(buf)?;
        stream.as_mut().consume(used);
        if let Some(item) = done {
            return Poll::Ready(Ok(item));
        }
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
    let hs = Handshaking::start(|| None);
    let r = async {
        let est = run_handshake(&mut io, identity, config).await?;
        SecretConnection::established(io, est, config)
    }
    .await;
    hs.finish(r.as_ref().map(|c| c.remote_node_id()));
    let mut conn = r?;
    // tokio reads return `Pending` instead of blocking.
    conn.engines.reader.set_nonblocking(true);
    Ok(conn)
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
    let mut hs = Handshake::new(identity, config.handshake_params()?);
    let drive =
        std::future::poll_fn(|cx| poll_handshake(&mut hs, &mut TokioIo { io: &mut *io, cx }));
    match tokio::time::timeout(config.handshake_timeout, drive).await {
        Ok(r) => r?,
        Err(_) => return Err(Error::Timeout(config.handshake_timeout)),
    }
    Ok(hs.into_established()?)
}

/// A transport with owned read and write halves of its own, which
/// [`SecretConnection::into_split`] wraps without a lock.
pub trait Split: Sized {
    /// The read half.
    type Read: AsyncRead + Unpin + Rejoin<Write = Self::Write, Whole = Self>;
    /// The write half.
    type Write: AsyncWrite + Unpin;
    /// Split the transport.
    fn split(self) -> (Self::Read, Self::Write);
}

/// A transport read half that can be put back together with its write half
/// ([`ReadHalf::reunite`]).
pub trait Rejoin: Sized {
    /// The matching write half.
    type Write;
    /// The whole transport.
    type Whole;
    /// Put the halves back together; hands them back if they are not from the
    /// same transport.
    fn rejoin(self, write: Self::Write) -> Result<Self::Whole, (Self, Self::Write)>;
}

impl Split for tokio::net::TcpStream {
    type Read = tokio::net::tcp::OwnedReadHalf;
    type Write = tokio::net::tcp::OwnedWriteHalf;
    fn split(self) -> (Self::Read, Self::Write) {
        self.into_split()
    }
}

impl Rejoin for tokio::net::tcp::OwnedReadHalf {
    type Write = tokio::net::tcp::OwnedWriteHalf;
    type Whole = tokio::net::TcpStream;
    fn rejoin(self, write: Self::Write) -> Result<Self::Whole, (Self, Self::Write)> {
        self.reunite(write).map_err(|e| (e.0, e.1))
    }
}

#[cfg(unix)]
impl Split for tokio::net::UnixStream {
    type Read = tokio::net::unix::OwnedReadHalf;
    type Write = tokio::net::unix::OwnedWriteHalf;
    fn split(self) -> (Self::Read, Self::Write) {
        self.into_split()
    }
}

#[cfg(unix)]
impl Rejoin for tokio::net::unix::OwnedReadHalf {
    type Write = tokio::net::unix::OwnedWriteHalf;
    type Whole = tokio::net::UnixStream;
    fn rejoin(self, write: Self::Write) -> Result<Self::Whole, (Self, Self::Write)> {
        self.reunite(write).map_err(|e| (e.0, e.1))
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> Rejoin for tokio::io::ReadHalf<T> {
    type Write = tokio::io::WriteHalf<T>;
    type Whole = T;
    fn rejoin(self, write: Self::Write) -> Result<T, (Self, Self::Write)> {
        if self.is_pair_of(&write) {
            Ok(self.unsplit(write))
        } else {
            Err((self, write))
        }
    }
}

/// Halves of a connection over `T` split with
/// [`SecretConnection::into_split_locked`].
pub type LockedHalves<T> = (
    ReadHalf<tokio::io::ReadHalf<T>>,
    WriteHalf<tokio::io::WriteHalf<T>>,
);

impl<T: Split> SecretConnection<T> {
    /// Split into owned halves for separate tasks, over the transport's own
    /// halves (no lock). [`ReadHalf::reunite`] puts them back together.
    pub fn into_split(self) -> (ReadHalf<T::Read>, WriteHalf<T::Write>) {
        self.split_with(T::split)
    }
}

impl<T: AsyncRead + AsyncWrite> SecretConnection<T> {
    /// Split into owned halves for any transport, through `tokio::io::split`
    /// (which takes a lock on every poll; prefer [`Self::into_split`] where
    /// the transport implements [`Split`]). [`ReadHalf::reunite`] puts them
    /// back together.
    pub fn into_split_locked(self) -> LockedHalves<T> {
        self.split_with(tokio::io::split)
    }
}

impl<R: Rejoin> ReadHalf<R> {
    /// Put this half and `write` back together into the connection they were
    /// split from. Halves of different connections are handed back.
    // The halves go back whole in the error; reuniting is rare.
    #[allow(clippy::result_large_err, clippy::type_complexity)]
    pub fn reunite(
        self,
        write: WriteHalf<R::Write>,
    ) -> Result<SecretConnection<R::Whole>, ReuniteError<Self, WriteHalf<R::Write>>> {
        SecretConnection::reunite_with(self, write, R::rejoin)
    }
}

impl<T: AsyncRead + Unpin, S: Reads> AsyncRead for SecretStream<T, S, Tokio> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        let io = &mut me.io;
        let out = buf.initialize_unfilled();
        let n = std::task::ready!(me
            .engines
            .reader()
            .poll_read_with(out, |b| poll_read_into(io, cx, b)))?;
        buf.advance(n);
        Poll::Ready(Ok(()))
    }
}

/// Hands out opened plaintext straight from the receive buffer, with no copy
/// into a caller's buffer.
impl<T: AsyncRead + Unpin, S: Reads> AsyncBufRead for SecretStream<T, S, Tokio> {
    fn poll_fill_buf(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<&[u8]>> {
        let me = self.get_mut();
        let io = &mut me.io;
        let reader = me.engines.reader();
        std::task::ready!(reader.poll_fill_with(|b| poll_read_into(io, cx, b)))?;
        Poll::Ready(Ok(reader.available()))
    }
    fn consume(self: Pin<&mut Self>, amt: usize) {
        self.get_mut().engines.reader().consume(amt);
    }
}

/// The transport's `poll_write` as the engine's write closure.
pub(super) fn writer_io<'a, 'b, W: AsyncWrite + Unpin>(
    io: &'a mut W,
    cx: &'a mut Context<'b>,
) -> impl FnMut(&[u8]) -> Poll<io::Result<usize>> + use<'a, 'b, W> {
    move |b| Pin::new(&mut *io).poll_write(cx, b)
}

impl<T: AsyncWrite + Unpin, S: Writes> AsyncWrite for SecretStream<T, S, Tokio> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        me.engines
            .writer()
            .poll_write_with(data, writer_io(&mut me.io, cx))
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        me.engines
            .writer()
            .poll_write_vectored_with(bufs, writer_io(&mut me.io, cx))
    }
    fn is_write_vectored(&self) -> bool {
        true
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        std::task::ready!(me
            .engines
            .writer()
            .poll_flush_with(writer_io(&mut me.io, cx)))?;
        Pin::new(&mut me.io).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        std::task::ready!(self.as_mut().poll_flush(cx))?;
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

impl<T: AsyncWrite + Unpin, S: Writes> SecretStream<T, S, Tokio> {
    /// Send `msg` as one logical message and flush: one transport write per
    /// `flush_size` sealed bytes, and the call returns once every byte is
    /// handed to the transport.
    ///
    /// Cancellation: like `write_all` + `flush`; if the future is dropped,
    /// the pieces already accepted (whole `flush_size` chunks) stay queued and
    /// go out with the next write or flush.
    pub async fn send(&mut self, msg: &[u8]) -> Result<(), Error> {
        self.send_vectored(&mut [IoSlice::new(msg)]).await
    }

    /// Send the concatenation of `bufs` as one logical message (frames are
    /// filled across slice boundaries) and flush. `bufs` is advanced past what
    /// was accepted. Same cancellation rule as [`Self::send`].
    pub async fn send_vectored(&mut self, bufs: &mut [IoSlice<'_>]) -> Result<(), Error> {
        let (writer, io) = (self.engines.writer(), &mut self.io);
        std::future::poll_fn(|cx| writer.poll_send_with(bufs, writer_io(io, cx)))
            .await
            .map_err(Error::from_io)?;
        std::future::poll_fn(|cx| Pin::new(&mut *io).poll_flush(cx))
            .await
            .map_err(Error::Io)
    }
}
