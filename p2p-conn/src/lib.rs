//! # p2p-conn
//!
//! A CometBFT-compatible secret connection: the X25519 + Merlin + HKDF-SHA256
//! handshake, Ed25519 authentication and ChaCha20-Poly1305 sealed frames that
//! CometBFT nodes speak to each other, and the NodeInfo exchange above it.
//! The README names the CometBFT release lines the test suite proves it
//! against.
//!
//! ## Design
//! | module | what |
//! |---|---|
//! | [`proto`] | the sans-IO core: the handshake state machine and the frame [`proto::Sealer`] / [`proto::Opener`] work on byte buffers only (no sockets, files or clocks; randomness can be injected, [`proto::Handshake::new_with_rng`]); [`proto::FrameSize`] a frame's data and sealed sizes |
//! | [`io`] | thin adapters over one crate-private engine (a single read path, sealing step and handshake driver, written once over poll-shaped closures): `io::tokio` (feature `tokio`), [`io::blocking`] (std::io, always), `io::codec` (feature `codec`, tokio-util) and the send queue `io::queue` (feature `queue`). Connections and halves are one generic [`io::SecretStream`] |
//! | `nodeinfo` (feature `nodeinfo`) | the NodeInfo exchange that follows the handshake on CometBFT nodes, and CometBFT's rules for it |
//! | [`delimited`] | the uvarint length-delimited reader (sans-IO) every protobuf layer above the connection shares: NodeInfo here, `p2p-conn-privval` and `p2p-conn-mconn` above; the adapters drive it (`io::tokio::poll_decode`, [`io::blocking::decode`]) |
//! | `noise` (feature `noise`) | libp2p's Noise secure channel for CometBFT v0.40's `noise://` remote signing: a tokio stream over a sans-IO handshake (snow's state machine, this crate's primitives) and frames |
//! | [`stats`] | per-connection counters and timers (feature `stats`), `stats::export` through the `metrics` facade (feature `metrics`) |
//! | `keyfile` (feature `keyfile`) | CometBFT `node_key.json`, outside the core, written so that it appears whole (a crate-private durable write) |
//! | `testkit` (feature `testkit`) | test doubles, handshake pumps and, in `testkit::internals`, the engine and test hooks for tests and fuzz targets; no stability promise, never for production |
//!
//! ## Cargo features
//! The defaults are what a tokio node wants. With `default-features =
//! false` the crate is pure Rust (RustCrypto AEAD) with the std adapter
//! only.
//!
//! | feature | default | what |
//! |---|---|---|
//! | `tokio` | yes | the tokio adapter `io::tokio` (it needs no tokio runtime feature of its own) |
//! | `queue` | yes | the send queue `io::queue` (brings `tokio` with its runtime and sync parts, and `tracing`) |
//! | `ring` | yes | ring's assembly ChaCha20-Poly1305 (`Backend::Ring`), the default where no multi-frame engine applies |
//! | `avx512` | yes | `Backend::Avx512`: 16 standard frames sealed or opened at once on CPUs with AVX-512 IFMA |
//! | `avx2` | yes | `Backend::Avx2`: the same engine's AVX2 kernel, the default on x86_64 with AVX2 and BMI2 but no AVX-512 IFMA |
//! | `stats` | yes | the per-connection counters and timers of [`stats`] (without it they stay zero) |
//! | `rustcrypto` | no | names the pure-Rust build; adds nothing (the RustCrypto backend is always compiled) |
//! | `codec` | no | the tokio-util codec adapter `io::codec` |
//! | `tracing` | no | `tracing` events: the handshake's outcome, each side's close with its cause and counts |
//! | `metrics` | no | `stats::export` through the `metrics` facade |
//! | `nodeinfo` | no | the NodeInfo exchange, `nodeinfo` |
//! | `noise` | no | libp2p's Noise for `noise://` remote signing, `noise` (brings `tokio`) |
//! | `keyfile` | no | `node_key.json`, `keyfile` |
//! | `testkit` | no | test doubles and test hooks, `testkit`; no stability promise, never in production |
//!
//! ## Guarantees
//! * A write of up to 1024 bytes is exactly one frame; a larger write is split
//!   into 1024-byte frames and sealed into one buffer, handed to the transport
//!   in one write (up to `flush_size` sealed bytes).
//! * Short writes and dropped futures never desync the stream; a failed write
//!   poisons the writer ([`Error::Poisoned`]) so no nonce is reused.
//! * Reads work with any buffer size down to 1 byte; zero-length frames are
//!   skipped, never reported as end of stream.
//! * No panics on any peer input; nonce exhaustion is an error.
//! * Before the peer authenticates, at most one sealed frame plus about one
//!   frame's worth of plaintext beyond the bounded AuthSigMessage is buffered
//!   (about 3 KiB by default); the peer cannot make us allocate more.
//! * Secrets (identity key, ephemeral key, DH output, derived frame keys) are
//!   zeroized on drop; the AEAD key schedule too with the RustCrypto backend
//!   (`ring` does not wipe its own copy).
//!
//! ## Not provided
//! * The layers above the connection: MConnection and PEX are
//!   `p2p-conn-mconn`, the remote-signer protocol `p2p-conn-privval`;
//!   rekeying (the protocol has none).
//! * Key types other than Ed25519 (CometBFT's p2p layer uses only Ed25519).
//! * An authenticated close: the protocol has none, so a clean end of stream
//!   may be an attacker cutting the connection after a whole frame
//!   (`spec/wire-protocol.md` §4.5). Applications frame their own messages.
//!
//! ## Example (tokio)
//! ```no_run
//! # async fn demo() -> Result<(), p2p_conn::Error> {
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//! let identity = p2p_conn::Identity::generate();
//! let tcp = tokio::net::TcpStream::connect("127.0.0.1:26656").await?;
//! let mut conn = p2p_conn::io::tokio::handshake(tcp, &identity, &p2p_conn::Config::default()).await?;
//! println!("peer {}", conn.remote_node_id());
//! conn.write_all(b"hello").await?;
//! conn.flush().await?;
//! let mut buf = [0u8; 5];
//! conn.read_exact(&mut buf).await?;
//! # Ok(()) }
//! ```
// `unsafe` is allowed in two places only: the AVX-512 kernels of
// `proto::aead::multiframe` (feature `avx512`), and the `rdtsc`/`cpuid` reads
// of the stats clock (`stats::clock`, feature `stats`, x86_64), each block
// with its invariant.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]

