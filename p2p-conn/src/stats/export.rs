//! Publish [`ConnStats`] (and the send queue's figures) through the
//! [`metrics`](https://docs.rs/metrics) facade, to whatever exporter the
//! node installed (Prometheus, StatsD, …). Feature `metrics`.
//!
//! # Why `metrics`
//! It is a facade: the library names its series and the node picks the
//! exporter and its settings (including when idle series expire), with no
//! registry handle threaded through p2p-conn. `prometheus-client` would tie
//! every embedder to one format and make the node pass its `Registry` in.
//!
//! # Series
//! Call [`record`] for a connection whenever you want its series current
//! (every few seconds, and once at close). Values are the cumulative
//! counters, set absolutely, so calling more often costs only the call.
//! Labels: `peer` (node ID) and `direction` (`send`, `recv`).
//!
//! | name | what |
//! |---|---|
//! | `p2p_conn_frames_total` | frames sealed / opened |
//! | `p2p_conn_bytes_total` | plaintext bytes sealed / opened |
//! | `p2p_conn_wire_bytes_total` | sealed bytes written / read |
//! | `p2p_conn_io_calls_total` | write / read calls |
//! | `p2p_conn_crypto_microseconds_total` | time sealing / opening |
//! | `p2p_conn_io_microseconds_total` | time in write / read calls |
//! | `p2p_conn_not_ready_microseconds_total` | socket full (send) / waiting for the peer (recv) |
//! | `p2p_conn_short_writes_total` | short writes (send only) |
//!
//! [`record_queue`] adds, labelled by `peer` only: the gauges
//! `p2p_conn_queue_pending_bytes` and `p2p_conn_queue_pending_messages`,
//! and the counters `p2p_conn_queue_messages_total`,
//! `p2p_conn_queue_batches_total`, `p2p_conn_queue_overflows_total` and
//! `p2p_conn_queue_wait_microseconds_total`.
//!
//! Times are integer microseconds because the facade's counters are
//! integers. Cardinality: 15 connection series (7 names × 2 directions +
//! short writes) and 6 queue series per peer, so a node with 300 peers
//! exports about 6,300 series. Peers come and go: configure the exporter to
//! drop idle series (for `metrics-exporter-prometheus`, `idle_timeout`), or
//! the set grows with every peer ever seen.

use super::ConnStats;
use crate::NodeId;
use metrics::{counter, describe_counter, describe_gauge, Unit};

/// Describe every series (units and help text) to the installed
/// recorder. Call once after installing it; optional.
pub fn describe() {
    describe_counter!(
        "p2p_conn_frames_total",
        Unit::Count,
        "Frames sealed (send) or opened (recv)"
    );
    describe_counter!(
        "p2p_conn_bytes_total",
        Unit::Bytes,
        "Plaintext bytes sealed (send) or opened (recv)"
    );
    describe_counter!(
        "p2p_conn_wire_bytes_total",
        Unit::Bytes,
        "Sealed bytes written (send) or read (recv)"
    );
    describe_counter!(
        "p2p_conn_io_calls_total",
        Unit::Count,
        "Socket write (send) or read (recv) calls"
    );
    describe_counter!(
        "p2p_conn_crypto_microseconds_total",
        Unit::Microseconds,
        "Time spent sealing (send) or opening (recv)"
    );
    describe_counter!(
        "p2p_conn_io_microseconds_total",
        Unit::Microseconds,
        "Time spent in socket writes (send) or reads (recv)"
    );
    describe_counter!(
        "p2p_conn_not_ready_microseconds_total",
        Unit::Microseconds,
        "Time the socket was full (send) or the peer sent nothing (recv)"
    );
    describe_counter!(
        "p2p_conn_short_writes_total",
        Unit::Count,
        "Writes that took fewer bytes than offered"
    );
    describe_gauge!(
        "p2p_conn_queue_pending_bytes",
        Unit::Bytes,
        "Bytes queued and not yet sealed"
    );
    describe_gauge!(
        "p2p_conn_queue_pending_messages",
        Unit::Count,
        "Messages queued and not yet sealed"
    );
    describe_counter!(
        "p2p_conn_queue_messages_total",
        Unit::Count,
        "Messages sent through the queue"
    );
    describe_counter!(
        "p2p_conn_queue_batches_total",
        Unit::Count,
        "Batches written by the queue"
    );
    describe_counter!(
        "p2p_conn_queue_overflows_total",
        Unit::Count,
        "Messages that found the queue full"
    );
    describe_counter!(
        "p2p_conn_queue_wait_microseconds_total",
        Unit::Microseconds,
        "Summed time messages waited in the queue"
    );
}

fn us(d: std::time::Duration) -> u64 {
    d.as_micros().try_into().unwrap_or(u64::MAX)
}

/// Publish one connection's counters (see the module docs).
pub fn record(peer: &NodeId, stats: &ConnStats) {
    let peer = peer.to_string();
    let (s, r) = (&stats.send, &stats.recv);
    for (dir, frames, bytes, wire, calls, crypto, io, not_ready) in [
        (
            "send",
            s.frames_sealed,
            s.bytes_sealed,
            s.bytes_written,
            s.writes,
            s.seal_time,
            s.write_time,
            s.not_ready_time,
        ),
        (
            "recv",
            r.frames_opened,
            r.bytes_opened,
            r.bytes_read,
            r.reads,
            r.open_time,
            r.read_time,
            r.not_ready_time,
        ),
    ] {
        let labels = [("peer", peer.clone()), ("direction", dir.to_string())];
        counter!("p2p_conn_frames_total", &labels).absolute(frames);
        counter!("p2p_conn_bytes_total", &labels).absolute(bytes);
        counter!("p2p_conn_wire_bytes_total", &labels).absolute(wire);
        counter!("p2p_conn_io_calls_total", &labels).absolute(calls);
        counter!("p2p_conn_crypto_microseconds_total", &labels).absolute(us(crypto));
        counter!("p2p_conn_io_microseconds_total", &labels).absolute(us(io));
        counter!("p2p_conn_not_ready_microseconds_total", &labels).absolute(us(not_ready));
    }
    counter!("p2p_conn_short_writes_total", "peer" => peer, "direction" => "send")
        .absolute(s.short_writes);
}

/// Publish a send queue's figures (see the module docs).
#[cfg(feature = "queue")]
pub fn record_queue(peer: &NodeId, q: &super::QueueStats) {
    use metrics::gauge;
    let labels = [("peer", peer.to_string())];
    gauge!("p2p_conn_queue_pending_bytes", &labels).set(q.pending_bytes as f64);
    gauge!("p2p_conn_queue_pending_messages", &labels).set(q.pending_messages as f64);
    counter!("p2p_conn_queue_messages_total", &labels).absolute(q.messages_sent);
    counter!("p2p_conn_queue_batches_total", &labels).absolute(q.batches);
    counter!("p2p_conn_queue_overflows_total", &labels).absolute(q.overflows);
    counter!("p2p_conn_queue_wait_microseconds_total", &labels).absolute(us(q.queue_wait_time));
}
