//! Scripted malicious peers ("evil peers") against both adapters.
//!
//! The evil peer and its harness are `p2p_conn::testkit::evil_peer`: a
//! scripted peer speaking raw bytes over a std `TcpStream`, and `run`, which
//! plays a scenario against a victim of either adapter on 127.0.0.1. Every
//! test here runs its scenarios against both adapters.
//!
//! Each failure must surface as its typed [`Error`] within the configured
//! handshake timeout. After the handshake, a read error must come back again
//! from the next read (the reader is poisoned: [`Session::failure`]), and only
//! authenticated bytes are ever delivered. Nonce exhaustion is driven through
//! the engine's `FrameWriter`/`FrameReader` (what the adapters wrap) over a
//! loopback socket, since no adapter starts a connection near 2^64 frames.
//! The sans-IO state machine is checked directly for the exhaustive
//! low-order-point and reflection cases at the end.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

use crate::common::feed;
use p2p_conn::proto::FrameSize;
use p2p_conn::proto::{Handshake, HandshakeParams, Stage};
use p2p_conn::testkit::evil_peer::*;
use p2p_conn::testkit::internals::wire::{EPH_MSG_LEN, STANDARD_SEALED_FRAME};
use p2p_conn::testkit::internals::{
    handshake_with_ephemeral, opener_at, sealer_at, FrameReader, FrameWriter, ReadCore, WriteCore,
};
use p2p_conn::testkit::internals::{HandshakeHooks, SealerHooks};
use p2p_conn::Backend;
use p2p_conn::{Config, Error, Identity, ProtocolError};
use x25519_dalek::{PublicKey as XPublic, StaticSecret};

/// Handshake timeout for scenarios that must fail on their own, quickly.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Handshake timeout for the stalling peers.
const STALL_TIMEOUT: Duration = Duration::from_millis(300);

fn config() -> Config {
    Config::default().handshake_timeout(HANDSHAKE_TIMEOUT)
}

/// Run `scenario` against both adapters; the handshake must fail with an
/// error matching the pattern, within the configured handshake timeout.
macro_rules! assert_handshake_fails {
    ($scenario:expr, $config:expr, $pat:pat $(if $guard:expr)?) => {{
        let scenario: Scenario = $scenario;
        let config: Config = $config;
        for adapter in ADAPTERS {
            let o = run(adapter, &scenario, &config);
            match &o.result {
                Err(e) => assert!(
                    matches!(e, $pat $(if $guard)?),
                    "{adapter:?} / {scenario:?}: expected {}, got {e:?} ({e})",
                    stringify!($pat)
                ),
                Ok(s) => panic!(
                    "{adapter:?} / {scenario:?}: handshake succeeded (peer {}), expected {}",
                    s.remote,
                    stringify!($pat)
                ),
            }
            assert!(
                o.elapsed < config.handshake_timeout,
                "{adapter:?} / {scenario:?}: took {:?}, timeout {:?}",
                o.elapsed,
                config.handshake_timeout
            );
        }
    }};
}

