//! Scripted malicious peers ("evil peers") against both adapters.
//!
//! One evil peer ([`evil_peer`]) speaks raw bytes over a std `TcpStream`,
//! built from the public sans-IO pieces (`kdf`, `auth_sig`, `Cipher`,
//! `Sealer`, `testkit::internals::seal_at`). One harness ([`run`]) drives either
//! adapter (`io::tokio::handshake` over a tokio `TcpStream`,
//! `io::blocking::handshake_tcp` over a std `TcpStream`) against it on
//! 127.0.0.1, and every test runs its scenarios against both adapters.
//!
//! Each failure must surface as its typed [`Error`] within the configured
//! handshake timeout. After the handshake, a read error must come back again
//! from the next read (the reader is poisoned: [`Session::failure`]), and only
//! authenticated bytes are ever delivered. Nonce exhaustion is driven through
//! the engine's `FrameWriter`/`FrameReader` (what the adapters wrap) over a
//! loopback socket, since no adapter starts a connection near 2^64 frames.
//! The sans-IO state machine is checked directly for the exhaustive
//! low-order-point and reflection cases at the end.

mod common;

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use common::feed;
use ed25519_dalek::Signer;
use p2p_conn::io::{blocking, tokio as ptokio};
use p2p_conn::proto::aead::Cipher;
use p2p_conn::proto::handshake::{Handshake, HandshakeParams, Stage, EPH_MSG_LEN};
use p2p_conn::proto::wire::LEN_PREFIX;
use p2p_conn::proto::FrameSize;
use p2p_conn::proto::{auth_sig, Backend, Sealer, STANDARD_FRAME_SIZE, STANDARD_SEALED_FRAME};
use p2p_conn::testkit::internals::{
    handshake_with_ephemeral, opener_at, seal_at, sealer_at, FrameReader, FrameWriter, ReadCore,
    WriteCore,
};
use p2p_conn::testkit::{eph_message, PeerKeys};
use p2p_conn::{Config, Error, Identity, NodeId, ProtocolError};
use tokio::io::AsyncReadExt;
use x25519_dalek::{PublicKey as XPublic, StaticSecret};

// ---------------------------------------------------------------------------
// The evil peer
// ---------------------------------------------------------------------------

/// The evil peer's identity seed (its node ID is [`peer_node_id`]).
const PEER_SEED: [u8; 32] = [0x42; 32];
/// The evil peer's ephemeral X25519 secret (the victim's is random).
const PEER_EPH_SECRET: [u8; 32] = [0x17; 32];
/// The evil peer seals with the backend the victim does not use by default,
/// so every scenario also crosses AEAD implementations.
const PEER_BACKEND: Backend = Backend::RustCrypto;

/// Handshake timeout for scenarios that must fail on their own, quickly.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Handshake timeout for the stalling peers.
const STALL_TIMEOUT: Duration = Duration::from_millis(300);
/// Bound on each post-handshake read, so a bug cannot hang the suite.
const READ_LIMIT: Duration = Duration::from_secs(10);

fn peer_node_id() -> NodeId {
    Identity::from_seed(&PEER_SEED).node_id()
}

/// `0x22 0x0a 0x20 || key`: the plaintext ephemeral-key message.
fn eph_msg(key: &[u8; 32]) -> Vec<u8> {
    eph_message(key).to_vec()
}

