//! `p2p-conn bench`: an in-process loopback pair over real TCP. One task
//! dials, one accepts; both run the full handshake; then the dialer streams
//! `--mib` MiB in messages of `--size` bytes (one `write_all` each) and the
//! listener reads and verifies every byte.

use std::time::{Duration, Instant};

use p2p_conn::io::tokio as ptokio;
use p2p_conn::{Backend, Config, Identity};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

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
    /// Print one JSON object per result row instead of text
    #[arg(long)]
    json: bool,
}

/// One measured run.
struct Row {
    name: &'static str,
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

/// The byte pattern messages are cut from: message `i` is
/// `pattern[i % 256 ..][..size]`, so a lost, duplicated or reordered message
/// shows up as a content mismatch.
fn pattern(size: usize) -> Vec<u8> {
    (0..size + 256)
        .map(|k| (k.wrapping_mul(7) ^ (k >> 8).wrapping_mul(13)) as u8)
        .collect()
}

fn message(pattern: &[u8], i: u64, size: usize) -> &[u8] {
    let off = (i % 256) as usize;
    &pattern[off..off + size]
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
    cfg.validate().map_err(|e| e.to_string())?;
    let total = (args.mib as u64) << 20;
    let messages = total.div_ceil(args.size as u64).max(1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let row = rt.block_on(p2p_conn_run(&args, cfg, messages))?;
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
            "p2p-conn bench: {} x {}-byte messages ({:.1} MiB) over loopback TCP; frame {}, flush {}, read buffer {}, backend {}",
            row.messages,
            args.size,
            row.bytes as f64 / (1u64 << 20) as f64,
            args.frame_size,
            args.flush_size,
            args.read_buffer,
            args.backend
        );
        println!(
            "{:<14} {:>10.1} MB/s {:>12.0} msg/s   ({:.3} s, content verified)",
            row.name,
            row.mb_per_s(),
            row.msgs_per_s(),
            row.elapsed.as_secs_f64()
        );
    }
    Ok(())
}

async fn p2p_conn_run(args: &BenchArgs, cfg: Config, messages: u64) -> Result<Row, String> {
    let size = args.size;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let server_cfg = cfg.clone();
    let receiver = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.map_err(|e| e.to_string())?;
        tcp.set_nodelay(true).map_err(|e| e.to_string())?;
        let mut conn = ptokio::handshake(tcp, &Identity::generate(), &server_cfg)
            .await
            .map_err(|e| e.to_string())?;
        let pat = pattern(size);
        let mut buf = vec![0u8; size];
        let mut started = None;
        for i in 0..messages {
            conn.read_exact(&mut buf)
                .await
                .map_err(|e| format!("read message {i}: {e}"))?;
            started.get_or_insert_with(Instant::now);
            if buf != message(&pat, i, size) {
                return Err(format!("message {i} arrived corrupted"));
            }
        }
        let mut tail = [0u8; 1];
        if conn.read(&mut tail).await.map_err(|e| e.to_string())? != 0 {
            return Err("extra bytes after the last message".into());
        }
        Ok::<_, String>(Instant::now())
    });
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    tcp.set_nodelay(true).map_err(|e| e.to_string())?;
    let mut conn = ptokio::handshake(tcp, &Identity::generate(), &cfg)
        .await
        .map_err(|e| e.to_string())?;
    let pat = pattern(size);
    let start = Instant::now();
    for i in 0..messages {
        conn.write_all(message(&pat, i, size))
            .await
            .map_err(|e| e.to_string())?;
    }
    conn.shutdown().await.map_err(|e| e.to_string())?;
    let end = receiver.await.map_err(|e| e.to_string())??;
    Ok(Row {
        name: "p2p-conn",
        bytes: messages * size as u64,
        messages,
        elapsed: end - start,
    })
}
