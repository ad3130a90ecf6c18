//! AVX2 engine: ChaCha20 with 8 frames per pass (one 32-bit lane per frame),
//! Poly1305 with 4 frames per ymm (26-bit limbs, vpmuludq), two ymm sets = 8 frames.
use crate::*;
use core::arch::x86_64::*;

/// Proof that AVX2 is available (only constructible after runtime detection).
#[derive(Clone, Copy)]
pub struct Avx2(());

impl Avx2 {
    pub fn new() -> Option<Self> {
        if is_x86_feature_detected!("avx2") {
            Some(Avx2(()))
        } else {
            None
        }
    }
}

impl Engine for Avx2 {
    const LANES: usize = 8;
    fn chacha(&self, key: &[u32; 8], ctr: u64, frames: &mut [u8], n: usize, j0: u32, j1: u32, keys: &mut Keys) {
        // SAFETY: `self` exists only if AVX2 was detected at runtime.
        unsafe { chacha8(key, ctr, frames, n, j0, j1, keys) }
    }
    fn tags(&self, keys: &Keys, frames: &[u8], n: usize, tags: &mut Tags) {
        // SAFETY: `self` exists only if AVX2 was detected at runtime.
        unsafe { poly8(keys, frames, n, tags) }
    }
}

// ---- memory helpers: the only unsafe blocks besides the dispatch above ----

#[inline]
#[target_feature(enable = "avx2")]
fn load32(b: &[u8; 32]) -> __m256i {
    // SAFETY: `b` is a valid reference to 32 bytes; loadu has no alignment requirement.
    unsafe { _mm256_loadu_si256(b.as_ptr().cast()) }
}
#[inline]
#[target_feature(enable = "avx2")]
fn store32(b: &mut [u8; 32], v: __m256i) {
    // SAFETY: `b` is a valid exclusive reference to 32 bytes; storeu has no alignment requirement.
    unsafe { _mm256_storeu_si256(b.as_mut_ptr().cast(), v) }
}
#[inline]
#[target_feature(enable = "avx2")]
fn load16x2(lo: &[u8; 16], hi: &[u8; 16]) -> __m256i {
    // SAFETY: both are valid references to 16 bytes; unaligned loads.
    unsafe { _mm256_loadu2_m128i(hi.as_ptr().cast(), lo.as_ptr().cast()) }
}

#[inline]
fn arr32(s: &mut [u8], off: usize) -> &mut [u8; 32] {
    (&mut s[off..off + 32]).try_into().unwrap()
}
#[inline]
fn arr16(s: &[u8], off: usize) -> &[u8; 16] {
    s[off..off + 16].try_into().unwrap()
}

// ---------------- ChaCha20, 8 lanes ----------------

#[inline]
#[target_feature(enable = "avx2")]
fn rotl<const L: i32, const R: i32>(x: __m256i) -> __m256i {
    _mm256_or_si256(_mm256_slli_epi32::<L>(x), _mm256_srli_epi32::<R>(x))
}

#[inline]
#[target_feature(enable = "avx2")]
fn qr(x: &mut [__m256i; 16], a: usize, b: usize, c: usize, d: usize, r16: __m256i, r8: __m256i) {
    x[a] = _mm256_add_epi32(x[a], x[b]);
    x[d] = _mm256_shuffle_epi8(_mm256_xor_si256(x[d], x[a]), r16);
    x[c] = _mm256_add_epi32(x[c], x[d]);
    x[b] = rotl::<12, 20>(_mm256_xor_si256(x[b], x[c]));
    x[a] = _mm256_add_epi32(x[a], x[b]);
    x[d] = _mm256_shuffle_epi8(_mm256_xor_si256(x[d], x[a]), r8);
    x[c] = _mm256_add_epi32(x[c], x[d]);
    x[b] = rotl::<7, 25>(_mm256_xor_si256(x[b], x[c]));
}

