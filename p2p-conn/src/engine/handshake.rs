//! The handshake driver: runs [`Handshake`] over any transport shaped like
//! `poll_read` / `poll_write`.
//!
//! Writes everything the state machine has to send and flushes the transport
//! before it reads, and reads exactly what the state machine asks for. On a
//! non-blocking transport both directions progress in the same poll; on a
//! blocking one a short or interrupted write can never leave both peers
//! waiting in `read`. Nothing past the handshake is read from the transport.
//!
//! # Not provided
//! Timeouts: the adapters own the clock.

use std::io;
use std::task::Poll;

use crate::proto::Handshake;
use crate::Error;

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

/// A std `Read + Write` transport seen through [`PollIo`]: `WouldBlock` is
/// `Pending`, so a non-blocking std socket works as well as a blocking one.
/// The std adapter's handshake driver, and the tests' (through
/// `testkit::internals`).
pub struct StdIo<'a, T>(pub &'a mut T);

impl<T: std::io::Read + std::io::Write> PollIo for StdIo<'_, T> {
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

/// A std call's result as a poll: `WouldBlock` is `Pending`.
pub fn ready<T>(r: io::Result<T>) -> Poll<io::Result<T>> {
    match r {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Poll::Pending,
        other => Poll::Ready(other),
    }
}

/// A poll as a std call's result: `Pending` is `WouldBlock`.
pub fn unpoll<T>(p: Poll<io::Result<T>>) -> io::Result<T> {
    match p {
        Poll::Ready(r) => r,
        Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
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
