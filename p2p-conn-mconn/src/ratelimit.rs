//! A token bucket standing in for CometBFT's `flowrate` monitors.
//!
//! Go's `flowrate.Monitor.Limit(maxPacketMsgSize, rate, true)` sleeps
//! before each send batch and each packet read until the monitor's
//! exponentially averaged rate (sampled every 100 ms) is under `rate`, then
//! lets a whole batch (up to 10 packets) or packet through. This bucket
//! refills at `rate` bytes per second up to a burst of 100 ms of `rate` (at
//! least one full packet), and lets a packet through when the bucket holds
//! its size (send) or a full packet's worth (receive). The long-run rate
//! is the same; the short bursts differ (no averaging window, no
//! overshoot by a batch).

use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub(super) struct Bucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl Bucket {
    pub(super) fn new(rate: u64, min_burst: usize, now: Instant) -> Bucket {
        let rate = rate as f64;
        let burst = (rate / 10.0).max(min_burst as f64);
        Bucket {
            rate,
            burst,
            tokens: burst,
            last: now,
        }
    }

    fn refill(&mut self, now: Instant) {
        if now > self.last {
            let dt = (now - self.last).as_secs_f64();
            self.tokens = (self.tokens + dt * self.rate).min(self.burst);
            self.last = now;
        }
    }

    /// Whether `need` bytes may go now.
    pub(super) fn allows(&mut self, need: usize, now: Instant) -> bool {
        self.refill(now);
        self.tokens >= (need as f64).min(self.burst)
    }

    /// Charge `n` bytes (the balance may go below zero: pings and pongs are
    /// never held back, and a read packet is charged after it is read).
    pub(super) fn take(&mut self, n: usize) {
        self.tokens -= n as f64;
    }

    /// When `need` bytes will be allowed.
    pub(super) fn ready_at(&self, need: usize) -> Instant {
        let missing = (need as f64).min(self.burst) - self.tokens;
        if missing <= 0.0 {
            return self.last;
        }
        // Round up to a whole microsecond so the wake-up is never early.
        let micros = (missing / self.rate * 1e6).ceil() as u64 + 1;
        self.last + Duration::from_micros(micros)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refills_at_rate() {
        let t0 = Instant::now();
        let mut b = Bucket::new(10_000, 1036, t0);
        assert!(b.allows(1036, t0));
        b.take(1036);
        assert!(!b.allows(1036, t0));
        let at = b.ready_at(1036);
        assert!(at > t0 && at <= t0 + Duration::from_millis(105));
        assert!(b.allows(1036, at));
    }
}
