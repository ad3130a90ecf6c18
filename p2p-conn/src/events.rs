//! `tracing` events (feature `tracing`): one place that knows their names,
//! levels and fields. Without the feature every function here compiles to
//! nothing; with it and no subscriber listening, each event costs one
//! relaxed atomic load (tracing's per-callsite interest cache).
//!
//! | event | level | fields |
//! |---|---|---|
//! | handshake succeeded | debug | `peer`, `addr`, `duration_us` |
//! | handshake failed | debug | `error`, `addr`, `duration_us`, `peer` when it authenticated |
//! | send side closed | debug | `peer`, `cause`, `frames`, `bytes`, `wire_bytes` |
//! | receive side closed | debug | `peer`, `cause`, `frames`, `bytes`, `wire_bytes` |
//! | send queue full | warn | see `io::queue` |
//!
//! `addr` is known where the adapter holds a socket address
//! (`blocking::handshake_tcp`, `queue::Sender::with_addr`); elsewhere run the
//! handshake inside a span of your own that carries it, e.g.
//! `handshake(tcp, ..).instrument(info_span!("peer", %addr))`: subscribers
//! print the span's fields with every event inside it. Failures are at
//! debug level, not warn: an open port sees handshakes fail all day.

#[cfg(feature = "tracing")]
use std::net::SocketAddr;
#[cfg(feature = "tracing")]
use std::time::Instant;

use crate::{Error, NodeId};

/// A handshake in progress, for its outcome event.
pub(crate) struct Handshaking {
    #[cfg(feature = "tracing")]
    started: Instant,
    #[cfg(feature = "tracing")]
    addr: Option<SocketAddr>,
}

#[allow(unused_variables)]
impl Handshaking {
    /// Start the clock (nothing without the feature).
    #[inline]
    pub(crate) fn start(addr: impl FnOnce() -> Option<std::net::SocketAddr>) -> Self {
        Handshaking {
            #[cfg(feature = "tracing")]
            started: Instant::now(),
            // Always taken (one getpeername per handshake): an `enabled!`
            // gate here was seen to miss with per-thread subscribers.
            #[cfg(feature = "tracing")]
            addr: addr(),
        }
    }

    /// Emit the outcome: the peer's node ID on success.
    #[inline]
    pub(crate) fn finish(self, outcome: Result<NodeId, &Error>) {
        #[cfg(feature = "tracing")]
        {
            let duration_us = self.started.elapsed().as_micros() as u64;
            let addr = self.addr.map(tracing::field::display);
            match outcome {
                Ok(peer) => tracing::debug!(%peer, addr, duration_us, "handshake succeeded"),
                Err(Error::PeerIdMismatch { actual, expected }) => tracing::debug!(
                    peer = %actual,
                    %expected,
                    addr,
                    duration_us,
                    error = %Error::PeerIdMismatch { actual: *actual, expected: *expected },
                    "handshake failed"
                ),
                Err(error) => tracing::debug!(%error, addr, duration_us, "handshake failed"),
            }
        }
    }
}

/// Which side of a connection closed.
#[derive(Clone, Copy)]
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) enum Side {
    Send,
    Recv,
}

/// The final counts of one side of a connection, at its end.
#[allow(unused_variables)]
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
#[inline]
pub(crate) fn closed(
    side: Side,
    peer: &crate::NodeId,
    cause: &dyn std::fmt::Display,
    frames: u64,
    bytes: u64,
    wire_bytes: u64,
) {
    #[cfg(feature = "tracing")]
    {
        // Field values are evaluated only when the event is enabled.
        let peer = || tracing::field::display(peer);
        match side {
            Side::Send => tracing::debug!(
                peer = peer(),
                %cause,
                frames,
                bytes,
                wire_bytes,
                "send side closed"
            ),
            Side::Recv => tracing::debug!(
                peer = peer(),
                %cause,
                frames,
                bytes,
                wire_bytes,
                "receive side closed"
            ),
        }
    }
}