/// 8x8 transpose of 32-bit words: out[i] = [a0[i], a1[i], ..., a7[i]].
macro_rules! transpose8 {
    ($a:expr) => {{
    let a: &[__m256i] = $a;
    let t0 = _mm256_unpacklo_epi32(a[0], a[1]);
    let t1 = _mm256_unpackhi_epi32(a[0], a[1]);
    let t2 = _mm256_unpacklo_epi32(a[2], a[3]);
    let t3 = _mm256_unpackhi_epi32(a[2], a[3]);
    let t4 = _mm256_unpacklo_epi32(a[4], a[5]);
    let t5 = _mm256_unpackhi_epi32(a[4], a[5]);
    let t6 = _mm256_unpacklo_epi32(a[6], a[7]);
    let t7 = _mm256_unpackhi_epi32(a[6], a[7]);
    let u0 = _mm256_unpacklo_epi64(t0, t2);
    let u1 = _mm256_unpackhi_epi64(t0, t2);
    let u2 = _mm256_unpacklo_epi64(t1, t3);
    let u3 = _mm256_unpackhi_epi64(t1, t3);
    let u4 = _mm256_unpacklo_epi64(t4, t6);
    let u5 = _mm256_unpackhi_epi64(t4, t6);
    let u6 = _mm256_unpacklo_epi64(t5, t7);
    let u7 = _mm256_unpackhi_epi64(t5, t7);
    [
        _mm256_permute2x128_si256::<0x20>(u0, u4),
        _mm256_permute2x128_si256::<0x20>(u1, u5),
        _mm256_permute2x128_si256::<0x20>(u2, u6),
        _mm256_permute2x128_si256::<0x20>(u3, u7),
        _mm256_permute2x128_si256::<0x31>(u0, u4),
        _mm256_permute2x128_si256::<0x31>(u1, u5),
        _mm256_permute2x128_si256::<0x31>(u2, u6),
        _mm256_permute2x128_si256::<0x31>(u3, u7),
    ]
    }};
}

#[target_feature(enable = "avx2")]
fn chacha8(key: &[u32; 8], ctr: u64, frames: &mut [u8], n: usize, j0: u32, j1: u32, keys: &mut Keys) {
    assert!(n <= 8 && frames.len() >= n * SEALED_LEN);
    let r16 = _mm256_setr_epi8(
        2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13,
    );
    let r8 = _mm256_setr_epi8(
        3, 0, 1, 2, 7, 4, 5, 6, 11, 8, 9, 10, 15, 12, 13, 14, 3, 0, 1, 2, 7, 4, 5, 6, 11, 8, 9, 10, 15, 12, 13, 14,
    );
    let c: [u64; 8] = core::array::from_fn(|i| ctr.wrapping_add(i as u64));
    let lo: [i32; 8] = core::array::from_fn(|i| c[i] as u32 as i32);
    let hi: [i32; 8] = core::array::from_fn(|i| (c[i] >> 32) as u32 as i32);
    let mut s = [_mm256_setzero_si256(); 16];
    for (k, w) in [0x61707865u32, 0x3320646e, 0x79622d32, 0x6b206574].iter().enumerate() {
        s[k] = _mm256_set1_epi32(*w as i32);
    }
    for k in 0..8 {
        s[4 + k] = _mm256_set1_epi32(key[k] as i32);
    }
    // s[13] = nonce word 0 = 0; words 14/15 = per-lane frame counter.
    s[14] = _mm256_setr_epi32(lo[0], lo[1], lo[2], lo[3], lo[4], lo[5], lo[6], lo[7]);
    s[15] = _mm256_setr_epi32(hi[0], hi[1], hi[2], hi[3], hi[4], hi[5], hi[6], hi[7]);
    for j in j0..j1 {
        s[12] = _mm256_set1_epi32(j as i32);
        let mut x = s;
        for _ in 0..10 {
            qr(&mut x, 0, 4, 8, 12, r16, r8);
            qr(&mut x, 1, 5, 9, 13, r16, r8);
            qr(&mut x, 2, 6, 10, 14, r16, r8);
            qr(&mut x, 3, 7, 11, 15, r16, r8);
            qr(&mut x, 0, 5, 10, 15, r16, r8);
            qr(&mut x, 1, 6, 11, 12, r16, r8);
            qr(&mut x, 2, 7, 8, 13, r16, r8);
            qr(&mut x, 3, 4, 9, 14, r16, r8);
        }
        for k in 0..16 {
            x[k] = _mm256_add_epi32(x[k], s[k]);
        }
        if j == CHACHA_BLOCKS - 1 {
            // Last data block: only 4 bytes (offset 1024..1028) = word 0 of each lane.
            let mut w = [0u8; 32];
            store32(&mut w, x[0]);
            for i in 0..n {
                let off = i * SEALED_LEN + DATA_LEN;
                for b in 0..4 {
                    frames[off + b] ^= w[4 * i + b];
                }
            }
            continue;
        }
        let a = transpose8!(&x[0..8]);
        if j == 0 {
            for i in 0..n {
                store32(&mut keys[i], a[i]);
            }
            continue;
        }
        let b = transpose8!(&x[8..16]);
        let base = (j as usize - 1) * 64;
        for i in 0..n {
            let off = i * SEALED_LEN + base;
            let p = arr32(frames, off);
            let v = _mm256_xor_si256(load32(p), a[i]);
            store32(p, v);
            let p = arr32(frames, off + 32);
            let v = _mm256_xor_si256(load32(p), b[i]);
            store32(p, v);
        }
    }
}

