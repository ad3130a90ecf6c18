//! `p2p-conn bench`: an in-process loopback pair over real TCP. One side
//! dials, the other accepts; both run the full handshake; then the dialer
//! streams `--mib` MiB in messages of `--size` bytes (one write each) and the
//! listener reads and verifies every byte.
//!
//! Each run reports throughput and the process CPU time (user + sys, from
//! getrusage) spent between the sender's first byte and the receiver's last,
//! per GiB moved. `--baseline` runs the same workload through another
//! implementation, alternating with ours under `--repeat`, and prints the
//! ratios of the medians: CometBFT's own Go `SecretConnection` (v1.0.1 or
//! v0.38.26, as a separate process built from `interop/cometbft-go`) or
//! tendermint-p2p 0.41 (in this process).
//!
//! `--handshakes N` measures handshakes instead: N sequential connections,
//! each a TCP connect plus the full handshake, dialed by us and by the
//! baseline against the same listener (the Go peer's for the Go baselines).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use p2p_conn::io::{blocking, codec, tokio as ptokio};
use p2p_conn::stats::ConnStats;
use p2p_conn::{Config, Identity};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

use crate::breakdown::{Breakdown, StatsJson};
use p2p_conn_interop::cometbft_go::{self, GoVersion};

/// Bytes the current run's receiver has checked so far, counted only while
/// `COUNT_PROGRESS` is set (`profile`'s progress bar sets it and reads this).
pub static PROGRESS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Whether `progress` counts: off for `bench` and for runs without a
/// progress bar, so their receive loops pay one plain load per chunk, not a
/// locked add (which took 8 of 527 samples in a 4 GiB profile).
pub static COUNT_PROGRESS: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Count `n` more bytes received and checked (sent, for `profile --connect`).
#[inline]
pub fn progress(n: usize) {
    use std::sync::atomic::Ordering::Relaxed;
    if COUNT_PROGRESS.load(Relaxed) {
        PROGRESS.fetch_add(n as u64, Relaxed);
    }
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Adapter {
    /// tokio `AsyncRead`/`AsyncWrite` connection (one task per side)
    Tokio,
    /// std::io connection (one thread per side)
    Std,
    /// tokio-util `FramedWrite`/`FramedRead` with the p2p-conn codec
    Codec,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runtime {
    /// Two worker threads: sender and receiver tasks run in parallel
    MultiThread,
    /// One thread for both tasks: no cross-thread wakeups, one core
    CurrentThread,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Baseline {
    /// CometBFT v1.0.1's Go SecretConnection (separate process; needs `go`)
    #[value(name = "cometbft-go")]
    CometbftGo,
    /// CometBFT v0.38.26's Go SecretConnection (separate process; needs `go`)
    #[value(name = "cometbft-go-0.38")]
    CometbftGo038,
    /// tendermint-p2p 0.41 (std::io, one write syscall per frame; in process)
    TendermintP2p,
}

impl Baseline {
    fn go_version(self) -> Option<GoVersion> {
        match self {
            Baseline::CometbftGo => Some(GoVersion::V1),
            Baseline::CometbftGo038 => Some(GoVersion::V038),
            Baseline::TendermintP2p => None,
        }
    }
}

/// The workload `bench` and `profile` share: what is sent, over which
/// adapter, with which settings.
#[derive(clap::Args, Debug, Clone)]
pub struct WorkloadArgs {
    /// Bytes per logical message (one write each; at most 1 GiB)
    #[arg(long, default_value_t = 65536)]
    pub size: usize,
    /// Total MiB to send (at most 1048576, i.e. 1 TiB)
    #[arg(long, default_value_t = 256)]
    pub mib: u64,
    #[command(flatten)]
    pub wire: crate::WireArgs,
    /// Which p2p-conn adapter carries the workload
    #[arg(long, value_enum, default_value_t = Adapter::Tokio)]
    pub adapter: Adapter,
    /// tokio runtime for the tokio and codec adapters
    #[arg(long, value_enum, default_value_t = Runtime::MultiThread)]
    pub runtime: Runtime,
    /// Share the connection between this many producer tasks (tokio), each
    /// sending its own numbered messages (at least 5 bytes each); a Go
    /// baseline then uses as many goroutines on one `SecretConnection`
    #[arg(long, default_value_t = 0)]
    pub producers: usize,
    /// With --producers: through the send queue, or the plain writer behind a
    /// shared lock
    #[arg(long, value_enum, default_value_t = crate::producers::SendPath::Queue)]
    pub send_path: crate::producers::SendPath,
    /// With --producers and the queue: Config::max_pending_bytes
    #[arg(long, default_value_t = p2p_conn::DEFAULT_MAX_PENDING_BYTES)]
    pub max_pending_bytes: usize,
    /// With --producers: pace the producers to this many messages per second
    /// in all (1 ms ticks) and report send-to-receive latency (p50, p99)
    #[arg(long)]
    pub rate: Option<u64>,
}

impl WorkloadArgs {
    /// The heading line's description of `w` with these settings: "N x
    /// S-byte messages (M MiB) {target}; frame …, backend …".
    pub fn describe(&self, w: &Workload, target: &str) -> String {
        format!(
            "{} x {}-byte messages ({:.1} MiB) {target}; frame {}, flush {}, read buffer {}, backend {}",
            w.messages,
            w.size,
            w.bytes() as f64 / (1u64 << 20) as f64,
            self.wire.frame_size,
            self.wire.flush_size,
            self.wire.read_buffer,
            self.wire.backend
        )
    }

    /// The connection settings, validated.
    pub fn config(&self) -> Result<Config, String> {
        let cfg = self.wire.config().max_pending_bytes(self.max_pending_bytes);
        cfg.validate().map_err(s)?;
        Ok(cfg)
    }
}

#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    #[command(flatten)]
    work: WorkloadArgs,
    /// Also run the same workload through another implementation and print the ratio
    #[arg(long, value_enum)]
    baseline: Option<Baseline>,
    /// Run the workload this many times (alternating with the baseline) and
    /// summarise with medians
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Measure this many sequential handshakes (connect + handshake + close)
    /// instead of a transfer
    #[arg(long)]
    handshakes: Option<u64>,
    /// Print one JSON object per line instead of text, all with the same keys:
    /// "kind" is "run" (with "run" = 0..n-1), "median" or "ratio" (with
    /// "run" = null); fields that do not apply to a kind are null. Our runs
    /// carry the seal/write/queue breakdown (send_*, recv_*, queue_*,
    /// write_to_seal, read_to_open)
    #[arg(long)]
    json: bool,
}

/// Largest `--size`. A message is one buffer the sender holds (plus a
/// 251-byte pattern offset) and the std receiver reads into a buffer of up to
/// 1 MiB; above 1 GiB a run measures the allocator and paging on our 24 GiB
/// machines, not the connection.
const MAX_MESSAGE_BYTES: usize = 1 << 30;

/// Largest `--mib`: 1 TiB. At the fastest rates measured (about 1 GB/s on
/// loopback) that is some 18 minutes per run; more is a typo, and the bound
/// keeps every byte count far from `u64` overflow.
const MAX_TOTAL_MIB: u64 = 1 << 20;

/// One measured run.
pub struct Row {
    pub name: String,
    pub bytes: u64,
    /// Messages, or handshakes for `--handshakes`.
    pub messages: u64,
    pub elapsed: Duration,
    /// Process CPU time (user + sys) over the measured span, where known.
    pub cpu: Option<Cpu>,
    /// Send-to-receive latency, for paced runs (`--rate`).
    pub latency: Option<Latency>,
    /// Our side's per-connection (and send queue) counters; `None` for
    /// baselines, handshakes and the codec adapter.
    pub breakdown: Option<Breakdown>,
}

/// Send-to-receive latency percentiles of a paced run, in microseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Latency {
    pub p50_us: f64,
    pub p99_us: f64,
}

impl Latency {
    /// Percentiles of `samples` (microseconds); `None` when empty.
    pub fn of(samples: &mut [u32]) -> Option<Latency> {
        if samples.is_empty() {
            return None;
        }
        samples.sort_unstable();
        let at = |q: f64| f64::from(samples[((samples.len() - 1) as f64 * q).round() as usize]);
        Some(Latency {
            p50_us: at(0.50),
            p99_us: at(0.99),
        })
    }
}

impl Row {
    fn mb_per_s(&self) -> f64 {
        self.bytes as f64 / self.elapsed.as_secs_f64() / 1e6
    }
    fn msgs_per_s(&self) -> f64 {
        self.messages as f64 / self.elapsed.as_secs_f64()
    }
    /// CPU seconds (user + sys) per GiB moved.
    fn cpu_s_per_gib(&self) -> Option<f64> {
        let gib = self.bytes as f64 / (1u64 << 30) as f64;
        self.cpu.filter(|_| gib > 0.0).map(|c| c.total() / gib)
    }
    /// CPU seconds (user + sys) per message (per handshake for
    /// `--handshakes`).
    fn cpu_s_per_message(&self) -> Option<f64> {
        let n = self.messages as f64;
        self.cpu.filter(|_| n > 0.0).map(|c| c.total() / n)
    }
    /// What CPU is compared by: per GiB for transfers, per handshake for
    /// `--handshakes` (no bytes).
    fn cpu_cost(&self) -> Option<f64> {
        if self.bytes > 0 {
            self.cpu_s_per_gib()
        } else {
            self.cpu_s_per_message()
        }
    }
}

/// User and system CPU seconds of this process.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Cpu {
    user: f64,
    sys: f64,
}

