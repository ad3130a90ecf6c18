//! Per-connection statistics: is this connection's cost in the cipher or in
//! the syscalls?
//!
//! Every connection of the tokio and std adapters (and each of its halves)
//! counts, on the send side, the sealing work and the socket writes, and on
//! the receive side the socket reads and the opening work, with the time
//! spent in each. [`crate::io::SecretStream::stats`] returns a snapshot
//! ([`ConnStats`]); [`ConnStats::write_to_seal`] is the ratio field
//! engineers read off a profile ("1 s of sealing needed 1.73 s of socket
//! write"), and `Display` prints it in those words.
//!
//! # Design
//! * Counters live in the connection's own engines ([`crate::engine::FrameWriter`]
//!   and [`crate::engine::FrameReader`]): plain integers, no atomics, no
//!   locks, since each engine has one owner.
//! * Time is taken per message or per batch, never per frame: one clock read
//!   around each seal step (a message, or a batch of queued messages), each
//!   transport write, each transport read, and each open step (every whole
//!   frame a read brought in, opened at once). So a 64 KiB message costs
//!   three clock reads, whatever its frame count.
//! * A write the transport could not take (`Pending`: the socket's buffer is
//!   full) is counted apart, with the time from then until the next attempt
//!   ([`SendStats::not_ready_time`]): that is the peer or the network being
//!   slow, not the cost of the syscall. The same on the receive side is the
//!   time spent waiting for the peer ([`RecvStats::not_ready_time`]), which
//!   for an idle connection is most of its life.
//!
//! # Cost
//! A clock read is a vDSO `clock_gettime` (about 20 ns here). The feature
//! `stats` (on by default) compiles all of it in; without it every counter
//! stays zero and no clock is read. `docs/profiling.md` has the measured
//! overhead.
//!
//! # Not provided
//! * The codec adapter (`io::codec`) writes and reads through tokio-util's
//!   `Framed`, so its socket calls are not ours to time.
//! * The std adapter's blocking calls wait inside the kernel: a blocking
//!   write that waits for the peer counts as write time there, not as
//!   not-ready time. Use a non-blocking socket (or tokio) to separate them.
//! * No histograms: cumulative counters only; take two snapshots and
//!   subtract ([`ConnStats::since`]) for a rate.

use std::fmt;
use std::time::Duration;

/// True when the crate was built with the `stats` feature: the counters move.
pub const ENABLED: bool = cfg!(feature = "stats");

/// Send-side counters of one connection (or write half).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SendStats {
    /// Seal steps: one per message written, or per batch of queued messages.
    pub seals: u64,
    /// Frames sealed.
    pub frames_sealed: u64,
    /// Plaintext bytes sealed.
    pub bytes_sealed: u64,
    /// Time spent sealing.
    pub seal_time: Duration,
    /// Transport write calls that returned bytes or an error.
    pub writes: u64,
    /// Sealed bytes the transport took.
    pub bytes_written: u64,
    /// Time spent in those write calls.
    pub write_time: Duration,
    /// Writes that took fewer bytes than offered.
    pub short_writes: u64,
    /// Write calls that found the transport not ready (`Pending`).
    pub not_ready: u64,
    /// Time from a not-ready write until the next write attempt: the socket
    /// buffer was full (a slow peer or network).
    pub not_ready_time: Duration,
}

/// Receive-side counters of one connection (or read half).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecvStats {
    /// Open steps: one per batch of whole frames a read brought in.
    pub opens: u64,
    /// Frames opened (including empty ones).
    pub frames_opened: u64,
    /// Plaintext bytes opened.
    pub bytes_opened: u64,
    /// Time spent opening.
    pub open_time: Duration,
    /// Transport read calls that returned bytes, end of stream or an error.
    pub reads: u64,
    /// Sealed bytes read.
    pub bytes_read: u64,
    /// Time spent in those read calls.
    pub read_time: Duration,
    /// Read calls that found nothing to read (`Pending`).
    pub not_ready: u64,
    /// Time from a read that found nothing until the next read attempt:
    /// waiting for the peer.
    pub not_ready_time: Duration,
}

