//! std::io adapter: [`handshake`] over any `Read + Write`, [`handshake_tcp`]
//! over a `TcpStream` with the handshake timeout enforced, and split halves
//! for `TcpStream`.
//!
//! `write(buf)` has the same meaning as the tokio adapter's `poll_write`: one
//! call is one message (up to `flush_size` sealed bytes), sealed into one
//! buffer and handed to the transport in one `write`. On a blocking transport
//! it returns once the transport took every sealed byte. On a non-blocking one
//! a `WouldBlock` after the message was accepted leaves the sealed bytes
//! buffered and reports the message as written; the next `write` or `flush`
//! sends them first. `WouldBlock` is returned only when nothing new was accepted.
//!
//! # Halves
//! A `SecretConnection<TcpStream>` splits into a [`ReadHalf`] and a
//! [`WriteHalf`] for two threads ([`SecretConnection::split`]; the socket is
//! cloned), with every accessor of the connection;
//! [`ReadHalf::reunite`] puts them back together.
//!
//! # Not provided
//! [`handshake`] over a generic stream has no timeout (a generic `Read + Write`
//! has no way to set one); use [`handshake_tcp`] or set timeouts on the stream.

use std::io::{self, BufRead, IoSlice, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::task::Poll;
use std::time::{Duration, Instant};

use super::{ReadSide, Reads, ReuniteError, SecretStream, Whole, WriteSide, Writes};
use crate::engine::{poll_handshake, ready, unpoll, HasReader, HasWriter, StdIo};
use crate::events::Handshaking;
use crate::proto::Handshake;
use crate::{Config, Error, Identity};

/// Marker: the stream implements std's `Read` / `Write`.
#[derive(Debug)]
pub enum Blocking {}

/// An authenticated, encrypted byte stream over a blocking transport `T`.
pub type SecretConnection<T> = SecretStream<T, Whole, Blocking>;
/// The receiving half of a split [`SecretConnection`], over transport half
/// `R` (a TCP connection's by default).
pub type ReadHalf<R = TcpStream> = SecretStream<R, ReadSide, Blocking>;
/// The sending half of a split [`SecretConnection`], over transport half
/// `W` (a TCP connection's by default).
pub type WriteHalf<W = TcpStream> = SecretStream<W, WriteSide, Blocking>;

/// A blocking transport that splits into halves usable from two threads,
/// which [`SecretConnection::split`] wraps (std's `TcpStream`: the socket is
/// cloned).
pub trait Split: Sized {
    /// The read half.
    type Read: Read + Rejoin<Write = Self::Write, Whole = Self>;
    /// The write half.
    type Write: Write;
    /// Split the transport.
    fn split(self) -> io::Result<(Self::Read, Self::Write)>;
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

impl Split for TcpStream {
    type Read = TcpStream;
    type Write = TcpStream;
    fn split(self) -> io::Result<(TcpStream, TcpStream)> {
        Ok((self.try_clone()?, self))
    }
}

impl Rejoin for TcpStream {
    type Write = TcpStream;
    type Whole = TcpStream;
    /// The halves are one connection when both sockets have the same local
    /// and peer addresses.
    fn rejoin(self, write: TcpStream) -> Result<TcpStream, (TcpStream, TcpStream)> {
        let ends = |s: &TcpStream| (s.local_addr().ok(), s.peer_addr().ok());
        match (ends(&self), ends(&write)) {
            ((Some(a), Some(b)), (Some(c), Some(d))) if a == c && b == d => Ok(write),
            _ => Err((self, write)),
        }
    }
}

fn run_handshake<T: Read + Write>(
    io: &mut T,
    identity: &Identity,
    config: &Config,
) -> Result<Handshake, Error> {
    let mut hs = Handshake::new(identity, config.handshake_params()?);
    match poll_handshake(&mut hs, &mut StdIo(io)) {
        Poll::Ready(r) => r?,
        Poll::Pending => return Err(Error::Io(io::ErrorKind::WouldBlock.into())),
    }
    Ok(hs)
}

/// Run the handshake over a blocking `Read + Write` (no timeout: see the
/// module docs), then check the peer ID if configured.
pub fn handshake<T: Read + Write>(
    mut io: T,
    identity: &Identity,
    config: &Config,
) -> Result<SecretConnection<T>, Error> {
    let events = Handshaking::start(|| None);
    let r = run_handshake(&mut io, identity, config)
        .and_then(|hs| SecretConnection::established(io, hs.into_established()?, config));
    events.finish(r.as_ref().map(|c| c.remote_node_id()));
    r
}

/// A `TcpStream` whose every read and write is bounded by one deadline (none
/// when the timeout is too large to represent).
struct Deadline<'a> {
    stream: &'a TcpStream,
    deadline: Option<Instant>,
}

impl Deadline<'_> {
    fn arm(&mut self) -> io::Result<()> {
        let Some(deadline) = self.deadline else {
            return Ok(());
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        self.stream.set_read_timeout(Some(left))?;
        self.stream.set_write_timeout(Some(left))
    }
}

impl Read for Deadline<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.arm()?;
        (&mut &*self.stream).read(buf)
    }
}

impl Write for Deadline<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.arm()?;
        (&mut &*self.stream).write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The socket timeouts a caller had set, put back when this guard drops
/// (on success and on every error path alike).
struct RestoreTimeouts<'a> {
    stream: &'a TcpStream,
    read: Option<Duration>,
    write: Option<Duration>,
}

impl Drop for RestoreTimeouts<'_> {
    fn drop(&mut self) {
        // Best effort: a socket that cannot take its old timeouts back is
        // broken, and the next call on it reports that.
        let _ = self.stream.set_read_timeout(self.read);
        let _ = self.stream.set_write_timeout(self.write);
    }
}

