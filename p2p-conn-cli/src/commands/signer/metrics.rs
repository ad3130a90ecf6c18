//! `p2p-conn signer --metrics ADDR`: the signer's figures, set through the
//! `metrics` facade into the exporter every command shares
//! ([`crate::exporter`]) and served in Prometheus's text format over a
//! plain HTTP/1.1 responder (GET /metrics, one response per connection),
//! and the slow-signing watch: the median of
//! the last 50 signatures against a threshold (celestia-core warns at
//! 10 ms), told once when it goes above and once when it comes back.
//!
//! Everything comes from what the signer keeps anyway: each node's
//! [`StatsHandle`] (set at each scrape) and the latency of each request
//! served (recorded as it is reported). Nothing here touches the signing
//! path beyond a lock or two to push a latency, after the response left.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use p2p_conn_privval::endpoint::{RequestKind, StatsHandle};

use super::standby::Standby;
use crate::exporter::Exporter;

/// A node as the metrics name it: its stats, its `--node`, and its
/// standby refusals.
pub type Named = (StatsHandle, String, Arc<Standby>);

/// Signatures the median is taken over (celestia-core's window).
pub const WINDOW: usize = 50;

/// The last [`WINDOW`] signatures' latencies across every node, and
/// whether their median is above the threshold now.
#[derive(Debug)]
pub struct SignWatch {
    threshold: Duration,
    inner: Mutex<Watch>,
}

#[derive(Debug, Default)]
struct Watch {
    last: VecDeque<Duration>,
    slow: bool,
    /// Times the median went above the threshold.
    episodes: u64,
}

/// A change of the slow-signing state, to report.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Change {
    /// The median went above the threshold.
    Slow(Duration),
    /// It came back under.
    Recovered(Duration),
}

impl SignWatch {
    pub fn new(threshold: Duration) -> Arc<SignWatch> {
        Arc::new(SignWatch {
            threshold,
            inner: Mutex::default(),
        })
    }

    pub fn threshold(&self) -> Duration {
        self.threshold
    }

    /// Take in one signature's latency: a change to report, if the median
    /// of a full window crossed the threshold.
    pub fn push(&self, latency: Duration) -> Option<Change> {
        let mut w = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if w.last.len() == WINDOW {
            w.last.pop_front();
        }
        w.last.push_back(latency);
        let median = median(&w.last)?;
        if w.last.len() < WINDOW {
            return None;
        }
        match (w.slow, median > self.threshold) {
            (false, true) => {
                w.slow = true;
                w.episodes += 1;
                Some(Change::Slow(median))
            }
            (true, false) => {
                w.slow = false;
                Some(Change::Recovered(median))
            }
            _ => None,
        }
    }

    /// The median now, whether it is above the threshold, and how often it
    /// went above.
    fn read(&self) -> (Option<Duration>, bool, u64) {
        let w = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        (median(&w.last), w.slow, w.episodes)
    }
}

/// The median (the upper one of an even count).
fn median(xs: &VecDeque<Duration>) -> Option<Duration> {
    let mut v: Vec<Duration> = xs.iter().copied().collect();
    v.sort_unstable();
    v.get(v.len() / 2).copied()
}

/// What a node's reporter feeds: the slow-signing watch (every node's)
/// and the node's latencies.
pub struct Meters {
    pub watch: Arc<SignWatch>,
    pub latency: Latency,
}

/// The latency summary's name.
const LATENCY: &str = "p2p_conn_signer_request_latency_seconds";

/// One node's request latencies: a summary per request kind (the facade's
/// histogram, [`crate::exporter`]: p50 and p99 since start, within 3%),
/// recorded as each request is served; a kind never served is not
/// rendered.
#[derive(Clone)]
pub struct Latency(Arc<[metrics::Histogram]>);

impl Latency {
    /// Register `node`'s summaries in `exporter`.
    pub fn new(exporter: &Exporter, node: &str) -> Latency {
        exporter.record(|| {
            Latency(
                RequestKind::ALL
                    .iter()
                    .map(|k| metrics::histogram!(LATENCY, "node" => node.to_string(), "kind" => k.name()))
                    .collect(),
            )
        })
    }

    /// One request of `kind` served in `latency`.
    pub fn record(&self, kind: RequestKind, latency: Duration) {
        let i = RequestKind::ALL.iter().position(|&k| k == kind);
        if let Some(h) = i.and_then(|i| self.0.get(i)) {
            h.record(latency.as_secs_f64());
        }
    }
}

