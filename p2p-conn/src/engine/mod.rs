//! The sans-IO drivers every adapter shares: one handshake driver, one write
//! path, one read path.
//!
//! | module | what | used by |
//! |---|---|---|
//! | [`handshake`] | drives [`crate::proto::Handshake`] over "want read / want write" | tokio, std, codec |
//! | [`writer`] | [`WriteCore`]: seal a message (or its first flush's worth) onto a buffer; [`FrameWriter`]: that buffer, short-write retention, poisoning | tokio, std ([`FrameWriter`]); codec ([`WriteCore`]) |
//! | [`reader`] | [`ReadCore`]: open the sealed frames in a buffer, the handshake's leftover plaintext; [`FrameReader`]: a receive buffer over it | tokio, std ([`FrameReader`]); codec ([`ReadCore`]) |
//!
//! Each engine is driven through closures shaped like `poll_read` /
//! `poll_write` (`FnMut(&mut [u8]) -> Poll<io::Result<usize>>`). The tokio
//! adapter passes its transport's poll methods; the std adapter passes
//! blocking calls wrapped in `Poll::Ready` (mapping `WouldBlock` to
//! `Pending`); tests pass scripted fakes. So the buffering, cancellation and
//! poisoning rules are written once.
//!
//! Data flows one way on each side:
//! * send: adapter → [`WriteCore::seal`] into the write buffer → one write;
//! * receive: one read fills the read buffer → `ReadCore::open_batch` opens
//!   in place → plaintext out through `AsyncRead`, `BufRead` or a codec item.
//!
//! # Not provided
//! No locking (each engine has one owner: a connection or one of its halves),
//! no timers, no I/O of its own.

#[cfg(any(feature = "queue", feature = "testkit"))]
pub mod budget;
pub mod handshake;
pub mod reader;
pub mod writer;

#[cfg(any(feature = "tokio", feature = "testkit"))]
pub use handshake::PollIo;
pub use handshake::{poll_handshake, ready, unpoll, StdIo};
pub use reader::{FrameReader, ReadCore};
pub use writer::{FrameWriter, WriteCore};

use crate::proto::Established;
use crate::stats::ConnStats;
use crate::{Config, Error, PublicKey};

/// Both engines of a whole connection.
#[derive(Debug)]
pub struct Duplex {
    /// The receive side.
    pub reader: FrameReader,
    /// The send side.
    pub writer: FrameWriter,
}

/// The engines a finished handshake yields, with the peer checked against
/// `config` (see [`Config::check_peer`]).
pub(crate) fn establish(
    est: Established,
    config: &Config,
) -> Result<(ReadCore, WriteCore, PublicKey), Error> {
    config.check_peer(&est.remote_public_key)?;
    let mut est = est;
    // Frame #0 expanded both keys; a connection that never moves data
    // should not keep them (see `proto::aead::Cipher`).
    est.opener.release_key();
    est.sealer.release_key();
    Ok((
        ReadCore::new(est.opener, est.initial_plaintext, config.read_buffer_size),
        WriteCore::new(est.sealer, config.flush_size),
        est.remote_public_key,
    ))
}

/// Which engines a connection type holds: the whole connection holds both
/// ([`Duplex`]), a read half a [`FrameReader`], a write half a
/// [`FrameWriter`]. Sealed: implemented only for those three.
pub trait Engines: sealed::Sealed + Unpin {
    /// Bytes of buffer memory held.
    fn buffer_capacity(&self) -> usize;
    /// Free buffers that hold no undelivered bytes.
    fn release_buffers(&mut self);
    /// The counters of the sides held (the other side reads zero).
    fn stats(&self) -> ConnStats;
}

/// Engines with a receive side.
pub trait HasReader: Engines {
    /// The reader.
    fn reader(&mut self) -> &mut FrameReader;
}

/// Engines with a send side.
pub trait HasWriter: Engines {
    /// The writer.
    fn writer(&mut self) -> &mut FrameWriter;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Duplex {}
    impl Sealed for super::FrameReader {}
    impl Sealed for super::FrameWriter {}
}

impl Engines for Duplex {
    fn buffer_capacity(&self) -> usize {
        self.reader.buffer_capacity() + self.writer.buffer_capacity()
    }
    fn release_buffers(&mut self) {
        self.reader.release_buffers();
        self.writer.release_buffers();
    }
    fn stats(&self) -> ConnStats {
        ConnStats {
            send: self.writer.stats(),
            recv: self.reader.stats(),
        }
    }
}

impl Engines for FrameReader {
    fn buffer_capacity(&self) -> usize {
        FrameReader::buffer_capacity(self)
    }
    fn release_buffers(&mut self) {
        FrameReader::release_buffers(self);
    }
    fn stats(&self) -> ConnStats {
        ConnStats {
            recv: FrameReader::stats(self),
            ..ConnStats::default()
        }
    }
}

impl Engines for FrameWriter {
    fn buffer_capacity(&self) -> usize {
        FrameWriter::buffer_capacity(self)
    }
    fn release_buffers(&mut self) {
        FrameWriter::release_buffers(self);
    }
    fn stats(&self) -> ConnStats {
        ConnStats {
            send: FrameWriter::stats(self),
            ..ConnStats::default()
        }
    }
}

impl HasReader for Duplex {
    fn reader(&mut self) -> &mut FrameReader {
        &mut self.reader
    }
}

impl HasReader for FrameReader {
    fn reader(&mut self) -> &mut FrameReader {
        self
    }
}

impl HasWriter for Duplex {
    fn writer(&mut self) -> &mut FrameWriter {
        &mut self.writer
    }
}

impl HasWriter for FrameWriter {
    fn writer(&mut self) -> &mut FrameWriter {
        self
    }
}
