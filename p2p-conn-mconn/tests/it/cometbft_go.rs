//! p2p-conn's MConnection (`mconn::MConnection`, the tokio adapter over the
//! sans-IO core) against CometBFT's own `p2p/conn.MConnection`, through the
//! Go peer's `mconn` mode ([`p2p_conn_interop::mconn_peer`]), at every
//! release line, over loopback, in both dial directions.
//!
//! Messages are random bytes compared by SHA-256 (the Go peer prints
//! digests, not contents). Timers run at a few hundred milliseconds.
//!
//! Without Go the tests print a notice and pass; with `CI=true` they fail.

use std::net::TcpListener as StdListener;
use std::time::{Duration, Instant};

use p2p_conn::io::tokio::{handshake, SecretConnection};
use p2p_conn::testkit::payload;
use p2p_conn::{Config, Identity};
use p2p_conn_interop::cometbft_go::GoVersion;
use p2p_conn_interop::go_peer::go_peer;
use p2p_conn_interop::mconn_peer::{
    go_mconn_dial, go_mconn_listen, Digest, GoChannel, GoSend, MconnArgs, MconnEvent, MconnOutput,
};
use p2p_conn_interop::process::Proc;
use p2p_conn_mconn::{
    ChannelDescriptor, MConnCloseReason, MConnConfig, MConnError, MConnReceiver, MConnSender,
    MConnection, Received,
};
use sha2::{Digest as _, Sha256};
use tokio::net::TcpStream;

/// Bound on each run.
const RUN: Duration = Duration::from_secs(30);

#[derive(Clone, Copy, Debug)]
enum Dir {
    /// We dial the Go listener.
    WeDial,
    /// The Go peer dials us.
    WeListen,
}

const DIRS: [Dir; 2] = [Dir::WeDial, Dir::WeListen];

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn digest(channel: u8, data: &[u8]) -> Digest {
    Digest {
        channel,
        len: data.len(),
        sha256: hex::encode(Sha256::digest(data)),
    }
}

/// The Go peer started with `args` in the direction `dir`, and our end of
/// the secret connection to it.
fn connect(
    rt: &tokio::runtime::Runtime,
    bin: &std::path::Path,
    dir: Dir,
    args: &MconnArgs,
) -> (Proc, SecretConnection<TcpStream>) {
    let deadline = Instant::now() + RUN;
    let identity = Identity::generate();
    let config = Config::default();
    match dir {
        Dir::WeDial => {
            let (proc, addr) = go_mconn_listen(bin, args, deadline);
            let conn = rt.block_on(async {
                let tcp = TcpStream::connect(&addr).await.expect("connect");
                tcp.set_nodelay(true).unwrap();
                handshake(tcp, &identity, &config).await.expect("handshake")
            });
            (proc, conn)
        }
        Dir::WeListen => {
            let listener = StdListener::bind("127.0.0.1:0").expect("bind");
            listener.set_nonblocking(true).unwrap();
            let addr = listener.local_addr().unwrap().to_string();
            let proc = go_mconn_dial(bin, args, &addr);
            let conn = rt.block_on(async {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let (tcp, _) = tokio::time::timeout(RUN, listener.accept())
                    .await
                    .expect("the Go peer did not dial")
                    .expect("accept");
                tcp.set_nodelay(true).unwrap();
                handshake(tcp, &identity, &config).await.expect("handshake")
            });
            (proc, conn)
        }
    }
}

/// The channels of both sides in most tests: 0x20 (priority 5) and 0x21.
fn ours() -> Vec<ChannelDescriptor> {
    vec![
        ChannelDescriptor::new(0x20).with_priority(5),
        ChannelDescriptor::new(0x21),
    ]
}

fn theirs() -> Vec<GoChannel> {
    vec![GoChannel::new(0x20, 5), GoChannel::new(0x21, 1)]
}

/// The next event within `limit`.
async fn next(rx: &mut MConnReceiver, limit: Duration, test: &str) -> Received {
    tokio::time::timeout(limit, rx.recv())
        .await
        .unwrap_or_else(|_| panic!("{test}: nothing from the MConnection in {limit:?}"))
        .unwrap_or_else(|| panic!("{test}: the receiver ended without a close event"))
}

