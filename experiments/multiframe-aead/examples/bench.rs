//! Side-by-side timing: ns/frame for batches of 64 frames. Usage: bench [rounds] [filter]
use multiframe_aead::*;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, CHACHA20_POLY1305};
use std::time::Instant;

fn batch() -> usize { std::env::var("MB_N").ok().and_then(|s| s.parse().ok()).unwrap_or(64) }

fn main() {
    let N = batch();
    let args: Vec<String> = std::env::args().collect();
    let rounds: usize = args.get(1).map(|s| s.parse().unwrap()).unwrap_or(15);
    let filter = args.get(2).cloned().unwrap_or_default();
    let key = [7u8; 32];
    let rk = LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, &key).unwrap());
    let mut buf = vec![0x5au8; N * SEALED_LEN];
    let sealed: &[u8] = &*Box::leak({
        let mut b = buf.clone();
        seal_frames_backend(Backend::Scalar, &key, 0, &mut b);
        b.into_boxed_slice()
    });
    let mut ctr = 0u64;
    type F<'a> = Box<dyn FnMut(&mut Vec<u8>) + 'a>;
    let mut variants: Vec<(String, F)> = Vec::new();
    variants.push(("ring seal 1-by-1".into(), Box::new(|b: &mut Vec<u8>| {
        for (i, f) in b.chunks_exact_mut(SEALED_LEN).enumerate() {
            let (p, t) = f.split_at_mut(PLAIN_LEN);
            let tag = rk.seal_in_place_separate_tag(Nonce::assume_unique_for_key(nonce(i as u64)), Aad::empty(), p).unwrap();
            t.copy_from_slice(tag.as_ref());
        }
    })));
    variants.push(("ring open 1-by-1".into(), Box::new(|b: &mut Vec<u8>| {
        b.copy_from_slice(sealed);
        for (i, f) in b.chunks_exact_mut(SEALED_LEN).enumerate() {
            rk.open_in_place(Nonce::assume_unique_for_key(nonce(i as u64)), Aad::empty(), f).unwrap();
        }
    })));
    let mut big = vec![0u8; N * PLAIN_LEN];
    let rk2 = &rk;
    variants.push(("ring seal 1 msg 64x1028B".into(), Box::new(move |_b: &mut Vec<u8>| {
        let t = rk2.seal_in_place_separate_tag(Nonce::assume_unique_for_key(nonce(1)), Aad::empty(), &mut big).unwrap();
        let _ = std::hint::black_box(t);
    })));
    variants.push(("memcpy only (open setup)".into(), Box::new(|b: &mut Vec<u8>| { b.copy_from_slice(sealed); })));
    for be in available_backends() {
        if be == Backend::Scalar { continue; }
        let name = format!("{:?}", be);
        variants.push((format!("{name} seal x64"), Box::new(move |b: &mut Vec<u8>| {
            seal_frames_backend(be, &key, 0, b);
        })));
        variants.push((format!("{name} open x64"), Box::new(move |b: &mut Vec<u8>| {
            b.copy_from_slice(sealed);
            open_frames_backend(be, &key, 0, b).unwrap();
        })));
        if be == Backend::Avx512Fused { continue; }
        variants.push((format!("{name} chacha-only x64"), Box::new(move |b: &mut Vec<u8>| {
            chacha_only(be, &key, b);
        })));
        variants.push((format!("{name} poly-only x64"), Box::new(move |b: &mut Vec<u8>| {
            poly_only(be, b);
        })));
    }
    let _ = &mut ctr;
    variants.push(("Avx2+VLrot chacha-only x64".into(), Box::new(move |b: &mut Vec<u8>| {
        let kw = key_words(&key);
        let mut keys = [[0u8; 32]; MAX_LANES];
        for (g, c) in b.chunks_mut(8 * SEALED_LEN).enumerate() {
            avx2::chacha8_vl_checked(&kw, (g * 8) as u64, c, c.len() / SEALED_LEN, 0, CHACHA_BLOCKS, &mut keys).unwrap();
        }
    })));
    variants.retain(|(n, _)| n.contains(&filter));
    let iters = 200;
    let mut res: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    for _ in 0..rounds {
        for (vi, (_, f)) in variants.iter_mut().enumerate() {
            for _ in 0..20 { f(&mut buf); }
            let t = Instant::now();
            for _ in 0..iters { f(&mut buf); }
            let ns = t.elapsed().as_nanos() as f64 / (iters * N) as f64;
            res[vi].push(ns);
        }
    }
    println!("{:<28} {:>9} {:>9} {:>9} {:>8}", "variant", "min", "median", "max", "GiB/s(med, 1028B)");
    for (vi, (n, _)) in variants.iter().enumerate() {
        let mut v = res[vi].clone();
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let med = v[v.len() / 2];
        println!("{:<28} {:>9.1} {:>9.1} {:>9.1} {:>8.3}", n, v[0], med, v[v.len() - 1], PLAIN_LEN as f64 / med / 1.073741824);
    }
}

fn chacha_only(be: Backend, key: &[u8; 32], b: &mut [u8]) {
    let kw = key_words(key);
    let mut keys = [[0u8; 32]; MAX_LANES];
    match be {
        Backend::Avx2 => { let e = avx2::Avx2::new().unwrap(); for (g, c) in b.chunks_mut(8 * SEALED_LEN).enumerate() { e.chacha(&kw, (g * 8) as u64, c, c.len() / SEALED_LEN, 0, CHACHA_BLOCKS, &mut keys); } }
        Backend::Avx512 => { let e = avx512::Avx512::new().unwrap(); for (g, c) in b.chunks_mut(16 * SEALED_LEN).enumerate() { e.chacha(&kw, (g * 16) as u64, c, c.len() / SEALED_LEN, 0, CHACHA_BLOCKS, &mut keys); } }
        _ => {}
    }
    std::hint::black_box(&keys);
}
fn poly_only(be: Backend, b: &mut [u8]) {
    let keys = [[3u8; 32]; MAX_LANES];
    let mut tags = [[0u8; 16]; MAX_LANES];
    match be {
        Backend::Avx2 => { let e = avx2::Avx2::new().unwrap(); for c in b.chunks(8 * SEALED_LEN) { e.tags(&keys, c, c.len() / SEALED_LEN, &mut tags); } }
        Backend::Avx512 => { let e = avx512::Avx512::new().unwrap(); for c in b.chunks(16 * SEALED_LEN) { e.tags(&keys, c, c.len() / SEALED_LEN, &mut tags); } }
        _ => {}
    }
    std::hint::black_box(&tags);
}
