//! Recording, crate-private: the clock readings and counters behind
//! [`super::SendStats`] and [`super::RecvStats`], compiled to nothing
//! without the `stats` feature.

use std::time::Duration;

use super::{RecvStats, SendStats};

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
