//! Seal throughput of the AEAD backends: raw ChaCha20-Poly1305 over one
//! sealed frame's plaintext (1028 bytes) and over 64 KiB, sealing and
//! opening 64 standard frames in place (the AEAD alone), the framed sealer
//! over a 64 KiB message at several frame sizes, and the frame reader opening
//! a 64 KiB message from memory (`Avx512` seals and opens 16 frames at once
//! where the CPU has AVX-512 IFMA; its raw single-frame rows are ring's).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use p2p_conn::proto::FrameSize;
use p2p_conn::Backend;

fn raw_aead(c: &mut Criterion) {
    let mut g = c.benchmark_group("aead_seal");
    for len in [1028usize, 64 * 1024] {
        g.throughput(Throughput::Bytes(len as u64));
        for &backend in Backend::ALL {
            let cipher = p2p_conn::testkit::internals::cipher(backend, &[7u8; 32]);
            let mut buf = vec![0x5au8; len];
            let mut counter = 0u64;
            g.bench_with_input(BenchmarkId::new(backend.name(), len), &len, |b, _| {
                b.iter(|| {
                    counter += 1;
                    p2p_conn::testkit::internals::seal_at(&cipher, counter, &mut buf)
                })
            });
        }
    }
    g.finish();
}

/// Sealing and opening 64 standard frames (64 KiB of data) in place: the
/// AEAD alone, whole groups through a multi-frame engine where the backend
/// has one (`avx512`, `avx2`), one frame at a time otherwise.
fn frames(c: &mut Criterion) {
    use p2p_conn::testkit::internals::{cipher, open_frames, seal_frames};
    const FRAMES: usize = 64;
    const SEALED: usize = 1044;
    let mut g = c.benchmark_group("aead_frames_64x1KiB");
    g.throughput(Throughput::Bytes((FRAMES * 1024) as u64));
    for &backend in Backend::ALL {
        let c = cipher(backend, &[3u8; 32]);
        let mut buf = vec![0x5au8; FRAMES * SEALED];
        let mut counter = 0u64;
        g.bench_function(BenchmarkId::new("seal", backend.name()), |b| {
            b.iter(|| {
                counter += FRAMES as u64;
                seal_frames(&c, counter, &mut buf)
            })
        });
        // Open the same sealed frames each time: a copy of them, opened.
        seal_frames(&c, 7, &mut buf);
        let sealed = buf.clone();
        g.bench_function(BenchmarkId::new("open", backend.name()), |b| {
            b.iter(|| {
                buf.copy_from_slice(&sealed);
                assert!(open_frames(&c, 7, &mut buf));
            })
        });
    }
    g.finish();
}

fn framed_seal(c: &mut Criterion) {
    let mut g = c.benchmark_group("sealer_64KiB_message");
    let msg = vec![0x42u8; 64 * 1024];
    g.throughput(Throughput::Bytes(msg.len() as u64));
    for frame_size in [1024usize, 4096, 16384] {
        for &backend in Backend::ALL {
            let mut sealer = p2p_conn::testkit::internals::sealer(
                p2p_conn::testkit::internals::cipher(backend, &[9u8; 32]),
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

fn framed_open(c: &mut Criterion) {
    use p2p_conn::testkit::internals::{FrameReader, ReadCore};
    use std::task::Poll;
    let mut g = c.benchmark_group("reader_64KiB_message");
    let msg = vec![0x42u8; 64 * 1024];
    g.throughput(Throughput::Bytes(msg.len() as u64));
    for &backend in Backend::ALL {
        let key = [9u8; 32];
        let fs = FrameSize::STANDARD;
        // Enough sealed messages for every iteration's counter.
        let mut sealer = p2p_conn::testkit::internals::sealer(
            p2p_conn::testkit::internals::cipher(backend, &key),
            fs,
        );
        let mut reader = FrameReader::new(ReadCore::new(
            p2p_conn::testkit::internals::opener(
                p2p_conn::testkit::internals::cipher(backend, &key),
                fs,
            ),
            Vec::new(),
            64 * 1024,
        ));
        let mut wire = Vec::new();
        let mut at = 0;
        g.bench_function(BenchmarkId::new(backend.name(), 1024), |b| {
            b.iter(|| {
                // Seal one message outside the reader, then read it all.
                wire.clear();
                at = 0;
                sealer.seal_append(&msg, &mut wire).unwrap();
                let mut got = 0;
                while got < msg.len() {
                    let r = reader.poll_fill_with(|buf: &mut [u8]| {
                        let n = buf.len().min(wire.len() - at);
                        buf[..n].copy_from_slice(&wire[at..at + n]);
                        at += n;
                        Poll::Ready(Ok(n))
                    });
                    let Poll::Ready(Ok(n)) = r else {
                        panic!("reader failed: {r:?}")
                    };
                    reader.consume(n);
                    got += n;
                }
                got
            })
        });
    }
    g.finish();
}

criterion_group!(benches, raw_aead, frames, framed_seal, framed_open);
criterion_main!(benches);
