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
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, UNIX_EPOCH};

use metrics::Label;

use p2p_conn_privval::endpoint::{RequestKind, StatsHandle};

use super::recording::SharedMark;
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

/// The chain a series is for: its `chain_id`, the first label of every
/// signer series (empty under `--any-chain`, which serves every chain
/// with one mark).
#[derive(Clone, Debug)]
pub struct Chain(String);

impl Chain {
    pub fn new(chain_id: Option<&str>) -> Chain {
        Chain(chain_id.unwrap_or_default().to_string())
    }

    /// `chain_id`, then `more`.
    fn labels(&self, more: &[(&'static str, &str)]) -> Vec<Label> {
        std::iter::once(Label::new("chain_id", self.0.clone()))
            .chain(more.iter().map(|&(k, v)| Label::new(k, v.to_string())))
            .collect()
    }
}

/// What the metrics read of one chain's signer: its nodes (as they are
/// at each scrape), the watch and the mark (with the missed heights).
pub struct Sources {
    pub chain: Chain,
    pub nodes: Box<dyn Fn() -> Vec<Named> + Send + Sync>,
    pub watch: Arc<SignWatch>,
    pub mark: SharedMark,
}

/// What a node's reporter feeds: the slow-signing watch and the count of
/// nodes connected now (every node's of the chain), and the node's
/// latencies.
pub struct Meters {
    pub watch: Arc<SignWatch>,
    pub connected: Arc<AtomicUsize>,
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
    /// Register the summaries of `node` of `chain` in `exporter`.
    pub fn new(exporter: &Exporter, chain: &Chain, node: &str) -> Latency {
        exporter.record(|| {
            Latency(
                RequestKind::ALL
                    .iter()
                    .map(|k| {
                        metrics::histogram!(
                            LATENCY,
                            chain.labels(&[("node", node), ("kind", k.name())])
                        )
                    })
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
    describe_gauge!(
        "p2p_conn_signer_last_sign_timestamp_seconds",
        "When the signer last signed a new step (the mark moved), in Unix seconds; 0 until it signs one after start."
    );
    describe_gauge!(
        "p2p_conn_signer_last_signed_height",
        "The height of the mark: the last height signed, by this process or before it (the state file's)."
    );
    describe_counter!(
        "p2p_conn_signer_missed_heights_total",
        "Heights with no precommit signed between two that have one, since start (counting from the state file's precommit)."
    );
}

/// Set every series of one chain's signer through the facade (into the
/// exporter of the caller's [`Exporter::record`]): the counts are the
/// endpoints' own, set as they are now.
pub fn record(src: &Sources) {
    use metrics::{counter, gauge};
    let chain = &src.chain;
    for (stats, node, standby) in &(src.nodes)() {
        let s = stats.snapshot();
        // `other` only once seen.
        for k in s
            .kinds
            .iter()
            .filter(|k| k.kind != RequestKind::Other || k.count > 0)
        {
            let labels = chain.labels(&[("node", node), ("kind", k.kind.name())]);
            counter!("p2p_conn_signer_requests_total", labels.clone()).absolute(k.count);
            counter!("p2p_conn_signer_request_errors_total", labels).absolute(k.errors);
        }
        let labels = chain.labels(&[("node", node)]);
        counter!("p2p_conn_signer_connects_total", labels.clone()).absolute(s.connects);
        counter!("p2p_conn_signer_reconnects_total", labels.clone())
            .absolute(s.connects.saturating_sub(1));
        gauge!("p2p_conn_signer_connected", labels.clone())
            .set(f64::from(u8::from(s.connects > s.disconnects)));
        counter!("p2p_conn_signer_standby_refusals_total", labels).absolute(standby.total());
    }
    let labels = chain.labels(&[]);
    let (median, slow, episodes) = src.watch.read();
    if let Some(m) = median {
        gauge!("p2p_conn_signer_sign_median_seconds", labels.clone()).set(m.as_secs_f64());
    }
    gauge!("p2p_conn_signer_sign_slow", labels.clone()).set(f64::from(u8::from(slow)));
    counter!("p2p_conn_signer_sign_slow_episodes_total", labels.clone()).absolute(episodes);
    gauge!(
        "p2p_conn_signer_sign_slow_threshold_seconds",
        labels.clone()
    )
    .set(src.watch.threshold.as_secs_f64());
    let mark = *src.mark.lock().unwrap_or_else(PoisonError::into_inner);
    let at = mark.at.map_or(0.0, |at| {
        at.duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64())
    });
    gauge!(
        "p2p_conn_signer_last_sign_timestamp_seconds",
        labels.clone()
    )
    .set(at);
    gauge!("p2p_conn_signer_last_signed_height", labels.clone()).set(mark.hrs.height as f64);
    counter!("p2p_conn_signer_missed_heights_total", labels).absolute(mark.missed);
}

/// Serve GET /metrics on `listener` until dropped (see
/// [`crate::metrics_http`]): the series of each chain's signer, set at
/// each scrape, and the latencies `exporter` was handed.
pub async fn serve(listener: tokio::net::TcpListener, exporter: Exporter, chains: Vec<Sources>) {
    exporter.record(describe);
    let render = move || {
        exporter.record(|| chains.iter().for_each(record));
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
        let hrs = p2p_conn_privval::guard::Hrs::default();
        let src = Sources {
            chain: Chain::new(Some("c")),
            nodes: Box::new(move || vec![(a.clone(), "tcp://127.0.0.1:1".into(), standby.clone())]),
            watch: w,
            mark: Arc::new(Mutex::new(super::super::recording::Mark::loaded(hrs))),
        };
        exporter.record(|| record(&src));
        let text = exporter.render();
        assert!(text.contains(
            "p2p_conn_signer_requests_total{chain_id=\"c\",node=\"tcp://127.0.0.1:1\",kind=\"vote\"} 0"
        ));
        assert!(text.contains("p2p_conn_signer_sign_slow{chain_id=\"c\"} 0"));
        assert!(text.contains(
            "p2p_conn_signer_standby_refusals_total{chain_id=\"c\",node=\"tcp://127.0.0.1:1\"} 1"
        ));
        assert!(!text.contains("kind=\"other\""));
    }
}
