//! The AVX2 kernels: ChaCha20 with one 32-bit lane per frame (eight lanes
//! per ymm register) on the vector units, stitched with Poly1305 in
//! radix 2^64 on the integer units (`mulx`), one accumulator per frame.
//!
//! # Design
//! A group of sixteen frames is two halves of eight. For a half, iteration
//! `j` of the kernel computes ChaCha20 block `j` of all eight frames (block
//! 0 is each frame's Poly1305 key, blocks 1..=16 its 64-byte chunks, block
//! 17 its last four bytes), and merged into the first eight of its ten
//! double rounds it runs the Poly1305 blocks of chunks that are already
//! ciphertext: chunk `j - 2` when sealing (written by iteration `j - 1`),
//! chunk `j - 1` when opening (read before this iteration's keystream is
//! XORed into it), four blocks a double round, two lanes at a time with
//! their accumulators in registers. So the vector units and the integer
//! units work at the same time, and every frame's key block and tail
//! block come at the price of one lane each: no frame pays for a partial
//! vector of blocks. The tail and length blocks (16 of a half's 528) run
//! on their own.
//!
//! The double rounds are one `asm!` block each, written by
//! `scripts/gen-avx2-rounds.py` into `avx2_rounds.rs` (CI checks the two
//! agree): as intrinsics, the compiler spilled state words on every
//! quarter round and moved the stitched scalar code into clumps, and the
//! kernel ran at two thirds of this speed.
//!
//! # Safety
//! Every SIMD function here is `#[target_feature]`, and the `asm!` blocks
//! use AVX2 and BMI2 instructions only. They are reached only through
//! [`Avx2`], a token that [`Avx2::detect`] builds after
//! `is_x86_feature_detected!` confirmed AVX2 and BMI2: that is the one
//! invariant the `unsafe` calls below rely on. Intrinsics touch memory
//! only through references to fixed-size arrays (`&[u8; 32]`) carved out
//! of slices with bounds-checked indexing, so the unaligned loads and
//! stores cannot leave their array. The `asm!` blocks touch the kernel's
//! own `Scratch` and read 32 bytes at two message pointers the kernel
//! derives, with the bounds argued where it does, from the half-group it
//! holds.

use core::arch::x86_64::*;

use zeroize::{Zeroize, Zeroizing};

use super::{poly_r, CHACHA_BLOCKS, DATA_LEN, PLAIN_LEN, SEALED_LEN};

/// Frames per kernel call: one per 32-bit lane of a ymm register.
pub(super) const LANES: usize = 8;

/// Bytes of the frames one kernel call seals or opens.
pub(super) const HALF_BYTES: usize = LANES * SEALED_LEN;

/// Eight standard frames back to back.
pub(super) type Half = [u8; HALF_BYTES];

/// Proof that this CPU runs the kernels below.
#[derive(Clone, Copy, Debug)]
pub(super) struct Avx2(());

impl Avx2 {
    pub(super) fn detect() -> Option<Self> {
        let ok = is_x86_feature_detected!("avx2") && is_x86_feature_detected!("bmi2");
        ok.then_some(Avx2(()))
    }

    /// Seal eight frames in place (plaintext in bytes `0..1028` of each)
    /// and write each one's tag after it.
    pub(super) fn seal(self, key: &[u32; 8], ctr: u64, half: &mut Half) {
        let mut tags = [[0u8; 16]; LANES];
        // SAFETY: `self` exists only when `detect` saw every feature the
        // kernel enables (module docs).
        unsafe { kernel::<SEAL>(key, ctr, half, 0, &mut tags) };
        for (frame, tag) in half.chunks_exact_mut(SEALED_LEN).zip(&tags) {
            frame[PLAIN_LEN..].copy_from_slice(tag);
        }
    }

