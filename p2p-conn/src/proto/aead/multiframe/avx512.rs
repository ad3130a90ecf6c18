//! The AVX-512 kernels: ChaCha20 with one 32-bit lane per frame (16 lanes
//! per zmm register, `vprold` rotations) and Poly1305 with one 64-bit lane
//! per frame (8 per zmm, two registers), radix 2^44 with IFMA.
//!
//! # Safety
//! Every function here is `#[target_feature]`. They are reached only through
//! [`Avx512`], a token that [`Avx512::detect`] builds after
//! `is_x86_feature_detected!` confirmed AVX2, AVX-512F, AVX-512BW and
//! AVX-512IFMA: that is the one invariant the `unsafe` calls below rely on.
//! Memory is touched only through references to fixed-size arrays
//! (`&[u8; 16]`, `&[u8; 64]`) carved out of slices with bounds-checked
//! indexing, so the unaligned loads and stores cannot leave their array.

use core::arch::x86_64::*;

use super::{poly_finish, poly_r, Keys, CHACHA_BLOCKS, DATA_LEN, GROUP, PLAIN_LEN, SEALED_LEN};

/// Proof that this CPU runs the kernels below.
#[derive(Clone, Copy, Debug)]
pub(super) struct Avx512(());

impl Avx512 {
    pub(super) fn detect() -> Option<Self> {
        let ok = is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512ifma");
        ok.then_some(Avx512(()))
    }

    /// ChaCha20 blocks `from..to` for the first `n` frames of `group`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn chacha(
        self,
        key: &[u32; 8],
        ctr: u64,
        group: &mut [u8],
        n: usize,
        from: u32,
        to: u32,
        keys: &mut Keys,
    ) {
        // SAFETY: `self` exists only when `detect` saw every feature
        // `chacha16` enables (module docs).
        unsafe { chacha16(key, ctr, group, n, from, to, keys) }
    }

    /// Poly1305 tags of all 16 frames of `group` under `keys`.
    pub(super) fn tags(self, keys: &Keys, group: &[u8], tags: &mut [[u8; 16]; GROUP]) {
        // SAFETY: as for `chacha`.
        unsafe { poly16(keys, group, tags) }
    }
}

// ---- memory helpers: fixed-size references only ----

#[inline]
#[target_feature(enable = "avx512f")]
fn load64(b: &[u8; 64]) -> __m512i {
    // SAFETY: `b` is 64 readable bytes; `loadu` has no alignment requirement.
    unsafe { _mm512_loadu_si512(b.as_ptr().cast()) }
}

#[inline]
#[target_feature(enable = "avx512f")]
fn store64(b: &mut [u8; 64], v: __m512i) {
    // SAFETY: `b` is 64 writable bytes we hold exclusively; unaligned store.
    unsafe { _mm512_storeu_si512(b.as_mut_ptr().cast(), v) }
}

#[inline]
#[target_feature(enable = "avx2")]
fn load16x2(lo: &[u8; 16], hi: &[u8; 16]) -> __m256i {
    // SAFETY: both are 16 readable bytes; unaligned loads.
    unsafe { _mm256_loadu2_m128i(hi.as_ptr().cast(), lo.as_ptr().cast()) }
}

#[inline]
#[target_feature(enable = "avx512f")]
fn lanes64(v: &[u64; 8]) -> __m512i {
    let mut b = [0u8; 64];
    for (chunk, x) in b.chunks_exact_mut(8).zip(v) {
        chunk.copy_from_slice(&x.to_le_bytes());
    }
    load64(&b)
}

#[inline]
fn arr64(s: &mut [u8], off: usize) -> &mut [u8; 64] {
    (&mut s[off..off + 64])
        .try_into()
        .unwrap_or_else(|_| unreachable!("64-byte range"))
}

#[inline]
fn arr16(s: &[u8], off: usize) -> &[u8; 16] {
    s[off..off + 16]
        .try_into()
        .unwrap_or_else(|_| unreachable!("16-byte range"))
}

// ---- ChaCha20, 16 lanes ----

#[inline]
#[target_feature(enable = "avx512f")]
fn quarter_round(x: &mut [__m512i; 16], a: usize, b: usize, c: usize, d: usize) {
    x[a] = _mm512_add_epi32(x[a], x[b]);
    x[d] = _mm512_rol_epi32::<16>(_mm512_xor_si512(x[d], x[a]));
    x[c] = _mm512_add_epi32(x[c], x[d]);
    x[b] = _mm512_rol_epi32::<12>(_mm512_xor_si512(x[b], x[c]));
    x[a] = _mm512_add_epi32(x[a], x[b]);
    x[d] = _mm512_rol_epi32::<8>(_mm512_xor_si512(x[d], x[a]));
    x[c] = _mm512_add_epi32(x[c], x[d]);
    x[b] = _mm512_rol_epi32::<7>(_mm512_xor_si512(x[b], x[c]));
}

