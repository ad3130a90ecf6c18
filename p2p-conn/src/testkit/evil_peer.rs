//! Scripted malicious peers ("evil peers") over real loopback sockets, and
//! the harness that plays one against a victim of either adapter.
//!
//! The evil peer ([`play`]) speaks raw bytes over a std `TcpStream`, built
//! from the public sans-IO pieces (`kdf`, `auth_sig`, `Sealer`) and the test
//! hooks of [`super::internals`]: a [`Scenario`] says what it does after
//! reading the victim's ephemeral key, an [`Auth`] how it authenticates and
//! a list of [`After`] steps which frames follow. [`run`] plays a scenario
//! against a victim using one [`Adapter`] (`io::tokio::handshake` over a
//! tokio `TcpStream`, or `io::blocking::handshake_tcp` over a std one) on
//! 127.0.0.1 and reports the [`Outcome`]: the handshake's time and result,
//! and for a victim that got through, every read until the end
//! ([`Session`], whose [`Session::failure`] also checks that the reader
//! stays poisoned).
//!
//! `p2p-conn/tests/it/evil_peer.rs` runs the catalogue of `docs/security.md`
//! through it; the layers above the secret connection can script their own
//! hostile peers on the same pieces.
#![allow(missing_docs)]

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use ed25519_dalek::Signer;
use tokio::io::AsyncReadExt;

use super::internals::{seal_at, sealer_at};
use super::peer::{eph_message, PeerKeys};
use crate::io::{blocking, tokio as ptokio};
use crate::proto::aead::Cipher;
use crate::proto::handshake::EPH_MSG_LEN;
use crate::proto::wire::{LEN_PREFIX, STANDARD_FRAME_SIZE, STANDARD_SEALED_FRAME};
use crate::proto::{auth_sig, Backend, FrameSize, Sealer};
use crate::{Config, Error, Identity, NodeId};

// ---------------------------------------------------------------------------
// The evil peer
// ---------------------------------------------------------------------------

/// The evil peer's identity seed (its node ID is [`peer_node_id`]).
pub const PEER_SEED: [u8; 32] = [0x42; 32];
/// The evil peer's ephemeral X25519 secret (the victim's is random).
pub const PEER_EPH_SECRET: [u8; 32] = [0x17; 32];
/// The evil peer seals with the backend the victim does not use by default,
/// so every scenario also crosses AEAD implementations.
pub const PEER_BACKEND: Backend = Backend::RustCrypto;

/// Bound on each post-handshake read, so a bug cannot hang the suite.
pub const READ_LIMIT: Duration = Duration::from_secs(10);

pub fn peer_node_id() -> NodeId {
    Identity::from_seed(&PEER_SEED).node_id()
}

/// `0x22 0x0a 0x20 || key`: the plaintext ephemeral-key message.
pub fn eph_msg(key: &[u8; 32]) -> Vec<u8> {
    eph_message(key).to_vec()
}

/// What the evil peer does after reading the victim's ephemeral-key message.
#[derive(Clone, Debug)]
pub enum Scenario {
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
pub enum Auth {
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
pub enum After {
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
pub const DRIPPED: &[u8] = b"dripped one byte at a time";

/// The evil peer's keys, derived exactly as `proto::handshake` does.
pub struct PeerSession {
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
    pub fn new(victim_eph: &[u8; 32]) -> Self {
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

    pub fn ephemeral_message(&self) -> Vec<u8> {
        eph_msg(&self.eph_public)
    }

    pub fn sign(msg: &[u8]) -> [u8; 64] {
        ed25519_dalek::SigningKey::from_bytes(&PEER_SEED)
            .sign(msg)
            .to_bytes()
    }

    pub fn public_key() -> [u8; 32] {
        *Identity::from_seed(&PEER_SEED).public_key().as_bytes()
    }

    pub fn honest_auth(&self) -> [u8; auth_sig::AUTH_SIG_MSG_LEN] {
        auth_sig::encode(&Self::public_key(), &Self::sign(&self.challenge))
    }

    /// Exactly one sealed frame carrying `chunk` (possibly empty).
    pub fn frame(&mut self, chunk: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        self.sealer.seal_frame(chunk, &mut out).unwrap();
        self.sent += 1;
        out
    }

    /// `data` split into sealed frames as an application write would be.
    pub fn data(&mut self, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        self.sent += self.sealer.seal_append(data, &mut out).unwrap() as u64;
        out
    }

    /// A frame sealed by hand whose length field says `declared` (which the
    /// `Sealer` would refuse to produce when above the frame size).
    pub fn raw_frame(&mut self, declared: u32, body: &[u8]) -> Vec<u8> {
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

pub fn peer_sealer(key: &[u8; 32], counter: u64) -> Sealer {
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
pub fn play(scenario: &Scenario, mut sock: TcpStream) {
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
pub enum Adapter {
    Tokio,
    Blocking,
}

pub const ADAPTERS: [Adapter; 2] = [Adapter::Tokio, Adapter::Blocking];

/// What the victim saw.
pub struct Outcome {
    /// Time spent in the handshake call.
    pub elapsed: Duration,
    /// The session, or how the handshake failed.
    pub result: Result<Session, Error>,
}

/// A victim connection that completed its handshake, read until the end.
pub struct Session {
    /// The node the victim authenticated.
    pub remote: NodeId,
    /// Every non-empty read, in order (buffer of 4096 bytes).
    pub reads: Vec<Vec<u8>>,
    /// `Ok` at a clean end of stream, else the read error that ended it.
    pub end: io::Result<()>,
    /// After a read error: what one more read returned.
    pub again: Option<io::Result<usize>>,
}

impl Session {
    /// Everything read, in one buffer.
    pub fn data(&self) -> Vec<u8> {
        self.reads.concat()
    }

    /// The typed error that ended the stream, after checking that the read
    /// after it failed the same way (the reader is poisoned, not resumed).
    pub fn failure(self, what: &str) -> Error {
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
pub fn run(adapter: Adapter, scenario: &Scenario, config: &Config) -> Outcome {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let script = scenario.clone();
    let peer = std::thread::spawn(move || {
        let (sock, _) = listener.accept().unwrap();
        play(&script, sock);
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
