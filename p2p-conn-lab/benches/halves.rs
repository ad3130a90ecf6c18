//! Owned halves against locked halves (tokio): both ends of a loopback TCP
//! connection split into a read half and a write half, each half in its own
//! task, data flowing both ways at once. `into_split` wraps tokio's
//! `TcpStream::into_split` halves; `into_split_locked` goes through
//! `tokio::io::split`, which takes a lock on every poll. Throughput counts
//! the bytes of both directions.

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
mod common;

use common::{duplex, pair};

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut g = c.benchmark_group("halves");
    g.measurement_time(Duration::from_secs(6)).sample_size(10);
    for size in [1024usize, 64 * 1024] {
        // 4 MiB each way per iteration.
        let n = (4 << 20) / size as u64;
        g.throughput(Throughput::Bytes(2 * n * size as u64));
        for locked in [false, true] {
            let name = if locked {
                "into_split_locked"
            } else {
                "into_split"
            };
            g.bench_with_input(BenchmarkId::new(name, size), &size, |b, &size| {
                b.iter_custom(|iters| {
                    rt.block_on(async {
                        let (a, bb) = pair().await;
                        let start = Instant::now();
                        if locked {
                            let (ar, aw) = a.into_split_locked();
                            let (br, bw) = bb.into_split_locked();
                            tokio::join!(
                                duplex(ar, aw, size, n * iters),
                                duplex(br, bw, size, n * iters)
                            );
                        } else {
                            let (ar, aw) = a.into_split();
                            let (br, bw) = bb.into_split();
                            tokio::join!(
                                duplex(ar, aw, size, n * iters),
                                duplex(br, bw, size, n * iters)
                            );
                        }
                        start.elapsed()
                    })
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
