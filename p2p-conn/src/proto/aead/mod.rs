//! The one small AEAD interface the frame layer needs, and its two backends.
//!
//! Both backends implement IETF ChaCha20-Poly1305 (RFC 8439: 32-byte key, 12-byte
//! nonce, 16-byte tag; associated data only for Noise's handshake, feature `noise`).
//! They are interchangeable bit for bit;
//! the same known-answer vectors and property tests run against each.
//!
//! * `Backend::Ring` (feature `ring`): `ring`'s assembly implementation,
//!   one frame at a time: the fastest one-frame backend measured
//!   (`docs/performance.md`, "AEAD backends"), so the default when compiled
//!   in and `Backend::Avx512` cannot run.
//! * [`Backend::RustCrypto`]: the pure-Rust `chacha20poly1305` crate. Always
//!   compiled, so a build with no features at all works and is pure Rust;
//!   the default when `ring` is off.
//! * `Backend::Avx512` (feature `avx512`): on CPUs with AVX-512 IFMA,
//!   p2p-conn's own engine (`proto::aead::multiframe`, private) seals and opens whole
//!   groups of 16 standard frames at once; single frames, other frame sizes
//!   and other CPUs go to ring (RustCrypto without the `ring` feature). The
//!   default when compiled in and the CPU has the instructions.
//! * `Backend::Avx2` (feature `avx2`): the same engine's AVX2 kernel, for
//!   CPUs with AVX2 and BMI2 (x86_64 since Haswell and Zen), with the same
//!   fallback. The default when compiled in and `Backend::Avx512` cannot
//!   run.
//!
//! The interface is deliberately tiny: seal a buffer in place and return the tag;
//! open a `ciphertext || tag` buffer in place (each with optional associated
//! data). Nonce construction lives in
//! [`super::frame`], not here. Each one-frame backend has its own file
//! (`ring.rs`, `rustcrypto.rs`); the multi-frame engine is `proto::aead::multiframe`.

use zeroize::Zeroizing;

#[cfg(any(feature = "avx512", feature = "avx2"))]
mod multiframe;
#[cfg(feature = "ring")]
mod ring;
mod rustcrypto;

use super::wire::{KEY_LEN, NONCE_LEN, TAG_LEN};

/// Which ChaCha20-Poly1305 implementation seals and opens frames. Only the
/// backends whose features are enabled exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Backend {
    /// `ring` (assembly, runtime CPU feature detection). The default when
    /// compiled in (feature `ring`).
    #[cfg(feature = "ring")]
    Ring,
    /// RustCrypto `chacha20poly1305` (pure Rust). Always compiled: it is
    /// the backend of a build without `ring`.
    RustCrypto,
    /// Groups of 16 standard frames through p2p-conn's AVX-512 IFMA engine,
    /// everything else through ring (RustCrypto without `ring`). On a CPU
    /// without AVX-512 IFMA it is exactly that one-frame backend; see
    /// [`Backend::accelerated`]. Feature `avx512`.
    #[cfg(feature = "avx512")]
    Avx512,
    /// Groups of 16 standard frames through p2p-conn's AVX2 engine (eight
    /// frames per ChaCha20 pass, Poly1305 on the integer units beside it),
    /// everything else through ring (RustCrypto without `ring`). On a CPU
    /// without AVX2 and BMI2 it is exactly that one-frame backend. Feature
    /// `avx2`.
    #[cfg(feature = "avx2")]
    Avx2,
}

impl Default for Backend {
    /// `Avx512` when compiled in and this CPU runs it, else `Avx2` when
    /// compiled in and this CPU runs it, else `Ring` when compiled in, else
    /// `RustCrypto`. [`Backend::default_reason`] says which rule chose.
    fn default() -> Self {
        Backend::choose().0
    }
}

