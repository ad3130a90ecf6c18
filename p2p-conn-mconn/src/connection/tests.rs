//! Over real secret connections on loopback TCP: wake-ups per batch,
//! not per message (the counters of [`Wakes`]), and what a saturated
//! connection holds in front of the application and of the socket
//! (bounded in bytes, so a message waits behind a few milliseconds of
//! the link, not tens).

use std::time::Duration;

use p2p_conn::testkit::{payload, tokio_secret_pair};
use p2p_conn::Config;
use tokio::io::AsyncWriteExt;

use super::*;
use crate::packet::{encode_packet, Packet, PacketMsg};

const LIMIT: Duration = Duration::from_secs(20);

/// Queue messages of `msg_len` bytes on channel 0x20 (its queue large
/// enough never to refuse) until nothing has left the channel's queue
/// for 300 ms: the peer has stopped taking bytes, and our writer waits
/// for the send queue. Returns how many were queued.
async fn fill_until_stalled(tx: &MConnSender, msg_len: usize) -> u64 {
    let mut sent = 0u64;
    let mut last = (usize::MAX, Instant::now());
    let start = Instant::now();
    loop {
        // Keep 1 MiB queued: more than a batch, no more than needed.
        while tx.shared.core().channel_stats(0x20).unwrap().queued_bytes < 1 << 20 {
            tx.try_send(0x20, payload(msg_len, sent)).unwrap();
            sent += 1;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        let queued = tx.shared.core().channel_stats(0x20).unwrap().queued_bytes;
        if queued != last.0 {
            last = (queued, Instant::now());
        } else if last.1.elapsed() >= Duration::from_millis(300) {
            return sent;
        }
        assert!(start.elapsed() < LIMIT, "never stalled");
    }
}

/// A writer waiting for the send queue is not woken by each message
/// queued meanwhile: it takes them all with its next batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sends_do_not_wake_a_busy_writer() {
    let (a, b) = tokio_secret_pair(&Config::default()).await;
    let ch = [ChannelDescriptor::new(0x20).with_send_queue_capacity(256 << 20)];
    let (tx, _arx) = MConnection::spawn(a, &ch, MConnConfig::default()).unwrap();
    // A peer that never reads: its receive buffer, the kernel's buffers
    // and our send queue fill, and our writer waits for room.
    let (_btx, _brx) = MConnection::spawn(b, &ch, MConnConfig::default()).unwrap();
    fill_until_stalled(&tx, 16 * 1024).await;
    let wakes = &tx.shared.wakes.writer;
    let before = wakes.load(Ordering::Relaxed);
    for _ in 0..100 {
        tx.try_send(0x20, vec![1u8; 100]).unwrap();
        tokio::task::yield_now().await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let woken = wakes.load(Ordering::Relaxed) - before;
    assert!(
        woken <= 1,
        "the writer woke {woken} times for 100 messages while it waited for the send queue"
    );
}

/// Producers that become runnable together share one batch: the woken
/// writer lets them queue before it cuts it, rather than sending the
/// first producer's message alone and each other's after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn producers_woken_together_share_a_batch() {
    let (a, b) = tokio_secret_pair(&Config::default()).await;
    let ch: Vec<_> = (0x20..0x24).map(ChannelDescriptor::new).collect();
    let (tx, _arx) = MConnection::spawn(a, &ch, MConnConfig::default()).unwrap();
    let (_btx, mut brx) = MConnection::spawn(b, &ch, MConnConfig::default()).unwrap();
    let go = Arc::new(Notify::new());
    let producers: Vec<_> = (0x20..0x24u8)
        .map(|channel| {
            let (tx, go) = (tx.clone(), Arc::clone(&go));
            tokio::spawn(async move {
                go.notified().await;
                tx.send(channel, vec![channel; 200]).await.unwrap();
            })
        })
        .collect();
    // Every producer waits; then all four become runnable at once: woken
    // by a task on the worker, so that all four are in its run queue
    // together (woken from the test's own thread, they reach the worker
    // one by one through the runtime's shared queue, as far apart as
    // that thread's time slices, and a loaded machine split them).
    tokio::time::sleep(Duration::from_millis(50)).await;
    let before = tx.queue_stats().messages_sent;
    tokio::spawn(async move { go.notify_waiters() })
        .await
        .unwrap();
    for p in producers {
        p.await.unwrap();
    }
    for _ in 0..4 {
        let event = tokio::time::timeout(LIMIT, brx.recv()).await.unwrap();
        assert!(matches!(event, Some(Received::Message { .. })), "{event:?}");
    }
    let batches = tx.queue_stats().messages_sent - before;
    assert_eq!(batches, 1, "4 producers woken together: {batches} batches");
}