/// Wait for the close event (messages before it are an error).
async fn closed(rx: &mut MConnReceiver, limit: Duration, test: &str) -> MConnCloseReason {
    match next(rx, limit, test).await {
        Received::Closed(r) => r,
        Received::Message { channel, data } => panic!(
            "{test}: a message on {channel:#x} ({} bytes) where a close was due",
            data.len()
        ),
        other => panic!("{test}: {other:?}"),
    }
}

fn spawn(
    conn: SecretConnection<TcpStream>,
    channels: &[ChannelDescriptor],
    config: MConnConfig,
) -> (MConnSender, MConnReceiver) {
    MConnection::spawn(conn, channels, config).expect("spawn")
}

/// Messages on two channels both ways, the large ones (100 KiB) split into
/// a hundred packets and reassembled, the Go peer echoing ours: each side
/// receives exactly what the other sent (SHA-256), and we get our own back.
fn both_ways(version: GoVersion, test: &str) {
    let Some(bin) = go_peer(version, test) else {
        return;
    };
    let rt = runtime();
    for dir in DIRS {
        let go = MconnArgs {
            channels: theirs(),
            echo: true,
            sends: vec![
                GoSend {
                    channel: 0x20,
                    size: 200,
                    count: 5,
                },
                GoSend {
                    channel: 0x21,
                    size: 100 * 1024,
                    count: 2,
                },
            ],
            ..MconnArgs::default()
        };
        let (proc, conn) = connect(&rt, &bin, dir, &go);
        let (sent, received) = rt.block_on(async {
            let (tx, mut rx) = spawn(conn, &ours(), MConnConfig::default());
            let mut sent = Vec::new();
            for (i, (channel, len)) in [(0x20, 7000), (0x21, 100 * 1024), (0x20, 1), (0x21, 0)]
                .into_iter()
                .enumerate()
            {
                let data = payload(len, i as u64 + 1);
                sent.push(digest(channel, &data));
                tx.send(channel, data).await.expect("send");
            }
            let mut received = Vec::new();
            // Go's 7 messages and the echoes of our 4.
            while received.len() < 11 {
                match next(&mut rx, RUN, test).await {
                    Received::Message { channel, data } => received.push(digest(channel, &data)),
                    Received::Closed(r) => panic!("{test} {dir:?}: closed early: {r}"),
                    other => panic!("{test}: {other:?}"),
                }
            }
            let stats = tx.stats();
            assert_eq!(stats.channels.len(), 2, "{test}");
            assert_eq!(
                stats.channels.iter().map(|c| c.messages_sent).sum::<u64>(),
                4,
                "{test} {dir:?}: {stats:?}"
            );
            tx.close();
            assert_eq!(
                closed(&mut rx, RUN, test).await,
                MConnCloseReason::Local,
                "{test}"
            );
            (sent, received)
        });
        let out = MconnOutput::collect(proc, Instant::now() + RUN);
        let mut sent = sent;
        sent.sort();
        assert_eq!(out.received(), sent, "{test} {dir:?}: what Go received");
        let mut expected = [out.sent(), sent.clone()].concat();
        expected.sort();
        let mut received = received;
        received.sort();
        assert_eq!(received, expected, "{test} {dir:?}: what we received");
        assert_eq!(out.sent().len(), 7, "{test} {dir:?}");
        assert!(out.received().iter().any(|d| d.len == 100 * 1024), "{test}");
        // Our close ends its MConnection with the end of stream.
        assert!(
            matches!(out.last(), Some(MconnEvent::Error(e)) if e == "EOF"),
            "{test} {dir:?}: {out:?}"
        );
    }
}

