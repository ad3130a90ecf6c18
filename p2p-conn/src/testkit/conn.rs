//! Connections over the I/O double: the real handshake on both ends, then
//! adapters driven one attempt at a time.

use std::future::Future;
use std::io::{self, IoSlice, Read, Write};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::pipe::{pipe, Control, End};
use crate::engine::unpoll;
use crate::io::{blocking, tokio as ptokio};
use crate::{Config, Error, Identity};

/// Run `f` to completion on a fresh current-thread tokio runtime (with the
/// timer the handshake timeout needs).
pub fn block_on<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("tokio runtime")
        .block_on(f)
}

/// Connect two ends: `a` runs on this thread and `b` on a helper thread, both
/// over a clean blocking pipe. Afterwards both ends are non-blocking, their
/// counters are zero and each direction holds at most `capacity` bytes.
pub fn connect<A, B>(
    capacity: usize,
    a: impl FnOnce(End) -> A,
    b: impl FnOnce(End) -> B + Send,
) -> (A, Control, B, Control)
where
    B: Send,
{
    let (ea, eb) = pipe();
    let (ca, cb) = (ea.control(), eb.control());
    let (a, b) = std::thread::scope(|s| {
        let hb = s.spawn(move || b(eb));
        let a = a(ea);
        (a, hb.join().expect("handshake thread panicked"))
    });
    for c in [&ca, &cb] {
        c.set_blocking(false);
        c.set_capacity(capacity);
        c.reset_counters();
    }
    (a, ca, b, cb)
}

/// Both ends through [`Conn`] adapters with the real handshake.
pub fn pair<A: Conn, B: Conn>(
    config_a: &Config,
    config_b: &Config,
    capacity: usize,
) -> (A, Control, B, Control) {
    let (ia, ib) = (Identity::generate(), Identity::generate());
    let (a, ca, b, cb) = connect(
        capacity,
        |e| A::handshake(e, &ia, config_a),
        |e| B::handshake(e, &ib, config_b),
    );
    let a = a.unwrap_or_else(|e| panic!("{} handshake: {e}", A::NAME));
    let b = b.unwrap_or_else(|e| panic!("{} handshake: {e}", B::NAME));
    (a, ca, b, cb)
}

/// A connection of one adapter driven without blocking: every call makes one
/// attempt, and "would have to wait" is `ErrorKind::WouldBlock` (std over a
/// non-blocking `End`; tokio polled once with a no-op waker, its future
/// dropped when `Pending`).
pub trait Conn: Sized + Send {
    const NAME: &'static str;
    /// The adapter's handshake over `end` (blocks this thread until done).
    fn handshake(end: End, identity: &Identity, config: &Config) -> Result<Self, Error>;
    fn try_write(&mut self, data: &[u8]) -> io::Result<usize>;
    fn try_write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize>;
    fn try_flush(&mut self) -> io::Result<()>;
    /// Flush, then end the stream for the peer.
    fn try_shutdown(&mut self) -> io::Result<()>;
    fn try_send(&mut self, msg: &[u8]) -> Result<(), Error>;
    fn try_send_vectored(&mut self, bufs: &mut [IoSlice<'_>]) -> Result<(), Error>;
    fn try_read(&mut self, buf: &mut [u8]) -> io::Result<usize>;
    fn buffer_capacity(&self) -> usize;
}

pub type TokioConn = ptokio::SecretConnection<End>;
pub type StdConn = blocking::SecretConnection<End>;

struct NoopWake;

impl Wake for NoopWake {
    fn wake(self: Arc<Self>) {}
}

/// Poll once with a no-op waker; `Pending` becomes `WouldBlock`.
pub fn poll_once<T>(f: impl FnOnce(&mut Context<'_>) -> Poll<io::Result<T>>) -> io::Result<T> {
    let waker = Waker::from(Arc::new(NoopWake));
    let mut cx = Context::from_waker(&waker);
    unpoll(f(&mut cx))
}

/// Poll `fut` once with a no-op waker: `Some(output)` if it finished.
pub fn now_or_never<F: Future>(fut: F) -> Option<F::Output> {
    let waker = Waker::from(Arc::new(NoopWake));
    let mut cx = Context::from_waker(&waker);
    let fut = std::pin::pin!(fut);
    match fut.poll(&mut cx) {
        Poll::Ready(v) => Some(v),
        Poll::Pending => None,
    }
}

fn would_block() -> Error {
    Error::Io(io::ErrorKind::WouldBlock.into())
}

impl Conn for TokioConn {
    const NAME: &'static str = "tokio";
    fn handshake(end: End, identity: &Identity, config: &Config) -> Result<Self, Error> {
        block_on(ptokio::handshake(end, identity, config))
    }
    fn try_write(&mut self, data: &[u8]) -> io::Result<usize> {
        poll_once(|cx| Pin::new(&mut *self).poll_write(cx, data))
    }
    fn try_write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        poll_once(|cx| Pin::new(&mut *self).poll_write_vectored(cx, bufs))
    }
    fn try_flush(&mut self) -> io::Result<()> {
        poll_once(|cx| Pin::new(&mut *self).poll_flush(cx))
    }
    fn try_shutdown(&mut self) -> io::Result<()> {
        poll_once(|cx| Pin::new(&mut *self).poll_shutdown(cx))
    }
    fn try_send(&mut self, msg: &[u8]) -> Result<(), Error> {
        now_or_never(self.send(msg)).unwrap_or_else(|| Err(would_block()))
    }
    fn try_send_vectored(&mut self, bufs: &mut [IoSlice<'_>]) -> Result<(), Error> {
        now_or_never(self.send_vectored(bufs)).unwrap_or_else(|| Err(would_block()))
    }
    fn try_read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        poll_once(|cx| {
            let mut rb = ReadBuf::new(buf);
            Pin::new(&mut *self)
                .poll_read(cx, &mut rb)
                .map_ok(|()| rb.filled().len())
        })
    }
    fn buffer_capacity(&self) -> usize {
        crate::io::SecretStream::buffer_capacity(self)
    }
}

impl Conn for StdConn {
    const NAME: &'static str = "std";
    fn handshake(end: End, identity: &Identity, config: &Config) -> Result<Self, Error> {
        blocking::handshake(end, identity, config)
    }
    fn try_write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.write(data)
    }
    fn try_write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.write_vectored(bufs)
    }
    fn try_flush(&mut self) -> io::Result<()> {
        self.flush()
    }
    fn try_shutdown(&mut self) -> io::Result<()> {
        self.flush()?;
        self.get_ref().close_write();
        Ok(())
    }
    fn try_send(&mut self, msg: &[u8]) -> Result<(), Error> {
        self.send(msg)
    }
    fn try_send_vectored(&mut self, bufs: &mut [IoSlice<'_>]) -> Result<(), Error> {
        self.send_vectored(bufs)
    }
    fn try_read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read(buf)
    }
    fn buffer_capacity(&self) -> usize {
        crate::io::SecretStream::buffer_capacity(self)
    }
}

/// True for the error a non-blocking call returns when it would have to wait.
pub fn is_would_block(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::WouldBlock
}