impl Backend {
    /// Every compiled-in backend, for tests and benchmarks that run them all.
    pub const ALL: &'static [Backend] = &[
        #[cfg(feature = "ring")]
        Backend::Ring,
        Backend::RustCrypto,
        #[cfg(feature = "avx512")]
        Backend::Avx512,
        #[cfg(feature = "avx2")]
        Backend::Avx2,
    ];

    /// Short lowercase name, as accepted by the CLI's `--backend`.
    pub fn name(self) -> &'static str {
        match self {
            #[cfg(feature = "ring")]
            Backend::Ring => "ring",
            Backend::RustCrypto => "rustcrypto",
            #[cfg(feature = "avx512")]
            Backend::Avx512 => "avx512",
            #[cfg(feature = "avx2")]
            Backend::Avx2 => "avx2",
        }
    }

    /// Whether this backend seals and opens groups of frames at once on this
    /// CPU (`Avx512` on a CPU with AVX-512 IFMA, `Avx2` on one with AVX2 and
    /// BMI2); `false` means one frame at a time.
    pub fn accelerated(self) -> bool {
        #[cfg(any(feature = "avx512", feature = "avx2"))]
        return self
            .engine_kind()
            .is_some_and(multiframe::Engine::available);
        #[cfg(not(any(feature = "avx512", feature = "avx2")))]
        false
    }

    /// Why [`Backend::default`] chose the backend it chose on this CPU and
    /// in this build, in a few words (for logs and the CLI's `bench`).
    pub fn default_reason() -> &'static str {
        Backend::choose().1
    }

    /// The default and the rule that chose it: the one place that rule is.
    fn choose() -> (Backend, &'static str) {
        #[cfg(feature = "avx512")]
        if Backend::Avx512.accelerated() {
            return (Backend::Avx512, "this CPU has AVX-512 IFMA");
        }
        #[cfg(feature = "avx2")]
        if Backend::Avx2.accelerated() {
            return (
                Backend::Avx2,
                if cfg!(feature = "avx512") {
                    "this CPU has AVX2 but not AVX-512 IFMA"
                } else {
                    "this CPU has AVX2 (the avx512 feature is off)"
                },
            );
        }
        let why = if cfg!(any(feature = "avx512", feature = "avx2")) {
            "this CPU has neither AVX-512 IFMA nor AVX2: one frame at a time"
        } else {
            "no multi-frame engine compiled in: one frame at a time"
        };
        (Backend::single_frame(), why)
    }

    /// The multi-frame kernel this backend runs where the CPU allows.
    #[cfg(any(feature = "avx512", feature = "avx2"))]
    fn engine_kind(self) -> Option<multiframe::Kind> {
        match self {
            #[cfg(feature = "avx512")]
            Backend::Avx512 => Some(multiframe::Kind::Avx512),
            #[cfg(feature = "avx2")]
            Backend::Avx2 => Some(multiframe::Kind::Avx2),
            _ => None,
        }
    }

    /// The fastest one-frame backend compiled in.
    fn single_frame() -> Backend {
        #[cfg(feature = "ring")]
        return Backend::Ring;
        #[cfg(not(feature = "ring"))]
        return Backend::RustCrypto;
    }
}

/// Why a name is not a [`Backend`] of this build.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ParseBackendError {
    /// No backend has this name.
    #[error(
        "unknown AEAD backend {0:?} (expected \"avx512\", \"avx2\", \"ring\" or \"rustcrypto\")"
    )]
    Unknown(String),
    /// The backend exists, but its feature is not compiled in.
    #[error("AEAD backend {0:?} is not compiled in (enable the {0:?} feature)")]
    NotCompiledIn(&'static str),
}

impl std::str::FromStr for Backend {
    type Err = ParseBackendError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let name = match s {
            "ring" => "ring",
            "rustcrypto" | "rust-crypto" | "chacha20poly1305" => "rustcrypto",
            "avx512" => "avx512",
            "avx2" => "avx2",
            other => return Err(ParseBackendError::Unknown(other.to_string())),
        };
        Backend::ALL
            .iter()
            .copied()
            .find(|b| b.name() == name)
            .ok_or(ParseBackendError::NotCompiledIn(name))
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Tag verification failed: the bytes were not sealed with this key and nonce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OpenFailed;

/// A keyed ChaCha20-Poly1305 instance of one backend.
///
/// Key material: the RustCrypto cipher wipes its key on drop. `ring` keeps its
/// key schedule in memory it owns and does not wipe it; where that matters,
/// use [`Backend::RustCrypto`].
pub struct Cipher {
    backend: Backend,
    inner: Inner,
    /// The multi-frame engine (`Backend::Avx512` or `Backend::Avx2` on a
    /// CPU that runs it).
    #[cfg(any(feature = "avx512", feature = "avx2"))]
    multi: Option<multiframe::Engine>,
}

enum Inner {
    #[cfg(feature = "ring")]
    Ring(ring::RingKey),
    RustCrypto(rustcrypto::RustCryptoKey),
}

impl Cipher {
    /// Key a cipher of the given backend.
    pub(crate) fn new(backend: Backend, key: &[u8; KEY_LEN]) -> Self {
        let key = Zeroizing::new(*key);
        #[cfg(any(feature = "avx512", feature = "avx2"))]
        let (single, multi) = match backend.engine_kind() {
            Some(kind) => (Backend::single_frame(), multiframe::Engine::new(kind, &key)),
            None => (backend, None),
        };
        #[cfg(not(any(feature = "avx512", feature = "avx2")))]
        let single = backend;
        let inner = match single {
            #[cfg(feature = "ring")]
            Backend::Ring => Inner::Ring(ring::RingKey::new(key)),
            Backend::RustCrypto => Inner::RustCrypto(rustcrypto::RustCryptoKey::new(&key)),
            #[cfg(feature = "avx512")]
            Backend::Avx512 => unreachable!("mapped to its one-frame backend above"),
            #[cfg(feature = "avx2")]
            Backend::Avx2 => unreachable!("mapped to its one-frame backend above"),
        };
        Cipher {
            backend,
            inner,
            #[cfg(any(feature = "avx512", feature = "avx2"))]
            multi,
        }
    }

    /// Free the expanded key (it is rebuilt on the next frame): for a
    /// connection that has gone idle, and after the handshake, whose frame
    /// #0 expanded both.
    pub(crate) fn release(&mut self) {
        #[cfg(feature = "ring")]
        if let Inner::Ring(r) = &mut self.inner {
            r.release();
        }
    }