/// A snapshot of one connection's counters. A half reports its own side;
/// the other side is all zeros.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnStats {
    /// The send side.
    pub send: SendStats,
    /// The receive side.
    pub recv: RecvStats,
}

fn ratio(a: Duration, b: Duration) -> Option<f64> {
    (!b.is_zero()).then(|| a.as_secs_f64() / b.as_secs_f64())
}

impl ConnStats {
    /// Write time divided by seal time: how many seconds of socket write each
    /// second of sealing needed. `None` before anything was sealed (or
    /// without the `stats` feature).
    pub fn write_to_seal(&self) -> Option<f64> {
        ratio(self.send.write_time, self.send.seal_time)
    }

    /// Read time divided by open time, the receive side's counterpart.
    pub fn read_to_open(&self) -> Option<f64> {
        ratio(self.recv.read_time, self.recv.open_time)
    }

    /// A snapshot made of one side's counters each (for example a send
    /// queue's [`crate::io::queue::QueueStats`]`::send` and its read half's
    /// receive side).
    pub fn new(send: SendStats, recv: RecvStats) -> ConnStats {
        ConnStats { send, recv }
    }

    /// Both sides of a connection whose halves were counted apart.
    pub fn merge(send: &ConnStats, recv: &ConnStats) -> ConnStats {
        ConnStats {
            send: send.send,
            recv: recv.recv,
        }
    }

    /// What happened between `earlier` (a snapshot of the same connection)
    /// and `self`.
    pub fn since(&self, earlier: &ConnStats) -> ConnStats {
        ConnStats {
            send: self
                .send
                .zip(&earlier.send, u64::saturating_sub, Duration::saturating_sub),
            recv: self
                .recv
                .zip(&earlier.recv, u64::saturating_sub, Duration::saturating_sub),
        }
    }
}

/// Field-by-field arithmetic on a counters struct, written once per struct
/// (its field list) for `since` and `+=`.
macro_rules! fieldwise {
    ($t:ident { counts: $($c:ident),+; times: $($d:ident),+ }) => {
        impl $t {
            fn zip(
                &self,
                other: &$t,
                count: impl Fn(u64, u64) -> u64,
                time: impl Fn(Duration, Duration) -> Duration,
            ) -> $t {
                $t {
                    $($c: count(self.$c, other.$c),)+
                    $($d: time(self.$d, other.$d),)+
                }
            }
        }

        /// Sum of the counters (of several connections or runs).
        impl std::ops::AddAssign<&$t> for $t {
            fn add_assign(&mut self, other: &$t) {
                *self = self.zip(other, |a, b| a + b, |a, b| a + b);
            }
        }
    };
}

fieldwise!(SendStats {
    counts: seals, frames_sealed, bytes_sealed, writes, bytes_written, short_writes, not_ready;
    times: seal_time, write_time, not_ready_time
});
fieldwise!(RecvStats {
    counts: opens, frames_opened, bytes_opened, reads, bytes_read, not_ready;
    times: open_time, read_time, not_ready_time
});

/// Sum of both sides' counters.
impl std::ops::AddAssign<&ConnStats> for ConnStats {
    fn add_assign(&mut self, other: &ConnStats) {
        self.send += &other.send;
        self.recv += &other.recv;
    }
}

