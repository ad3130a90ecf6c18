//! One-direction throughput over loopback TCP, p2p-conn against
//! tendermint-p2p 0.41 in the same run: 1 MiB, 64 KiB and 1 KiB messages
//! with the standard 1 KiB frames, and p2p-conn with 16 KiB frames on 1 MiB
//! messages. Each side is a blocking std::io connection (tendermint-p2p only
//! has that API); a receiver thread reads with a 64 KiB buffer and
//! acknowledges each message. The lab's `p2p-conn-lab bench` runs the same
//! workloads with content verification.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use p2p_conn::io::blocking;
use p2p_conn::{Config, Identity};
use tendermint_p2p::secret_connection::{SecretConnection, Version};

type Conn = Box<dyn Write + Send>;

/// Read everything from `r`, acknowledging every `msg` bytes.
fn drain(mut r: impl Read + Send + 'static, msg: usize) -> mpsc::Receiver<()> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        let mut got = 0usize;
        loop {
            match r.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    got += n;
                    while got >= msg {
                        got -= msg;
                        if tx.send(()).is_err() {
                            return;
                        }
                    }
                }
            }
        }
    });
    rx
}

fn tcp_pair() -> (TcpStream, TcpStream) {
    p2p_conn::testkit::std_tcp_pair()
}

fn p2p_conn_pair(frame_size: usize, msg: usize) -> (Conn, mpsc::Receiver<()>) {
    let (a, b) = tcp_pair();
    let cfg = Config::default().frame_size(frame_size);
    let c2 = cfg.clone();
    let t =
        std::thread::spawn(move || blocking::handshake_tcp(b, &Identity::generate(), &c2).unwrap());
    let sender = blocking::handshake_tcp(a, &Identity::generate(), &cfg).unwrap();
    let receiver = t.join().unwrap();
    let (_r, w) = sender.split().unwrap();
    (Box::new(w), drain(receiver, msg))
}

fn tendermint_pair(msg: usize) -> (Conn, mpsc::Receiver<()>) {
    let (a, b) = tcp_pair();
    let key = || ed25519_consensus::SigningKey::new(rand_core::OsRng);
    let t = std::thread::spawn(move || SecretConnection::new(b, key(), Version::V0_34).unwrap());
    let sender = SecretConnection::new(a, key(), Version::V0_34).unwrap();
    let receiver = t.join().unwrap();
    (Box::new(sender), drain(receiver, msg))
}

fn send_messages(conn: &mut Conn, acks: &mpsc::Receiver<()>, msg: &[u8], iters: u64) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        conn.write_all(msg).unwrap();
        conn.flush().unwrap();
    }
    for _ in 0..iters {
        acks.recv().unwrap();
    }
    start.elapsed()
}

fn end_to_end(c: &mut Criterion) {
    let cases: &[(&str, usize, usize)] = &[
        ("1MiB", 1 << 20, 1024),
        ("64KiB", 64 << 10, 1024),
        ("1KiB", 1 << 10, 1024),
        ("1MiB_frame16KiB", 1 << 20, 16 * 1024),
    ];
    for &(name, size, frame) in cases {
        let mut g = c.benchmark_group(format!("end_to_end_{name}"));
        g.throughput(Throughput::Bytes(size as u64));
        let msg = vec![0x5au8; size];
        let (mut ours, ours_acks) = p2p_conn_pair(frame, size);
        g.bench_function(BenchmarkId::from_parameter("p2p-conn"), |b| {
            b.iter_custom(|iters| send_messages(&mut ours, &ours_acks, &msg, iters))
        });
        if frame == 1024 {
            let (mut base, base_acks) = tendermint_pair(size);
            g.bench_function(BenchmarkId::from_parameter("tendermint-p2p"), |b| {
                b.iter_custom(|iters| send_messages(&mut base, &base_acks, &msg, iters))
            });
        }
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(4));
    targets = end_to_end
}
criterion_main!(benches);