    /// Expand the key for the one-frame backend if that is not done yet
    /// (ring: see `ring::RingKey`); the sealer and the opener call this
    /// before each frame, so only a connection that moves data pays the
    /// memory.
    #[inline]
    pub(crate) fn warm(&mut self) {
        #[cfg(feature = "ring")]
        if let Inner::Ring(r) = &mut self.inner {
            r.warm();
        }
    }

    /// The multi-frame engine, when this cipher has one and frames are of
    /// the standard size (the only size it handles).
    #[cfg(any(feature = "avx512", feature = "avx2"))]
    pub(crate) fn group_engine(&self, frame_size: usize) -> Option<&multiframe::Engine> {
        self.multi
            .as_ref()
            .filter(|_| frame_size == super::wire::STANDARD_FRAME_SIZE)
    }

    /// Encrypt `buf` in place and return the tag.
    pub(crate) fn seal_in_place(&self, nonce: &[u8; NONCE_LEN], buf: &mut [u8]) -> [u8; TAG_LEN] {
        self.seal_in_place_ad(nonce, &[], buf)
    }

    /// Encrypt `buf` in place, authenticating `ad` too (Noise's handshake
    /// hash), and return the tag.
    pub(crate) fn seal_in_place_ad(
        &self,
        nonce: &[u8; NONCE_LEN],
        ad: &[u8],
        buf: &mut [u8],
    ) -> [u8; TAG_LEN] {
        match &self.inner {
            #[cfg(feature = "ring")]
            Inner::Ring(r) => r.seal(nonce, ad, buf),
            Inner::RustCrypto(c) => c.seal(nonce, ad, buf),
        }
    }

    /// Decrypt `sealed = ciphertext || tag` in place. On success the plaintext is
    /// `sealed[..sealed.len() - TAG_LEN]`. On failure the buffer content is
    /// unspecified and must be discarded.
    pub(crate) fn open_in_place(
        &self,
        nonce: &[u8; NONCE_LEN],
        sealed: &mut [u8],
    ) -> Result<(), OpenFailed> {
        self.open_in_place_ad(nonce, &[], sealed)
    }

    /// [`Self::open_in_place`] of bytes sealed with associated data `ad`.
    pub(crate) fn open_in_place_ad(
        &self,
        nonce: &[u8; NONCE_LEN],
        ad: &[u8],
        sealed: &mut [u8],
    ) -> Result<(), OpenFailed> {
        if sealed.len() < TAG_LEN {
            return Err(OpenFailed);
        }
        match &self.inner {
            #[cfg(feature = "ring")]
            Inner::Ring(r) => r.open(nonce, ad, sealed),
            Inner::RustCrypto(c) => c.open(nonce, ad, sealed),
        }
    }
}

impl std::fmt::Debug for Cipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cipher")
            .field("backend", &self.backend)
            .field("accelerated", &self.backend.accelerated())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backends_agree_and_reject_tampering() {
        let key = [7u8; 32];
        let nonce = [1u8; 12];
        let msg: Vec<u8> = (0..1028u32).map(|i| i as u8).collect();
        let mut sealed = Vec::new();
        for &b in Backend::ALL {
            let c = Cipher::new(b, &key);
            let mut buf = msg.clone();
            let tag = c.seal_in_place(&nonce, &mut buf);
            buf.extend_from_slice(&tag);
            sealed.push(buf);
        }
        for other in &sealed[1..] {
            assert_eq!(&sealed[0], other);
        }
        for &b in Backend::ALL {
            let c = Cipher::new(b, &key);
            let mut ok = sealed[0].clone();
            c.open_in_place(&nonce, &mut ok).unwrap();
            assert_eq!(&ok[..msg.len()], &msg[..]);
            let mut bad = sealed[0].clone();
            bad[5] ^= 1;
            assert_eq!(c.open_in_place(&nonce, &mut bad), Err(OpenFailed));
            let mut short = vec![0u8; 3];
            assert_eq!(c.open_in_place(&nonce, &mut short), Err(OpenFailed));
        }
    }

    /// An idle cipher holds its 32-byte key, not ring's 544-byte expanded
    /// key: that is expanded on the first frame (and sealing or opening
    /// without it gives the same bytes).
    #[test]
    fn the_expanded_key_is_built_on_first_use() {
        let size = std::mem::size_of::<Cipher>();
        assert!(size <= 128, "Cipher is {size} bytes");
        let key = [9u8; 32];
        let nonce = [3u8; 12];
        for &b in Backend::ALL {
            let cold = Cipher::new(b, &key);
            let mut warm = Cipher::new(b, &key);
            warm.warm();
            let (mut x, mut y) = (vec![5u8; 100], vec![5u8; 100]);
            assert_eq!(
                cold.seal_in_place(&nonce, &mut x),
                warm.seal_in_place(&nonce, &mut y)
            );
            assert_eq!(x, y, "{b}");
        }
    }
}
