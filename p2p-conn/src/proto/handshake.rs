//! The handshake state machine: bytes in, bytes out, keys and the peer's
//! identity at the end. No sockets, no clocks, no async.
//!
//! Both sides run the same machine (there are no roles):
//!
//! 1. send `0x22 0x0a 0x20 || ephemeral X25519 public key` (35 bytes, plaintext);
//! 2. read the peer's 35-byte message: 1 byte, then 34 bytes, each read exactly,
//!    so nothing after the message is consumed; strict parse;
//! 3. X25519 (RFC 7748 clamping); refuse the all-zero output (low-order peer
//!    point) and a peer key equal to ours (reflection);
//! 4. HKDF-SHA256 → the two frame keys; Merlin → the 32-byte challenge;
//! 5. send frame #0 carrying only the 103-byte delimited AuthSigMessage
//!    (Ed25519 signature of the challenge);
//! 6. read whole sealed frames until the delimited AuthSigMessage is complete
//!    (it may span frames, as CometBFT's stream reader allows); plaintext after
//!    it in the same frame is kept as the first application bytes;
//! 7. verify the peer's signature with ZIP-215 rules (`ed25519-consensus`), as
//!    CometBFT does.
//!
//! # Driving it
//! Write [`Handshake::outgoing`] and report progress with
//! [`Handshake::advance_outgoing`]; read into [`Handshake::read_buffer`] and
//! report with [`Handshake::advance_read`]. The two directions are independent
//! and may be driven concurrently. [`Handshake::read_buffer`] is always exactly
//! the bytes still missing from the current message, so a caller that fills it
//! never reads past the handshake.
//!
//! # Bounds before authentication
//! The machine holds at most one sealed frame of input (1044 bytes by default)
//! plus the plaintext of the authentication frames: the AuthSigMessage (body
//! at most 1024 bytes, prefix at most 10) and the rest of its last frame, so at
//! most 1034 + `frame_size` bytes (about 2 KiB by default). It never allocates
//! a size the peer declares.
//!
//! # Not provided
//! Timeouts (the adapters own the clock) and the peer-ID policy (the adapters
//! compare against [`crate::Config::expected_peer_id`]).

use ed25519_dalek::Signer;
use rand_core::{CryptoRng, OsRng, RngCore};
use x25519_dalek::{PublicKey as XPublic, StaticSecret};
use zeroize::Zeroizing;

use super::aead::{Backend, Cipher};
use super::auth_sig::{self, MAX_AUTH_SIG_BODY};
use super::error::ProtocolError;
use super::frame::{FrameSize, Opener, Sealer};
use super::kdf;
use super::varint::{read_uvarint, Varint};
use crate::identity::{Identity, PublicKey};

pub(crate) use super::wire::EPH_MSG_LEN;

/// The plaintext ephemeral-key message: a protobuf `BytesValue` holding
/// `key`, length-prefixed (`0x22 0x0a 0x20 || key`).
pub(crate) fn eph_message(key: &[u8; 32]) -> [u8; EPH_MSG_LEN] {
    let mut m = [0u8; EPH_MSG_LEN];
    m[..3].copy_from_slice(&[0x22, 0x0a, 0x20]);
    m[3..].copy_from_slice(key);
    m
}

/// Parameters of the handshake that both peers must agree on (frame size) or
/// that are local choices (AEAD backend).
#[derive(Debug, Clone, Copy)]
pub struct HandshakeParams {
    /// Frame data size; [`FrameSize::STANDARD`] (1024) is the CometBFT wire.
    pub frame_size: FrameSize,
    /// AEAD backend for this connection's frames.
    pub backend: Backend,
}

impl Default for HandshakeParams {
    fn default() -> Self {
        HandshakeParams {
            frame_size: FrameSize::STANDARD,
            backend: Backend::default(),
        }
    }
}