#[inline]
#[target_feature(enable = "avx2,avx512f,avx512vl")]
fn qr_vl(x: &mut [__m256i; 16], a: usize, b: usize, c: usize, d: usize, _r16: __m256i, _r8: __m256i) {
    x[a] = _mm256_add_epi32(x[a], x[b]);
    x[d] = _mm256_rol_epi32::<16>(_mm256_xor_si256(x[d], x[a]));
    x[c] = _mm256_add_epi32(x[c], x[d]);
    x[b] = _mm256_rol_epi32::<12>(_mm256_xor_si256(x[b], x[c]));
    x[a] = _mm256_add_epi32(x[a], x[b]);
    x[d] = _mm256_rol_epi32::<8>(_mm256_xor_si256(x[d], x[a]));
    x[c] = _mm256_add_epi32(x[c], x[d]);
    x[b] = _mm256_rol_epi32::<7>(_mm256_xor_si256(x[b], x[c]));
}

/// Chacha8 with VL rotations; `None` unless AVX-512F/VL detected.
pub fn chacha8_vl_checked(key: &[u32; 8], ctr: u64, frames: &mut [u8], n: usize, j0: u32, j1: u32, keys: &mut Keys) -> Option<()> {
    if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512vl") {
        // SAFETY: required features detected just above.
        unsafe { chacha8_vl(key, ctr, frames, n, j0, j1, keys) };
        Some(())
    } else {
        None
    }
}

/// Experiment: same as chacha8 but with AVX-512VL vprold on ymm (fewer ops per rotate).
#[target_feature(enable = "avx2,avx512f,avx512vl")]
pub(crate) fn chacha8_vl(key: &[u32; 8], ctr: u64, frames: &mut [u8], n: usize, j0: u32, j1: u32, keys: &mut Keys) {
    assert!(n <= 8 && frames.len() >= n * SEALED_LEN);
    let r16 = _mm256_setr_epi8(
        2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13,
    );
    let r8 = _mm256_setr_epi8(
        3, 0, 1, 2, 7, 4, 5, 6, 11, 8, 9, 10, 15, 12, 13, 14, 3, 0, 1, 2, 7, 4, 5, 6, 11, 8, 9, 10, 15, 12, 13, 14,
    );
    let c: [u64; 8] = core::array::from_fn(|i| ctr.wrapping_add(i as u64));
    let lo: [i32; 8] = core::array::from_fn(|i| c[i] as u32 as i32);
    let hi: [i32; 8] = core::array::from_fn(|i| (c[i] >> 32) as u32 as i32);
    let mut s = [_mm256_setzero_si256(); 16];
    for (k, w) in [0x61707865u32, 0x3320646e, 0x79622d32, 0x6b206574].iter().enumerate() {
        s[k] = _mm256_set1_epi32(*w as i32);
    }
    for k in 0..8 {
        s[4 + k] = _mm256_set1_epi32(key[k] as i32);
    }
    // s[13] = nonce word 0 = 0; words 14/15 = per-lane frame counter.
    s[14] = _mm256_setr_epi32(lo[0], lo[1], lo[2], lo[3], lo[4], lo[5], lo[6], lo[7]);
    s[15] = _mm256_setr_epi32(hi[0], hi[1], hi[2], hi[3], hi[4], hi[5], hi[6], hi[7]);
    for j in j0..j1 {
        s[12] = _mm256_set1_epi32(j as i32);
        let mut x = s;
        for _ in 0..10 {
            qr_vl(&mut x, 0, 4, 8, 12, r16, r8);
            qr_vl(&mut x, 1, 5, 9, 13, r16, r8);
            qr_vl(&mut x, 2, 6, 10, 14, r16, r8);
            qr_vl(&mut x, 3, 7, 11, 15, r16, r8);
            qr_vl(&mut x, 0, 5, 10, 15, r16, r8);
            qr_vl(&mut x, 1, 6, 11, 12, r16, r8);
            qr_vl(&mut x, 2, 7, 8, 13, r16, r8);
            qr_vl(&mut x, 3, 4, 9, 14, r16, r8);
        }
        for k in 0..16 {
            x[k] = _mm256_add_epi32(x[k], s[k]);
        }
        if j == CHACHA_BLOCKS - 1 {
            // Last data block: only 4 bytes (offset 1024..1028) = word 0 of each lane.
            let mut w = [0u8; 32];
            store32(&mut w, x[0]);
            for i in 0..n {
                let off = i * SEALED_LEN + DATA_LEN;
                for b in 0..4 {
                    frames[off + b] ^= w[4 * i + b];
                }
            }
            continue;
        }
        let a = transpose8!(&x[0..8]);
        if j == 0 {
            for i in 0..n {
                store32(&mut keys[i], a[i]);
            }
            continue;
        }
        let b = transpose8!(&x[8..16]);
        let base = (j as usize - 1) * 64;
        for i in 0..n {
            let off = i * SEALED_LEN + base;
            let p = arr32(frames, off);
            let v = _mm256_xor_si256(load32(p), a[i]);
            store32(p, v);
            let p = arr32(frames, off + 32);
            let v = _mm256_xor_si256(load32(p), b[i]);
            store32(p, v);
        }
    }
}

