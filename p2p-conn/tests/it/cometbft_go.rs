//! The library against CometBFT's own Go `SecretConnection`
//! (`interop/cometbft-go`, built at every release line the suite proves:
//! v0.34.35, v0.37.18, v0.38.26, v0.39.4, v0.40.0 and v1.0.1) over real
//! loopback TCP.
//!
//! Every cell of the matrix Go version x our adapter (tokio, std, codec) x
//! TCP role (we listen and Go dials, or Go listens and we dial) is one test,
//! named by its line and cell (`v0_39::tokio_we_listen`, see
//! `p2p_conn_interop::per_release!`). Each test runs
//! one exchange per Go write chunking it covers ([`CHUNKS`]: the Go peer
//! calls `SecretConnection.Write` with exactly that many bytes): all four
//! ([`FULL`]) at v0.38.26 (what most chains run), v0.40.0 (the newest line)
//! and v1.0.1; one, 1025-byte writes ([`REDUCED`]), at v0.34.35, v0.37.18
//! and v0.39.4, whose `SecretConnection` writes and reads the socket as one
//! of those does (v0.34 and v0.37 one socket write per sealed frame like
//! v0.38, v0.39.4's file is v0.40.0's), so CI stays within its time.
//! In each exchange both directions run at once:
//!
//! * Go writes a known stream from its stdin, then half-closes TCP; we read
//!   until end of stream and check every byte;
//! * we write another known stream in writes of varied sizes ([`OUR_PIECES`],
//!   alternating the write APIs), then shut down our write side; Go copies
//!   the connection to its stdout until end of stream, which we check byte
//!   for byte, and must exit 0. Our connection stays open until Go has
//!   exited, so Go finishes on our half-close, not on the socket closing.
//!
//! The codec yields one item per frame, so the codec exchanges also check
//! Go's framing: exactly its `-chunk` writes, each cut into 1024-byte frames.
//!
//! Node IDs are checked both ways: the Go peer loads a key written by
//! CometBFT's own code (`cometbft-peer keygen`), our `remote_node_id()` must be
//! the ID CometBFT computes for it (`cometbft-peer id`), Go must print
//! `peer <our node id>`, and Go runs with `-peer-id <our id>` so CometBFT
//! checks our ID too. When we dial, we also set `Config::expect_peer`.
//!
//! Every wait has a deadline: a stuck exchange kills the Go peer and fails.
//! Without the Go toolchain each test prints a notice and passes, unless
//! `CI=true`, where it fails.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::panic;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use crate::common::go_peer::{
    go_dial, go_keygen, go_listen, go_peer, listening_line, peer_line, GoVersion,
};
use crate::common::process::{left, scratch, Feed, Proc};
use crate::common::{check_bytes, payload, rethrow, summarize};
use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use p2p_conn::io::{blocking, codec, tokio as ptokio};
use p2p_conn::{Config, Error, Identity, NodeId};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Bound on one exchange (start of the Go peer to its exit). Generous on
/// purpose: it only catches a hang. On a two-core machine busy with a
/// benchmark beside it, the unoptimized pure-Rust build (CI's `test-lean`
/// stage) took over 30 s for some v0.38.26 exchanges (2 MiB each way, Go
/// writing 7 bytes at a time), which passed with the machine to itself.
const RUN_LIMIT: Duration = Duration::from_secs(180);

/// Go's `-chunk`: bytes per `SecretConnection.Write` call on the Go side.
const CHUNKS: [usize; 4] = [7, 1000, 1025, 1 << 20];

/// Every chunking: indexes into [`CHUNKS`] (and [`READ_BUFS`]).
const FULL: &[usize] = &[0, 1, 2, 3];

/// One chunking: Go's 1025-byte writes (a full frame and a 1-byte one per
/// write), read by us in 1000-byte reads (tokio, std) that end inside
/// frames.
const REDUCED: &[usize] = &[2];

