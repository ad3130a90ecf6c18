//! `p2p-conn-lab bench --producers N`: N tasks share one connection's send side,
//! each sending its own numbered messages, the way a node's reactors share a
//! peer. Through the send queue (`io::queue::Sender`, the default) or through
//! the plain writer behind a shared lock (`--send-path lock`, one write per
//! message). The receiver checks that every producer's messages arrive
//! whole, once and in order. The Go peer's `bench -producers N` runs the same
//! workload with N goroutines calling `Write` on one `SecretConnection`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use p2p_conn::io::queue::{Bytes, QueueConfig, Sender};
use p2p_conn::io::tokio as ptokio;
use p2p_conn::stats::{ConnStats, QueueStats, ENABLED};
use p2p_conn::{Config, Identity};
use tokio::io::AsyncBufReadExt;

use super::breakdown::Breakdown;
use super::measure::{Latency, Mark, Row};
use super::workload::{progress, SendPath};
use crate::error::LabError;

/// Producer (1 byte) and its sequence number (4 bytes, little-endian).
pub const HEADER: usize = 5;

/// Byte `k` of every message before the per-message constant: `k*7`.
pub(super) fn base(size: usize) -> Vec<u8> {
    (0..size).map(|k| k.wrapping_mul(7) as u8).collect()
}

/// Paced runs put the send time (nanoseconds since the run's start, little
/// endian) after the header; the pattern check skips it.
pub const STAMP: usize = 8;

/// Message `seq` of producer `p`: the header, then byte `k` = `k*7 ^ p ^ seq`
/// (as the Go peer's `producerMessage`); with `t0`, bytes 5..13 carry the
/// time since `t0`.
pub(super) fn message(base: &[u8], p: u8, seq: u32, t0: Option<Instant>) -> Bytes {
    let c = p ^ seq as u8;
    let mut m: Vec<u8> = base.iter().map(|b| b ^ c).collect();
    m[0] = p;
    m[1..HEADER].copy_from_slice(&seq.to_le_bytes());
    if let Some(t0) = t0 {
        let ns = t0.elapsed().as_nanos() as u64;
        m[HEADER..HEADER + STAMP].copy_from_slice(&ns.to_le_bytes());
    }
    Bytes::from(m)
}

/// Wait until message `sent` of a producer pacing `per_second` is due.
async fn pace(t0: Instant, per_second: f64, sent: u64) {
    let due = t0 + Duration::from_secs_f64(sent as f64 / per_second);
    if due > Instant::now() {
        // 1 ms timer resolution: messages go out in small bursts per tick,
        // as with the Go peer's pacing.
        tokio::time::sleep_until(due.into()).await;
    }
}

/// Checks a stream of fixed-size producer messages, whatever its chunking.
pub(super) struct Checker {
    base: Vec<u8>,
    per: u32,
    next: Vec<u32>,
    carry: Vec<u8>,
    /// Paced runs: the run's start, and each message's latency (µs).
    t0: Option<Instant>,
    latencies: Vec<u32>,
}

impl Checker {
    pub(super) fn new(size: usize, producers: usize, per: u32) -> Self {
        Checker {
            base: base(size),
            per,
            next: vec![0; producers],
            carry: Vec::with_capacity(size),
            t0: None,
            latencies: Vec::new(),
        }
    }

    pub(super) fn feed(&mut self, mut data: &[u8]) -> Result<(), LabError> {
        progress(data.len());
        let size = self.base.len();
        while !data.is_empty() {
            if self.carry.is_empty() && data.len() >= size {
                // A whole message in the chunk: check it in place.
                let (m, rest) = data.split_at(size);
                self.check(m)?;
                data = rest;
                continue;
            }
            let k = (size - self.carry.len()).min(data.len());
            self.carry.extend_from_slice(&data[..k]);
            data = &data[k..];
            if self.carry.len() < size {
                return Ok(());
            }
            let m = std::mem::take(&mut self.carry);
            self.check(&m)?;
            self.carry = m;
            self.carry.clear();
        }
        Ok(())
    }

