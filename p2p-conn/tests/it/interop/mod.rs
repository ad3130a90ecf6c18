//! Interop with `tendermint-p2p` 0.41, an independent implementation of the
//! secret connection, over real loopback TCP.
//!
//! One driver ([`run`]) handles every combination of our TCP role (dialer or
//! acceptor), our adapter (tokio, blocking, or the tokio-util codec through
//! `codec::handshake_split` or `codec::handshake`), our write API (`write` +
//! `write_all` + `flush`, or `send`) and our read buffer size. Both
//! sides check each other's identity, then send their messages and receive the
//! other's at the same time (a send and a receive thread or task per side),
//! and verify every byte. The tendermint side also records how much each of
//! its reads returned: it returns at most one frame's payload per read, so that
//! sequence is the sequence of frames p2p-conn put on the wire.
//!
//! Constraints from tendermint-p2p 0.41 (see protocol notes, section 6.1):
//! * its `read` panics when the caller's buffer is smaller than what is left of
//!   a frame, so its receiver always reads with a 4096-byte buffer;
//! * its halves share a "terminated" flag, so when its receiver hits end of
//!   stream its sender fails too: nobody closes or half-closes until both
//!   directions have delivered everything (lengths are known in advance);
//! * a zero-length frame reads as `Ok(0)`, which the driver treats as a failure.
//!
//! Every test runs under a watchdog ([`supervise`]): a hang fails within
//! [`TEST_LIMIT`] instead of hanging CI.