/// Every series' help text, for `# HELP`.
fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        "p2p_conn_signer_requests_total",
        "Requests served, by node and kind."
    );
    describe_counter!(
        "p2p_conn_signer_request_errors_total",
        "Requests refused, failed or not answered, by node and kind."
    );
    describe_histogram!(
        LATENCY,
        "From a request's last byte read to its response written (the state file's sync included), by node and kind; quantiles within 3%."
    );
    describe_counter!(
        "p2p_conn_signer_connects_total",
        "Connections established, by node."
    );
    describe_counter!(
        "p2p_conn_signer_reconnects_total",
        "Connections established after the first, by node."
    );
    describe_gauge!(
        "p2p_conn_signer_connected",
        "1 while the node is connected."
    );
    describe_counter!(
        "p2p_conn_signer_standby_refusals_total",
        "Requests refused because another node of this validator got that step signed first (a standby node), by node."
    );
    describe_gauge!(
        "p2p_conn_signer_sign_median_seconds",
        "The median latency of the last 50 signatures, every node's."
    );
    describe_gauge!(
        "p2p_conn_signer_sign_slow",
        "1 while the median of the last 50 signatures is above --slow-sign-ms."
    );
    describe_counter!(
        "p2p_conn_signer_sign_slow_episodes_total",
        "Times the median of the last 50 signatures went above --slow-sign-ms."
    );
    describe_gauge!(
        "p2p_conn_signer_sign_slow_threshold_seconds",
        "--slow-sign-ms."
    );
}

/// Set every node's series and the watch's through the facade (into
/// the exporter of the caller's [`Exporter::record`]): the counts are the
/// endpoints' own, set as they are now.
pub fn record(nodes: &[Named], watch: &SignWatch) {
    use metrics::{counter, gauge};
    for (stats, node, standby) in nodes {
        let s = stats.snapshot();
        // `other` only once seen.
        for k in s
            .kinds
            .iter()
            .filter(|k| k.kind != RequestKind::Other || k.count > 0)
        {
            let labels = [("node", node.clone()), ("kind", k.kind.name().to_string())];
            counter!("p2p_conn_signer_requests_total", &labels).absolute(k.count);
            counter!("p2p_conn_signer_request_errors_total", &labels).absolute(k.errors);
        }
        let labels = [("node", node.clone())];
        counter!("p2p_conn_signer_connects_total", &labels).absolute(s.connects);
        counter!("p2p_conn_signer_reconnects_total", &labels)
            .absolute(s.connects.saturating_sub(1));
        gauge!("p2p_conn_signer_connected", &labels)
            .set(f64::from(u8::from(s.connects > s.disconnects)));
        counter!("p2p_conn_signer_standby_refusals_total", &labels).absolute(standby.total());
    }
    let (median, slow, episodes) = watch.read();
    if let Some(m) = median {
        gauge!("p2p_conn_signer_sign_median_seconds").set(m.as_secs_f64());
    }
    gauge!("p2p_conn_signer_sign_slow").set(f64::from(u8::from(slow)));
    counter!("p2p_conn_signer_sign_slow_episodes_total").absolute(episodes);
    gauge!("p2p_conn_signer_sign_slow_threshold_seconds").set(watch.threshold.as_secs_f64());
}

/// Serve GET /metrics on `listener` until dropped (see
/// [`crate::metrics_http`]): the series of `nodes` and `watch`, set at
/// each scrape, and the latencies `exporter` was handed.
pub async fn serve(
    listener: tokio::net::TcpListener,
    exporter: Exporter,
    nodes: Vec<Named>,
    watch: Arc<SignWatch>,
) {
    exporter.record(describe);
    let render = move || {
        exporter.record(|| record(&nodes, &watch));
        exporter.render()
    };
    crate::metrics_http::serve(listener, Arc::new(render)).await
}

/// Bind `addr` for [`serve`] (called before anything is served, so a
/// taken port stops the signer at start).
pub fn bind(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    crate::metrics_http::bind(addr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_of_a_full_window_crosses_once_each_way() {
        let w = SignWatch::new(Duration::from_millis(10));
        let ms = Duration::from_millis;
        for _ in 0..WINDOW - 1 {
            assert_eq!(w.push(ms(30)), None, "not a full window yet");
        }
        assert_eq!(w.push(ms(30)), Some(Change::Slow(ms(30))));
        assert_eq!(w.push(ms(30)), None, "told once");
        // 26 fast ones make the median fast.
        let mut changes = Vec::new();
        for _ in 0..26 {
            changes.extend(w.push(ms(1)));
        }
        assert_eq!(changes, vec![Change::Recovered(ms(1))]);
        assert_eq!(w.read(), (Some(ms(1)), false, 1));
    }

    #[test]
    fn the_text_names_every_node_and_kind() {
        let a = StatsHandle::default();
        let w = SignWatch::new(Duration::from_millis(10));
        let standby = Arc::new(Standby::default());
        standby.refused(3);
        let exporter = Exporter::new();
        let nodes = [(a, "tcp://127.0.0.1:1".into(), standby)];
        exporter.record(|| record(&nodes, &w));
        let text = exporter.render();
        assert!(text.contains(
            "p2p_conn_signer_requests_total{node=\"tcp://127.0.0.1:1\",kind=\"vote\"} 0"
        ));
        assert!(text.contains("p2p_conn_signer_sign_slow 0"));
        assert!(
            text.contains("p2p_conn_signer_standby_refusals_total{node=\"tcp://127.0.0.1:1\"} 1")
        );
        assert!(!text.contains("kind=\"other\""));
    }
}