/// Both sides ping every 200 ms and want the pong within 150 ms: for 1.5 s,
/// until the Go peer stops, neither times out, and
/// pings and pongs flow both ways.
fn pings_answered(version: GoVersion, test: &str) {
    let Some(bin) = go_peer(version, test) else {
        return;
    };
    let rt = runtime();
    for dir in DIRS {
        let go = MconnArgs {
            ping_interval: Some(Duration::from_millis(200)),
            pong_timeout: Some(Duration::from_millis(150)),
            duration: Some(Duration::from_millis(1500)),
            ..MconnArgs::default()
        };
        let (proc, conn) = connect(&rt, &bin, dir, &go);
        let started = Instant::now();
        let (reason, stats) = rt.block_on(async {
            let config = MConnConfig::default()
                .with_keepalive(Duration::from_millis(200), Duration::from_millis(150));
            let (tx, mut rx) = spawn(conn, &ours(), config);
            let reason = closed(&mut rx, RUN, test).await;
            (reason, tx.stats())
        });
        let lasted = started.elapsed();
        let out = MconnOutput::collect(proc, Instant::now() + RUN);
        assert!(
            matches!(reason, MConnCloseReason::PeerClosed { .. }),
            "{test} {dir:?}: {reason:?} {out:?}"
        );
        assert!(lasted >= Duration::from_secs(1), "{test}: {lasted:?}");
        assert!(
            matches!(out.events.as_slice(), [MconnEvent::Stopped { why, .. }] if why == "duration"),
            "{test} {dir:?}: the Go peer did not run its time out: {out:?}"
        );
        // Over 1.5 s at 200 ms: several each way (a bound, not a rate).
        assert!(stats.pings_sent >= 3, "{test} {dir:?}: {stats:?}");
        assert!(stats.pongs_received >= 3, "{test} {dir:?}: {stats:?}");
        assert!(stats.pings_received >= 3, "{test} {dir:?}: {stats:?}");
        assert!(stats.pongs_sent >= 3, "{test} {dir:?}: {stats:?}");
    }
}

