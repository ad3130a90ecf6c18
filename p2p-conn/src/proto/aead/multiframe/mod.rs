//! ChaCha20-Poly1305 over sixteen standard frames at once, behind
//! [`Backend::Avx512`](super::Backend) (AVX-512 with IFMA) and
//! `Backend::Avx2` (AVX2 and BMI2).
//!
//! # Design
//! Every CometBFT frame is 1028 plaintext bytes sealed under the connection's
//! key with the next nonce (`00000000 || le64(counter)`). One-frame-at-a-time
//! implementations (ring, Go's x/crypto: both a stitched AVX2 ChaCha20 +
//! Poly1305) pay about 30% of their time per frame in setup: the Poly1305
//! key block, the 4-byte tail block, finalisation. This engine takes a group
//! of 16 consecutive frames and gives each frame one SIMD lane of ChaCha20:
//! all lanes compute block `j` of their own frame (same block index, nonces
//! `counter + lane`); block 0 is each frame's Poly1305 key, blocks 1..=17
//! its keystream. Two kernels, chosen by the backend:
//!
//! * AVX-512 IFMA ([`avx512`]): ChaCha20 in 16 lanes of 32-bit words.
//!   Poly1305 in one 64-bit lane per frame, eight per register, two
//!   registers. Each lane has its own `r` and `s`, so every 16-byte block
//!   step is `h = (h + m) * r mod 2^130 - 5` with no precomputed powers of
//!   `r`; limbs are radix 2^44 (44/44/42 bits) multiplied with IFMA
//!   (`vpmadd52luq/huq`), carries kept lazy (bounds at [`avx512`]'s
//!   `poly_block`). The final reduction and `+ s` are scalar per frame.
//! * AVX2 ([`avx2`]): each half of the group in 8 lanes of ChaCha20 on the
//!   vector units, stitched with scalar radix-2^64 Poly1305 (`mulx`) on the
//!   integer units, one accumulator per frame: the two kinds of work run
//!   side by side (an AVX2 Poly1305 would compete with ChaCha20 for the
//!   vector units; measured slower than ring).
//!
//! # Guarantees
//! * Byte-identical to RFC 8439 ChaCha20-Poly1305 per frame: the tests
//!   compare every group of every kernel against the one-frame backends,
//!   for counters that are random, cross 2^32 and end at `u64::MAX`.
//! * [`Engine::open_groups`] stops at the first frame whose tag fails:
//!   frames before it are plaintext, it and everything after are left as
//!   received ciphertext. No unauthenticated plaintext is left behind: the
//!   AVX-512 kernel checks a group's tags before it decrypts; the AVX2
//!   kernel decrypts eight frames while it authenticates them and, when a
//!   tag fails, XORs the keystream back over that frame and the ones after
//!   it before returning.
//! * Whole groups only: callers seal or open leftover frames one at a time
//!   (a partial group costs as much as a full one).
//! * A kernel exists only on x86_64 CPUs with its instructions, detected at
//!   run time ([`Engine::new`] returns `None` elsewhere). All SIMD code
//!   sits behind that check; the `unsafe` blocks and their invariants are
//!   in [`avx512`] and [`avx2`].
//!
//! # Not provided
//! * Counter arithmetic is the caller's: it must hand in groups only when
//!   no frame's counter wraps. The frame layer's nonce accounting
//!   guarantees it, which is why this module is crate-private; the engine
//!   still refuses (panics on) a batch whose counters would wrap, so a
//!   future caller's bug cannot reuse a nonce.
//! * Other frame sizes; CPUs without AVX2.
//! * Key wiping of SIMD register spills: the key words and the one-time
//!   Poly1305 keys are zeroised in memory this module owns, but copies the
//!   compiler spills to the stack are not.

// On other architectures the engine is a stub whose constructor always
// returns `None` (the backend is then exactly its one-frame backend), so
// the scalar Poly1305 helpers and the key words of the x86_64 kernels are
// compiled but never reached.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]

#[cfg(all(target_arch = "x86_64", feature = "avx2"))]
#[allow(unsafe_code)]
mod avx2;
#[cfg(all(target_arch = "x86_64", feature = "avx512"))]
#[allow(unsafe_code)]
mod avx512;

use crate::proto::wire::{GROUP_FRAMES, LEN_PREFIX, STANDARD_FRAME_SIZE, STANDARD_SEALED_FRAME};
use zeroize::{Zeroize, Zeroizing};

/// Frames per group.
pub const GROUP: usize = GROUP_FRAMES;
/// Bytes of data per frame the engine handles.
pub(crate) const DATA_LEN: usize = STANDARD_FRAME_SIZE;
/// Plaintext bytes per frame: length prefix and data.
pub(crate) const PLAIN_LEN: usize = LEN_PREFIX + STANDARD_FRAME_SIZE;
/// Sealed bytes per frame.
pub(crate) const SEALED_LEN: usize = STANDARD_SEALED_FRAME;
/// ChaCha20 blocks per frame: block 0 keys Poly1305, blocks 1..=17 encrypt
/// (block 17 covers the last 4 bytes).
pub(crate) const CHACHA_BLOCKS: u32 = 18;
/// Bytes of one group of sealed frames.
pub const GROUP_BYTES: usize = GROUP * SEALED_LEN;