/// What the evil peer does after reading the victim's ephemeral-key message.
#[derive(Clone, Debug)]
enum Scenario {
    /// The honest byte stream (ephemeral message ‖ frame #0) cut after this
    /// many bytes, then end of stream.
    CutAfter(usize),
    /// These bytes instead of the ephemeral-key message, then end of stream.
    FirstMessage(Vec<u8>),
    /// These bytes instead of the ephemeral-key message, then silence with
    /// the connection held open.
    FirstMessageThenStall(Vec<u8>),
    /// A well-formed ephemeral-key message carrying this key, then end of stream.
    EphemeralKey([u8; 32]),
    /// Echo the victim's own ephemeral key back, then end of stream.
    Reflect,
    /// Optionally send the ephemeral message, then go silent without closing.
    Stall { send_ephemeral: bool },
    /// Send the honest stream (ephemeral key, frame #0, then one data frame
    /// carrying [`DRIPPED`]) one byte per interval.
    Dribble(Duration),
    /// A valid ephemeral message, then sealed empty frames, one per interval,
    /// forever (frame #0 never carries the AuthSigMessage).
    EmptyFrames(Duration),
    /// A mirror: echo the victim's ephemeral key with bit 255 set (so it is
    /// not byte-equal to the victim's own), then echo the victim's frame #0.
    Mirror,
    /// A valid ephemeral message, then this authentication, then these
    /// frames, then end of stream.
    Authenticate(Auth, Vec<After>),
}

/// How the evil peer authenticates (frame #0 and possibly more frames).
#[derive(Clone, Debug)]
enum Auth {
    /// The honest 103-byte AuthSigMessage alone in frame #0.
    Honest,
    /// A correctly signed AuthSigMessage whose key is secp256k1 (oneof field 2).
    Secp256k1Key,
    /// An Ed25519 signature over the wrong bytes (challenge with a bit flipped).
    WrongSignature,
    /// The honest frame #0 with one ciphertext bit flipped.
    TamperedFrame0,
    /// The honest AuthSigMessage split over frames #0 and #1 (valid).
    SplitAcrossFrames,
    /// The honest AuthSigMessage followed by application data in frame #0 (valid).
    WithData(Vec<u8>),
    /// A delimited message declaring a 100000-byte body.
    OversizedLength,
    /// A length prefix that never ends (eleven 0xff bytes).
    OverflowingLength,
    /// The honest message with a non-minimal 2-byte length prefix `e6 00` (valid).
    NonMinimalLength,
    /// Frame #0 full of bytes that are no protobuf at all.
    Garbage,
    /// An AuthSigMessage with the signature but no `pub_key` field.
    MissingKey,
    /// The honest message with a 63-byte signature.
    ShortSignature,
    /// The evil peer's own public key, with a valid signature over the right
    /// challenge by another key.
    SignedByAnotherKey,
    /// The honest fields in reverse order, `sig` before `pub_key` (valid).
    ReorderedFields,
}

/// Frames the evil peer sends after authenticating.
#[derive(Clone, Debug)]
enum After {
    /// Ordinary application data.
    Data(Vec<u8>),
    /// A frame with a zero length field.
    Empty,
    /// A correctly sealed frame whose length field says this many bytes.
    DeclaredLen(u32),
    /// The first half of the sealed frame carrying this data.
    Truncated(Vec<u8>),
    /// The sealed frame carrying this data, one ciphertext bit flipped.
    Tampered(Vec<u8>),
    /// The previous frame again, byte for byte (a replay).
    Replay,
    /// A frame carrying this data sealed one counter ahead (a frame skipped).
    SkipThen(Vec<u8>),
    /// A correctly sealed, zero-padded frame carrying this data with stale
    /// non-zero bytes in its padding, as CometBFT's Go sender produces.
    StalePadding(Vec<u8>),
    /// The first half of the sealed frame carrying this data, a pause, then
    /// a TCP reset (`SO_LINGER` 0) instead of a close. Last step only.
    ResetInside(Vec<u8>),
}

/// What [`Scenario::Dribble`] delivers after the handshake.
const DRIPPED: &[u8] = b"dripped one byte at a time";

/// The evil peer's keys, derived exactly as `proto::handshake` does.
struct PeerSession {
    eph_public: [u8; 32],
    challenge: [u8; 32],
    send_key: [u8; 32],
    sealer: Sealer,
    /// Frames sealed so far (= the next frame's counter).
    sent: u64,
    /// The last sealed bytes produced (for replays).
    last: Vec<u8>,
}

