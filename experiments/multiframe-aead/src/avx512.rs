//! AVX-512 engine: ChaCha20 with 16 frames per pass (zmm, vprold), Poly1305 with 8 frames
//! per zmm using IFMA (vpmadd52luq/huq, radix 2^44: limbs 44/44/42 bits), two zmm sets = 16 frames.
use crate::*;
use core::arch::x86_64::*;

/// Proof that AVX-512F + AVX-512IFMA (+AVX2) are available.
#[derive(Clone, Copy)]
pub struct Avx512(());

impl Avx512 {
    pub fn new() -> Option<Self> {
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512ifma") {
            Some(Avx512(()))
        } else {
            None
        }
    }
}

impl Engine for Avx512 {
    const LANES: usize = 16;
    fn chacha(&self, key: &[u32; 8], ctr: u64, frames: &mut [u8], n: usize, j0: u32, j1: u32, keys: &mut Keys) {
        // SAFETY: `self` exists only if avx2/avx512f/avx512ifma were detected at runtime.
        unsafe { chacha16(key, ctr, frames, n, j0, j1, keys) }
    }
    fn tags(&self, keys: &Keys, frames: &[u8], n: usize, tags: &mut Tags) {
        // SAFETY: as above.
        unsafe { poly16(keys, frames, n, tags) }
    }
}

// ---- memory helpers ----

#[inline]
#[target_feature(enable = "avx512f")]
fn load64(b: &[u8; 64]) -> __m512i {
    // SAFETY: `b` is a valid reference to 64 bytes; loadu has no alignment requirement.
    unsafe { _mm512_loadu_si512(b.as_ptr().cast()) }
}
#[inline]
#[target_feature(enable = "avx512f")]
fn store64(b: &mut [u8; 64], v: __m512i) {
    // SAFETY: `b` is a valid exclusive reference to 64 bytes; unaligned store.
    unsafe { _mm512_storeu_si512(b.as_mut_ptr().cast(), v) }
}
#[inline]
#[target_feature(enable = "avx2")]
fn load16x2(lo: &[u8; 16], hi: &[u8; 16]) -> __m256i {
    // SAFETY: both are valid references to 16 bytes; unaligned loads.
    unsafe { _mm256_loadu2_m128i(hi.as_ptr().cast(), lo.as_ptr().cast()) }
}
#[inline]
#[target_feature(enable = "avx512f")]
fn splat_lanes(v: &[u64; 8]) -> __m512i {
    let mut b = [0u8; 64];
    for i in 0..8 {
        b[8 * i..8 * i + 8].copy_from_slice(&v[i].to_le_bytes());
    }
    load64(&b)
}
#[inline]
fn arr64(s: &mut [u8], off: usize) -> &mut [u8; 64] {
    (&mut s[off..off + 64]).try_into().unwrap()
}
#[inline]
fn arr16(s: &[u8], off: usize) -> &[u8; 16] {
    s[off..off + 16].try_into().unwrap()
}

// ---------------- ChaCha20, 16 lanes ----------------

/// Rotation strategy for the byte-multiple rotations: vpshufb (BW) spreads work over the shuffle
/// pipes instead of the shift/rotate pipe. Selected at compile time by the ROT_SHUF const.
const ROT_SHUF: bool = false;
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn rot16(x: __m512i) -> __m512i {
    if ROT_SHUF {
        _mm512_shuffle_epi8(x, _mm512_set4_epi32(0x0d0c0f0e, 0x09080b0a, 0x05040706, 0x01000302))
    } else {
        _mm512_rol_epi32::<16>(x)
    }
}
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn rot8(x: __m512i) -> __m512i {
    if ROT_SHUF {
        _mm512_shuffle_epi8(x, _mm512_set4_epi32(0x0e0d0c0f, 0x0a09080b, 0x06050407, 0x02010003))
    } else {
        _mm512_rol_epi32::<8>(x)
    }
}
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn qr(x: &mut [__m512i; 16], a: usize, b: usize, c: usize, d: usize) {
    x[a] = _mm512_add_epi32(x[a], x[b]);
    x[d] = rot16(_mm512_xor_si512(x[d], x[a]));
    x[c] = _mm512_add_epi32(x[c], x[d]);
    x[b] = _mm512_rol_epi32::<12>(_mm512_xor_si512(x[b], x[c]));
    x[a] = _mm512_add_epi32(x[a], x[b]);
    x[d] = rot8(_mm512_xor_si512(x[d], x[a]));
    x[c] = _mm512_add_epi32(x[c], x[d]);
    x[b] = _mm512_rol_epi32::<7>(_mm512_xor_si512(x[b], x[c]));
}