/// What we send in every exchange: a bit over 2 MiB.
const OUR_LEN: usize = (2 << 20) + 4099;

/// The sizes of our writes, cycled until [`OUR_LEN`] is sent (the last one
/// cut short): below, at and above one frame's payload, and above
/// `flush_size` (1 MiB + 3 takes several socket writes).
const OUR_PIECES: &[usize] = &[1, 7, 1000, 1023, 1024, 1025, 4096, 65_536, (1 << 20) + 3, 3];

/// Frame payload on the CometBFT wire.
const FRAME: usize = 1024;

/// What Go sends with `-chunk chunk`. A bit over 2 MiB, so that the 1 MiB
/// chunking is several writes with a short one at the end; with 7-byte writes
/// every write is a whole 1044-byte frame on the wire, so that chunking sends
/// less: 280,005 bytes, still 40,001 frames (about 42 MB on the wire), the
/// last one 5 bytes (the full 2 MiB at 7 bytes a write took ~2 s per
/// exchange in a debug build).
fn go_len(chunk: usize) -> usize {
    if chunk < 100 {
        chunk * 40_000 + 5
    } else {
        (2 << 20) + 1001
    }
}

/// Our read buffer in exchange `i` (so with Go chunking `CHUNKS[i]`), tokio
/// and std adapters: 7-byte reads cut every frame, 1000-byte reads end inside
/// frames, 64 KiB / 4 KiB reads take many frames at once.
const READ_BUFS: [usize; 4] = [65_536, 7, 1000, 4096];

// ---------------------------------------------------------------------------
// The Go peer's key

/// A node key written by CometBFT's own code, and the node ID CometBFT
/// computes for it (`keygen` and `id` must agree, and so must our key file
/// loader).
fn go_key(bin: &Path, dir: &Path) -> (PathBuf, NodeId) {
    let key = dir.join("go_node_key.json");
    let id = go_keygen(bin, &key);
    let ours = p2p_conn::keyfile::load(&key).expect("p2p-conn loads CometBFT's node_key.json");
    assert_eq!(
        ours.node_id(),
        id,
        "p2p-conn computes another ID for the key"
    );
    (key, id)
}

// ---------------------------------------------------------------------------
// Streams

/// `data` cut into [`OUR_PIECES`]-sized pieces, cycled.
fn pieces(data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut at = 0;
    for &len in OUR_PIECES.iter().cycle() {
        if at == data.len() {
            break;
        }
        let end = (at + len).min(data.len());
        out.push(&data[at..end]);
        at = end;
    }
    out
}

// ---------------------------------------------------------------------------
// Our side

#[derive(Clone, Copy, Debug)]
enum Adapter {
    /// `io::tokio`: owned halves in two tasks; `write_all` and `send`.
    Tokio,
    /// `io::blocking::handshake_tcp`: halves in two threads; `write_all` and
    /// `send`.
    Blocking,
    /// `io::codec`: `handshake_split` in even exchanges, `handshake` (one
    /// `Framed`, split with `StreamExt::split`) in odd ones; one item per piece.
    Codec,
}

/// Which end of the TCP connection we are.
#[derive(Clone, Copy, Debug)]
enum Role {
    /// We listen, Go dials.
    WeListen,
    /// Go listens, we dial.
    WeDial,
}

/// One exchange.
#[derive(Clone, Copy, Debug)]
struct Exchange {
    version: GoVersion,
    adapter: Adapter,
    role: Role,
    /// Index into [`CHUNKS`] / [`READ_BUFS`].
    index: usize,
}

impl Exchange {
    fn chunk(self) -> usize {
        CHUNKS[self.index]
    }

    /// A seed per exchange and direction, so no stream equals another.
    fn seed(self, direction: u64) -> u64 {
        (direction << 56)
            ^ ((self.version as u64) << 48)
            ^ ((self.adapter as u64) << 40)
            ^ ((self.role as u64) << 32)
            ^ self.index as u64
    }
}

