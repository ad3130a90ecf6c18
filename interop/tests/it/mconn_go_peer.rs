//! CometBFT's own MConnection against itself through the Go peer's `mconn`
//! mode ([`p2p_conn_interop::mconn_peer`]): a v1.0.1 dialer against each
//! release line's listener, over loopback. This proves the mode (and that
//! the lines' MConnections agree) before p2p-conn's own MConnection is run
//! against it.
//!
//! Without Go the tests print a notice and pass; with `CI=true` they fail.

use std::time::{Duration, Instant};

use p2p_conn_interop::cometbft_go::GoVersion;
use p2p_conn_interop::go_peer::go_peer;
use p2p_conn_interop::mconn_peer::{
    go_mconn_dial, go_mconn_listen, GoChannel, GoSend, MconnArgs, MconnEvent, MconnOutput,
};

/// Bound on each run (the runs themselves take about a second at most).
const RUN: Duration = Duration::from_secs(30);

/// The v1.0.1 dialer's and `version`'s listener's binaries, or `None`
/// without Go.
fn peers(version: GoVersion, test: &str) -> Option<(std::path::PathBuf, std::path::PathBuf)> {
    let dialer = go_peer(GoVersion::V1, test)?;
    let listener = go_peer(version, test)?;
    Some((dialer, listener))
}

/// Run a listener of `version` with `listen` and a v1.0.1 dialer with
/// `dial` against it; both must exit (0) by the deadline.
fn run(
    version: GoVersion,
    test: &str,
    listen: &MconnArgs,
    dial: &MconnArgs,
) -> Option<(MconnOutput, MconnOutput)> {
    let (dialer, listener) = peers(version, test)?;
    let deadline = Instant::now() + RUN;
    let (lp, addr) = go_mconn_listen(&listener, listen, deadline);
    let dp = go_mconn_dial(&dialer, dial, &addr);
    let d = MconnOutput::collect(dp, deadline);
    let l = MconnOutput::collect(lp, deadline);
    Some((d, l))
}

/// Whether `output` ends with the other side's hang-up: `EOF`, or a reset
/// when a ping was still in flight as it closed.
fn ends_in_hang_up(output: &MconnOutput) -> bool {
    matches!(output.last(), Some(MconnEvent::Error(e))
        if e == "EOF" || e.ends_with("connection reset by peer"))
}

fn two_channels() -> Vec<GoChannel> {
    vec![GoChannel::new(0x20, 5), GoChannel::new(0x21, 1)]
}

/// Messages on two channels both ways, some split over many packets (7000
/// and 5000 bytes against 1024-byte packets), the listener echoing: each
/// side receives exactly what the other sent (digests), and the dialer its
/// own messages back.
fn both_ways(version: GoVersion, test: &str) {
    let throttle = Some(Duration::from_millis(10));
    let listen = MconnArgs {
        channels: two_channels(),
        flush_throttle: throttle,
        echo: true,
        sends: vec![
            GoSend {
                channel: 0x20,
                size: 200,
                count: 5,
            },
            GoSend {
                channel: 0x21,
                size: 5000,
                count: 3,
            },
        ],
        ..MconnArgs::default()
    };
    let dial = MconnArgs {
        channels: two_channels(),
        flush_throttle: throttle,
        sends: vec![
            GoSend {
                channel: 0x20,
                size: 7000,
                count: 3,
            },
            GoSend {
                channel: 0x21,
                size: 100,
                count: 5,
            },
        ],
        // The listener's 8 messages and the echoes of our 8.
        exit_after: Some(16),
        ..MconnArgs::default()
    };
    let Some((d, l)) = run(version, test, &listen, &dial) else {
        return;
    };
    assert!(
        matches!(d.last(), Some(MconnEvent::Stopped { why, received: 16, .. }) if why == "received 16"),
        "{test}: the dialer did not stop after 16 messages: {:?}",
        d.finished
    );
    assert_eq!(d.error(), None, "{test}: dialer {:?}", d.finished);
    let (d_sent, l_sent) = (d.sent(), l.sent());
    assert_eq!(d_sent.len(), 8, "{test}: {:?}", d.finished);
    assert_eq!(l_sent.len(), 8, "{test}: {:?}", l.finished);
    for ch in [0x20, 0x21] {
        assert!(d_sent.iter().any(|m| m.channel == ch), "{test}: no {ch:#x}");
        assert!(l_sent.iter().any(|m| m.channel == ch), "{test}: no {ch:#x}");
    }
    assert_eq!(l.received(), d_sent, "{test}: what the listener received");
    let mut expected = [d_sent, l_sent].concat();
    expected.sort();
    assert_eq!(d.received(), expected, "{test}: what the dialer received");
    // The dialer's stop ends the connection under the listener.
    assert!(ends_in_hang_up(&l), "{test}: {l:?}");
}