/// 16x16 transpose of 32-bit words: out[e] = [a0[e], ..., a15[e]].
#[inline]
#[target_feature(enable = "avx512f")]
fn transpose16(a: &[__m512i; 16]) -> [__m512i; 16] {
    let t: [__m512i; 16] = core::array::from_fn(|k| {
        let p = k & !1;
        if k & 1 == 0 { _mm512_unpacklo_epi32(a[p], a[p + 1]) } else { _mm512_unpackhi_epi32(a[p], a[p + 1]) }
    });
    // u[4g+q]: 128-bit chunk L holds [a4g[4L+q], a4g+1[4L+q], a4g+2[4L+q], a4g+3[4L+q]]
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
fn chacha16(key: &[u32; 8], ctr: u64, frames: &mut [u8], n: usize, j0: u32, j1: u32, keys: &mut Keys) {
    assert!(n <= 16 && frames.len() >= n * SEALED_LEN);
    let mut lo = [0u8; 64];
    let mut hi = [0u8; 64];
    for i in 0..16 {
        let c = ctr.wrapping_add(i as u64);
        lo[4 * i..4 * i + 4].copy_from_slice(&(c as u32).to_le_bytes());
        hi[4 * i..4 * i + 4].copy_from_slice(&((c >> 32) as u32).to_le_bytes());
    }
    let mut s = [_mm512_setzero_si512(); 16];
    for (k, w) in [0x61707865u32, 0x3320646e, 0x79622d32, 0x6b206574].iter().enumerate() {
        s[k] = _mm512_set1_epi32(*w as i32);
    }
    for k in 0..8 {
        s[4 + k] = _mm512_set1_epi32(key[k] as i32);
    }
    s[14] = load64(&lo);
    s[15] = load64(&hi);
    for j in j0..j1 {
        s[12] = _mm512_set1_epi32(j as i32);
        let mut x = s;
        for _ in 0..10 {
            qr(&mut x, 0, 4, 8, 12);
            qr(&mut x, 1, 5, 9, 13);
            qr(&mut x, 2, 6, 10, 14);
            qr(&mut x, 3, 7, 11, 15);
            qr(&mut x, 0, 5, 10, 15);
            qr(&mut x, 1, 6, 11, 12);
            qr(&mut x, 2, 7, 8, 13);
            qr(&mut x, 3, 4, 9, 14);
        }
        for k in 0..16 {
            x[k] = _mm512_add_epi32(x[k], s[k]);
        }
        if j == CHACHA_BLOCKS - 1 {
            let mut w = [0u8; 64];
            store64(&mut w, x[0]);
            for i in 0..n {
                let off = i * SEALED_LEN + DATA_LEN;
                for b in 0..4 {
                    frames[off + b] ^= w[4 * i + b];
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
        for i in 0..n {
            let p = arr64(frames, i * SEALED_LEN + base);
            let v = _mm512_xor_si512(load64(p), rows[i]);
            store64(p, v);
        }
    }
}

// ---------------- Poly1305, 8 lanes per zmm, IFMA radix 2^44 ----------------

const M44: i64 = (1 << 44) - 1;
const M42: i64 = (1 << 42) - 1;

#[derive(Clone, Copy)]
struct PolyState {
    h: [__m512i; 3],
    r: [__m512i; 3],
    r1x20: __m512i,
    r2x20: __m512i,
    s: [u128; 8], // per-lane Poly1305 s (second key half), for the fused path
}

#[inline]
#[target_feature(enable = "avx512f")]
fn poly_init(keys: &Keys, lanes: [usize; 8]) -> PolyState {
    let limbs: [[u64; 3]; 8] = core::array::from_fn(|l| {
        let r = poly_r(&keys[lanes[l]]);
        [(r as u64) & M44 as u64, ((r >> 44) as u64) & M44 as u64, (r >> 88) as u64]
    });
    let r: [__m512i; 3] = core::array::from_fn(|k| splat_lanes(&core::array::from_fn(|l| limbs[l][k])));
    let r1x20 = splat_lanes(&core::array::from_fn(|l| limbs[l][1] * 20));
    let r2x20 = splat_lanes(&core::array::from_fn(|l| limbs[l][2] * 20));
    let s = core::array::from_fn(|l| u128::from_le_bytes(keys[lanes[l]][16..].try_into().unwrap()));
    PolyState { h: [_mm512_setzero_si512(); 3], r, r1x20, r2x20, s }
}

/// h = (h + m) * r mod 2^130-5, lazily reduced (limbs < 2^44+2^15, 2^44+2^14, 2^42 on output).
/// Inputs to vpmadd52 must be < 2^52: h limbs < 2^46, r limbs < 2^44, 20*r1 < 2^49, 20*r2 < 2^41.
#[inline]
#[target_feature(enable = "avx512f,avx512ifma")]
fn poly_block(st: &mut PolyState, lo: __m512i, hi: __m512i, hibit: __m512i) {
    let m44 = _mm512_set1_epi64(M44);
    let h0 = _mm512_add_epi64(st.h[0], _mm512_and_si512(lo, m44));
    let h1 = _mm512_add_epi64(
        st.h[1],
        _mm512_and_si512(_mm512_or_si512(_mm512_srli_epi64::<44>(lo), _mm512_slli_epi64::<20>(hi)), m44),
    );
    let h2 = _mm512_add_epi64(st.h[2], _mm512_or_si512(_mm512_srli_epi64::<24>(hi), hibit));
    let (r, r1x20, r2x20) = (&st.r, st.r1x20, st.r2x20);
    let z = _mm512_setzero_si512();
    let l = _mm512_madd52lo_epu64;
    let u = _mm512_madd52hi_epu64;
    // limb k of the product: terms at 2^(44k); wrap-around terms (>= 2^132) multiplied by 20.
    let lo0 = l(l(l(z, h0, r[0]), h1, r2x20), h2, r1x20);
    let hi0 = u(u(u(z, h0, r[0]), h1, r2x20), h2, r1x20);
    let lo1 = l(l(l(z, h0, r[1]), h1, r[0]), h2, r2x20);
    let hi1 = u(u(u(z, h0, r[1]), h1, r[0]), h2, r2x20);
    let lo2 = l(l(l(z, h0, r[2]), h1, r[1]), h2, r[0]);
    let hi2 = u(u(u(z, h0, r[2]), h1, r[1]), h2, r[0]);
    // hi_k sits at 2^(44k+52): hi0 -> limb1 << 8, hi1 -> limb2 << 8, hi2 at 2^140 == 5*2^10.
    let d0 = _mm512_add_epi64(lo0, _mm512_add_epi64(_mm512_slli_epi64::<10>(hi2), _mm512_slli_epi64::<12>(hi2)));
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

/// Load 16-byte block at `off` of 8 frames: (lo halves, hi halves), lane l = frame l.
/// (A macro so it is always inlined into the target_feature function.)
macro_rules! load_blocks {
    ($f:expr, $off:expr) => {{
        let (f, off): (&[&[u8; PLAIN_LEN]; 8], usize) = ($f, $off);
        let a = _mm512_inserti64x4::<1>(
            _mm512_castsi256_si512(load16x2(arr16(f[0], off), arr16(f[2], off))),
            load16x2(arr16(f[4], off), arr16(f[6], off)),
        ); // [m0|m2|m4|m6]
        let b = _mm512_inserti64x4::<1>(
            _mm512_castsi256_si512(load16x2(arr16(f[1], off), arr16(f[3], off))),
            load16x2(arr16(f[5], off), arr16(f[7], off)),
        ); // [m1|m3|m5|m7]
        (_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b))
    }};
}

#[target_feature(enable = "avx512f,avx512ifma,avx2")]
fn poly16(keys: &Keys, frames: &[u8], n: usize, tags: &mut Tags) {
    assert!(n >= 1 && n <= 16 && frames.len() >= n * SEALED_LEN);
    // Lanes >= n alias frame 0 (valid memory); their results are discarded.
    let idx = |i: usize| if i < n { i } else { 0 };
    let fr = |i: usize| -> &[u8; PLAIN_LEN] { frames[idx(i) * SEALED_LEN..idx(i) * SEALED_LEN + PLAIN_LEN].try_into().unwrap() };
    let fa: [&[u8; PLAIN_LEN]; 8] = core::array::from_fn(|l| fr(l));
    let fb: [&[u8; PLAIN_LEN]; 8] = core::array::from_fn(|l| fr(l + 8));
    let mut sa = poly_init(keys, core::array::from_fn(|l| idx(l)));
    let mut sb = poly_init(keys, core::array::from_fn(|l| idx(l + 8)));
    let hib = _mm512_set1_epi64(1 << 40);
    let two = n > 8;
    for blk in 0..DATA_LEN / 16 {
        let (lo, hi) = load_blocks!(&fa, blk * 16);
        poly_block(&mut sa, lo, hi, hib);
        if two {
            let (lo, hi) = load_blocks!(&fb, blk * 16);
            poly_block(&mut sb, lo, hi, hib);
        }
    }
    // Block 64: 4 tail bytes, zero padded. Block 65: le64(0) || le64(1028).
    let tail = |f: &[&[u8; PLAIN_LEN]; 8]| {
        splat_lanes(&core::array::from_fn(|l| u32::from_le_bytes(f[l][DATA_LEN..PLAIN_LEN].try_into().unwrap()) as u64))
    };
    let z = _mm512_setzero_si512();
    let len = _mm512_set1_epi64(PLAIN_LEN as i64);
    poly_block(&mut sa, tail(&fa), z, hib);
    poly_block(&mut sa, z, len, hib);
    if two {
        poly_block(&mut sb, tail(&fb), z, hib);
        poly_block(&mut sb, z, len, hib);
    }
    for (g, st) in [sa, sb].iter().enumerate() {
        let mut hl = [[0u8; 64]; 3];
        for k in 0..3 {
            store64(&mut hl[k], st.h[k]);
        }
        for l in 0..8 {
            let i = g * 8 + l;
            if i < n {
                let limbs: [u64; 3] = core::array::from_fn(|k| u64::from_le_bytes(hl[k][8 * l..8 * l + 8].try_into().unwrap()));
                tags[i] = poly_finish(&limbs, &[0, 44, 88], &keys[i]);
            }
        }
    }
}

// ---------------- Fused ("stitched") single pass: ChaCha20 x16 interleaved with IFMA Poly1305 ----------------

/// Load block at byte offset `off` (within the frame) of the 8 frames starting at `bases[l]` in `buf`.
macro_rules! load_blocks_at {
    ($buf:expr, $bases:expr, $off:expr) => {{
        let (buf, b, off): (&[u8], &[usize; 8], usize) = ($buf, $bases, $off);
        let a = _mm512_inserti64x4::<1>(
            _mm512_castsi256_si512(load16x2(arr16(buf, b[0] + off), arr16(buf, b[2] + off))),
            load16x2(arr16(buf, b[4] + off), arr16(buf, b[6] + off)),
        );
        let c = _mm512_inserti64x4::<1>(
            _mm512_castsi256_si512(load16x2(arr16(buf, b[1] + off), arr16(buf, b[3] + off))),
            load16x2(arr16(buf, b[5] + off), arr16(buf, b[7] + off)),
        );
        (_mm512_unpacklo_epi64(a, c), _mm512_unpackhi_epi64(a, c))
    }};
}

#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn double_round(x: &mut [__m512i; 16]) {
    qr(x, 0, 4, 8, 12);
    qr(x, 1, 5, 9, 13);
    qr(x, 2, 6, 10, 14);
    qr(x, 3, 7, 11, 15);
    qr(x, 0, 5, 10, 15);
    qr(x, 1, 6, 11, 12);
    qr(x, 2, 7, 8, 13);
    qr(x, 3, 4, 9, 14);
}

/// One group of n <= 16 frames in a single fused pass. `open == false`: seal (encrypt, then MAC
/// ciphertext of the previous 64-byte segment while the next keystream block is computed).
/// `open == true`: MAC the ciphertext of segment j-1 before pass j overwrites it with plaintext.
/// Returns the computed tags; the caller compares (open) or stores (seal) them.
#[target_feature(enable = "avx512f,avx512bw,avx512ifma,avx2")]
fn fused16(key: &[u32; 8], ctr: u64, frames: &mut [u8], n: usize, open: bool, tags: &mut Tags) {
    assert!(n >= 1 && n <= 16 && frames.len() >= n * SEALED_LEN);
    let mut keys = [[0u8; 32]; MAX_LANES];
    chacha16(key, ctr, frames, n, 0, 1, &mut keys);
    let idx = |i: usize| if i < n { i } else { 0 };
    let ba: [usize; 8] = core::array::from_fn(|l| idx(l) * SEALED_LEN);
    let bb: [usize; 8] = core::array::from_fn(|l| idx(l + 8) * SEALED_LEN);
    let mut sa = poly_init(&keys, core::array::from_fn(|l| idx(l)));
    let mut sb = poly_init(&keys, core::array::from_fn(|l| idx(l + 8)));
    keys = [[0u8; 32]; MAX_LANES];
    core::hint::black_box(&keys);
    let hib = _mm512_set1_epi64(1 << 40);
    let mut lo = [0u8; 64];
    let mut hi = [0u8; 64];
    for i in 0..16 {
        let c = ctr.wrapping_add(i as u64);
        lo[4 * i..4 * i + 4].copy_from_slice(&(c as u32).to_le_bytes());
        hi[4 * i..4 * i + 4].copy_from_slice(&((c >> 32) as u32).to_le_bytes());
    }
    let mut s = [_mm512_setzero_si512(); 16];
    for (k, w) in [0x61707865u32, 0x3320646e, 0x79622d32, 0x6b206574].iter().enumerate() {
        s[k] = _mm512_set1_epi32(*w as i32);
    }
    for k in 0..8 {
        s[4 + k] = _mm512_set1_epi32(key[k] as i32);
    }
    s[14] = load64(&lo);
    s[15] = load64(&hi);
    for j in 1..CHACHA_BLOCKS {
        // Segment whose ciphertext the MAC consumes during this pass.
        let seg = if open { Some(j - 1) } else if j >= 2 { Some(j - 2) } else { None };
        s[12] = _mm512_set1_epi32(j as i32);
        let mut x = s;
        for dr in 0..10u32 {
            double_round(&mut x);
            if let Some(sg) = seg {
                if dr < 4 && sg < 16 {
                    let off = sg as usize * 64 + dr as usize * 16;
                    let (l, h) = load_blocks_at!(frames, &ba, off);
                    poly_block(&mut sa, l, h, hib);
                    let (l, h) = load_blocks_at!(frames, &bb, off);
                    poly_block(&mut sb, l, h, hib);
                }
            }
        }
        if open && j == CHACHA_BLOCKS - 1 {
            // MAC the 4-byte tail ciphertext before decrypting it.
            poly_tail(&mut sa, &mut sb, frames, &ba, &bb, hib);
        }
        for k in 0..16 {
            x[k] = _mm512_add_epi32(x[k], s[k]);
        }
        if j == CHACHA_BLOCKS - 1 {
            let mut w = [0u8; 64];
            store64(&mut w, x[0]);
            for i in 0..n {
                let off = i * SEALED_LEN + DATA_LEN;
                for b in 0..4 {
                    frames[off + b] ^= w[4 * i + b];
                }
            }
            continue;
        }
        let rows = transpose16(&x);
        let base = (j as usize - 1) * 64;
        for i in 0..n {
            let p = arr64(frames, i * SEALED_LEN + base);
            let v = _mm512_xor_si512(load64(p), rows[i]);
            store64(p, v);
        }
    }
    if !open {
        poly_tail(&mut sa, &mut sb, frames, &ba, &bb, hib);
    }
    for (g, st) in [sa, sb].iter().enumerate() {
        let mut hl = [[0u8; 64]; 3];
        for k in 0..3 {
            store64(&mut hl[k], st.h[k]);
        }
        for l in 0..8 {
            let i = g * 8 + l;
            if i < n {
                let limbs: [u64; 3] = core::array::from_fn(|k| u64::from_le_bytes(hl[k][8 * l..8 * l + 8].try_into().unwrap()));
                let key_i = {
                    // Poly key is only needed for s in the final addition; recompute block 0 lazily is
                    // costly, so poly_finish takes s from the stored state (see PolyState::s).
                    let mut k = [0u8; 32];
                    k[16..].copy_from_slice(&st.s[l].to_le_bytes());
                    k
                };
                tags[i] = poly_finish(&limbs, &[0, 44, 88], &key_i);
            }
        }
    }
}

/// Remaining MAC input after the 64 full blocks: the 4 tail bytes (padded) and the length block.
#[inline]
#[target_feature(enable = "avx512f,avx512ifma,avx2")]
fn poly_tail(sa: &mut PolyState, sb: &mut PolyState, frames: &[u8], ba: &[usize; 8], bb: &[usize; 8], hib: __m512i) {
    let tail = |b: &[usize; 8]| {
        splat_lanes(&core::array::from_fn(|l| {
            u32::from_le_bytes(frames[b[l] + DATA_LEN..b[l] + PLAIN_LEN].try_into().unwrap()) as u64
        }))
    };
    let z = _mm512_setzero_si512();
    let len = _mm512_set1_epi64(PLAIN_LEN as i64);
    poly_block(sa, tail(ba), z, hib);
    poly_block(sa, z, len, hib);
    poly_block(sb, tail(bb), z, hib);
    poly_block(sb, z, len, hib);
}

/// Fused engine (same detection as Avx512). Open decrypts while MACing; a frame whose tag
/// fails is overwritten with zeros (bytes 0..1028) before returning, as are later frames
/// of the same group; later groups are not touched (remain ciphertext).
pub fn seal_fused(_t: &Avx512, key: &[u8; 32], ctr0: u64, buf: &mut [u8]) {
    assert!(buf.len() % SEALED_LEN == 0);
    let kw = key_words(key);
    let mut tags = [[0u8; 16]; MAX_LANES];
    for (g, chunk) in buf.chunks_mut(16 * SEALED_LEN).enumerate() {
        let n = chunk.len() / SEALED_LEN;
        // SAFETY: an `Avx512` token exists only if the required features were detected.
        unsafe { fused16(&kw, ctr0.wrapping_add(g as u64 * 16), chunk, n, false, &mut tags) };
        for (i, f) in chunk.chunks_exact_mut(SEALED_LEN).enumerate() {
            f[PLAIN_LEN..].copy_from_slice(&tags[i]);
        }
    }
}

pub fn open_fused(_t: &Avx512, key: &[u8; 32], ctr0: u64, buf: &mut [u8]) -> Result<(), usize> {
    assert!(buf.len() % SEALED_LEN == 0);
    let kw = key_words(key);
    let mut tags = [[0u8; 16]; MAX_LANES];
    for (g, chunk) in buf.chunks_mut(16 * SEALED_LEN).enumerate() {
        let n = chunk.len() / SEALED_LEN;
        // SAFETY: as above.
        unsafe { fused16(&kw, ctr0.wrapping_add(g as u64 * 16), chunk, n, true, &mut tags) };
        let mut bad = n;
        for (i, f) in chunk.chunks_exact(SEALED_LEN).enumerate() {
            let mut d = 0u8;
            for k in 0..16 {
                d |= tags[i][k] ^ f[PLAIN_LEN + k];
            }
            if core::hint::black_box(d) != 0 {
                bad = i;
                break;
            }
        }
        if bad < n {
            for f in chunk[bad * SEALED_LEN..].chunks_exact_mut(SEALED_LEN) {
                f[..PLAIN_LEN].fill(0);
            }
            return Err(g * 16 + bad);
        }
    }
    Ok(())
}
