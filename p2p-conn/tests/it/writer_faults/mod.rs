//! The sealed-frame writer / reader contract (`engine` module docs) through
//! the tokio and std adapters, over the fault-injecting transport of
//! `common` (short writes and reads, `Pending` / `WouldBlock`, `Interrupted`,
//! hard errors, bounded capacity):
//!
//! * streams survive any mix of transport faults on both ends: the receiver
//!   gets exactly the bytes the sender's writes accepted (`Ok(n)` = the first
//!   `n` bytes of that call), and a write accepts new plaintext only after
//!   the sealed bytes of older ones are all on the wire;
//! * dropped tokio `write` / `read` / `flush` futures lose and duplicate
//!   nothing (real runtime, real wakers);
//! * a hard transport error (or a zero-byte write) poisons the writer: the
//!   failing call returns the error, every later call `Error::Poisoned`, the
//!   transport is never called again, and the peer sees only whole frames
//!   sealed with distinct counters (checked by opening the wire bytes
//!   independently), then end of stream;
//! * frame sizes at the bottom of the range `Config` accepts can handshake;
//! * `send_vectored` leaves `bufs` at exactly the unsent remainder when it
//!   has to stop (its documented resume contract).
//!
//! Nonce exhaustion is not reachable through the adapters' public handshake
//! (a connection's counters always start at 0); `proto::frame`'s unit tests
//! cover it, and `evil_peer.rs` drives the engine's writer and reader into it
//! over a loopback socket. Case counts are modest; `PROPTEST_CASES` overrides them.

mod calls;
mod poison;
mod streams;

use std::future::Future;
use std::io::{self, IoSlice, Read};
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use crate::common::{
    block_on, check_bytes, connect, is_would_block, pair, payload, proptest_config, Conn, Control,
    End, Plan, Rates, Rng, StdConn, TokioConn,
};
use futures::poll;
use p2p_conn::io::tokio as ptokio;
use p2p_conn::proto::FrameSize;
use p2p_conn::proto::HandshakeParams;
use p2p_conn::testkit::internals::wire::sealed_len;
use p2p_conn::testkit::internals::FrameSizeHooks;
use p2p_conn::testkit::internals::{
    handshake_with_ephemeral, open_at, poll_handshake, ready, FrameReader, ReadCore, StdIo,
};
use p2p_conn::Backend;
use p2p_conn::{Config, Error, Identity};
use proptest::prelude::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Consecutive rounds without any progress before a driver declares a hang.
const IDLE_LIMIT: u32 = 100_000;

fn retry_kind(e: &io::Error) -> bool {
    is_would_block(e) || e.kind() == io::ErrorKind::Interrupted
}

/// Plaintext bytes one write accepts at most (`FrameWriter::max_chunk`).
fn max_chunk(flush_size: usize, frame: usize) -> usize {
    FrameSize::new(frame).unwrap().flush_chunk(flush_size)
}

fn rates() -> impl Strategy<Value = Rates> {
    (0u32..=30, 0u32..=20, 0u32..=70).prop_map(|(pending, interrupted, short)| Rates {
        pending,
        interrupted,
        short,
    })
}
