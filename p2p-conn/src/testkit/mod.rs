//! Test doubles and helpers shared by this crate's tests, its fuzz targets
//! and anyone testing code built on p2p-conn (feature `testkit`; never
//! enable it in production builds).
//!
//! # Handshake pumps
//! [`feed`], [`pump`] and [`run_handshakes`] drive [`Handshake`](crate::proto::Handshake) state
//! machines against each other in memory, with no transport; [`seeded_rng`]
//! and [`deterministic_handshake`] make every byte of a run repeatable (a
//! fuzzer replaying an input needs that).
//!
//! # The I/O double
//! [`pipe()`] makes two connected [`End`]s over in-memory byte queues, one per
//! direction. An `End` is both tokio `AsyncRead + AsyncWrite` and std
//! `Read + Write`, so the tokio, blocking and codec adapters all run over the
//! same transport. A [`Control`] handle (kept by the test while the connection
//! owns the `End`) reads the [`Counters`] and changes the fault [`Plan`]s:
//!
//! * bounded capacity per direction: a write takes at most the free room;
//!   with no room it is `Pending` (tokio, waker registered) / `WouldBlock`
//!   (std, non-blocking mode) or waits (std, blocking mode);
//! * std blocking mode: a read waits for data or end of stream, a write for
//!   room; a call that waits [`DEADLOCK_LIMIT`] fails with `TimedOut`
//!   ("... deadlock") instead of hanging the test;
//! * scripted or seeded-random faults per call, in either mode: short
//!   reads/writes (random, or in random pieces of at most N bytes), `Pending`
//!   (tokio: the waker is woken at once) / `WouldBlock`, `Interrupted`, and a
//!   hard error at a chosen call number or after a chosen number of bytes;
//! * counters of calls, bytes, sizes, `Pending`/`WouldBlock` and errors, and a
//!   log of every byte each end wrote (the wire).
//!
//! A fresh [`pipe()`] is clean, blocking and unbounded; [`connect`] / [`pair`]
//! run the real handshake on both ends (one in a helper thread), then switch
//! both ends to non-blocking, reset the counters and set the capacity, so
//! faults only start once the test installs a plan.
//!
//! # Not provided
//! Real sockets, timing faults (delays), or anything for production use.
//!
//! # Layout
//! | module | what |
//! |---|---|
//! | [`pumps`] | handshake state machines driven against each other in memory; repeatable RNGs |
//! | [`rng`] | the splitmix64 [`Rng`] of plans and payloads, [`payload`] |
//! | [`plans`] | [`Fault`]s, [`Plan`]s and [`Counters`] of the I/O double |
//! | [`mod@pipe`] | the I/O double itself: [`pipe()`], [`End`], [`Control`] |
//! | [`conn`] | connections over the double: [`connect`], [`pair`], the [`Conn`] adapters, polling helpers |
//! | [`evil_peer`] | scripted malicious peers over loopback sockets, and the harness that plays them against a victim of either adapter |
//! | [`peer`] | [`PeerKeys`]: a peer played by hand derives the session the other side will use |
//! | [`tcp`] | loopback TCP pairs, raw or handshaken by the tokio or std adapter |
//! | [`docs`] | the check that a crate's table of Cargo features is its Cargo.toml's |
//! | [`internals`] | the engine's parts and the test hooks (chosen counters and ephemeral keys) the tests and fuzz targets reach into; no stability promise |
#![allow(missing_docs)]

pub mod conn;
pub mod docs;
pub mod evil_peer;
pub mod internals;
pub mod peer;
pub mod pipe;
pub mod plans;
pub mod pumps;
pub mod rng;
pub mod tcp;

pub use conn::*;
pub use peer::{eph_message, PeerKeys};
pub use pipe::{pipe, Control, End, DEADLOCK_LIMIT};
pub use plans::*;
pub use pumps::*;
pub use rng::*;
pub use tcp::{std_secret_pair, std_tcp_pair, tokio_secret_pair, tokio_tcp_pair};
