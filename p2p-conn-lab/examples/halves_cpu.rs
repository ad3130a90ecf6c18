//! Owned against locked tokio halves, side by side in one process: wall
//! time and process CPU time (user + system, from /proc/self/stat) for the
//! same bidirectional workload as the criterion `halves` bench, alternating
//! the two variants. Linux only.
//!
//! `cargo run --release -p p2p-conn-lab --example halves_cpu -- [MIB_EACH_WAY] [ROUNDS]`

use std::time::Instant;

#[path = "../benches/common/mod.rs"]
mod common;

use common::{duplex, pair};

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
