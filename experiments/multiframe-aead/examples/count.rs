//! For instruction counting under callgrind: count <variant> <iters>; Ir/frame = diff of two runs / (diff iters * 64).
use multiframe_aead::*;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, CHACHA20_POLY1305};
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let v = a[1].as_str();
    let iters: usize = a[2].parse().unwrap();
    let key = [7u8; 32];
    let rk = LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, &key).unwrap());
    let mut buf = vec![0x5au8; 64 * SEALED_LEN];
    let mut big = vec![0x5au8; 65536];
    for _ in 0..iters {
        match v {
            "ring" => for (i, f) in buf.chunks_exact_mut(SEALED_LEN).enumerate() {
                let (p, t) = f.split_at_mut(PLAIN_LEN);
                let tag = rk.seal_in_place_separate_tag(Nonce::assume_unique_for_key(nonce(i as u64)), Aad::empty(), p).unwrap();
                t.copy_from_slice(tag.as_ref());
            },
            "ring64k" => { let _ = rk.seal_in_place_separate_tag(Nonce::assume_unique_for_key(nonce(1)), Aad::empty(), &mut big).unwrap(); }
            "avx2" => seal_frames_backend(Backend::Avx2, &key, 0, &mut buf),
            "scalar" => seal_frames_backend(Backend::Scalar, &key, 0, &mut buf),
            _ => panic!(),
        }
    }
    std::hint::black_box(&buf);
    std::hint::black_box(&big);
}
