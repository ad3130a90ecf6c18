//! The sans-IO core: the handshake state machine and the frame sealer/opener.
//!
//! Nothing in this module performs I/O (no sockets, no files), reads a clock,
//! draws randomness it was not handed ([`Handshake::new_with_rng`]; `new`
//! uses the OS RNG by default), or spawns a task. It consumes and produces
//! byte buffers, so the tokio, std and codec adapters, the fuzzers and the
//! tests all exercise exactly the same protocol code. Key files live in
//! `crate::keyfile`, outside the core.

pub mod aead;
pub mod auth_sig;
mod error;
pub mod frame;
pub mod handshake;
pub mod kdf;
pub(crate) mod varint;
pub mod wire;

pub use aead::{Backend, ParseBackendError};
pub use error::ProtocolError;
pub use frame::{FrameSize, Opener, SealBuf, Sealer};
pub use handshake::{Established, Handshake, HandshakeParams, Stage};
pub use wire::{sealed_frame_len, sealed_len, STANDARD_FRAME_SIZE, STANDARD_SEALED_FRAME};
