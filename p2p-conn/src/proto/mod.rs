//! The sans-IO core: the handshake state machine and the frame sealer/opener.
//!
//! Nothing in this module performs I/O (no sockets, no files), reads a clock,
//! draws randomness it was not handed ([`Handshake::new_with_rng`]; `new`
//! uses the OS RNG by default), or spawns a task. It consumes and produces
//! byte buffers, so the tokio, std and codec adapters, the fuzzers and the
//! tests all exercise exactly the same protocol code. Key files live in
//! `crate::keyfile`, outside the core.

//! Each item has one public path: the types here (a frame's sizes are
//! [`FrameSize`]'s), and [`crate::Backend`] and [`crate::ProtocolError`]
//! at the crate root. The key schedule, the AuthSig codec and the wire's
//! other sizes are private; tests reach them through
//! `testkit::internals`.

pub(crate) mod aead;
pub(crate) mod auth_sig;
pub(crate) mod error;
pub(crate) mod frame;
pub(crate) mod handshake;
pub(crate) mod kdf;
pub(crate) mod varint;
pub(crate) mod wire;

pub(crate) use aead::Backend;
pub use aead::ParseBackendError;
pub(crate) use error::ProtocolError;
pub use frame::{FrameSize, Opener, SealBuf, Sealer};
pub use handshake::{Established, Handshake, HandshakeParams, Stage};
pub(crate) use wire::STANDARD_FRAME_SIZE;
