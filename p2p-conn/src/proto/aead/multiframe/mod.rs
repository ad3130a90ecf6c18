//! ChaCha20-Poly1305 over sixteen standard frames at once (AVX-512 with
//! IFMA), behind [`Backend::Avx512`](super::Backend).
//!
//! # Design
//! Every CometBFT frame is 1028 plaintext bytes sealed under the connection's
//! key with the next nonce (`00000000 || le64(counter)`). One-frame-at-a-time
//! implementations (ring, Go's x/crypto: both a stitched AVX2 ChaCha20 +
//! Poly1305) pay about 30% of their time per frame in setup: the Poly1305
//! key block, the 4-byte tail block, finalisation. This engine takes a group
//! of 16 consecutive frames and gives each frame one SIMD lane:
//!
//! * ChaCha20: 16 lanes of 32-bit words, one per frame. All lanes compute
//!   block `j` of their own frame (same block index, nonces `counter + lane`);
//!   block 0 is each frame's Poly1305 key, blocks 1..=17 its keystream.
//! * Poly1305: one 64-bit lane per frame, eight per register, two registers.
//!   Each lane has its own `r` and `s`, so every 16-byte block step is
//!   `h = (h + m) * r mod 2^130 - 5` with no precomputed powers of `r`;
//!   limbs are radix 2^44 (44/44/42 bits) multiplied with IFMA
//!   (`vpmadd52luq/huq`), carries kept lazy (bounds at [`avx512`]'s
//!   `poly_block`). The final reduction and `+ s` are scalar per frame.
//!
//! # Guarantees
//! * Byte-identical to RFC 8439 ChaCha20-Poly1305 per frame: the tests
//!   compare every group against the one-frame backends, for counters that
//!   are random, cross 2^32 and end at `u64::MAX`.
//! * [`Engine::open_groups`] checks all sixteen tags of a group before it
//!   decrypts any frame of that group, and stops at the first frame whose
//!   tag fails: frames before it are plaintext, it and everything after are
//!   left as received ciphertext. No unauthenticated plaintext is written.
//! * Whole groups only: callers seal or open leftover frames one at a time
//!   (a partial group costs as much as a full one).
//! * The engine exists only on x86_64 CPUs with AVX-512F, AVX-512BW and
//!   AVX-512IFMA, detected at run time ([`Engine::new`] returns `None`
//!   elsewhere). All SIMD code sits behind that check; the `unsafe` blocks
//!   and their invariants are in [`avx512`].
//!
//! # Not provided
//! * Counter arithmetic is the caller's: it must hand in groups only when
//!   no frame's counter wraps. The frame layer's nonce accounting
//!   guarantees it, which is why this module is crate-private; the engine
//!   still refuses (panics on) a batch whose counters would wrap, so a
//!   future caller's bug cannot reuse a nonce.
//! * Other frame sizes; CPUs without IFMA (an AVX2 variant was measured
//!   slower than ring and is not included).
//! * Key wiping of SIMD register spills: the key words and the one-time
//!   Poly1305 keys are zeroised in memory this module owns, but copies the
//!   compiler spills to the stack are not.

// On other architectures the engine is a stub whose constructor always
// returns `None` (`Backend::Avx512` is then exactly its one-frame backend),
// so the scalar Poly1305 helpers and the key words of the x86_64 kernels
// are compiled but never reached.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]

#[cfg(target_arch = "x86_64")]
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
pub(crate) type Keys = [[u8; 32]; GROUP];

/// A keyed multi-frame engine.
pub struct Engine {
    key: Zeroizing<[u32; 8]>,
    #[cfg(target_arch = "x86_64")]
    simd: avx512::Avx512,
}

impl Engine {
    /// An engine for `key`, or `None` when this CPU lacks AVX-512F/BW/IFMA
    /// (or is not x86_64).
    pub fn new(key: &[u8; 32]) -> Option<Engine> {
        #[cfg(target_arch = "x86_64")]
        {
            let simd = avx512::Avx512::detect()?;
            let mut words = Zeroizing::new([0u32; 8]);
            for (w, bytes) in words.iter_mut().zip(key.chunks_exact(4)) {
                *w = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
            }
            Some(Engine { key: words, simd })
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = key;
            None
        }
    }

    /// Whether this CPU can run the engine.
    pub fn available() -> bool {
        #[cfg(target_arch = "x86_64")]
        return avx512::Avx512::detect().is_some();
        #[cfg(not(target_arch = "x86_64"))]
        return false;
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
        let mut keys = Zeroizing::new([[0u8; 32]; GROUP]);
        let mut tags = [[0u8; 16]; GROUP];
        for (g, group) in frames.chunks_exact_mut(GROUP_BYTES).enumerate() {
            let ctr = counter.wrapping_add((g * GROUP) as u64);
            self.chacha(ctr, group, GROUP, 0, CHACHA_BLOCKS, &mut keys);
            self.tags(&keys, group, &mut tags);
            for (frame, tag) in group.chunks_exact_mut(SEALED_LEN).zip(&tags) {
                frame[PLAIN_LEN..].copy_from_slice(tag);
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
        let mut keys = Zeroizing::new([[0u8; 32]; GROUP]);
        let mut tags = [[0u8; 16]; GROUP];
        for (g, group) in frames.chunks_exact_mut(GROUP_BYTES).enumerate() {
            let ctr = counter.wrapping_add((g * GROUP) as u64);
            // Poly1305 keys only, then every tag, before any decryption.
            self.chacha(ctr, group, GROUP, 0, 1, &mut keys);
            self.tags(&keys, group, &mut tags);
            let good = group
                .chunks_exact(SEALED_LEN)
                .zip(&tags)
                .take_while(|(frame, tag)| tags_equal(tag, &frame[PLAIN_LEN..]))
                .count();
            // Decrypt the authenticated frames only.
            if good > 0 {
                self.chacha(ctr, group, good, 1, CHACHA_BLOCKS, &mut keys);
            }
            if good < GROUP {
                return g * GROUP + good;
            }
        }
        frames.len() / SEALED_LEN
    }

    /// ChaCha20 blocks `from..to` of the first `n` frames of `group` (frame
    /// `i` under counter `ctr + i`): block 0 into `keys[i]`, blocks 1..=17
    /// XORed into the frame's first 1028 bytes.
    fn chacha(&self, ctr: u64, group: &mut [u8], n: usize, from: u32, to: u32, keys: &mut Keys) {
        #[cfg(target_arch = "x86_64")]
        self.simd.chacha(&self.key, ctr, group, n, from, to, keys);
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (ctr, group, n, from, to, keys);
    }

    fn tags(&self, keys: &Keys, group: &[u8], tags: &mut [[u8; 16]; GROUP]) {
        #[cfg(target_arch = "x86_64")]
        self.simd.tags(keys, group, tags);
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (keys, group, tags);
    }
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
