//! How a 64 KiB message's 64 sealed frames (1044 bytes each, 66816 bytes)
//! reach a loopback TCP socket: one write per frame (tendermint-p2p's pattern),
//! one write per message (p2p-conn's), or one vectored write of the 64 frames.
//! A thread on the other end drains the socket.

use std::io::{IoSlice, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

const FRAME: usize = 1044;
const FRAMES: usize = 64;

/// A connected loopback pair whose far end reads and discards everything,
/// acknowledging every `chunk` bytes so the writer can wait for delivery.
fn drained_socket(chunk: usize) -> (TcpStream, mpsc::Receiver<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = vec![0u8; 256 * 1024];
        let mut got = 0usize;
        loop {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    got += n;
                    while got >= chunk {
                        got -= chunk;
                        if tx.send(()).is_err() {
                            return;
                        }
                    }
                }
            }
        }
    });
    let s = TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    (s, rx)
}

fn write_patterns(c: &mut Criterion) {
    let sealed = vec![0xabu8; FRAME * FRAMES];
    let mut g = c.benchmark_group("write_64KiB_message_loopback");
    g.throughput(Throughput::Bytes(sealed.len() as u64));
    for pattern in ["write_per_frame", "write_per_message", "vectored_write"] {
        let (mut sock, acks) = drained_socket(sealed.len());
        g.bench_function(BenchmarkId::from_parameter(pattern), |b| {
            b.iter(|| {
                match pattern {
                    "write_per_frame" => {
                        for f in sealed.chunks(FRAME) {
                            sock.write_all(f).unwrap();
                        }
                    }
                    "write_per_message" => sock.write_all(&sealed).unwrap(),
                    _ => {
                        let mut slices: Vec<IoSlice<'_>> =
                            sealed.chunks(FRAME).map(IoSlice::new).collect();
                        let mut bufs = &mut slices[..];
                        while !bufs.is_empty() {
                            let n = sock.write_vectored(bufs).unwrap();
                            IoSlice::advance_slices(&mut bufs, n);
                        }
                    }
                }
                acks.recv().unwrap();
            })
        });
    }
    g.finish();
}

criterion_group!(benches, write_patterns);
criterion_main!(benches);