mod cases;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::panic::{self, AssertUnwindSafe};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use crate::common::{check_bytes_at, payload, rethrow, summarize};
use bytes::Bytes;
use ed25519_consensus::SigningKey;
use futures::{Sink, SinkExt, Stream, StreamExt};
use p2p_conn::io::{blocking, codec, tokio as ptokio};
use p2p_conn::{Config, Error, Identity, NodeId};
use rand_core::OsRng;
use tendermint_p2p::secret_connection::{
    PublicKey as TmPublicKey, SecretConnection as TmConnection, Version,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Upper bound on any one test.
const TEST_LIMIT: Duration = Duration::from_secs(60);
/// tendermint-p2p's read buffer (must be at least one frame's payload, 1024).
const TM_READ_BUF: usize = 4096;
/// Frame payload size on the CometBFT wire.
const FRAME: usize = 1024;
/// Our read buffer in the "large buffer" variants.
const LARGE_READ_BUF: usize = 64 * 1024;
const MIB4: usize = 4 * 1024 * 1024;

/// The full message schedule, sent in both directions.
const ALL_SIZES: &[usize] = &[0, 1, 1023, 1024, 1025, 64 * 1024, MIB4];
/// The same without the 4 MiB message (for the `expected_peer_id` checks).
const SIZES_TO_64K: &[usize] = &[0, 1, 1023, 1024, 1025, 64 * 1024];

/// Direction seeds of the message contents.
const US_TO_TM: u8 = 0xA5;
const TM_TO_US: u8 = 0x5A;

// ---------------------------------------------------------------------------
// Messages

/// Message `index` of direction `dir`: `len` pseudo-random bytes seeded by
/// both, so every message of every direction differs from its first byte on.
fn message(dir: u8, index: usize, len: usize) -> Vec<u8> {
    payload(len, (u64::from(dir) << 32) | index as u64)
}

/// What the receiver of direction `dir` must get: every message, concatenated.
fn stream(dir: u8, sizes: &[usize]) -> Vec<u8> {
    let mut all = Vec::with_capacity(sizes.iter().sum());
    for (i, &len) in sizes.iter().enumerate() {
        all.extend_from_slice(&message(dir, i, len));
    }
    all
}

/// The frames a sender puts on the wire for these writes: each message in
/// 1024-byte chunks, the last one shorter; nothing for an empty message.
fn frame_sizes(sizes: &[usize]) -> Vec<usize> {
    sizes
        .iter()
        .flat_map(|&len| (0..len).step_by(FRAME).map(move |at| (len - at).min(FRAME)))
        .collect()
}

/// Check `got` byte for byte, naming the first bad byte's message and offset
/// (without dumping megabytes through `assert_eq!`).
fn check_stream(what: &str, got: &[u8], dir: u8, sizes: &[usize]) {
    check_bytes_at(what, got, &stream(dir, sizes), |at| {
        let (mut index, mut start) = (sizes.len(), 0);
        for (i, &len) in sizes.iter().enumerate() {
            if at < start + len {
                index = i;
                break;
            }
            start += len;
        }
        format!(" (message {index}, offset {})", at - start.min(at))
    });
}

/// Send `sizes` (direction `dir`) with one `write` per message, then the rest
/// of it with `write_all` (p2p-conn accepts at most `flush_size` per write).
/// An empty message is a real `write(&[])`, which must return 0 and put nothing
/// on the wire.
fn send_std(w: &mut impl Write, who: &str, dir: u8, sizes: &[usize]) {
    for (i, &len) in sizes.iter().enumerate() {
        let msg = message(dir, i, len);
        let n = w
            .write(&msg)
            .unwrap_or_else(|e| panic!("{who}: write of message {i} ({len} bytes): {e}"));
        assert!(
            n <= len && (n > 0) == (len > 0),
            "{who}: write({len}) returned {n}"
        );
        w.write_all(&msg[n..])
            .unwrap_or_else(|e| panic!("{who}: write_all of message {i} ({len} bytes): {e}"));
    }
    w.flush().unwrap_or_else(|e| panic!("{who}: flush: {e}"));
}

async fn send_tokio(w: &mut (impl AsyncWrite + Unpin), who: &str, dir: u8, sizes: &[usize]) {
    for (i, &len) in sizes.iter().enumerate() {
        let msg = message(dir, i, len);
        let n = w
            .write(&msg)
            .await
            .unwrap_or_else(|e| panic!("{who}: write of message {i} ({len} bytes): {e}"));
        assert!(
            n <= len && (n > 0) == (len > 0),
            "{who}: write({len}) returned {n}"
        );
        w.write_all(&msg[n..])
            .await
            .unwrap_or_else(|e| panic!("{who}: write_all of message {i} ({len} bytes): {e}"));
    }
    w.flush()
        .await
        .unwrap_or_else(|e| panic!("{who}: flush: {e}"));
}

/// Send `sizes` (direction `dir`) with one `send` per message (it accepts the
/// whole message and flushes).
fn send_std_api(w: &mut blocking::WriteHalf, who: &str, dir: u8, sizes: &[usize]) {
    for (i, &len) in sizes.iter().enumerate() {
        w.send(&message(dir, i, len))
            .unwrap_or_else(|e| panic!("{who}: send of message {i} ({len} bytes): {e}"));
    }
}

async fn send_tokio_api<W>(w: &mut ptokio::WriteHalf<W>, who: &str, dir: u8, sizes: &[usize])
where
    W: AsyncWrite + Unpin,
{
    for (i, &len) in sizes.iter().enumerate() {
        w.send(&message(dir, i, len))
            .await
            .unwrap_or_else(|e| panic!("{who}: send of message {i} ({len} bytes): {e}"));
    }
}

/// Feed every message to a codec sink as one item, then flush.
async fn send_codec<S>(w: &mut S, who: &str, dir: u8, sizes: &[usize])
where
    S: Sink<Bytes, Error = std::io::Error> + Unpin,
{
    for (i, &len) in sizes.iter().enumerate() {
        w.feed(Bytes::from(message(dir, i, len)))
            .await
            .unwrap_or_else(|e| panic!("{who}: feed of message {i} ({len} bytes): {e}"));
    }
    w.flush()
        .await
        .unwrap_or_else(|e| panic!("{who}: flush: {e}"));
}

/// Collect codec items (frame payloads, never empty) until `total` bytes,
/// then expect end of stream.
async fn recv_codec<S>(r: &mut S, who: &str, total: usize) -> Vec<u8>
where
    S: Stream<Item = std::io::Result<Bytes>> + Unpin,
{
    let mut got = Vec::with_capacity(total);
    while got.len() < total {
        match r.next().await {
            Some(Ok(item)) => {
                assert!(
                    !item.is_empty() && item.len() <= FRAME,
                    "{who}: item of {} bytes",
                    item.len()
                );
                got.extend_from_slice(&item);
            }
            Some(Err(e)) => panic!("{who}: read after {} of {total} bytes: {e}", got.len()),
            None => panic!("{who}: end of stream after {} of {total} bytes", got.len()),
        }
    }
    got
}

/// Read exactly `total` bytes with `buf_len`-byte reads; `on_read` sees the
/// size of every read. End of stream before `total` is a failure.
fn recv_std(
    r: &mut impl Read,
    who: &str,
    buf_len: usize,
    total: usize,
    mut on_read: impl FnMut(usize),
) -> Vec<u8> {
    let mut got = Vec::with_capacity(total);
    let mut buf = vec![0u8; buf_len];
    while got.len() < total {
        let n = r
            .read(&mut buf)
            .unwrap_or_else(|e| panic!("{who}: read after {} of {total} bytes: {e}", got.len()));
        assert!(
            n > 0,
            "{who}: read returned 0 (end of stream, or a zero-length frame) after {} of {total} bytes",
            got.len()
        );
        on_read(n);
        got.extend_from_slice(&buf[..n]);
    }
    got
}

async fn recv_tokio(
    r: &mut (impl AsyncRead + Unpin),
    who: &str,
    buf_len: usize,
    total: usize,
) -> Vec<u8> {
    let mut got = Vec::with_capacity(total);
    let mut buf = vec![0u8; buf_len];
    while got.len() < total {
        let n = r
            .read(&mut buf)
            .await
            .unwrap_or_else(|e| panic!("{who}: read after {} of {total} bytes: {e}", got.len()));
        assert!(
            n > 0,
            "{who}: end of stream after {} of {total} bytes",
            got.len()
        );
        got.extend_from_slice(&buf[..n]);
    }
    got
}

// ---------------------------------------------------------------------------
// Watchdog

enum Event {
    Started(String),
    Finished(String, thread::Result<()>),
}

/// Spawns named worker threads whose outcome the supervisor collects.
#[derive(Clone)]
struct Crew(mpsc::Sender<Event>);

impl Crew {
    fn spawn(&self, name: &str, f: impl FnOnce() + Send + 'static) {
        // Sent before the thread exists (and so before its parent finishes), so
        // the supervisor never sees an empty crew while work is still to come.
        self.0.send(Event::Started(name.to_string())).unwrap();
        let events = self.0.clone();
        let name = name.to_string();
        thread::Builder::new()
            .name(name.clone())
            .spawn(move || {
                let result = panic::catch_unwind(AssertUnwindSafe(f));
                let _ = events.send(Event::Finished(name, result));
            })
            .unwrap();
    }
}

/// Run the workers `start` spawns (and the ones they spawn) to completion.
/// The first worker panic is re-raised at once; a crew still running after
/// [`TEST_LIMIT`] fails the test. (Stuck workers are left behind: they only
/// hold loopback sockets and end with the test process.)
fn supervise(start: impl FnOnce(&Crew)) {
    let (tx, rx) = mpsc::channel();
    let crew = Crew(tx);
    let deadline = Instant::now() + TEST_LIMIT;
    start(&crew);
    let mut running: Vec<String> = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(Event::Started(name)) => running.push(name),
            Ok(Event::Finished(name, result)) => {
                if let Some(i) = running.iter().position(|n| *n == name) {
                    running.swap_remove(i);
                }
                if let Err(payload) = result {
                    eprintln!("worker {name:?} failed; still running: {running:?}");
                    panic::resume_unwind(payload);
                }
                if running.is_empty() {
                    return;
                }
            }
            Err(_) => {
                panic!("test did not finish within {TEST_LIMIT:?}; still running: {running:?}")
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Setup

/// Which end of the TCP connection p2p-conn is.
#[derive(Clone, Copy, Debug)]
enum Role {
    Dialer,
    Acceptor,
}

/// Which p2p-conn adapter runs our side.
#[derive(Clone, Copy, Debug)]
enum Adapter {
    Tokio,
    Blocking,
    /// `codec::handshake_split`: `FramedRead` / `FramedWrite` in two tasks;
    /// the scenario's `read_buf` is the read capacity (`read_buffer_size`).
    CodecSplit,
    /// `codec::handshake`: one `Framed`, split with `StreamExt::split`;
    /// `read_buf` as for `CodecSplit`.
    CodecFramed,
}

/// How the tokio and blocking adapters send (the codec always feeds each
/// message as one item, then flushes).
#[derive(Clone, Copy, Debug)]
enum WriteApi {
    /// One `write` per message, then `write_all` of the rest; `flush` at the end.
    WriteAll,
    /// One `send` per message.
    Send,
}

/// A connected loopback pair: (p2p-conn's end, tendermint-p2p's end).
fn tcp_pair(role: Role) -> (TcpStream, TcpStream) {
    let (dialer, acceptor) = p2p_conn::testkit::std_tcp_pair();
    match role {
        Role::Dialer => (dialer, acceptor),
        Role::Acceptor => (acceptor, dialer),
    }
}

/// A node ID as tendermint-rs computes it (independently of p2p-conn).
fn tm_node_id(key: &SigningKey) -> NodeId {
    TmPublicKey::from(key)
        .peer_id()
        .to_string()
        .parse()
        .expect("tendermint node ID is 40 hex digits")
}

fn tm_handshake(tcp: TcpStream, key: SigningKey) -> TmConnection<TcpStream> {
    TmConnection::new(tcp, key, Version::V0_34).expect("tendermint-p2p handshake")
}

fn tm_remote_key(conn: &TmConnection<TcpStream>) -> [u8; 32] {
    conn.remote_pubkey()
        .ed25519()
        .expect("tendermint-p2p: an Ed25519 peer")
        .to_bytes()
}

fn tokio_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn tokio_stream(tcp: TcpStream) -> tokio::net::TcpStream {
    tcp.set_nonblocking(true).unwrap();
    tokio::net::TcpStream::from_std(tcp).unwrap()
}

// ---------------------------------------------------------------------------
// The scenario driver

#[derive(Clone, Copy, Debug)]
struct Scenario {
    role: Role,
    adapter: Adapter,
    /// Our read buffer size.
    read_buf: usize,
    /// Messages p2p-conn sends.
    ours: &'static [usize],
    /// Messages tendermint-p2p sends.
    theirs: &'static [usize],
    /// Set `Config::expected_peer_id` to the tendermint peer's node ID.
    expect_peer: bool,
    /// Our write API (tokio and blocking adapters).
    api: WriteApi,
}

impl Scenario {
    fn new(role: Role, adapter: Adapter, read_buf: usize, sizes: &'static [usize]) -> Self {
        Scenario {
            role,
            adapter,
            read_buf,
            ours: sizes,
            theirs: sizes,
            expect_peer: false,
            api: WriteApi::WriteAll,
        }
    }
}

/// Run one scenario: handshake, identity checks on both sides, both message
/// schedules at once, byte-for-byte checks, tendermint's view of our frames,
/// and finally a clean end of stream on our side once tendermint-p2p (having
/// everything) drops its connection.
fn run(s: Scenario) {
    let started = Instant::now();
    let (ours, theirs) = tcp_pair(s.role);
    let identity = Identity::generate();
    let our_pub = *identity.public_key().as_bytes();
    let tm_key = SigningKey::new(OsRng);
    let tm_pub = tm_key.verification_key().to_bytes();
    let mut config = Config::default();
    if s.expect_peer {
        config = config.expect_peer(tm_node_id(&tm_key));
    }
    if matches!(s.adapter, Adapter::CodecSplit | Adapter::CodecFramed) {
        config = config.read_buffer_size(s.read_buf);
    }

    supervise(|crew| {
        // tendermint-p2p: handshake, then a sender thread and a receiver here.
        let sub = crew.clone();
        crew.spawn("tm-recv", move || {
            let conn = tm_handshake(theirs, tm_key);
            assert_eq!(
                tm_remote_key(&conn),
                our_pub,
                "tendermint-p2p sees the wrong peer key"
            );
            let (mut tx, mut rx) = conn.split().expect("tendermint-p2p split");
            sub.spawn("tm-send", move || {
                send_std(&mut tx, "tendermint-p2p", TM_TO_US, s.theirs);
            });
            let total = s.ours.iter().sum();
            let mut reads = Vec::new();
            let got = recv_std(&mut rx, "tendermint-p2p", TM_READ_BUF, total, |n| {
                reads.push(n)
            });
            check_stream("tendermint-p2p received", &got, US_TO_TM, s.ours);
            // One read = one frame, so p2p-conn's frames must be exactly the
            // 1024-byte chunks of each message and no empty frame. (A message
            // over `flush_size` takes several writes inside `write_all`, but
            // each write accepts a whole number of frames, so the chunking
            // of the message is unchanged.)
            assert!(
                reads == frame_sizes(s.ours),
                "p2p-conn's frames as tendermint-p2p read them: {:?}, expected {:?}",
                summarize(&reads),
                summarize(&frame_sizes(s.ours)),
            );
        });

        // p2p-conn.
        let sub = crew.clone();
        let total = s.theirs.iter().sum();
        match s.adapter {
            Adapter::Blocking => crew.spawn("us-recv", move || {
                let conn = blocking::handshake_tcp(ours, &identity, &config)
                    .expect("p2p-conn blocking handshake");
                assert_eq!(
                    *conn.remote_public_key().as_bytes(),
                    tm_pub,
                    "p2p-conn sees the wrong peer key"
                );
                let (mut r, mut w) = conn.split().expect("p2p-conn split");
                sub.spawn("us-send", move || match s.api {
                    WriteApi::WriteAll => send_std(&mut w, "p2p-conn", US_TO_TM, s.ours),
                    WriteApi::Send => send_std_api(&mut w, "p2p-conn", US_TO_TM, s.ours),
                });
                let got = recv_std(&mut r, "p2p-conn", s.read_buf, total, |_| {});
                check_stream("p2p-conn received", &got, TM_TO_US, s.theirs);
                let n = r.read(&mut [0u8; 64]).expect("p2p-conn read at the end");
                assert_eq!(n, 0, "p2p-conn: expected end of stream");
            }),
            Adapter::Tokio => crew.spawn("us-tokio", move || {
                tokio_runtime().block_on(async move {
                    let conn = ptokio::handshake(tokio_stream(ours), &identity, &config)
                        .await
                        .expect("p2p-conn tokio handshake");
                    assert_eq!(
                        *conn.remote_public_key().as_bytes(),
                        tm_pub,
                        "p2p-conn sees the wrong peer key"
                    );
                    let (mut r, mut w) = conn.into_split();
                    let send = tokio::spawn(async move {
                        match s.api {
                            WriteApi::WriteAll => {
                                send_tokio(&mut w, "p2p-conn", US_TO_TM, s.ours).await
                            }
                            WriteApi::Send => {
                                send_tokio_api(&mut w, "p2p-conn", US_TO_TM, s.ours).await
                            }
                        }
                        w // keep the write half alive until the end
                    });
                    let recv = tokio::spawn(async move {
                        let got = recv_tokio(&mut r, "p2p-conn", s.read_buf, total).await;
                        check_stream("p2p-conn received", &got, TM_TO_US, s.theirs);
                        let n = r
                            .read(&mut [0u8; 64])
                            .await
                            .expect("p2p-conn read at the end");
                        assert_eq!(n, 0, "p2p-conn: expected end of stream");
                    });
                    if let Err(e) = tokio::try_join!(send, recv) {
                        rethrow(e);
                    }
                });
            }),
            Adapter::CodecSplit | Adapter::CodecFramed => crew.spawn("us-codec", move || {
                tokio_runtime().block_on(async move {
                    let tcp = tokio_stream(ours);
                    if let Adapter::CodecSplit = s.adapter {
                        let ((r, w), remote) = codec::handshake_split(tcp, &identity, &config)
                            .await
                            .expect("p2p-conn codec handshake");
                        assert_eq!(
                            *remote.as_bytes(),
                            tm_pub,
                            "p2p-conn sees the wrong peer key"
                        );
                        codec_duplex(w, r, s, total).await;
                    } else {
                        let framed = codec::handshake(tcp, &identity, &config)
                            .await
                            .expect("p2p-conn codec handshake");
                        assert_eq!(
                            *framed.codec().remote_public_key().as_bytes(),
                            tm_pub,
                            "p2p-conn sees the wrong peer key"
                        );
                        let (w, r) = StreamExt::split::<Bytes>(framed);
                        codec_duplex(w, r, s, total).await;
                    }
                });
            }),
        }
    });
    let api = match s.adapter {
        Adapter::CodecSplit | Adapter::CodecFramed => "feed+flush".to_string(),
        Adapter::Tokio | Adapter::Blocking => format!("{:?}", s.api),
    };
    eprintln!(
        "{:?} {api} {:?}, {}-byte reads: {:?}",
        s.adapter,
        s.role,
        s.read_buf,
        started.elapsed()
    );
}

/// Our codec side after the handshake: send and receive in two tasks, then
/// a clean end of stream once tendermint-p2p (having everything) drops its
/// connection. The sink lives until both are done.
async fn codec_duplex<W, R>(mut w: W, mut r: R, s: Scenario, total: usize)
where
    W: Sink<Bytes, Error = std::io::Error> + Unpin + Send + 'static,
    R: Stream<Item = std::io::Result<Bytes>> + Unpin + Send + 'static,
{
    let send = tokio::spawn(async move {
        send_codec(&mut w, "p2p-conn", US_TO_TM, s.ours).await;
        w
    });
    let recv = tokio::spawn(async move {
        let got = recv_codec(&mut r, "p2p-conn", total).await;
        check_stream("p2p-conn received", &got, TM_TO_US, s.theirs);
        if let Some(item) = r.next().await {
            panic!(
                "p2p-conn: expected end of stream, got {:?}",
                item.map(|b| b.len())
            );
        }
    });
    if let Err(e) = tokio::try_join!(send, recv) {
        rethrow(e);
    }
}
