//! Per-request-kind counters and latencies, shared between an endpoint and
//! whoever reads them.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::latency::LatencyHistogram;
use super::RequestKind;

#[derive(Default)]
struct Kind {
    count: u64,
    errors: u64,
    latency: LatencyHistogram,
}

#[derive(Default)]
struct Inner {
    connects: u64,
    disconnects: u64,
    kinds: [Kind; RequestKind::ALL.len()],
}

/// A handle on an endpoint's stats: clone it freely, take a
/// [`snapshot`](StatsHandle::snapshot) whenever. Recording takes a short
/// lock once per request.
#[derive(Clone, Default)]
pub struct StatsHandle(Arc<Mutex<Inner>>);

impl fmt::Debug for StatsHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.snapshot().fmt(f)
    }
}

impl StatsHandle {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn request(&self, kind: RequestKind, latency: Duration, failed: bool) {
        let mut g = self.lock();
        let k = &mut g.kinds[kind.index()];
        k.count += 1;
        k.errors += u64::from(failed);
        k.latency.record(latency);
    }

    pub(crate) fn connected(&self) {
        self.lock().connects += 1;
    }

    pub(crate) fn disconnected(&self) {
        self.lock().disconnects += 1;
    }

    /// The counts so far.
    pub fn snapshot(&self) -> EndpointStats {
        let g = self.lock();
        EndpointStats {
            connects: g.connects,
            disconnects: g.disconnects,
            kinds: RequestKind::ALL
                .iter()
                .map(|&kind| {
                    let k = &g.kinds[kind.index()];
                    KindStats {
                        kind,
                        count: k.count,
                        errors: k.errors,
                        p50: k.latency.quantile(0.5),
                        p99: k.latency.quantile(0.99),
                        max: k.latency.max(),
                    }
                })
                .collect(),
        }
    }
}

/// One request kind's figures.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct KindStats {
    /// The kind.
    pub kind: RequestKind,
    /// Requests seen (answered or not).
    pub count: u64,
    /// Of those, refused, failed or not answered.
    pub errors: u64,
    /// Median latency (within 3%); `None` before the first request.
    pub p50: Option<Duration>,
    /// 99th percentile latency (within 3%).
    pub p99: Option<Duration>,
    /// The largest latency (exact).
    pub max: Option<Duration>,
}

/// A snapshot of an endpoint's stats.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct EndpointStats {
    /// Connections established (handshake done).
    pub connects: u64,
    /// Connections lost or dropped.
    pub disconnects: u64,
    /// One entry per [`RequestKind`], in [`RequestKind::ALL`] order.
    pub kinds: Vec<KindStats>,
}

impl EndpointStats {
    /// The figures of `kind`.
    pub fn kind(&self, kind: RequestKind) -> &KindStats {
        &self.kinds[kind.index()]
    }

    /// Requests of every kind.
    pub fn requests(&self) -> u64 {
        self.kinds.iter().map(|k| k.count).sum()
    }
}

fn ms(d: Option<Duration>) -> String {
    match d {
        Some(d) => format!("{:.2}ms", d.as_secs_f64() * 1e3),
        None => "-".into(),
    }
}

/// One line: the kinds seen, each with count, errors and p50/p99, then the
/// connects, e.g. `vote 12 (0 err, p50 0.41ms p99 1.20ms), ping 3 (...);
/// connects 1, disconnects 0`.
impl fmt::Display for EndpointStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for k in self.kinds.iter().filter(|k| k.count > 0) {
            if !first {
                f.write_str(", ")?;
            }
            first = false;
            write!(
                f,
                "{} {} ({} err, p50 {} p99 {})",
                k.kind,
                k.count,
                k.errors,
                ms(k.p50),
                ms(k.p99)
            )?;
        }
        if first {
            f.write_str("no requests")?;
        }
        write!(
            f,
            "; connects {}, disconnects {}",
            self.connects, self.disconnects
        )
    }
}