/// Pings every 200 ms, pongs due within 100 ms: a second passes without a
/// pong timeout on either side, and ping and pong bytes flow both ways
/// (no message is sent).
fn pings_keep_up(version: GoVersion, test: &str) {
    let pings = |duration| MconnArgs {
        ping_interval: Some(Duration::from_millis(200)),
        pong_timeout: Some(Duration::from_millis(100)),
        duration: Some(duration),
        ..MconnArgs::default()
    };
    let Some((d, l)) = run(
        version,
        test,
        &pings(Duration::from_secs(5)),
        &pings(Duration::from_secs(1)),
    ) else {
        return;
    };
    match d.events.as_slice() {
        [MconnEvent::Stopped {
            why,
            received: 0,
            sent_bytes,
            recv_bytes,
        }] => {
            assert_eq!(why, "duration", "{test}");
            assert!(
                *sent_bytes > 0 && *recv_bytes > 0,
                "{test}: no ping traffic: {d:?}"
            );
        }
        _ => panic!("{test}: the dialer did not run its second out: {d:?}"),
    }
    // The listener (5 s) saw only the dialer's hang-up at 1 s.
    assert!(l.events.len() == 1 && ends_in_hang_up(&l), "{test}: {l:?}");
}

/// A message on a channel the listener lacks stops its MConnection with
/// CometBFT's error.
fn unknown_channel(version: GoVersion, test: &str) {
    let listen = MconnArgs {
        channels: vec![GoChannel::new(0x20, 1)],
        ..MconnArgs::default()
    };
    let dial = MconnArgs {
        channels: vec![GoChannel::new(0x20, 1), GoChannel::new(0x22, 1)],
        sends: vec![GoSend {
            channel: 0x22,
            size: 10,
            count: 1,
        }],
        ..MconnArgs::default()
    };
    let Some((d, l)) = run(version, test, &listen, &dial) else {
        return;
    };
    assert_eq!(
        l.events,
        [MconnEvent::Error("unknown channel 22".into())],
        "{test}: {l:?}"
    );
    assert_eq!(d.sent().len(), 1, "{test}: {d:?}");
    assert!(
        d.error().is_some(),
        "{test}: the dialer saw no hang-up: {d:?}"
    );
}

/// A message over the listener's receive cap (2000 bytes against 1000)
/// stops its MConnection.
fn over_receive_cap(version: GoVersion, test: &str) {
    let listen = MconnArgs {
        channels: vec![GoChannel::new(0x20, 1).recv_cap(1000)],
        ..MconnArgs::default()
    };
    let dial = MconnArgs {
        channels: vec![GoChannel::new(0x20, 1)],
        sends: vec![GoSend {
            channel: 0x20,
            size: 2000,
            count: 1,
        }],
        ..MconnArgs::default()
    };
    let Some((_, l)) = run(version, test, &listen, &dial) else {
        return;
    };
    assert!(l.received().is_empty(), "{test}: {l:?}");
    let error = l
        .error()
        .unwrap_or_else(|| panic!("{test}: no error: {l:?}"));
    assert!(
        error.starts_with("received message exceeds available capacity"),
        "{test}: {error}"
    );
}

p2p_conn_interop::per_release! {
    v0_34: V034, v0_37: V037, v0_38: V038, v0_39: V039, v0_40: V040, v1: V1;
    [both_ways, pings_keep_up, unknown_channel, over_receive_cap]
}
