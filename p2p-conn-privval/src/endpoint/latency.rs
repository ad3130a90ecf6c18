//! The endpoints' latency histogram (one per request kind, behind
//! [`super::StatsHandle`]): fixed memory, constant-time recording,
//! quantiles within a stated error.

use std::fmt;
use std::time::Duration;

/// Sub-buckets per power of two: each bucket spans 1/16 of its octave, so a
/// quantile is off by at most 1/32 (about 3%) from a value in its bucket.
const SUB_BITS: u32 = 4;
const SUB: usize = 1 << SUB_BITS;
/// Octaves above the linear range: values up to 2^(OCTAVES + SUB_BITS) ns,
/// about 2^44 ns = 4.9 hours; anything longer lands in the last bucket.
const OCTAVES: usize = 40;
const BUCKETS: usize = SUB * (OCTAVES + 1);

/// Latencies seen, in nanosecond buckets of 1/16 octave (values below 16 ns
/// exactly). 2.6 KiB, whatever the count; [`LatencyHistogram::record`] is
/// a few integer operations.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct LatencyHistogram {
    counts: Box<[u32; BUCKETS]>,
    total: u64,
    sum_ns: u128,
    max_ns: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram {
            counts: Box::new([0; BUCKETS]),
            total: 0,
            sum_ns: 0,
            max_ns: 0,
        }
    }
}

fn bucket_of(ns: u64) -> usize {
    if ns < SUB as u64 {
        return ns as usize;
    }
    let octave = (63 - ns.leading_zeros()) - SUB_BITS; // 0 for 16..31
    let sub = (ns >> octave) as usize - SUB; // top bits after the leading 1
    let i = SUB * (octave as usize + 1) + sub;
    i.min(BUCKETS - 1)
}

/// The middle of bucket `i`, in ns.
fn bucket_mid(i: usize) -> u64 {
    if i < SUB {
        return i as u64;
    }
    let octave = (i / SUB - 1) as u32;
    let sub = (i % SUB) as u64;
    let low = (SUB as u64 + sub) << octave;
    low + ((1u64 << octave) >> 1)
}

impl LatencyHistogram {
    /// An empty histogram.
    #[cfg(test)]
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Counts one latency.
    pub(crate) fn record(&mut self, latency: Duration) {
        let ns = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        let b = &mut self.counts[bucket_of(ns)];
        *b = b.saturating_add(1);
        self.total += 1;
        self.sum_ns += u128::from(ns);
        self.max_ns = self.max_ns.max(ns);
    }

    /// How many latencies were recorded.
    #[cfg(test)]
    pub(crate) fn count(&self) -> u64 {
        self.total
    }

    /// The `q` quantile (0.5 for the median, 0.99 for p99), within about 3%;
    /// `None` before the first record. `q` is clamped to 0..=1.
    pub(crate) fn quantile(&self, q: f64) -> Option<Duration> {
        if self.total == 0 {
            return None;
        }
        let q = if q.is_nan() { 1.0 } else { q.clamp(0.0, 1.0) };
        // The rank of the sample at quantile q (1-based, nearest rank).
        let rank = ((q * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += u64::from(c);
            if seen >= rank {
                return Some(Duration::from_nanos(bucket_mid(i).min(self.max_ns)));
            }
        }
        Some(Duration::from_nanos(self.max_ns))
    }

    /// The mean; `None` before the first record.
    #[cfg(test)]
    pub(crate) fn mean(&self) -> Option<Duration> {
        (self.total > 0).then(|| {
            Duration::from_nanos(
                u64::try_from(self.sum_ns / u128::from(self.total)).unwrap_or(u64::MAX),
            )
        })
    }

    /// The largest latency recorded (exact); `None` before the first.
    pub(crate) fn max(&self) -> Option<Duration> {
        (self.total > 0).then(|| Duration::from_nanos(self.max_ns))
    }
}

impl fmt::Debug for LatencyHistogram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LatencyHistogram")
            .field("count", &self.total)
            .field("p50", &self.quantile(0.5))
            .field("p99", &self.quantile(0.99))
            .field("max", &self.max())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_ordered_and_cover_their_values() {
        let mut last = 0;
        for ns in (0..100_000u64).chain([1 << 30, (1 << 40) + 12345, u64::MAX / 2]) {
            let b = bucket_of(ns);
            assert!(b >= last, "ns {ns}: bucket {b} below {last}");
            last = b;
            if b < BUCKETS - 1 {
                let mid = bucket_mid(b);
                let err = mid.abs_diff(ns) as f64 / ns.max(1) as f64;
                assert!(err <= 1.0 / 16.0 + 1e-9, "ns {ns} bucket {b} mid {mid}");
            }
        }
    }

    #[test]
    fn quantiles_within_three_percent() {
        let mut h = LatencyHistogram::new();
        assert_eq!(h.quantile(0.5), None);
        for us in 1..=1000u64 {
            h.record(Duration::from_micros(us));
        }
        assert_eq!(h.count(), 1000);
        let p50 = h.quantile(0.5).unwrap().as_nanos() as f64;
        let p99 = h.quantile(0.99).unwrap().as_nanos() as f64;
        assert!((p50 / 500_000.0 - 1.0).abs() < 0.035, "p50 {p50}");
        assert!((p99 / 990_000.0 - 1.0).abs() < 0.035, "p99 {p99}");
        assert_eq!(h.max(), Some(Duration::from_micros(1000)));
        let p100 = h.quantile(1.0).unwrap().as_nanos() as f64;
        assert!((p100 / 1_000_000.0 - 1.0).abs() < 0.035, "p100 {p100}");
        let mean = h.mean().unwrap().as_nanos();
        assert_eq!(mean, 500_500);
    }

    #[test]
    fn huge_and_zero_values_do_not_panic() {
        let mut h = LatencyHistogram::new();
        h.record(Duration::ZERO);
        h.record(Duration::MAX);
        assert_eq!(h.count(), 2);
        assert_eq!(h.quantile(0.0), Some(Duration::ZERO));
        assert!(h.quantile(1.0).unwrap() > Duration::from_secs(3600));
        assert!(h.quantile(f64::NAN).is_some());
    }
}
