//! Per-peer counters: the keepalive's round trip, requests and their
//! latency, failures, connections.

use std::time::Duration;

use p2p_conn::NodeId;

use crate::endpoint::latency::LatencyHistogram;

/// One peer as [`super::Cluster::stats`] sees it now. Latencies are
/// within about 3% (a fixed-memory histogram since the cluster started).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct PeerStats {
    /// The member's index.
    pub index: u16,
    /// Its node ID.
    pub node_id: NodeId,
    /// Whether a connection to it is up now.
    pub connected: bool,
    /// Connections made (dialed or accepted), replacements included.
    pub connects: u64,
    /// The last keepalive round trip.
    pub rtt_last: Option<Duration>,
    /// The keepalive round trip's median.
    pub rtt_p50: Option<Duration>,
    /// Its 99th percentile.
    pub rtt_p99: Option<Duration>,
    /// Requests we sent it.
    pub requests: u64,
    /// Of those, how many failed (any [`super::NetError`]).
    pub failures: u64,
    /// The answered requests' round trip, median.
    pub request_p50: Option<Duration>,
    /// Its 99th percentile.
    pub request_p99: Option<Duration>,
    /// Requests it sent us that reached the handler.
    pub served: u64,
    /// Requests it sent us that were answered busy.
    pub busy: u64,
}

/// What [`PeerStats`] is made from.
#[derive(Default)]
pub(crate) struct Counters {
    pub connects: u64,
    pub rtt_last: Option<Duration>,
    pub rtt: LatencyHistogram,
    pub requests: u64,
    pub failures: u64,
    pub request_latency: LatencyHistogram,
    pub served: u64,
    pub busy: u64,
}

impl Counters {
    pub(crate) fn snapshot(&self, index: u16, node_id: NodeId, connected: bool) -> PeerStats {
        PeerStats {
            index,
            node_id,
            connected,
            connects: self.connects,
            rtt_last: self.rtt_last,
            rtt_p50: self.rtt.quantile(0.5),
            rtt_p99: self.rtt.quantile(0.99),
            requests: self.requests,
            failures: self.failures,
            request_p50: self.request_latency.quantile(0.5),
            request_p99: self.request_latency.quantile(0.99),
            served: self.served,
            busy: self.busy,
        }
    }

    pub(crate) fn rtt(&mut self, rtt: Duration) {
        self.rtt_last = Some(rtt);
        self.rtt.record(rtt);
    }
}
