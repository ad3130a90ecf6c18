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
//! * Counters live in the connection's own engines (its frame writer
//!   and frame reader): plain integers, no atomics, no
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
//! A clock read is one `rdtsc` on x86_64 with an invariant TSC that the
//! kernel uses as its clocksource (about 10 ns on the issue-#22 machine),
//! else `Instant::now`, a vDSO `clock_gettime` on Linux (about 26 ns
//! there); times are summed in clock ticks and converted to `Duration`
//! when a snapshot is taken, the TSC's rate calibrated once per process
//! against `Instant` (the first snapshot with time in it may sleep up to
//! 1 ms for that; see `docs/profiling.md`). The feature
//! `stats` (on by default) compiles all of it in; without it every counter
//! stays zero, no clock is read, and the `Display` of [`ConnStats`],
//! [`SendStats`] and [`QueueStats`] says the stats are compiled out instead
//! of printing zeros. `docs/profiling.md` has the measured overhead.
//!
//! # Not provided
//! * The codec adapter (`io::codec`) writes and reads through tokio-util's
//!   `Framed`, so its socket calls are not ours to time.
//! * The std adapter's blocking calls wait inside the kernel: a blocking
//!   read that waits for the peer to send counts as read time, and a
//!   blocking write that waits for the peer to read counts as write time,
//!   not as not-ready time. So on a blocking socket `read_to_open` measures
//!   mostly waiting (an idle peer makes it any size) and `Display` labels
//!   it so. Use a non-blocking socket (or tokio) to separate them.
//! * No histograms of the connection's own calls: cumulative counters
//!   only; take two snapshots and subtract ([`ConnStats::since`]) for a
//!   rate. Request/response layers keep their own latencies (privval's
//!   endpoints, per request kind).

use std::fmt;
use std::time::Duration;

pub(crate) mod clock;
#[cfg(feature = "metrics")]
pub mod export;
pub(crate) mod recorder;

pub(crate) use recorder::{now, RecvRecorder, SendRecorder, Stamp, Transfer};

/// True when the crate was built with the `stats` feature: the counters move.
pub const ENABLED: bool = cfg!(feature = "stats");

/// Send-side counters of one connection (or write half).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
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
#[derive(Debug, Clone, Copy, Default, PartialEq)]
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
#[derive(Debug, Clone, Copy, Default)]
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

    /// Read time divided by open time, the receive side's counterpart. On a
    /// blocking socket (std adapter) read time includes waiting for the
    /// peer, so this is not a cost there (see the module's "Not provided").
    pub fn read_to_open(&self) -> Option<f64> {
        ratio(self.recv.read_time, self.recv.open_time)
    }

    /// A snapshot made of one side's counters each (for example a send
    /// queue's [`QueueStats`]`::send` and its read half's
    /// receive side).
    pub fn new(send: SendStats, recv: RecvStats) -> ConnStats {
        ConnStats { send, recv }
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

/// What every `Display` here prints in place of counters when the crate was
/// built without the `stats` feature: zeros would read as measurements.
const COMPILED_OUT: &str = "stats compiled out (build p2p-conn with feature `stats`)";

impl fmt::Display for SendStats {
    /// One line in the words of a profile reading, e.g.
    /// `send: 1 s of sealing needed 1.73 s of socket write (…)`; without the
    /// `stats` feature, `send: stats compiled out (…)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !ENABLED {
            return write!(f, "send: {COMPILED_OUT}");
        }
        match ratio(self.write_time, self.seal_time) {
            Some(x) => write!(f, "send: 1 s of sealing needed {x:.2} s of socket write")?,
            None => write!(f, "send: nothing sealed")?,
        }
        write!(
            f,
            " ({} frames, {} B in {:.3} s sealing; {} writes, {} short, {} B in {:.3} s; \
             socket not ready {} times, {:.3} s)",
            self.frames_sealed,
            self.bytes_sealed,
            self.seal_time.as_secs_f64(),
            self.writes,
            self.short_writes,
            self.bytes_written,
            self.write_time.as_secs_f64(),
            self.not_ready,
            self.not_ready_time.as_secs_f64(),
        )
    }
}

/// The receive side's line of [`ConnStats`]'s `Display`.
fn fmt_recv(r: &RecvStats, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    if !ENABLED {
        return write!(f, "recv: {COMPILED_OUT}");
    }
    match ratio(r.read_time, r.open_time) {
        // A blocking read (std adapter) sleeps in the kernel until the peer
        // sends: its time is waiting, not cost, and the words say so.
        Some(x) => write!(
            f,
            "recv: 1 s of opening needed {x:.2} s of socket read \
             (on a blocking socket, mostly waiting for the peer)"
        )?,
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

impl fmt::Display for ConnStats {
    /// Two lines in the words of a profile reading, e.g.
    /// `send: 1 s of sealing needed 1.73 s of socket write (…)`; without the
    /// `stats` feature, one line saying the stats are compiled out.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !ENABLED {
            return f.write_str(COMPILED_OUT);
        }
        writeln!(f, "{}", self.send)?;
        fmt_recv(&self.recv, f)
    }
}

