//! The workload `bench` and `profile` share: what is sent (messages of a
//! size, in a pattern that shows loss, duplication and reordering), over
//! which adapter and runtime, with which settings; and how a receiver checks
//! it.

use std::sync::atomic::{AtomicBool, AtomicU64};

use p2p_conn::Config;

use crate::error::LabError;
use p2p_conn_cli::conn::WireArgs;

/// Bytes the current run's receiver has checked so far, counted only while
/// `COUNT_PROGRESS` is set (`profile`'s progress bar sets it and reads this).
pub static PROGRESS: AtomicU64 = AtomicU64::new(0);

/// Whether `progress` counts: off for `bench` and for runs without a
/// progress bar, so their receive loops pay one plain load per chunk, not a
/// locked add (which took 8 of 527 samples in a 4 GiB profile).
pub static COUNT_PROGRESS: AtomicBool = AtomicBool::new(false);

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

/// How producers reach the socket.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendPath {
    /// The send queue: batched writes, frames packed across messages
    Queue,
    /// The plain writer behind a shared lock: one write per message
    Lock,
}

/// The workload `bench` and `profile` share: what is sent, over which
/// adapter, with which settings.
#[derive(clap::Args, Debug, Clone)]
pub struct WorkloadArgs {
    /// Bytes per logical message (one write each; at most 1 GiB)
    #[arg(long, default_value_t = 65536)]
    pub size: usize,
    /// Total MiB to send (at most 1048576, i.e. 1 TiB) [default: 1024;
    /// `profile` without it samples until --samples]
    #[arg(long)]
    pub mib: Option<u64>,
    #[command(flatten)]
    pub wire: WireArgs,
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
    #[arg(long, value_enum, default_value_t = SendPath::Queue)]
    pub send_path: SendPath,
    /// With --producers and the queue: QueueConfig::max_pending_bytes
    #[arg(long, default_value_t = p2p_conn::io::queue::DEFAULT_MAX_PENDING_BYTES)]
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
            self.wire.backend_choice()
        )
    }

    /// The connection settings, validated.
    pub fn config(&self) -> Result<Config, LabError> {
        let cfg = self.wire.config();
        cfg.validate()?;
        self.queue_config().validate()?;
        Ok(cfg)
    }

    /// The send queue's settings.
    pub fn queue_config(&self) -> p2p_conn::io::queue::QueueConfig {
        p2p_conn::io::queue::QueueConfig::default().max_pending_bytes(self.max_pending_bytes)
    }

    /// `--mib`, or its default.
    pub fn mib(&self) -> u64 {
        self.mib.unwrap_or(DEFAULT_MIB)
    }

    /// `--size` and `--mib` within their bounds, as the total byte count.
    pub fn total_bytes(&self) -> Result<u64, LabError> {
        self.bytes_of(self.mib())
    }

    /// `--size` and `mib` MiB within their bounds, as the total byte count.
    pub fn bytes_of(&self, mib: u64) -> Result<u64, LabError> {
        if self.size == 0 {
            return Err(LabError::usage("--size must be at least 1"));
        }
        if self.size > MAX_MESSAGE_BYTES {
            return Err(LabError::usage(format!(
                "--size {} is too large: at most {MAX_MESSAGE_BYTES} bytes (1 GiB) per message",
                self.size
            )));
        }
        if mib > MAX_TOTAL_MIB {
            return Err(LabError::usage(format!(
                "--mib {mib} is too large: at most {MAX_TOTAL_MIB} (1 TiB) in total"
            )));
        }
        mib.checked_mul(1 << 20)
            .ok_or_else(|| LabError::usage(format!("--mib {mib} overflows")))
    }

    /// The workload these flags describe.
    pub fn workload(&self) -> Result<Workload, LabError> {
        Workload::new(self.size, self.total_bytes()?)
    }
}

/// `--mib` when not given: 1 GiB, about 0.7 s of 64 KiB messages at the
/// 1.6 GB/s of a quiet run, above `stability::MIN_RUN` (at 256 MiB, runs
/// took 0.2 s).
pub const DEFAULT_MIB: u64 = 1024;

/// Largest `--size`. A message is one buffer the sender holds (plus a
/// 251-byte pattern offset) and the std receiver reads into a buffer of up to
/// 1 MiB; above 1 GiB a run measures the allocator and paging on our 24 GiB
/// machines, not the connection.
const MAX_MESSAGE_BYTES: usize = 1 << 30;