/// 16x16 transpose of 32-bit words: `out[lane] = [a[0][lane], .., a[15][lane]]`,
/// turning "word k of every lane" into "block of one lane".
#[inline]
#[target_feature(enable = "avx512f")]
fn transpose16(a: &[__m512i; 16]) -> [__m512i; 16] {
    let t: [__m512i; 16] = core::array::from_fn(|k| {
        let p = k & !1;
        if k & 1 == 0 {
            _mm512_unpacklo_epi32(a[p], a[p + 1])
        } else {
            _mm512_unpackhi_epi32(a[p], a[p + 1])
        }
    });
    let u: [__m512i; 16] = core::array::from_fn(|k| {
        let g = 4 * (k / 4);
        match k % 4 {
            0 => _mm512_unpacklo_epi64(t[g], t[g + 2]),
            1 => _mm512_unpackhi_epi64(t[g], t[g + 2]),
            2 => _mm512_unpacklo_epi64(t[g + 1], t[g + 3]),
            _ => _mm512_unpackhi_epi64(t[g + 1], t[g + 3]),
        }
    });
    let mut out = [_mm512_setzero_si512(); 16];
    for q in 0..4 {
        let (p, qq, r, s) = (u[q], u[4 + q], u[8 + q], u[12 + q]);
        let v0 = _mm512_shuffle_i32x4::<0x44>(p, qq);
        let v1 = _mm512_shuffle_i32x4::<0xEE>(p, qq);
        let v2 = _mm512_shuffle_i32x4::<0x44>(r, s);
        let v3 = _mm512_shuffle_i32x4::<0xEE>(r, s);
        out[q] = _mm512_shuffle_i32x4::<0x88>(v0, v2);
        out[4 + q] = _mm512_shuffle_i32x4::<0xDD>(v0, v2);
        out[8 + q] = _mm512_shuffle_i32x4::<0x88>(v1, v3);
        out[12 + q] = _mm512_shuffle_i32x4::<0xDD>(v1, v3);
    }
    out
}

#[target_feature(enable = "avx512f,avx512bw,avx2")]
fn chacha16(
    key: &[u32; 8],
    ctr: u64,
    group: &mut [u8],
    n: usize,
    from: u32,
    to: u32,
    keys: &mut Keys,
) {
    assert!(n <= GROUP && group.len() >= n * SEALED_LEN);
    // Words 14 and 15 (the nonce's counter) differ per lane: counter + lane.
    let mut lo = [0u8; 64];
    let mut hi = [0u8; 64];
    for lane in 0..GROUP {
        let c = ctr.wrapping_add(lane as u64);
        lo[4 * lane..4 * lane + 4].copy_from_slice(&(c as u32).to_le_bytes());
        hi[4 * lane..4 * lane + 4].copy_from_slice(&((c >> 32) as u32).to_le_bytes());
    }
    let mut s = [_mm512_setzero_si512(); 16];
    for (k, w) in [0x6170_7865u32, 0x3320_646e, 0x7962_2d32, 0x6b20_6574]
        .iter()
        .enumerate()
    {
        s[k] = _mm512_set1_epi32(*w as i32);
    }
    for k in 0..8 {
        s[4 + k] = _mm512_set1_epi32(key[k] as i32);
    }
    // Word 13 is the nonce's first four bytes: zero.
    s[14] = load64(&lo);
    s[15] = load64(&hi);
    for j in from..to {
        s[12] = _mm512_set1_epi32(j as i32);
        let mut x = s;
        for _ in 0..10 {
            quarter_round(&mut x, 0, 4, 8, 12);
            quarter_round(&mut x, 1, 5, 9, 13);
            quarter_round(&mut x, 2, 6, 10, 14);
            quarter_round(&mut x, 3, 7, 11, 15);
            quarter_round(&mut x, 0, 5, 10, 15);
            quarter_round(&mut x, 1, 6, 11, 12);
            quarter_round(&mut x, 2, 7, 8, 13);
            quarter_round(&mut x, 3, 4, 9, 14);
        }
        for k in 0..16 {
            x[k] = _mm512_add_epi32(x[k], s[k]);
        }
        if j == CHACHA_BLOCKS - 1 {
            // The last block covers the frame's last 4 bytes: word 0 of
            // every lane.
            let mut w = [0u8; 64];
            store64(&mut w, x[0]);
            for i in 0..n {
                let off = i * SEALED_LEN + DATA_LEN;
                for b in 0..4 {
                    group[off + b] ^= w[4 * i + b];
                }
            }
            continue;
        }
        let rows = transpose16(&x);
        if j == 0 {
            for i in 0..n {
                let mut w = [0u8; 64];
                store64(&mut w, rows[i]);
                keys[i].copy_from_slice(&w[..32]);
            }
            continue;
        }
        let base = (j as usize - 1) * 64;
        for (i, row) in rows.iter().enumerate().take(n) {
            let p = arr64(group, i * SEALED_LEN + base);
            let v = _mm512_xor_si512(load64(p), *row);
            store64(p, v);
        }
    }
}