impl PeerSession {
    fn new(victim_eph: &[u8; 32]) -> Self {
        let keys = PeerKeys::derive(PEER_EPH_SECRET, victim_eph);
        let send_key = keys.send;
        PeerSession {
            eph_public: keys.eph_public,
            challenge: keys.challenge,
            send_key,
            sealer: peer_sealer(&send_key, 0),
            sent: 0,
            last: Vec::new(),
        }
    }

    fn ephemeral_message(&self) -> Vec<u8> {
        eph_msg(&self.eph_public)
    }

    fn sign(msg: &[u8]) -> [u8; 64] {
        ed25519_dalek::SigningKey::from_bytes(&PEER_SEED)
            .sign(msg)
            .to_bytes()
    }

    fn public_key() -> [u8; 32] {
        *Identity::from_seed(&PEER_SEED).public_key().as_bytes()
    }

    fn honest_auth(&self) -> [u8; auth_sig::AUTH_SIG_MSG_LEN] {
        auth_sig::encode(&Self::public_key(), &Self::sign(&self.challenge))
    }

    /// Exactly one sealed frame carrying `chunk` (possibly empty).
    fn frame(&mut self, chunk: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        self.sealer.seal_frame(chunk, &mut out).unwrap();
        self.sent += 1;
        out
    }

    /// `data` split into sealed frames as an application write would be.
    fn data(&mut self, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        self.sent += self.sealer.seal_append(data, &mut out).unwrap() as u64;
        out
    }

    /// A frame sealed by hand whose length field says `declared` (which the
    /// `Sealer` would refuse to produce when above the frame size).
    fn raw_frame(&mut self, declared: u32, body: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; LEN_PREFIX + STANDARD_FRAME_SIZE];
        f[..LEN_PREFIX].copy_from_slice(&declared.to_le_bytes());
        f[LEN_PREFIX..LEN_PREFIX + body.len()].copy_from_slice(body);
        let tag = seal_at(
            &Cipher::new(PEER_BACKEND, &self.send_key),
            self.sent,
            &mut f,
        );
        f.extend_from_slice(&tag);
        self.sent += 1;
        self.sealer = peer_sealer(&self.send_key, self.sent);
        f
    }
}

fn peer_sealer(key: &[u8; 32], counter: u64) -> Sealer {
    sealer_at(Cipher::new(PEER_BACKEND, key), FrameSize::STANDARD, counter)
}

