//! Recording, crate-private: the clock readings and counters behind
//! [`super::SendStats`] and [`super::RecvStats`], compiled to nothing
//! without the `stats` feature. Times are summed in clock ticks and
//! converted when a snapshot is taken ([`super::clock`]).

#[cfg(feature = "stats")]
use super::clock::{between, Since, Ticks};
pub(crate) use super::clock::{now, Stamp};
use super::{RecvStats, SendStats};

/// The send side's recorder, owned by a [`crate::engine::FrameWriter`].
#[derive(Debug, Default, Clone)]
pub(crate) struct SendRecorder {
    #[cfg(feature = "stats")]
    stats: SendCounts,
    #[cfg(feature = "stats")]
    seal: Ticks,
    #[cfg(feature = "stats")]
    write: Ticks,
    #[cfg(feature = "stats")]
    wait: Wait,
}

#[allow(unused_variables)]
impl SendRecorder {
    /// The counters, times converted from ticks (the first conversion in
    /// a process may wait for the clock's calibration, see
    /// [`super::clock`]).
    pub(crate) fn snapshot(&self) -> SendStats {
        #[cfg(feature = "stats")]
        {
            SendStats {
                seal_time: self.seal.to_duration(),
                write_time: self.write.to_duration(),
                not_ready_time: self.wait.total.to_duration(),
                ..self.counts()
            }
        }
        #[cfg(not(feature = "stats"))]
        {
            SendStats::default()
        }
    }

    /// The counts alone, times left zero: converts nothing, so never waits
    /// (for a close event).
    #[cfg_attr(not(any(feature = "stats", feature = "tracing")), allow(dead_code))]
    pub(crate) fn counts(&self) -> SendStats {
        #[cfg(feature = "stats")]
        {
            let s = &self.stats;
            SendStats {
                seals: s.seals,
                frames_sealed: s.frames_sealed,
                bytes_sealed: s.bytes_sealed,
                writes: s.writes,
                bytes_written: s.bytes_written,
                short_writes: s.short_writes,
                not_ready: s.not_ready,
                ..SendStats::default()
            }
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
            self.seal += between(start, end);
        }
    }

    /// A write attempt starts at `start`: ends a not-ready wait.
    #[inline]
    pub(crate) fn attempt(&mut self, start: Stamp) {
        #[cfg(feature = "stats")]
        self.wait.end(start);
    }

    /// A write call that started at `start` and took `n` of `offered`
    /// bytes or failed; reads the clock once and returns that reading (the
    /// start of whatever comes next).
    #[inline]
    pub(crate) fn wrote(&mut self, start: Stamp, result: Transfer) -> Stamp {
        let end = now();
        #[cfg(feature = "stats")]
        {
            self.write += between(start, end);
            let s = &mut self.stats;
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

/// The counts of [`SendStats`], without its times (summed in ticks apart:
/// smaller than a `SendStats`, and converted only by a snapshot).
#[cfg(feature = "stats")]
#[derive(Debug, Default, Clone)]
struct SendCounts {
    seals: u64,
    frames_sealed: u64,
    bytes_sealed: u64,
    writes: u64,
    bytes_written: u64,
    short_writes: u64,
    not_ready: u64,
}

/// The counts of [`RecvStats`], without its times.
#[cfg(feature = "stats")]
#[derive(Debug, Default, Clone)]
struct RecvCounts {
    opens: u64,
    frames_opened: u64,
    bytes_opened: u64,
    reads: u64,
    bytes_read: u64,
    not_ready: u64,
}

/// The not-ready bookkeeping of both recorders: a call that found the
/// transport not ready starts a wait at its own start (it returns at once,
/// so it is not worth a clock reading of its own); the next attempt ends it.
#[cfg(feature = "stats")]
#[derive(Debug, Default, Clone)]
struct Wait {
    since: Since,
    /// Summed waits.
    total: Ticks,
}

#[cfg(feature = "stats")]
impl Wait {
    #[inline]
    fn begin(&mut self, start: Stamp, count: &mut u64) {
        *count += 1;
        self.since.set(start);
    }

    #[inline]
    fn end(&mut self, start: Stamp) {
        if let Some(since) = self.since.take() {
            self.total += between(since, start);
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
    stats: RecvCounts,
    #[cfg(feature = "stats")]
    open: Ticks,
    #[cfg(feature = "stats")]
    read: Ticks,
    #[cfg(feature = "stats")]
    wait: Wait,
}

#[allow(unused_variables)]
impl RecvRecorder {
    /// The counters, times converted from ticks (see
    /// [`SendRecorder::snapshot`]).
    pub(crate) fn snapshot(&self) -> RecvStats {
        #[cfg(feature = "stats")]
        {
            RecvStats {
                open_time: self.open.to_duration(),
                read_time: self.read.to_duration(),
                not_ready_time: self.wait.total.to_duration(),
                ..self.counts()
            }
        }
        #[cfg(not(feature = "stats"))]
        {
            RecvStats::default()
        }
    }

    /// The counts alone, times left zero (see [`SendRecorder::counts`]).
    #[cfg_attr(not(any(feature = "stats", feature = "tracing")), allow(dead_code))]
    pub(crate) fn counts(&self) -> RecvStats {
        #[cfg(feature = "stats")]
        {
            let s = &self.stats;
            RecvStats {
                opens: s.opens,
                frames_opened: s.frames_opened,
                bytes_opened: s.bytes_opened,
                reads: s.reads,
                bytes_read: s.bytes_read,
                not_ready: s.not_ready,
                ..RecvStats::default()
            }
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
            self.open += between(start, end);
        }
    }

    /// A read attempt starts at `start`: ends a not-ready wait.
    #[inline]
    pub(crate) fn attempt(&mut self, start: Stamp) {
        #[cfg(feature = "stats")]
        self.wait.end(start);
    }

    /// A read call that started at `start` and returned bytes (0: end of
    /// stream) or an error; reads the clock once and returns that reading.
    #[inline]
    pub(crate) fn read(&mut self, start: Stamp, result: Transfer) -> Stamp {
        let end = now();
        #[cfg(feature = "stats")]
        {
            self.read += between(start, end);
            let s = &mut self.stats;
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
