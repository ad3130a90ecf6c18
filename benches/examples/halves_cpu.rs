//! Owned against locked tokio halves, side by side in one process: wall
//! time and process CPU time (user + system, from /proc/self/stat) for the
//! same bidirectional workload as the criterion `halves` bench, alternating
//! the two variants. Linux only.
//!
//! `cargo run --release -p p2p-conn-benches --example halves_cpu -- [MIB_EACH_WAY] [ROUNDS]`

use std::time::Instant;

use p2p_conn::io::tokio as ptokio;
use p2p_conn::{Config, Identity};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// User + system CPU seconds of this process so far.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // Fields after the command name (which ends with ')'): utime is field 14,
    // stime field 15 of the whole line, in clock ticks (100 per second here).
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    ticks / 100.0
}

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
    let _ = (send.await.unwrap(), recv.await.unwrap());
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mib: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(256);
    let rounds: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(3);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!("variant            size  MB/s (both ways)  CPU ns/byte");
    for round in 0..rounds {
        for size in [1024usize, 65536] {
            for locked in [false, true] {
                let n = (mib << 20) / size as u64;
                let (wall, cpu) = rt.block_on(async {
                    let (a, b) = pair().await;
                    let (c0, t0) = (cpu_seconds(), Instant::now());
                    if locked {
                        let (ar, aw) = a.into_split_locked();
                        let (br, bw) = b.into_split_locked();
                        tokio::join!(duplex(ar, aw, size, n), duplex(br, bw, size, n));
                    } else {
                        let (ar, aw) = a.into_split();
                        let (br, bw) = b.into_split();
                        tokio::join!(duplex(ar, aw, size, n), duplex(br, bw, size, n));
                    }
                    (t0.elapsed().as_secs_f64(), cpu_seconds() - c0)
                });
                let bytes = 2.0 * (n * size as u64) as f64;
                println!(
                    "{:<18} {:>5} {:>10.1} {:>16.2}   (round {round})",
                    if locked {
                        "into_split_locked"
                    } else {
                        "into_split"
                    },
                    size,
                    bytes / wall / 1e6,
                    cpu / bytes * 1e9
                );
            }
        }
    }
}