const GO_TO_US: u64 = 0x5A;
const US_TO_GO: u64 = 0xA5;

/// What our side saw.
struct OurSide {
    remote: NodeId,
    received: Vec<u8>,
    /// Codec only: the size of every item, which is one frame's payload.
    items: Option<Vec<usize>>,
    /// Our connection (its halves, after our shutdown and the peer's end of
    /// stream), kept open until Go has exited: Go must finish on our
    /// half-close, not on the connection closing.
    keep: Box<dyn Send>,
}

/// The frames Go puts on the wire for `len` bytes written in `chunk`-byte
/// `Write` calls: each call is cut into 1024-byte frames, the last shorter;
/// no frame spans two calls.
fn go_frames(chunk: usize, len: usize) -> Vec<usize> {
    (0..len)
        .step_by(chunk)
        .flat_map(|at| {
            let write = (len - at).min(chunk);
            (0..write)
                .step_by(FRAME)
                .map(move |f| (write - f).min(FRAME))
        })
        .collect()
}

/// Our side of exchange `x` over `tcp`: handshake, then send `ours` and read
/// until end of stream at the same time. `max` bounds what we accept to read.
fn our_side(
    x: Exchange,
    tcp: TcpStream,
    identity: Identity,
    config: Config,
    ours: Vec<u8>,
    max: usize,
) -> OurSide {
    let read_buf = READ_BUFS[x.index];
    match x.adapter {
        Adapter::Blocking => {
            let conn =
                blocking::handshake_tcp(tcp, &identity, &config).expect("p2p-conn std handshake");
            let remote = conn.remote_node_id();
            let (mut r, mut w) = conn.split().expect("split");
            let sender = thread::spawn(move || {
                for (i, piece) in pieces(&ours).into_iter().enumerate() {
                    let written = if i % 2 == 0 {
                        w.write_all(piece)
                    } else {
                        w.send(piece).map_err(std::io::Error::other)
                    };
                    written
                        .unwrap_or_else(|e| panic!("std: write {i} ({} bytes): {e}", piece.len()));
                }
                w.shutdown().expect("std: shutdown");
                w
            });
            let mut received = Vec::new();
            let mut buf = vec![0u8; read_buf];
            loop {
                let n = r
                    .read(&mut buf)
                    .unwrap_or_else(|e| panic!("std: read after {} bytes: {e}", received.len()));
                if n == 0 {
                    break;
                }
                received.extend_from_slice(&buf[..n]);
                assert!(received.len() <= max, "std: more than {max} bytes");
            }
            let w = sender.join().unwrap_or_else(|p| panic::resume_unwind(p));
            OurSide {
                remote,
                received,
                items: None,
                keep: Box::new((r, w)),
            }
        }
        Adapter::Tokio | Adapter::Codec => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
            .block_on(async move {
                tcp.set_nonblocking(true).unwrap();
                let tcp = tokio::net::TcpStream::from_std(tcp).unwrap();
                match x.adapter {
                    Adapter::Tokio => our_tokio(tcp, identity, config, ours, max, read_buf).await,
                    _ => our_codec(x, tcp, identity, config, ours, max).await,
                }
            }),
    }
}