/// The frames that carry the evil peer's authentication.
fn auth_frames(s: &mut PeerSession, auth: &Auth) -> Vec<u8> {
    let honest = s.honest_auth();
    match auth {
        Auth::Honest => s.frame(&honest),
        Auth::Secp256k1Key => {
            // AuthSigMessage { pub_key: PublicKey { secp256k1: 33 bytes }, sig: 64 bytes }
            let mut body = vec![0x0a, 0x23, 0x12, 0x21];
            body.extend_from_slice(&[0x02; 33]);
            body.extend_from_slice(&[0x12, 0x40]);
            body.extend_from_slice(&PeerSession::sign(&s.challenge));
            let mut msg = vec![body.len() as u8];
            msg.extend_from_slice(&body);
            assert_eq!(msg[0], 0x67);
            s.frame(&msg)
        }
        Auth::WrongSignature => {
            let mut wrong = s.challenge;
            wrong[0] ^= 1;
            let msg = auth_sig::encode(&PeerSession::public_key(), &PeerSession::sign(&wrong));
            s.frame(&msg)
        }
        Auth::TamperedFrame0 => {
            let mut f = s.frame(&honest);
            f[200] ^= 0x04;
            f
        }
        Auth::SplitAcrossFrames => {
            let mut out = s.frame(&honest[..50]);
            out.extend(s.frame(&honest[50..]));
            out
        }
        Auth::WithData(d) => {
            let mut m = honest.to_vec();
            m.extend_from_slice(d);
            s.frame(&m)
        }
        Auth::OversizedLength => {
            // uvarint(100000) = a0 8d 06, then the honest body.
            let mut m = vec![0xa0, 0x8d, 0x06];
            m.extend_from_slice(&honest[1..]);
            s.frame(&m)
        }
        Auth::OverflowingLength => s.frame(&[0xff; 11]),
        Auth::Garbage => {
            // 0x66 claims the honest length; 0xff… is no valid field tag.
            let mut m = vec![0x66];
            m.extend_from_slice(&[0xff; 102]);
            s.frame(&m)
        }
        Auth::MissingKey => {
            // 0x42 | 12 40 <sig>
            let mut m = vec![0x42];
            m.extend_from_slice(&honest[37..]);
            s.frame(&m)
        }
        Auth::ShortSignature => {
            // 0x65 | 0a 22 0a 20 <pk> | 12 3f <63 bytes of sig>
            let mut m = vec![0x65];
            m.extend_from_slice(&honest[1..37]);
            m.extend_from_slice(&[0x12, 0x3f]);
            m.extend_from_slice(&honest[39..102]);
            s.frame(&m)
        }
        Auth::SignedByAnotherKey => {
            let other = ed25519_dalek::SigningKey::from_bytes(&[0x43; 32]);
            let sig = other.sign(&s.challenge).to_bytes();
            let msg = auth_sig::encode(&PeerSession::public_key(), &sig);
            s.frame(&msg)
        }
        Auth::NonMinimalLength => {
            let mut m = vec![0xe6, 0x00];
            m.extend_from_slice(&honest[1..]);
            s.frame(&m)
        }
        Auth::ReorderedFields => {
            // 66 | 12 40 <sig> | 0a 22 0a 20 <pk>
            let mut m = vec![0x66];
            m.extend_from_slice(&honest[37..]);
            m.extend_from_slice(&honest[1..37]);
            s.frame(&m)
        }
    }
}

/// The bytes of one post-handshake step.
fn after_frames(s: &mut PeerSession, after: &After) -> Vec<u8> {
    let out = after_frames_inner(s, after);
    s.last = out.clone();
    out
}

fn after_frames_inner(s: &mut PeerSession, after: &After) -> Vec<u8> {
    match after {
        After::Replay => s.last.clone(),
        After::SkipThen(d) => {
            s.sent += 1;
            s.sealer = peer_sealer(&s.send_key, s.sent);
            s.frame(d)
        }
        After::StalePadding(d) => {
            let mut f = vec![0xA5u8; LEN_PREFIX + STANDARD_FRAME_SIZE];
            f[..LEN_PREFIX].copy_from_slice(&(d.len() as u32).to_le_bytes());
            f[LEN_PREFIX..LEN_PREFIX + d.len()].copy_from_slice(d);
            let tag = seal_at(&Cipher::new(PEER_BACKEND, &s.send_key), s.sent, &mut f);
            f.extend_from_slice(&tag);
            s.sent += 1;
            s.sealer = peer_sealer(&s.send_key, s.sent);
            f
        }
        After::Data(d) => s.data(d),
        After::Empty => s.frame(&[]),
        After::DeclaredLen(n) => s.raw_frame(*n, b"oversized"),
        After::Truncated(d) | After::ResetInside(d) => {
            let f = s.frame(d);
            f[..f.len() / 2].to_vec()
        }
        After::Tampered(d) => {
            let mut f = s.frame(d);
            f[LEN_PREFIX + 1] ^= 0x80;
            f
        }
    }
}

