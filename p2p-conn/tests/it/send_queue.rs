//! The send queue (`io::queue`) over real loopback TCP: many producers and
//! bundles, the byte cap under each overflow policy, large messages, the
//! bounded shutdown, and packed frames read by CometBFT's Go implementation
//! and by tendermint-p2p as one stream.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::common::go_peer::{go_listen, go_peer, GoVersion};
use crate::common::process::Feed;
use bytes::Bytes;
use p2p_conn::io::queue::{CloseReason, Overflow, QueueConfig, SendError, Sender};
use p2p_conn::io::tokio::{handshake, SecretConnection};
use p2p_conn::{Config, Identity};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpSocket, TcpStream};

/// Our queue over a fresh loopback connection, and the peer's connection.
/// `buffers` (bytes) shrinks the peer's receive buffer and our send buffer so
/// that a peer that does not read stalls the writer quickly.
struct Pair {
    sender: Sender,
    /// Keeps our read half (and so the connection) open.
    _ours: p2p_conn::io::tokio::ReadHalf<tokio::net::tcp::OwnedReadHalf>,
    peer: SecretConnection<TcpStream>,
}

async fn pair(cfg: &QueueConfig, buffers: Option<u32>) -> Pair {
    let listen = TcpSocket::new_v4().unwrap();
    if let Some(b) = buffers {
        listen.set_recv_buffer_size(b).unwrap();
    }
    listen.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener: TcpListener = listen.listen(8).unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let peer_cfg = Config::default();
    let peer = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        handshake(tcp, &Identity::generate(), &peer_cfg)
            .await
            .unwrap()
    });
    let dial = TcpSocket::new_v4().unwrap();
    if let Some(b) = buffers {
        dial.set_send_buffer_size(b).unwrap();
    }
    let tcp = dial.connect(addr).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    let conn = handshake(tcp, &Identity::generate(), &Config::default())
        .await
        .unwrap();
    let (ours, write) = conn.into_split();
    let sender = Sender::with_addr(write, Some(addr), cfg).unwrap();
    Pair {
        sender,
        _ours: ours,
        peer: peer.await.unwrap(),
    }
}

/// Read until end of stream; `Err` if the stream ended badly.
async fn read_to_end(peer: &mut SecretConnection<TcpStream>) -> std::io::Result<Vec<u8>> {
    let mut all = Vec::new();
    peer.read_to_end(&mut all).await?;
    Ok(all)
}

/// A self-describing test message: producer, sequence number, bundle id,
/// index in the bundle and bundle size, then `len` payload bytes.
fn message(producer: u8, seq: u32, bundle: u32, index: u8, count: u8, len: u16) -> Bytes {
    let mut m = vec![producer];
    m.extend_from_slice(&seq.to_le_bytes());
    m.extend_from_slice(&bundle.to_le_bytes());
    m.extend_from_slice(&[index, count]);
    m.extend_from_slice(&len.to_le_bytes());
    m.extend((0..len).map(|i| (i as u8) ^ producer ^ (seq as u8)));
    Bytes::from(m)
}

const HEADER: usize = 1 + 4 + 4 + 2 + 2;

