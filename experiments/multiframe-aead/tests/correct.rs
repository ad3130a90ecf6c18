use multiframe_aead::*;
use rand::{Rng, RngCore, SeedableRng};
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, CHACHA20_POLY1305};

fn ring_seal(key: &[u8; 32], ctr0: u64, plain: &[u8]) -> Vec<u8> {
    let k = LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, key).unwrap());
    let mut out = Vec::new();
    for (i, p) in plain.chunks(PLAIN_LEN).enumerate() {
        let mut f = p.to_vec();
        let n = Nonce::assume_unique_for_key(nonce(ctr0.wrapping_add(i as u64)));
        k.seal_in_place_append_tag(n, Aad::empty(), &mut f).unwrap();
        out.extend_from_slice(&f);
    }
    out
}

fn to_buf(plain: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    for p in plain.chunks(PLAIN_LEN) {
        b.extend_from_slice(p);
        b.extend_from_slice(&[0xAAu8; TAG_LEN]); // garbage in tag slot
    }
    b
}

#[test]
fn seal_open_vs_ring_random() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let backends = available_backends();
    eprintln!("backends: {:?}", backends);
    for n in 1..=70usize {
        for rep in 0..3 {
            let mut key = [0u8; 32];
            rng.fill_bytes(&mut key);
            let ctr0: u64 = match rep {
                0 => rng.r#gen::<u32>() as u64,
                1 => (1u64 << 32) - (n as u64 / 2) , // crosses 2^32
                _ => u64::MAX - 100 - rng.gen_range(0..1000u64) , // near u64 top
            };
            let mut plain = vec![0u8; n * PLAIN_LEN];
            rng.fill_bytes(&mut plain);
            let expect = ring_seal(&key, ctr0, &plain);
            for &b in &backends {
                let mut buf = to_buf(&plain);
                seal_frames_backend(b, &key, ctr0, &mut buf);
                assert!(buf == expect, "seal mismatch backend {:?} n={} ctr0={}", b, n, ctr0);
                open_frames_backend(b, &key, ctr0, &mut buf).expect("open failed");
                assert!(buf == to_buf_tags(&plain, &expect), "open mismatch {:?} n={}", b, n);
            }
        }
    }
}

// expected buffer after open: plaintext + original tags
fn to_buf_tags(plain: &[u8], sealed: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    for (p, s) in plain.chunks(PLAIN_LEN).zip(sealed.chunks(SEALED_LEN)) {
        b.extend_from_slice(p);
        b.extend_from_slice(&s[PLAIN_LEN..]);
    }
    b
}

#[test]
fn tag_failure_detected_every_frame_and_position() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(2);
    for &b in &available_backends() {
        for n in [1usize, 5, 8, 9, 16, 17, 33, 64, 70] {
            let mut key = [0u8; 32];
            rng.fill_bytes(&mut key);
            let ctr0 = rng.r#gen::<u64>() >> 1;
            let mut plain = vec![0u8; n * PLAIN_LEN];
            rng.fill_bytes(&mut plain);
            let sealed = ring_seal(&key, ctr0, &plain);
            for bad in 0..n {
                // flip a bit in ciphertext (incl. the 4-byte tail), or in the tag
                for pos in [0usize, 17, 1023, 1024, 1027, 1028, 1043, rng.gen_range(0..SEALED_LEN)] {
                    let mut buf = sealed.clone();
                    buf[bad * SEALED_LEN + pos] ^= 1 << rng.gen_range(0..8);
                    let tampered = buf.clone();
                    let r = open_frames_backend(b, &key, ctr0, &mut buf);
                    assert_eq!(r, Err(bad), "{:?} n={} bad={} pos={}", b, n, bad, pos);
                    // frames before `bad`: plaintext; frame `bad` and later: untouched ciphertext
                    for i in 0..n {
                        let f = &buf[i * SEALED_LEN..i * SEALED_LEN + PLAIN_LEN];
                        if i < bad {
                            assert_eq!(f, &plain[i * PLAIN_LEN..(i + 1) * PLAIN_LEN]);
                        } else {
                            // untouched ciphertext (as given to open) or zeroed: never plaintext
                            let given = &tampered[i * SEALED_LEN..i * SEALED_LEN + PLAIN_LEN];
                            assert!(f == given || f.iter().all(|&x| x == 0), "plaintext exposed {:?} frame {}", b, i);
                            if b != Backend::Avx512Fused { assert_eq!(f, given); }
                        }
                    }
                }
            }
            // wrong counter -> frame 0 fails
            let mut buf = sealed.clone();
            assert_eq!(open_frames_backend(b, &key, ctr0 + 1, &mut buf), Err(0));
        }
    }
}

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

