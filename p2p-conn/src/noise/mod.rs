//! libp2p's Noise secure channel (feature `noise`): what CometBFT v0.40's
//! `noise://` remote-signer transport runs straight on TCP (go-libp2p's
//! `p2p/security/noise`, `SecureInbound`/`SecureOutbound`, without
//! multistream-select).
//!
//! # Design
//! - `Noise_XX_25519_ChaChaPoly_SHA256`, empty prologue, through the
//!   [`snow`](https://docs.rs/snow) crate's handshake state machine.
//!   snow gets its primitives from this crate: X25519 (x25519-dalek, a
//!   shared secret of all zeros refused), SHA-256, and the same
//!   ChaCha20-Poly1305 backends the secret connection seals with. The
//!   randomness is passed in: the core is sans-IO (the crate's own; its
//!   tests and fuzz target reach it through `testkit::internals::noise`).
//! - Every message, handshake or transport, is a 2-byte big-endian length
//!   and at most 65535 bytes. The handshake payload is libp2p's
//!   `NoiseHandshakePayload`: the sender's Ed25519 key in libp2p's
//!   encoding and its signature of `"noise-libp2p-static-key:"` and its
//!   Noise static key. The static key is fresh per session, as go-libp2p
//!   makes it; the identity is the Ed25519 key, named by its
//!   [`PeerId`].
//! - After the handshake, a sealer seals a write into whole frames (at
//!   most 65519 plaintext bytes each) in one buffer, and an opener opens
//!   frames in place, with Noise's nonce (four zero bytes and a
//!   little-endian counter).
//! - What a user calls: [`handshake()`] runs the handshake over a tokio
//!   stream under a timeout, and the [`NoiseStream`] it returns drives the
//!   frames: `AsyncRead`, `AsyncBufRead` and `AsyncWrite` (feature `noise`
//!   brings `tokio`).
//!
//! # Guarantees
//! - Before the peer is authenticated, nothing is buffered beyond one
//!   handshake message: a length over 4 KiB (libp2p's messages are under
//!   300 bytes) fails with
//!   [`NoiseError::MessageTooLong`] before its body is read.
//! - A payload whose key is not Ed25519 ([`NoiseError::KeyType`]), whose
//!   signature does not verify ([`NoiseError::BadSignature`]), that does
//!   not parse ([`NoiseError::Payload`]), or whose key is not the
//!   expected peer's ([`NoiseError::UnexpectedPeer`]) fails the
//!   handshake. The initiator checks the responder before it sends its
//!   own identity.
//! - No panics on any peer input; a frame that fails its tag ends the
//!   session, and so does nonce exhaustion. A failed write poisons the
//!   stream, so a frame is never sealed twice under one nonce.
//! - The handshake never uses bytes past its last message: transport
//!   frames that arrive with it are kept.
//!
//! # Not provided
//! - multistream-select, stream muxers and early data (the payload's
//!   extensions are read past and none are sent): `noise://` privval has
//!   none of them.
//! - Key types other than Ed25519, and rekeying.
//! - Holding a peer's Noise static key between sessions: identities are
//!   the Ed25519 keys.

mod crypto;
pub(crate) mod handshake;
mod payload;
mod stream;
pub(crate) mod transport;

pub use handshake::Role;
pub use stream::{handshake, NoiseStream};

use std::time::Duration;

use crate::PeerId;

/// The longest handshake message read (after its 2-byte length): far
/// above libp2p's (under 300 bytes), far below Noise's 65535.
pub(crate) const MAX_HANDSHAKE_MESSAGE: usize = 4096;
/// The longest transport frame after its length: Noise's limit, tag
/// included.
pub(crate) const MAX_FRAME: usize = 65535;
/// The most plaintext one frame carries.
pub(crate) const MAX_FRAME_PLAINTEXT: usize = MAX_FRAME - 16;

/// Why a Noise handshake or session failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NoiseError {
    /// The socket failed.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// The handshake did not finish in time.
    #[error("the Noise handshake did not finish within {0:?}")]
    Timeout(Duration),
    /// The peer closed the connection during the handshake.
    #[error("the peer closed the connection during the Noise handshake")]
    Closed,
    /// A handshake message longer than this side reads.
    #[error("a Noise handshake message of {len} bytes (at most {max} read)")]
    MessageTooLong {
        /// The length the peer announced.
        len: usize,
        /// The most read (4 KiB).
        max: usize,
    },
    /// A transport frame shorter than its 16-byte tag.
    #[error("a Noise frame of {0} bytes, shorter than its tag")]
    FrameTooShort(usize),
    /// A message failed authentication (wrong key, tampered, replayed or
    /// reordered).
    #[error("a Noise message failed authentication")]
    Decrypt,
    /// The peer's X25519 key gave an all-zero shared secret.
    #[error("the peer's X25519 key is of low order")]
    LowOrderKey,
    /// The handshake payload does not parse.
    #[error("bad Noise handshake payload: {0}")]
    Payload(&'static str),
    /// The payload's identity key is of a type other than Ed25519
    /// (libp2p's key type number: 0 RSA, 2 secp256k1, 3 ECDSA).
    #[error("the peer's identity key is of libp2p key type {0}, not Ed25519")]
    KeyType(u64),
    /// The payload's signature of the Noise static key does not verify.
    #[error("the peer's identity signature does not verify")]
    BadSignature,
    /// The peer proved an identity other than the one required.
    #[error("expected peer {expected}, got {got}")]
    UnexpectedPeer {
        /// The identity required.
        expected: PeerId,
        /// The identity the peer proved.
        got: PeerId,
    },
    /// The session used its last nonce.
    #[error("the Noise session used its last nonce")]
    NonceExhausted,
    /// An earlier error ended this handshake or session.
    #[error("the Noise session failed earlier")]
    Poisoned,
    /// The Noise state machine refused a message (its lengths or its
    /// order).
    #[error("Noise protocol error: {0}")]
    Protocol(String),
}

impl From<NoiseError> for std::io::Error {
    fn from(e: NoiseError) -> std::io::Error {
        match e {
            NoiseError::Io(e) => e,
            NoiseError::Timeout(_) => std::io::Error::new(std::io::ErrorKind::TimedOut, e),
            NoiseError::Closed => std::io::Error::new(std::io::ErrorKind::UnexpectedEof, e),
            other => std::io::Error::new(std::io::ErrorKind::InvalidData, other),
        }
    }
}

#[cfg(all(test, feature = "testkit"))]
mod tests;
