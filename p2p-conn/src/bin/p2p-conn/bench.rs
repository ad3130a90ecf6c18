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
use p2p_conn::{Backend, Config, Identity};
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
    /// Bytes per logical message (one write each)
    #[arg(long, default_value_t = 65536)]
    size: usize,
    /// Total MiB to send
    #[arg(long, default_value_t = 256)]
    mib: usize,
    /// Frame data size (1024 = CometBFT wire; others need p2p-conn on both ends)
    #[arg(long, default_value_t = p2p_conn::proto::STANDARD_FRAME_SIZE)]
    frame_size: usize,
    /// Most sealed bytes per socket write
    #[arg(long, default_value_t = p2p_conn::DEFAULT_FLUSH_SIZE)]
    flush_size: usize,
    /// Receive buffer filled by one read
    #[arg(long, default_value_t = p2p_conn::DEFAULT_READ_BUFFER)]
    read_buffer: usize,
    /// AEAD backend: ring or rustcrypto
    #[arg(long, default_value_t = Backend::default())]
    backend: Backend,
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
    /// Print one JSON object per result row instead of text
    #[arg(long)]
    json: bool,
}

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
    fn new(size: usize, messages: u64) -> Self {
        let pattern = (0..size + 251)
            .map(|k| (k.wrapping_mul(7) ^ (k >> 8).wrapping_mul(13)) as u8)
            .collect();
        Workload {
            size,
            messages,
            pattern: std::sync::Arc::new(pattern),
        }
    }

    fn message(&self, i: u64) -> &[u8] {
        let off = (i % 251) as usize;
        &self.pattern[off..off + self.size]
    }

    fn bytes(&self) -> u64 {
        self.messages * self.size as u64
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

pub fn run(args: BenchArgs) -> Result<(), String> {
    if args.size == 0 {
        return Err("--size must be at least 1".into());
    }
    let cfg = Config::default()
        .frame_size(args.frame_size)
        .flush_size(args.flush_size)
        .read_buffer_size(args.read_buffer)
        .backend(args.backend);
    cfg.validate().map_err(s)?;
    let total = (args.mib as u64) << 20;
    let w = Workload::new(args.size, total.div_ceil(args.size as u64).max(1));
    if !args.json {
        println!(
            "p2p-conn bench: {} x {}-byte messages ({:.1} MiB) over loopback TCP; frame {}, flush {}, read buffer {}, backend {}",
            w.messages,
            w.size,
            w.bytes() as f64 / (1u64 << 20) as f64,
            args.frame_size,
            args.flush_size,
            args.read_buffer,
            args.backend
        );
    }
    let mut ours_rows = Vec::new();
    let mut base_rows = Vec::new();
    for _ in 0..args.repeat.max(1) {
        let ours = match args.adapter {
            Adapter::Tokio => tokio_runtime()?.block_on(run_tokio(&w, &cfg, false))?,
            Adapter::Codec => tokio_runtime()?.block_on(run_tokio(&w, &cfg, true))?,
            Adapter::Std => run_std(&w, &cfg)?,
        };
        print_row(&args, &ours);
        ours_rows.push(ours);
        if let Some(Baseline::TendermintP2p) = args.baseline {
            let base = run_tendermint(&w)?;
            print_row(&args, &base);
            base_rows.push(base);
        }
    }
    let ours = median(&ours_rows);
    let base = (!base_rows.is_empty()).then(|| median(&base_rows));
    if args.repeat > 1 && !args.json {
        println!("median of {} runs:", ours_rows.len());
        print_row(&args, &ours);
        if let Some(b) = &base {
            print_row(&args, b);
        }
    }
    if let Some(base) = base {
        let ratio = ours.mb_per_s() / base.mb_per_s();
        if args.json {
            println!("{{\"ratio\":{ratio:.3},\"over\":\"{}\"}}", base.name);
        } else {
            println!(
                "ratio {:<18} {ratio:>10.2}x  ({} / {})",
                "", ours.name, base.name
            );
        }
    }
    Ok(())
}

/// The run with the median throughput.
fn median(rows: &[Row]) -> Row {
    let mut idx: Vec<usize> = (0..rows.len()).collect();
    idx.sort_by(|&a, &b| rows[a].mb_per_s().total_cmp(&rows[b].mb_per_s()));
    let r = &rows[idx[idx.len() / 2]];
    Row {
        name: r.name.clone(),
        bytes: r.bytes,
        messages: r.messages,
        elapsed: r.elapsed,
    }
}

fn print_row(args: &BenchArgs, row: &Row) {
    if args.json {
        println!(
            "{{\"impl\":\"{}\",\"size\":{},\"messages\":{},\"bytes\":{},\"seconds\":{:.6},\"mb_per_s\":{:.1},\"msgs_per_s\":{:.0},\"frame_size\":{},\"flush_size\":{},\"read_buffer\":{},\"backend\":\"{}\"}}",
            row.name,
            args.size,
            row.messages,
            row.bytes,
            row.elapsed.as_secs_f64(),
            row.mb_per_s(),
            row.msgs_per_s(),
            args.frame_size,
            args.flush_size,
            args.read_buffer,
            args.backend
        );
    } else {
        println!(
            "{:<24} {:>10.1} MB/s {:>12.0} msg/s   ({:.3} s, content verified)",
            row.name,
            row.mb_per_s(),
            row.msgs_per_s(),
            row.elapsed.as_secs_f64()
        );
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