#[cfg(feature = "keyfile")]
mod atomic_file;
mod config;
pub mod delimited;
mod engine;
mod error;
mod events;
pub(crate) mod identity;
pub mod io;
#[cfg(feature = "keyfile")]
pub mod keyfile;
#[cfg(feature = "nodeinfo")]
pub mod nodeinfo;
#[cfg(feature = "noise")]
pub mod noise;
mod peer_id;
pub mod proto;
pub mod stats;
#[cfg(feature = "testkit")]
pub mod testkit;

pub use config::{Config, DEFAULT_FLUSH_SIZE, DEFAULT_HANDSHAKE_TIMEOUT, DEFAULT_READ_BUFFER};
pub use error::Error;
pub use identity::{Identity, IdentityError, NodeId, PublicKey};
pub use peer_id::PeerId;
pub use proto::aead::Backend;
pub use proto::error::ProtocolError;

/// The crate's README (what crates.io shows), compiled as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(all(doctest, feature = "tokio"))]
pub struct CrateReadmeDoctests;

/// The README's Rust examples, compiled as doctests so they stay correct.
#[doc = include_str!("../../README.md")]
#[cfg(all(doctest, feature = "tokio", feature = "keyfile"))]
pub struct ReadmeDoctests;

/// docs/embedding.md's examples, compiled as doctests. CI also builds every
/// document's examples as a user's crate with the document's own Cargo line
/// (`docs/examples/`, `scripts/doc-examples.py`), which these cannot do:
/// doctests see the features this crate is built with.
#[doc = include_str!("../../docs/embedding.md")]
#[cfg(all(doctest, feature = "queue"))]
pub struct EmbeddingDoctests;

// docs/library-guide.md is not compiled here: its examples use all three library
// crates (p2p-conn-mconn and p2p-conn-privval depend on this one), so CI
// builds them as the user's crates `scripts/doc-examples.py` makes, with
// the Cargo lines the guide recommends (docs/examples/).

/// docs/profiling.md's example, compiled as a doctest.
#[doc = include_str!("../../docs/profiling.md")]
#[cfg(all(doctest, feature = "queue"))]
pub struct ProfilingDoctests;
