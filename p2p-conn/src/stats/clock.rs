//! The stats clock, crate-private: what a [`Stamp`] is and how a sum of
//! [`Ticks`] becomes a [`Duration`].
//!
//! # Design
//! * On x86_64 with an invariant TSC (CPUID leaf `0x8000_0007`, EDX bit 8:
//!   the counter runs at one rate whatever the core's frequency or sleep
//!   state) that the kernel also trusts (on Linux, `tsc` is the current
//!   clocksource, so the counters of all cores agree), a reading is one
//!   `rdtsc`: about 10 ns here against 26 ns for `Instant::now` (a vDSO
//!   `clock_gettime`), and the stats read the clock about three times per
//!   small message (`docs/performance.md`, issue #22). Anywhere else a
//!   reading is `Instant::now`, as nanoseconds since the clock's origin.
//!   Which one is decided once, at the first reading, and kept.
//! * Time is summed in ticks (integers) and turned into a `Duration` only
//!   when a snapshot is taken. The TSC's rate is calibrated against
//!   `Instant` once per process: a (TSC, `Instant`) pair is taken at the
//!   first reading, another at the first conversion of a non-zero sum (at
//!   least [`CALIBRATION`] later: the first conversion sleeps for the rest
//!   if it comes sooner). The rate is then fixed, so later snapshots of one
//!   connection never go backwards.
//!
//! # Guarantees and limits
//! * Without the TSC, the figures are exactly `Instant`'s.
//! * With it, a conversion is off by the calibration's error: each pair
//!   brackets its `Instant` reading between two TSC readings (best of a few
//!   tries), so each is uncertain by tens of nanoseconds, against a span of
//!   at least 1 ms: about 1e-4 (unless all tries of a pair were
//!   preempted), far under what the stats are read for.
//! * The counters of all cores must agree, since a stamp taken on one core
//!   may be subtracted from one taken on another (the send queue stamps a
//!   message in the producer's thread and its batch in the writer's):
//!   that is what the kernel's choice of `tsc` as clocksource vouches for.
//!   A difference that comes out negative counts as zero.
//! * The wait for calibration happens in whichever thread first converts
//!   a non-zero sum (a snapshot: `stats()`, a metrics export); the close
//!   events of `tracing` take counts only and never wait. `rdtsc` is not a serializing instruction: a reading may move
//!   by a few dozen cycles against the code around it.
//! * Not provided: a clock for anything but the stats' own sums (these
//!   stamps are not comparable with `Instant` or across processes).

// Without `stats` (and the send queue), parts of it go unused.
#![cfg_attr(not(feature = "stats"), allow(dead_code))]

use std::time::Duration;

/// A clock reading; nothing without the `stats` feature.
#[cfg(feature = "stats")]
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stamp(u64);
/// A clock reading; nothing without the `stats` feature.
#[cfg(not(feature = "stats"))]
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stamp;

/// A reading or none, in 8 bytes where `Option<Stamp>` takes 16 (two of
/// these sit in every connection): no reading is `u64::MAX` (TSC ticks or
/// nanoseconds since the origin would take centuries to get there).
#[cfg(feature = "stats")]
#[derive(Debug, Clone, Copy)]
pub(crate) struct Since(u64);

#[cfg(feature = "stats")]
impl Default for Since {
    fn default() -> Self {
        Since(u64::MAX)
    }
}

#[cfg(feature = "stats")]
impl Since {
    #[inline(always)]
    pub(crate) fn set(&mut self, at: Stamp) {
        self.0 = at.0;
    }

    /// The reading, if one was set, leaving none.
    #[inline(always)]
    pub(crate) fn take(&mut self) -> Option<Stamp> {
        let v = std::mem::replace(&mut self.0, u64::MAX);
        (v != u64::MAX).then_some(Stamp(v))
    }
}

/// A sum of time in clock ticks (always zero without the `stats` feature);
/// [`Ticks::to_duration`] converts it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Ticks(u64);

impl Ticks {
    /// The time these ticks stand for (zero without the `stats` feature).
    /// The first conversion of a non-zero sum in a process may calibrate
    /// the TSC (see the module docs: it may sleep up to [`CALIBRATION`]).
    pub(crate) fn to_duration(self) -> Duration {
        #[cfg(feature = "stats")]
        {
            imp::to_duration(self.0)
        }
        #[cfg(not(feature = "stats"))]
        {
            Duration::ZERO
        }
    }
}

impl std::ops::AddAssign for Ticks {
    #[inline(always)]
    fn add_assign(&mut self, other: Ticks) {
        self.0 = self.0.saturating_add(other.0);
    }
}

