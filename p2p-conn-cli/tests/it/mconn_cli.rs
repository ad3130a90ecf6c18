//! `listen`/`dial --mconn`: the CLI's MConnection against CometBFT's own
//! (the Go peer's `mconn` mode) and against a real `cometbft` node.
//!
//! The node test checks, 5 s after the node started our MConnection (while
//! its consensus reactor sends us its round state on 0x20), that the node
//! still lists us in its RPC `net_info` and has logged no `Stopping peer
//! for error` naming us, and that `dial` is still running. Staying past the
//! node's first ping (60 s) and its pong timeout (45 s), neither of which a
//! node's config can change, is `tests/it/after_pong_timeout.rs`; pings and pongs
//! with short timers are proven against the Go MConnection
//! (`p2p-conn-mconn/tests/it/cometbft_go.rs`).
//!
//! Without Go each test prints a notice and passes, unless `CI=true`.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::cometbft_node::{node_binary, Node};
use crate::common::process::{Feed, Proc};
use p2p_conn_interop::cometbft_go::GoVersion;
use p2p_conn_interop::go_peer::go_peer;
use p2p_conn_interop::mconn_peer::{
    go_mconn_listen, GoChannel, GoSend, MconnArgs, MconnEvent, MconnOutput,
};

const BIN: &str = env!("CARGO_BIN_EXE_p2p-conn");
const LIMIT: Duration = Duration::from_secs(30);

/// `dial --mconn --channels 0x20,0x21:3 --output raw` to the Go peer's
/// MConnection, which echoes and sends one 100 KiB message on 0x20: our
/// line comes back and the 100 KiB message arrives whole on stdout (its
/// length and digest as Go printed them); at the end of stdin we close, Go
/// sees the end of stream, and `dial` exits 0.
fn dial_mconn_to_go(version: GoVersion, test: &str) {
    let Some(bin) = go_peer(version, test) else {
        return;
    };
    let deadline = Instant::now() + LIMIT;
    let go = MconnArgs {
        channels: vec![GoChannel::new(0x20, 1), GoChannel::new(0x21, 3)],
        echo: true,
        sends: vec![GoSend {
            channel: 0x20,
            size: 100 * 1024,
            count: 1,
        }],
        ..MconnArgs::default()
    };
    let (proc, addr) = go_mconn_listen(&bin, &go, deadline);
    let line = b"hello over mconn\n".to_vec();
    let total = line.len() + 100 * 1024;
    let out = Proc::spawn(
        Path::new(BIN),
        &[
            "dial",
            &addr,
            "--mconn",
            "--channels",
            "0x20,0x21:3",
            "--output",
            "raw",
        ],
        Feed::UntilOutput(line.clone(), total),
    )
    .finish_within(LIMIT);
    out.assert_ok(test);
    let go_out = MconnOutput::collect(proc, deadline);
    let sent = go_out.sent();
    assert_eq!(sent.len(), 1, "{test}: {go_out:?}");
    assert_eq!(go_out.received().len(), 1, "{test}: {go_out:?}");
    assert_eq!(go_out.received()[0].len, line.len(), "{test}");
    let stdout = &out.stdout;
    assert_eq!(stdout.len(), total, "{test}");
    let (big, small) = if stdout.starts_with(&line) {
        (&stdout[line.len()..], &stdout[..line.len()])
    } else {
        (&stdout[..100 * 1024], &stdout[100 * 1024..])
    };
    assert_eq!(small, &line[..], "{test}: our echo");
    let digest = p2p_conn_interop::mconn_peer::Digest {
        channel: 0x20,
        len: big.len(),
        sha256: hex_sha256(big),
    };
    assert_eq!(sent[0], digest, "{test}: the 100 KiB message");
    assert!(
        matches!(go_out.last(), Some(MconnEvent::Error(e)) if e == "EOF"),
        "{test}: {go_out:?}"
    );
}

