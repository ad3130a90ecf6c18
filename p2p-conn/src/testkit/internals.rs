//! The engine's parts and the protocol's test hooks, for this crate's tests,
//! its fuzz targets and benchmarks. Nothing here is part of the stable API:
//! a production build never enables `testkit`, and these items may change
//! in any release.
//!
//! * The engine the adapters share ([`FrameReader`], [`FrameWriter`],
//!   [`ReadCore`], [`WriteCore`], the handshake driver, the queue's
//!   [`Budget`]), so tests can drive it over scripted transports.
//! * The key schedule ([`kdf`]) and the AuthSig codec ([`auth_sig`]), for
//!   known-answer vectors and hand-made handshakes, and [`cipher`], a
//!   cipher keyed with a chosen key.
//! * Constructors that pick what a real connection never lets anyone
//!   pick: a sealer or opener starting at a chosen frame counter (to test
//!   nonce exhaustion), a handshake with a chosen ephemeral secret (for
//!   known-answer vectors), and raw AEAD calls with a chosen counter (to
//!   forge or check frames by hand).

pub use crate::engine::budget::{Admission, Budget};
pub use crate::engine::writer::{Backlog, WRITE_BUFFER_KEEP};
pub use crate::engine::{
    poll_handshake, ready, unpoll, FrameReader, FrameWriter, PollIo, ReadCore, StdIo, WriteCore,
};
pub use crate::proto::varint::{read_uvarint, Varint};

pub use crate::proto::aead::Cipher;
use crate::Backend;

/// The handshake's key schedule: the Merlin transcript and the HKDF split
/// (`spec/wire-protocol.md` §1.5-1.7).
pub mod kdf {
    pub use crate::proto::kdf::{
        challenge, derive_keys, session, sort_keys, SessionKeys, HKDF_INFO, LABEL_CHALLENGE,
        LABEL_DH, LABEL_LOWER, LABEL_UPPER, TRANSCRIPT_LABEL,
    };
}

/// The wire's sizes the tests and fuzz targets compute with: the crate's
/// own (`proto::wire`, private; outside, [`crate::proto::FrameSize`] gives
/// a frame's sizes), copied here.
pub mod wire {
    use crate::proto::wire as w;

    /// Data bytes per frame on the standard CometBFT wire (1024).
    pub const STANDARD_FRAME_SIZE: usize = w::STANDARD_FRAME_SIZE;

    /// Sealed bytes of one frame of `frame_size` data bytes.
    pub const fn sealed_frame_len(frame_size: usize) -> usize {
        w::sealed_frame_len(frame_size)
    }

    /// Length of the plaintext ephemeral-key message.
    pub const EPH_MSG_LEN: usize = w::EPH_MSG_LEN;
    /// Length of the delimited Ed25519 AuthSigMessage, prefix included.
    pub const AUTH_SIG_MSG_LEN: usize = w::AUTH_SIG_MSG_LEN;
    /// Poly1305 tag length.
    pub const TAG_LEN: usize = w::TAG_LEN;
    /// Bytes of the length prefix inside each frame.
    pub const LEN_PREFIX: usize = w::LEN_PREFIX;
    /// Sealed bytes per standard frame (1044).
    pub const STANDARD_SEALED_FRAME: usize = w::STANDARD_SEALED_FRAME;

    /// Sealed bytes of a message of `len` bytes in frames of `frame_size`.
    pub const fn sealed_len(len: usize, frame_size: usize) -> usize {
        w::sealed_len(len, frame_size)
    }
}

/// libp2p Noise's sans-IO handshake and frames, which `noise::handshake`
/// and `NoiseStream` run (feature `noise`).
#[cfg(feature = "noise")]
pub mod noise {
    pub use crate::noise::handshake::{Handshake, Session};
    pub use crate::noise::transport::{Opened, Opener, Sealer};

    /// The most plaintext one Noise frame carries.
    pub const MAX_FRAME_PLAINTEXT: usize = crate::noise::MAX_FRAME_PLAINTEXT;
}

/// The AuthSigMessage codec (`spec/wire-protocol.md` §1.8).
pub mod auth_sig {
    pub use crate::proto::auth_sig::{decode, encode};
}

/// A cipher of `backend` keyed with `key` (a real connection's keys come
/// from its handshake).
pub fn cipher(backend: Backend, key: &[u8; 32]) -> Cipher {
    Cipher::new(backend, key)
}
use crate::proto::wire::{nonce_bytes, STANDARD_SEALED_FRAME, TAG_LEN};
#[cfg(any(feature = "avx512", feature = "avx2"))]
use crate::proto::wire::{GROUP_FRAMES, STANDARD_FRAME_SIZE};
use crate::proto::{FrameSize, Handshake, HandshakeParams, Opener, SealBuf, Sealer};
use crate::{Identity, ProtocolError};

/// What a [`Sealer`] does inside, for tests.
pub trait SealerHooks {
    /// Seal exactly one frame, even an empty one (the handshake's frame #0
    /// and a peer played by hand need that; application writes never send
    /// one).
    fn seal_frame<B: SealBuf + ?Sized>(
        &mut self,
        chunk: &[u8],
        out: &mut B,
    ) -> Result<(), ProtocolError>;
}

impl SealerHooks for Sealer {
    fn seal_frame<B: SealBuf + ?Sized>(
        &mut self,
        chunk: &[u8],
        out: &mut B,
    ) -> Result<(), ProtocolError> {
        Sealer::seal_frame(self, chunk, out)
    }
}

/// What an [`Opener`] counts, for tests.
pub trait OpenerHooks {
    /// Counter of the next frame to open.
    fn next_counter(&self) -> u64;
}