/// The shortest span the TSC's rate is calibrated over.
pub(crate) const CALIBRATION: Duration = Duration::from_millis(1);

/// Read the clock (nothing without the `stats` feature).
#[inline(always)]
pub(crate) fn now() -> Stamp {
    #[cfg(feature = "stats")]
    {
        Stamp(imp::read())
    }
    #[cfg(not(feature = "stats"))]
    {
        Stamp
    }
}

/// Ticks from `a` to `b` (zero if `b` is not later; always zero without
/// the `stats` feature).
#[inline(always)]
#[allow(unused_variables)]
pub(crate) fn between(a: Stamp, b: Stamp) -> Ticks {
    #[cfg(feature = "stats")]
    {
        Ticks(b.0.saturating_sub(a.0))
    }
    #[cfg(not(feature = "stats"))]
    {
        Ticks(0)
    }
}

/// True when readings come from the TSC (for tests and docs).
#[cfg(all(test, feature = "stats"))]
pub(crate) fn uses_tsc() -> bool {
    imp::clock().tsc.is_some()
}

#[cfg(feature = "stats")]
mod imp {
    use std::sync::OnceLock;
    use std::time::{Duration, Instant};

    pub(super) struct Clock {
        /// Readings without the TSC are nanoseconds since this instant; with
        /// it, the calibration's first pair.
        pub(super) origin: Instant,
        /// The TSC at `origin`, when the TSC is the source.
        pub(super) tsc: Option<u64>,
    }

    static CLOCK: OnceLock<Clock> = OnceLock::new();
    /// Nanoseconds per TSC tick, once calibrated.
    static NS_PER_TICK: OnceLock<f64> = OnceLock::new();

    #[inline(always)]
    pub(super) fn clock() -> &'static Clock {
        match CLOCK.get() {
            Some(c) => c,
            None => init(),
        }
    }

    #[cold]
    #[inline(never)]
    fn init() -> &'static Clock {
        CLOCK.get_or_init(|| {
            #[cfg(target_arch = "x86_64")]
            if super::tsc::usable() {
                let (tsc, origin) = super::tsc::pair();
                return Clock {
                    origin,
                    tsc: Some(tsc),
                };
            }
            Clock {
                origin: Instant::now(),
                tsc: None,
            }
        })
    }

    #[inline(always)]
    pub(super) fn read() -> u64 {
        let c = clock();
        #[cfg(target_arch = "x86_64")]
        if c.tsc.is_some() {
            return super::tsc::read();
        }
        nanos(c.origin.elapsed())
    }

    fn nanos(d: Duration) -> u64 {
        d.as_secs()
            .saturating_mul(1_000_000_000)
            .saturating_add(u64::from(d.subsec_nanos()))
    }

    pub(super) fn to_duration(ticks: u64) -> Duration {
        if ticks == 0 {
            // Nothing measured yet: no clock to ask, nothing to calibrate.
            return Duration::ZERO;
        }
        let c = clock();
        match c.tsc {
            None => Duration::from_nanos(ticks),
            Some(origin_tsc) => {
                let rate = *NS_PER_TICK.get_or_init(|| calibrate(c, origin_tsc));
                // Exact to the nanosecond up to about 100 days of summed
                // time (an f64's 53 bits); never panics.
                Duration::try_from_secs_f64(ticks as f64 * rate * 1e-9).unwrap_or(Duration::MAX)
            }
        }
    }

    /// Nanoseconds per tick from the origin's pair and one taken now, at
    /// least [`super::CALIBRATION`] later.
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))]
    fn calibrate(c: &Clock, origin_tsc: u64) -> f64 {
        if let Some(left) = super::CALIBRATION.checked_sub(c.origin.elapsed()) {
            std::thread::sleep(left);
        }
        #[cfg(target_arch = "x86_64")]
        {
            let (tsc, at) = super::tsc::pair();
            let ns = nanos(at.saturating_duration_since(c.origin)) as f64;
            let ticks = tsc.saturating_sub(origin_tsc).max(1) as f64;
            ns / ticks
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            1.0
        }
    }
}

/// The time stamp counter of x86_64.
#[cfg(all(feature = "stats", target_arch = "x86_64"))]
#[allow(unsafe_code)]
mod tsc {
    use std::arch::x86_64::{__cpuid, _rdtsc};
    use std::time::Instant;