    fn check(&mut self, m: &[u8]) -> Result<(), LabError> {
        let p = m[0] as usize;
        let seq = u32::from_le_bytes([m[1], m[2], m[3], m[4]]);
        let next = self
            .next
            .get_mut(p)
            .ok_or_else(|| LabError::failed(format!("message from unknown producer {p}")))?;
        if seq != *next || seq >= self.per {
            return Err(LabError::failed(format!(
                "producer {p}: message {seq} arrived, expected {next}"
            )));
        }
        let mut from = HEADER;
        if let Some(t0) = self.t0 {
            let mut stamp = [0u8; STAMP];
            stamp.copy_from_slice(&m[HEADER..HEADER + STAMP]);
            let sent = u64::from_le_bytes(stamp);
            let now = t0.elapsed().as_nanos() as u64;
            self.latencies
                .push((now.saturating_sub(sent) / 1000).min(u64::from(u32::MAX)) as u32);
            from += STAMP;
        }
        let c = p as u8 ^ seq as u8;
        // OR of every difference (vectorises; no early exit needed).
        let diff = m[from..]
            .iter()
            .zip(&self.base[from..])
            .fold(0u8, |acc, (a, b)| acc | (a ^ b ^ c));
        if diff != 0 {
            return Err(LabError::failed(format!(
                "producer {p}: message {seq} arrived corrupted"
            )));
        }
        *next += 1;
        Ok(())
    }

    pub(super) fn complete(&self) -> bool {
        self.carry.is_empty() && self.next.iter().all(|&n| n == self.per)
    }
}

/// Where producers send: the queue, or the plain writer behind a lock (one
/// per run, shared behind an `Arc`: the size difference does not matter).
#[allow(clippy::large_enum_variant)]
enum Out {
    Queue(Sender),
    Lock(tokio::sync::Mutex<ptokio::WriteHalf<tokio::net::tcp::OwnedWriteHalf>>),
}

impl Out {
    async fn send(&self, m: Bytes) -> Result<(), LabError> {
        match self {
            Out::Queue(q) => Ok(q.send(m).await?),
            Out::Lock(w) => Ok(w.lock().await.send(&m).await?),
        }
    }

    /// The send side's counters (the queue's writer, or the locked half),
    /// and the queue's own.
    async fn stats(&self) -> (ConnStats, Option<QueueStats>) {
        match self {
            Out::Queue(q) => {
                let qs = q.stats();
                let mut c = ConnStats::default();
                c.send = qs.send;
                (c, Some(qs))
            }
            Out::Lock(w) => (w.lock().await.stats(), None),
        }
    }

    /// End the stream once everything is sent.
    async fn finish(&self) -> Result<(), LabError> {
        match self {
            Out::Queue(q) => {
                q.shutdown();
                Ok(())
            }
            Out::Lock(w) => {
                use tokio::io::AsyncWriteExt;
                Ok(w.lock().await.shutdown().await?)
            }
        }
    }
}

/// Messages per producer for `messages` in all (rounded up).
pub fn per_producer(messages: u64, producers: usize) -> u64 {
    messages.div_ceil(producers as u64)
}