/// Which message the handshake is waiting for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stage {
    /// The peer's plaintext ephemeral key.
    EphemeralKey,
    /// The peer's encrypted authentication message.
    AuthSignature,
    /// Nothing more to read.
    Done,
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Stage::EphemeralKey => "ephemeral key",
            Stage::AuthSignature => "authentication signature",
            Stage::Done => "nothing (handshake complete)",
        })
    }
}

enum State {
    EphLen,
    EphBody,
    Auth {
        challenge: [u8; 32],
        plain: Vec<u8>,
    },
    Done {
        remote: PublicKey,
        leftover: Vec<u8>,
    },
    Failed(ProtocolError),
}

/// The result of a completed handshake: the keyed frame sealer and opener, the
/// authenticated peer, and any application bytes that arrived with frame #0.
///
/// `Debug` shows the length of [`Established::initial_plaintext`], never its
/// bytes (they are decrypted application data).
pub struct Established {
    /// Seals our frames (its counter continues after frame #0).
    pub sealer: Sealer,
    /// Opens the peer's frames (counter continues after the auth frames).
    pub opener: Opener,
    /// The peer's authenticated Ed25519 identity key.
    pub remote_public_key: PublicKey,
    /// Application plaintext that followed the AuthSigMessage in its last frame.
    pub initial_plaintext: Vec<u8>,
}

impl std::fmt::Debug for Established {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Established")
            .field("sealer", &self.sealer)
            .field("opener", &self.opener)
            .field("remote_public_key", &self.remote_public_key)
            .field("initial_plaintext_len", &self.initial_plaintext.len())
            .finish()
    }
}

/// The handshake state machine. See the module docs.
pub struct Handshake {
    state: State,
    signing: ed25519_dalek::SigningKey,
    eph_secret: Option<StaticSecret>,
    local_eph: [u8; 32],
    params: HandshakeParams,
    out: Vec<u8>,
    out_pos: usize,
    input: Zeroizing<Vec<u8>>,
    filled: usize,
    sealer: Option<Sealer>,
    opener: Option<Opener>,
}

impl std::fmt::Debug for Handshake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handshake")
            .field("stage", &self.stage())
            .field("outgoing", &self.outgoing().len())
            .finish_non_exhaustive()
    }
}

impl Handshake {
    /// Start a handshake with a fresh ephemeral key from the operating
    /// system's RNG ([`OsRng`]).
    pub fn new(identity: &Identity, params: HandshakeParams) -> Self {
        Self::new_with_rng(identity, params, &mut OsRng)
    }

    /// Start a handshake whose ephemeral key comes from `rng`. Fuzzers and
    /// tests pass a seeded RNG to make the whole handshake deterministic; a
    /// node uses [`Handshake::new`]. `rng` must be a cryptographically secure
    /// generator in production: the ephemeral key is what makes each
    /// session's keys fresh.
    pub fn new_with_rng<R: RngCore + CryptoRng>(
        identity: &Identity,
        params: HandshakeParams,
        rng: &mut R,
    ) -> Self {
        let mut secret = Zeroizing::new([0u8; 32]);
        rng.fill_bytes(&mut secret[..]);
        Self::with_ephemeral_secret(identity, params, *secret)
    }

    /// Start a handshake with a given ephemeral secret (raw bytes, clamped per
    /// RFC 7748 when used). For known-answer tests
    /// (`testkit::handshake_with_ephemeral`); production code uses
    /// [`Handshake::new`].
    pub(crate) fn with_ephemeral_secret(
        identity: &Identity,
        params: HandshakeParams,
        secret: [u8; 32],
    ) -> Self {
        let secret = StaticSecret::from(secret);
        let local_eph = XPublic::from(&secret).to_bytes();
        let out = eph_message(&local_eph).to_vec();
        Handshake {
            state: State::EphLen,
            signing: identity.signing_key().clone(),
            eph_secret: Some(secret),
            local_eph,
            params,
            out,
            out_pos: 0,
            input: Zeroizing::new(vec![0u8; 1]),
            filled: 0,
            sealer: None,
            opener: None,
        }
    }