async fn our_tokio(
    tcp: tokio::net::TcpStream,
    identity: Identity,
    config: Config,
    ours: Vec<u8>,
    max: usize,
    read_buf: usize,
) -> OurSide {
    let conn = ptokio::handshake(tcp, &identity, &config)
        .await
        .expect("p2p-conn tokio handshake");
    let remote = conn.remote_node_id();
    let (mut r, mut w) = conn.into_split();
    let send = tokio::spawn(async move {
        for (i, piece) in pieces(&ours).into_iter().enumerate() {
            let written = if i % 2 == 0 {
                w.write_all(piece).await
            } else {
                w.send(piece).await.map_err(std::io::Error::other)
            };
            written.unwrap_or_else(|e| panic!("tokio: write {i} ({} bytes): {e}", piece.len()));
        }
        w.shutdown().await.expect("tokio: shutdown");
        w
    });
    let recv = tokio::spawn(async move {
        let mut received = Vec::new();
        let mut buf = vec![0u8; read_buf];
        loop {
            let n = r
                .read(&mut buf)
                .await
                .unwrap_or_else(|e| panic!("tokio: read after {} bytes: {e}", received.len()));
            if n == 0 {
                return (received, r);
            }
            received.extend_from_slice(&buf[..n]);
            assert!(received.len() <= max, "tokio: more than {max} bytes");
        }
    });
    match tokio::try_join!(send, recv) {
        Ok((w, (received, r))) => OurSide {
            remote,
            received,
            items: None,
            keep: Box::new((r, w)),
        },
        Err(e) => rethrow(e),
    }
}

async fn our_codec(
    x: Exchange,
    tcp: tokio::net::TcpStream,
    identity: Identity,
    config: Config,
    ours: Vec<u8>,
    max: usize,
) -> OurSide {
    async fn send<S>(mut w: S, ours: Vec<u8>) -> S
    where
        S: futures::Sink<Bytes, Error = std::io::Error> + Unpin,
    {
        for (i, piece) in pieces(&ours).into_iter().enumerate() {
            w.feed(Bytes::copy_from_slice(piece))
                .await
                .unwrap_or_else(|e| panic!("codec: feed {i} ({} bytes): {e}", piece.len()));
        }
        // Flushes, then shuts the TCP write side down.
        w.close().await.expect("codec: close");
        w
    }
    async fn recv<S>(mut r: S, max: usize) -> (Vec<u8>, Vec<usize>, S)
    where
        S: futures::Stream<Item = std::io::Result<Bytes>> + Unpin,
    {
        let mut received = Vec::new();
        let mut items = Vec::new();
        while let Some(item) = r.next().await {
            let item =
                item.unwrap_or_else(|e| panic!("codec: read after {} bytes: {e}", received.len()));
            assert!(
                !item.is_empty() && item.len() <= FRAME,
                "codec: item of {} bytes",
                item.len()
            );
            received.extend_from_slice(&item);
            items.push(item.len());
            assert!(received.len() <= max, "codec: more than {max} bytes");
        }
        (received, items, r)
    }
    /// Send and receive in two tasks; the halves are kept.
    async fn duplex<W, R>(remote: NodeId, w: W, r: R, ours: Vec<u8>, max: usize) -> OurSide
    where
        W: futures::Sink<Bytes, Error = std::io::Error> + Unpin + Send + 'static,
        R: futures::Stream<Item = std::io::Result<Bytes>> + Unpin + Send + 'static,
    {
        match tokio::try_join!(tokio::spawn(send(w, ours)), tokio::spawn(recv(r, max))) {
            Ok((w, (received, items, r))) => OurSide {
                remote,
                received,
                items: Some(items),
                keep: Box::new((r, w)),
            },
            Err(e) => rethrow(e),
        }
    }
    if x.index.is_multiple_of(2) {
        let ((r, w), remote) = codec::handshake_split(tcp, &identity, &config)
            .await
            .expect("p2p-conn codec handshake_split");
        duplex(remote.node_id(), w, r, ours, max).await
    } else {
        let framed = codec::handshake(tcp, &identity, &config)
            .await
            .expect("p2p-conn codec handshake");
        let remote = framed.codec().remote_public_key().node_id();
        let (w, r) = StreamExt::split::<Bytes>(framed);
        duplex(remote, w, r, ours, max).await
    }
}

// ---------------------------------------------------------------------------
// One exchange

