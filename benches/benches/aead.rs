//! Seal throughput of the two AEAD backends: raw ChaCha20-Poly1305 over one
//! sealed frame's plaintext (1028 bytes) and over 64 KiB, and the framed
//! sealer over a 64 KiB message at several frame sizes.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use p2p_conn::proto::aead::Cipher;
use p2p_conn::proto::FrameSize;
use p2p_conn::proto::{Backend, Sealer};

fn raw_aead(c: &mut Criterion) {
    let mut g = c.benchmark_group("aead_seal");
    for len in [1028usize, 64 * 1024] {
        g.throughput(Throughput::Bytes(len as u64));
        for &backend in Backend::ALL {
            let cipher = Cipher::new(backend, &[7u8; 32]);
            let mut buf = vec![0x5au8; len];
            let mut counter = 0u64;
            g.bench_with_input(BenchmarkId::new(backend.name(), len), &len, |b, _| {
                b.iter(|| {
                    counter += 1;
                    cipher.seal_in_place(&p2p_conn::proto::frame::nonce_bytes(counter), &mut buf)
                })
            });
        }
    }
    g.finish();
}

fn framed_seal(c: &mut Criterion) {
    let mut g = c.benchmark_group("sealer_64KiB_message");
    let msg = vec![0x42u8; 64 * 1024];
    g.throughput(Throughput::Bytes(msg.len() as u64));
    for frame_size in [1024usize, 4096, 16384] {
        for &backend in Backend::ALL {
            let mut sealer = Sealer::new(
                Cipher::new(backend, &[9u8; 32]),
                FrameSize::new(frame_size).unwrap(),
            );
            let mut out = Vec::with_capacity(sealer.sealed_len(msg.len()));
            g.bench_with_input(
                BenchmarkId::new(backend.name(), frame_size),
                &frame_size,
                |b, _| {
                    b.iter(|| {
                        out.clear();
                        sealer.seal_append(&msg, &mut out).unwrap()
                    })
                },
            );
        }
    }
    g.finish();
}

criterion_group!(benches, raw_aead, framed_seal);
criterion_main!(benches);
