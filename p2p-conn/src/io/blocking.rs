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
//! # Not provided
//! [`handshake`] over a generic stream has no timeout (a generic `Read + Write`
//! has no way to set one); use [`handshake_tcp`] or set timeouts on the stream.

use std::io::{self, BufRead, IoSlice, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::task::Poll;
use std::time::Instant;

use crate::engine::{establish, poll_handshake, FrameReader, FrameWriter, PollIo};
use crate::proto::Handshake;
use crate::{Config, Error, Identity, PublicKey};

fn ready<T>(r: io::Result<T>) -> Poll<io::Result<T>> {
    match r {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Poll::Pending,
        other => Poll::Ready(other),
    }
}

fn unpoll<T>(p: Poll<io::Result<T>>) -> io::Result<T> {
    match p {
        Poll::Ready(r) => r,
        Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
    }
}

struct StdIo<'a, T>(&'a mut T);

impl<T: Read + Write> PollIo for StdIo<'_, T> {
    fn poll_read_some(&mut self, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        ready(self.0.read(buf))
    }
    fn poll_write_some(&mut self, buf: &[u8]) -> Poll<io::Result<usize>> {
        ready(self.0.write(buf))
    }
    fn poll_flush_some(&mut self) -> Poll<io::Result<()>> {
        ready(self.0.flush())
    }
}

fn run_handshake<T: Read + Write>(
    io: &mut T,
    identity: &Identity,
    config: &Config,
) -> Result<Handshake, Error> {
    config.validate()?;
    let mut hs = Handshake::new(identity, config.handshake_params())?;
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
    let hs = run_handshake(&mut io, identity, config)?;
    SecretConnection::from_handshake(io, hs, config)
}

/// A `TcpStream` whose every read and write is bounded by one deadline (none
/// when the timeout is too large to represent).
struct Deadline<'a> {
    stream: &'a mut TcpStream,
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
        self.stream.read(buf)
    }
}

impl Write for Deadline<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.arm()?;
        self.stream.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.stream.flush()
    }
}

/// Run the handshake over a `TcpStream`, bounded as a whole by
/// `config.handshake_timeout` ([`Error::Timeout`] when it fires). The stream's
/// timeouts are cleared afterwards.
pub fn handshake_tcp(
    mut stream: TcpStream,
    identity: &Identity,
    config: &Config,
) -> Result<SecretConnection<TcpStream>, Error> {
    let mut d = Deadline {
        stream: &mut stream,
        deadline: Instant::now().checked_add(config.handshake_timeout),
    };
    let r = run_handshake(&mut d, identity, config);
    stream.set_read_timeout(None)?;
    stream.set_write_timeout(None)?;
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
    })?;
    SecretConnection::from_handshake(stream, hs, config)
}

/// An authenticated, encrypted byte stream over a blocking transport `T`.
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
    fn from_handshake(io: T, hs: Handshake, config: &Config) -> Result<Self, Error> {
        let (reader, writer, remote) = establish(hs.into_established()?, config)?;
        Ok(SecretConnection {
            io,
            reader,
            writer,
            remote,
        })
    }

    crate::io::connection_accessors!();
}

fn read_impl<R: Read>(reader: &mut FrameReader, io: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    unpoll(reader.poll_read_with(buf, |b| ready(io.read(b))))
}

fn fill_buf_impl<'a, R: Read>(reader: &'a mut FrameReader, io: &mut R) -> io::Result<&'a [u8]> {
    unpoll(reader.poll_fill_with(|b| ready(io.read(b))))?;
    Ok(reader.available())
}

fn write_impl<W: Write>(writer: &mut FrameWriter, io: &mut W, data: &[u8]) -> io::Result<usize> {
    unpoll(writer.poll_write_with(data, |b| ready(io.write(b))))
}