/// The tokio adapter's `poll_decode` over a blocking `BufRead`: read until
/// `decoder` ([`crate::delimited::Feed`]) has a whole message, consuming
/// only its bytes (an interrupted read is retried).
pub fn decode<S, D>(stream: &mut S, decoder: &mut D) -> Result<D::Item, D::Error>
where
    S: BufRead + ?Sized,
    D: crate::delimited::Feed,
{
    loop {
        let buf = match stream.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        };
        if buf.is_empty() {
            return Err(decoder.end_of_stream());
        }
        let (used, done) = decoder.feed(buf)?;
        stream.consume(used);
        if let Some(item) = done {
            return Ok(item);
        }
    }
}

/// Run the handshake over a `TcpStream`, bounded as a whole by
/// `config.handshake_timeout` ([`Error::Timeout`] when it fires). The
/// stream's own read and write timeouts are restored afterwards, whatever the
/// outcome.
pub fn handshake_tcp(
    stream: TcpStream,
    identity: &Identity,
    config: &Config,
) -> Result<SecretConnection<TcpStream>, Error> {
    let events = Handshaking::start(|| stream.peer_addr().ok());
    let r = {
        let _restore = RestoreTimeouts {
            read: stream.read_timeout()?,
            write: stream.write_timeout()?,
            stream: &stream,
        };
        let mut d = Deadline {
            stream: &stream,
            deadline: Instant::now().checked_add(config.handshake_timeout),
        };
        run_handshake(&mut d, identity, config)
    };
    let hs = r.map_err(|e| match e {
        Error::Io(io)
            if matches!(
                io.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) =>
        {
            Error::Timeout(config.handshake_timeout)
        }
        other => other,
    });
    let r = hs.and_then(|hs| SecretConnection::established(stream, hs.into_established()?, config));
    events.finish(r.as_ref().map(|c| c.remote_node_id()));
    r
}

fn read_fn<R: Read>(io: &mut R) -> impl FnMut(&mut [u8]) -> Poll<io::Result<usize>> + '_ {
    move |b| ready(io.read(b))
}

fn write_fn<W: Write>(io: &mut W) -> impl FnMut(&[u8]) -> Poll<io::Result<usize>> + '_ {
    move |b| ready(io.write(b))
}

impl<T: Read, S: Reads> Read for SecretStream<T, S, Blocking> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        unpoll(
            self.engines
                .reader()
                .poll_read_with(buf, read_fn(&mut self.io)),
        )
    }
}

/// Hands out plaintext straight from the receive buffer (no copy).
impl<T: Read, S: Reads> BufRead for SecretStream<T, S, Blocking> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        let reader = self.engines.reader();
        unpoll(reader.poll_fill_with(read_fn(&mut self.io)))?;
        Ok(reader.available())
    }
    fn consume(&mut self, amt: usize) {
        self.engines.reader().consume(amt);
    }
}

/// One call is one message, up to `flush_size` sealed bytes.
impl<T: Write, S: Writes> Write for SecretStream<T, S, Blocking> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        unpoll(
            self.engines
                .writer()
                .poll_write_with(data, write_fn(&mut self.io)),
        )
    }
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        unpoll(
            self.engines
                .writer()
                .poll_write_vectored_with(bufs, write_fn(&mut self.io)),
        )
    }
    fn flush(&mut self) -> io::Result<()> {
        unpoll(
            self.engines
                .writer()
                .poll_flush_with(write_fn(&mut self.io)),
        )?;
        self.io.flush()
    }
}

impl<T: Write, S: Writes> SecretStream<T, S, Blocking> {
    /// Send `msg` as one logical message and flush: one transport write per
    /// `flush_size` sealed bytes.
    pub fn send(&mut self, msg: &[u8]) -> Result<(), Error> {
        self.send_vectored(&mut [IoSlice::new(msg)])
    }

    /// Send the concatenation of `bufs` as one logical message (frames are
    /// filled across slice boundaries) and flush. `bufs` is advanced past
    /// what was accepted.
    pub fn send_vectored(&mut self, bufs: &mut [IoSlice<'_>]) -> Result<(), Error> {
        unpoll(
            self.engines
                .writer()
                .poll_send_with(bufs, write_fn(&mut self.io)),
        )
        .map_err(Error::from_io)?;
        self.io.flush().map_err(Error::Io)
    }
}

impl<S: Writes> SecretStream<TcpStream, S, Blocking> {
    /// Flush, then half-close the TCP write side (the peer reads end of
    /// stream; reading from the peer goes on).
    pub fn shutdown(&mut self) -> io::Result<()> {
        self.flush()?;
        self.io.shutdown(Shutdown::Write)
    }
}

/// The halves [`SecretConnection::split`] makes of a connection over `T`.
pub type SplitHalves<T> = (ReadHalf<<T as Split>::Read>, WriteHalf<<T as Split>::Write>);

impl<T: Split> SecretConnection<T> {
    /// Split into halves usable from two threads (for a `TcpStream`, the
    /// socket is cloned).
    pub fn split(self) -> io::Result<SplitHalves<T>> {
        self.try_split_with(Split::split)
    }
}

impl<R: Rejoin> ReadHalf<R> {
    /// Put this half and `write` back together into the connection they were
    /// split from. Halves that are not one transport ([`Rejoin::rejoin`]:
    /// for TCP, sockets with different local or peer addresses) are handed
    /// back.
    // The halves go back whole in the error; reuniting is rare.
    #[allow(clippy::result_large_err, clippy::type_complexity)]
    pub fn reunite(
        self,
        write: WriteHalf<R::Write>,
    ) -> Result<SecretConnection<R::Whole>, ReuniteError<Self, WriteHalf<R::Write>>> {
        SecretConnection::reunite_with(self, write, Rejoin::rejoin)
    }
}