/// One line of `--output lines`: `0x20 5 68656c6c6f`, channel, length
/// and the message in hex.
fn parse_line(line: &str) -> (u8, usize, Vec<u8>) {
    let fields: Vec<&str> = line.split(' ').collect();
    let [channel, len, data] = fields[..] else {
        panic!("not `CHANNEL LENGTH HEX`: {line:?}");
    };
    let channel = channel
        .strip_prefix("0x")
        .and_then(|c| u8::from_str_radix(c, 16).ok())
        .unwrap_or_else(|| panic!("channel {channel:?} in {line:?}"));
    let len: usize = len.parse().unwrap_or_else(|e| panic!("{line:?}: {e}"));
    let data = hex::decode(data).unwrap_or_else(|e| panic!("{line:?}: {e}"));
    assert_eq!(data.len(), len, "{line:?}");
    (channel, len, data)
}

/// `dial --mconn` by default writes each message as one line, `0xCH LEN
/// HEX`, so that messages can be told apart again, on every channel given:
/// against the Go peer, which echoes our line on 0x20 and sends 100 KiB on
/// 0x20 and 10 bytes on 0x21, stdout is three lines, each with Go's length
/// and digest.
fn dial_mconn_lines_to_go(version: GoVersion, test: &str) {
    let Some(bin) = go_peer(version, test) else {
        return;
    };
    let deadline = Instant::now() + LIMIT;
    let go = MconnArgs {
        channels: vec![GoChannel::new(0x20, 1), GoChannel::new(0x21, 3)],
        echo: true,
        sends: vec![
            GoSend {
                channel: 0x20,
                size: 100 * 1024,
                count: 1,
            },
            GoSend {
                channel: 0x21,
                size: 10,
                count: 1,
            },
        ],
        ..MconnArgs::default()
    };
    let (proc, addr) = go_mconn_listen(&bin, &go, deadline);
    let line = b"hello over mconn\n".to_vec();
    let one = |ch: &str, len: usize| ch.len() + 1 + len.to_string().len() + 1 + 2 * len + 1;
    let total = one("0x20", line.len()) + one("0x20", 100 * 1024) + one("0x21", 10);
    let out = Proc::spawn(
        Path::new(BIN),
        &["dial", &addr, "--mconn", "--channels", "0x20,0x21:3"],
        Feed::UntilOutput(line.clone(), total),
    )
    .finish_within(LIMIT);
    out.assert_ok(test);
    let go_out = MconnOutput::collect(proc, deadline);
    let text = String::from_utf8(out.stdout.clone()).expect("lines are ASCII");
    assert!(text.ends_with('\n'), "{test}: {text:.200}");
    let mut got: Vec<(u8, usize, Vec<u8>)> = text.lines().map(parse_line).collect();
    got.sort_by_key(|m| (m.0, m.1));
    assert_eq!(got.len(), 3, "{test}: {got:?}");
    assert_eq!((got[0].0, &got[0].2), (0x20, &line), "{test}: our echo");
    let mut want = go_out.sent();
    want.sort_by_key(|d| (d.channel, d.len));
    let digests: Vec<p2p_conn_interop::mconn_peer::Digest> = got[1..]
        .iter()
        .map(
            |(channel, len, data)| p2p_conn_interop::mconn_peer::Digest {
                channel: *channel,
                len: *len,
                sha256: hex_sha256(data),
            },
        )
        .collect();
    assert_eq!(digests, want, "{test}: Go's messages");
}

/// `listen --mconn --channels 0x20`, dialed by the Go peer's MConnection,
/// which sends one 1000-byte message: it arrives on stdout (Go's digest),
/// our line reaches Go, and at the end of stdin we close.
fn listen_mconn_from_go(version: GoVersion, test: &str) {
    let Some(bin) = go_peer(version, test) else {
        return;
    };
    let deadline = Instant::now() + LIMIT;
    let line = b"hi from listen\n".to_vec();
    let mut listen = Proc::spawn(
        Path::new(BIN),
        &[
            "listen",
            "127.0.0.1:0",
            "--mconn",
            "--channels",
            "0x20",
            "--output",
            "raw",
        ],
        Feed::UntilOutput(line.clone(), 1000),
    );
    let first = listen.next_line(deadline);
    let addr = first
        .strip_prefix("listening ")
        .unwrap_or_else(|| listen.fail(&format!("first stderr line {first:?}")))
        .to_string();
    let go = MconnArgs {
        channels: vec![GoChannel::new(0x20, 1)],
        sends: vec![GoSend {
            channel: 0x20,
            size: 1000,
            count: 1,
        }],
        ..MconnArgs::default()
    };
    let go_proc = p2p_conn_interop::mconn_peer::go_mconn_dial(&bin, &go, &addr);
    let out = listen.finish_within(LIMIT);
    out.assert_ok(test);
    let go_out = MconnOutput::collect(go_proc, deadline);
    let sent = go_out.sent();
    assert_eq!(sent.len(), 1, "{test}: {go_out:?}");
    assert_eq!(out.stdout.len(), 1000, "{test}");
    assert_eq!(sent[0].sha256, hex_sha256(&out.stdout), "{test}");
    let received = go_out.received();
    assert_eq!(received.len(), 1, "{test}: {go_out:?}");
    assert_eq!(received[0].sha256, hex_sha256(&line), "{test}");
}