/// One measured run: `producers` tasks, `per` messages of `size` bytes each.
pub async fn run(
    size: usize,
    producers: usize,
    per: u64,
    cfg: &Config,
    queue: &QueueConfig,
    path: SendPath,
    rate: Option<u64>,
) -> Result<Row, LabError> {
    let least = HEADER + if rate.is_some() { STAMP } else { 0 };
    if size < least || !(1..=255).contains(&producers) || per > u64::from(u32::MAX) {
        return Err(LabError::usage(format!(
            "--producers needs --size of at least {least} bytes, 1 to 255 producers, at most 2^32 messages each"
        )));
    }
    if rate == Some(0) {
        return Err(LabError::usage(
            "--rate must be at least 1 message per second",
        ));
    }
    // Paced runs: every message carries its send time since `t0`.
    let t0 = Instant::now();
    let stamp = rate.map(|_| t0);
    let per_second = rate.map_or(0.0, |r| r as f64 / producers as f64);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let rcfg = cfg.clone();
    let receiver = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await?;
        tcp.set_nodelay(true)?;
        let mut conn = ptokio::handshake(tcp, &Identity::generate(), &rcfg).await?;
        let mut check = Checker::new(size, producers, per as u32);
        check.t0 = stamp;
        loop {
            let chunk = conn.fill_buf().await?;
            if chunk.is_empty() {
                break;
            }
            let n = chunk.len();
            check.feed(chunk)?;
            conn.consume(n);
        }
        if !check.complete() {
            return Err(LabError::failed("stream ended early"));
        }
        let end = Mark::now();
        Ok::<_, LabError>((end, Latency::of(&mut check.latencies), conn.stats()))
    });
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let conn = ptokio::handshake(tcp, &Identity::generate(), cfg).await?;
    let (_read, write) = conn.into_split();
    let out = Arc::new(match path {
        SendPath::Queue => Out::Queue(Sender::with_addr(write, Some(addr), queue)?),
        SendPath::Lock => Out::Lock(tokio::sync::Mutex::new(write)),
    });
    let start = Mark::now();
    let tasks: Vec<_> = (0..producers)
        .map(|p| {
            let out = out.clone();
            let base = base(size);
            tokio::spawn(async move {
                for seq in 0..per as u32 {
                    if stamp.is_some() {
                        pace(t0, per_second, u64::from(seq)).await;
                    }
                    out.send(message(&base, p as u8, seq, stamp)).await?;
                }
                Ok::<_, LabError>(())
            })
        })
        .collect();
    for t in tasks {
        t.await??;
    }
    out.finish().await?;
    let (end, latency, received) = receiver.await??;
    let (elapsed, cpu) = end.since(start);
    // The queue's writer records a batch's counters just after its write
    // returns, which can be after the receiver has read it: wait (briefly)
    // until they cover every byte the receiver read.
    let mut sent = out.stats().await;
    let wait_until = Instant::now() + Duration::from_secs(1);
    while ENABLED
        && sent.0.send.bytes_written < received.recv.bytes_read
        && Instant::now() < wait_until
    {
        tokio::time::sleep(Duration::from_millis(1)).await;
        sent = out.stats().await;
    }
    let breakdown = Breakdown {
        queue: sent.1,
        ..Breakdown::new(&sent.0, &received)
    };
    let messages = per * producers as u64;
    let name = match path {
        SendPath::Queue => format!("p2p-conn (queue, {producers} producers)"),
        SendPath::Lock => format!("p2p-conn (shared lock, {producers} producers)"),
    };
    Ok(Row {
        name,
        bytes: messages * size as u64,
        messages,
        elapsed,
        cpu,
        latency,
        breakdown: Some(breakdown),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checker_takes_any_chunking_and_refuses_reordering() {
        let size = 40;
        let b = base(size);
        let msgs = [
            message(&b, 0, 0, None),
            message(&b, 1, 0, None),
            message(&b, 0, 1, None),
            message(&b, 1, 1, None),
        ];
        // The layout the Go peer writes: byte k = k*7 ^ p ^ seq.
        assert_eq!(msgs[3][20], (20 * 7) as u8 ^ 1 ^ 1);
        let stream: Vec<u8> = msgs.iter().flat_map(|m| m.iter().copied()).collect();
        for cut in [1, 7, 40, 41, 160] {
            let mut c = Checker::new(size, 2, 2);
            for chunk in stream.chunks(cut) {
                c.feed(chunk).unwrap();
            }
            assert!(c.complete(), "cut {cut}");
        }
        // Producer 0's messages swapped: refused.
        let mut bad = Checker::new(size, 2, 2);
        assert!(bad.feed(&msgs[2]).is_err());
        // A flipped payload byte: refused, whole or split.
        let mut m = msgs[0].to_vec();
        m[20] ^= 1;
        assert!(Checker::new(size, 2, 2).feed(&m).is_err());
        let mut split = Checker::new(size, 2, 2);
        split.feed(&m[..10]).unwrap();
        assert!(split.feed(&m[10..]).is_err());
    }
}