impl fmt::Display for ConnStats {
    /// Two lines in the words of a profile reading, e.g.
    /// `send: 1 s of sealing needed 1.73 s of socket write (…)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (s, r) = (&self.send, &self.recv);
        match self.write_to_seal() {
            Some(x) => write!(f, "send: 1 s of sealing needed {x:.2} s of socket write")?,
            None => write!(f, "send: nothing sealed")?,
        }
        writeln!(
            f,
            " ({} frames, {} B in {:.3} s sealing; {} writes, {} short, {} B in {:.3} s; \
             socket not ready {} times, {:.3} s)",
            s.frames_sealed,
            s.bytes_sealed,
            s.seal_time.as_secs_f64(),
            s.writes,
            s.short_writes,
            s.bytes_written,
            s.write_time.as_secs_f64(),
            s.not_ready,
            s.not_ready_time.as_secs_f64(),
        )?;
        match self.read_to_open() {
            Some(x) => write!(f, "recv: 1 s of opening needed {x:.2} s of socket read")?,
            None => write!(f, "recv: nothing opened")?,
        }
        write!(
            f,
            " ({} frames, {} B in {:.3} s opening; {} reads, {} B in {:.3} s; \
             waited for the peer {} times, {:.3} s)",
            r.frames_opened,
            r.bytes_opened,
            r.open_time.as_secs_f64(),
            r.reads,
            r.bytes_read,
            r.read_time.as_secs_f64(),
            r.not_ready,
            r.not_ready_time.as_secs_f64(),
        )
    }
}

// ---------------------------------------------------------------------------
// Recording (crate-private): compiled to nothing without the feature.

/// A clock reading; `()` without the `stats` feature.
#[cfg(feature = "stats")]
pub(crate) type Stamp = std::time::Instant;
/// A clock reading; nothing without the `stats` feature.
#[cfg(not(feature = "stats"))]
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stamp;

/// Read the clock (nothing without the `stats` feature).
#[inline(always)]
pub(crate) fn now() -> Stamp {
    #[cfg(feature = "stats")]
    {
        std::time::Instant::now()
    }
    #[cfg(not(feature = "stats"))]
    {
        Stamp
    }
}

/// Time from `a` to `b` (zero without the `stats` feature).
#[inline(always)]
#[allow(unused_variables, dead_code)]
pub(crate) fn between(a: Stamp, b: Stamp) -> Duration {
    #[cfg(feature = "stats")]
    {
        b.saturating_duration_since(a)
    }
    #[cfg(not(feature = "stats"))]
    {
        Duration::ZERO
    }
}

/// The send side's recorder, owned by a [`crate::engine::FrameWriter`].
#[derive(Debug, Default, Clone)]
pub(crate) struct SendRecorder {
    #[cfg(feature = "stats")]
    stats: SendStats,
    #[cfg(feature = "stats")]
    wait: Wait,
}

#[allow(unused_variables)]
impl SendRecorder {
    pub(crate) fn snapshot(&self) -> SendStats {
        #[cfg(feature = "stats")]
        {
            self.stats
        }
        #[cfg(not(feature = "stats"))]
        {
            SendStats::default()
        }
    }

    /// One seal step from `start` to `end`.
    #[inline]
    pub(crate) fn sealed(&mut self, start: Stamp, end: Stamp, frames: usize, bytes: usize) {
        #[cfg(feature = "stats")]
        {
            let s = &mut self.stats;
            s.seals += 1;
            s.frames_sealed += frames as u64;
            s.bytes_sealed += bytes as u64;
            s.seal_time += between(start, end);
        }
    }

    /// A write attempt starts at `start`: ends a not-ready wait.
    #[inline]
    pub(crate) fn attempt(&mut self, start: Stamp) {
        #[cfg(feature = "stats")]
        self.wait.end(start, &mut self.stats.not_ready_time);
    }

    /// A write call that started at `start` and took `n` of `offered`
    /// bytes or failed; reads the clock once and returns that reading (the
    /// start of whatever comes next).
    #[inline]
    pub(crate) fn wrote(&mut self, start: Stamp, result: Transfer) -> Stamp {
        let end = now();
        #[cfg(feature = "stats")]
        {
            let s = &mut self.stats;
            s.write_time += between(start, end);
            s.writes += 1;
            if let Transfer::Bytes { n, offered } = result {
                s.bytes_written += n as u64;
                s.short_writes += u64::from(n < offered);
            }
        }
        end
    }