fn hex_sha256(data: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(data))
}

/// `dial --nodeinfo --mconn --channels 0x20` to a real node stays its peer
/// 5 s on (past the pong timeout: `tests/it/after_pong_timeout.rs`).
fn dial_mconn_stays_a_nodes_peer(version: GoVersion, test: &str) {
    let Some(bin) = node_binary(version, test) else {
        return;
    };
    let node = Node::start(&bin);
    let own = crate::common::our_node_key(test);
    let (key, our_id) = (own.path.as_str(), own.id.clone());
    let mark = node.log_len();
    let target = format!("{}@{}", node.node_id, node.p2p_addr);
    let mut dial = Proc::spawn(
        Path::new(BIN),
        &[
            "dial",
            &target,
            "--key",
            key,
            "--nodeinfo",
            "--mconn",
            "--channels",
            "0x20",
            "--handshake-timeout",
            "10",
        ],
        // Stdin stays open (and empty) while dial runs.
        Feed::AfterOutput(usize::MAX, Vec::new()),
    );
    crate::common::wait_joined(&node, mark, &our_id, test);
    std::thread::sleep(Duration::from_secs(5));
    crate::common::check_still_peer(&mut dial, &node, &our_id, test);
    let log = node.log_since(mark);
    let stopped: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("Stopping peer for error") && l.contains(&our_id))
        .collect();
    assert!(stopped.is_empty(), "{test}: {stopped:?}");
    let _ = dial.stop(Duration::ZERO);
    let _ = std::fs::remove_dir_all(&own.dir);
}

/// `dial --nodeinfo --mconn --channels 0x30` sending `hello` to a real
/// node: the evidence reactor cannot decode it and the node stops the peer
/// at once; `dial` says that the node closed right after our message on
/// 0x30, and why a node does that.
fn dial_mconn_names_the_message_a_node_refused(version: GoVersion, test: &str) {
    let Some(bin) = node_binary(version, test) else {
        return;
    };
    let node = Node::start(&bin);
    let own = crate::common::our_node_key(test);
    let mark = node.log_len();
    let target = format!("{}@{}", node.node_id, node.p2p_addr);
    let dial = Proc::spawn(
        Path::new(BIN),
        &[
            "dial",
            &target,
            "--key",
            own.path.as_str(),
            "--nodeinfo",
            "--mconn",
            "--channels",
            "0x30",
            "--handshake-timeout",
            "10",
        ],
        // `hello` at once, then stdin stays open: only the node ends it.
        Feed::UntilOutput(b"hello".to_vec(), usize::MAX),
    );
    let done = dial.finish_within(Duration::from_secs(30));
    let stderr = done.stderr_lines().join("\n");
    assert!(
        stderr.contains("after our message on channel 0x30") && stderr.contains("cannot decode"),
        "{test}: {stderr}"
    );
    let log = node.log_since(mark);
    assert!(
        log.lines()
            .any(|l| l.contains("Stopping peer for error") && l.contains(&own.id)),
        "{test}: the node did not stop us:\n{log}"
    );
    let _ = std::fs::remove_dir_all(&own.dir);
}

p2p_conn_interop::per_release! {
    v0_38: V038, v1: V1;
    [
        dial_mconn_to_go,
        dial_mconn_lines_to_go,
        listen_mconn_from_go,
        dial_mconn_stays_a_nodes_peer,
        dial_mconn_names_the_message_a_node_refused
    ]
}