// ---- Poly1305, 8 lanes per zmm, IFMA radix 2^44 ----

const M44: i64 = (1 << 44) - 1;
const M42: i64 = (1 << 42) - 1;

struct PolyState {
    h: [__m512i; 3],
    r: [__m512i; 3],
    r1x20: __m512i,
    r2x20: __m512i,
}

#[inline]
#[target_feature(enable = "avx512f")]
fn poly_init(keys: &Keys, first: usize) -> PolyState {
    let limbs: [[u64; 3]; 8] = core::array::from_fn(|l| {
        let r = poly_r(&keys[first + l]);
        [
            (r as u64) & M44 as u64,
            ((r >> 44) as u64) & M44 as u64,
            (r >> 88) as u64,
        ]
    });
    let r: [__m512i; 3] = core::array::from_fn(|k| lanes64(&core::array::from_fn(|l| limbs[l][k])));
    let r1x20 = lanes64(&core::array::from_fn(|l| limbs[l][1] * 20));
    let r2x20 = lanes64(&core::array::from_fn(|l| limbs[l][2] * 20));
    PolyState {
        h: [_mm512_setzero_si512(); 3],
        r,
        r1x20,
        r2x20,
    }
}

/// `h = (h + m) * r mod 2^130 - 5`, lazily reduced. The message block is
/// `lo | hi << 64 | hibit`. Bounds: IFMA multiplies the low 52 bits of each
/// input, so every input must stay below 2^52. On entry and exit the limbs
/// of `h` are below 2^44 + 2^15, 2^44 + 2^14 and 2^42; after adding a block
/// below 2^46; `r` is below 2^124 after clamping, so its limbs are below
/// 2^44, 2^44 and 2^36, `20 * r1` below 2^49 and `20 * r2` below 2^41.
#[inline]
#[target_feature(enable = "avx512f,avx512ifma")]
fn poly_block(st: &mut PolyState, lo: __m512i, hi: __m512i, hibit: __m512i) {
    let m44 = _mm512_set1_epi64(M44);
    let h0 = _mm512_add_epi64(st.h[0], _mm512_and_si512(lo, m44));
    let h1 = _mm512_add_epi64(
        st.h[1],
        _mm512_and_si512(
            _mm512_or_si512(_mm512_srli_epi64::<44>(lo), _mm512_slli_epi64::<20>(hi)),
            m44,
        ),
    );
    let h2 = _mm512_add_epi64(st.h[2], _mm512_or_si512(_mm512_srli_epi64::<24>(hi), hibit));
    let (r, r1x20, r2x20) = (&st.r, st.r1x20, st.r2x20);
    let z = _mm512_setzero_si512();
    let l = _mm512_madd52lo_epu64;
    let u = _mm512_madd52hi_epu64;
    // Limb k of the product collects the terms at 2^(44k); terms at or
    // above 2^132 wrap around multiplied by 20 (2^132 = 4 * 2^130 = 20 mod p).
    let lo0 = l(l(l(z, h0, r[0]), h1, r2x20), h2, r1x20);
    let hi0 = u(u(u(z, h0, r[0]), h1, r2x20), h2, r1x20);
    let lo1 = l(l(l(z, h0, r[1]), h1, r[0]), h2, r2x20);
    let hi1 = u(u(u(z, h0, r[1]), h1, r[0]), h2, r2x20);
    let lo2 = l(l(l(z, h0, r[2]), h1, r[1]), h2, r[0]);
    let hi2 = u(u(u(z, h0, r[2]), h1, r[1]), h2, r[0]);
    // hi_k sits at 2^(44k + 52): hi0 is limb 1 << 8, hi1 limb 2 << 8, and
    // hi2 at 2^140 = 5 * 2^10 mod p.
    let d0 = _mm512_add_epi64(
        lo0,
        _mm512_add_epi64(_mm512_slli_epi64::<10>(hi2), _mm512_slli_epi64::<12>(hi2)),
    );
    let d1 = _mm512_add_epi64(lo1, _mm512_slli_epi64::<8>(hi0));
    let d2 = _mm512_add_epi64(lo2, _mm512_slli_epi64::<8>(hi1));
    let c0 = _mm512_srli_epi64::<44>(d0);
    let c1 = _mm512_srli_epi64::<44>(d1);
    let d0 = _mm512_and_si512(d0, m44);
    let d1 = _mm512_add_epi64(_mm512_and_si512(d1, m44), c0);
    let d2 = _mm512_add_epi64(d2, c1);
    let c2 = _mm512_srli_epi64::<42>(d2);
    let d2 = _mm512_and_si512(d2, _mm512_set1_epi64(M42));
    let d0 = _mm512_add_epi64(d0, _mm512_add_epi64(c2, _mm512_slli_epi64::<2>(c2)));
    st.h = [d0, d1, d2];
}