/// Messages that arrive together reach the receiver together: 300
/// messages in one write are a handful of deliveries (one per read at
/// most), not 300.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_read_together_are_one_delivery() {
    let (mut a, b) = tokio_secret_pair(&Config::default()).await;
    let ch = [ChannelDescriptor::new(0x20)];
    let (_btx, mut brx) = MConnection::spawn(b, &ch, MConnConfig::default()).unwrap();
    let mut wire = Vec::new();
    for i in 0..300u32 {
        let data = i.to_le_bytes().repeat(50);
        let msg = PacketMsg {
            channel_id: 0x20,
            eof: true,
            data,
        };
        encode_packet(&Packet::Msg(msg), &mut wire);
    }
    a.write_all(&wire).await.unwrap();
    a.flush().await.unwrap();
    for i in 0..300u32 {
        let event = tokio::time::timeout(LIMIT, brx.recv()).await.unwrap();
        let Some(Received::Message { channel, data }) = event else {
            panic!("message {i}: {event:?}");
        };
        assert_eq!(
            (channel, &data[..]),
            (0x20, &i.to_le_bytes().repeat(50)[..])
        );
    }
    let deliveries = brx.shared.wakes.deliveries.load(Ordering::Relaxed);
    assert!(
        deliveries <= 10,
        "300 messages written at once took {deliveries} deliveries"
    );
    drop(a);
}

/// The most bytes of received messages the adapter holds for an
/// application that does not read: its receive buffer (256 KiB) plus the
/// batch the reader holds while it waits for room (up to 64 KiB, and the
/// message that took it there). At 200 MB/s, under 2 ms.
const MOST_HELD_FOR_THE_APPLICATION: usize = 320 * 1024;

/// The most bytes of batches waiting in the send queue: two of 64 KiB.
const MOST_QUEUED_FOR_THE_SOCKET: usize = 128 * 1024;

/// A receiver that does not read: the peer's reader stops once the
/// receive buffer is full, so the messages it has decoded and not handed
/// out stay under the bound (the rest waits in TCP's buffers, where
/// back-pressure to the sender starts); our send queue holds at most two
/// batches. Everything arrives, in order, once the receiver reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saturated_connection_holds_a_bounded_backlog() {
    let (a, b) = tokio_secret_pair(&Config::default()).await;
    let ch = [ChannelDescriptor::new(0x20).with_send_queue_capacity(256 << 20)];
    let (tx, _arx) = MConnection::spawn(a, &ch, MConnConfig::default()).unwrap();
    let (_btx, mut brx) = MConnection::spawn(b, &ch, MConnConfig::default()).unwrap();
    let msg_len = 1000;
    let sent = fill_until_stalled(&tx, msg_len).await;
    let decoded = brx.stats().channels[0].messages_received as usize;
    assert!(
        decoded * msg_len <= MOST_HELD_FOR_THE_APPLICATION,
        "{decoded} messages of {msg_len} bytes decoded and waiting for the application"
    );
    let queued = tx.queue_stats().pending_bytes;
    assert!(
        queued <= MOST_QUEUED_FOR_THE_SOCKET,
        "{queued} bytes of batches waiting in the send queue"
    );
    for seq in 0..sent {
        let event = tokio::time::timeout(LIMIT, brx.recv()).await.unwrap();
        let Some(Received::Message { channel, data }) = event else {
            panic!("message {seq}: {event:?}");
        };
        assert_eq!(channel, 0x20);
        assert_eq!(data, payload(msg_len, seq), "message {seq}");
    }
}