/// Play `scenario` against the victim on `sock`. Written once; both adapters
/// face exactly these bytes.
fn evil_peer(scenario: &Scenario, mut sock: TcpStream) {
    sock.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    sock.set_nodelay(true).unwrap();
    let mut first = [0u8; EPH_MSG_LEN];
    if sock.read_exact(&mut first).is_err() {
        return;
    }
    assert_eq!(first[..3], [0x22, 0x0a, 0x20], "victim's first message");
    let victim_eph: [u8; 32] = first[3..].try_into().unwrap();
    let mut s = PeerSession::new(&victim_eph);
    let mut honest_stream = s.ephemeral_message();
    let (bytes, close) = match scenario {
        Scenario::CutAfter(n) => {
            let auth = s.honest_auth();
            honest_stream.extend(s.frame(&auth));
            honest_stream.truncate(*n);
            (honest_stream, true)
        }
        Scenario::FirstMessage(m) => (m.clone(), true),
        Scenario::FirstMessageThenStall(m) => (m.clone(), false),
        Scenario::EphemeralKey(k) => (eph_msg(k), true),
        Scenario::Reflect => (eph_msg(&victim_eph), true),
        Scenario::Stall { send_ephemeral } => {
            let b = if *send_ephemeral {
                honest_stream
            } else {
                Vec::new()
            };
            (b, false)
        }
        Scenario::Dribble(gap) => {
            let auth = s.honest_auth();
            honest_stream.extend(s.frame(&auth));
            honest_stream.extend(s.data(DRIPPED));
            for byte in honest_stream {
                if sock.write_all(&[byte]).is_err() {
                    return;
                }
                std::thread::sleep(*gap);
            }
            (Vec::new(), true)
        }
        Scenario::EmptyFrames(gap) => {
            if sock.write_all(&honest_stream).is_err() {
                return;
            }
            loop {
                std::thread::sleep(*gap);
                if sock.write_all(&s.frame(&[])).is_err() {
                    return;
                }
            }
        }
        Scenario::Mirror => {
            let mut mirrored = victim_eph;
            mirrored[31] |= 0x80;
            let _ = sock.write_all(&eph_msg(&mirrored));
            let mut frame0 = vec![0u8; STANDARD_SEALED_FRAME];
            if sock.read_exact(&mut frame0).is_err() {
                return;
            }
            (frame0, true)
        }
        Scenario::Authenticate(auth, after) => {
            honest_stream.extend(auth_frames(&mut s, auth));
            for a in after {
                honest_stream.extend(after_frames(&mut s, a));
            }
            if let Some(After::ResetInside(_)) = after.last() {
                let _ = sock.write_all(&honest_stream);
                // Let the victim read what came before, then reset.
                std::thread::sleep(Duration::from_millis(200));
                let sock = tokio::net::TcpSocket::from_std_stream(sock);
                // Deprecated because a non-zero linger blocks on drop; a
                // zero linger never does: it resets at once.
                #[allow(deprecated)]
                sock.set_linger(Some(Duration::ZERO)).unwrap();
                drop(sock);
                return;
            }
            (honest_stream, true)
        }
    };
    // One write: the victim must not over-read the plaintext message into
    // the encrypted frames that follow it.
    let _ = sock.write_all(&bytes);
    if close {
        let _ = sock.shutdown(Shutdown::Write);
    }
    // Read and discard until the victim hangs up, so that our close never
    // races the victim's own writes (a reset would mask the expected error).
    let mut sink = [0u8; 4096];
    while matches!(sock.read(&mut sink), Ok(n) if n > 0) {}
}

// ---------------------------------------------------------------------------
// The harness: one victim per adapter
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy)]
enum Adapter {
    Tokio,
    Blocking,
}

const ADAPTERS: [Adapter; 2] = [Adapter::Tokio, Adapter::Blocking];

/// What the victim saw.
struct Outcome {
    /// Time spent in the handshake call.
    elapsed: Duration,
    result: Result<Session, Error>,
}

/// A victim connection that completed its handshake, read until the end.
struct Session {
    remote: NodeId,
    /// Every non-empty read, in order (buffer of 4096 bytes).
    reads: Vec<Vec<u8>>,
    /// `Ok` at a clean end of stream, else the read error that ended it.
    end: io::Result<()>,
    /// After a read error: what one more read returned.
    again: Option<io::Result<usize>>,
}

