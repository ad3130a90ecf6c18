//! The wire's fixed sizes: one leaf module that every other part of the
//! core (the AEAD backends, the frame layer, the multi-frame engine, the
//! engine and the adapters) takes them from, so no two modules depend on
//! each other for a constant. `spec/wire-protocol.md` §4 is the normative
//! text. Public: the standard frame size and a frame's sealed length; the
//! rest is the crate's (tests reach it through `testkit::internals::wire`).
//!
//! ```text
//! plaintext (4 + F bytes):  LE u32 data_len | data[data_len] | zero padding[F - data_len]
//! sealed    (4 + F + 16):   ChaCha20-Poly1305(key, nonce, plaintext) = ciphertext | tag
//! nonce (12 bytes):         00 00 00 00 | LE u64 frame counter
//! ```

/// Length of the plaintext ephemeral-key message (`22 0a 20` and the key).
pub(crate) const EPH_MSG_LEN: usize = 35;
/// Length of the delimited Ed25519 AuthSigMessage, prefix included.
pub(crate) const AUTH_SIG_MSG_LEN: usize = 103;
/// Largest AuthSigMessage body we accept. An Ed25519 message is 102 bytes; the
/// bound keeps pre-authentication buffering small.
pub(crate) const MAX_AUTH_SIG_BODY: usize = 1024;
/// ChaCha20-Poly1305 key length.
pub(crate) const KEY_LEN: usize = 32;
/// ChaCha20-Poly1305 nonce length.
pub(crate) const NONCE_LEN: usize = 12;
/// Poly1305 tag length.
pub(crate) const TAG_LEN: usize = 16;
/// Bytes of the little-endian length prefix inside each frame.
pub(crate) const LEN_PREFIX: usize = 4;
/// Data bytes per frame on the standard CometBFT wire (outside:
/// `FrameSize::STANDARD`).
pub(crate) const STANDARD_FRAME_SIZE: usize = 1024;
/// Sealed bytes per frame on the standard CometBFT wire (1044).
// The multi-frame engines', the tests' and testkit's.
#[cfg_attr(
    not(any(test, feature = "testkit", feature = "avx512", feature = "avx2")),
    allow(dead_code)
)]
pub(crate) const STANDARD_SEALED_FRAME: usize = sealed_frame_len(STANDARD_FRAME_SIZE);
/// Smallest frame data size accepted in a non-standard profile.
pub(crate) const MIN_FRAME_SIZE: usize = 64;
/// Largest frame data size accepted in a non-standard profile (1 MiB).
pub(crate) const MAX_FRAME_SIZE: usize = 1 << 20;
/// Frames the multi-frame engine (`Backend::Avx512`) seals or opens at once.
pub(crate) const GROUP_FRAMES: usize = 16;

/// Sealed length of one frame of `frame_size` data bytes: the one place
/// the frame overhead is added.
pub(crate) const fn sealed_frame_len(frame_size: usize) -> usize {
    LEN_PREFIX + frame_size + TAG_LEN
}

/// Sealed bytes on the wire for a message of `len` data bytes in frames of
/// `frame_size`: one frame per started `frame_size` bytes (an empty
/// message is no frame at all). The one place a message's sealed size is
/// computed.
pub(crate) const fn sealed_len(len: usize, frame_size: usize) -> usize {
    len.div_ceil(frame_size) * sealed_frame_len(frame_size)
}

/// The nonce of frame `counter`: four zero bytes, then the counter in
/// little-endian order.
pub(crate) fn nonce_bytes(counter: u64) -> [u8; NONCE_LEN] {
    let mut n = [0u8; NONCE_LEN];
    n[4..].copy_from_slice(&counter.to_le_bytes());
    n
}
