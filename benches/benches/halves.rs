//! Owned halves against locked halves (tokio): both ends of a loopback TCP
//! connection split into a read half and a write half, each half in its own
//! task, data flowing both ways at once. `into_split` wraps tokio's
//! `TcpStream::into_split` halves; `into_split_locked` goes through
//! `tokio::io::split`, which takes a lock on every poll. Throughput counts
//! the bytes of both directions.

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use p2p_conn::io::tokio as ptokio;
use p2p_conn::{Config, Identity};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

async fn pair() -> (
    ptokio::SecretConnection<TcpStream>,
    ptokio::SecretConnection<TcpStream>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let cfg = Config::default();
    let (a, b) = tokio::join!(
        async {
            let (tcp, _) = listener.accept().await.unwrap();
            tcp.set_nodelay(true).unwrap();
            ptokio::handshake(tcp, &Identity::generate(), &cfg).await
        },
        async {
            let tcp = TcpStream::connect(addr).await.unwrap();
            tcp.set_nodelay(true).unwrap();
            ptokio::handshake(tcp, &Identity::generate(), &cfg).await
        }
    );
    (a.unwrap(), b.unwrap())
}

/// Send `n` messages of `size` bytes on `w` while `r` reads as many bytes.
async fn duplex<R, W>(mut r: R, mut w: W, size: usize, n: u64)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let send = tokio::spawn(async move {
        let msg = vec![7u8; size];
        for _ in 0..n {
            w.write_all(&msg).await.unwrap();
        }
        w.flush().await.unwrap();
        w
    });
    let recv = tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        let mut left = size as u64 * n;
        while left > 0 {
            let k = r.read(&mut buf).await.unwrap();
            assert!(k > 0, "stream ended early");
            left -= k as u64;
        }
        r
    });
    let (_w, _r) = (send.await.unwrap(), recv.await.unwrap());
}

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
