//! `mconn::MConnection` against itself over loopback TCP: back-pressure
//! from the byte-capped send queues through a receiver that does not read,
//! the send rate limit, stats, close semantics, and the `tracing` events
//! naming the peer and the channel.

use std::time::{Duration, Instant};

use p2p_conn::testkit::{payload, tokio_secret_pair};
use p2p_conn::Config;

use crate::common::channel;
use p2p_conn_mconn::{
    ChannelDescriptor, MConnCloseReason, MConnConfig, MConnError, MConnReceiver, MConnSendError,
    MConnSender, MConnection, Received, CLOSE_TIMEOUT, RECV_BUFFER_BYTES,
};

const LIMIT: Duration = Duration::from_secs(20);

async fn next(rx: &mut MConnReceiver) -> Received {
    tokio::time::timeout(LIMIT, rx.recv())
        .await
        .expect("nothing in time")
        .expect("receiver ended")
}

fn message(r: Received) -> (u8, Vec<u8>) {
    match r {
        Received::Message { channel, data } => (channel, data.to_vec()),
        other => panic!("not a message: {other:?}"),
    }
}

/// A receiver that does not read: its queue fills (1 MiB), its reader
/// stops, the kernel buffers fill, our writer stalls, and our 64 KiB send
/// queue fills: `try_send` refuses with `SendQueueFull`, `send` waits, and
/// everything arrives, in order, once the receiver reads.
/// `try_send` messages of `msg_len` bytes on channel 0x20 (numbered from
/// `sent`, which counts them) until nothing has left the channel's queue
/// for 300 ms: the peer has stopped taking bytes.
async fn fill_until_stalled(tx: &MConnSender, msg_len: usize, sent: &mut u64) {
    let mut last = (usize::MAX, Instant::now());
    loop {
        match tx.try_send(0x20, payload(msg_len, *sent)) {
            Ok(()) => *sent += 1,
            Err(MConnSendError::Refused(MConnError::SendQueueFull { .. })) => {
                let queued = channel(&tx.stats(), 0x20).unwrap().queued_bytes;
                if queued != last.0 {
                    last = (queued, Instant::now());
                } else if last.1.elapsed() >= Duration::from_millis(300) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Err(e) => panic!("{e:?}"),
        }
        assert!(*sent < 100_000, "never stalled");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn back_pressure_reaches_the_sender() {
    let (a, b) = tokio_secret_pair(&Config::default()).await;
    let cap = 64 * 1024;
    let ch = [ChannelDescriptor::new(0x20).with_send_queue_capacity(cap)];
    let (tx, _arx) = MConnection::spawn(a, &ch, MConnConfig::default()).unwrap();
    let (_btx, mut brx) = MConnection::spawn(b, &ch, MConnConfig::default()).unwrap();
    let msg_len = 16 * 1024;
    let mut sent = 0u64;
    // Fill until the queue stays full (no byte leaves it for 300 ms), then
    // `send` one more, which must wait. The kernel may still grow its
    // buffers (TCP autotuning) and take more: then fill again.
    let mut waiting = None;
    for _attempt in 0..20 {
        fill_until_stalled(&tx, msg_len, &mut sent).await;
        let stats = channel(&tx.stats(), 0x20).unwrap();
        assert!(stats.queued_bytes + msg_len > cap, "{stats:?}");
        let task = {
            let tx = tx.clone();
            let seq = sent;
            tokio::spawn(async move { tx.send(0x20, payload(msg_len, seq)).await })
        };
        sent += 1;
        tokio::time::sleep(Duration::from_millis(200)).await;
        if !task.is_finished() {
            waiting = Some(task);
            break;
        }
        task.await.unwrap().expect("send");
    }
    let waiting = waiting.expect("send never waited for room");
    eprintln!("stalled after {sent} messages of {msg_len} bytes");
    // More than the receive queue, the kernel buffers and our queue hold
    // nothing less.
    assert!(
        sent as usize * msg_len > RECV_BUFFER_BYTES,
        "stalled after {sent} messages"
    );
    // The receiver reads: everything arrives in order, the waiting send
    // with it.
    for seq in 0..sent {
        let (channel, data) = message(next(&mut brx).await);
        assert_eq!(channel, 0x20);
        assert_eq!(data, payload(msg_len, seq), "message {seq}");
    }
    waiting.await.unwrap().expect("the waiting send");
    // A message over the whole queue never fits: refused by both.
    let huge = vec![0u8; cap + 1];
    assert!(matches!(
        tx.try_send(0x20, huge.clone()),
        Err(MConnSendError::Refused(MConnError::SendQueueFull { .. }))
    ));
    assert!(matches!(
        tx.send(0x20, huge).await,
        Err(MConnSendError::Refused(MConnError::SendQueueFull { .. }))
    ));
    assert!(matches!(
        tx.try_send(0x21, vec![1]),
        Err(MConnSendError::Refused(MConnError::UnknownChannel(0x21)))
    ));
}

/// 300 KB at a send rate of 100 KB/s cannot arrive in under 1.9 s (the
/// bucket holds 100 ms of rate at most): a lower bound, not a speed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_rate_limits() {
    let (a, b) = tokio_secret_pair(&Config::default()).await;
    let ch = [ChannelDescriptor::new(0x20)];
    let limited = MConnConfig::default().with_rates(Some(100_000), None);
    let (tx, _arx) = MConnection::spawn(a, &ch, limited).unwrap();
    let (_btx, mut brx) = MConnection::spawn(b, &ch, MConnConfig::default()).unwrap();
    let started = Instant::now();
    tx.send(0x20, payload(300_000, 1)).await.unwrap();
    let (_, data) = message(next(&mut brx).await);
    assert_eq!(data, payload(300_000, 1));
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(1900), "{took:?}");
    let stats = tx.stats();
    assert_eq!(stats.channels[0].messages_sent, 1);
    assert_eq!(stats.channels[0].bytes_sent, 300_000);
}

/// `close` sends what is queued, then ends the stream: the peer gets every
/// message, then `PeerClosed`; we get `Local`, and sends after it fail
/// with the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_flushes_then_ends() {
    let (a, b) = tokio_secret_pair(&Config::default()).await;
    let ch = [
        ChannelDescriptor::new(0x20),
        ChannelDescriptor::new(0x21).with_priority(3),
    ];
    let (tx, mut arx) = MConnection::spawn(a, &ch, MConnConfig::default()).unwrap();
    let (_btx, mut brx) = MConnection::spawn(b, &ch, MConnConfig::default()).unwrap();
    for i in 0..10u64 {
        tx.try_send(0x20 + (i % 2) as u8, payload(5000, i)).unwrap();
    }
    tx.close();
    let mut got = Vec::new();
    loop {
        match next(&mut brx).await {
            Received::Message { channel, data } => got.push((channel, data.len())),
            Received::Closed(r) => {
                assert_eq!(
                    r,
                    MConnCloseReason::PeerClosed {
                        after_message: None
                    }
                );
                break;
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(got.len(), 10, "{got:?}");
    assert_eq!(
        next(&mut arx).await,
        Received::Closed(MConnCloseReason::Local)
    );
    assert_eq!(arx.recv().await, None);
    assert!(matches!(
        tx.try_send(0x20, vec![1]),
        Err(MConnSendError::Closed(MConnCloseReason::Local))
    ));
}

/// A peer that never reads: our writer stalls with the kernel buffers and
/// the send queue full. `close` still ends the connection within
/// `CLOSE_TIMEOUT` (plus slack for a loaded machine), where a writer
/// waiting on the stream would hold the task forever; and the stream is
/// released: the peer, reading at last, comes to its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_is_bounded_when_the_peer_never_reads() {
    use tokio::io::AsyncReadExt;
    let (a, mut b) = tokio_secret_pair(&Config::default()).await;
    let cap = 256 * 1024;
    let ch = [ChannelDescriptor::new(0x20).with_send_queue_capacity(cap)];
    let (tx, mut arx) = MConnection::spawn(a, &ch, MConnConfig::default()).unwrap();
    // Fill until nothing leaves the channel's queue for 300 ms.
    let msg_len = 16 * 1024;
    let mut sent = 0u64;
    fill_until_stalled(&tx, msg_len, &mut sent).await;
    let q = tx.queue_stats();
    assert!(
        q.pending_bytes > 0,
        "the send queue is not holding batches: {q:?}"
    );
    assert!(q.overflows > 0, "the writer never waited for room: {q:?}");
    let start = Instant::now();
    tx.close();
    let bound = CLOSE_TIMEOUT + Duration::from_secs(5);
    let got = tokio::time::timeout(bound, arx.recv())
        .await
        .unwrap_or_else(|_| panic!("the connection outlived close() by {bound:?}"));
    assert_eq!(got, Some(Received::Closed(MConnCloseReason::Local)));
    assert!(start.elapsed() >= CLOSE_TIMEOUT, "gave up before the bound");
    // Our write half is gone: reading drains what the kernels hold, then
    // ends (end of stream, or a frame cut short), rather than waiting.
    let mut buf = vec![0u8; 64 * 1024];
    let mut read = 0usize;
    let end = tokio::time::timeout(LIMIT, async {
        loop {
            match b.read(&mut buf).await {
                Ok(0) => return Ok(()),
                Ok(n) => read += n,
                Err(e) => return Err(e),
            }
        }
    })
    .await
    .expect("the peer's stream never ended");
    assert!(read > 0, "{end:?}");
    assert!(
        (read as u64) < sent * msg_len as u64,
        "everything arrived: the close did not stop early ({read} bytes)"
    );
}

#[cfg(feature = "tokio")]
mod tracing_events {
    use super::*;

    /// `mconn up`, `mconn closed` (cause, counts) and one `mconn channel` per
    /// channel, each naming the peer. A current-thread runtime, so the tasks
    /// run under the test's thread-local subscriber.
    #[test]
    fn tracing_events_name_the_peer_and_the_channel() {
        let (log, _guard) = p2p_conn_interop::capture::capture();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (a_peer, b_peer) = rt.block_on(async {
            let (a, b) = tokio_secret_pair(&Config::default()).await;
            let (a_peer, b_peer) = (a.remote_node_id(), b.remote_node_id());
            let ch = [ChannelDescriptor::new(0x20), ChannelDescriptor::new(0x30)];
            let (tx, mut arx) = MConnection::spawn(a, &ch, MConnConfig::default()).unwrap();
            let (_btx, mut brx) = MConnection::spawn(b, &ch, MConnConfig::default()).unwrap();
            tx.send(0x30, vec![7; 3000]).await.unwrap();
            message(next(&mut brx).await);
            tx.close();
            next(&mut arx).await;
            next(&mut brx).await;
            (a_peer, b_peer)
        });
        let text = log.text();
        let lines = |what: &str| -> Vec<String> {
            text.lines()
                .filter(|l| l.contains(what))
                .map(str::to_string)
                .collect()
        };
        assert_eq!(lines("mconn up").len(), 2, "{text}");
        let closed = lines("mconn closed");
        assert_eq!(closed.len(), 2, "{text}");
        let ours = closed
            .iter()
            .find(|l| l.contains(&a_peer.to_string()))
            .unwrap_or_else(|| panic!("no close naming {a_peer}: {text}"));
        assert!(ours.contains("cause=closed locally"), "{ours}");
        let theirs = closed
            .iter()
            .find(|l| l.contains(&b_peer.to_string()))
            .unwrap_or_else(|| panic!("no close naming {b_peer}: {text}"));
        assert!(theirs.contains("the peer closed"), "{theirs}");
        let channel = lines("mconn channel");
        assert_eq!(channel.len(), 4, "{text}");
        assert!(
            channel.iter().any(|l| l.contains(&a_peer.to_string())
                && l.contains("channel=0x30")
                && l.contains("messages_sent=1")
                && l.contains("bytes_sent=3000")),
            "{text}"
        );
    }
}

/// A peer that hangs up right after our message (what a CometBFT node does
/// when its reactor cannot decode it) gets a close reason naming that
/// message's channel and what a node does; a peer that hangs up with
/// nothing sent gets the plain reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_close_right_after_our_message_names_it() {
    let ch = [ChannelDescriptor::new(0x20), ChannelDescriptor::new(0x30)];

    let (a, b) = tokio_secret_pair(&Config::default()).await;
    let (tx, mut arx) = MConnection::spawn(a, &ch, MConnConfig::default()).unwrap();
    let (btx, mut brx) = MConnection::spawn(b, &ch, MConnConfig::default()).unwrap();
    tx.send(0x30, b"hello".to_vec()).await.unwrap();
    assert_eq!(message(next(&mut brx).await), (0x30, b"hello".to_vec()));
    btx.close(); // the peer "rejects" it and hangs up
    let Received::Closed(why) = next(&mut arx).await else {
        panic!("not closed")
    };
    let text = why.to_string();
    assert!(
        text.starts_with("the peer closed the connection")
            && text.contains("after our message on channel 0x30")
            && text.contains("cannot decode"),
        "{text}"
    );

    let (a, b) = tokio_secret_pair(&Config::default()).await;
    let (_tx, mut arx) = MConnection::spawn(a, &ch, MConnConfig::default()).unwrap();
    let (btx, _brx) = MConnection::spawn(b, &ch, MConnConfig::default()).unwrap();
    btx.close();
    let Received::Closed(why) = next(&mut arx).await else {
        panic!("not closed")
    };
    assert_eq!(why.to_string(), "the peer closed the connection");
}

/// The channel list a NodeInfo announces comes from the descriptors, and
/// the stats print in words: totals, then one line per channel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channel_ids_and_stats_in_words() {
    let ch = [
        ChannelDescriptor::new(0x00),
        ChannelDescriptor::new(0x20).with_priority(5),
    ];
    assert_eq!(ChannelDescriptor::ids(&ch), vec![0x00, 0x20]);
    let (a, b) = tokio_secret_pair(&Config::default()).await;
    let (tx, _arx) = MConnection::spawn(a, &ch, MConnConfig::default()).unwrap();
    let (_btx, mut brx) = MConnection::spawn(b, &ch, MConnConfig::default()).unwrap();
    tx.send(0x20, payload(3000, 1)).await.unwrap();
    assert_eq!(message(next(&mut brx).await).0, 0x20);
    let text = tx.stats().to_string();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[0].starts_with("mconn: "), "{text}");
    assert!(lines[0].contains("pings 0 sent"), "{text}");
    assert!(
        lines[2].contains("0x20: sent 1 messages (3000 B, 3 packets)"),
        "{text}"
    );
    assert!(lines[1].contains("0x00: sent 0 messages"), "{text}");
}
