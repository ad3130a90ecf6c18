//! The tokio adapter: the handshake under a timeout, then a stream that
//! seals each write into one buffer and opens many frames per read.

use std::io;
use std::ops::Range;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncBufRead, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};

use super::handshake::{Handshake, Role};
use super::transport::{Opener, Sealer};
use super::{NoiseError, MAX_FRAME, MAX_HANDSHAKE_MESSAGE};
use crate::{Identity, PeerId};

/// The most plaintext one `poll_write` takes: 16 full frames, sealed into
/// one buffer and written at once.
const WRITE_CHUNK: usize = 16 * super::MAX_FRAME_PLAINTEXT;

/// Run the Noise handshake over `io` as `role` within `timeout`, proving
/// `identity`; `expect` is the only peer accepted, if given. The
/// randomness is the operating system's.
pub async fn handshake<T>(
    mut io: T,
    role: Role,
    identity: &Identity,
    expect: Option<PeerId>,
    timeout: Duration,
) -> Result<NoiseStream<T>, NoiseError>
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    let run = async {
        let mut hs = Handshake::new(role, identity, expect, &mut rand_core::OsRng)?;
        let mut buf = vec![0u8; 2 + MAX_HANDSHAKE_MESSAGE];
        let (mut start, mut end) = (0, 0);
        loop {
            let out = hs.take_output();
            if !out.is_empty() {
                io.write_all(&out).await?;
                io.flush().await?;
            }
            if hs.is_finished() {
                break;
            }
            if start == end {
                start = 0;
                let n = io.read(&mut buf).await?;
                if n == 0 {
                    return Err(NoiseError::Closed);
                }
                end = n;
            }
            start += hs.read(&buf[start..end])?;
        }
        let leftover = buf[start..end].to_vec();
        let session = hs.into_session()?;
        Ok::<_, NoiseError>((session, leftover))
    };
    let (session, leftover) = tokio::time::timeout(timeout, run)
        .await
        .map_err(|_| NoiseError::Timeout(timeout))??;
    Ok(NoiseStream::new(io, session, &leftover))
}

/// A Noise session over a tokio stream: `AsyncRead`, `AsyncBufRead` and
/// `AsyncWrite` of plaintext. Each `poll_write` of up to 16 frames'
/// worth is sealed into one buffer and written with one call where the
/// socket takes it; reads fill a 64 KiB buffer and open its frames in
/// place.
pub struct NoiseStream<T> {
    io: T,
    sealer: Sealer,
    opener: Opener,
    peer: PeerId,
    /// Bytes read, `2 + MAX_FRAME` long.
    rbuf: Box<[u8]>,
    /// The unopened bytes in `rbuf`.
    raw: Range<usize>,
    /// Opened plaintext not yet consumed, in `rbuf`.
    plain: Range<usize>,
    /// Sealed bytes not yet written.
    wbuf: Vec<u8>,
    wpos: usize,
    poisoned: bool,
}

impl<T> std::fmt::Debug for NoiseStream<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NoiseStream")
            .field("peer", &self.peer)
            .finish_non_exhaustive()
    }
}

impl<T> NoiseStream<T> {
    fn new(io: T, session: super::handshake::Session, leftover: &[u8]) -> NoiseStream<T> {
        let peer = session.peer();
        let (sealer, opener) = session.split();
        let mut rbuf = vec![0u8; 2 + MAX_FRAME].into_boxed_slice();
        rbuf[..leftover.len()].copy_from_slice(leftover);
        NoiseStream {
            io,
            sealer,
            opener,
            peer,
            rbuf,
            raw: 0..leftover.len(),
            plain: 0..0,
            wbuf: Vec::new(),
            wpos: 0,
            poisoned: false,
        }
    }

    /// The peer's libp2p identity, proven in the handshake.
    pub fn remote_peer(&self) -> PeerId {
        self.peer
    }

    /// The stream underneath.
    pub fn get_ref(&self) -> &T {
        &self.io
    }
}

impl<T: AsyncWrite + Unpin> NoiseStream<T> {
    /// Write out what is sealed and not yet written.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.wpos < self.wbuf.len() {
            match ready!(Pin::new(&mut self.io).poll_write(cx, &self.wbuf[self.wpos..])) {
                Ok(0) => {
                    self.poisoned = true;
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                Ok(n) => self.wpos += n,
                Err(e) => {
                    self.poisoned = true;
                    return Poll::Ready(Err(e));
                }
            }
        }
        self.wbuf.clear();
        self.wpos = 0;
        Poll::Ready(Ok(()))
    }

    fn check(&self) -> io::Result<()> {
        if self.poisoned {
            Err(NoiseError::Poisoned.into())
        } else {
            Ok(())
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for NoiseStream<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.check()?;
        ready!(this.poll_drain(cx))?;
        let n = buf.len().min(WRITE_CHUNK);
        if let Err(e) = this.sealer.seal(&buf[..n], &mut this.wbuf) {
            this.poisoned = true;
            return Poll::Ready(Err(e.into()));
        }
        // The bytes are ours now; start them on their way. A socket that is
        // not ready keeps them for the next call or `poll_flush`; an error
        // is reported there.
        let _ = this.poll_drain(cx);
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.check()?;
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.poisoned {
            ready!(this.poll_drain(cx))?;
        }
        Pin::new(&mut this.io).poll_shutdown(cx)
    }
}

impl<T: AsyncRead + Unpin> AsyncBufRead for NoiseStream<T> {
    fn poll_fill_buf(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<&[u8]>> {
        let this = self.get_mut();
        loop {
            if !this.plain.is_empty() {
                return Poll::Ready(Ok(&this.rbuf[this.plain.clone()]));
            }
            let raw = this.raw.clone();
            match this.opener.open(&mut this.rbuf[raw.clone()]) {
                Err(e) => return Poll::Ready(Err(e.into())),
                Ok(Some(o)) => {
                    this.plain = raw.start + o.plaintext.start..raw.start + o.plaintext.end;
                    this.raw.start += o.frame_len;
                    continue;
                }
                Ok(None) => {}
            }
            // Need more: move the partial frame to the front and read.
            if raw.start > 0 {
                this.rbuf.copy_within(raw.clone(), 0);
                this.raw = 0..raw.len();
            }
            let end = this.raw.end;
            let mut rb = ReadBuf::new(&mut this.rbuf[end..]);
            ready!(Pin::new(&mut this.io).poll_read(cx, &mut rb))?;
            let n = rb.filled().len();
            if n == 0 {
                return if this.raw.is_empty() {
                    Poll::Ready(Ok(&[]))
                } else {
                    Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the peer closed the connection inside a Noise frame",
                    )))
                };
            }
            this.raw.end += n;
        }
    }

    fn consume(self: Pin<&mut Self>, amt: usize) {
        let this = self.get_mut();
        this.plain.start = (this.plain.start + amt).min(this.plain.end);
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for NoiseStream<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let got = ready!(self.as_mut().poll_fill_buf(cx))?;
        let n = got.len().min(buf.remaining());
        buf.put_slice(&got[..n]);
        self.consume(n);
        Poll::Ready(Ok(()))
    }
}
