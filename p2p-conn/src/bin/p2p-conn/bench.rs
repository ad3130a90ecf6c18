//! `p2p-conn bench`: an in-process loopback pair over real TCP. One side
//! dials, the other accepts; both run the full handshake; then the dialer
//! streams `--mib` MiB in messages of `--size` bytes (one write each) and the
//! listener reads and verifies every byte. `--baseline tendermint-p2p` runs
//! the same workload through tendermint-p2p 0.41 in the same process, right
//! after ours, and prints the ratio.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use p2p_conn::io::{blocking, codec, tokio as ptokio};
use p2p_conn::{Config, Identity};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

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
pub enum Baseline {
    /// tendermint-p2p 0.41 (std::io, one write syscall per frame)
    TendermintP2p,
}

#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// Bytes per logical message (one write each; at most 1 GiB)
    #[arg(long, default_value_t = 65536)]
    size: usize,
    /// Total MiB to send (at most 1048576, i.e. 1 TiB)
    #[arg(long, default_value_t = 256)]
    mib: u64,
    #[command(flatten)]
    wire: crate::WireArgs,
    /// Which p2p-conn adapter carries the workload
    #[arg(long, value_enum, default_value_t = Adapter::Tokio)]
    adapter: Adapter,
    /// Also run the same workload through another implementation and print the ratio
    #[arg(long, value_enum)]
    baseline: Option<Baseline>,
    /// Run the workload this many times (alternating with the baseline) and
    /// summarise with medians
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Print one JSON object per line instead of text, all with the same keys:
    /// "kind" is "run" (with "run" = 0..n-1), "median" or "ratio" (with
    /// "run" = null); fields that do not apply to a kind are null
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
struct Row {
    name: String,
    bytes: u64,
    messages: u64,
    elapsed: Duration,
}

impl Row {
    fn mb_per_s(&self) -> f64 {
        self.bytes as f64 / self.elapsed.as_secs_f64() / 1e6
    }
    fn msgs_per_s(&self) -> f64 {
        self.messages as f64 / self.elapsed.as_secs_f64()
    }
}

/// What is sent: `messages` messages of `size` bytes. Message `i` is
/// `pattern[i % 251 ..][..size]`, so a lost, duplicated or reordered message
/// shows up as a content mismatch.
#[derive(Clone)]
struct Workload {
    size: usize,
    messages: u64,
    pattern: std::sync::Arc<Vec<u8>>,
}