/// Accept one connection by `deadline`, failing at once if the Go peer exits.
fn accept_from(listener: &TcpListener, peer: &mut Proc, deadline: Instant) -> TcpStream {
    listener.set_nonblocking(true).unwrap();
    loop {
        match listener.accept() {
            Ok((tcp, _)) => {
                tcp.set_nonblocking(false).unwrap();
                return tcp;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                peer.check_running("we waited for it to connect");
                if Instant::now() >= deadline {
                    peer.fail("did not connect in time");
                }
                thread::sleep(Duration::from_millis(2));
            }
            Err(e) => peer.fail(&format!("accept failed: {e}")),
        }
    }
}

/// Start the Go peer with `args` (the address is added) and connect to it
/// as `role` says: the peer, our end of the TCP connection, and the stderr
/// lines the peer has printed so far (when Go listens, `listening ADDR`,
/// consumed here).
fn connect(
    bin: &Path,
    role: Role,
    args: &[String],
    stdin: Vec<u8>,
    deadline: Instant,
) -> (Proc, TcpStream, Vec<String>) {
    match role {
        Role::WeListen => {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap().to_string();
            let mut peer = go_dial(bin, args, &addr, Feed::Now(stdin));
            let tcp = accept_from(&listener, &mut peer, deadline);
            (peer, tcp, Vec::new())
        }
        Role::WeDial => {
            let (mut peer, addr) = go_listen(bin, args, Feed::Now(stdin), deadline);
            let tcp = TcpStream::connect(&addr)
                .unwrap_or_else(|e| peer.fail(&format!("connecting to {addr}: {e}")));
            (peer, tcp, vec![listening_line(&addr)])
        }
    }
}

fn exchange(bin: &Path, go_key: &Path, go_id: NodeId, x: Exchange) {
    let started = Instant::now();
    let deadline = started + RUN_LIMIT;
    let identity = Identity::generate();
    let our_id = identity.node_id();
    let theirs = payload(go_len(x.chunk()), x.seed(GO_TO_US));
    let ours = payload(OUR_LEN, x.seed(US_TO_GO));
    let args = vec![
        "-key".to_string(),
        go_key.to_str().unwrap().to_string(),
        "-chunk".to_string(),
        x.chunk().to_string(),
        "-peer-id".to_string(),
        our_id.to_string(),
    ];
    let (mut peer, tcp, mut expected_stderr) =
        connect(bin, x.role, &args, theirs.clone(), deadline);
    let config = match x.role {
        Role::WeDial => Config::default().expect_peer(go_id),
        Role::WeListen => Config::default(),
    };

    let (done_tx, done) = mpsc::channel::<()>();
    let max = theirs.len();
    let ours_sent = ours.clone();
    let worker = thread::spawn(move || {
        let side = our_side(x, tcp, identity, config, ours_sent, max);
        let _ = done_tx.send(());
        side
    });
    // `Disconnected`: our side panicked (the join below re-raises it).
    if let Err(mpsc::RecvTimeoutError::Timeout) = done.recv_timeout(left(deadline)) {
        peer.fail(&format!("{x:?}: our side still running at the deadline"));
    }
    let side = match worker.join() {
        Ok(side) => side,
        Err(payload) => {
            let peer = peer.stop(Duration::from_secs(2));
            eprintln!("{x:?}: our side failed; {peer}");
            panic::resume_unwind(payload);
        }
    };
    let what = peer.what.clone();
    let out = peer.finish(deadline);
    drop(side.keep);

    out.assert_ok(&format!("{x:?}: {what}"));
    expected_stderr.push(peer_line(our_id));
    assert_eq!(out.stderr_lines(), expected_stderr, "{x:?}: Go's stderr");
    assert_eq!(
        side.remote, go_id,
        "{x:?}: our remote_node_id() is not the ID CometBFT computes for its key"
    );
    check_bytes(&format!("{x:?}: we received"), &side.received, &theirs);
    if let Some(items) = &side.items {
        // One codec item per frame: Go's `-chunk` writes, as frames.
        let frames = go_frames(x.chunk(), theirs.len());
        assert!(
            *items == frames,
            "{x:?}: Go's frames as our codec yielded them: {}, expected {}",
            summarize(items),
            summarize(&frames)
        );
    }
    check_bytes(&format!("{x:?}: Go received"), &out.stdout, &ours);
    eprintln!(
        "{} {:?} {:?} -chunk {}: {} B from Go, {} B to Go: {:?}",
        x.version.label(),
        x.adapter,
        x.role,
        x.chunk(),
        theirs.len(),
        ours.len(),
        started.elapsed()
    );
}