impl Cpu {
    /// This process's CPU time so far (all threads), from getrusage.
    #[cfg(unix)]
    fn now() -> Option<Cpu> {
        use nix::sys::resource::{getrusage, UsageWho};
        let ru = getrusage(UsageWho::RUSAGE_SELF).ok()?;
        let secs = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
        Some(Cpu {
            user: secs(ru.user_time()),
            sys: secs(ru.system_time()),
        })
    }

    #[cfg(not(unix))]
    fn now() -> Option<Cpu> {
        None
    }

    pub fn total(self) -> f64 {
        self.user + self.sys
    }

    fn since(self, earlier: Cpu) -> Cpu {
        Cpu {
            user: self.user - earlier.user,
            sys: self.sys - earlier.sys,
        }
    }
}

/// A point in a run: the time and the CPU used so far.
#[derive(Clone, Copy)]
pub struct Mark {
    at: Instant,
    cpu: Option<Cpu>,
}

impl Mark {
    pub fn now() -> Self {
        Mark {
            at: Instant::now(),
            cpu: Cpu::now(),
        }
    }

    /// Elapsed time and CPU from `start` to `self`.
    pub fn since(self, start: Mark) -> (Duration, Option<Cpu>) {
        let cpu = match (self.cpu, start.cpu) {
            (Some(end), Some(begin)) => Some(end.since(begin)),
            _ => None,
        };
        (self.at.saturating_duration_since(start.at), cpu)
    }
}

/// What is sent: `messages` messages of `size` bytes. Message `i` is
/// `pattern[i % 251 ..][..size]`, so a lost, duplicated or reordered message
/// shows up as a content mismatch.
#[derive(Clone)]
pub struct Workload {
    pub size: usize,
    pub messages: u64,
    pattern: std::sync::Arc<Vec<u8>>,
}

impl Workload {
    /// At least `total_bytes` in messages of `size` bytes (at least one
    /// message). Fails if a size overflows.
    pub fn new(size: usize, total_bytes: u64) -> Result<Self, String> {
        let overflow = || format!("--size {size} with {total_bytes} bytes in total overflows");
        let size64 = u64::try_from(size).map_err(|_| overflow())?;
        if size64 == 0 {
            return Err("--size must be at least 1".into());
        }
        let messages = total_bytes.div_ceil(size64).max(1);
        // Every byte count the run reports is `messages * size`: check it once.
        messages.checked_mul(size64).ok_or_else(overflow)?;
        let pattern_len = size.checked_add(251).ok_or_else(overflow)?;
        let pattern = (0..pattern_len)
            .map(|k| (k.wrapping_mul(7) ^ (k >> 8).wrapping_mul(13)) as u8)
            .collect();
        Ok(Workload {
            size,
            messages,
            pattern: std::sync::Arc::new(pattern),
        })
    }

