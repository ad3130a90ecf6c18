//! MConnection throughput and latency in one process: p2p-conn's
//! `MConnection` at both ends of one loopback TCP connection (each end with
//! its secret connection), the equivalent of `cometbft-peer mconn-bench`
//! (`interop/cometbft-go/mconn_bench.go`), with the same workload and the
//! same JSON line, for `p2p-conn-lab/scripts/mconn.sh`:
//!
//! ```text
//! mconn-bench [--size S] [--n N] [--channels K] [--rate R] [--notsent-lowat B]
//!             (default 200, 100000, 4, 0, 0)
//! ```
//!
//! K channels (`0x20` upwards, priority 1, a send queue of 100 messages'
//! bytes), a sender task per channel writing N messages of S bytes from the
//! dialing end, each stamped in its first 8 bytes with the nanoseconds since
//! the run's start; the accepting end checks each message's length and the
//! stamps' order per channel and takes its latency (receive time minus
//! stamp). With `--rate R` the senders are paced to R messages per second in
//! all. CPU is the process's user + system time over the run (both ends),
//! from `getrusage`. One multi-thread tokio runtime (two workers), default
//! `MConnConfig` (no rate limits, as in the Go mode). The accepting end's
//! receive loop is a task on that runtime, as the Go mode's `onReceive`
//! runs on its connection's receive goroutine. With `--notsent-lowat B`
//! the sending socket holds at most B bytes not yet sent
//! (`TCP_NOTSENT_LOWAT`, Linux; the Go mode's `-notsent-lowat`): the
//! kernel's part of the queue at saturation, which autotuning otherwise
//! grows to megabytes. The JSON line carries the value read back from the
//! socket (0: not set).

use std::time::{Duration, Instant};

use p2p_conn::io::tokio::handshake;
use p2p_conn::{Config, Identity};
use p2p_conn_mconn::{ChannelDescriptor, MConnConfig, MConnection, Received};

struct Args {
    size: usize,
    n: usize,
    channels: usize,
    rate: f64,
    notsent_lowat: u32,
}

fn args() -> Args {
    let mut a = Args {
        size: 200,
        n: 100_000,
        channels: 4,
        rate: 0.0,
        notsent_lowat: 0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .unwrap_or_else(|| usage(&format!("{flag} needs a value")))
        };
        match flag.as_str() {
            "--size" => a.size = value().parse().unwrap_or_else(|_| usage("--size")),
            "--n" => a.n = value().parse().unwrap_or_else(|_| usage("--n")),
            "--channels" => a.channels = value().parse().unwrap_or_else(|_| usage("--channels")),
            "--rate" => a.rate = value().parse().unwrap_or_else(|_| usage("--rate")),
            "--notsent-lowat" => {
                a.notsent_lowat = value().parse().unwrap_or_else(|_| usage("--notsent-lowat"))
            }
            other => usage(&format!("unknown flag {other}")),
        }
    }
    if a.size < 8 || a.n < 1 || !(1..=64).contains(&a.channels) {
        usage("--size >= 8, --n >= 1, 1 <= --channels <= 64");
    }
    a
}

fn usage(msg: &str) -> ! {
    eprintln!(
        "mconn-bench: {msg}\nusage: mconn-bench [--size S] [--n N] [--channels K] [--rate R] [--notsent-lowat B]"
    );
    std::process::exit(2)
}

fn cpu_time() -> Duration {
    use nix::sys::resource::{getrusage, UsageWho};
    let ru = getrusage(UsageWho::RUSAGE_SELF).expect("getrusage");
    let tv =
        |t: nix::sys::time::TimeVal| Duration::new(t.tv_sec() as u64, (t.tv_usec() as u32) * 1000);
    tv(ru.user_time()) + tv(ru.system_time())
}

fn main() {
    let a = args();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let line = rt.block_on(run(&a));
    println!("{line}");
}