    /// One TSC reading.
    #[inline(always)]
    pub(super) fn read() -> u64 {
        // SAFETY: `rdtsc` reads a counter; it touches no memory and every
        // x86_64 CPU has it (the module only uses its value when
        // `usable()` said the counter is invariant). `unsafe` only because
        // the intrinsic is declared so; it is here for a measured win: a
        // reading costs about 10 ns against 26 ns for `Instant::now` on the
        // issue-#22 machine, and the stats take about three per message.
        unsafe { _rdtsc() }
    }

    /// Whether the CPU says its TSC is invariant and (on Linux) the kernel
    /// keeps it as its clocksource.
    pub(super) fn usable() -> bool {
        // `__cpuid` became a safe function in newer Rust; the crate's
        // oldest supported Rust still has it `unsafe`.
        #[allow(unused_unsafe)]
        // SAFETY: `cpuid` exists on every x86_64 CPU; leaf 0x8000_0000
        // gives the highest extended leaf, and 0x8000_0007 is only asked
        // for when it is within that range.
        let invariant = unsafe {
            __cpuid(0x8000_0000).eax >= 0x8000_0007 && __cpuid(0x8000_0007).edx & (1 << 8) != 0
        };
        invariant && kernel_trusts_tsc()
    }

    /// On Linux the kernel checks that the cores' counters agree and falls
    /// back to another clocksource when they do not (or when it cannot
    /// tell, as in some VMs): follow its verdict.
    #[cfg(target_os = "linux")]
    fn kernel_trusts_tsc() -> bool {
        std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .is_ok_and(|s| s.trim() == "tsc")
    }

    #[cfg(not(target_os = "linux"))]
    fn kernel_trusts_tsc() -> bool {
        true
    }

    /// A TSC reading and an `Instant` taken together: the `Instant` between
    /// two TSC readings, their midpoint, the tightest of a few tries.
    pub(super) fn pair() -> (u64, Instant) {
        let mut best: Option<(u64, u64, Instant)> = None;
        for _ in 0..5 {
            let a = read();
            let at = Instant::now();
            let b = read();
            let width = b.wrapping_sub(a);
            if best.is_none_or(|(w, _, _)| width < w) {
                best = Some((width, a + width / 2, at));
            }
        }
        let (_, tsc, at) = best.expect("five tries");
        (tsc, at)
    }
}

#[cfg(all(test, feature = "stats"))]
mod tests {
    use super::*;
    use std::time::Instant;

    /// Ticks over a sleep convert to about the sleep: no less than it asked
    /// for, no more than `Instant` saw around it (1% slack both ways for
    /// the calibration; no assertion on how fast anything is).
    #[test]
    fn ticks_convert_to_the_time_they_span() {
        const NAP: Duration = Duration::from_millis(50);
        let outer = Instant::now();
        let a = now();
        std::thread::sleep(NAP);
        let b = now();
        let seen = outer.elapsed();
        let d = between(a, b).to_duration();
        assert!(d >= NAP.mul_f64(0.99), "{d:?} for a sleep of {NAP:?}");
        assert!(d <= seen.mul_f64(1.01), "{d:?}, Instant saw {seen:?}");
        // Sums add up and convert the same way.
        let mut sum = Ticks::default();
        sum += between(a, b);
        sum += between(a, b);
        let twice = sum.to_duration();
        let diff = twice.abs_diff(2 * d);
        assert!(diff <= Duration::from_micros(1), "{twice:?} vs 2 x {d:?}");
        // Time does not run backwards through `between`.
        assert_eq!(between(b, a), Ticks::default());
        assert_eq!(Ticks::default().to_duration(), Duration::ZERO);
        eprintln!("stats clock: tsc {}, {d:?} over {seen:?}", uses_tsc());
    }

    /// `Since` holds one reading at a time and gives it back once.
    #[test]
    fn since_holds_a_reading_until_taken() {
        let mut s = Since::default();
        assert!(s.take().is_none());
        let a = now();
        s.set(a);
        let back = s.take().expect("the reading set");
        assert_eq!(between(back, a), Ticks::default());
        assert_eq!(between(a, back), Ticks::default());
        assert!(s.take().is_none(), "taken twice");
    }

    /// The source this machine gets: the TSC exactly when the CPU reports
    /// an invariant one and Linux keeps it as its clocksource.
    #[test]
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    fn tsc_only_where_invariant_and_trusted() {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let source = std::fs::read_to_string(
            "/sys/devices/system/clocksource/clocksource0/current_clocksource",
        )
        .unwrap_or_default();
        // Linux names CPUID 0x8000_0007 EDX bit 8 `nonstop_tsc`.
        let expect =
            cpuinfo.split_whitespace().any(|f| f == "nonstop_tsc") && source.trim() == "tsc";
        assert_eq!(uses_tsc(), expect, "clocksource {source:?}");
    }
}
