//! Multi-frame ("multi-buffer") ChaCha20-Poly1305 for fixed-size secret-connection frames.
//!
//! A frame is 1028 plaintext bytes sealed into 1044 bytes (ciphertext || 16-byte tag),
//! RFC 8439 AEAD with empty AAD, nonce = [0,0,0,0, counter.to_le_bytes()].
//! N consecutive frames share the key and use counters ctr0, ctr0+1, ...
//! Buffers hold the frames back to back with a 1044-byte stride.
//!
//! Engines process a group of `LANES` frames at once: one SIMD lane per frame.
#![deny(unsafe_op_in_unsafe_fn)]

pub mod scalar;
#[cfg(target_arch = "x86_64")]
pub mod avx2;
#[cfg(target_arch = "x86_64")]
pub mod avx512;

pub const DATA_LEN: usize = 1024;
pub const PLAIN_LEN: usize = 1028;
pub const TAG_LEN: usize = 16;
pub const SEALED_LEN: usize = PLAIN_LEN + TAG_LEN;
/// ChaCha20 blocks per frame: block 0 = Poly1305 key, blocks 1..=17 = data (block 17 uses 4 bytes).
pub const CHACHA_BLOCKS: u32 = 18;
pub const MAX_LANES: usize = 16;

pub type Keys = [[u8; 32]; MAX_LANES];
pub type Tags = [[u8; 16]; MAX_LANES];

/// A multi-lane backend. `frames` holds `n <= LANES` sealed-size frames (stride SEALED_LEN).
pub trait Engine {
    const LANES: usize;
    /// Compute ChaCha20 blocks `j0..j1` for frames 0..n (counter ctr+i).
    /// Block 0 is written (first 32 bytes) to `keys[i]`; blocks 1..=17 are XORed into
    /// bytes 0..1028 of frame i.
    fn chacha(&self, key: &[u32; 8], ctr: u64, frames: &mut [u8], n: usize, j0: u32, j1: u32, keys: &mut Keys);
    /// Poly1305 tag over bytes 0..1028 of frame i (AEAD padding + lengths, no AAD) with key keys[i].
    fn tags(&self, keys: &Keys, frames: &[u8], n: usize, tags: &mut Tags);
}

pub fn key_words(key: &[u8; 32]) -> [u32; 8] {
    core::array::from_fn(|i| u32::from_le_bytes(key[4 * i..4 * i + 4].try_into().unwrap()))
}

pub fn nonce(counter: u64) -> [u8; 12] {
    let mut n = [0u8; 12];
    n[4..].copy_from_slice(&counter.to_le_bytes());
    n
}

/// Seal `buf.len() / SEALED_LEN` frames in place: bytes 0..1028 of each frame are plaintext
/// on entry, ciphertext on exit; bytes 1028..1044 receive the tag.
pub fn seal_with<E: Engine>(e: &E, key: &[u8; 32], ctr0: u64, buf: &mut [u8]) {
    assert!(buf.len() % SEALED_LEN == 0);
    let kw = key_words(key);
    let mut keys = [[0u8; 32]; MAX_LANES];
    let mut tags = [[0u8; 16]; MAX_LANES];
    for (g, chunk) in buf.chunks_mut(E::LANES * SEALED_LEN).enumerate() {
        let n = chunk.len() / SEALED_LEN;
        let ctr = ctr0.wrapping_add((g * E::LANES) as u64);
        e.chacha(&kw, ctr, chunk, n, 0, CHACHA_BLOCKS, &mut keys);
        e.tags(&keys, chunk, n, &mut tags);
        for (i, f) in chunk.chunks_exact_mut(SEALED_LEN).enumerate() {
            f[PLAIN_LEN..].copy_from_slice(&tags[i]);
        }
    }
    keys = [[0u8; 32]; MAX_LANES];
    core::hint::black_box(&keys);
}

fn ct_eq16(a: &[u8; 16], b: &[u8]) -> bool {
    let mut d = 0u8;
    for i in 0..16 {
        d |= a[i] ^ b[i];
    }
    core::hint::black_box(d) == 0
}

/// Open frames in place. Tags are verified before any frame of a group is decrypted.
/// Ok(()): every frame's bytes 0..1028 now hold plaintext.
/// Err(i): frame i (index from the start of `buf`) failed; frames 0..i are decrypted and
/// authentic, frames i.. are left as ciphertext (no unauthenticated plaintext is written).
pub fn open_with<E: Engine>(e: &E, key: &[u8; 32], ctr0: u64, buf: &mut [u8]) -> Result<(), usize> {
    assert!(buf.len() % SEALED_LEN == 0);
    let kw = key_words(key);
    let mut keys = [[0u8; 32]; MAX_LANES];
    let mut tags = [[0u8; 16]; MAX_LANES];
    let mut res = Ok(());
    for (g, chunk) in buf.chunks_mut(E::LANES * SEALED_LEN).enumerate() {
        let n = chunk.len() / SEALED_LEN;
        let ctr = ctr0.wrapping_add((g * E::LANES) as u64);
        e.chacha(&kw, ctr, chunk, n, 0, 1, &mut keys);
        e.tags(&keys, chunk, n, &mut tags);
        let mut ok = n;
        for (i, f) in chunk.chunks_exact(SEALED_LEN).enumerate() {
            if !ct_eq16(&tags[i], &f[PLAIN_LEN..]) {
                ok = i;
                break;
            }
        }
        if ok > 0 {
            e.chacha(&kw, ctr, chunk, ok, 1, CHACHA_BLOCKS, &mut keys);
        }
        if ok < n {
            res = Err(g * E::LANES + ok);
            break;
        }
    }
    keys = [[0u8; 32]; MAX_LANES];
    core::hint::black_box(&keys);
    res
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Scalar,
    Avx2,
    Avx512,
    Avx512Fused,
}

