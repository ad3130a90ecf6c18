//! The one metrics path of the commands: every series is named and set
//! through the [`metrics`] facade (as the library's own `p2p_conn_*`
//! series are, `p2p_conn::stats::export`), into an [`Exporter`], a
//! [`metrics::Recorder`] of our own that keeps the values and renders
//! Prometheus's text format; [`crate::metrics_http`] serves that text at
//! GET /metrics behind the [`crate::inbound`] gate. `signer --metrics`
//! and `seed --metrics` share it; a command with connection stats to
//! show records the library's series into the same exporter
//! (`exporter.record(|| p2p_conn::stats::export::record(..))`).
//!
//! # Why our own recorder, not `metrics-exporter-prometheus`
//! Both were measured (2026-12-07, `cargo build --release -p
//! p2p-conn-cli`, the binary stripped; `cargo tree -e normal -p
//! p2p-conn-cli`, as the `lint` stage counts):
//!
//! | | crates in the binary's tree | new in Cargo.lock | stripped binary |
//! |---|---|---|---|
//! | before (hand-written text) | 102 | | 3,820,168 B |
//! | `metrics-exporter-prometheus` 0.18, no default features | 130 | 22 | 4,105,192 B (+7.5%) |
//! | this recorder | 105 | 0 | 3,864,944 B (+1.2%) |
//!
//! The maintained exporter without hyper still brings `evmap`,
//! `left-right`, `quanta`, `raw-cpuid`, `metrics-util`,
//! `sketches-ddsketch` and more, past the 120 crates the `lint` stage
//! allows the operator binary; and its summaries are rolling windows (a
//! minute by default), where the signer's latency quantiles have always
//! been since start. This recorder adds the facade (`metrics`, with
//! `rapidhash` and `rustversion`, already in Cargo.lock for the library)
//! and a few hundred lines, and keeps the signer's meaning.
//!
//! # What it renders
//! - A counter (`counter!`) as `counter`, a gauge (`gauge!`) as `gauge`.
//! - A histogram (`histogram!`) as a `summary`: the quantiles
//!   [`QUANTILES`] (p50 and p99) since start, each within 3% of a sample
//!   (1/16-octave buckets, bounded memory whatever the count; see
//!   [`summary`]), with `_sum` and `_count`. A summary with no sample yet
//!   is not rendered.
//! - Families sorted by name, series by their labels, labels in the order
//!   recorded; `# HELP` from the `describe_*!` text. A name registered
//!   first as one type and then as another keeps the first; the second
//!   gets a handle that records nothing.
//! - Series are kept for the life of the process (no expiry), unless
//!   dropped with [`Exporter::forget`] (a node a signer's reload removed):
//!   the commands label by what they were started with (`--node`, the
//!   chain), never by peers that come and go.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::Ordering::Acquire;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use metrics::atomics::AtomicU64;
use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};

pub mod summary;

use summary::Summary;

/// The quantiles every summary reports: the median and p99.
pub const QUANTILES: [f64; 2] = [0.5, 0.99];

/// A [`metrics::Recorder`] that keeps every series it is handed and renders
/// them as Prometheus text ([`Exporter::render`]). Clones share the series.
#[derive(Clone, Default)]
pub struct Exporter(Arc<Mutex<Registry>>);

#[derive(Default)]
struct Registry {
    families: BTreeMap<String, Family>,
    help: BTreeMap<String, String>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Type {
    Counter,
    Gauge,
    Summary,
}

struct Family {
    kind: Type,
    series: BTreeMap<Vec<(String, String)>, Cell>,
}

enum Cell {
    Counter(Arc<AtomicU64>),
    Gauge(Arc<AtomicU64>),
    Summary(Arc<Summary>),
}

impl Exporter {
    pub fn new() -> Exporter {
        Exporter::default()
    }

    fn lock(&self) -> MutexGuard<'_, Registry> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Run `f` with this exporter as the recorder of the facade's macros
    /// (`counter!`, `gauge!`, `histogram!`, `describe_*!`) on this thread;
    /// the handles they return keep recording here afterwards.
    pub fn record<T>(&self, f: impl FnOnce() -> T) -> T {
        metrics::with_local_recorder(self, f)
    }

    /// The handle of `key` as a series of type `kind`: an existing one, or
    /// a new one made by `make`; `None` if the name has another type.
    fn cell(&self, key: &Key, kind: Type, make: impl FnOnce() -> Cell) -> Option<CellRef> {
        let labels = key
            .labels()
            .map(|l| (l.key().to_string(), l.value().to_string()))
            .collect();
        let mut reg = self.lock();
        let family = reg
            .families
            .entry(key.name().to_string())
            .or_insert_with(|| Family {
                kind,
                series: BTreeMap::new(),
            });
        if family.kind != kind {
            return None;
        }
        Some(match family.series.entry(labels).or_insert_with(make) {
            Cell::Counter(c) | Cell::Gauge(c) => CellRef::Atomic(c.clone()),
            Cell::Summary(s) => CellRef::Summary(s.clone()),
        })
    }

    fn describe(&self, key: KeyName, description: SharedString) {
        self.lock()
            .help
            .insert(key.as_str().to_string(), description.to_string());
    }

    /// Drop every series labelled `label="value"` (a node the signer no
    /// longer serves): it is rendered no more, and a handle still held
    /// records into nothing.
    pub fn forget(&self, label: &str, value: &str) {
        for family in self.lock().families.values_mut() {
            family
                .series
                .retain(|labels, _| !labels.iter().any(|(k, v)| k == label && v == value));
        }
    }