/// One matrix cell: the Go chunkings `chunkings` (indexes into [`CHUNKS`]).
/// `test` names it in messages and its scratch folder.
fn cell(test: &str, version: GoVersion, adapter: Adapter, role: Role, chunkings: &[usize]) {
    let Some(bin) = go_peer(version, test) else {
        return;
    };
    let dir = scratch(&test.replace("::", "-"));
    let (key, go_id) = go_key(&bin, &dir);
    for &index in chunkings {
        exchange(
            &bin,
            &key,
            go_id,
            Exchange {
                version,
                adapter,
                role,
                index,
            },
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The chunkings each line's cells run: see the module docs.
fn chunkings(version: GoVersion) -> &'static [usize] {
    match version {
        GoVersion::V038 | GoVersion::V040 | GoVersion::V1 => FULL,
        GoVersion::V034 | GoVersion::V037 | GoVersion::V039 => REDUCED,
    }
}

/// The matrix's cells, one function per adapter and role.
macro_rules! cells {
    ($($name:ident: $adapter:ident, $role:ident;)*) => {$(
        fn $name(version: GoVersion, test: &str) {
            cell(test, version, Adapter::$adapter, Role::$role, chunkings(version));
        }
    )*};
}

cells! {
    tokio_we_listen: Tokio, WeListen;
    tokio_we_dial: Tokio, WeDial;
    std_we_listen: Blocking, WeListen;
    std_we_dial: Blocking, WeDial;
    codec_we_listen: Codec, WeListen;
    codec_we_dial: Codec, WeDial;
}

p2p_conn_interop::per_release! {
    v0_34: V034, v0_37: V037, v0_38: V038, v0_39: V039, v0_40: V040, v1: V1;
    [
        tokio_we_listen,
        tokio_we_dial,
        std_we_listen,
        std_we_dial,
        codec_we_listen,
        codec_we_dial,
    ]
}

// ---------------------------------------------------------------------------
// Peer ID checks that fail

/// `id` with its last hex digit changed.
fn other_id(id: NodeId) -> NodeId {
    let hex = id.to_string();
    let last = if hex.ends_with('0') { '1' } else { '0' };
    let wrong: NodeId = format!("{}{last}", &hex[..39]).parse().unwrap();
    assert_ne!(wrong, id);
    wrong
}

/// Go with `-peer-id` one digit off our ID: it fails after the handshake,
/// naming both IDs, and sends us no data.
#[test]
fn go_rejects_a_wrong_peer_id() {
    for version in GoVersion::ALL {
        let test = format!("go_rejects_a_wrong_peer_id_{}", version.label());
        let Some(bin) = go_peer(version, &test) else {
            return;
        };
        let deadline = Instant::now() + RUN_LIMIT;
        let identity = Identity::generate();
        let wrong = other_id(identity.node_id());
        let args = vec!["-peer-id".to_string(), wrong.to_string()];
        let (peer, tcp, mut expected_stderr) =
            connect(&bin, Role::WeDial, &args, b"never sent".to_vec(), deadline);
        tcp.set_read_timeout(Some(RUN_LIMIT)).unwrap();
        let mut conn = blocking::handshake_tcp(tcp, &identity, &Config::default())
            .expect("the handshake itself succeeds");
        let r = conn.read(&mut [0u8; 4096]);
        assert!(
            !matches!(r, Ok(n) if n > 0),
            "{test}: Go sent data to a peer it rejected: {r:?}"
        );
        let out = peer.finish(deadline);
        assert_eq!(out.status.code(), Some(1), "{test}: {out:?}");
        expected_stderr.push(peer_line(identity.node_id()));
        expected_stderr.push(format!(
            "cometbft-peer: peer is {}, expected {wrong}",
            identity.node_id()
        ));
        assert_eq!(out.stderr_lines(), expected_stderr, "{test}");
        assert!(out.stdout.is_empty(), "{test}");
    }
}

/// `Config::expect_peer` one digit off Go's ID: `PeerIdMismatch` naming both,
/// in every adapter.
#[test]
fn we_reject_go_with_a_wrong_peer_id() {
    for version in GoVersion::ALL {
        let test = format!("we_reject_go_with_a_wrong_peer_id_{}", version.label());
        let Some(bin) = go_peer(version, &test) else {
            return;
        };
        let dir = scratch(&test);
        let (key, go_id) = go_key(&bin, &dir);
        let wrong = other_id(go_id);
        for (adapter, role) in [
            (Adapter::Blocking, Role::WeDial),
            (Adapter::Tokio, Role::WeListen),
            (Adapter::Codec, Role::WeDial),
        ] {
            let deadline = Instant::now() + RUN_LIMIT;
            let args = vec!["-key".to_string(), key.to_str().unwrap().to_string()];
            let (peer, tcp, _) = connect(&bin, role, &args, Vec::new(), deadline);
            let identity = Identity::generate();
            let config = Config::default().expect_peer(wrong);
            let result = match adapter {
                Adapter::Blocking => blocking::handshake_tcp(tcp, &identity, &config).map(drop),
                Adapter::Tokio | Adapter::Codec => tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap()
                    .block_on(async {
                        tcp.set_nonblocking(true).unwrap();
                        let tcp = tokio::net::TcpStream::from_std(tcp).unwrap();
                        let handshake = async {
                            match adapter {
                                Adapter::Tokio => {
                                    ptokio::handshake(tcp, &identity, &config).await.map(drop)
                                }
                                _ => codec::handshake(tcp, &identity, &config).await.map(drop),
                            }
                        };
                        tokio::time::timeout(RUN_LIMIT, handshake)
                            .await
                            .expect("handshake did not end")
                    }),
            };
            match result {
                Err(Error::PeerIdMismatch { expected, actual }) => {
                    assert_eq!((expected, actual), (wrong, go_id), "{test} {adapter:?}");
                }
                other => panic!("{test} {adapter:?}: expected PeerIdMismatch, got {other:?}"),
            }
            // Go's exit status depends on how far it got before we hung up;
            // it must only end.
            let out = peer.finish(deadline);
            assert!(out.stdout.is_empty(), "{test} {adapter:?}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// The test's own premises: Go's frames for a chunking, and streams that
/// differ per direction and per exchange from the first bytes on.
#[test]
fn premises() {
    assert_eq!(go_frames(7, 15), [7, 7, 1]);
    assert_eq!(go_frames(1025, 2051), [1024, 1, 1024, 1, 1]);
    assert_eq!(go_frames(1 << 20, (2 << 20) + 3).len(), 2049);
    assert_eq!(
        pieces(&[0u8; 2100])
            .iter()
            .map(|p| p.len())
            .collect::<Vec<_>>(),
        [1, 7, 1000, 1023, 69]
    );
    let x = Exchange {
        version: GoVersion::V1,
        adapter: Adapter::Tokio,
        role: Role::WeListen,
        index: 0,
    };
    let y = Exchange {
        version: GoVersion::V038,
        ..x
    };
    let streams = [
        payload(64, x.seed(GO_TO_US)),
        payload(64, x.seed(US_TO_GO)),
        payload(64, y.seed(GO_TO_US)),
        payload(64, Exchange { index: 1, ..x }.seed(GO_TO_US)),
    ];
    for (i, a) in streams.iter().enumerate() {
        for b in &streams[i + 1..] {
            assert_ne!(a[..8], b[..8]);
        }
    }
}