async fn run(a: &Args) -> String {
    let channels: Vec<ChannelDescriptor> = (0..a.channels)
        .map(|i| {
            let mut c = ChannelDescriptor::new(0x20 + i as u8);
            c.send_queue_capacity = 100 * a.size;
            c.recv_message_capacity = a.size + 1024;
            c
        })
        .collect();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (ia, ib) = (Identity::generate(), Identity::generate());
    let cfg = Config::default();
    let (accepted, dialed) = tokio::join!(listener.accept(), tokio::net::TcpStream::connect(addr));
    let (accepted, dialed) = (accepted.unwrap().0, dialed.unwrap());
    accepted.set_nodelay(true).unwrap();
    dialed.set_nodelay(true).unwrap();
    let lowat = if a.notsent_lowat > 0 {
        let sock = socket2::SockRef::from(&dialed);
        sock.set_tcp_notsent_lowat(a.notsent_lowat)
            .expect("TCP_NOTSENT_LOWAT");
        sock.tcp_notsent_lowat().expect("TCP_NOTSENT_LOWAT")
    } else {
        0
    };
    let (recv_conn, send_conn) =
        tokio::join!(handshake(accepted, &ia, &cfg), handshake(dialed, &ib, &cfg));
    let (recv_conn, send_conn) = (recv_conn.unwrap(), send_conn.unwrap());
    let (_recv_tx, mut rx) =
        MConnection::spawn(recv_conn, &channels, MConnConfig::default()).unwrap();
    let (tx, _send_rx) = MConnection::spawn(send_conn, &channels, MConnConfig::default()).unwrap();

    let total = a.n * a.channels;
    let cpu0 = cpu_time();
    let start = Instant::now();
    let interval = (a.rate > 0.0).then(|| Duration::from_secs_f64(a.channels as f64 / a.rate));
    let mut senders = Vec::new();
    for i in 0..a.channels {
        let tx = tx.clone();
        let (size, n) = (a.size, a.n);
        senders.push(tokio::spawn(async move {
            let ch = 0x20 + i as u8;
            let mut next = tokio::time::Instant::now();
            for _ in 0..n {
                if let Some(d) = interval {
                    next += d;
                    tokio::time::sleep_until(next).await;
                }
                let mut msg = vec![0u8; size];
                let stamp = start.elapsed().as_nanos() as u64;
                msg[..8].copy_from_slice(&stamp.to_le_bytes());
                tx.send(ch, msg).await.expect("send");
            }
        }));
    }
    // The receiving application is a task on the runtime, as Go's
    // `onReceive` runs on its connection's receive goroutine (not a third
    // thread beside the runtime's, woken for every batch).
    let size = a.size;
    let receiving = tokio::spawn(async move {
        let mut latencies: Vec<u64> = Vec::with_capacity(total);
        let mut last = [0u64; 256];
        while latencies.len() < total {
            match rx.recv().await {
                Some(Received::Message { channel, data }) => {
                    let now = start.elapsed().as_nanos() as u64;
                    assert_eq!(data.len(), size, "channel {channel:#x}: wrong length");
                    let stamp = u64::from_le_bytes(data[..8].try_into().unwrap());
                    assert!(
                        stamp >= last[channel as usize],
                        "channel {channel:#x}: out of order"
                    );
                    last[channel as usize] = stamp;
                    latencies.push(now.saturating_sub(stamp));
                }
                Some(Received::Closed(reason)) => panic!("closed: {reason}"),
                Some(_) => {}
                None => panic!("closed"),
            }
        }
        (latencies, rx)
    });
    let (mut latencies, _rx) = receiving.await.unwrap();
    let secs = start.elapsed().as_secs_f64();
    let cpu = (cpu_time() - cpu0).as_secs_f64();
    for s in senders {
        s.await.unwrap();
    }
    latencies.sort_unstable();
    let q = |p: f64| latencies[(p * (latencies.len() - 1) as f64) as usize] as f64 / 1e3;
    let bytes = total as f64 * a.size as f64;
    format!(
        "{{\"impl\":\"p2p-conn\",\"size\":{},\"channels\":{},\"messages\":{},\"seconds\":{},\
         \"msgs_per_s\":{},\"mb_per_s\":{},\"cpu_s\":{},\"cpu_s_per_gib\":{},\
         \"latency_p50_us\":{},\"latency_p99_us\":{},\"rate\":{},\"flush_throttle\":\"none\",\"notsent_lowat\":{}}}",
        a.size,
        a.channels,
        total,
        secs,
        total as f64 / secs,
        bytes / secs / 1e6,
        cpu,
        cpu / (bytes / (1u64 << 30) as f64),
        q(0.50),
        q(0.99),
        a.rate,
        lowat,
    )
}
