//! Hostile MConnection packets over a real loopback socket: the testkit's
//! evil peer (`p2p_conn::testkit::evil_peer`) authenticates honestly, then
//! writes hostile plaintext in correctly sealed frames, and the victim runs
//! `mconn::MConnection` over its tokio connection. Each case must end the
//! connection with its typed [`MConnError`], deliver nothing, and stay in
//! bounded memory: the victim runs on a current-thread runtime (its task on
//! the test's thread), and the counting allocator's per-thread high-water
//! mark is checked against the caps.

use std::net::TcpListener;
use std::time::Duration;

use crate::common::msg_packet;
use p2p_conn::testkit::evil_peer::{play, After, Auth, Scenario};
use p2p_conn::{Config, Identity};
use p2p_conn_interop::alloc::{live_here, peak_here, reset_peak_here, Counting};
use p2p_conn_mconn::testkit::max_packet_size;
use p2p_conn_mconn::{
    ChannelDescriptor, MConnCloseReason, MConnConfig, MConnError, MConnection, Received,
    DEFAULT_MAX_PACKET_MSG_PAYLOAD_SIZE,
};

#[global_allocator]
static A: Counting = Counting;

/// The victim's one channel and its receive cap.
const CHANNEL: u8 = 0x20;
const CAP: usize = 256 * 1024;

/// Allowed growth beyond the caps: the secret connection's read buffer
/// (64 KiB) and the writer's batch (64 KiB), a packet buffer, the task and
/// the runtime's bookkeeping.
const SLACK: isize = 512 * 1024;

/// Play `plaintext` (after the honest handshake) against a victim with
/// [`CHANNEL`] capped at [`CAP`]: why it closed, and its peak memory growth
/// (this thread's) from the MConnection's start.
fn victim(plaintext: Vec<u8>) -> (MConnCloseReason, isize) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().unwrap();
    let evil = std::thread::spawn(move || {
        let (sock, _) = listener.accept().expect("accept");
        play(
            &Scenario::Authenticate(Auth::Honest, vec![After::Data(plaintext)]),
            sock,
        );
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let r = rt.block_on(async {
        let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let conn = p2p_conn::io::tokio::handshake(tcp, &Identity::generate(), &Config::default())
            .await
            .expect("handshake");
        reset_peak_here();
        let start = live_here();
        let channels = [ChannelDescriptor::new(CHANNEL).with_recv_message_capacity(CAP)];
        let (_tx, mut rx) =
            MConnection::spawn(conn, &channels, MConnConfig::default()).expect("spawn");
        let event = tokio::time::timeout(Duration::from_secs(20), rx.recv())
            .await
            .expect("no close in time")
            .expect("a close event");
        let grown = peak_here() - start;
        match event {
            Received::Closed(reason) => (reason, grown),
            other => panic!("delivered {other:?}"),
        }
    });
    // The evil peer may fail its writes once we hang up.
    let _ = evil.join();
    r
}

fn assert_bounded(grown: isize, what: &str) {
    eprintln!("{what}: peak growth {grown} bytes");
    assert!(
        grown < CAP as isize + SLACK,
        "{what}: grew {grown} bytes, cap {CAP} + slack {SLACK}"
    );
}

#[test]
fn oversized_length() {
    // A length prefix of 100 000: refused before the body is buffered.
    let mut bytes = vec![0xa0, 0x8d, 0x06];
    bytes.extend(vec![0u8; 4096]);
    let (reason, grown) = victim(bytes);
    let max = max_packet_size(DEFAULT_MAX_PACKET_MSG_PAYLOAD_SIZE);
    assert_eq!(
        reason,
        MConnCloseReason::Protocol(MConnError::PacketTooLarge { len: 100_000, max })
    );
    assert_bounded(grown, "oversized length");
}

#[test]
fn length_that_never_ends() {
    let (reason, grown) = victim(vec![0xff; 11]);
    assert_eq!(reason, MConnCloseReason::Protocol(MConnError::BadLength));
    assert_bounded(grown, "endless length prefix");
}

#[test]
fn unknown_channel() {
    for id in [0x21, 0xff, 300, -1] {
        let (reason, grown) = victim(msg_packet(id, true, b"hi".to_vec()));
        assert_eq!(
            reason,
            MConnCloseReason::Protocol(MConnError::UnknownChannel(id)),
            "channel {id}"
        );
        assert_bounded(grown, "unknown channel");
    }
}

#[test]
fn message_that_never_ends() {
    // Full pieces with eof never set, four times the cap: refused when a
    // piece would pass the cap, never having held more than the cap.
    let piece = vec![0x5a; DEFAULT_MAX_PACKET_MSG_PAYLOAD_SIZE];
    let mut bytes = Vec::new();
    while bytes.len() < 4 * CAP {
        bytes.extend(msg_packet(i32::from(CHANNEL), false, piece.clone()));
    }
    let (reason, grown) = victim(bytes);
    match reason {
        MConnCloseReason::Protocol(MConnError::RecvMessageTooLarge {
            channel: CHANNEL,
            len,
            capacity: CAP,
        }) => assert!(len > CAP && len <= CAP + piece.len(), "{len}"),
        other => panic!("{other:?}"),
    }
    assert_bounded(grown, "message that never ends");
    assert!(
        grown >= CAP as isize / 2,
        "the reassembly was not counted: {grown}"
    );
}

#[test]
fn garbage_protobuf() {
    // A 6-byte packet: field 15 with wire type 7 (no such type).
    let (reason, grown) = victim(vec![0x06, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff]);
    assert!(
        matches!(reason, MConnCloseReason::Protocol(MConnError::Malformed(_))),
        "{reason:?}"
    );
    assert_bounded(grown, "garbage protobuf");
}

#[test]
fn packet_of_no_known_kind() {
    // An empty Packet (no oneof field set).
    let (reason, _) = victim(vec![0x00]);
    assert_eq!(
        reason,
        MConnCloseReason::Protocol(MConnError::UnknownPacket)
    );
}