    pub fn message(&self, i: u64) -> &[u8] {
        let off = (i % 251) as usize;
        &self.pattern[off..off + self.size]
    }

    pub fn bytes(&self) -> u64 {
        // `new` checked this product.
        self.messages.saturating_mul(self.size as u64)
    }
}

/// Checks a received byte stream against the workload, whatever the chunking.
struct Verifier {
    w: Workload,
    msg: u64,
    at: usize,
}

impl Verifier {
    fn new(w: Workload) -> Self {
        Verifier { w, msg: 0, at: 0 }
    }

    fn feed(&mut self, mut data: &[u8]) -> Result<(), String> {
        progress(data.len());
        while !data.is_empty() {
            if self.msg >= self.w.messages {
                return Err("extra bytes after the last message".into());
            }
            let expected = &self.w.message(self.msg)[self.at..];
            let k = expected.len().min(data.len());
            if data[..k] != expected[..k] {
                return Err(format!("message {} arrived corrupted", self.msg));
            }
            data = &data[k..];
            self.at += k;
            if self.at == self.w.size {
                self.at = 0;
                self.msg += 1;
            }
        }
        Ok(())
    }

    fn done(&self) -> bool {
        self.msg == self.w.messages
    }
}

pub fn s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// `--size` and `--mib` within their bounds, as the total byte count.
pub fn total_bytes(args: &WorkloadArgs) -> Result<u64, String> {
    if args.size == 0 {
        return Err("--size must be at least 1".into());
    }
    if args.size > MAX_MESSAGE_BYTES {
        return Err(format!(
            "--size {} is too large: at most {MAX_MESSAGE_BYTES} bytes (1 GiB) per message",
            args.size
        ));
    }
    if args.mib > MAX_TOTAL_MIB {
        return Err(format!(
            "--mib {} is too large: at most {MAX_TOTAL_MIB} (1 TiB) in total",
            args.mib
        ));
    }
    args.mib
        .checked_mul(1 << 20)
        .ok_or_else(|| format!("--mib {} overflows", args.mib))
}

pub fn run(args: BenchArgs) -> Result<(), String> {
    let cfg = args.work.config()?;
    let go_peer = match args.baseline.and_then(Baseline::go_version) {
        Some(v) => Some(cometbft_go::build(v).map_err(s)?),
        None => None,
    };
    if let Some(n) = args.handshakes {
        return run_handshakes(&args, &cfg, n, go_peer.as_deref());
    }
    let total = total_bytes(&args.work)?;
    let w = Workload::new(args.work.size, total)?;
    if !args.json {
        println!(
            "p2p-conn bench: {}",
            args.work.describe(&w, "over loopback TCP")
        );
    }
    let mut ours_rows = Vec::new();
    let mut base_rows = Vec::new();
    let producers = args.work.producers;
    for run in 0..args.repeat.max(1) {
        let ours = run_ours(&args.work, &w, &cfg)?;
        print_run(&args, &w, run, &ours)?;
        ours_rows.push(ours);
        let base = match (args.baseline, &go_peer) {
            (None, _) => continue,
            (Some(Baseline::TendermintP2p), _) if producers > 0 => {
                crate::producers::run_tendermint(
                    w.size,
                    producers,
                    crate::producers::per_producer(w.messages, producers),
                )?
            }
            (Some(Baseline::TendermintP2p), _) => run_tendermint(&w)?,
            (Some(_), Some(peer)) => run_go(peer, &w, args.work.mib, producers, args.work.rate)?,
            (Some(_), None) => unreachable!("the Go peer was built above"),
        };
        print_run(&args, &w, run, &base)?;
        base_rows.push(base);
    }
    summarize(&args, &w, &ours_rows, &base_rows)?;
    if !args.json {
        print_breakdown(&args.work, &ours_rows);
    }
    Ok(())
}

/// One run of the workload through p2p-conn, as `args` says.
pub fn run_ours(args: &WorkloadArgs, w: &Workload, cfg: &Config) -> Result<Row, String> {
    match args.adapter {
        _ if args.producers > 0 => {
            let per = crate::producers::per_producer(w.messages, args.producers);
            tokio_runtime(args.runtime)?.block_on(crate::producers::run(
                w.size,
                args.producers,
                per,
                cfg,
                args.send_path,
                args.rate,
            ))
        }
        Adapter::Tokio | Adapter::Codec => {
            let codec = args.adapter == Adapter::Codec;
            tokio_runtime(args.runtime)?.block_on(run_tokio(w, cfg, codec, args.runtime))
        }
        Adapter::Std => run_std(w, cfg),
    }
}

/// After the result table: our side's seal/write/queue breakdown, summed
/// over our runs.
fn print_breakdown(args: &WorkloadArgs, ours: &[Row]) {
    let title = match ours.first() {
        Some(row) => format!("breakdown, {}", row.name),
        None => return,
    };
    match Breakdown::sum(ours.iter().filter_map(|r| r.breakdown.as_ref())) {
        Some(b) => print!("{}", b.text(&title)),
        None if args.adapter == Adapter::Codec && args.producers == 0 => println!(
            "{title}: not measured (tokio-util's Framed makes the socket calls of the codec adapter)"
        ),
        None => {}
    }
}