    /// Our ephemeral X25519 public key (tests: `testkit::internals`'s
    /// `HandshakeHooks`).
    #[cfg(any(test, feature = "testkit"))]
    pub(crate) fn local_ephemeral_key(&self) -> [u8; 32] {
        self.local_eph
    }

    /// What the handshake is waiting to read.
    pub fn stage(&self) -> Stage {
        match self.state {
            State::EphLen | State::EphBody => Stage::EphemeralKey,
            State::Auth { .. } => Stage::AuthSignature,
            State::Done { .. } | State::Failed(_) => Stage::Done,
        }
    }

    /// Bytes that must be written to the peer next (possibly empty).
    pub fn outgoing(&self) -> &[u8] {
        &self.out[self.out_pos..]
    }

    /// Record that `n` bytes of [`Self::outgoing`] were written. Once all
    /// are, the buffer is freed: a handshake waiting on a slow or stalled
    /// peer holds only what it must still read.
    pub fn advance_outgoing(&mut self, n: usize) {
        self.out_pos = (self.out_pos + n).min(self.out.len());
        if self.out_pos == self.out.len() {
            self.out = Vec::new();
            self.out_pos = 0;
        }
    }

    /// The buffer to read into: exactly the bytes still missing from the message
    /// being received. Empty when nothing more is to be read.
    pub fn read_buffer(&mut self) -> &mut [u8] {
        match self.state {
            State::Done { .. } | State::Failed(_) => &mut [],
            _ => &mut self.input[self.filled..],
        }
    }

    /// Bytes received so far of the message being read, and that message's
    /// length (one sealed frame while awaiting the authentication message).
    pub fn read_progress(&self) -> (usize, usize) {
        match self.state {
            State::Done { .. } | State::Failed(_) => (0, 0),
            State::EphBody => (self.filled + 1, EPH_MSG_LEN),
            State::EphLen => (self.filled, EPH_MSG_LEN),
            State::Auth { .. } => (self.filled, self.input.len()),
        }
    }

    /// Record that `n` bytes were read into [`Self::read_buffer`], and process
    /// the message once it is complete.
    pub fn advance_read(&mut self, n: usize) -> Result<(), ProtocolError> {
        if let State::Failed(e) = &self.state {
            return Err(e.clone());
        }
        if n > self.input.len() - self.filled {
            return Err(ProtocolError::Misuse("advance_read past the read buffer"));
        }
        self.filled += n;
        if self.filled < self.input.len() {
            return Ok(());
        }
        let r = self.on_message();
        if let Err(e) = &r {
            self.state = State::Failed(e.clone());
        }
        r
    }

    /// True once all our bytes are written and the peer is authenticated.
    pub fn is_finished(&self) -> bool {
        matches!(self.state, State::Done { .. }) && self.outgoing().is_empty()
    }

    /// Take the keys and peer identity of a finished handshake.
    pub fn into_established(self) -> Result<Established, ProtocolError> {
        if !self.is_finished() {
            return Err(ProtocolError::Misuse("handshake not finished"));
        }
        match self.state {
            State::Done { remote, leftover } => Ok(Established {
                sealer: self.sealer.ok_or(ProtocolError::Misuse("no sealer"))?,
                opener: self.opener.ok_or(ProtocolError::Misuse("no opener"))?,
                remote_public_key: remote,
                initial_plaintext: leftover,
            }),
            _ => Err(ProtocolError::Misuse("handshake not finished")),
        }
    }

    fn expect_input(&mut self, len: usize) {
        self.input.clear();
        self.input.resize(len, 0);
        self.filled = 0;
    }