    /// Authenticate and decrypt eight frames in place; return how many,
    /// from the first, had good tags. Frames from the first bad one on are
    /// put back as they came (ciphertext) before this returns.
    pub(super) fn open(self, key: &[u32; 8], ctr: u64, half: &mut Half) -> usize {
        let mut tags = [[0u8; 16]; LANES];
        // SAFETY: as in `seal`.
        unsafe { kernel::<OPEN>(key, ctr, half, 0, &mut tags) };
        let good = half
            .chunks_exact(SEALED_LEN)
            .zip(&tags)
            .take_while(|(frame, tag)| super::tags_equal(tag, &frame[PLAIN_LEN..]))
            .count();
        if good < LANES {
            // The keystream again over the frames that failed or follow a
            // failure: XOR is its own inverse, so they are ciphertext again.
            // SAFETY: as in `seal`.
            unsafe { kernel::<RESTORE>(key, ctr, half, good, &mut tags) };
        }
        good
    }
}

/// ChaCha20's last block of a frame: its last four bytes.
const LAST: usize = CHACHA_BLOCKS as usize - 1;

/// Kernel modes: seal (Poly1305 after encryption), open (Poly1305 before
/// decryption), restore (keystream only, into lanes `from..`).
const SEAL: u8 = 0;
const OPEN: u8 = 1;
const RESTORE: u8 = 2;

// ---- memory helpers: fixed-size references only ----

#[inline]
#[target_feature(enable = "avx2")]
fn load32(b: &[u8; 32]) -> __m256i {
    // SAFETY: `b` is 32 readable bytes; `loadu` has no alignment requirement.
    unsafe { _mm256_loadu_si256(b.as_ptr().cast()) }
}

#[inline]
#[target_feature(enable = "avx2")]
fn store32(b: &mut [u8; 32], v: __m256i) {
    // SAFETY: `b` is 32 writable bytes we hold exclusively; unaligned store.
    unsafe { _mm256_storeu_si256(b.as_mut_ptr().cast(), v) }
}

#[inline(always)]
fn arr32(s: &mut [u8], off: usize) -> &mut [u8; 32] {
    (&mut s[off..off + 32])
        .try_into()
        .unwrap_or_else(|_| unreachable!("32-byte range"))
}

#[inline(always)]
fn le32(s: &[u8], off: usize) -> u32 {
    let b: [u8; 4] = s[off..off + 4]
        .try_into()
        .unwrap_or_else(|_| unreachable!("4-byte range"));
    u32::from_le_bytes(b)
}

// ---- ChaCha20, 8 lanes ----

/// `vpshufb` masks that rotate each 32-bit word left by 16 bits (the first
/// 32 bytes) and by 8 bits (the last 32).
const ROT16_ROT8: [u8; 64] = [
    2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14,
    15, 12, 13, 3, 0, 1, 2, 7, 4, 5, 6, 11, 8, 9, 10, 15, 12, 13, 14, 3, 0, 1, 2, 7, 4, 5, 6, 11,
    8, 9, 10, 15, 12, 13, 14,
];

/// What the double rounds (`avx2_rounds.rs`) find through one pointer: the
/// rotation masks, four slots for row c of the state (two of its words
/// wait here while the other two are in registers), and the current lane
/// pair's `[r0, r1, 5 * r1 / 4]`. The offsets are the generator's
/// (`scripts/gen-avx2-rounds.py`).
#[repr(C, align(32))]
struct Scratch {
    masks: [u8; 64],
    c: [[u8; 32]; 4],
    r: [[u64; 3]; 2],
}

impl Drop for Scratch {
    fn drop(&mut self) {
        self.c.zeroize();
        self.r.zeroize();
    }
}

// The double rounds, written as `asm!` so that the two programs stay
// merged instruction by instruction and the state stays in the sixteen
// ymm registers the way the generator plans it: as intrinsics, the
// compiler kept all sixteen words and both masks live across a whole
// double round and spilled some on every quarter round, and moved the
// stitched scalar work into clumps, where the vector instructions fill
// their scheduler and the scalar ones behind them wait.
include!("avx2_rounds.rs");