// ---------------- Poly1305, 4 lanes per ymm (26-bit limbs in 64-bit lanes) ----------------

const M26: i64 = 0x3ffffff;

#[derive(Clone, Copy)]
struct PolyState {
    h: [__m256i; 5],
    r: [__m256i; 5],
    s: [__m256i; 5], // 5 * r (s[0] unused)
}

#[inline]
#[target_feature(enable = "avx2")]
fn poly_init(keys: &Keys, lanes: [usize; 4]) -> PolyState {
    let rl: [[i64; 5]; 4] = core::array::from_fn(|l| {
        let r = poly_r(&keys[lanes[l]]);
        core::array::from_fn(|k| ((r >> (26 * k)) as i64) & M26)
    });
    let r: [__m256i; 5] = core::array::from_fn(|k| _mm256_setr_epi64x(rl[0][k], rl[1][k], rl[2][k], rl[3][k]));
    let s: [__m256i; 5] = core::array::from_fn(|k| _mm256_add_epi64(r[k], _mm256_slli_epi64::<2>(r[k])));
    PolyState { h: [_mm256_setzero_si256(); 5], r, s }
}

/// Split 4 message blocks (lo/hi 64-bit halves, one block per 64-bit lane) into 26-bit limbs
/// and add to h, then h = h * r (lazy-reduced: limbs < 2^26 + 2^10 on output).
#[inline]
#[target_feature(enable = "avx2")]
fn poly_block(st: &mut PolyState, lo: __m256i, hi: __m256i, hibit: __m256i) {
    let m = _mm256_set1_epi64x(M26);
    let h = &st.h;
    let h0 = _mm256_add_epi64(h[0], _mm256_and_si256(lo, m));
    let h1 = _mm256_add_epi64(h[1], _mm256_and_si256(_mm256_srli_epi64::<26>(lo), m));
    let h2 = _mm256_add_epi64(
        h[2],
        _mm256_and_si256(_mm256_or_si256(_mm256_srli_epi64::<52>(lo), _mm256_slli_epi64::<12>(hi)), m),
    );
    let h3 = _mm256_add_epi64(h[3], _mm256_and_si256(_mm256_srli_epi64::<14>(hi), m));
    let h4 = _mm256_add_epi64(h[4], _mm256_or_si256(_mm256_srli_epi64::<40>(hi), hibit));
    let (r, s) = (&st.r, &st.s);
    let mul = _mm256_mul_epu32;
    let add = _mm256_add_epi64;
    let d0 = add(add(add(mul(h0, r[0]), mul(h1, s[4])), add(mul(h2, s[3]), mul(h3, s[2]))), mul(h4, s[1]));
    let d1 = add(add(add(mul(h0, r[1]), mul(h1, r[0])), add(mul(h2, s[4]), mul(h3, s[3]))), mul(h4, s[2]));
    let d2 = add(add(add(mul(h0, r[2]), mul(h1, r[1])), add(mul(h2, r[0]), mul(h3, s[4]))), mul(h4, s[3]));
    let d3 = add(add(add(mul(h0, r[3]), mul(h1, r[2])), add(mul(h2, r[1]), mul(h3, r[0]))), mul(h4, s[4]));
    let d4 = add(add(add(mul(h0, r[4]), mul(h1, r[3])), add(mul(h2, r[2]), mul(h3, r[1]))), mul(h4, r[0]));
    // Two interleaved carry chains (0->1->2->3, 3->4->0->1).
    let c0 = _mm256_srli_epi64::<26>(d0);
    let c3 = _mm256_srli_epi64::<26>(d3);
    let d0 = _mm256_and_si256(d0, m);
    let d3 = _mm256_and_si256(d3, m);
    let d1 = add(d1, c0);
    let d4 = add(d4, c3);
    let c1 = _mm256_srli_epi64::<26>(d1);
    let c4 = _mm256_srli_epi64::<26>(d4);
    let d1 = _mm256_and_si256(d1, m);
    let d4 = _mm256_and_si256(d4, m);
    let d2 = add(d2, c1);
    let d0 = add(d0, add(c4, _mm256_slli_epi64::<2>(c4)));
    let c2 = _mm256_srli_epi64::<26>(d2);
    let c0 = _mm256_srli_epi64::<26>(d0);
    let d2 = _mm256_and_si256(d2, m);
    let d0 = _mm256_and_si256(d0, m);
    let d3 = add(d3, c2);
    let d1 = add(d1, c0);
    let c3 = _mm256_srli_epi64::<26>(d3);
    let d3 = _mm256_and_si256(d3, m);
    let d4 = add(d4, c3);
    st.h = [d0, d1, d2, d3, d4];
}

