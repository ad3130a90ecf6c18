//! `stats::export` (feature `metrics`, on by default): a connection's and a
//! send queue's figures reach an installed `metrics` recorder under the
//! documented names, labelled by peer and direction, with the values of
//! `stats()`.

#![cfg(feature = "metrics")]

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use metrics_util::MetricKind;
use p2p_conn::stats::export;
use p2p_conn::Config;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

type Series = Vec<(String, Vec<(String, String)>, MetricKind, DebugValue)>;

fn snapshot(snapshotter: &metrics_util::debugging::Snapshotter) -> Series {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let (kind, key) = (key.kind(), key.key().clone());
            let labels = key
                .labels()
                .map(|l| (l.key().to_string(), l.value().to_string()))
                .collect();
            (key.name().to_string(), labels, kind, value)
        })
        .collect()
}

fn value<'a>(series: &'a Series, name: &str, labels: &[(&str, &str)]) -> &'a DebugValue {
    let found: Vec<_> = series
        .iter()
        .filter(|(n, l, _, _)| {
            n == name
                && labels.len() == l.len()
                && labels
                    .iter()
                    .all(|(k, v)| l.iter().any(|(lk, lv)| lk == k && lv == v))
        })
        .collect();
    assert_eq!(found.len(), 1, "{name} {labels:?} in {series:#?}");
    &found[0].3
}

#[test]
fn connection_and_queue_series_carry_the_stats() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let cfg = Config::default();
            let (mut a, mut b) = crate::common::tokio_secret_pair(&cfg).await;
            a.write_all(&[5u8; 3000]).await.unwrap();
            a.flush().await.unwrap();
            let mut got = [0u8; 3000];
            b.read_exact(&mut got).await.unwrap();
            b.write_all(b"pong").await.unwrap();
            let mut pong = [0u8; 4];
            a.read_exact(&mut pong).await.unwrap();

            export::describe();
            let peer = a.remote_node_id();
            let stats = a.stats();
            export::record(&peer, &stats);
            let series = snapshot(&snapshotter);
            let p = peer.to_string();
            let send = [("peer", p.as_str()), ("direction", "send")];
            let recv = [("peer", p.as_str()), ("direction", "recv")];
            assert_eq!(
                value(&series, "p2p_conn_frames_total", &send),
                &DebugValue::Counter(3)
            );
            assert_eq!(
                value(&series, "p2p_conn_bytes_total", &send),
                &DebugValue::Counter(3000)
            );
            assert_eq!(
                value(&series, "p2p_conn_wire_bytes_total", &send),
                &DebugValue::Counter(stats.send.bytes_written)
            );
            assert_eq!(
                value(&series, "p2p_conn_bytes_total", &recv),
                &DebugValue::Counter(4)
            );
            assert_eq!(
                value(&series, "p2p_conn_io_calls_total", &recv),
                &DebugValue::Counter(stats.recv.reads)
            );
            assert_eq!(
                value(&series, "p2p_conn_crypto_microseconds_total", &send),
                &DebugValue::Counter(stats.send.seal_time.as_micros() as u64)
            );
            assert_eq!(
                value(&series, "p2p_conn_short_writes_total", &send),
                &DebugValue::Counter(0)
            );
            // 7 names x 2 directions + short writes.
            assert_eq!(series.len(), 15, "{series:#?}");

            // The queue's series, labelled by peer.
            let (_read, write) = a.into_split();
            let q = p2p_conn::io::queue::Sender::new(write, &Default::default()).unwrap();
            for i in 0..5u8 {
                q.send(vec![i; 100]).await.unwrap();
            }
            q.flush().await.unwrap();
            export::record_queue(&peer, &q.stats());
            let series = snapshot(&snapshotter);
            let only_peer = [("peer", p.as_str())];
            assert_eq!(
                value(&series, "p2p_conn_queue_messages_total", &only_peer),
                &DebugValue::Counter(5)
            );
            assert_eq!(
                value(&series, "p2p_conn_queue_pending_bytes", &only_peer),
                &DebugValue::Gauge(0.0.into())
            );
        });
    });
}