    fn on_message(&mut self) -> Result<(), ProtocolError> {
        match &mut self.state {
            State::EphLen => {
                let b = self.input[0];
                if b != 0x22 {
                    // An HTTP server (a node's RPC port) answers our key's
                    // bytes, whose third byte (0x0a) ends a request line,
                    // with `HTTP/1.1 400 …` or, without a status line, an
                    // error page (`<`): say so, for whoever reads the error.
                    let http = if matches!(b, b'H' | b'<') {
                        format!(
                            "; the peer answered in HTTP ('{}'): an HTTP port, such as a node's RPC",
                            char::from(b)
                        )
                    } else {
                        String::new()
                    };
                    return Err(ProtocolError::MalformedEphemeralMessage(format!(
                        "length prefix {b:#04x}, expected 0x22 (34-byte BytesValue){http}"
                    )));
                }
                self.state = State::EphBody;
                self.expect_input(EPH_MSG_LEN - 1);
                Ok(())
            }
            State::EphBody => {
                if self.input[..2] != [0x0a, 0x20] {
                    return Err(ProtocolError::MalformedEphemeralMessage(format!(
                        "body starts {:02x} {:02x}, expected 0a 20 (field 1, 32 bytes)",
                        self.input[0], self.input[1]
                    )));
                }
                let mut remote = [0u8; 32];
                remote.copy_from_slice(&self.input[2..34]);
                self.on_remote_ephemeral(remote)
            }
            State::Auth { challenge, plain } => {
                let opener = self
                    .opener
                    .as_mut()
                    .ok_or(ProtocolError::Misuse("no opener"))?;
                let range = opener.open_in_place(&mut self.input[..])?;
                plain.extend_from_slice(&self.input[range]);
                let (len, used) = match read_uvarint(plain) {
                    Varint::Incomplete => {
                        self.filled = 0;
                        return Ok(());
                    }
                    Varint::Overflow => {
                        return Err(ProtocolError::MalformedAuthMessage(
                            "length prefix overflows".into(),
                        ))
                    }
                    Varint::Value(len, used) => (len, used),
                };
                if len > MAX_AUTH_SIG_BODY as u64 {
                    return Err(ProtocolError::MalformedAuthMessage(format!(
                        "declared length {len} exceeds {MAX_AUTH_SIG_BODY}"
                    )));
                }
                let end = used + len as usize;
                if plain.len() < end {
                    self.filled = 0;
                    return Ok(());
                }
                let (key, sig) = auth_sig::decode(&plain[used..end])?;
                let vk = ed25519_consensus::VerificationKey::try_from(key)
                    .map_err(|_| ProtocolError::InvalidSignature)?;
                vk.verify(&ed25519_consensus::Signature::from(sig), &challenge[..])
                    .map_err(|_| ProtocolError::InvalidSignature)?;
                let leftover = plain[end..].to_vec();
                self.state = State::Done {
                    remote: PublicKey::from_bytes(key),
                    leftover,
                };
                self.input = Zeroizing::new(Vec::new());
                self.filled = 0;
                Ok(())
            }
            State::Done { .. } | State::Failed(_) => Err(ProtocolError::Misuse("no read expected")),
        }
    }

    fn on_remote_ephemeral(&mut self, remote: [u8; 32]) -> Result<(), ProtocolError> {
        if is_reflection(&remote, &self.local_eph) {
            return Err(ProtocolError::ReflectedEphemeralKey);
        }
        let secret = self
            .eph_secret
            .take()
            .ok_or(ProtocolError::Misuse("ephemeral secret already used"))?;
        let shared = secret.diffie_hellman(&XPublic::from(remote));
        drop(secret);
        if !shared.was_contributory() {
            return Err(ProtocolError::LowOrderEphemeralKey);
        }
        let dh = Zeroizing::new(shared.to_bytes());
        let (challenge, keys) = kdf::session(&self.local_eph, &remote, &dh);
        let mut sealer = Sealer::new(
            Cipher::new(self.params.backend, &keys.send),
            self.params.frame_size,
        );
        let opener = Opener::new(
            Cipher::new(self.params.backend, &keys.recv),
            self.params.frame_size,
        );
        let signature = self.signing.sign(&challenge).to_bytes();
        let public = self.signing.verifying_key().to_bytes();
        let msg = auth_sig::encode(&public, &signature);
        // Frame #0 carries the AuthSigMessage alone (tendermint-p2p requires
        // it). A non-standard frame size below 103 bytes spreads it over the
        // first frames, which the reading side accepts.
        self.out.drain(..self.out_pos);
        self.out_pos = 0;
        sealer.seal_append(&msg, &mut self.out)?;
        self.expect_input(opener.sealed_frame_len());
        self.sealer = Some(sealer);
        self.opener = Some(opener);
        self.state = State::Auth {
            challenge,
            plain: Vec::with_capacity(auth_sig::AUTH_SIG_MSG_LEN),
        };
        Ok(())
    }
}