impl Workload {
    /// At least `total_bytes` in messages of `size` bytes (at least one
    /// message). Fails if a size overflows.
    fn new(size: usize, total_bytes: u64) -> Result<Self, String> {
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

    fn message(&self, i: u64) -> &[u8] {
        let off = (i % 251) as usize;
        &self.pattern[off..off + self.size]
    }

    fn bytes(&self) -> u64 {
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

fn s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// `--size` and `--mib` within their bounds, as the total byte count.
fn total_bytes(args: &BenchArgs) -> Result<u64, String> {
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
    let total = total_bytes(&args)?;
    let cfg = args.wire.config();
    cfg.validate().map_err(s)?;
    let w = Workload::new(args.size, total)?;
    if !args.json {
        println!(
            "p2p-conn bench: {} x {}-byte messages ({:.1} MiB) over loopback TCP; frame {}, flush {}, read buffer {}, backend {}",
            w.messages,
            w.size,
            w.bytes() as f64 / (1u64 << 20) as f64,
            args.wire.frame_size,
            args.wire.flush_size,
            args.wire.read_buffer,
            args.wire.backend
        );
    }
    let mut ours_rows = Vec::new();
    let mut base_rows = Vec::new();
    for run in 0..args.repeat.max(1) {
        let ours = match args.adapter {
            Adapter::Tokio => tokio_runtime()?.block_on(run_tokio(&w, &cfg, false))?,
            Adapter::Codec => tokio_runtime()?.block_on(run_tokio(&w, &cfg, true))?,
            Adapter::Std => run_std(&w, &cfg)?,
        };
        print_run(&args, &w, run, &ours)?;
        ours_rows.push(ours);
        if let Some(Baseline::TendermintP2p) = args.baseline {
            let base = run_tendermint(&w)?;
            print_run(&args, &w, run, &base)?;
            base_rows.push(base);
        }
    }
    let ours = Summary::of(&ours_rows);
    let base = Summary::of(&base_rows);
    if ours_rows.len() > 1 {
        if !args.json {
            println!("median of {} runs:", ours_rows.len());
        }
        for m in ours.iter().chain(&base) {
            print_median(&args, &w, m)?;
        }
    }
    if let (Some(ours), Some(base)) = (ours, base) {
        let ratio = ours.mb_per_s / base.mb_per_s;
        if args.json {
            print_json(&JsonLine {
                kind: "ratio",
                runs: ours.runs,
                implementation: &ours.name,
                over: Some(&base.name),
                ratio: Some(ratio),
                ..JsonLine::new(&args, &w)
            })?;
        } else {
            println!(
                "ratio {:<18} {ratio:>10.2}x  ({} / {})",
                "", ours.name, base.name
            );
        }
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

/// Median throughput of one implementation's runs.
struct Summary {
    name: String,
    runs: usize,
    mb_per_s: f64,
    msgs_per_s: f64,
}

impl Summary {
    fn of(rows: &[Row]) -> Option<Summary> {
        let mb: Vec<f64> = rows.iter().map(Row::mb_per_s).collect();
        let msgs: Vec<f64> = rows.iter().map(Row::msgs_per_s).collect();
        Some(Summary {
            name: rows.first()?.name.clone(),
            runs: rows.len(),
            mb_per_s: median(&mb)?,
            msgs_per_s: median(&msgs)?,
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
    /// 0-based index of a measured run; null for summary rows.
    run: Option<usize>,
    /// How many runs the row stands for.
    runs: usize,
    #[serde(rename = "impl")]
    implementation: &'a str,
    /// "ratio" only: the implementation `impl` is compared with.
    over: Option<&'a str>,
    /// "ratio" only: `impl` MB/s over `over` MB/s.
    ratio: Option<f64>,
    mb_per_s: Option<f64>,
    msgs_per_s: Option<f64>,
    /// "run" only: from the sender's first byte to the receiver's last.
    seconds: Option<f64>,
    size: usize,
    messages: u64,
    bytes: u64,
    frame_size: usize,
    flush_size: usize,
    read_buffer: usize,
    backend: String,
}

impl<'a> JsonLine<'a> {
    /// The workload's fields, with everything else empty.
    fn new(args: &BenchArgs, w: &Workload) -> Self {
        JsonLine {
            kind: "run",
            run: None,
            runs: 1,
            implementation: "",
            over: None,
            ratio: None,
            mb_per_s: None,
            msgs_per_s: None,
            seconds: None,
            size: w.size,
            messages: w.messages,
            bytes: w.bytes(),
            frame_size: args.wire.frame_size,
            flush_size: args.wire.flush_size,
            read_buffer: args.wire.read_buffer,
            backend: args.wire.backend.to_string(),
        }
    }
}

fn print_json(line: &JsonLine<'_>) -> Result<(), String> {
    println!("{}", serde_json::to_string(line).map_err(s)?);
    Ok(())
}

fn print_run(args: &BenchArgs, w: &Workload, run: usize, row: &Row) -> Result<(), String> {
    if args.json {
        print_json(&JsonLine {
            kind: "run",
            run: Some(run),
            implementation: &row.name,
            mb_per_s: Some(row.mb_per_s()),
            msgs_per_s: Some(row.msgs_per_s()),
            seconds: Some(row.elapsed.as_secs_f64()),
            ..JsonLine::new(args, w)
        })
    } else {
        println!(
            "{:<24} {:>10.1} MB/s {:>12.0} msg/s   ({:.3} s, content verified)",
            row.name,
            row.mb_per_s(),
            row.msgs_per_s(),
            row.elapsed.as_secs_f64()
        );
        Ok(())
    }
}

fn print_median(args: &BenchArgs, w: &Workload, m: &Summary) -> Result<(), String> {
    if args.json {
        print_json(&JsonLine {
            kind: "median",
            runs: m.runs,
            implementation: &m.name,
            mb_per_s: Some(m.mb_per_s),
            msgs_per_s: Some(m.msgs_per_s),
            ..JsonLine::new(args, w)
        })
    } else {
        println!(
            "{:<24} {:>10.1} MB/s {:>12.0} msg/s   (median of {} runs)",
            m.name, m.mb_per_s, m.msgs_per_s, m.runs
        );
        Ok(())
    }
}

fn tokio_runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(s)
}

async fn run_tokio(w: &Workload, cfg: &Config, use_codec: bool) -> Result<Row, String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(s)?;
    let addr = listener.local_addr().map_err(s)?;
    let (rcfg, rw) = (cfg.clone(), w.clone());
    let receiver = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.map_err(s)?;
        tcp.set_nodelay(true).map_err(s)?;
        let mut v = Verifier::new(rw);
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
        }
        if !v.done() {
            return Err(format!(
                "stream ended after {} of {} messages",
                v.msg, v.w.messages
            ));
        }
        Ok::<_, String>(Instant::now())
    });
    let tcp = tokio::net::TcpStream::connect(addr).await.map_err(s)?;
    tcp.set_nodelay(true).map_err(s)?;
    let start;
    if use_codec {
        let mut framed = codec::handshake(tcp, &Identity::generate(), cfg)
            .await
            .map_err(s)?;
        start = Instant::now();
        for i in 0..w.messages {
            framed.feed(w.message(i)).await.map_err(s)?;
        }
        SinkExt::<&[u8]>::flush(&mut framed).await.map_err(s)?;
        framed.get_mut().shutdown().await.map_err(s)?;
    } else {
        let mut conn = ptokio::handshake(tcp, &Identity::generate(), cfg)
            .await
            .map_err(s)?;
        start = Instant::now();
        for i in 0..w.messages {
            conn.write_all(w.message(i)).await.map_err(s)?;
        }
        conn.shutdown().await.map_err(s)?;
    }
    let end = receiver.await.map_err(s)??;
    let name = if use_codec {
        "p2p-conn (codec)"
    } else {
        "p2p-conn (tokio)"
    };
    Ok(Row {
        name: name.into(),
        bytes: w.bytes(),
        messages: w.messages,
        elapsed: end - start,
    })
}

/// Accept on one thread, dial on this one, run `recv` and `send` over the
/// two ends, and time from the sender's first byte to the receiver's last.
fn run_threads<R, S>(recv: R, send: S) -> Result<Duration, String>
where
    R: FnOnce(TcpStream) -> Result<(), String> + Send + 'static,
    S: FnOnce(TcpStream, &mut Option<Instant>) -> Result<(), String>,
{
    let listener = TcpListener::bind("127.0.0.1:0").map_err(s)?;
    let addr = listener.local_addr().map_err(s)?;
    let receiver = std::thread::spawn(move || {
        let (tcp, _) = listener.accept().map_err(s)?;
        tcp.set_nodelay(true).map_err(s)?;
        recv(tcp)?;
        Ok::<_, String>(Instant::now())
    });
    let tcp = TcpStream::connect(addr).map_err(s)?;
    tcp.set_nodelay(true).map_err(s)?;
    let mut start = None;
    let sent = send(tcp, &mut start);
    let end = receiver
        .join()
        .map_err(|_| "receiver thread panicked".to_string())??;
    sent?;
    Ok(end - start.ok_or("sender never started")?)
}

fn run_std(w: &Workload, cfg: &Config) -> Result<Row, String> {
    let (rcfg, rw) = (cfg.clone(), w.clone());
    let elapsed = run_threads(
        move |tcp| {
            let mut conn = blocking::handshake_tcp(tcp, &Identity::generate(), &rcfg).map_err(s)?;
            let mut v = Verifier::new(rw);
            let mut buf = vec![0u8; v.w.size.min(1 << 20)];
            loop {
                let n = conn.read(&mut buf).map_err(s)?;
                if n == 0 {
                    break;
                }
                v.feed(&buf[..n])?;
            }
            if v.done() {
                Ok(())
            } else {
                Err("stream ended early".into())
            }
        },
        |tcp, start| {
            let conn = blocking::handshake_tcp(tcp, &Identity::generate(), cfg).map_err(s)?;
            let (_r, mut wr) = conn.split().map_err(s)?;
            *start = Some(Instant::now());
            for i in 0..w.messages {
                wr.write_all(w.message(i)).map_err(s)?;
            }
            wr.shutdown().map_err(s)
        },
    )?;
    Ok(Row {
        name: "p2p-conn (std)".into(),
        bytes: w.bytes(),
        messages: w.messages,
        elapsed,
    })
}

/// The same workload through tendermint-p2p 0.41 (std threads, as its API is
/// blocking). Its reads must use buffers of at least one frame's payload.
fn run_tendermint(w: &Workload) -> Result<Row, String> {
    use tendermint_p2p::secret_connection::{SecretConnection, Version};
    let key = || ed25519_consensus::SigningKey::new(rand_core::OsRng);
    let rw = w.clone();
    let elapsed = run_threads(
        move |tcp| {
            let mut conn = SecretConnection::new(tcp, key(), Version::V0_34).map_err(s)?;
            let mut v = Verifier::new(rw);
            let mut buf = vec![0u8; 64 * 1024];
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
            *start = Some(Instant::now());
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
    })
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
            })
            .collect();
        let m = Summary::of(&rows).unwrap();
        assert!((m.mb_per_s - 2.5).abs() < 1e-6, "{}", m.mb_per_s);
        assert!((m.msgs_per_s - 25.0).abs() < 1e-6, "{}", m.msgs_per_s);
        assert_eq!(m.runs, 4);
        assert!(Summary::of(&[]).is_none());
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