    /// A write call that started at `start` found the transport not ready:
    /// the wait starts there (such a call returns at once, so its own time
    /// is not worth a clock reading).
    #[inline]
    pub(crate) fn not_ready(&mut self, start: Stamp) {
        #[cfg(feature = "stats")]
        self.wait.begin(start, &mut self.stats.not_ready);
    }
}

/// The not-ready bookkeeping of both recorders: a call that found the
/// transport not ready starts a wait at its own start (it returns at once,
/// so it is not worth a clock reading of its own); the next attempt ends it.
#[cfg(feature = "stats")]
#[derive(Debug, Default, Clone)]
struct Wait {
    since: Option<Stamp>,
}

#[cfg(feature = "stats")]
impl Wait {
    #[inline]
    fn begin(&mut self, start: Stamp, count: &mut u64) {
        *count += 1;
        self.since = Some(start);
    }

    #[inline]
    fn end(&mut self, start: Stamp, total: &mut Duration) {
        if let Some(since) = self.since.take() {
            *total += between(since, start);
        }
    }
}

/// What a completed transport call did, for the recorders.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(not(feature = "stats"), allow(dead_code))]
pub(crate) enum Transfer {
    /// Moved `n` bytes (of `offered` for a write); 0 on a read is the end
    /// of the stream.
    Bytes { n: usize, offered: usize },
    /// Returned an error.
    Failed,
}

/// The receive side's recorder, owned by a [`crate::engine::FrameReader`].
#[derive(Debug, Default, Clone)]
pub(crate) struct RecvRecorder {
    #[cfg(feature = "stats")]
    stats: RecvStats,
    #[cfg(feature = "stats")]
    wait: Wait,
}

#[allow(unused_variables)]
impl RecvRecorder {
    pub(crate) fn snapshot(&self) -> RecvStats {
        #[cfg(feature = "stats")]
        {
            self.stats
        }
        #[cfg(not(feature = "stats"))]
        {
            RecvStats::default()
        }
    }

    /// One open step from `start` to now.
    #[inline]
    pub(crate) fn opened(&mut self, start: Stamp, frames: usize, bytes: usize) {
        let end = now();
        #[cfg(feature = "stats")]
        {
            let s = &mut self.stats;
            s.opens += 1;
            s.frames_opened += frames as u64;
            s.bytes_opened += bytes as u64;
            s.open_time += between(start, end);
        }
    }

    /// A read attempt starts at `start`: ends a not-ready wait.
    #[inline]
    pub(crate) fn attempt(&mut self, start: Stamp) {
        #[cfg(feature = "stats")]
        self.wait.end(start, &mut self.stats.not_ready_time);
    }

    /// A read call that started at `start` and returned bytes (0: end of
    /// stream) or an error; reads the clock once and returns that reading.
    #[inline]
    pub(crate) fn read(&mut self, start: Stamp, result: Transfer) -> Stamp {
        let end = now();
        #[cfg(feature = "stats")]
        {
            let s = &mut self.stats;
            s.read_time += between(start, end);
            s.reads += 1;
            if let Transfer::Bytes { n, .. } = result {
                s.bytes_read += n as u64;
            }
        }
        end
    }