/// One-time Poly1305 keys of a group, one per lane.
#[cfg(feature = "avx512")]
pub(crate) type Keys = [[u8; 32]; GROUP];

/// Which kernel an [`Engine`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// AVX-512F/BW/IFMA (feature `avx512`).
    #[cfg(feature = "avx512")]
    Avx512,
    /// AVX2 and BMI2 (feature `avx2`).
    #[cfg(feature = "avx2")]
    Avx2,
}

/// A keyed multi-frame engine.
pub struct Engine {
    key: Zeroizing<[u32; 8]>,
    #[cfg(target_arch = "x86_64")]
    simd: Simd,
}

/// The kernel token: proof that this CPU runs it.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
enum Simd {
    #[cfg(feature = "avx512")]
    Avx512(avx512::Avx512),
    #[cfg(feature = "avx2")]
    Avx2(avx2::Avx2),
}

#[cfg(target_arch = "x86_64")]
impl Simd {
    fn detect(kind: Kind) -> Option<Simd> {
        match kind {
            #[cfg(feature = "avx512")]
            Kind::Avx512 => avx512::Avx512::detect().map(Simd::Avx512),
            #[cfg(feature = "avx2")]
            Kind::Avx2 => avx2::Avx2::detect().map(Simd::Avx2),
        }
    }
}

impl Engine {
    /// An engine of `kind` for `key`, or `None` when this CPU cannot run
    /// that kernel (or is not x86_64, or the kernel is not compiled in).
    pub fn new(kind: Kind, key: &[u8; 32]) -> Option<Engine> {
        #[cfg(target_arch = "x86_64")]
        {
            let simd = Simd::detect(kind)?;
            let mut words = Zeroizing::new([0u32; 8]);
            for (w, bytes) in words.iter_mut().zip(key.chunks_exact(4)) {
                *w = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
            }
            Some(Engine { key: words, simd })
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (kind, key);
            None
        }
    }

    /// Whether this CPU can run the kernel of `kind`.
    pub fn available(kind: Kind) -> bool {
        #[cfg(target_arch = "x86_64")]
        return Simd::detect(kind).is_some();
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = kind;
            false
        }
    }

    /// Seal whole groups in place. `frames` holds `k * GROUP` standard frames
    /// back to back: on entry bytes `0..1028` of each are plaintext (bytes
    /// `1028..1044` are ignored), on return they are ciphertext followed by
    /// the tag. Frame `i` uses counter `counter + i`, which must not wrap.
    ///
    /// # Panics
    /// If `frames.len()` is not a multiple of [`GROUP_BYTES`], or a frame's
    /// counter would wrap past `u64::MAX` (caller bugs; the frame layer
    /// checks both before calling).
    pub fn seal_groups(&self, counter: u64, frames: &mut [u8]) {
        check_batch(counter, frames);
        #[cfg(target_arch = "x86_64")]
        match self.simd {
            #[cfg(feature = "avx512")]
            Simd::Avx512(k) => {
                let mut keys = Zeroizing::new([[0u8; 32]; GROUP]);
                let mut tags = [[0u8; 16]; GROUP];
                for (g, group) in frames.chunks_exact_mut(GROUP_BYTES).enumerate() {
                    let ctr = counter.wrapping_add((g * GROUP) as u64);
                    k.chacha(&self.key, ctr, group, GROUP, 0, CHACHA_BLOCKS, &mut keys);
                    k.tags(&keys, group, &mut tags);
                    for (frame, tag) in group.chunks_exact_mut(SEALED_LEN).zip(&tags) {
                        frame[PLAIN_LEN..].copy_from_slice(tag);
                    }
                }
            }
            #[cfg(feature = "avx2")]
            Simd::Avx2(k) => {
                for (h, half) in frames.chunks_exact_mut(avx2::HALF_BYTES).enumerate() {
                    let ctr = counter.wrapping_add((h * avx2::LANES) as u64);
                    k.seal(&self.key, ctr, half_of(half));
                }
            }
        }
    }

    /// Authenticate and decrypt whole groups in place (the reverse of
    /// [`Self::seal_groups`]) and return how many frames are now plaintext:
    /// all of them, or the index of the first frame whose tag failed. That
    /// frame and every later one are left untouched.
    ///
    /// # Panics
    /// As [`Self::seal_groups`].
    pub fn open_groups(&self, counter: u64, frames: &mut [u8]) -> usize {
        check_batch(counter, frames);
        #[cfg(target_arch = "x86_64")]
        match self.simd {
            #[cfg(feature = "avx512")]
            Simd::Avx512(k) => {
                let mut keys = Zeroizing::new([[0u8; 32]; GROUP]);
                let mut tags = [[0u8; 16]; GROUP];
                for (g, group) in frames.chunks_exact_mut(GROUP_BYTES).enumerate() {
                    let ctr = counter.wrapping_add((g * GROUP) as u64);
                    // Poly1305 keys only, then every tag, before any decryption.
                    k.chacha(&self.key, ctr, group, GROUP, 0, 1, &mut keys);
                    k.tags(&keys, group, &mut tags);
                    let good = group
                        .chunks_exact(SEALED_LEN)
                        .zip(&tags)
                        .take_while(|(frame, tag)| tags_equal(tag, &frame[PLAIN_LEN..]))
                        .count();
                    // Decrypt the authenticated frames only.
                    if good > 0 {
                        k.chacha(&self.key, ctr, group, good, 1, CHACHA_BLOCKS, &mut keys);
                    }
                    if good < GROUP {
                        return g * GROUP + good;
                    }
                }
            }
            #[cfg(feature = "avx2")]
            Simd::Avx2(k) => {
                for (h, half) in frames.chunks_exact_mut(avx2::HALF_BYTES).enumerate() {
                    let ctr = counter.wrapping_add((h * avx2::LANES) as u64);
                    let good = k.open(&self.key, ctr, half_of(half));
                    if good < avx2::LANES {
                        return h * avx2::LANES + good;
                    }
                }
            }
        }
        frames.len() / SEALED_LEN
    }
}