/// Run `scenario` against both adapters; the handshake must succeed with the
/// evil peer's identity. Returns each adapter's session.
fn sessions(scenario: Scenario) -> Vec<(Adapter, Session)> {
    ADAPTERS
        .iter()
        .map(|&adapter| {
            let o = run(adapter, &scenario, &config().expect_peer(peer_node_id()));
            match o.result {
                Ok(s) => {
                    assert_eq!(s.remote, peer_node_id(), "{adapter:?} / {scenario:?}");
                    (adapter, s)
                }
                Err(e) => panic!("{adapter:?} / {scenario:?}: handshake failed: {e:?} ({e})"),
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Adapter tests
// ---------------------------------------------------------------------------

#[test]
fn honest_peer_control() {
    let data = b"hello from an honest peer".to_vec();
    let scenario = Scenario::Authenticate(Auth::Honest, vec![After::Data(data.clone())]);
    for (adapter, s) in sessions(scenario) {
        assert_eq!(s.data(), data, "{adapter:?}");
        assert!(s.end.is_ok(), "{adapter:?}: {:?}", s.end);
    }
}

#[test]
fn eof_at_each_handshake_step() {
    let last_byte_of_frame0 = EPH_MSG_LEN + STANDARD_SEALED_FRAME - 1;
    let cases = [
        (0, Stage::EphemeralKey),                    // before any byte
        (1, Stage::EphemeralKey),                    // after the length prefix
        (20, Stage::EphemeralKey),                   // inside the key
        (EPH_MSG_LEN, Stage::AuthSignature),         // before frame #0
        (EPH_MSG_LEN + 1, Stage::AuthSignature),     // first byte of frame #0
        (EPH_MSG_LEN + 500, Stage::AuthSignature),   // middle of frame #0
        (last_byte_of_frame0, Stage::AuthSignature), // one byte short
    ];
    for (cut, stage) in cases {
        assert_handshake_fails!(
            Scenario::CutAfter(cut),
            config(),
            Error::HandshakeEof { stage: s, .. } if *s == stage
        );
    }
}

#[test]
fn malformed_first_message() {
    let key = [9u8; 32];
    let mut wrong_prefix = vec![0x21, 0x0a, 0x20];
    wrong_prefix.extend_from_slice(&key[..31]);
    let mut wrong_tag = vec![0x22, 0x12, 0x20];
    wrong_tag.extend_from_slice(&key);
    // CometBFT's evil test: a delimited BytesValue{"drop users;"}.
    let mut drop_users = vec![0x0d, 0x0a, 0x0b];
    drop_users.extend_from_slice(b"drop users;");
    // The right outer length, but a 31-byte value (Go would zero-pad it).
    let mut short_value = vec![0x22, 0x0a, 0x1f];
    short_value.extend_from_slice(&key[..31]);
    short_value.push(0);
    // The right outer length, but an over-long value length.
    let mut long_value = vec![0x22, 0x0a, 0x21];
    long_value.extend_from_slice(&key);
    // A length prefix that never ends.
    let overflow = vec![0xff; 11];
    for m in [
        wrong_prefix,
        wrong_tag,
        drop_users,
        short_value,
        long_value,
        overflow,
    ] {
        assert_handshake_fails!(
            Scenario::FirstMessage(m),
            config(),
            Error::Protocol(ProtocolError::MalformedEphemeralMessage(_))
        );
    }
}

/// A length prefix claiming gigabytes, then silence with the connection
/// open: refused at its first byte, long before the handshake timeout (no
/// wait for the body, no allocation of it).
#[test]
fn first_message_claiming_gigabytes_then_stalling() {
    // uvarint(4 GiB - 1) = ff ff ff ff 0f
    let claim = vec![0xff, 0xff, 0xff, 0xff, 0x0f];
    let config = config().handshake_timeout(Duration::from_secs(30));
    for adapter in ADAPTERS {
        let o = run(
            adapter,
            &Scenario::FirstMessageThenStall(claim.clone()),
            &config,
        );
        match &o.result {
            Err(Error::Protocol(ProtocolError::MalformedEphemeralMessage(_))) => {}
            Err(e) => panic!("{adapter:?}: expected MalformedEphemeralMessage, got {e:?}"),
            Ok(_) => panic!("{adapter:?}: handshake succeeded"),
        }
        assert!(
            o.elapsed < Duration::from_secs(2),
            "{adapter:?}: refused only after {:?}",
            o.elapsed
        );
    }
}

#[test]
fn low_order_keys_via_adapters() {
    let points = low_order_points();
    // 0, 5f9c…1157 with the high bit, p, p-1 with the high bit.
    for k in [points[0], points[3 + 7], points[5], points[4 + 7]] {
        assert_handshake_fails!(
            Scenario::EphemeralKey(k),
            config(),
            Error::Protocol(ProtocolError::LowOrderEphemeralKey)
        );
    }
}

#[test]
fn reflected_key() {
    assert_handshake_fails!(
        Scenario::Reflect,
        config(),
        Error::Protocol(ProtocolError::ReflectedEphemeralKey)
    );
}

#[test]
fn secp256k1_key_is_unsupported() {
    assert_handshake_fails!(
        Scenario::Authenticate(Auth::Secp256k1Key, vec![]),
        config(),
        Error::Protocol(ProtocolError::UnsupportedKeyType(_))
    );
}

#[test]
fn signature_over_wrong_bytes() {
    assert_handshake_fails!(
        Scenario::Authenticate(Auth::WrongSignature, vec![]),
        config(),
        Error::Protocol(ProtocolError::InvalidSignature)
    );
}

/// The rest of the AuthSigMessage catalogue: bytes that are no protobuf, no
/// key, a short signature, and a valid signature by another key than the
/// one sent.
#[test]
fn bad_auth_sig_messages() {
    assert_handshake_fails!(
        Scenario::Authenticate(Auth::Garbage, vec![]),
        config(),
        Error::Protocol(ProtocolError::MalformedAuthMessage(_))
    );
    assert_handshake_fails!(
        Scenario::Authenticate(Auth::MissingKey, vec![]),
        config(),
        Error::Protocol(ProtocolError::UnsupportedKeyType(k)) if k == "no public key"
    );
    assert_handshake_fails!(
        Scenario::Authenticate(Auth::ShortSignature, vec![]),
        config(),
        Error::Protocol(ProtocolError::MalformedAuthMessage(m)) if m.contains("63 bytes")
    );
    assert_handshake_fails!(
        Scenario::Authenticate(Auth::SignedByAnotherKey, vec![]),
        config(),
        Error::Protocol(ProtocolError::InvalidSignature)
    );
}

#[test]
fn tampered_frame0() {
    assert_handshake_fails!(
        Scenario::Authenticate(Auth::TamperedFrame0, vec![]),
        config(),
        Error::Protocol(ProtocolError::FrameAuthentication { counter: 0 })
    );
}

#[test]
fn oversized_auth_sig_length() {
    assert_handshake_fails!(
        Scenario::Authenticate(Auth::OversizedLength, vec![]),
        config(),
        Error::Protocol(ProtocolError::MalformedAuthMessage(_))
    );
}

#[test]
fn overflowing_auth_sig_length() {
    assert_handshake_fails!(
        Scenario::Authenticate(Auth::OverflowingLength, vec![]),
        config(),
        Error::Protocol(ProtocolError::MalformedAuthMessage(_))
    );
}

/// A peer echoing our own ephemeral key with bit 255 set, the one bit X25519
/// ignores, is the same point: the reflection check masks that bit and
/// refuses it before anything is signed. (Before the mask the echo got as
/// far as frame #0 and failed there, as `FrameAuthentication`.)
#[test]
fn mirrored_handshake_with_bit_255_flipped_is_a_reflection() {
    assert_handshake_fails!(
        Scenario::Mirror,
        config(),
        Error::Protocol(ProtocolError::ReflectedEphemeralKey)
    );
}

/// Encodings CometBFT's decoder accepts must be accepted too.
#[test]
fn lenient_auth_sig_encodings_are_accepted() {
    for auth in [Auth::NonMinimalLength, Auth::ReorderedFields] {
        let data = format!("after {auth:?}").into_bytes();
        let scenario = Scenario::Authenticate(auth, vec![After::Data(data.clone())]);
        for (adapter, s) in sessions(scenario) {
            assert_eq!(s.data(), data, "{adapter:?}");
            assert!(s.end.is_ok(), "{adapter:?}: {:?}", s.end);
        }
    }
}

#[test]
fn peer_id_mismatch() {
    let other = Identity::generate().node_id();
    assert_handshake_fails!(
        Scenario::Authenticate(Auth::Honest, vec![]),
        config().expect_peer(other),
        Error::PeerIdMismatch { expected, actual }
            if *expected == other && *actual == peer_node_id()
    );
}

fn assert_times_out(scenario: Scenario) {
    let config = config().handshake_timeout(STALL_TIMEOUT);
    for adapter in ADAPTERS {
        let o = run(adapter, &scenario, &config);
        match &o.result {
            Err(Error::Timeout(t)) => assert_eq!(*t, STALL_TIMEOUT),
            Err(e) => panic!("{adapter:?} / {scenario:?}: expected Timeout, got {e:?} ({e})"),
            Ok(_) => panic!("{adapter:?} / {scenario:?}: handshake succeeded"),
        }
        assert!(
            o.elapsed >= STALL_TIMEOUT / 2 && o.elapsed < STALL_TIMEOUT * 3,
            "{adapter:?} / {scenario:?}: returned after {:?} (timeout {STALL_TIMEOUT:?})",
            o.elapsed
        );
    }
}

#[test]
fn silent_peer_times_out() {
    assert_times_out(Scenario::Stall {
        send_ephemeral: false,
    });
}

#[test]
fn peer_stalling_after_ephemeral_key_times_out() {
    assert_times_out(Scenario::Stall {
        send_ephemeral: true,
    });
}

#[test]
fn dribbling_peer_times_out_as_a_whole() {
    // Each byte arrives well within the timeout; the handshake as a whole does not.
    assert_times_out(Scenario::Dribble(Duration::from_millis(40)));
}

/// One byte per millisecond is slow but steady: the handshake completes
/// within its timeout and the data after it arrives intact.
#[test]
fn slow_drip_completes() {
    for (adapter, s) in sessions(Scenario::Dribble(Duration::from_millis(1))) {
        assert_eq!(s.data(), DRIPPED, "{adapter:?}");
        assert!(s.end.is_ok(), "{adapter:?}: {:?}", s.end);
    }
}

#[test]
fn endless_empty_frames_time_out() {
    // Each frame is valid and arrives promptly; the AuthSigMessage never does.
    assert_times_out(Scenario::EmptyFrames(Duration::from_millis(10)));
}

#[test]
fn auth_sig_split_across_two_frames() {
    let data = b"after a split AuthSigMessage".to_vec();
    let scenario = Scenario::Authenticate(Auth::SplitAcrossFrames, vec![After::Data(data.clone())]);
    for (adapter, s) in sessions(scenario) {
        assert_eq!(s.data(), data, "{adapter:?}");
        assert!(s.end.is_ok(), "{adapter:?}: {:?}", s.end);
    }
}

#[test]
fn auth_sig_followed_by_data_in_frame0() {
    let early = b"early application bytes in frame #0".to_vec();
    let later = b"and a later frame".to_vec();
    let scenario = Scenario::Authenticate(
        Auth::WithData(early.clone()),
        vec![After::Data(later.clone())],
    );
    for (adapter, s) in sessions(scenario) {
        assert_eq!(s.reads.first(), Some(&early), "{adapter:?}: first read");
        assert_eq!(
            s.data(),
            [early.clone(), later.clone()].concat(),
            "{adapter:?}"
        );
        assert!(s.end.is_ok(), "{adapter:?}: {:?}", s.end);
    }
}

#[test]
fn frame_declaring_too_much_data() {
    for declared in [1025u32, u32::MAX] {
        let scenario = Scenario::Authenticate(
            Auth::Honest,
            vec![
                After::Data(b"before".to_vec()),
                After::DeclaredLen(declared),
            ],
        );
        for (adapter, s) in sessions(scenario) {
            assert_eq!(s.data(), b"before", "{adapter:?}");
            match s.failure(&format!("{adapter:?}, length {declared}")) {
                Error::Protocol(ProtocolError::FrameTooLarge { len, max }) => {
                    assert_eq!((len, max), (u64::from(declared), 1024), "{adapter:?}")
                }
                other => panic!("{adapter:?}: expected FrameTooLarge, got {other:?}"),
            }
        }
    }
}

#[test]
fn zero_length_frames_are_not_eof() {
    let data = b"data after empty frames".to_vec();
    let scenario = Scenario::Authenticate(
        Auth::Honest,
        vec![
            After::Empty,
            After::Empty,
            After::Data(data.clone()),
            After::Empty,
        ],
    );
    for (adapter, s) in sessions(scenario) {
        assert_eq!(s.reads.first(), Some(&data), "{adapter:?}: first read");
        assert_eq!(s.data(), data, "{adapter:?}");
        assert!(s.end.is_ok(), "{adapter:?}: {:?}", s.end);
    }
}

#[test]
fn eof_inside_a_frame_after_handshake() {
    let scenario = Scenario::Authenticate(
        Auth::Honest,
        vec![
            After::Data(b"whole".to_vec()),
            After::Truncated(b"partial".to_vec()),
        ],
    );
    for (adapter, s) in sessions(scenario) {
        assert_eq!(s.data(), b"whole", "{adapter:?}");
        match s.failure(&format!("{adapter:?}")) {
            Error::Io(e) => assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof, "{adapter:?}: {e}"),
            other => panic!("{adapter:?}: expected UnexpectedEof, got {other:?}"),
        }
    }
}

/// A TCP reset in the middle of a frame: the data before it arrives, then
/// the reset surfaces as `ConnectionReset` (the partial frame is never
/// shown), and the next read fails the same way rather than reading the
/// socket's end of stream as a clean close.
#[test]
fn reset_inside_a_frame_after_handshake() {
    let scenario = Scenario::Authenticate(
        Auth::Honest,
        vec![
            After::Data(b"whole".to_vec()),
            After::ResetInside(b"partial".to_vec()),
        ],
    );
    for (adapter, s) in sessions(scenario) {
        assert_eq!(s.data(), b"whole", "{adapter:?}");
        match s.failure(&format!("{adapter:?}")) {
            Error::Io(e) => {
                assert_eq!(e.kind(), io::ErrorKind::ConnectionReset, "{adapter:?}: {e}")
            }
            other => panic!("{adapter:?}: expected ConnectionReset, got {other:?}"),
        }
    }
}

/// Over every adapter and a real socket: a replayed frame and a skipped one
/// fail at that frame with the counter the reader expected; the data before
/// arrives.
#[test]
fn replayed_and_skipped_frames_after_handshake() {
    for (what, bad) in [
        ("replay", After::Replay),
        ("skip", After::SkipThen(b"after a gap".to_vec())),
    ] {
        let scenario = Scenario::Authenticate(
            Auth::Honest,
            vec![
                After::Data(b"one".to_vec()),
                bad,
                After::Data(b"never delivered".to_vec()),
            ],
        );
        assert_fails_at_frame_2(scenario, b"one", what);
    }
}

/// Every adapter delivers `before`, then fails with `FrameAuthentication`
/// at counter 2 (frame #0 is the peer's AuthSig, #1 the data before).
fn assert_fails_at_frame_2(scenario: Scenario, before: &[u8], what: &str) {
    for (adapter, s) in sessions(scenario) {
        assert_eq!(s.data(), before, "{what}, {adapter:?}");
        match s.failure(&format!("{what}, {adapter:?}")) {
            Error::Protocol(ProtocolError::FrameAuthentication { counter }) => {
                assert_eq!(counter, 2, "{what}, {adapter:?}")
            }
            other => panic!("{what}, {adapter:?}: expected FrameAuthentication, got {other:?}"),
        }
    }
}

/// Over every adapter: short frames whose padding holds stale bytes deliver
/// exactly their data.
#[test]
fn stale_padding_after_handshake() {
    let scenario = Scenario::Authenticate(
        Auth::Honest,
        vec![
            After::StalePadding(b"abc".to_vec()),
            After::StalePadding(b"defg".to_vec()),
        ],
    );
    for (adapter, s) in sessions(scenario) {
        assert_eq!(s.data(), b"abcdefg", "{adapter:?}");
        assert!(s.end.is_ok(), "{adapter:?}: {:?}", s.end);
    }
}

#[test]
fn tampered_frame_after_handshake() {
    let scenario = Scenario::Authenticate(
        Auth::Honest,
        vec![
            After::Data(b"good".to_vec()),
            After::Tampered(b"bad".to_vec()),
            After::Data(b"never delivered".to_vec()),
        ],
    );
    assert_fails_at_frame_2(scenario, b"good", "tampered");
}

// ---------------------------------------------------------------------------
// Nonce exhaustion, over a real socket
// ---------------------------------------------------------------------------
//
// A connection's counters start at 0 in every adapter, so no peer can drive
// one to 2^64 frames in a test. The adapters are thin layers over the
// engine's `FrameWriter` and `FrameReader`; these tests start those at the
// end of the counter space over a loopback TCP socket.

const EXHAUST_KEY: [u8; 32] = [0x55; 32];

fn tcp_pair() -> (TcpStream, TcpStream) {
    let (dialed, accepted) = p2p_conn::testkit::std_tcp_pair();
    for s in [&dialed, &accepted] {
        s.set_read_timeout(Some(READ_LIMIT)).unwrap();
    }
    (dialed, accepted)
}

/// Drive a blocking socket through a `poll_*_with` closure.
fn write_fn(sock: &mut TcpStream) -> impl FnMut(&[u8]) -> std::task::Poll<io::Result<usize>> + '_ {
    move |buf| std::task::Poll::Ready(sock.write(buf))
}

/// The sender uses counters u64::MAX - 1 and u64::MAX, then every write
/// fails with `NonceExhausted` before sealing: nothing reaches the wire, no
/// counter wraps to 0, and the receiver opens exactly the two frames.
#[test]
fn nonce_exhaustion_on_send() {
    use std::task::Poll;
    let (mut a, mut b) = tcp_pair();
    let sealer = sealer_at(
        p2p_conn::testkit::internals::cipher(Backend::default(), &EXHAUST_KEY),
        FrameSize::STANDARD,
        u64::MAX - 1,
    );
    let mut w = FrameWriter::new(WriteCore::new(sealer, 64 * 1024));
    let data: Vec<u8> = (0..2048).map(|i| i as u8).collect();
    match w.poll_write_with(&data, write_fn(&mut a)) {
        Poll::Ready(Ok(n)) => assert_eq!(n, 2048),
        other => panic!("the last two frames: {other:?}"),
    }
    for call in 0..3 {
        match w.poll_write_with(b"one more", write_fn(&mut a)) {
            Poll::Ready(Err(e)) => match Error::from_io(e) {
                Error::Protocol(ProtocolError::NonceExhausted) => {}
                other => panic!("call {call}: expected NonceExhausted, got {other:?}"),
            },
            other => panic!("call {call}: {other:?}"),
        }
    }
    assert!(matches!(
        w.poll_flush_with(write_fn(&mut a)),
        Poll::Ready(Ok(()))
    ));
    a.shutdown(Shutdown::Write).unwrap();
    let mut wire = Vec::new();
    b.read_to_end(&mut wire).unwrap();
    assert_eq!(wire.len(), 2 * STANDARD_SEALED_FRAME, "frames on the wire");
    let mut o = opener_at(
        p2p_conn::testkit::internals::cipher(PEER_BACKEND, &EXHAUST_KEY),
        FrameSize::STANDARD,
        u64::MAX - 1,
    );
    let mut got = Vec::new();
    for f in wire.chunks_mut(STANDARD_SEALED_FRAME) {
        let r = o
            .open_in_place(f)
            .expect("frame sealed at the end of the counter space");
        got.extend_from_slice(&f[r]);
    }
    assert_eq!(got, data);
}

/// The receiver's last counter is u64::MAX: it delivers that frame, then
/// fails the next one with `NonceExhausted` (never opening it with a
/// wrapped counter), and keeps failing.
#[test]
fn nonce_exhaustion_on_receive() {
    use std::task::Poll;
    let (mut a, mut b) = tcp_pair();
    let mut wire = Vec::new();
    sealer_at(
        p2p_conn::testkit::internals::cipher(PEER_BACKEND, &EXHAUST_KEY),
        FrameSize::STANDARD,
        u64::MAX,
    )
    .seal_frame(b"the very last frame", &mut wire)
    .unwrap();
    // What a wrapped counter would accept: a frame sealed at 0.
    peer_sealer(&EXHAUST_KEY, 0)
        .seal_frame(b"wrapped", &mut wire)
        .unwrap();
    a.write_all(&wire).unwrap();
    a.shutdown(Shutdown::Write).unwrap();
    let opener = opener_at(
        p2p_conn::testkit::internals::cipher(Backend::default(), &EXHAUST_KEY),
        FrameSize::STANDARD,
        u64::MAX,
    );
    let mut r = FrameReader::new(ReadCore::new(opener, Vec::new(), 64 * 1024));
    let mut read = |buf: &mut [u8]| Poll::Ready(b.read(buf));
    let mut out = [0u8; 64];
    match r.poll_read_with(&mut out, &mut read) {
        Poll::Ready(Ok(n)) => assert_eq!(&out[..n], b"the very last frame"),
        other => panic!("{other:?}"),
    }
    for call in 0..3 {
        match r.poll_read_with(&mut out, &mut read) {
            Poll::Ready(Err(e)) => match Error::from_io(e) {
                Error::Protocol(ProtocolError::NonceExhausted) => {}
                other => panic!("call {call}: expected NonceExhausted, got {other:?}"),
            },
            other => panic!("call {call}: {other:?}"),
        }
    }
}

// ---------------------------------------------------------------------------
// Sans-IO: the state machine directly
// ---------------------------------------------------------------------------

/// The 7 blacklisted points of protocol.md §1.3, then their high-bit variants.
fn low_order_points() -> Vec<[u8; 32]> {
    let hex32 = |s: &str| -> [u8; 32] { hex::decode(s).unwrap().try_into().unwrap() };
    let mut p_minus_1 = [0xff; 32];
    p_minus_1[0] = 0xec;
    p_minus_1[31] = 0x7f;
    let mut p = p_minus_1;
    p[0] = 0xed;
    let mut p_plus_1 = p_minus_1;
    p_plus_1[0] = 0xee;
    let mut one = [0u8; 32];
    one[0] = 1;
    let base = [
        [0u8; 32],
        one,
        hex32("e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800"),
        hex32("5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157"),
        p_minus_1,
        p,
        p_plus_1,
    ];
    let mut all = base.to_vec();
    for mut k in base {
        k[31] |= 0x80;
        all.push(k);
    }
    all
}

#[test]
fn all_14_low_order_keys_rejected_by_state_machine() {
    let points = low_order_points();
    assert_eq!(points.len(), 14);
    for (i, a) in points.iter().enumerate() {
        for b in &points[i + 1..] {
            assert_ne!(a, b);
        }
    }
    let id = Identity::generate();
    for &backend in Backend::ALL {
        let params = HandshakeParams {
            backend,
            ..HandshakeParams::default()
        };
        for k in &points {
            let mut hs = Handshake::new(&id, params);
            let first = hs.outgoing().to_vec();
            assert_eq!(
                feed(&mut hs, &eph_msg(k)),
                Err(ProtocolError::LowOrderEphemeralKey),
                "key {}",
                hex::encode(k)
            );
            // Nothing was signed or sealed for a low-order peer, and the
            // failure is sticky.
            assert_eq!(hs.outgoing(), &first[..], "key {}", hex::encode(k));
            assert_eq!(hs.advance_read(0), Err(ProtocolError::LowOrderEphemeralKey));
            assert!(hs.read_buffer().is_empty());
            assert!(!hs.is_finished());
        }
    }
    // Control: an honest key is accepted and frame #0 is queued.
    let mut hs = Handshake::new(&id, HandshakeParams::default());
    let honest = XPublic::from(&StaticSecret::from([5u8; 32])).to_bytes();
    feed(&mut hs, &eph_msg(&honest)).unwrap();
    assert_eq!(hs.outgoing().len(), EPH_MSG_LEN + STANDARD_SEALED_FRAME);
    assert_eq!(hs.stage(), Stage::AuthSignature);
}

#[test]
fn reflected_key_rejected_by_state_machine() {
    let id = Identity::generate();
    let mut hs = Handshake::new(&id, HandshakeParams::default());
    let own = hs.local_ephemeral_key();
    let first = hs.outgoing().to_vec();
    assert_eq!(
        feed(&mut hs, &eph_msg(&own)),
        Err(ProtocolError::ReflectedEphemeralKey)
    );
    assert_eq!(hs.outgoing(), &first[..]);
}

/// The honest sans-IO machine can play the peer too: complete a handshake
/// with `testkit::internals::handshake_with_ephemeral`, then seal a frame with its sealer.
#[test]
fn state_machine_as_peer_matches_hand_derived_keys() {
    let victim_id = Identity::generate();
    let mut victim = Handshake::new(&victim_id, HandshakeParams::default());
    let victim_eph = victim.local_ephemeral_key();
    let mut peer = handshake_with_ephemeral(
        &Identity::from_seed(&PEER_SEED),
        HandshakeParams {
            backend: PEER_BACKEND,
            ..HandshakeParams::default()
        },
        PEER_EPH_SECRET,
    );
    // Exchange everything.
    let v_out = victim.outgoing().to_vec();
    feed(&mut peer, &v_out).unwrap();
    victim.advance_outgoing(v_out.len());
    let p_out = peer.outgoing().to_vec();
    // The hand-built evil peer produces byte-identical output.
    let mut s = PeerSession::new(&victim_eph);
    let mut expected = s.ephemeral_message();
    let auth = s.honest_auth();
    expected.extend(s.frame(&auth));
    assert_eq!(p_out, expected);
    feed(&mut victim, &p_out).unwrap();
    peer.advance_outgoing(p_out.len());
    let v_out = victim.outgoing().to_vec();
    feed(&mut peer, &v_out).unwrap();
    victim.advance_outgoing(v_out.len());
    let mut victim = victim.into_established().unwrap();
    let mut peer = peer.into_established().unwrap();
    assert_eq!(victim.remote_public_key.node_id(), peer_node_id());
    assert_eq!(peer.remote_public_key, victim_id.public_key());
    let mut f1 = Vec::new();
    peer.sealer.seal_append(b"frame one", &mut f1).unwrap();
    assert_eq!(f1, s.data(b"frame one"));
    let r = victim.opener.open_in_place(&mut f1).unwrap();
    assert_eq!(&f1[r], b"frame one");
}