/// 8x8 transpose of 32-bit words: from "word `k` of every lane" (`a[k]`)
/// to "words 0..8 of lane `i`" (`out[i]`).
#[inline]
#[target_feature(enable = "avx2")]
fn transpose8(a: [__m256i; 8]) -> [__m256i; 8] {
    let t: [__m256i; 8] = core::array::from_fn(|k| {
        let p = k & !1;
        if k & 1 == 0 {
            _mm256_unpacklo_epi32(a[p], a[p + 1])
        } else {
            _mm256_unpackhi_epi32(a[p], a[p + 1])
        }
    });
    // u[4g + m]: word m (low 128 bits) and word m + 4 (high) of lanes
    // 4g..4g + 4.
    let u: [__m256i; 8] = core::array::from_fn(|k| {
        let g = 4 * (k / 4);
        match k % 4 {
            0 => _mm256_unpacklo_epi64(t[g], t[g + 2]),
            1 => _mm256_unpackhi_epi64(t[g], t[g + 2]),
            2 => _mm256_unpacklo_epi64(t[g + 1], t[g + 3]),
            _ => _mm256_unpackhi_epi64(t[g + 1], t[g + 3]),
        }
    });
    core::array::from_fn(|i| {
        let m = i % 4;
        if i < 4 {
            _mm256_permute2x128_si256::<0x20>(u[m], u[4 + m])
        } else {
            _mm256_permute2x128_si256::<0x31>(u[m], u[4 + m])
        }
    })
}

// ---- Poly1305, radix 2^64, one accumulator per frame ----

/// The accumulators and clamped keys of eight frames. `h` is lazily
/// reduced: its top limb is at most 4 between steps.
#[derive(Default)]
struct Poly {
    h: [[u64; 3]; LANES],
    /// `r0`, `r1` and `r1 + r1 / 4` (`5 * r1 / 4`: `r1` is a multiple of 4
    /// after clamping, and 2^128 * r1 = (r1 / 4) * 2^130 = 5 * r1 / 4 mod p).
    r: [[u64; 3]; LANES],
    /// The `s` half of each one-time key, added at the end.
    s: [u128; LANES],
}

impl Drop for Poly {
    fn drop(&mut self) {
        self.h.zeroize();
        self.r.zeroize();
        self.s.zeroize();
    }
}

impl Poly {
    /// Take `lane`'s one-time key (ChaCha20 block 0's first 32 bytes).
    fn key(&mut self, lane: usize, otk: &[u8; 32]) {
        let r = poly_r(otk);
        let (r0, r1) = (r as u64, (r >> 64) as u64);
        self.r[lane] = [r0, r1, r1 + (r1 >> 2)];
        let mut s = [0u8; 16];
        s.copy_from_slice(&otk[16..]);
        self.s[lane] = u128::from_le_bytes(s);
        s.zeroize();
    }

    /// `lane`'s tag: `((h mod p) + s) mod 2^128`, without branches. `h2 <=
    /// 4` makes `h < 2p`, so one conditional subtraction of `p` reduces it:
    /// `h >= p` exactly when `h + 5` reaches 2^130, and then `h - p` is
    /// `h + 5 - 2^130`, whose low 128 bits are those of `h + 5`.
    fn tag(&self, lane: usize) -> [u8; 16] {
        let [h0, h1, h2] = self.h[lane];
        let h = u128::from(h0) | (u128::from(h1) << 64);
        let g = h.wrapping_add(5);
        let g2 = h2 + u64::from(g < h);
        let mask = 0u128.wrapping_sub(u128::from(g2 >> 2));
        ((h & !mask) | (g & mask))
            .wrapping_add(self.s[lane])
            .to_le_bytes()
    }

    /// Step `k` of the last 16: every lane's tail block, then every lane's
    /// length block.
    #[inline(always)]
    fn tail_step(&mut self, half: &Half, k: usize) {
        let lane = k % LANES;
        let (lo, hi) = if k < LANES {
            (u64::from(le32(half, lane * SEALED_LEN + DATA_LEN)), 0)
        } else {
            (0, PLAIN_LEN as u64)
        };
        self.h[lane] = block(self.h[lane], self.r[lane], lo, hi);
    }
}

