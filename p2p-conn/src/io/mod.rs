//! Adapters: thin layers that connect the sans-IO core (through the
//! crate-private engine) to real transports.
//!
//! Every connection type of the tokio and std adapters is one small generic
//! wrapper, [`SecretStream`]: a transport `T`, the sides `S` it holds
//! ([`Whole`] for a whole connection, [`ReadSide`] for a read half,
//! [`WriteSide`] for a write half; see [`Sides`]) and a marker `A` naming
//! the adapter whose traits it implements. The adapters' names
//! (`tokio::SecretConnection<T>`, `tokio::ReadHalf<R>`,
//! `blocking::WriteHalf`, …) are aliases of it, so accessors are written once
//! and a half has every accessor the whole connection has.

#[cfg(feature = "tokio")]
pub mod tokio;

pub mod blocking;
#[cfg(feature = "codec")]
pub mod codec;
#[cfg(feature = "queue")]
pub mod queue;

use std::marker::PhantomData;

mod sides;

pub use sides::{ReadSide, Reads, Sides, Whole, WriteSide, Writes};

use crate::engine::{establish, Duplex, Engines, FrameReader, FrameWriter};
use crate::proto::Established;
use crate::stats::ConnStats;
use crate::{Config, Error, NodeId, PublicKey};

/// An authenticated, encrypted stream over transport `T`, holding the sides
/// `S` ([`Sides`]) and speaking the traits of adapter `A`. Use the adapters' aliases:
#[cfg_attr(feature = "tokio", doc = "[`tokio::SecretConnection`],")]
#[cfg_attr(
    not(feature = "tokio"),
    doc = "`tokio::SecretConnection` (feature `tokio`),"
)]
/// [`blocking::SecretConnection`] and their halves.
pub struct SecretStream<T, S: Sides, A> {
    pub(crate) io: T,
    pub(crate) engines: S::Engines,
    pub(crate) remote: PublicKey,
    adapter: PhantomData<fn() -> A>,
}

impl<T, S: Sides, A> std::fmt::Debug for SecretStream<T, S, A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The engines hold decrypted bytes: show the peer, not the buffers.
        f.debug_struct("SecretStream")
            .field("peer", &self.remote.node_id())
            .finish_non_exhaustive()
    }
}

impl<T, S: Sides, A> SecretStream<T, S, A> {
    pub(crate) fn new(io: T, engines: S::Engines, remote: PublicKey) -> Self {
        SecretStream {
            io,
            engines,
            remote,
            adapter: PhantomData,
        }
    }

    /// The peer's authenticated Ed25519 public key.
    pub fn remote_public_key(&self) -> PublicKey {
        self.remote
    }

    /// The peer's node ID.
    pub fn remote_node_id(&self) -> NodeId {
        self.remote.node_id()
    }

    /// The underlying transport. Writing to or reading from it directly
    /// would desynchronise the stream; use it for addresses and socket
    /// options.
    pub fn get_ref(&self) -> &T {
        &self.io
    }

    /// A snapshot of this stream's counters: seal and write work on the send
    /// side, read and open work on the receive side (a half reports its own
    /// side and zeros for the other; [`ConnStats::new`] joins the send side of one and the receive side of the other).
    /// See [`crate::stats`]; all zero without the `stats` feature.
    pub fn stats(&self) -> ConnStats {
        self.engines.stats()
    }

    /// Bytes of buffer memory this stream holds now.
    pub fn buffer_capacity(&self) -> usize {
        self.engines.buffer_capacity()
    }

    /// Free the read and write buffers if they hold no undelivered bytes
    /// (they are reallocated on next use). A tokio connection already frees
    /// its read buffer whenever a read finds nothing to do; a blocking reader
    /// keeps it while it waits in `read`. For callers with their own idle
    /// policy.
    pub fn release_buffers(&mut self) {
        self.engines.release_buffers();
    }
}

/// The halves of a stream over transport halves `R` and `W`.
pub(crate) type Halves<R, W, A> = (SecretStream<R, ReadSide, A>, SecretStream<W, WriteSide, A>);

impl<T, A> SecretStream<T, Whole, A> {
    /// The whole connection over `io` after a finished handshake, with the
    /// peer checked against `config`.
    pub(crate) fn established(io: T, est: Established, config: &Config) -> Result<Self, Error> {
        let (read, write, remote) = establish(est, config)?;
        let mut engines = Duplex {
            reader: FrameReader::new(read),
            writer: FrameWriter::new(write),
        };
        engines.reader.set_peer(remote);
        engines.writer.set_peer(remote);
        Ok(SecretStream::new(io, engines, remote))
    }

    /// Split into a read half over `split(transport).0` and a write half over
    /// `split(transport).1`.
    #[cfg(feature = "tokio")]
    pub(crate) fn split_with<R, W>(self, split: impl FnOnce(T) -> (R, W)) -> Halves<R, W, A> {
        match self.try_split_with(|io| Ok::<_, std::convert::Infallible>(split(io))) {
            Ok(halves) => halves,
            Err(never) => match never {},
        }
    }

    /// [`Self::split_with`] for a transport whose split can fail (a std
    /// socket's `try_clone`).
    pub(crate) fn try_split_with<R, W, X>(
        self,
        split: impl FnOnce(T) -> Result<(R, W), X>,
    ) -> Result<Halves<R, W, A>, X> {
        let (r, w) = split(self.io)?;
        let Duplex { reader, writer } = self.engines;
        Ok((
            SecretStream::new(r, reader, self.remote),
            SecretStream::new(w, writer, self.remote),
        ))
    }

    /// Put two halves back together: `join` gets their transports and
    /// returns the whole one, or hands them back when they do not belong
    /// together. Halves authenticated to different peers are refused before
    /// `join` is asked.
    #[allow(clippy::result_large_err, clippy::type_complexity)]
    pub(crate) fn reunite_with<R, W>(
        read: SecretStream<R, ReadSide, A>,
        write: SecretStream<W, WriteSide, A>,
        join: impl FnOnce(R, W) -> Result<T, (R, W)>,
    ) -> Result<Self, ReuniteError<SecretStream<R, ReadSide, A>, SecretStream<W, WriteSide, A>>>
    {
        if read.remote != write.remote {
            return Err(ReuniteError(read, write));
        }
        let remote = read.remote;
        let (reader, writer) = (read.engines, write.engines);
        match join(read.io, write.io) {
            Ok(io) => Ok(SecretStream::new(io, Duplex { reader, writer }, remote)),
            Err((r, w)) => Err(ReuniteError(
                SecretStream::new(r, reader, remote),
                SecretStream::new(w, writer, remote),
            )),
        }
    }
}

/// Two halves that were not split from the same connection; they are handed
/// back unchanged.
#[derive(Debug)]
pub struct ReuniteError<R, W>(pub R, pub W);

impl<R, W> std::fmt::Display for ReuniteError<R, W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("tried to reunite halves that are not from the same connection")
    }
}

impl<R: std::fmt::Debug, W: std::fmt::Debug> std::error::Error for ReuniteError<R, W> {}