/// Counters of a send queue (`io::queue::Sender::stats`, feature `queue`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[non_exhaustive]
pub struct QueueStats {
    /// Message bytes queued and not yet sealed (large messages included).
    pub pending_bytes: usize,
    /// Messages queued and not yet wholly sealed.
    pub pending_messages: usize,
    /// Writes of batches made.
    pub batches: u64,
    /// Messages wholly sealed into batches.
    pub messages_sent: u64,
    /// Messages that did not fit under the cap (waited, failed or
    /// disconnected, by the policy).
    pub overflows: u64,
    /// Messages in the largest batch so far.
    pub largest_batch: u64,
    /// Summed over the messages sent: the time each waited in the queue,
    /// from the call that queued it until its batch was sealed (zero
    /// without the `stats` feature).
    pub queue_wait_time: Duration,
    /// The writer's counters ([`crate::stats::SendStats`]: sealing, writes,
    /// not-ready time), as of the last batch written.
    pub send: SendStats,
}

impl QueueStats {
    /// Average time a sent message waited in the queue (zero before the
    /// first).
    pub fn average_queue_wait(&self) -> Duration {
        if self.messages_sent == 0 {
            Duration::ZERO
        } else {
            self.queue_wait_time.div_f64(self.messages_sent as f64)
        }
    }

    /// Average messages per batch written (0 before the first batch).
    pub fn messages_per_batch(&self) -> f64 {
        if self.batches == 0 {
            0.0
        } else {
            self.messages_sent as f64 / self.batches as f64
        }
    }
}

impl fmt::Display for QueueStats {
    /// Two lines: the queue's own counts, e.g. `queue: 1200 messages in 10
    /// batches (120.0 per batch, largest 614), 12µs average wait, 0
    /// overflows, 0 messages (0 B) pending`, then its writer's
    /// [`SendStats`] line. Without the `stats` feature the wait reads "not
    /// measured" and the send line says the stats are compiled out (the
    /// queue's counts are kept either way).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "queue: {} messages in {} batches ({:.1} per batch, largest {}), ",
            self.messages_sent,
            self.batches,
            self.messages_per_batch(),
            self.largest_batch,
        )?;
        if ENABLED {
            write!(f, "{:?} average wait", self.average_queue_wait())?;
        } else {
            write!(f, "wait not measured")?;
        }
        writeln!(
            f,
            ", {} overflows, {} messages ({} B) pending",
            self.overflows, self.pending_messages, self.pending_bytes,
        )?;
        write!(f, "{}", self.send)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(feature = "stats")]
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
        // The read figure is labelled: on a blocking socket it is waiting.
        assert!(
            text.contains(
                "recv: 1 s of opening needed 0.50 s of socket read \
                 (on a blocking socket, mostly waiting for the peer)"
            ),
            "{text}"
        );
        // The send side alone prints its own line, the first of the two.
        assert_eq!(c.send.to_string(), text.lines().next().unwrap());
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

    fn queue_stats() -> QueueStats {
        QueueStats {
            pending_bytes: 300,
            pending_messages: 2,
            batches: 10,
            messages_sent: 1200,
            overflows: 1,
            largest_batch: 614,
            queue_wait_time: Duration::from_millis(12),
            send: SendStats {
                frames_sealed: 3,
                ..SendStats::default()
            },
        }
    }

    #[test]
    #[cfg(feature = "stats")]
    fn queue_display() {
        let q = queue_stats();
        let text = q.to_string();
        let mut lines = text.lines();
        assert_eq!(
            lines.next(),
            Some(
                "queue: 1200 messages in 10 batches (120.0 per batch, largest 614), \
                 10µs average wait, 1 overflows, 2 messages (300 B) pending"
            ),
            "{text}"
        );
        assert_eq!(lines.next(), Some(q.send.to_string().as_str()));
        assert_eq!(lines.next(), None);
    }

    /// Without the feature every timer and engine counter is zero: the text
    /// must say so instead of printing zeros as if they were measured.
    #[test]
    #[cfg(not(feature = "stats"))]
    fn display_says_compiled_out() {
        let out = "stats compiled out (build p2p-conn with feature `stats`)";
        assert_eq!(ConnStats::default().to_string(), out);
        assert_eq!(SendStats::default().to_string(), format!("send: {out}"));
        let text = queue_stats().to_string();
        assert_eq!(
            text,
            format!(
                "queue: 1200 messages in 10 batches (120.0 per batch, largest 614), \
                 wait not measured, 1 overflows, 2 messages (300 B) pending\nsend: {out}"
            ),
        );
    }
}