/// The 16-byte blocks at `off` of eight frames as (low halves, high halves),
/// lane `l` = frame `l`. A macro so it inlines into the target-feature caller.
macro_rules! load_blocks {
    ($frames:expr, $off:expr) => {{
        let (f, off): (&[&[u8; PLAIN_LEN]; 8], usize) = ($frames, $off);
        let a = _mm512_inserti64x4::<1>(
            _mm512_castsi256_si512(load16x2(arr16(f[0], off), arr16(f[2], off))),
            load16x2(arr16(f[4], off), arr16(f[6], off)),
        );
        let b = _mm512_inserti64x4::<1>(
            _mm512_castsi256_si512(load16x2(arr16(f[1], off), arr16(f[3], off))),
            load16x2(arr16(f[5], off), arr16(f[7], off)),
        );
        (_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b))
    }};
}

#[target_feature(enable = "avx512f,avx512ifma,avx2")]
fn poly16(keys: &Keys, group: &[u8], tags: &mut [[u8; 16]; GROUP]) {
    assert!(group.len() >= GROUP * SEALED_LEN);
    let frame = |i: usize| -> &[u8; PLAIN_LEN] {
        group[i * SEALED_LEN..i * SEALED_LEN + PLAIN_LEN]
            .try_into()
            .unwrap_or_else(|_| unreachable!("one frame's plaintext"))
    };
    let fa: [&[u8; PLAIN_LEN]; 8] = core::array::from_fn(frame);
    let fb: [&[u8; PLAIN_LEN]; 8] = core::array::from_fn(|l| frame(l + 8));
    let mut sa = poly_init(keys, 0);
    let mut sb = poly_init(keys, 8);
    // Every full block carries the 2^128 bit: bit 40 of limb 2.
    let hibit = _mm512_set1_epi64(1 << 40);
    for block in 0..DATA_LEN / 16 {
        let (lo, hi) = load_blocks!(&fa, block * 16);
        poly_block(&mut sa, lo, hi, hibit);
        let (lo, hi) = load_blocks!(&fb, block * 16);
        poly_block(&mut sb, lo, hi, hibit);
    }
    // Block 64: the last 4 bytes, zero padded to 16 (RFC 8439 pads the
    // ciphertext, so the 2^128 bit is still set). Block 65: le64(aad = 0) ||
    // le64(ciphertext = 1028).
    let tail = |f: &[&[u8; PLAIN_LEN]; 8]| {
        lanes64(&core::array::from_fn(|l| {
            let t = &f[l][DATA_LEN..PLAIN_LEN];
            u64::from(u32::from_le_bytes([t[0], t[1], t[2], t[3]]))
        }))
    };
    let z = _mm512_setzero_si512();
    let len = _mm512_set1_epi64(PLAIN_LEN as i64);
    poly_block(&mut sa, tail(&fa), z, hibit);
    poly_block(&mut sa, z, len, hibit);
    poly_block(&mut sb, tail(&fb), z, hibit);
    poly_block(&mut sb, z, len, hibit);
    for (g, st) in [sa, sb].iter().enumerate() {
        let mut limbs = [[0u8; 64]; 3];
        for (bytes, h) in limbs.iter_mut().zip(st.h) {
            store64(bytes, h);
        }
        for l in 0..8 {
            let i = g * 8 + l;
            let h: [u64; 3] = core::array::from_fn(|k| {
                let b = &limbs[k][8 * l..8 * l + 8];
                u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
            });
            tags[i] = poly_finish(&h, &[0, 44, 88], &keys[i]);
        }
    }
}