/// A whole half-group as the AVX2 kernel's fixed-size array.
#[cfg(all(target_arch = "x86_64", feature = "avx2"))]
fn half_of(s: &mut [u8]) -> &mut avx2::Half {
    s.try_into()
        .unwrap_or_else(|_| unreachable!("chunks_exact gives whole halves"))
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").finish_non_exhaustive()
    }
}

/// Whole groups, and counters `counter..counter + frames` all below 2^64.
fn check_batch(counter: u64, frames: &[u8]) {
    assert_eq!(frames.len() % GROUP_BYTES, 0, "whole groups only");
    let n = (frames.len() / SEALED_LEN) as u64;
    assert!(
        n == 0 || counter.checked_add(n - 1).is_some(),
        "frame counters would wrap"
    );
}

/// Constant-time comparison of a computed and a received tag.
fn tags_equal(computed: &[u8; 16], received: &[u8]) -> bool {
    let diff = computed
        .iter()
        .zip(received)
        .fold(0u8, |acc, (a, b)| acc | (a ^ b));
    std::hint::black_box(diff) == 0
}

const R_CLAMP: u128 = 0x0fff_fffc_0fff_fffc_0fff_fffc_0fff_ffff;

/// Poly1305's clamped `r` from a one-time key.
pub(crate) fn poly_r(key: &[u8; 32]) -> u128 {
    let mut r = [0u8; 16];
    r.copy_from_slice(&key[..16]);
    let v = u128::from_le_bytes(r) & R_CLAMP;
    r.zeroize();
    v
}

/// `acc += v << shift` over 256-bit little-endian words.
#[cfg(feature = "avx512")]
fn add_shifted(acc: &mut [u64; 4], v: u64, shift: u32) {
    let word = (shift / 64) as usize;
    let x = u128::from(v) << (shift % 64);
    let parts = [x as u64, (x >> 64) as u64];
    let mut carry = 0u128;
    for (k, slot) in acc.iter_mut().enumerate().skip(word) {
        let add = parts.get(k - word).copied().map_or(0, u128::from);
        let s = u128::from(*slot) + add + carry;
        *slot = s as u64;
        carry = s >> 64;
    }
}

/// The tag from a lazily reduced accumulator: `((h mod p) + s) mod 2^128`,
/// where `h = sum(limbs[k] << shifts[k])`, every limb below 2^63 and `h`
/// below 2^192. A fixed sequence of operations (no data-dependent branch).
#[cfg(feature = "avx512")]
pub(crate) fn poly_finish(limbs: &[u64; 3], shifts: &[u32; 3], key: &[u8; 32]) -> [u8; 16] {
    let mut acc = [0u64; 4];
    for (l, s) in limbs.iter().zip(shifts) {
        add_shifted(&mut acc, *l, *s);
    }
    // Fold the bits at and above 2^130 back in (2^130 = 5 mod p) three
    // times: from h < 2^192 each fold shrinks the excess until h < 2^130.
    for _ in 0..3 {
        let hi = (acc[2] >> 2) | (acc[3] << 62);
        acc[2] &= 3;
        acc[3] = 0;
        add_shifted(&mut acc, hi, 0);
        add_shifted(&mut acc, hi, 2);
    }
    let v = u128::from(acc[0]) | (u128::from(acc[1]) << 64);
    let g = v.wrapping_add(5);
    let carry = u64::from(g < v);
    // h >= p exactly when h + 5 reaches 2^130.
    let select = ((acc[2] + carry) >> 2) & 1;
    let mask = 0u128.wrapping_sub(u128::from(select));
    let h = (v & !mask) | (g & mask);
    let mut s = [0u8; 16];
    s.copy_from_slice(&key[16..]);
    let tag = h.wrapping_add(u128::from_le_bytes(s)).to_le_bytes();
    s.zeroize();
    acc.zeroize();
    tag
}

#[cfg(test)]
mod tests;
