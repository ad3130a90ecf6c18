//! A summary's samples since start, for its quantiles: each positive
//! sample counts into the bucket of its float's exponent and top 4
//! mantissa bits (1/16 of an octave, whatever the unit), so a quantile,
//! reported as its bucket's middle, is within 1/32 (about 3%) of a sample
//! in that bucket; the same precision as the signer's own stats line
//! (`p2p-conn-privval`'s latency histogram). At most 2^15 buckets, and a
//! few dozen for latencies that span a few octaves. Zero and negative
//! samples count as zero; NaN is not counted.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use metrics::HistogramFn;

/// The samples of one summary series (the facade's histogram).
#[derive(Default)]
pub struct Summary(Mutex<Sketch>);

#[derive(Default)]
struct Sketch {
    /// Bucket (the sample's bits >> 48) to count; bucket 0 holds zero.
    buckets: BTreeMap<u16, u64>,
    count: u64,
    sum: f64,
    min: f64,
    max: f64,
}

/// What a summary reads: its quantiles, in the order asked, its sum and
/// its count.
#[derive(Debug, PartialEq)]
pub struct Read {
    pub quantiles: Vec<f64>,
    pub sum: f64,
    pub count: u64,
}

/// The bucket of `v` (positive, finite or not).
fn bucket(v: f64) -> u16 {
    if v > 0.0 {
        (v.to_bits() >> 48) as u16
    } else {
        0
    }
}

/// The middle of bucket `b`.
fn middle(b: u16) -> f64 {
    if b == 0 {
        return 0.0;
    }
    let low = f64::from_bits(u64::from(b) << 48);
    let high = f64::from_bits((u64::from(b) + 1) << 48);
    if !high.is_finite() {
        return low;
    }
    low + (high - low) / 2.0
}

impl Summary {
    /// The `qs` quantiles (nearest rank), the sum and the count; `None`
    /// before the first sample.
    pub fn read(&self, qs: &[f64]) -> Option<Read> {
        let s = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if s.count == 0 {
            return None;
        }
        let quantiles = qs
            .iter()
            .map(|&q| {
                let rank = ((q.clamp(0.0, 1.0) * s.count as f64).ceil() as u64).max(1);
                let mut seen = 0;
                let b = s
                    .buckets
                    .iter()
                    .find(|(_, &n)| {
                        seen += n;
                        seen >= rank
                    })
                    .map_or(u16::MAX, |(&b, _)| b);
                // The exact extremes bound the bucket's middle.
                middle(b).clamp(s.min, s.max)
            })
            .collect();
        Some(Read {
            quantiles,
            sum: s.sum,
            count: s.count,
        })
    }
}

impl HistogramFn for Summary {
    fn record(&self, value: f64) {
        if value.is_nan() {
            return;
        }
        let v = value.max(0.0);
        let mut s = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        *s.buckets.entry(bucket(v)).or_default() += 1;
        if s.count == 0 {
            (s.min, s.max) = (v, v);
        } else {
            (s.min, s.max) = (s.min.min(v), s.max.max(v));
        }
        s.count += 1;
        s.sum += v;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_within_three_percent_since_start() {
        let s = Summary::default();
        assert_eq!(s.read(&[0.5]), None);
        // 1..=1000 µs, in seconds: p50 500 µs, p99 990 µs.
        for i in 1..=1000 {
            s.record(f64::from(i) * 1e-6);
        }
        let r = s.read(&[0.5, 0.99]).unwrap();
        assert_eq!(r.count, 1000);
        assert!((r.sum - 0.5005).abs() < 1e-9, "{r:?}");
        for (got, want) in r.quantiles.iter().zip([500e-6, 990e-6]) {
            assert!((got / want - 1.0).abs() <= 1.0 / 32.0, "{got} for {want}");
        }
        // Since start: a thousand later samples do not push the first out.
        for _ in 0..1000 {
            s.record(1.0);
        }
        let r = s.read(&[0.25]).unwrap();
        assert!((r.quantiles[0] / 500e-6 - 1.0).abs() <= 1.0 / 32.0, "{r:?}");
    }

    #[test]
    fn one_sample_is_exact_and_odd_ones_are_bounded() {
        let s = Summary::default();
        s.record(0.000_846);
        assert_eq!(s.read(&[0.5, 0.99]).unwrap().quantiles, [0.000_846; 2]);
        s.record(f64::NAN);
        s.record(-1.0);
        s.record(f64::INFINITY);
        let r = s.read(&[0.0, 1.0]).unwrap();
        assert_eq!(r.count, 3);
        assert_eq!(r.quantiles, [0.0, f64::INFINITY]);
    }
}