/// Medians of both implementations' runs and their ratios.
fn summarize(args: &BenchArgs, w: &Workload, ours: &[Row], base: &[Row]) -> Result<(), String> {
    let ours_m = Summary::of(ours);
    let base_m = Summary::of(base);
    if ours.len() > 1 {
        if !args.json {
            println!("median of {} runs:", ours.len());
        }
        for m in ours_m.iter().chain(&base_m) {
            print_median(args, w, m)?;
        }
    }
    let (Some(ours), Some(base)) = (ours_m, base_m) else {
        return Ok(());
    };
    let ratio = if args.handshakes.is_some() {
        ours.msgs_per_s / base.msgs_per_s
    } else {
        ours.mb_per_s / base.mb_per_s
    };
    // How many times less CPU per GiB (per handshake) than the baseline
    // (> 1: ours is cheaper).
    let cpu_ratio = match (ours.cpu_cost, base.cpu_cost) {
        (Some(o), Some(b)) if o > 0.0 => Some(b / o),
        _ => None,
    };
    if args.json {
        return print_json(&JsonLine {
            kind: "ratio",
            runs: ours.runs,
            implementation: &ours.name,
            over: Some(&base.name),
            ratio: Some(ratio),
            cpu_ratio,
            ..JsonLine::new(args, w)
        });
    }
    let what = if args.handshakes.is_some() {
        "handshakes/s"
    } else {
        "throughput"
    };
    println!(
        "ratio {what:<18} {ratio:>9.2}x  ({} / {})",
        ours.name, base.name
    );
    if let Some(c) = cpu_ratio {
        let per = if args.handshakes.is_some() {
            "handshake"
        } else {
            "GiB"
        };
        println!(
            "ratio {:<18} {c:>9.2}x  less CPU per {per} for {} than {}",
            "CPU", ours.name, base.name
        );
    }
    Ok(())
}

/// The median of `values`: the middle one, or the mean of the two middle
/// ones for an even count. `None` when empty.
fn median(values: &[f64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    match v.len() {
        0 => None,
        n if n % 2 == 1 => Some(v[mid]),
        _ => Some((v[mid - 1] + v[mid]) / 2.0),
    }
}

/// Medians of one implementation's runs.
struct Summary {
    name: String,
    runs: usize,
    mb_per_s: f64,
    msgs_per_s: f64,
    /// Median CPU seconds per GiB (per handshake for `--handshakes`), if
    /// every run measured its CPU.
    cpu_cost: Option<f64>,
    /// Medians of the runs' latency percentiles, for paced runs.
    latency: Option<Latency>,
}

impl Summary {
    fn of(rows: &[Row]) -> Option<Summary> {
        let mb: Vec<f64> = rows.iter().map(Row::mb_per_s).collect();
        let msgs: Vec<f64> = rows.iter().map(Row::msgs_per_s).collect();
        let cpu: Option<Vec<f64>> = rows.iter().map(Row::cpu_cost).collect();
        Some(Summary {
            name: rows.first()?.name.clone(),
            runs: rows.len(),
            mb_per_s: median(&mb)?,
            msgs_per_s: median(&msgs)?,
            cpu_cost: cpu.and_then(|c| median(&c)),
            latency: rows
                .iter()
                .map(|r| r.latency)
                .collect::<Option<Vec<Latency>>>()
                .and_then(|l| {
                    Some(Latency {
                        p50_us: median(&l.iter().map(|x| x.p50_us).collect::<Vec<_>>())?,
                        p99_us: median(&l.iter().map(|x| x.p99_us).collect::<Vec<_>>())?,
                    })
                }),
        })
    }
}

/// One `--json` line. Every line has every key, so scripts can filter on
/// `kind`; a field that does not apply to a kind is null.
#[derive(serde::Serialize)]
struct JsonLine<'a> {
    /// "run" (one measured run), "median" (of `runs` runs) or "ratio" (of
    /// the two medians, or of the two runs when `runs` is 1).
    kind: &'static str,
    /// "transfer", or "handshakes" for `--handshakes` (then `messages` is
    /// the handshake count, `msgs_per_s` handshakes per second).
    mode: &'static str,
    /// 0-based index of a measured run; null for summary rows.
    run: Option<usize>,
    /// How many runs the row stands for.
    runs: usize,
    #[serde(rename = "impl")]
    implementation: &'a str,
    /// "ratio" only: the implementation `impl` is compared with.
    over: Option<&'a str>,
    /// "ratio" only: `impl` MB/s over `over` MB/s (handshakes per second
    /// for "handshakes").
    ratio: Option<f64>,
    /// "ratio" only: `over` CPU per GiB over `impl` CPU per GiB (per
    /// handshake for "handshakes"; above 1: `impl` uses less CPU).
    cpu_ratio: Option<f64>,
    mb_per_s: Option<f64>,
    msgs_per_s: Option<f64>,
    /// "run" only: from the sender's first byte to the receiver's last.
    seconds: Option<f64>,
    /// "run" only: process CPU seconds (user, sys) over `seconds`.
    cpu_user: Option<f64>,
    cpu_sys: Option<f64>,
    /// CPU seconds (user + sys) per GiB moved ("transfer").
    cpu_s_per_gib: Option<f64>,
    /// CPU seconds (user + sys) per handshake ("handshakes").
    cpu_s_per_handshake: Option<f64>,
    /// Paced runs (`--rate`): send-to-receive latency percentiles, µs.
    latency_p50_us: Option<f64>,
    latency_p99_us: Option<f64>,
    size: usize,
    messages: u64,
    bytes: u64,
    frame_size: usize,
    flush_size: usize,
    read_buffer: usize,
    backend: String,
    /// Our "run" lines: the seal/write/queue breakdown (see `StatsJson`);
    /// null elsewhere.
    #[serde(flatten)]
    stats: StatsJson,
}

impl<'a> JsonLine<'a> {
    /// The workload's fields, with everything else empty.
    fn new(args: &BenchArgs, w: &Workload) -> Self {
        let handshakes = args.handshakes.is_some();
        JsonLine {
            kind: "run",
            mode: if handshakes { "handshakes" } else { "transfer" },
            run: None,
            runs: 1,
            implementation: "",
            over: None,
            ratio: None,
            cpu_ratio: None,
            mb_per_s: None,
            msgs_per_s: None,
            seconds: None,
            cpu_user: None,
            cpu_sys: None,
            cpu_s_per_gib: None,
            cpu_s_per_handshake: None,
            latency_p50_us: None,
            latency_p99_us: None,
            size: w.size,
            messages: w.messages,
            bytes: w.bytes(),
            frame_size: args.work.wire.frame_size,
            flush_size: args.work.wire.flush_size,
            read_buffer: args.work.wire.read_buffer,
            backend: args.work.wire.backend.to_string(),
            stats: StatsJson::default(),
        }
    }
}