    /// A read call that started at `start` found nothing to read.
    #[inline]
    pub(crate) fn not_ready(&mut self, start: Stamp) {
        #[cfg(feature = "stats")]
        self.wait.begin(start, &mut self.stats.not_ready);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_and_display() {
        let mut c = ConnStats::default();
        assert_eq!(c.write_to_seal(), None);
        assert!(c.to_string().starts_with("send: nothing sealed"));
        c.send.seal_time = Duration::from_millis(100);
        c.send.write_time = Duration::from_millis(173);
        c.recv.open_time = Duration::from_millis(50);
        c.recv.read_time = Duration::from_millis(25);
        assert!((c.write_to_seal().unwrap() - 1.73).abs() < 1e-9);
        assert!((c.read_to_open().unwrap() - 0.5).abs() < 1e-9);
        let text = c.to_string();
        assert!(
            text.starts_with("send: 1 s of sealing needed 1.73 s of socket write"),
            "{text}"
        );
        assert!(text.contains("recv: 1 s of opening needed 0.50 s of socket read"));
        let later = ConnStats {
            send: SendStats {
                seal_time: Duration::from_millis(300),
                writes: 4,
                ..c.send
            },
            ..c
        };
        let mut sum = c;
        sum += &c;
        assert_eq!(sum.send.seal_time, 2 * c.send.seal_time);
        assert_eq!(sum.recv.read_time, 2 * c.recv.read_time);
        let d = later.since(&c);
        assert_eq!(d.send.seal_time, Duration::from_millis(200));
        assert_eq!(d.send.writes, 4);
        assert_eq!(d.recv, RecvStats::default());
    }
}

// ---------------------------------------------------------------------------
// Export through the `metrics` facade (feature `metrics`).

/// Publish [`ConnStats`] (and the send queue's figures) through the
/// [`metrics`](https://docs.rs/metrics) facade, to whatever exporter the
/// node installed (Prometheus, StatsD, …). Feature `metrics`.
///
/// # Why `metrics`
/// It is a facade: the library names its series and the node picks the
/// exporter and its settings (including when idle series expire), with no
/// registry handle threaded through p2p-conn. `prometheus-client` would tie
/// every embedder to one format and make the node pass its `Registry` in.
///
/// # Series
/// Call [`record`] for a connection whenever you want its series current
/// (every few seconds, and once at close). Values are the cumulative
/// counters, set absolutely, so calling more often costs only the call.
/// Labels: `peer` (node ID) and `direction` (`send`, `recv`).
///
/// | name | what |
/// |---|---|
/// | `p2p_conn_frames_total` | frames sealed / opened |
/// | `p2p_conn_bytes_total` | plaintext bytes sealed / opened |
/// | `p2p_conn_wire_bytes_total` | sealed bytes written / read |
/// | `p2p_conn_io_calls_total` | write / read calls |
/// | `p2p_conn_crypto_microseconds_total` | time sealing / opening |
/// | `p2p_conn_io_microseconds_total` | time in write / read calls |
/// | `p2p_conn_not_ready_microseconds_total` | socket full (send) / waiting for the peer (recv) |
/// | `p2p_conn_short_writes_total` | short writes (send only) |
///
/// [`record_queue`] adds, labelled by `peer` only: the gauges
/// `p2p_conn_queue_pending_bytes` and `p2p_conn_queue_pending_messages`,
/// and the counters `p2p_conn_queue_messages_total`,
/// `p2p_conn_queue_batches_total`, `p2p_conn_queue_overflows_total` and
/// `p2p_conn_queue_wait_microseconds_total`.
///
/// Times are integer microseconds because the facade's counters are
/// integers. Cardinality: 15 connection series (7 names × 2 directions +
/// short writes) and 6 queue series per peer, so a node with 300 peers
/// exports about 6,300 series. Peers come and go: configure the exporter to
/// drop idle series (for `metrics-exporter-prometheus`, `idle_timeout`), or
/// the set grows with every peer ever seen.
#[cfg(feature = "metrics")]
pub mod export {
    use super::ConnStats;
    use crate::NodeId;
    use metrics::{counter, describe_counter, describe_gauge, Unit};