/// `h = (h + m) * r mod 2^130 - 5`, partly reduced, for the block
/// `lo | hi << 64 | 2^128`, with `r = [r0, r1, 5 * r1 / 4]`. Bounds: `h2 <=
/// 4` on entry, so with the block and its carry `h2 <= 6`. Clamping makes
/// `r0 < 2^60` and `s1 < 2^60.33`, so `h2 * r0` and `h2 * s1` are below
/// 2^63, `d0` and `d1` below 2^125.3, `d2` below 2^63.6 and the fold
/// `c = 5 * (d2 >> 2)` below 2^64; after the fold `h2 <= 4` again.
#[inline(always)]
fn block([h0, h1, h2]: [u64; 3], [r0, r1, s1]: [u64; 3], lo: u64, hi: u64) -> [u64; 3] {
    let t0 = u128::from(h0) + u128::from(lo);
    let t1 = u128::from(h1) + u128::from(hi) + (t0 >> 64);
    let (h0, h1, h2) = (t0 as u64, t1 as u64, h2 + (t1 >> 64) as u64 + 1);
    let m = |a: u64, b: u64| u128::from(a) * u128::from(b);
    let d0 = m(h0, r0) + m(h1, s1);
    let d1 = m(h0, r1) + m(h1, r0) + u128::from(h2 * s1) + (d0 >> 64);
    let d2 = h2 * r0 + (d1 >> 64) as u64;
    // Fold the bits at 2^130 and above: 2^130 = 5 mod p, and
    // (d2 >> 2) + (d2 & !3) = 5 * (d2 >> 2).
    let c = (d2 >> 2) + (d2 & !3);
    let t0 = u128::from(d0 as u64) + u128::from(c);
    let t1 = u128::from(d1 as u64) + (t0 >> 64);
    [t0 as u64, t1 as u64, (d2 & 3) + (t1 >> 64) as u64]
}