fn print_json(line: &JsonLine<'_>) -> Result<(), String> {
    println!("{}", serde_json::to_string(line).map_err(s)?);
    Ok(())
}

/// "  latency p50 12 µs p99 80 µs" for paced runs, else nothing.
fn latency_text(l: Option<Latency>) -> String {
    l.map(|l| format!("  latency p50 {:.0} µs p99 {:.0} µs", l.p50_us, l.p99_us))
        .unwrap_or_default()
}

/// " 1.234 s CPU/GiB" or nothing when the CPU time is unknown.
fn cpu_text(cpu_s_per_gib: Option<f64>) -> String {
    cpu_s_per_gib
        .map(|c| format!("  {c:>6.3} s CPU/GiB"))
        .unwrap_or_default()
}

/// One transfer row as text (what `bench` prints per run), with `note`
/// after the time.
pub fn print_row(row: &Row, note: &str) {
    println!(
        "{:<24} {:>10.1} MB/s {:>12.0} msg/s{}{}   ({:.3} s, {note})",
        row.name,
        row.mb_per_s(),
        row.msgs_per_s(),
        cpu_text(row.cpu_s_per_gib()),
        latency_text(row.latency),
        row.elapsed.as_secs_f64()
    );
}

fn print_run(args: &BenchArgs, w: &Workload, run: usize, row: &Row) -> Result<(), String> {
    let handshakes = args.handshakes.is_some();
    if args.json {
        return print_json(&JsonLine {
            kind: "run",
            run: Some(run),
            implementation: &row.name,
            mb_per_s: (!handshakes).then(|| row.mb_per_s()),
            msgs_per_s: Some(row.msgs_per_s()),
            seconds: Some(row.elapsed.as_secs_f64()),
            cpu_user: row.cpu.map(|c| c.user),
            cpu_sys: row.cpu.map(|c| c.sys),
            cpu_s_per_gib: row.cpu_s_per_gib(),
            cpu_s_per_handshake: row.cpu_s_per_message().filter(|_| handshakes),
            latency_p50_us: row.latency.map(|l| l.p50_us),
            latency_p99_us: row.latency.map(|l| l.p99_us),
            messages: row.messages,
            stats: StatsJson::of(row.breakdown.as_ref()),
            ..JsonLine::new(args, w)
        });
    }
    if handshakes {
        let cpu = row
            .cpu
            .map(|c| format!(", {:.0} µs CPU each", c.total() * 1e6 / row.messages as f64))
            .unwrap_or_default();
        println!(
            "{:<34} {:>10.0} handshakes/s   ({} in {:.3} s{cpu})",
            row.name,
            row.msgs_per_s(),
            row.messages,
            row.elapsed.as_secs_f64()
        );
    } else {
        print_row(row, "content verified");
    }
    Ok(())
}

fn print_median(args: &BenchArgs, w: &Workload, m: &Summary) -> Result<(), String> {
    let handshakes = args.handshakes.is_some();
    if args.json {
        return print_json(&JsonLine {
            kind: "median",
            runs: m.runs,
            implementation: &m.name,
            mb_per_s: (!handshakes).then_some(m.mb_per_s),
            msgs_per_s: Some(m.msgs_per_s),
            cpu_s_per_gib: m.cpu_cost.filter(|_| !handshakes),
            cpu_s_per_handshake: m.cpu_cost.filter(|_| handshakes),
            latency_p50_us: m.latency.map(|l| l.p50_us),
            latency_p99_us: m.latency.map(|l| l.p99_us),
            ..JsonLine::new(args, w)
        });
    }
    if handshakes {
        let cpu = m
            .cpu_cost
            .map(|c| format!(", {:.0} µs CPU each", c * 1e6))
            .unwrap_or_default();
        println!(
            "{:<34} {:>10.0} handshakes/s   (median of {} runs{cpu})",
            m.name, m.msgs_per_s, m.runs
        );
    } else {
        println!(
            "{:<24} {:>10.1} MB/s {:>12.0} msg/s{}{}   (median of {} runs)",
            m.name,
            m.mb_per_s,
            m.msgs_per_s,
            cpu_text(m.cpu_cost),
            latency_text(m.latency),
            m.runs
        );
    }
    Ok(())
}

/// The runtime the tokio and codec adapters run on.
pub fn tokio_runtime(flavor: Runtime) -> Result<tokio::runtime::Runtime, String> {
    match flavor {
        Runtime::MultiThread => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build(),
        Runtime::CurrentThread => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
    }
    .map_err(s)
}

async fn run_tokio(
    w: &Workload,
    cfg: &Config,
    use_codec: bool,
    flavor: Runtime,
) -> Result<Row, String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(s)?;
    let addr = listener.local_addr().map_err(s)?;
    let (rcfg, rw) = (cfg.clone(), w.clone());
    let receiver = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.map_err(s)?;
        tcp.set_nodelay(true).map_err(s)?;
        let mut v = Verifier::new(rw);
        let mut stats = None;
        if use_codec {
            let mut framed = codec::handshake(tcp, &Identity::generate(), &rcfg)
                .await
                .map_err(s)?;
            while let Some(item) = framed.next().await {
                v.feed(&item.map_err(s)?)?;
            }
        } else {
            let mut conn = ptokio::handshake(tcp, &Identity::generate(), &rcfg)
                .await
                .map_err(s)?;
            // Verify straight from the receive buffer (AsyncBufRead: no copy).
            loop {
                let chunk = conn.fill_buf().await.map_err(s)?;
                if chunk.is_empty() {
                    break;
                }
                let n = chunk.len();
                v.feed(chunk)?;
                conn.consume(n);
            }
            stats = Some(conn.stats());
        }
        if !v.done() {
            return Err(format!(
                "stream ended after {} of {} messages",
                v.msg, v.w.messages
            ));
        }
        Ok::<_, String>((Mark::now(), stats))
    });
    let tcp = tokio::net::TcpStream::connect(addr).await.map_err(s)?;
    tcp.set_nodelay(true).map_err(s)?;
    let start;
    let mut sent = None;
    if use_codec {
        let mut framed = codec::handshake(tcp, &Identity::generate(), cfg)
            .await
            .map_err(s)?;
        start = Mark::now();
        for i in 0..w.messages {
            framed.feed(w.message(i)).await.map_err(s)?;
        }
        SinkExt::<&[u8]>::flush(&mut framed).await.map_err(s)?;
        framed.get_mut().shutdown().await.map_err(s)?;
    } else {
        let mut conn = ptokio::handshake(tcp, &Identity::generate(), cfg)
            .await
            .map_err(s)?;
        start = Mark::now();
        for i in 0..w.messages {
            conn.write_all(w.message(i)).await.map_err(s)?;
        }
        conn.shutdown().await.map_err(s)?;
        sent = Some(conn.stats());
    }
    let (end, received) = receiver.await.map_err(s)??;
    let (elapsed, cpu) = end.since(start);
    let name = match (use_codec, flavor) {
        (false, Runtime::MultiThread) => "p2p-conn (tokio)",
        (true, Runtime::MultiThread) => "p2p-conn (codec)",
        (false, Runtime::CurrentThread) => "p2p-conn (tokio, 1 thread)",
        (true, Runtime::CurrentThread) => "p2p-conn (codec, 1 thread)",
    };
    Ok(Row {
        name: name.into(),
        bytes: w.bytes(),
        messages: w.messages,
        elapsed,
        cpu,
        latency: None,
        breakdown: sent.zip(received).map(|(s, r)| Breakdown::new(&s, &r)),
    })
}