    /// Describe every series (units and help text) to the installed
    /// recorder. Call once after installing it; optional.
    pub fn describe() {
        describe_counter!(
            "p2p_conn_frames_total",
            Unit::Count,
            "Frames sealed (send) or opened (recv)"
        );
        describe_counter!(
            "p2p_conn_bytes_total",
            Unit::Bytes,
            "Plaintext bytes sealed (send) or opened (recv)"
        );
        describe_counter!(
            "p2p_conn_wire_bytes_total",
            Unit::Bytes,
            "Sealed bytes written (send) or read (recv)"
        );
        describe_counter!(
            "p2p_conn_io_calls_total",
            Unit::Count,
            "Socket write (send) or read (recv) calls"
        );
        describe_counter!(
            "p2p_conn_crypto_microseconds_total",
            Unit::Microseconds,
            "Time spent sealing (send) or opening (recv)"
        );
        describe_counter!(
            "p2p_conn_io_microseconds_total",
            Unit::Microseconds,
            "Time spent in socket writes (send) or reads (recv)"
        );
        describe_counter!(
            "p2p_conn_not_ready_microseconds_total",
            Unit::Microseconds,
            "Time the socket was full (send) or the peer sent nothing (recv)"
        );
        describe_counter!(
            "p2p_conn_short_writes_total",
            Unit::Count,
            "Writes that took fewer bytes than offered"
        );
        describe_gauge!(
            "p2p_conn_queue_pending_bytes",
            Unit::Bytes,
            "Bytes queued and not yet sealed"
        );
        describe_gauge!(
            "p2p_conn_queue_pending_messages",
            Unit::Count,
            "Messages queued and not yet sealed"
        );
        describe_counter!(
            "p2p_conn_queue_messages_total",
            Unit::Count,
            "Messages sent through the queue"
        );
        describe_counter!(
            "p2p_conn_queue_batches_total",
            Unit::Count,
            "Batches written by the queue"
        );
        describe_counter!(
            "p2p_conn_queue_overflows_total",
            Unit::Count,
            "Messages that found the queue full"
        );
        describe_counter!(
            "p2p_conn_queue_wait_microseconds_total",
            Unit::Microseconds,
            "Summed time messages waited in the queue"
        );
    }

    fn us(d: std::time::Duration) -> u64 {
        d.as_micros().try_into().unwrap_or(u64::MAX)
    }

    /// Publish one connection's counters (see the module docs).
    pub fn record(peer: &NodeId, stats: &ConnStats) {
        let peer = peer.to_string();
        let (s, r) = (&stats.send, &stats.recv);
        for (dir, frames, bytes, wire, calls, crypto, io, not_ready) in [
            (
                "send",
                s.frames_sealed,
                s.bytes_sealed,
                s.bytes_written,
                s.writes,
                s.seal_time,
                s.write_time,
                s.not_ready_time,
            ),
            (
                "recv",
                r.frames_opened,
                r.bytes_opened,
                r.bytes_read,
                r.reads,
                r.open_time,
                r.read_time,
                r.not_ready_time,
            ),
        ] {
            let labels = [("peer", peer.clone()), ("direction", dir.to_string())];
            counter!("p2p_conn_frames_total", &labels).absolute(frames);
            counter!("p2p_conn_bytes_total", &labels).absolute(bytes);
            counter!("p2p_conn_wire_bytes_total", &labels).absolute(wire);
            counter!("p2p_conn_io_calls_total", &labels).absolute(calls);
            counter!("p2p_conn_crypto_microseconds_total", &labels).absolute(us(crypto));
            counter!("p2p_conn_io_microseconds_total", &labels).absolute(us(io));
            counter!("p2p_conn_not_ready_microseconds_total", &labels).absolute(us(not_ready));
        }
        counter!("p2p_conn_short_writes_total", "peer" => peer, "direction" => "send")
            .absolute(s.short_writes);
    }

    /// Publish a send queue's figures (see the module docs).
    #[cfg(feature = "queue")]
    pub fn record_queue(peer: &NodeId, q: &crate::io::queue::QueueStats) {
        use metrics::gauge;
        let labels = [("peer", peer.to_string())];
        gauge!("p2p_conn_queue_pending_bytes", &labels).set(q.pending_bytes as f64);
        gauge!("p2p_conn_queue_pending_messages", &labels).set(q.pending_messages as f64);
        counter!("p2p_conn_queue_messages_total", &labels).absolute(q.messages_sent);
        counter!("p2p_conn_queue_batches_total", &labels).absolute(q.batches);
        counter!("p2p_conn_queue_overflows_total", &labels).absolute(q.overflows);
        counter!("p2p_conn_queue_wait_microseconds_total", &labels).absolute(us(q.queue_wait_time));
    }
}