/// Load 16-byte block at `off` from 4 frames into (lo halves, hi halves), lane l = frame l.
/// (A macro so it is always inlined into the target_feature function.)
macro_rules! load_blocks {
    ($f:expr, $off:expr) => {{
        let (f, off): (&[&[u8; PLAIN_LEN]; 4], usize) = ($f, $off);
        let a = load16x2(arr16(f[0], off), arr16(f[2], off)); // [m0 | m2]
        let b = load16x2(arr16(f[1], off), arr16(f[3], off)); // [m1 | m3]
        (_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b))
    }};
}

#[target_feature(enable = "avx2")]
fn poly8(keys: &Keys, frames: &[u8], n: usize, tags: &mut Tags) {
    assert!(n >= 1 && n <= 8 && frames.len() >= n * SEALED_LEN);
    // Lanes >= n alias frame 0 (valid memory); their results are discarded.
    let fr = |i: usize| -> &[u8; PLAIN_LEN] {
        let i = if i < n { i } else { 0 };
        frames[i * SEALED_LEN..i * SEALED_LEN + PLAIN_LEN].try_into().unwrap()
    };
    let fa: [&[u8; PLAIN_LEN]; 4] = core::array::from_fn(|l| fr(l));
    let fb: [&[u8; PLAIN_LEN]; 4] = core::array::from_fn(|l| fr(l + 4));
    let ka = core::array::from_fn(|l| if l < n { l } else { 0 });
    let kb = core::array::from_fn(|l| if l + 4 < n { l + 4 } else { 0 });
    let mut sa = poly_init(keys, ka);
    let mut sb = poly_init(keys, kb);
    let hib = _mm256_set1_epi64x(1 << 24);
    for blk in 0..DATA_LEN / 16 {
        let (lo, hi) = load_blocks!(&fa, blk * 16);
        poly_block(&mut sa, lo, hi, hib);
        let (lo, hi) = load_blocks!(&fb, blk * 16);
        poly_block(&mut sb, lo, hi, hib);
    }
    // Block 64: the 4 tail bytes zero padded (AEAD pad16). Block 65: le64(aad_len=0) || le64(1028).
    let t = |f: &[u8; PLAIN_LEN]| u32::from_le_bytes(f[DATA_LEN..PLAIN_LEN].try_into().unwrap()) as i64;
    let z = _mm256_setzero_si256();
    let lo = _mm256_setr_epi64x(t(fa[0]), t(fa[1]), t(fa[2]), t(fa[3]));
    poly_block(&mut sa, lo, z, hib);
    let lo = _mm256_setr_epi64x(t(fb[0]), t(fb[1]), t(fb[2]), t(fb[3]));
    poly_block(&mut sb, lo, z, hib);
    let len = _mm256_set1_epi64x(PLAIN_LEN as i64);
    poly_block(&mut sa, z, len, hib);
    poly_block(&mut sb, z, len, hib);
    for (g, st) in [sa, sb].iter().enumerate() {
        let mut hl = [[0u8; 32]; 5];
        for k in 0..5 {
            store32(&mut hl[k], st.h[k]);
        }
        for l in 0..4 {
            let i = g * 4 + l;
            if i < n {
                let limbs: [u64; 5] = core::array::from_fn(|k| u64::from_le_bytes(hl[k][8 * l..8 * l + 8].try_into().unwrap()));
                tags[i] = poly_finish(&limbs, &[0, 26, 52, 78, 104], &keys[i]);
            }
        }
    }
}