#[test]
fn rfc8439_vectors() {
    // 2.3.2 block function
    let key: [u8; 32] = core::array::from_fn(|i| i as u8);
    let nonce = [0, 0, 0, 9, 0, 0, 0, 0x4a, 0, 0, 0, 0];
    let b = scalar::chacha_block(&key_words(&key), 1, scalar::nonce_words(&nonce));
    assert_eq!(b.to_vec(), hex("10f1e7e4d13b5915500fdd1fa32071c4c7d1f4c733c068030422aa9ac3d46c4e
        d2826446079faa0914c2d705d98b02a2b5129cd1de164eb9cbd083e8a2503c4e"));
    // 2.5.2 Poly1305
    let pk: [u8; 32] = hex("85d6be7857556d337f4452fe42d506a80103808afb0db2fd4abff6af4149f51b").try_into().unwrap();
    let tag = scalar::poly1305(&pk, b"Cryptographic Forum Research Group");
    assert_eq!(tag.to_vec(), hex("a8061dc1305136c6c22b8baf0c0127a9"));
    // 2.8.2 AEAD
    let key: [u8; 32] = hex("808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f").try_into().unwrap();
    let nonce: [u8; 12] = hex("070000004041424344454647").try_into().unwrap();
    let aad = hex("50515253c0c1c2c3c4c5c6c7");
    let mut pt = b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.".to_vec();
    let tag = scalar::aead_seal(&key, &nonce, &aad, &mut pt);
    assert_eq!(pt, hex("d31a8d34648e60db7b86afbc53ef7ec2a4aded51296e08fea9e2b5a736ee62d6
        3dbea45e8ca9671282fafb69da92728b1a71de0a9e060b2905d6a5b67ecd3b36
        92ddbd7f2d778b8c9803aee328091b58fab324e4fad675945585808b4831d7bc
        3ff4def08e4b7a9de576d26586cec64b6116"));
    assert_eq!(tag.to_vec(), hex("1ae10b594f09e26a7e902ecbd0600691"));
    // Poly1305 edge vectors (RFC 8439 A.3 #6: h reaches p-ish values)
    let mut k = [0u8; 32]; k[0] = 2;
    let m = [0xffu8; 16];
    let tag = scalar::poly1305(&k, &m);
    assert_eq!(tag.to_vec(), hex("03000000000000000000000000000000"));
    let mut k = [0u8; 32]; k[0] = 1;
    let m = hex("ffffffffffffffffffffffffffffffff f0ffffffffffffffffffffffffffffff 11000000000000000000000000000000");
    assert_eq!(scalar::poly1305(&k, &m).to_vec(), hex("05000000000000000000000000000000"));
}

#[test]
fn frame_engines_match_rfc_style_aead() {
    // Cross-check: the frame engines against the scalar general AEAD with the frame nonce.
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    let mut key = [0u8; 32];
    rng.fill_bytes(&mut key);
    let mut plain = vec![0u8; PLAIN_LEN];
    rng.fill_bytes(&mut plain);
    let mut exp = plain.clone();
    let tag = scalar::aead_seal(&key, &nonce(12345), &[], &mut exp);
    exp.extend_from_slice(&tag);
    for &b in &available_backends() {
        let mut buf = to_buf(&plain);
        seal_frames_backend(b, &key, 12345, &mut buf);
        assert_eq!(buf, exp);
    }
}

#[test]
fn poly_extreme_values_match_scalar() {
    // r at its clamp maximum, s = all ones, ciphertext all 0xff / patterns: stresses lazy-reduction bounds.
    use multiframe_aead::Engine;
    let mut rng = rand::rngs::StdRng::seed_from_u64(4);
    for pattern in 0..4 {
        let mut keys = [[0xffu8; 32]; MAX_LANES];
        if pattern == 3 { for k in keys.iter_mut() { rng.fill_bytes(k); } }
        let mut frames = vec![0xffu8; 16 * SEALED_LEN];
        if pattern == 1 { frames.iter_mut().enumerate().for_each(|(i, b)| *b = if i % 3 == 0 { 0 } else { 0xff }); }
        if pattern == 2 { rng.fill_bytes(&mut frames); }
        for n in 1..=16 {
            let mut exp = [[0u8; 16]; MAX_LANES];
            scalar::Scalar.tags(&keys, &frames, n, &mut exp);
            let mut got = [[0u8; 16]; MAX_LANES];
            if let Some(e) = avx2::Avx2::new() { for g in (0..n).step_by(8) { let m = (n - g).min(8); let mut t = [[0u8;16];MAX_LANES]; let mut k2 = [[0u8;32];MAX_LANES]; k2[..m].copy_from_slice(&keys[g..g+m]); e.tags(&k2, &frames[g*SEALED_LEN..], m, &mut t); got[g..g+m].copy_from_slice(&t[..m]); } assert_eq!(got[..n], exp[..n], "avx2 p{} n{}", pattern, n); }
            if let Some(e) = avx512::Avx512::new() { e.tags(&keys, &frames, n, &mut got); assert_eq!(got[..n], exp[..n], "avx512 p{} n{}", pattern, n); }
        }
    }
}

#[test]
fn chacha8_vl_matches() {
    use multiframe_aead::Engine;
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let mut key = [0u8; 32];
    rng.fill_bytes(&mut key);
    let kw = key_words(&key);
    for n in 1..=8 {
        let mut a = vec![0u8; 8 * SEALED_LEN];
        rng.fill_bytes(&mut a);
        let mut b = a.clone();
        let (mut ka, mut kb) = ([[0u8; 32]; MAX_LANES], [[0u8; 32]; MAX_LANES]);
        scalar::Scalar.chacha(&kw, (1u64 << 32) - 3, &mut a, n, 0, CHACHA_BLOCKS, &mut ka);
        if avx2::chacha8_vl_checked(&kw, (1u64 << 32) - 3, &mut b, n, 0, CHACHA_BLOCKS, &mut kb).is_some() {
            assert_eq!(a, b);
            assert_eq!(ka[..n], kb[..n]);
        }
    }
}
