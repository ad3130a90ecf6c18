//! What a measured run yields: its [`Row`] (bytes, messages, time, process
//! CPU, latency, our side's breakdown), and the [`Mark`]s it is measured
//! between.

use std::time::{Duration, Instant};

use super::breakdown::Breakdown;

/// One measured run.
pub struct Row {
    pub name: String,
    pub bytes: u64,
    /// Messages, or handshakes for `--handshakes`.
    pub messages: u64,
    pub elapsed: Duration,
    /// Process CPU time (user + sys) over the measured span, where known.
    pub cpu: Option<Cpu>,
    /// Send-to-receive latency, for paced runs (`--rate`).
    pub latency: Option<Latency>,
    /// Our side's per-connection (and send queue) counters; `None` for
    /// baselines, handshakes and the codec adapter.
    pub breakdown: Option<Breakdown>,
}

/// Send-to-receive latency percentiles of a paced run, in microseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Latency {
    pub p50_us: f64,
    pub p99_us: f64,
}

impl Latency {
    /// Percentiles of `samples` (microseconds); `None` when empty.
    pub fn of(samples: &mut [u32]) -> Option<Latency> {
        if samples.is_empty() {
            return None;
        }
        samples.sort_unstable();
        let at = |q: f64| f64::from(samples[((samples.len() - 1) as f64 * q).round() as usize]);
        Some(Latency {
            p50_us: at(0.50),
            p99_us: at(0.99),
        })
    }
}

impl Row {
    pub fn mb_per_s(&self) -> f64 {
        self.bytes as f64 / self.elapsed.as_secs_f64() / 1e6
    }
    pub fn msgs_per_s(&self) -> f64 {
        self.messages as f64 / self.elapsed.as_secs_f64()
    }
    /// CPU seconds (user + sys) per GiB moved.
    pub fn cpu_s_per_gib(&self) -> Option<f64> {
        let gib = self.bytes as f64 / (1u64 << 30) as f64;
        self.cpu.filter(|_| gib > 0.0).map(|c| c.total() / gib)
    }
    /// CPU seconds (user + sys) per message (per handshake for
    /// `--handshakes`).
    pub fn cpu_s_per_message(&self) -> Option<f64> {
        let n = self.messages as f64;
        self.cpu.filter(|_| n > 0.0).map(|c| c.total() / n)
    }
    /// What CPU is compared by: per GiB for transfers, per handshake for
    /// `--handshakes` (no bytes).
    pub fn cpu_cost(&self) -> Option<f64> {
        if self.bytes > 0 {
            self.cpu_s_per_gib()
        } else {
            self.cpu_s_per_message()
        }
    }
}

/// User and system CPU seconds of this process.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Cpu {
    pub user: f64,
    pub sys: f64,
}

impl Cpu {
    /// This process's CPU time so far (all threads), from getrusage.
    #[cfg(unix)]
    fn now() -> Option<Cpu> {
        use nix::sys::resource::{getrusage, UsageWho};
        let ru = getrusage(UsageWho::RUSAGE_SELF).ok()?;
        let secs = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
        Some(Cpu {
            user: secs(ru.user_time()),
            sys: secs(ru.system_time()),
        })
    }

    #[cfg(not(unix))]
    fn now() -> Option<Cpu> {
        None
    }

    pub fn total(self) -> f64 {
        self.user + self.sys
    }

    fn since(self, earlier: Cpu) -> Cpu {
        Cpu {
            user: self.user - earlier.user,
            sys: self.sys - earlier.sys,
        }
    }
}

/// A point in a run: the time and the CPU used so far.
#[derive(Clone, Copy)]
pub struct Mark {
    at: Instant,
    cpu: Option<Cpu>,
}

impl Mark {
    pub fn now() -> Self {
        Mark {
            at: Instant::now(),
            cpu: Cpu::now(),
        }
    }

    /// Whichever of `self` and `other` was taken last (`bench
    /// --connections`: the last receiver's last byte ends the run).
    pub fn later(self, other: Mark) -> Mark {
        if other.at > self.at {
            other
        } else {
            self
        }
    }

    /// Elapsed time and CPU from `start` to `self`.
    pub fn since(self, start: Mark) -> (Duration, Option<Cpu>) {
        let cpu = match (self.cpu, start.cpu) {
            (Some(end), Some(begin)) => Some(end.since(begin)),
            _ => None,
        };
        (self.at.saturating_duration_since(start.at), cpu)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_is_read_and_grows() {
        let start = Mark::now();
        let begin = Instant::now();
        let mut x = 0u64;
        // Busy until the process has used 20 ms of CPU (however loaded the
        // machine is, which decides how much wall time that takes), within
        // 10 s: a CPU reading that never grows fails.
        let cpu = loop {
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
            let (_, cpu) = Mark::now().since(start);
            let cpu = cpu.expect("getrusage works on unix");
            if cpu.total() >= 0.02 || begin.elapsed() > Duration::from_secs(10) {
                break cpu;
            }
        };
        let (elapsed, _) = Mark::now().since(start);
        assert!(cpu.total() >= 0.02, "{cpu:?} after {elapsed:?}");
        assert!(cpu.user >= 0.0 && cpu.sys >= 0.0, "{cpu:?}");
    }
}