/// One pass over eight frames: ChaCha20 blocks 0..18 of each, with the
/// Poly1305 steps of `MODE` between their double rounds. `RESTORE` XORs
/// the keystream into lanes `from..` only and computes no tags.
#[target_feature(enable = "avx2,bmi2")]
fn kernel<const MODE: u8>(
    key: &[u32; 8],
    ctr: u64,
    half: &mut Half,
    from: usize,
    tags: &mut [[u8; 16]; LANES],
) {
    let mut s = [_mm256_setzero_si256(); 16];
    for (k, w) in [0x6170_7865u32, 0x3320_646e, 0x7962_2d32, 0x6b20_6574]
        .iter()
        .enumerate()
    {
        s[k] = _mm256_set1_epi32(*w as i32);
    }
    for k in 0..8 {
        s[4 + k] = _mm256_set1_epi32(key[k] as i32);
    }
    // Word 13 is the nonce's first four bytes (zero); words 14 and 15 the
    // frame counter, `ctr + lane`.
    let c: [u64; LANES] = core::array::from_fn(|l| ctr.wrapping_add(l as u64));
    s[14] = _mm256_setr_epi32(
        c[0] as i32,
        c[1] as i32,
        c[2] as i32,
        c[3] as i32,
        c[4] as i32,
        c[5] as i32,
        c[6] as i32,
        c[7] as i32,
    );
    s[15] = _mm256_setr_epi32(
        (c[0] >> 32) as i32,
        (c[1] >> 32) as i32,
        (c[2] >> 32) as i32,
        (c[3] >> 32) as i32,
        (c[4] >> 32) as i32,
        (c[5] >> 32) as i32,
        (c[6] >> 32) as i32,
        (c[7] >> 32) as i32,
    );
    let mut st = Scratch {
        masks: ROT16_ROT8,
        c: [[0; 32]; 4],
        r: [[0; 3]; 2],
    };
    let mut poly = Poly::default();
    let mut otk = Zeroizing::new([0u8; 32]);
    for j in 0..CHACHA_BLOCKS as usize {
        s[12] = _mm256_set1_epi32(j as i32);
        let mut x = s;
        // The Poly1305 steps of a chunk that is ciphertext now, one after
        // each half round of the first eight double rounds (32 steps; a
        // hook without branches, so the compiler keeps the two kinds of
        // work interleaved).
        let chunk = match MODE {
            SEAL if j >= 2 => Some(64 * (j - 2)),
            OPEN if (1..LAST).contains(&j) => Some(64 * (j - 1)),
            _ => None,
        };
        // Words 10 and 11 wait in the scratch area during the rounds.
        store32(&mut st.c[2], x[10]);
        store32(&mut st.c[3], x[11]);
        if let Some(off) = chunk {
            // Two lanes per two double rounds, their accumulators in
            // registers throughout: each round takes two blocks of lane
            // `a` and two of lane `a + 1`.
            assert!(off + 64 <= DATA_LEN);
            let base = half.as_ptr();
            for a in (0..LANES).step_by(2) {
                st.r = [poly.r[a], poly.r[a + 1]];
                let (mut ha, mut hb) = (poly.h[a], poly.h[a + 1]);
                for pass in 0..2 {
                    // Lane a's blocks at `pm` and `pm + 16`, lane b's a
                    // frame on: inside `half`, since `a + 1 < LANES` and
                    // `off + 32 * pass + 32 <= DATA_LEN`.
                    let pm = base.wrapping_add(a * SEALED_LEN + off + 32 * pass);
                    stitched_double_round!(x, core::ptr::addr_of_mut!(st), pm, ha, hb);
                }
                poly.h[a] = ha;
                poly.h[a + 1] = hb;
            }
            for _ in 8..10 {
                plain_double_round!(x, core::ptr::addr_of_mut!(st));
            }
        } else {
            for _ in 0..10 {
                plain_double_round!(x, core::ptr::addr_of_mut!(st));
            }
        }
        x[10] = load32(&st.c[2]);
        x[11] = load32(&st.c[3]);
        if MODE == OPEN && j == LAST {
            // The tail and the length, before the tail is decrypted.
            for k in 0..2 * LANES {
                poly.tail_step(half, k);
            }
        }
        for k in 0..16 {
            x[k] = _mm256_add_epi32(x[k], s[k]);
        }
        if j == LAST {
            // The last block covers each frame's last four bytes: word 0.
            let mut w = [0u8; 32];
            store32(&mut w, x[0]);
            for lane in from..LANES {
                let off = lane * SEALED_LEN + DATA_LEN;
                for b in 0..4 {
                    half[off + b] ^= w[4 * lane + b];
                }
            }
            continue;
        }
        let lo = transpose8([x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7]]);
        if j == 0 {
            if MODE != RESTORE {
                for (lane, row) in lo.iter().enumerate() {
                    store32(&mut otk, *row);
                    poly.key(lane, &otk);
                }
            }
            continue;
        }
        let hi = transpose8([x[8], x[9], x[10], x[11], x[12], x[13], x[14], x[15]]);
        let base = (j - 1) * 64;
        for lane in from..LANES {
            let off = lane * SEALED_LEN + base;
            let p = arr32(half, off);
            store32(p, _mm256_xor_si256(load32(p), lo[lane]));
            let p = arr32(half, off + 32);
            store32(p, _mm256_xor_si256(load32(p), hi[lane]));
        }
    }
    if MODE == RESTORE {
        return;
    }
    if MODE == SEAL {
        // The tail and the length: the tail is ciphertext now.
        for k in 0..2 * LANES {
            poly.tail_step(half, k);
        }
    }
    for (lane, tag) in tags.iter_mut().enumerate() {
        *tag = poly.tag(lane);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The final reduction at and around the modulus `p = 2^130 - 5`,
    /// where random frames practically never land: `h` as limbs.
    #[test]
    fn the_tag_reduces_at_the_modulus() {
        let s = 0x1111_2222_3333_4444_5555_6666_7777_8888u128;
        let tag = |h: [u64; 3]| {
            let mut p = Poly::default();
            p.h[3] = h;
            p.s[3] = s;
            u128::from_le_bytes(p.tag(3))
        };
        let m = u64::MAX;
        // p - 1, p, p + 1.
        assert_eq!(tag([m - 5, m, 3]), (u128::MAX - 5).wrapping_add(s));
        assert_eq!(tag([m - 4, m, 3]), s);
        assert_eq!(tag([m - 3, m, 3]), s + 1);
        // 2^130 - 1 = p + 4, 2^130 + 3 = p + 8, and the largest h the lazy
        // reduction leaves (h2 = 4): 5 * 2^128 - 1 = p + 2^128 + 4.
        assert_eq!(tag([m, m, 3]), s + 4);
        assert_eq!(tag([3, 0, 4]), s + 8);
        // (2^128 + 4 mod 2^128 = 4).
        assert_eq!(tag([m, m, 4]), s + 4);
        // Below p, nothing is subtracted.
        assert_eq!(tag([7, 0, 0]), s + 7);
    }
}