impl Session {
    fn data(&self) -> Vec<u8> {
        self.reads.concat()
    }

    /// The typed error that ended the stream, after checking that the read
    /// after it failed the same way (the reader is poisoned, not resumed).
    fn failure(self, what: &str) -> Error {
        let e = match self.end {
            Err(e) => e,
            Ok(()) => panic!("{what}: the stream ended cleanly, expected an error"),
        };
        match self.again {
            Some(Err(again)) => {
                assert_eq!(again.kind(), e.kind(), "{what}: {again} after {e}");
                assert_eq!(again.to_string(), e.to_string(), "{what}: second error");
            }
            other => panic!("{what}: a read after `{e}` returned {other:?}"),
        }
        Error::from_io(e)
    }
}

/// Run `scenario` against a victim using `adapter` with `config`.
fn run(adapter: Adapter, scenario: &Scenario, config: &Config) -> Outcome {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let script = scenario.clone();
    let peer = std::thread::spawn(move || {
        let (sock, _) = listener.accept().unwrap();
        evil_peer(&script, sock);
    });
    let identity = Identity::generate();
    let outcome = match adapter {
        Adapter::Blocking => {
            let tcp = TcpStream::connect(addr).unwrap();
            let start = Instant::now();
            let r = blocking::handshake_tcp(tcp, &identity, config);
            let elapsed = start.elapsed();
            let result = r.map(|mut conn| {
                conn.get_ref().set_read_timeout(Some(READ_LIMIT)).unwrap();
                let mut reads = Vec::new();
                let end = loop {
                    let mut buf = vec![0u8; 4096];
                    match conn.read(&mut buf) {
                        Ok(0) => break Ok(()),
                        Ok(n) => reads.push(buf[..n].to_vec()),
                        Err(e) => break Err(e),
                    }
                };
                let again = end.is_err().then(|| conn.read(&mut [0u8; 64]));
                Session {
                    remote: conn.remote_node_id(),
                    reads,
                    end,
                    again,
                }
            });
            Outcome { elapsed, result }
        }
        Adapter::Tokio => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
                let start = Instant::now();
                let r = ptokio::handshake(tcp, &identity, config).await;
                let elapsed = start.elapsed();
                let result = match r {
                    Ok(mut conn) => {
                        let mut reads = Vec::new();
                        let end = loop {
                            let mut buf = vec![0u8; 4096];
                            match tokio::time::timeout(READ_LIMIT, conn.read(&mut buf)).await {
                                Err(_) => break Err(io::ErrorKind::TimedOut.into()),
                                Ok(Ok(0)) => break Ok(()),
                                Ok(Ok(n)) => reads.push(buf[..n].to_vec()),
                                Ok(Err(e)) => break Err(e),
                            }
                        };
                        let again = match end {
                            Err(_) => Some(
                                tokio::time::timeout(READ_LIMIT, conn.read(&mut [0u8; 64]))
                                    .await
                                    .unwrap_or_else(|_| Err(io::ErrorKind::TimedOut.into())),
                            ),
                            Ok(()) => None,
                        };
                        Ok(Session {
                            remote: conn.remote_node_id(),
                            reads,
                            end,
                            again,
                        })
                    }
                    Err(e) => Err(e),
                };
                Outcome { elapsed, result }
            })
        }
    };
    peer.join().expect("evil peer panicked");
    outcome
}

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
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let dialed = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (accepted, _) = listener.accept().unwrap();
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
        Cipher::new(Backend::default(), &EXHAUST_KEY),
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
        Cipher::new(PEER_BACKEND, &EXHAUST_KEY),
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
        Cipher::new(PEER_BACKEND, &EXHAUST_KEY),
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
        Cipher::new(Backend::default(), &EXHAUST_KEY),
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