/// Socket buffers of 4 KiB: a peer that does not read stalls the writer
/// after a few KiB.
const SMALL: Option<u32> = Some(4096);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_producers_bundles_arrive_whole_once_and_in_order() {
    let cfg = QueueConfig::default();
    let mut p = pair(&cfg, None).await;
    const PRODUCERS: u8 = 4;
    const BUNDLES: u32 = 300;
    let mut tasks = Vec::new();
    for producer in 0..PRODUCERS {
        let sender = p.sender.clone();
        tasks.push(tokio::spawn(async move {
            let mut seq = 0u32;
            for bundle in 0..BUNDLES {
                // 1 to 5 messages of 0 to 1500 payload bytes.
                let count = (bundle % 5 + 1) as u8;
                let msgs: Vec<Bytes> = (0..count)
                    .map(|i| {
                        let len = ((bundle * 37 + u32::from(i) * 101) % 1500) as u16;
                        let m = message(producer, seq, bundle, i, count, len);
                        seq += 1;
                        m
                    })
                    .collect();
                if count == 1 {
                    sender.send(msgs[0].clone()).await.unwrap();
                } else {
                    sender.send_bundle(msgs).await.unwrap();
                }
                if bundle % 50 == 0 {
                    tokio::task::yield_now().await;
                }
            }
            seq
        }));
    }
    let mut sent = Vec::new();
    for t in tasks {
        sent.push(t.await.unwrap());
    }
    p.sender.flush().await.unwrap();
    let stats = p.sender.stats();
    p.sender.shutdown();
    let stream = read_to_end(&mut p.peer).await.unwrap();

    // Parse the stream back into messages.
    let mut next_seq = [0u32; PRODUCERS as usize];
    let mut open_bundle: Option<(u8, u32, u8, u8)> = None; // producer, bundle, next index, count
    let mut at = 0;
    let mut messages = 0u64;
    while at < stream.len() {
        let h = &stream[at..at + HEADER];
        let producer = h[0];
        let seq = u32::from_le_bytes(h[1..5].try_into().unwrap());
        let bundle = u32::from_le_bytes(h[5..9].try_into().unwrap());
        let (index, count) = (h[9], h[10]);
        let len = u16::from_le_bytes(h[11..13].try_into().unwrap()) as usize;
        let body = &stream[at + HEADER..at + HEADER + len];
        assert!(
            body.iter()
                .enumerate()
                .all(|(i, &b)| b == (i as u8) ^ producer ^ (seq as u8)),
            "payload of producer {producer} seq {seq}"
        );
        // Exactly once, in per-producer order.
        assert_eq!(seq, next_seq[producer as usize], "producer {producer}");
        next_seq[producer as usize] += 1;
        // Bundles are contiguous: a bundle's next message follows at once.
        match open_bundle {
            Some((p0, b0, i0, c0)) => {
                assert_eq!(
                    (producer, bundle, index, count),
                    (p0, b0, i0, c0),
                    "bundle {b0} of producer {p0} interleaved"
                );
            }
            None => assert_eq!(index, 0, "a bundle starts at its first message"),
        }
        open_bundle = (index + 1 < count).then_some((producer, bundle, index + 1, count));
        at += HEADER + len;
        messages += 1;
    }
    assert!(open_bundle.is_none());
    assert_eq!(next_seq.to_vec(), sent);
    assert_eq!(stats.messages_sent, messages);
    assert_eq!((stats.pending_bytes, stats.pending_messages), (0, 0));
    assert!(stats.batches >= 1 && stats.batches <= messages);
    let per_batch = stats.messages_per_batch();
    assert!((per_batch - messages as f64 / stats.batches as f64).abs() < 1e-9);
    assert!(per_batch >= 1.0, "{per_batch}");
}