fn write_vectored_impl<W: Write>(
    writer: &mut FrameWriter,
    io: &mut W,
    bufs: &[IoSlice<'_>],
) -> io::Result<usize> {
    unpoll(writer.poll_write_vectored_with(bufs, |b| ready(io.write(b))))
}

fn send_impl<W: Write>(
    writer: &mut FrameWriter,
    io: &mut W,
    bufs: &mut [IoSlice<'_>],
) -> Result<(), Error> {
    unpoll(writer.poll_send_with(bufs, |b| ready(io.write(b)))).map_err(Error::from_io)?;
    io.flush().map_err(Error::Io)
}

fn flush_impl<W: Write>(writer: &mut FrameWriter, io: &mut W) -> io::Result<()> {
    unpoll(writer.poll_flush_with(|b| ready(io.write(b))))?;
    io.flush()
}

/// `Read`, and `BufRead` handing out plaintext straight from the receive
/// buffer (no copy), for the whole connection and the read half alike.
macro_rules! impl_read {
    ($ty:ty, $($gen:tt)*) => {
        impl<$($gen)*> Read for $ty {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                read_impl(&mut self.reader, &mut self.io, buf)
            }
        }

        impl<$($gen)*> BufRead for $ty {
            fn fill_buf(&mut self) -> io::Result<&[u8]> {
                fill_buf_impl(&mut self.reader, &mut self.io)
            }
            fn consume(&mut self, amt: usize) {
                self.reader.consume(amt);
            }
        }
    };
}

impl_read!(SecretConnection<T>, T: Read);
impl_read!(ReadHalf,);

/// `Write` (one call = one message, up to `flush_size` sealed bytes) and the
/// explicit `send` API, for the whole connection and the write half alike.
macro_rules! impl_write {
    ($ty:ty, $($gen:tt)*) => {
        impl<$($gen)*> Write for $ty {
            fn write(&mut self, data: &[u8]) -> io::Result<usize> {
                write_impl(&mut self.writer, &mut self.io, data)
            }
            fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
                write_vectored_impl(&mut self.writer, &mut self.io, bufs)
            }
            fn flush(&mut self) -> io::Result<()> {
                flush_impl(&mut self.writer, &mut self.io)
            }
        }

        impl<$($gen)*> $ty {
            /// Send `msg` as one logical message and flush: one transport write
            /// per `flush_size` sealed bytes.
            pub fn send(&mut self, msg: &[u8]) -> Result<(), Error> {
                send_impl(&mut self.writer, &mut self.io, &mut [IoSlice::new(msg)])
            }
            /// Send the concatenation of `bufs` as one logical message (frames
            /// are filled across slice boundaries) and flush. `bufs` is advanced
            /// past what was accepted.
            pub fn send_vectored(&mut self, bufs: &mut [IoSlice<'_>]) -> Result<(), Error> {
                send_impl(&mut self.writer, &mut self.io, bufs)
            }
        }
    };
}

impl_write!(SecretConnection<T>, T: Write);
impl_write!(WriteHalf,);

impl SecretConnection<TcpStream> {
    /// Split into halves usable from two threads (the socket is cloned).
    pub fn split(self) -> io::Result<(ReadHalf, WriteHalf)> {
        let read_io = self.io.try_clone()?;
        Ok((
            ReadHalf {
                io: read_io,
                reader: self.reader,
                remote: self.remote,
            },
            WriteHalf {
                io: self.io,
                writer: self.writer,
                remote: self.remote,
            },
        ))
    }
}

/// The receiving half of a split TCP [`SecretConnection`].
pub struct ReadHalf {
    io: TcpStream,
    reader: FrameReader,
    remote: PublicKey,
}

impl ReadHalf {
    /// The peer's authenticated public key.
    pub fn remote_public_key(&self) -> PublicKey {
        self.remote
    }
}

/// The sending half of a split TCP [`SecretConnection`].
pub struct WriteHalf {
    io: TcpStream,
    writer: FrameWriter,
    remote: PublicKey,
}

impl WriteHalf {
    /// The peer's authenticated public key.
    pub fn remote_public_key(&self) -> PublicKey {
        self.remote
    }
    /// Flush, then half-close the TCP write side (the peer reads end of stream).
    pub fn shutdown(&mut self) -> io::Result<()> {
        self.flush()?;
        self.io.shutdown(Shutdown::Write)
    }
}