pub fn available_backends() -> Vec<Backend> {
    let mut v = vec![Backend::Scalar];
    #[cfg(target_arch = "x86_64")]
    {
        if avx2::Avx2::new().is_some() {
            v.push(Backend::Avx2);
        }
        if avx512::Avx512::new().is_some() {
            v.push(Backend::Avx512);
            v.push(Backend::Avx512Fused);
        }
    }
    v
}

pub fn seal_frames_backend(b: Backend, key: &[u8; 32], ctr0: u64, buf: &mut [u8]) {
    match b {
        Backend::Scalar => seal_with(&scalar::Scalar, key, ctr0, buf),
        #[cfg(target_arch = "x86_64")]
        Backend::Avx2 => seal_with(&avx2::Avx2::new().expect("avx2"), key, ctr0, buf),
        #[cfg(target_arch = "x86_64")]
        Backend::Avx512 => seal_with(&avx512::Avx512::new().expect("avx512"), key, ctr0, buf),
        #[cfg(target_arch = "x86_64")]
        Backend::Avx512Fused => avx512::seal_fused(&avx512::Avx512::new().expect("avx512"), key, ctr0, buf),
        #[allow(unreachable_patterns)]
        _ => seal_with(&scalar::Scalar, key, ctr0, buf),
    }
}

pub fn open_frames_backend(b: Backend, key: &[u8; 32], ctr0: u64, buf: &mut [u8]) -> Result<(), usize> {
    match b {
        Backend::Scalar => open_with(&scalar::Scalar, key, ctr0, buf),
        #[cfg(target_arch = "x86_64")]
        Backend::Avx2 => open_with(&avx2::Avx2::new().expect("avx2"), key, ctr0, buf),
        #[cfg(target_arch = "x86_64")]
        Backend::Avx512 => open_with(&avx512::Avx512::new().expect("avx512"), key, ctr0, buf),
        #[cfg(target_arch = "x86_64")]
        Backend::Avx512Fused => avx512::open_fused(&avx512::Avx512::new().expect("avx512"), key, ctr0, buf),
        #[allow(unreachable_patterns)]
        _ => open_with(&scalar::Scalar, key, ctr0, buf),
    }
}

// ---------------- shared Poly1305 helpers (scalar, per frame) ----------------

const R_CLAMP: u128 = 0x0ffffffc_0ffffffc_0ffffffc_0fffffff;

pub(crate) fn poly_r(key: &[u8; 32]) -> u128 {
    u128::from_le_bytes(key[..16].try_into().unwrap()) & R_CLAMP
}

/// acc (256-bit little-endian words) += v << shift
fn add_shifted(acc: &mut [u64; 4], v: u64, shift: u32) {
    let w = (shift / 64) as usize;
    let x = (v as u128) << (shift % 64);
    let mut carry = 0u128;
    let parts = [x as u64, (x >> 64) as u64];
    for k in w..4 {
        let add = if k - w < 2 { parts[k - w] as u128 } else { 0 };
        let s = acc[k] as u128 + add + carry;
        acc[k] = s as u64;
        carry = s >> 64;
    }
}

/// Final Poly1305 step from a lazily reduced accumulator given as limbs (value = sum limb_k << shift_k,
/// each limb < 2^63, total < 2^192): tag = ((h mod p) + s) mod 2^128. Fixed operation sequence.
pub(crate) fn poly_finish(limbs: &[u64], shifts: &[u32], key: &[u8; 32]) -> [u8; 16] {
    let mut acc = [0u64; 4];
    for (l, s) in limbs.iter().zip(shifts) {
        add_shifted(&mut acc, *l, *s);
    }
    // Fold bits >= 130 three times: afterwards h < 2^130 (see report for the bound argument).
    for _ in 0..3 {
        let hi = (acc[2] >> 2) | (acc[3] << 62);
        acc[2] &= 3;
        acc[3] = 0;
        add_shifted(&mut acc, hi, 0);
        add_shifted(&mut acc, hi, 2); // + 4*hi  => + 5*hi total
    }
    let v = (acc[0] as u128) | ((acc[1] as u128) << 64);
    let g = v.wrapping_add(5);
    let carry = (g < v) as u64;
    let sel = ((acc[2] + carry) >> 2) & 1; // 1 iff h + 5 >= 2^130 iff h >= p
    let mask = 0u128.wrapping_sub(sel as u128);
    let h = (v & !mask) | (g & mask);
    let s = u128::from_le_bytes(key[16..32].try_into().unwrap());
    h.wrapping_add(s).to_le_bytes()
}
