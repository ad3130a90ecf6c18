//! `p2p-conn signer --metrics ADDR`: the signer's figures in Prometheus's
//! text format, over a plain HTTP/1.1 responder (GET /metrics, one
//! response per connection), and the slow-signing watch: the median of
//! the last 50 signatures against a threshold (celestia-core warns at
//! 10 ms), told once when it goes above and once when it comes back.
//!
//! Everything comes from what the signer keeps anyway: each node's
//! [`StatsHandle`] and the latency of each signature served. Nothing here
//! touches the signing path beyond one lock to push a latency.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use p2p_conn_privval::endpoint::{EndpointStats, KindStats, RequestKind, StatsHandle};

use super::standby::Standby;

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

/// One metric family: its header and one line per `(labels, value)`.
fn family(
    out: &mut String,
    name: &str,
    kind: &str,
    help: &str,
    rows: impl IntoIterator<Item = (String, String)>,
) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    for (labels, value) in rows {
        if labels.is_empty() {
            let _ = writeln!(out, "{name} {value}");
        } else {
            let _ = writeln!(out, "{name}{{{labels}}} {value}");
        }
    }
}

/// The Prometheus text of every node's stats and the watch.
pub fn render(nodes: &[Named], watch: &SignWatch) -> String {
    let snaps: Vec<_> = nodes
        .iter()
        .map(|(s, n, _)| (s.snapshot(), escape(n)))
        .collect();
    let mut out = String::new();
    // Per node and kind (`other` only once seen).
    let per_kind = |value: &dyn Fn(&KindStats) -> u64| {
        snaps
            .iter()
            .flat_map(|(s, node)| {
                s.kinds
                    .iter()
                    .filter(|k| k.kind != RequestKind::Other || k.count > 0)
                    .map(move |k| {
                        (
                            format!("node=\"{node}\",kind=\"{}\"", k.kind.name()),
                            value(k).to_string(),
                        )
                    })
            })
            .collect::<Vec<_>>()
    };
    let per_node = |value: &dyn Fn(&EndpointStats) -> u64| {
        snaps
            .iter()
            .map(|(s, node)| (format!("node=\"{node}\""), value(s).to_string()))
            .collect::<Vec<_>>()
    };
    family(
        &mut out,
        "p2p_conn_signer_requests_total",
        "counter",
        "Requests served, by node and kind.",
        per_kind(&|k| k.count),
    );
    family(
        &mut out,
        "p2p_conn_signer_request_errors_total",
        "counter",
        "Requests refused, failed or not answered, by node and kind.",
        per_kind(&|k| k.errors),
    );
    let quantiles = snaps.iter().flat_map(|(s, node)| {
        s.kinds.iter().filter(|k| k.count > 0).flat_map(move |k| {
            [("0.5", k.p50), ("0.99", k.p99)]
                .into_iter()
                .filter_map(move |(q, v)| {
                    let labels = format!(
                        "node=\"{node}\",kind=\"{}\",quantile=\"{q}\"",
                        k.kind.name()
                    );
                    v.map(|v| (labels, v.as_secs_f64().to_string()))
                })
        })
    });
    family(
        &mut out,
        "p2p_conn_signer_request_latency_seconds",
        "summary",
        "From a request's last byte read to its response written (the state file's sync included), by node and kind; quantiles within 3%.",
        quantiles,
    );
    family(
        &mut out,
        "p2p_conn_signer_connects_total",
        "counter",
        "Connections established, by node.",
        per_node(&|s| s.connects),
    );
    family(
        &mut out,
        "p2p_conn_signer_reconnects_total",
        "counter",
        "Connections established after the first, by node.",
        per_node(&|s| s.connects.saturating_sub(1)),
    );
    family(
        &mut out,
        "p2p_conn_signer_connected",
        "gauge",
        "1 while the node is connected.",
        per_node(&|s| u64::from(s.connects > s.disconnects)),
    );
    family(
        &mut out,
        "p2p_conn_signer_standby_refusals_total",
        "counter",
        "Requests refused because another node of this validator got that step signed first (a standby node), by node.",
        nodes
            .iter()
            .map(|(_, n, standby)| (format!("node=\"{}\"", escape(n)), standby.total().to_string())),
    );
    let (median, slow, episodes) = watch.read();
    let one = |v: String| [(String::new(), v)];
    family(
        &mut out,
        "p2p_conn_signer_sign_median_seconds",
        "gauge",
        "The median latency of the last 50 signatures, every node's.",
        median.map(|m| (String::new(), m.as_secs_f64().to_string())),
    );
    family(
        &mut out,
        "p2p_conn_signer_sign_slow",
        "gauge",
        "1 while the median of the last 50 signatures is above --slow-sign-ms.",
        one(u8::from(slow).to_string()),
    );
    family(
        &mut out,
        "p2p_conn_signer_sign_slow_episodes_total",
        "counter",
        "Times the median of the last 50 signatures went above --slow-sign-ms.",
        one(episodes.to_string()),
    );
    family(
        &mut out,
        "p2p_conn_signer_sign_slow_threshold_seconds",
        "gauge",
        "--slow-sign-ms.",
        one(watch.threshold.as_secs_f64().to_string()),
    );
    out
}

fn escape(label: &str) -> String {
    label
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Serve GET /metrics on `listener` until dropped (see
/// [`crate::metrics_http`]), for the nodes `nodes` lists at each request.
pub async fn serve(
    listener: tokio::net::TcpListener,
    nodes: impl Fn() -> Vec<Named> + Send + Sync + 'static,
    watch: Arc<SignWatch>,
) {
    crate::metrics_http::serve(listener, Arc::new(move || render(&nodes(), &watch))).await
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
        let text = render(&[(a, "tcp://127.0.0.1:1".into(), standby)], &w);
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