fn signal(proc: &Proc, sig: &str) {
    let status = std::process::Command::new("kill")
        .args([&format!("-{sig}"), &proc.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success(), "kill -{sig}");
}

/// The Go peer frozen (SIGSTOP): no pong comes, and our side closes with
/// [`MConnError::PongTimeout`] within the ping interval and the pong timeout
/// (plus a slack for a loaded machine). Before that the connection lived a
/// second with pings answered.
fn late_pong(version: GoVersion, test: &str) {
    let Some(bin) = go_peer(version, test) else {
        return;
    };
    let rt = runtime();
    let (interval, timeout) = (Duration::from_millis(200), Duration::from_millis(150));
    let slack = Duration::from_secs(2);
    for dir in DIRS {
        let (proc, conn) = connect(&rt, &bin, dir, &MconnArgs::default());
        let (reason, frozen_for, stats) = rt.block_on(async {
            let config = MConnConfig::default().with_keepalive(interval, timeout);
            let (tx, mut rx) = spawn(conn, &ours(), config);
            let quiet = tokio::time::timeout(Duration::from_secs(1), rx.recv()).await;
            assert!(quiet.is_err(), "{test} {dir:?}: {quiet:?}");
            let answered = tx.stats().pongs_received;
            signal(&proc, "STOP");
            let frozen = Instant::now();
            let reason = closed(&mut rx, RUN, test).await;
            (reason, frozen.elapsed(), (answered, tx.stats()))
        });
        signal(&proc, "CONT");
        proc.stop(Duration::from_millis(100));
        assert_eq!(
            reason,
            MConnCloseReason::Protocol(MConnError::PongTimeout),
            "{test} {dir:?}"
        );
        assert!(stats.0 >= 2, "{test} {dir:?}: pongs before: {stats:?}");
        eprintln!("{test} {dir:?}: pong timeout detected {frozen_for:?} after SIGSTOP");
        assert!(
            frozen_for <= interval + timeout + slack,
            "{test} {dir:?}: detected after {frozen_for:?}"
        );
    }
}

/// A message on a channel the Go peer lacks (0x22, from us) stops its
/// MConnection with CometBFT's error; one on a channel we lack (0x23, from
/// Go) stops ours with [`MConnError::UnknownChannel`].
fn unknown_channel(version: GoVersion, test: &str) {
    let Some(bin) = go_peer(version, test) else {
        return;
    };
    let rt = runtime();
    // From us (we dial).
    let go = MconnArgs {
        channels: vec![GoChannel::new(0x20, 1)],
        ..MconnArgs::default()
    };
    let (proc, conn) = connect(&rt, &bin, Dir::WeDial, &go);
    let reason = rt.block_on(async {
        let channels = [ChannelDescriptor::new(0x20), ChannelDescriptor::new(0x22)];
        let (tx, mut rx) = spawn(conn, &channels, MConnConfig::default());
        tx.try_send(0x22, b"not yours".to_vec()).expect("queued");
        closed(&mut rx, RUN, test).await
    });
    let out = MconnOutput::collect(proc, Instant::now() + RUN);
    assert_eq!(
        out.events,
        [MconnEvent::Error("unknown channel 22".into())],
        "{test}: {out:?}"
    );
    assert!(
        matches!(
            reason,
            MConnCloseReason::PeerClosed { .. } | MConnCloseReason::Transport(_)
        ),
        "{test}: {reason:?}"
    );
    // From Go (it dials).
    let go = MconnArgs {
        channels: vec![GoChannel::new(0x20, 1), GoChannel::new(0x23, 1)],
        sends: vec![GoSend {
            channel: 0x23,
            size: 10,
            count: 1,
        }],
        ..MconnArgs::default()
    };
    let (proc, conn) = connect(&rt, &bin, Dir::WeListen, &go);
    let reason = rt.block_on(async {
        let (_tx, mut rx) = spawn(
            conn,
            &[ChannelDescriptor::new(0x20)],
            MConnConfig::default(),
        );
        closed(&mut rx, RUN, test).await
    });
    let out = MconnOutput::collect(proc, Instant::now() + RUN);
    assert_eq!(
        reason,
        MConnCloseReason::Protocol(MConnError::UnknownChannel(0x23)),
        "{test}: {out:?}"
    );
    assert!(out.error().is_some(), "{test}: Go saw no hang-up: {out:?}");
}

/// A message over our receive cap (2000 bytes against 1000, from Go) stops
/// ours with [`MConnError::RecvMessageTooLarge`] and delivers nothing; one
/// over Go's (from us) stops Go's with CometBFT's error.
fn over_receive_cap(version: GoVersion, test: &str) {
    let Some(bin) = go_peer(version, test) else {
        return;
    };
    let rt = runtime();
    let go = MconnArgs {
        channels: vec![GoChannel::new(0x20, 1)],
        sends: vec![GoSend {
            channel: 0x20,
            size: 2000,
            count: 1,
        }],
        ..MconnArgs::default()
    };
    let (proc, conn) = connect(&rt, &bin, Dir::WeDial, &go);
    let reason = rt.block_on(async {
        let channels = [ChannelDescriptor::new(0x20).with_recv_message_capacity(1000)];
        let (_tx, mut rx) = spawn(conn, &channels, MConnConfig::default());
        closed(&mut rx, RUN, test).await
    });
    let out = MconnOutput::collect(proc, Instant::now() + RUN);
    match reason {
        MConnCloseReason::Protocol(MConnError::RecvMessageTooLarge {
            channel: 0x20,
            len,
            capacity: 1000,
        }) => assert!(len > 1000, "{test}: {len}"),
        other => panic!("{test}: {other:?} ({out:?})"),
    }
    let go = MconnArgs {
        channels: vec![GoChannel::new(0x20, 1).recv_cap(1000)],
        ..MconnArgs::default()
    };
    let (proc, conn) = connect(&rt, &bin, Dir::WeListen, &go);
    let reason = rt.block_on(async {
        let (tx, mut rx) = spawn(
            conn,
            &[ChannelDescriptor::new(0x20)],
            MConnConfig::default(),
        );
        tx.send(0x20, payload(2000, 7)).await.expect("queued");
        closed(&mut rx, RUN, test).await
    });
    let out = MconnOutput::collect(proc, Instant::now() + RUN);
    assert!(out.received().is_empty(), "{test}: {out:?}");
    let error = out
        .error()
        .unwrap_or_else(|| panic!("{test}: no error: {out:?}"));
    assert!(
        error.starts_with("received message exceeds available capacity"),
        "{test}: {error}"
    );
    assert!(
        matches!(
            reason,
            MConnCloseReason::PeerClosed { .. } | MConnCloseReason::Transport(_)
        ),
        "{test}: {reason:?}"
    );
}

p2p_conn_interop::per_release! {
    v0_34: V034, v0_37: V037, v0_38: V038, v0_39: V039, v0_40: V040, v1: V1;
    [both_ways, pings_answered, late_pong, unknown_channel, over_receive_cap]
}