impl OpenerHooks for Opener {
    fn next_counter(&self) -> u64 {
        Opener::next_counter(self)
    }
}

/// How the adapters size a flush from a [`FrameSize`], for tests.
pub trait FrameSizeHooks {
    /// The largest multiple of the sealed frame length that is at most
    /// `bytes`, and at least one frame.
    fn whole_frames(self, bytes: usize) -> usize;
    /// Plaintext bytes one flush of `flush_size` sealed bytes carries.
    fn flush_chunk(self, flush_size: usize) -> usize;
}

impl FrameSizeHooks for FrameSize {
    fn whole_frames(self, bytes: usize) -> usize {
        FrameSize::whole_frames(self, bytes)
    }
    fn flush_chunk(self, flush_size: usize) -> usize {
        FrameSize::flush_chunk(self, flush_size)
    }
}

/// A [`Handshake`]'s own key, for tests.
pub trait HandshakeHooks {
    /// Our ephemeral X25519 public key.
    fn local_ephemeral_key(&self) -> [u8; 32];
}

impl HandshakeHooks for Handshake {
    fn local_ephemeral_key(&self) -> [u8; 32] {
        Handshake::local_ephemeral_key(self)
    }
}

/// A sealer of `cipher` whose first frame uses counter 0, as a handshake
/// makes one (only a handshake builds one outside these hooks).
pub fn sealer(cipher: Cipher, frame_size: FrameSize) -> Sealer {
    Sealer::new(cipher, frame_size)
}

/// An opener of `cipher` whose first frame uses counter 0.
pub fn opener(cipher: Cipher, frame_size: FrameSize) -> Opener {
    Opener::new(cipher, frame_size)
}

/// A sealer whose next frame uses `counter` (a real connection starts at 0).
pub fn sealer_at(cipher: Cipher, frame_size: FrameSize, counter: u64) -> Sealer {
    Sealer::with_counter(cipher, frame_size, counter)
}

/// An opener whose next frame uses `counter`.
pub fn opener_at(cipher: Cipher, frame_size: FrameSize, counter: u64) -> Opener {
    Opener::with_counter(cipher, frame_size, counter)
}

/// A handshake whose ephemeral X25519 secret is `secret` (raw bytes,
/// clamped per RFC 7748 when used): for known-answer tests.
pub fn handshake_with_ephemeral(
    identity: &Identity,
    params: HandshakeParams,
    secret: [u8; 32],
) -> Handshake {
    Handshake::with_ephemeral_secret(identity, params, secret)
}

/// Encrypt `buf` in place as frame `counter` and return the tag.
pub fn seal_at(cipher: &Cipher, counter: u64, buf: &mut [u8]) -> [u8; TAG_LEN] {
    cipher.seal_in_place(&nonce_bytes(counter), buf)
}

/// Seal whole standard frames in place, frame `i` under counter
/// `counter + i`, as the frame layer does: whole groups through the
/// cipher's multi-frame engine when it has one, the rest one at a time.
/// Each frame's first 1028 bytes are plaintext on entry; it is ciphertext
/// and tag on return. For benchmarks of the AEAD alone.
pub fn seal_frames(cipher: &Cipher, counter: u64, frames: &mut [u8]) {
    let grouped = grouped_len(cipher, frames.len());
    #[cfg(any(feature = "avx512", feature = "avx2"))]
    if let Some(engine) = cipher.group_engine(STANDARD_FRAME_SIZE) {
        engine.seal_groups(counter, &mut frames[..grouped]);
    }
    let first = (grouped / STANDARD_SEALED_FRAME) as u64;
    for (i, f) in frames[grouped..]
        .chunks_exact_mut(STANDARD_SEALED_FRAME)
        .enumerate()
    {
        let (plain, tag) = f.split_at_mut(STANDARD_SEALED_FRAME - TAG_LEN);
        tag.copy_from_slice(&seal_at(cipher, counter + first + i as u64, plain));
    }
}

/// Open whole standard frames sealed by [`seal_frames`] in place; `false`
/// if any tag does not verify.
pub fn open_frames(cipher: &Cipher, counter: u64, frames: &mut [u8]) -> bool {
    let grouped = grouped_len(cipher, frames.len());
    #[cfg(any(feature = "avx512", feature = "avx2"))]
    if let Some(engine) = cipher.group_engine(STANDARD_FRAME_SIZE) {
        if engine.open_groups(counter, &mut frames[..grouped]) * STANDARD_SEALED_FRAME != grouped {
            return false;
        }
    }
    let first = (grouped / STANDARD_SEALED_FRAME) as u64;
    frames[grouped..]
        .chunks_exact_mut(STANDARD_SEALED_FRAME)
        .enumerate()
        .all(|(i, f)| open_at(cipher, counter + first + i as u64, f))
}

/// The bytes of `len` that the cipher's multi-frame engine takes: whole
/// groups of standard frames, or none.
fn grouped_len(cipher: &Cipher, len: usize) -> usize {
    #[cfg(any(feature = "avx512", feature = "avx2"))]
    if cipher.group_engine(STANDARD_FRAME_SIZE).is_some() {
        let group = GROUP_FRAMES * STANDARD_SEALED_FRAME;
        return len / group * group;
    }
    let _ = (cipher, len);
    0
}

/// Decrypt `sealed = ciphertext || tag` in place as frame `counter`;
/// `false` if the tag does not verify.
pub fn open_at(cipher: &Cipher, counter: u64, sealed: &mut [u8]) -> bool {
    cipher.open_in_place(&nonce_bytes(counter), sealed).is_ok()
}
