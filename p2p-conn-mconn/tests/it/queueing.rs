//! What a saturated `MConnection` holds in front of an application: the
//! adapter's own queues are bounded in bytes, so under load a message
//! waits behind at most a few milliseconds of the link, not tens.

use std::time::{Duration, Instant};

use p2p_conn::testkit::{payload, tokio_secret_pair};
use p2p_conn::Config;
use p2p_conn_mconn::{ChannelDescriptor, MConnConfig, MConnSender, MConnection, Received};

const LIMIT: Duration = Duration::from_secs(20);

/// The most bytes of received messages the adapter holds for an
/// application that does not read: its receive buffer (256 KiB) plus the
/// batch the reader holds while it waits for room (up to 64 KiB, and the
/// message that took it there). At 200 MB/s, under 2 ms.
const MOST_HELD_FOR_THE_APPLICATION: usize = 320 * 1024;

/// The most bytes of batches waiting in the send queue: two of 64 KiB.
const MOST_QUEUED_FOR_THE_SOCKET: usize = 128 * 1024;

/// Queue messages of `msg_len` bytes on channel 0x20 (its queue large
/// enough never to refuse) until nothing has
/// left the channel's queue for 300 ms (the peer has stopped taking
/// bytes); returns how many were queued.
async fn fill_until_stalled(tx: &MConnSender, msg_len: usize) -> u64 {
    let mut sent = 0u64;
    let mut last = (usize::MAX, Instant::now());
    let start = Instant::now();
    loop {
        // Keep 1 MiB queued: more than a batch, no more than needed.
        while tx.channel_stats(0x20).unwrap().queued_bytes < 1 << 20 {
            tx.try_send(0x20, payload(msg_len, sent)).unwrap();
            sent += 1;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        let queued = tx.channel_stats(0x20).unwrap().queued_bytes;
        if queued != last.0 {
            last = (queued, Instant::now());
        } else if last.1.elapsed() >= Duration::from_millis(300) {
            return sent;
        }
        assert!(start.elapsed() < LIMIT, "never stalled");
    }
}

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