    /// Every series in Prometheus's text format (version 0.0.4).
    pub fn render(&self) -> String {
        let reg = self.lock();
        let mut out = String::new();
        for (name, family) in &reg.families {
            let mut rows = String::new();
            for (labels, cell) in &family.series {
                match cell {
                    Cell::Counter(c) => line(&mut rows, name, "", labels, None, &c.load(Acquire)),
                    Cell::Gauge(g) => {
                        let v = number(f64::from_bits(g.load(Acquire)));
                        line(&mut rows, name, "", labels, None, &v)
                    }
                    Cell::Summary(s) => {
                        let Some(read) = s.read(&QUANTILES) else {
                            continue;
                        };
                        for (q, v) in QUANTILES.iter().zip(read.quantiles) {
                            let q = q.to_string();
                            line(&mut rows, name, "", labels, Some(&q), &number(v));
                        }
                        line(&mut rows, name, "_sum", labels, None, &number(read.sum));
                        line(&mut rows, name, "_count", labels, None, &read.count);
                    }
                }
            }
            if rows.is_empty() {
                continue;
            }
            if let Some(help) = reg.help.get(name) {
                let help = help.replace('\\', "\\\\").replace('\n', "\\n");
                let _ = writeln!(out, "# HELP {name} {help}");
            }
            let kind = match family.kind {
                Type::Counter => "counter",
                Type::Gauge => "gauge",
                Type::Summary => "summary",
            };
            let _ = writeln!(out, "# TYPE {name} {kind}");
            out.push_str(&rows);
        }
        out
    }
}

enum CellRef {
    Atomic(Arc<AtomicU64>),
    Summary(Arc<Summary>),
}

/// One sample line: `name{labels,quantile="q"} value`.
fn line(
    out: &mut String,
    name: &str,
    suffix: &str,
    labels: &[(String, String)],
    quantile: Option<&str>,
    value: &dyn std::fmt::Display,
) {
    let mut all: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
        .collect();
    if let Some(q) = quantile {
        all.push(format!("quantile=\"{q}\""));
    }
    if all.is_empty() {
        let _ = writeln!(out, "{name}{suffix} {value}");
    } else {
        let _ = writeln!(out, "{name}{suffix}{{{}}} {value}", all.join(","));
    }
}

/// A label value as the text format quotes it.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A float as the text format writes it (`+Inf`, `-Inf`, `NaN`).
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        v.to_string()
    }
}

impl Recorder for Exporter {
    fn describe_counter(&self, key: KeyName, _: Option<Unit>, description: SharedString) {
        self.describe(key, description)
    }

    fn describe_gauge(&self, key: KeyName, _: Option<Unit>, description: SharedString) {
        self.describe(key, description)
    }

    fn describe_histogram(&self, key: KeyName, _: Option<Unit>, description: SharedString) {
        self.describe(key, description)
    }

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        match self.cell(key, Type::Counter, || Cell::Counter(Arc::default())) {
            Some(CellRef::Atomic(c)) => Counter::from_arc(c),
            _ => Counter::noop(),
        }
    }

    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        match self.cell(key, Type::Gauge, || Cell::Gauge(Arc::default())) {
            Some(CellRef::Atomic(g)) => Gauge::from_arc(g),
            _ => Gauge::noop(),
        }
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        match self.cell(key, Type::Summary, || Cell::Summary(Arc::default())) {
            Some(CellRef::Summary(s)) => Histogram::from_arc(s),
            _ => Histogram::noop(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use metrics::{counter, describe_counter, gauge, histogram};

    #[test]
    fn each_type_renders_as_prometheus_reads_it() {
        let e = Exporter::new();
        e.record(|| {
            describe_counter!("a_total", "Things.\nCounted \\ here.");
            counter!("a_total", "node" => "tcp://x", "kind" => "vote").increment(2);
            counter!("a_total", "node" => "tcp://x", "kind" => "vote").absolute(5);
            counter!("a_total", "node" => "say \"hi\"\n").increment(1);
            gauge!("g").set(0.25);
            gauge!("inf").set(f64::INFINITY);
            histogram!("lat_seconds", "kind" => "vote").record(0.001);
            let _ = histogram!("lat_seconds", "kind" => "ping");
            // Another type under a taken name records nothing.
            gauge!("a_total").set(9.0);
        });
        let text = e.render();
        assert_eq!(
            text,
            "# HELP a_total Things.\\nCounted \\\\ here.\n\
             # TYPE a_total counter\n\
             a_total{node=\"say \\\"hi\\\"\\n\"} 1\n\
             a_total{node=\"tcp://x\",kind=\"vote\"} 5\n\
             # TYPE g gauge\n\
             g 0.25\n\
             # TYPE inf gauge\n\
             inf +Inf\n\
             # TYPE lat_seconds summary\n\
             lat_seconds{kind=\"vote\",quantile=\"0.5\"} 0.001\n\
             lat_seconds{kind=\"vote\",quantile=\"0.99\"} 0.001\n\
             lat_seconds_sum{kind=\"vote\"} 0.001\n\
             lat_seconds_count{kind=\"vote\"} 1\n"
        );
    }

    /// The library's connection series come out of the same exporter.
    #[test]
    fn the_library_series_land_here() {
        let e = Exporter::new();
        let peer = p2p_conn::Identity::generate().node_id();
        let mut stats = p2p_conn::stats::ConnStats::default();
        stats.send.frames_sealed = 3;
        e.record(|| {
            p2p_conn::stats::export::describe();
            p2p_conn::stats::export::record(&peer, &stats)
        });
        let text = e.render();
        assert!(
            text.contains("# TYPE p2p_conn_frames_total counter"),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "p2p_conn_frames_total{{peer=\"{peer}\",direction=\"send\"}} 3"
            )),
            "{text}"
        );
    }
}