/// Largest `--mib`: 1 TiB. At the fastest rates measured (about 1 GB/s on
/// loopback) that is some 18 minutes per run; more is a typo, and the bound
/// keeps every byte count far from `u64` overflow.
const MAX_TOTAL_MIB: u64 = 1 << 20;

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
    pub fn new(size: usize, total_bytes: u64) -> Result<Self, LabError> {
        let overflow = || {
            LabError::usage(format!(
                "--size {size} with {total_bytes} bytes in total overflows"
            ))
        };
        let size64 = u64::try_from(size).map_err(|_| overflow())?;
        if size64 == 0 {
            return Err(LabError::usage("--size must be at least 1"));
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

    /// `--handshakes N`: N handshakes and no bytes, as the rows report them.
    pub fn handshakes(n: u64) -> Self {
        Workload {
            size: 0,
            messages: n,
            pattern: Default::default(),
        }
    }

    /// Connection `c`'s share when the workload is split over `n`
    /// connections (`bench --connections`): `messages / n` messages, and one
    /// more for each of the first `messages % n`, so the shares add up to
    /// the whole. Each share's message `i` is the whole's message `i`
    /// (same size and pattern), so every connection is verified as one
    /// connection's run is. Fails when a share would be empty.
    pub fn share(&self, n: usize, c: usize) -> Result<Workload, LabError> {
        let n64 = n as u64;
        if n == 0 || n64 > self.messages {
            return Err(LabError::usage(format!(
                "--connections {n} needs at least one message per connection ({} messages in all)",
                self.messages
            )));
        }
        let extra = u64::from((c as u64) < self.messages % n64);
        Ok(Workload {
            messages: self.messages / n64 + extra,
            ..self.clone()
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
pub struct Verifier {
    w: Workload,
    msg: u64,
    at: usize,
}

impl Verifier {
    pub fn new(w: Workload) -> Self {
        Verifier { w, msg: 0, at: 0 }
    }

    pub fn feed(&mut self, mut data: &[u8]) -> Result<(), LabError> {
        progress(data.len());
        while !data.is_empty() {
            if self.msg >= self.w.messages {
                return Err(LabError::failed("extra bytes after the last message"));
            }
            let expected = &self.w.message(self.msg)[self.at..];
            let k = expected.len().min(data.len());
            if data[..k] != expected[..k] {
                return Err(LabError::failed(format!(
                    "message {} arrived corrupted",
                    self.msg
                )));
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

    pub fn done(&self) -> bool {
        self.msg == self.w.messages
    }

    /// "stream ended after M of N messages".
    pub fn ended_early(&self) -> LabError {
        LabError::failed(format!(
            "stream ended after {} of {} messages",
            self.msg, self.w.messages
        ))
    }
}

/// The multi-thread runtime of `bench --connections`: `workers` worker
/// threads (as many as the process may use cores), every pair's tasks on
/// them.
pub fn tokio_runtime_workers(workers: usize) -> Result<tokio::runtime::Runtime, LabError> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers.max(1))
        .enable_all()
        .build()?)
}

/// The runtime the tokio and codec adapters run on.
pub fn tokio_runtime(flavor: Runtime) -> Result<tokio::runtime::Runtime, LabError> {
    Ok(match flavor {
        Runtime::MultiThread => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?,
        Runtime::CurrentThread => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn shares_add_up_to_the_whole() {
        let w = Workload::new(100, 1000 * 100).unwrap();
        for n in [1, 2, 3, 7, 999, 1000] {
            let shares: Vec<u64> = (0..n).map(|c| w.share(n, c).unwrap().messages).collect();
            assert_eq!(shares.iter().sum::<u64>(), 1000, "n = {n}");
            let (min, max) = (shares.iter().min().unwrap(), shares.iter().max().unwrap());
            assert!(max - min <= 1, "n = {n}: {shares:?}");
            assert!(*min >= 1, "n = {n}");
        }
        // 1000 over 3: 334, 333, 333; the same messages as the whole's.
        assert_eq!(w.share(3, 0).unwrap().messages, 334);
        assert_eq!(w.share(3, 2).unwrap().messages, 333);
        assert_eq!(w.share(3, 1).unwrap().message(5), w.message(5));
        // An empty share is refused.
        assert!(w.share(1001, 0).is_err());
        assert!(w.share(0, 0).is_err());
    }
}
