//! Portable scalar reference (one frame at a time). Also a general RFC 8439 AEAD for test vectors.
use crate::*;

const SIGMA: [u32; 4] = [0x61707865, 0x3320646e, 0x79622d32, 0x6b206574];

#[inline(always)]
fn qr(x: &mut [u32; 16], a: usize, b: usize, c: usize, d: usize) {
    x[a] = x[a].wrapping_add(x[b]);
    x[d] = (x[d] ^ x[a]).rotate_left(16);
    x[c] = x[c].wrapping_add(x[d]);
    x[b] = (x[b] ^ x[c]).rotate_left(12);
    x[a] = x[a].wrapping_add(x[b]);
    x[d] = (x[d] ^ x[a]).rotate_left(8);
    x[c] = x[c].wrapping_add(x[d]);
    x[b] = (x[b] ^ x[c]).rotate_left(7);
}

/// RFC 8439 block function with a 96-bit nonce given as 3 words.
pub fn chacha_block(key: &[u32; 8], block: u32, nonce: [u32; 3]) -> [u8; 64] {
    let mut s = [0u32; 16];
    s[..4].copy_from_slice(&SIGMA);
    s[4..12].copy_from_slice(key);
    s[12] = block;
    s[13..].copy_from_slice(&nonce);
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
    let mut out = [0u8; 64];
    for i in 0..16 {
        out[4 * i..4 * i + 4].copy_from_slice(&x[i].wrapping_add(s[i]).to_le_bytes());
    }
    out
}

pub fn nonce_words(n: &[u8; 12]) -> [u32; 3] {
    core::array::from_fn(|i| u32::from_le_bytes(n[4 * i..4 * i + 4].try_into().unwrap()))
}

/// General Poly1305 (RFC 8439 2.5), 26-bit limbs ("donna-32" style).
pub fn poly1305(key: &[u8; 32], msg: &[u8]) -> [u8; 16] {
    const M: u64 = 0x3ffffff;
    let r = poly_r(key);
    let rl: [u64; 5] = core::array::from_fn(|k| ((r >> (26 * k)) as u64) & M);
    let s5: [u64; 5] = core::array::from_fn(|k| rl[k] * 5);
    let mut h = [0u64; 5];
    for chunk in msg.chunks(16) {
        let mut b = [0u8; 17];
        b[..chunk.len()].copy_from_slice(chunk);
        b[chunk.len()] = 1; // hibit at position 8*len
        let lo = u64::from_le_bytes(b[..8].try_into().unwrap());
        let hi = u64::from_le_bytes(b[8..16].try_into().unwrap());
        let top = b[16] as u64;
        h[0] += lo & M;
        h[1] += (lo >> 26) & M;
        h[2] += ((lo >> 52) | (hi << 12)) & M;
        h[3] += (hi >> 14) & M;
        h[4] += (hi >> 40) | (top << 24);
        let d0 = h[0] * rl[0] + h[1] * s5[4] + h[2] * s5[3] + h[3] * s5[2] + h[4] * s5[1];
        let mut d1 = h[0] * rl[1] + h[1] * rl[0] + h[2] * s5[4] + h[3] * s5[3] + h[4] * s5[2];
        let mut d2 = h[0] * rl[2] + h[1] * rl[1] + h[2] * rl[0] + h[3] * s5[4] + h[4] * s5[3];
        let mut d3 = h[0] * rl[3] + h[1] * rl[2] + h[2] * rl[1] + h[3] * rl[0] + h[4] * s5[4];
        let mut d4 = h[0] * rl[4] + h[1] * rl[3] + h[2] * rl[2] + h[3] * rl[1] + h[4] * rl[0];
        let mut c;
        c = d0 >> 26;
        h[0] = d0 & M;
        d1 += c;
        c = d1 >> 26;
        h[1] = d1 & M;
        d2 += c;
        c = d2 >> 26;
        h[2] = d2 & M;
        d3 += c;
        c = d3 >> 26;
        h[3] = d3 & M;
        d4 += c;
        c = d4 >> 26;
        h[4] = d4 & M;
        h[0] += c * 5;
        c = h[0] >> 26;
        h[0] &= M;
        h[1] += c;
    }
    poly_finish(&h, &[0, 26, 52, 78, 104], key)
}

fn mac_data(aad: &[u8], ct: &[u8]) -> Vec<u8> {
    let mut m = Vec::new();
    m.extend_from_slice(aad);
    m.resize(m.len().div_ceil(16) * 16, 0);
    m.extend_from_slice(ct);
    m.resize(m.len().div_ceil(16) * 16, 0);
    m.extend_from_slice(&(aad.len() as u64).to_le_bytes());
    m.extend_from_slice(&(ct.len() as u64).to_le_bytes());
    m
}

/// General RFC 8439 AEAD seal (in place), returns tag.
pub fn aead_seal(key: &[u8; 32], nonce: &[u8; 12], aad: &[u8], data: &mut [u8]) -> [u8; 16] {
    let kw = key_words(key);
    let nw = nonce_words(nonce);
    let otk: [u8; 32] = chacha_block(&kw, 0, nw)[..32].try_into().unwrap();
    for (j, c) in data.chunks_mut(64).enumerate() {
        let ks = chacha_block(&kw, j as u32 + 1, nw);
        for (b, k) in c.iter_mut().zip(ks.iter()) {
            *b ^= k;
        }
    }
    poly1305(&otk, &mac_data(aad, data))
}

/// Scalar engine: one frame at a time.
pub struct Scalar;

impl Engine for Scalar {
    const LANES: usize = 1;
    fn chacha(&self, key: &[u32; 8], ctr: u64, frames: &mut [u8], n: usize, j0: u32, j1: u32, keys: &mut Keys) {
        for i in 0..n {
            let nw = nonce_words(&nonce(ctr.wrapping_add(i as u64)));
            let f = &mut frames[i * SEALED_LEN..i * SEALED_LEN + PLAIN_LEN];
            for j in j0..j1 {
                let ks = chacha_block(key, j, nw);
                if j == 0 {
                    keys[i].copy_from_slice(&ks[..32]);
                } else {
                    let off = (j as usize - 1) * 64;
                    let end = (off + 64).min(PLAIN_LEN);
                    for (b, k) in f[off..end].iter_mut().zip(ks.iter()) {
                        *b ^= k;
                    }
                }
            }
        }
    }
    fn tags(&self, keys: &Keys, frames: &[u8], n: usize, tags: &mut Tags) {
        for i in 0..n {
            let ct = &frames[i * SEALED_LEN..i * SEALED_LEN + PLAIN_LEN];
            tags[i] = poly1305(&keys[i], &mac_data(&[], ct));
        }
    }
}