/// True when `remote` is our own ephemeral key sent back to us. X25519 ignores
/// bit 255 of a public key (RFC 7748 §5), so two encodings that differ only
/// there are the same point: compare with that bit masked, or a reflected key
/// with the top bit flipped would pass the check.
fn is_reflection(remote: &[u8; 32], local: &[u8; 32]) -> bool {
    let mut r = *remote;
    let mut l = *local;
    r[31] &= 0x7f;
    l[31] &= 0x7f;
    r == l
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reflection_check_ignores_bit_255() {
        let local = [0x42u8; 32];
        let mut flipped = local;
        flipped[31] ^= 0x80;
        assert!(is_reflection(&local, &local));
        assert!(is_reflection(&flipped, &local));
        let mut other = local;
        other[0] ^= 1;
        assert!(!is_reflection(&other, &local));
    }

    #[test]
    fn a_reflected_key_with_bit_255_flipped_is_refused() {
        let id = Identity::from_seed(&[1; 32]);
        let mut hs = Handshake::with_ephemeral_secret(&id, HandshakeParams::default(), [9; 32]);
        let mut eph = hs.local_ephemeral_key();
        eph[31] ^= 0x80;
        let msg = eph_message(&eph);
        hs.read_buffer().copy_from_slice(&msg[..1]);
        hs.advance_read(1).unwrap();
        hs.read_buffer().copy_from_slice(&msg[1..]);
        assert_eq!(
            hs.advance_read(34),
            Err(ProtocolError::ReflectedEphemeralKey)
        );
    }

    #[test]
    fn seeded_rng_makes_the_handshake_deterministic() {
        use rand_core::SeedableRng;
        let id = Identity::from_seed(&[1; 32]);
        let a = Handshake::new_with_rng(
            &id,
            HandshakeParams::default(),
            &mut rand_chacha::ChaCha20Rng::seed_from_u64(7),
        );
        let b = Handshake::new_with_rng(
            &id,
            HandshakeParams::default(),
            &mut rand_chacha::ChaCha20Rng::seed_from_u64(7),
        );
        let c = Handshake::new_with_rng(
            &id,
            HandshakeParams::default(),
            &mut rand_chacha::ChaCha20Rng::seed_from_u64(8),
        );
        assert_eq!(a.outgoing(), b.outgoing());
        assert_ne!(a.outgoing(), c.outgoing());
    }

    /// An HTTP server's answer is named as one in the error (a node's RPC
    /// port given for its p2p or privval port); any other first byte is
    /// only the byte.
    #[test]
    fn an_http_answer_is_named_in_the_error() {
        let id = Identity::from_seed(&[1; 32]);
        let first = |b: u8| {
            let mut hs = Handshake::with_ephemeral_secret(&id, HandshakeParams::default(), [9; 32]);
            hs.read_buffer()[0] = b;
            match hs.advance_read(1) {
                Err(ProtocolError::MalformedEphemeralMessage(m)) => m,
                other => panic!("{other:?}"),
            }
        };
        for b in [b'H', b'<'] {
            let m = first(b);
            assert!(
                m.starts_with(&format!("length prefix {b:#04x}, expected 0x22")),
                "{m}"
            );
            assert!(m.contains("the peer answered in HTTP"), "{m}");
        }
        let m = first(0x16);
        assert!(!m.contains("HTTP"), "{m}");
    }
}