/// What `run_threads` measured, and what the two ends returned.
struct Threads<RT, ST> {
    elapsed: Duration,
    cpu: Option<Cpu>,
    received: RT,
    sent: ST,
}

/// Accept on one thread, dial on this one, run `recv` and `send` over the
/// two ends, and measure from the sender's first byte (the `Mark` `send`
/// sets) to the receiver's last.
fn run_threads<R, S, RT, ST>(recv: R, send: S) -> Result<Threads<RT, ST>, String>
where
    R: FnOnce(TcpStream) -> Result<RT, String> + Send + 'static,
    S: FnOnce(TcpStream, &mut Option<Mark>) -> Result<ST, String>,
    RT: Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").map_err(s)?;
    let addr = listener.local_addr().map_err(s)?;
    let receiver = std::thread::spawn(move || {
        let (tcp, _) = listener.accept().map_err(s)?;
        tcp.set_nodelay(true).map_err(s)?;
        let received = recv(tcp)?;
        Ok::<_, String>((Mark::now(), received))
    });
    let tcp = TcpStream::connect(addr).map_err(s)?;
    tcp.set_nodelay(true).map_err(s)?;
    let mut start = None;
    let sent = send(tcp, &mut start);
    let (end, received) = receiver
        .join()
        .map_err(|_| "receiver thread panicked".to_string())??;
    let sent = sent?;
    let (elapsed, cpu) = end.since(start.ok_or("sender never started")?);
    Ok(Threads {
        elapsed,
        cpu,
        received,
        sent,
    })
}

/// 64 KiB reads on the receiving side, as the Go peer's bench.
const READ_CHUNK: usize = 64 * 1024;

fn run_std(w: &Workload, cfg: &Config) -> Result<Row, String> {
    let (rcfg, rw) = (cfg.clone(), w.clone());
    let t = run_threads(
        move |tcp| {
            let mut conn = blocking::handshake_tcp(tcp, &Identity::generate(), &rcfg).map_err(s)?;
            let mut v = Verifier::new(rw);
            let mut buf = vec![0u8; READ_CHUNK];
            loop {
                let n = conn.read(&mut buf).map_err(s)?;
                if n == 0 {
                    break;
                }
                v.feed(&buf[..n])?;
            }
            if v.done() {
                Ok(conn.stats())
            } else {
                Err("stream ended early".into())
            }
        },
        |tcp, start| {
            let conn = blocking::handshake_tcp(tcp, &Identity::generate(), cfg).map_err(s)?;
            let (r, mut wr) = conn.split().map_err(s)?;
            *start = Some(Mark::now());
            for i in 0..w.messages {
                wr.write_all(w.message(i)).map_err(s)?;
            }
            wr.shutdown().map_err(s)?;
            Ok(ConnStats::merge(&wr.stats(), &r.stats()))
        },
    )?;
    Ok(Row {
        name: "p2p-conn (std)".into(),
        bytes: w.bytes(),
        messages: w.messages,
        elapsed: t.elapsed,
        cpu: t.cpu,
        latency: None,
        breakdown: Some(Breakdown::new(&t.sent, &t.received)),
    })
}

/// The same workload through tendermint-p2p 0.41 (std threads, as its API is
/// blocking). Its reads must use buffers of at least one frame's payload.
fn run_tendermint(w: &Workload) -> Result<Row, String> {
    use tendermint_p2p::secret_connection::{SecretConnection, Version};
    let key = || ed25519_consensus::SigningKey::new(rand_core::OsRng);
    let rw = w.clone();
    let Threads { elapsed, cpu, .. } = run_threads(
        move |tcp| {
            let mut conn = SecretConnection::new(tcp, key(), Version::V0_34).map_err(s)?;
            let mut v = Verifier::new(rw);
            let mut buf = vec![0u8; READ_CHUNK];
            while !v.done() {
                let n = conn.read(&mut buf).map_err(s)?;
                if n == 0 {
                    return Err("tendermint-p2p stream ended early".into());
                }
                v.feed(&buf[..n])?;
            }
            Ok(())
        },
        |tcp, start| {
            let mut conn = SecretConnection::new(tcp, key(), Version::V0_34).map_err(s)?;
            *start = Some(Mark::now());
            for i in 0..w.messages {
                conn.write_all(w.message(i)).map_err(s)?;
            }
            conn.flush().map_err(s)
        },
    )?;
    Ok(Row {
        name: "tendermint-p2p 0.41".into(),
        bytes: w.bytes(),
        messages: w.messages,
        elapsed,
        cpu,
        latency: None,
        breakdown: None,
    })
}