/// Queue 1 KiB messages until the policy answers (the peer does not read).
async fn fill(sender: &Sender) -> (usize, SendError) {
    for n in 0.. {
        let r = tokio::time::timeout(Duration::from_secs(5), sender.send(vec![7u8; 1024]))
            .await
            .expect("send must not wait under this policy");
        if let Err(e) = r {
            return (n, e);
        }
    }
    unreachable!()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overflow_disconnect_closes_once_without_a_torn_frame() {
    let cfg = QueueConfig::default()
        .max_pending_bytes(64 * 1024)
        .overflow(Overflow::Disconnect);
    let mut p = pair(&cfg, SMALL).await;
    let (accepted, e) = fill(&p.sender).await;
    assert!(
        matches!(
            e,
            SendError::Closed {
                reason: CloseReason::Overflow { max: 65536, .. },
                ..
            }
        ),
        "{e}"
    );
    // Exactly one disconnect: later sends fail with the same reason and
    // count no new overflow.
    let overflows = p.sender.stats().overflows;
    assert_eq!(overflows, 1);
    let again = p.sender.send(vec![1u8; 10]).await.unwrap_err();
    assert!(matches!(
        again,
        SendError::Closed {
            reason: CloseReason::Overflow { .. },
            ..
        }
    ));
    assert_eq!(p.sender.stats().overflows, 1);
    // The peer reads now: whole frames only, then a clean end of stream.
    let got = tokio::time::timeout(Duration::from_secs(10), read_to_end(&mut p.peer))
        .await
        .expect("the FIN comes")
        .expect("no torn frame: the stream ends between frames");
    assert_eq!(got.len() % 1024, 0);
    assert!(got.len() <= accepted * 1024);
    assert!(got.iter().all(|&b| b == 7));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overflow_error_fails_the_send_and_the_connection_stays_usable() {
    let cfg = QueueConfig::default()
        .max_pending_bytes(64 * 1024)
        .overflow(Overflow::Error);
    let mut p = pair(&cfg, SMALL).await;
    let (accepted, e) = fill(&p.sender).await;
    assert!(matches!(e, SendError::Full { max: 65536, .. }), "{e}");
    assert!(p.sender.close_reason().is_none());
    // The peer reads everything that was accepted; then sending works again.
    let mut buf = vec![0u8; accepted * 1024];
    p.peer.read_exact(&mut buf).await.unwrap();
    assert!(buf.iter().all(|&b| b == 7));
    p.sender.send(&b"after"[..]).await.unwrap();
    p.sender.flush().await.unwrap();
    let mut tail = [0u8; 5];
    p.peer.read_exact(&mut tail).await.unwrap();
    assert_eq!(&tail, b"after");
    assert!(p.sender.stats().overflows >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overflow_backpressure_waits_until_the_peer_reads() {
    let cfg = QueueConfig::default()
        .max_pending_bytes(64 * 1024)
        .overflow(Overflow::Backpressure);
    let mut p = pair(&cfg, SMALL).await;
    // Queue until a send waits.
    let mut queued = 0usize;
    let blocked = loop {
        let send = p.sender.send(vec![9u8; 1024]);
        match tokio::time::timeout(Duration::from_millis(300), send).await {
            Ok(r) => {
                r.unwrap();
                queued += 1;
            }
            Err(_) => break queued,
        }
    };
    assert!(blocked > 0);
    // A waiting send continues once the peer reads.
    let sender = p.sender.clone();
    let waiting = tokio::spawn(async move { sender.send(vec![9u8; 1024]).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !waiting.is_finished(),
        "the send waits while the peer does not read"
    );
    let reader = tokio::spawn(async move {
        let mut n = 0usize;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let k = p.peer.read(&mut buf).await.unwrap();
            if k == 0 {
                return n;
            }
            assert!(buf[..k].iter().all(|&b| b == 9));
            n += k;
        }
    });
    tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the send finishes once the peer reads")
        .unwrap()
        .unwrap();
    p.sender.shutdown();
    let total = tokio::time::timeout(Duration::from_secs(10), reader)
        .await
        .unwrap()
        .unwrap();
    // Every message that was accepted arrived: the ones queued before the
    // wait (the timed-out send was dropped before it queued anything) and the
    // waiting one.
    assert_eq!(total, (blocked + 1) * 1024);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_at_the_cap_does_not_disconnect_its_sender() {
    let cfg = QueueConfig::default()
        .max_pending_bytes(64 * 1024)
        .overflow(Overflow::Disconnect);
    let mut p = pair(&cfg, SMALL).await;
    p.sender.send(vec![1u8; 100]).await.unwrap();
    p.sender.send(vec![2u8; 64 * 1024]).await.unwrap();
    p.sender.send(vec![3u8; 100]).await.unwrap();
    assert!(p.sender.close_reason().is_none());
    assert_eq!(p.sender.stats().overflows, 0);
    p.sender.shutdown();
    let got = read_to_end(&mut p.peer).await.unwrap();
    let mut want = vec![1u8; 100];
    want.extend(vec![2u8; 64 * 1024]);
    want.extend(vec![3u8; 100]);
    assert!(got == want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_returns_at_once_and_the_fin_comes_within_the_bound() {
    let bound = Duration::from_millis(250);
    let cfg = QueueConfig::default()
        .max_pending_bytes(64 << 20)
        .shutdown_timeout(bound);
    let mut p = pair(&cfg, SMALL).await;
    // A backlog far larger than the socket buffers (4 KiB each way).
    for _ in 0..256 {
        p.sender.send(vec![5u8; 64 * 1024]).await.unwrap();
    }
    let start = Instant::now();
    p.sender.shutdown();
    let returned = start.elapsed();
    assert!(
        returned < Duration::from_millis(20),
        "shutdown took {returned:?}"
    );
    assert!(matches!(
        p.sender.send(vec![1u8]).await,
        Err(SendError::Closed {
            reason: CloseReason::Shutdown,
            ..
        })
    ));
    // The peer reads slowly (64 KiB every 20 ms: 3.2 MB/s), far too slowly
    // for 16 MiB to drain within the bound: the FIN comes at the bound.
    let mut buf = vec![0u8; 64 * 1024];
    let mut got = 0usize;
    let end = loop {
        match p.peer.read(&mut buf).await {
            Ok(0) => break Ok(start.elapsed()),
            Ok(k) => got += k,
            Err(e) => break Err((start.elapsed(), e)),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // Cut at the bound, possibly inside a frame.
    let at = match end {
        Ok(t) => t,
        Err((t, e)) => {
            assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof, "{e}");
            t
        }
    };
    assert!(got < 256 * 64 * 1024, "the backlog cannot have drained");
    assert!(at >= bound, "FIN after {at:?}, before the bound");
    assert!(at < bound + Duration::from_secs(2), "FIN only after {at:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reason_queued_before_shutdown_reaches_a_throttled_reader_before_the_fin() {
    let cfg = QueueConfig::default();
    // 16 KiB socket buffers each way: most of the 64 KiB backlog is still in
    // the queue when shutdown is called.
    let mut p = pair(&cfg, Some(16 * 1024)).await;
    p.sender.send(vec![4u8; 64 * 1024]).await.unwrap();
    p.sender.send(&b"reason: shutting down"[..]).await.unwrap();
    p.sender.shutdown();
    let start = Instant::now();
    // About 8 Mbit/s: at most 8 KiB every 8 ms.
    let mut all = Vec::new();
    let mut buf = vec![0u8; 8 * 1024];
    loop {
        let k = p.peer.read(&mut buf).await.unwrap();
        if k == 0 {
            break;
        }
        all.extend_from_slice(&buf[..k]);
        tokio::time::sleep(Duration::from_millis(8)).await;
    }
    // Paced by the reader, not cut by the 250 ms bound.
    assert!(
        start.elapsed() >= Duration::from_millis(40),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(all.len(), 64 * 1024 + 21);
    assert_eq!(&all[64 * 1024..], b"reason: shutting down");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_stops_at_once_and_every_waiter_learns_why() {
    let cfg = QueueConfig::default().max_pending_bytes(64 * 1024);
    let p = pair(&cfg, SMALL).await;
    p.sender.send(vec![1u8; 32 * 1024]).await.unwrap();
    let s2 = p.sender.clone();
    // A flush that cannot complete (the peer does not read) and a send that
    // waits for room both end when the queue is closed.
    let flush = tokio::spawn(async move { s2.flush().await });
    let s3 = p.sender.clone();
    let waiting = tokio::spawn(async move {
        for _ in 0..100 {
            s3.send(vec![2u8; 32 * 1024]).await?;
        }
        Ok::<_, SendError>(())
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    p.sender.close();
    for r in [flush.await.unwrap(), waiting.await.unwrap()] {
        assert!(
            matches!(
                r,
                Err(SendError::Closed {
                    reason: CloseReason::Closed,
                    ..
                })
            ),
            "{r:?}"
        );
    }
    assert!(matches!(p.sender.close_reason(), Some(CloseReason::Closed)));
}

/// What four producers send in the packing tests: numbered small messages,
/// most in bundles (sealed in one batch, so several share a frame).
async fn send_small_messages(sender: &Sender) -> Vec<Vec<Vec<u8>>> {
    let mut tasks = Vec::new();
    for producer in 0..4u8 {
        let sender = sender.clone();
        tasks.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            let mut seq = 0u32;
            for bundle in 0..40u32 {
                let count = (bundle % 7 + 1) as u8;
                let msgs: Vec<Bytes> = (0..count)
                    .map(|i| {
                        let m = message(producer, seq, bundle, i, count, (seq % 90) as u16);
                        seq += 1;
                        m
                    })
                    .collect();
                mine.extend(msgs.iter().map(|m| m.to_vec()));
                sender.send_bundle(msgs).await.unwrap();
            }
            mine
        }));
    }
    let mut per_producer = Vec::new();
    for t in tasks {
        per_producer.push(t.await.unwrap());
    }
    per_producer
}

/// `stream` is the producers' messages, each producer's in order, every
/// message once (interleaved between producers however the queue took them).
fn check_stream(stream: &[u8], per_producer: &[Vec<Vec<u8>>]) {
    let mut next = vec![0usize; per_producer.len()];
    let mut at = 0;
    while at < stream.len() {
        let len = u16::from_le_bytes([stream[at + 11], stream[at + 12]]) as usize;
        let m = &stream[at..at + HEADER + len];
        let p = m[0] as usize;
        assert!(
            per_producer[p].get(next[p]).map(Vec::as_slice) == Some(m),
            "producer {p}: message {} out of order or corrupted",
            next[p]
        );
        next[p] += 1;
        at += HEADER + len;
    }
    let expected: Vec<usize> = per_producer.iter().map(Vec::len).collect();
    assert_eq!(next, expected, "every message once");
}

/// Dial `addr`, handshake, and put a send queue on the write half.
async fn dial_queue(
    addr: &str,
) -> (
    Sender,
    p2p_conn::io::tokio::ReadHalf<tokio::net::tcp::OwnedReadHalf>,
) {
    let tcp = TcpStream::connect(addr).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    let conn = handshake(tcp, &Identity::generate(), &Config::default())
        .await
        .unwrap();
    let (read, write) = conn.into_split();
    (Sender::new(write, &QueueConfig::default()).unwrap(), read)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn packed_frames_are_one_stream_to_cometbft_go() {
    for version in GoVersion::ALL {
        let Some(bin) = go_peer(version, "packed_frames_are_one_stream_to_cometbft_go") else {
            return;
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        // Go writes nothing (its stdin is empty) and prints what it reads.
        let (go, addr) = tokio::task::spawn_blocking(move || {
            go_listen(&bin, &["-chunk", "1024"], Feed::none(), deadline)
        })
        .await
        .unwrap();
        let (sender, _read) = dial_queue(&addr).await;
        let sent = send_small_messages(&sender).await;
        sender.flush().await.unwrap();
        let stats = sender.stats();
        sender.shutdown();
        let out = tokio::task::spawn_blocking(move || go.finish_ok(deadline))
            .await
            .unwrap();
        check_stream(&out.stdout, &sent);
        // Bundles went out packed: fewer frames than messages.
        let messages: usize = sent.iter().map(Vec::len).sum();
        let bytes: usize = sent.iter().flatten().map(Vec::len).sum();
        assert_eq!(out.stdout.len(), bytes);
        assert!(
            (stats.batches as usize) < messages,
            "{version:?}: {} batches for {messages} messages",
            stats.batches
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn packed_frames_are_one_stream_to_tendermint_p2p() {
    use std::io::Read;
    use tendermint_p2p::secret_connection::{SecretConnection as TmConnection, Version};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let reader = std::thread::spawn(move || {
        let (tcp, _) = listener.accept().unwrap();
        let key = ed25519_consensus::SigningKey::new(rand_core::OsRng);
        let mut conn = TmConnection::new(tcp, key, Version::V0_34).unwrap();
        let mut all = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match conn.read(&mut buf) {
                Ok(0) => return all,
                Ok(n) => all.extend_from_slice(&buf[..n]),
                // tendermint-p2p reports the end of stream as an error.
                Err(_) => return all,
            }
        }
    });
    let (sender, _read) = dial_queue(&addr).await;
    let sent = send_small_messages(&sender).await;
    sender.flush().await.unwrap();
    sender.shutdown();
    let got = tokio::task::spawn_blocking(move || reader.join().unwrap())
        .await
        .unwrap();
    check_stream(&got, &sent);
}

#[tokio::test(flavor = "current_thread")]
async fn an_overflow_warning_names_the_peer_its_address_and_the_setting() {
    let (log, _guard) = crate::common::capture::capture();
    let cfg = QueueConfig::default()
        .max_pending_bytes(64 * 1024)
        .overflow(Overflow::Error);
    let p = pair(&cfg, SMALL).await;
    let (_, e) = fill(&p.sender).await;
    assert!(matches!(e, SendError::Full { .. }));
    let text = log.text();
    let peer = p.sender.peer().to_string();
    assert!(text.contains("WARN"), "{text}");
    assert!(text.contains(&peer), "the peer's node ID: {text}");
    assert!(text.contains("127.0.0.1:"), "the peer's address: {text}");
    assert!(text.contains("max_pending_bytes"), "the setting: {text}");
}

/// The writer task ends whenever the queue goes idle and the next message
/// starts it again, on the runtime it first ran on even when that message
/// comes from a thread outside any runtime; every message arrives once and
/// in order, the counters carry over, and dropping the last handle of a
/// parked queue still ends the stream with a clean FIN.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_writer_restarts_and_the_last_handle_sends_the_fin() {
    let mut p = pair(&QueueConfig::default(), None).await;
    let rounds = 20u8;
    for i in 0..rounds {
        let sender = p.sender.clone();
        if i % 2 == 0 {
            sender.send(vec![i; 300]).await.unwrap();
            sender.flush().await.unwrap();
        } else {
            // From a plain thread: the send completes at its first poll.
            std::thread::spawn(move || {
                futures::executor::block_on(sender.send(vec![i; 300])).unwrap();
                futures::executor::block_on(sender.flush()).unwrap();
            })
            .join()
            .unwrap();
        }
        // Let the writer run dry and park.
        tokio::time::sleep(Duration::from_millis(5)).await;
        let s = p.sender.stats();
        assert_eq!(s.messages_sent, u64::from(i) + 1, "{s:?}");
        assert_eq!(s.pending_messages, 0, "{s:?}");
        assert!(s.send.bytes_sealed >= 300 * (u64::from(i) + 1), "{s:?}");
    }
    assert!(p.sender.close_reason().is_none());
    drop(p.sender);
    let got = read_to_end(&mut p.peer).await.unwrap();
    let want: Vec<u8> = (0..rounds).flat_map(|i| vec![i; 300]).collect();
    assert!(got == want, "{} bytes, {} expected", got.len(), want.len());
}

/// A queue that never sent drops its half when its last handle goes: the
/// peer sees the end of the stream, and no task was needed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unused_queue_dropped_ends_the_stream() {
    let mut p = pair(&QueueConfig::default(), None).await;
    let clone = p.sender.clone();
    drop(p.sender);
    drop(clone);
    assert!(read_to_end(&mut p.peer).await.unwrap().is_empty());
}