/// What the Go peer's `bench` and `handshake-dial` print (one JSON line).
#[derive(serde::Deserialize)]
struct GoResult {
    #[serde(rename = "impl")]
    implementation: String,
    #[serde(default)]
    messages: u64,
    #[serde(default)]
    bytes: u64,
    #[serde(default)]
    handshakes: u64,
    seconds: f64,
    cpu_user: f64,
    cpu_sys: f64,
    /// Paced runs (`-rate`): send-to-receive latency percentiles.
    #[serde(default)]
    lat_p50_us: Option<f64>,
    #[serde(default)]
    lat_p99_us: Option<f64>,
}

impl GoResult {
    fn latency(&self) -> Option<Latency> {
        Some(Latency {
            p50_us: self.lat_p50_us?,
            p99_us: self.lat_p99_us?,
        })
    }

    fn parse(output: std::process::Output, what: &str) -> Result<GoResult, String> {
        if !output.status.success() {
            return Err(format!(
                "the Go peer's {what} failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        let line = String::from_utf8_lossy(&output.stdout);
        serde_json::from_str(line.trim())
            .map_err(|e| format!("the Go peer's {what} printed {line:?}: {e}"))
    }

    fn cpu(&self) -> Option<Cpu> {
        Some(Cpu {
            user: self.cpu_user,
            sys: self.cpu_sys,
        })
    }
}

/// The same workload through CometBFT's Go `SecretConnection`, as a separate
/// process (the Go peer's `bench`: the same messages, pattern, 64 KiB reads
/// and verification; it measures its own time and CPU over the same span).
fn run_go(
    peer: &Path,
    w: &Workload,
    mib: u64,
    producers: usize,
    rate: Option<u64>,
) -> Result<Row, String> {
    let output = std::process::Command::new(peer)
        .args([
            "bench",
            "-size",
            &w.size.to_string(),
            "-mib",
            &mib.to_string(),
            "-producers",
            &producers.to_string(),
            "-rate",
            &rate.unwrap_or(0).to_string(),
        ])
        .output()
        .map_err(|e| format!("running {}: {e}", peer.display()))?;
    let r = GoResult::parse(output, "bench")?;
    let messages = match producers {
        0 => w.messages,
        n => crate::producers::per_producer(w.messages, n) * n as u64,
    };
    if (r.messages, r.bytes) != (messages, messages * w.size as u64) {
        return Err(format!(
            "the Go peer sent {} messages ({} bytes), not {} ({} bytes)",
            r.messages,
            r.bytes,
            messages,
            messages * w.size as u64
        ));
    }
    Ok(Row {
        cpu: r.cpu(),
        latency: r.latency(),
        breakdown: None,
        name: r.implementation,
        bytes: r.bytes,
        messages: r.messages,
        elapsed: Duration::from_secs_f64(r.seconds),
    })
}

/// `--handshakes N`: N sequential connections (TCP connect, full handshake,
/// close) from us and, with a Go baseline, from the Go peer, alternating
/// under `--repeat`, all against one listener: the Go peer's
/// `handshake-serve` for a Go baseline, else our own (std, one thread).
fn run_handshakes(
    args: &BenchArgs,
    cfg: &Config,
    n: u64,
    go_peer: Option<&Path>,
) -> Result<(), String> {
    if n == 0 {
        return Err("--handshakes must be at least 1".into());
    }
    if args.baseline == Some(Baseline::TendermintP2p) {
        return Err("--handshakes compares with the Go baselines only".into());
    }
    let w = Workload {
        size: 0,
        messages: n,
        pattern: Default::default(),
    };
    let server = match go_peer {
        Some(peer) => Server::go(peer)?,
        None => Server::ours(cfg)?,
    };
    if !args.json {
        println!(
            "p2p-conn bench: {n} sequential handshakes (connect, handshake, close) over loopback TCP against {}",
            server.name
        );
    }
    let identity = Identity::generate();
    let rt = tokio_runtime(args.work.runtime)?;
    let mut ours_rows = Vec::new();
    let mut base_rows = Vec::new();
    for run in 0..args.repeat.max(1) {
        let start = Mark::now();
        for _ in 0..n {
            handshake_once(args.work.adapter, &rt, server.addr, &identity, cfg)?;
        }
        let (elapsed, cpu) = Mark::now().since(start);
        let ours = Row {
            name: format!("p2p-conn ({:?}) -> {}", args.work.adapter, server.name).to_lowercase(),
            bytes: 0,
            messages: n,
            elapsed,
            cpu,
            latency: None,
            breakdown: None,
        };
        print_run(args, &w, run, &ours)?;
        ours_rows.push(ours);
        if let Some(peer) = go_peer {
            let output = std::process::Command::new(peer)
                .args(["handshake-dial", "-n", &n.to_string()])
                .arg(server.addr.to_string())
                .output()
                .map_err(|e| format!("running {}: {e}", peer.display()))?;
            let r = GoResult::parse(output, "handshake-dial")?;
            let base = Row {
                name: format!("{} -> {}", r.implementation, server.name),
                bytes: 0,
                messages: r.handshakes,
                elapsed: Duration::from_secs_f64(r.seconds),
                cpu: r.cpu(),
                latency: None,
                breakdown: None,
            };
            print_run(args, &w, run, &base)?;
            base_rows.push(base);
        }
    }
    server.stop()?;
    summarize(args, &w, &ours_rows, &base_rows)
}

/// One connection: connect, handshake through `adapter`, close.
fn handshake_once(
    adapter: Adapter,
    rt: &tokio::runtime::Runtime,
    addr: SocketAddr,
    identity: &Identity,
    cfg: &Config,
) -> Result<(), String> {
    match adapter {
        Adapter::Std => {
            let tcp = TcpStream::connect(addr).map_err(s)?;
            tcp.set_nodelay(true).map_err(s)?;
            blocking::handshake_tcp(tcp, identity, cfg).map_err(s)?;
        }
        Adapter::Tokio | Adapter::Codec => rt.block_on(async {
            let tcp = tokio::net::TcpStream::connect(addr).await.map_err(s)?;
            tcp.set_nodelay(true).map_err(s)?;
            if adapter == Adapter::Codec {
                codec::handshake(tcp, identity, cfg).await.map_err(s)?;
            } else {
                ptokio::handshake(tcp, identity, cfg).await.map_err(s)?;
            }
            Ok::<_, String>(())
        })?,
    }
    Ok(())
}

/// The listener `--handshakes` dials.
struct Server {
    name: String,
    addr: SocketAddr,
    kind: ServerKind,
}

enum ServerKind {
    /// The Go peer's `handshake-serve`; it exits when its stdin closes.
    Go(std::process::Child),
    /// Our std listener thread; it stops at the first connection after
    /// `stop` is set.
    Ours(
        std::sync::Arc<std::sync::atomic::AtomicBool>,
        std::thread::JoinHandle<()>,
    ),
}

impl Server {
    fn go(peer: &Path) -> Result<Server, String> {
        use std::io::BufRead;
        use std::process::{Command, Stdio};
        let mut child = Command::new(peer)
            .args(["handshake-serve", "127.0.0.1:0"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("running {}: {e}", peer.display()))?;
        let mut stderr = std::io::BufReader::new(child.stderr.take().ok_or("no stderr")?);
        let mut line = String::new();
        stderr.read_line(&mut line).map_err(s)?;
        let addr = line
            .trim()
            .strip_prefix("listening ")
            .and_then(|a| a.parse().ok())
            .ok_or_else(|| format!("the Go peer's handshake-serve printed {line:?}"))?;
        // Pass its later messages (failed handshakes) through.
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                eprintln!("{line}");
            }
        });
        let version = std::process::Command::new(peer)
            .arg("version")
            .output()
            .map_err(s)?;
        Ok(Server {
            name: format!(
                "cometbft-go {}",
                String::from_utf8_lossy(&version.stdout).trim()
            ),
            addr,
            kind: ServerKind::Go(child),
        })
    }

    fn ours(cfg: &Config) -> Result<Server, String> {
        use std::sync::atomic::{AtomicBool, Ordering};
        let listener = TcpListener::bind("127.0.0.1:0").map_err(s)?;
        let addr = listener.local_addr().map_err(s)?;
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let (flag, cfg) = (stop.clone(), cfg.clone());
        let thread = std::thread::spawn(move || {
            let identity = Identity::generate();
            for tcp in listener.incoming() {
                if flag.load(Ordering::SeqCst) {
                    return;
                }
                if let Ok(tcp) = tcp {
                    let _ = tcp.set_nodelay(true);
                    if let Err(e) = blocking::handshake_tcp(tcp, &identity, &cfg) {
                        eprintln!("p2p-conn bench: server handshake failed: {e}");
                    }
                }
            }
        });
        Ok(Server {
            name: "p2p-conn (std)".into(),
            addr,
            kind: ServerKind::Ours(stop, thread),
        })
    }

    fn stop(self) -> Result<(), String> {
        match self.kind {
            ServerKind::Go(mut child) => {
                drop(child.stdin.take());
                child.wait().map_err(s)?;
            }
            ServerKind::Ours(stop, thread) => {
                stop.store(true, std::sync::atomic::Ordering::SeqCst);
                // Wake the accept loop so it sees the flag.
                let _ = TcpStream::connect(self.addr);
                thread
                    .join()
                    .map_err(|_| "server thread panicked".to_string())?;
            }
        }
        Ok(())
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[5.0]), Some(5.0));
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        // Even: the mean of the two middle values, not the upper one.
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[10.0, 20.0]), Some(15.0));
        assert_eq!(median(&[1.0, 100.0, 2.0, 3.0, 4.0, 5.0]), Some(3.5));
    }

    #[test]
    fn summary_takes_the_median_throughput() {
        // 1, 2, 3 and 4 MB/s: 1 MB in 1, 1/2, 1/3 and 1/4 s.
        let rows: Vec<Row> = [1.0f64, 4.0, 2.0, 3.0]
            .iter()
            .map(|rate| Row {
                name: "x".into(),
                bytes: 1_000_000,
                messages: 10,
                elapsed: Duration::from_secs_f64(1.0 / rate),
                // 1 MB is 1e6 / 2^30 GiB: 0.1 s CPU is 107.37 s per GiB.
                cpu: Some(Cpu {
                    user: 0.1 * rate,
                    sys: 0.0,
                }),
                latency: None,
                breakdown: None,
            })
            .collect();
        let m = Summary::of(&rows).unwrap();
        assert!((m.mb_per_s - 2.5).abs() < 1e-6, "{}", m.mb_per_s);
        assert!((m.msgs_per_s - 25.0).abs() < 1e-6, "{}", m.msgs_per_s);
        assert_eq!(m.runs, 4);
        // Median of 0.1, 0.2, 0.3 and 0.4 s CPU per MB.
        let gib = (1u64 << 30) as f64 / 1e6;
        let cpu = m.cpu_cost.unwrap();
        assert!((cpu - 0.25 * gib).abs() < 1e-6, "{cpu}");
        assert!(Summary::of(&[]).is_none());
    }

    #[test]
    fn cpu_time_is_read_and_grows() {
        let start = Mark::now();
        let begin = Instant::now();
        let mut x = 0u64;
        while begin.elapsed() < Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let (elapsed, cpu) = Mark::now().since(start);
        let cpu = cpu.expect("getrusage works on unix");
        assert!(elapsed >= Duration::from_millis(30));
        // A 30 ms busy loop shows up as (most of) 30 ms of CPU.
        assert!(cpu.total() > 0.01, "{cpu:?}");
        assert!(cpu.user >= 0.0 && cpu.sys >= 0.0, "{cpu:?}");
    }

    #[test]
    fn workload_sizes_are_checked() {
        let w = Workload::new(4096, 1 << 20).unwrap();
        assert_eq!((w.messages, w.bytes()), (256, 1 << 20));
        // Rounds up to whole messages, and sends at least one.
        assert_eq!(Workload::new(1000, 1 << 20).unwrap().messages, 1049);
        assert_eq!(Workload::new(10, 0).unwrap().messages, 1);
        assert!(Workload::new(0, 10).is_err());
        // A product past u64::MAX is refused (checked, not wrapped).
        assert!(Workload::new(1 << 20, u64::MAX).is_err());
    }
}
