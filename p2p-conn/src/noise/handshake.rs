//! The handshake, sans-IO: bytes in ([`Handshake::read`]), bytes out
//! ([`Handshake::take_output`]), snow's `HandshakeState` inside.

use rand_core::{CryptoRng, RngCore};
use zeroize::Zeroizing;

use super::crypto::Resolver;
use super::transport::{Opener, Sealer};
use super::{payload, NoiseError, MAX_HANDSHAKE_MESSAGE};
use crate::proto::aead::Backend;
use crate::{Identity, PeerId};

/// The one suite libp2p's Noise speaks.
const PATTERN: &str = "Noise_XX_25519_ChaChaPoly_SHA256";

/// Which side of the handshake we are: the dialer initiates (in
/// `noise://` privval, the signer), the listener responds (the node).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Role {
    /// Sends the first message.
    Initiator,
    /// Answers it.
    Responder,
}

/// A libp2p Noise XX handshake in progress, as a state machine over
/// bytes. Feed it what the peer sent ([`Self::read`]), send what it has
/// to send ([`Self::take_output`]), and when [`Self::is_finished`] turn
/// it into a [`Session`] ([`Self::into_session`]).
///
/// The initiator learns, and checks, the responder's identity from the
/// second message before it reveals its own in the third; the responder
/// learns the initiator's from the third.
pub struct Handshake {
    state: Box<snow::HandshakeState>,
    role: Role,
    /// Our signed payload, sent in our one message that carries it.
    payload: Vec<u8>,
    expect: Option<PeerId>,
    backend: Backend,
    /// Bytes to write.
    output: Vec<u8>,
    /// A message being received: its 2-byte length and body so far,
    /// never more than `2 + MAX_HANDSHAKE_MESSAGE` bytes.
    input: Vec<u8>,
    remote: Option<PeerId>,
    failed: bool,
}

impl std::fmt::Debug for Handshake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handshake")
            .field("role", &self.role)
            .field("finished", &self.is_finished())
            .field("remote", &self.remote)
            .finish_non_exhaustive()
    }
}

impl Handshake {
    /// Start a handshake as `role`, proving `identity`. `expect`, if
    /// given, is the only peer accepted: any other fails the handshake
    /// with [`NoiseError::UnexpectedPeer`] as soon as its payload is
    /// checked. `rng` gives this session's Noise static and ephemeral
    /// keys (fresh per session, as go-libp2p makes them).
    pub fn new(
        role: Role,
        identity: &Identity,
        expect: Option<PeerId>,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<Handshake, NoiseError> {
        Self::with_backend(role, identity, expect, rng, Backend::default())
    }

    /// [`Self::new`] with a chosen ChaCha20-Poly1305 backend.
    pub fn with_backend(
        role: Role,
        identity: &Identity,
        expect: Option<PeerId>,
        rng: &mut (impl RngCore + CryptoRng),
        backend: Backend,
    ) -> Result<Handshake, NoiseError> {
        let mut static_secret = Zeroizing::new([0u8; 32]);
        rng.fill_bytes(&mut static_secret[..]);
        let mut ephemeral = Zeroizing::new([0u8; 32]);
        rng.fill_bytes(&mut ephemeral[..]);
        let static_pub =
            x25519_dalek::PublicKey::from(&x25519_dalek::StaticSecret::from(*static_secret))
                .to_bytes();
        let params = PATTERN
            .parse()
            .map_err(|e: snow::Error| NoiseError::Protocol(e.to_string()))?;
        let builder =
            snow::Builder::with_resolver(params, Box::new(Resolver::new(backend, ephemeral)))
                .local_private_key(&static_secret[..])
                .map_err(snow_error)?;
        let state = match role {
            Role::Initiator => builder.build_initiator(),
            Role::Responder => builder.build_responder(),
        }
        .map_err(snow_error)?;
        let mut hs = Handshake {
            state: Box::new(state),
            role,
            payload: payload::encode(identity, &static_pub),
            expect,
            backend,
            output: Vec::new(),
            input: Vec::new(),
            remote: None,
            failed: false,
        };
        if role == Role::Initiator {
            hs.write(&[])?;
        }
        Ok(hs)
    }

    /// The bytes to send now (all of them; empty while waiting for the
    /// peer).
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.output)
    }

    /// True once the last message is read or written: nothing more is
    /// read. What [`Self::take_output`] holds must still be sent.
    pub fn is_finished(&self) -> bool {
        self.state.is_handshake_finished() && !self.failed
    }

    /// The peer's identity, once its payload has been checked.
    #[cfg(any(test, feature = "testkit"))]
    pub fn remote_peer(&self) -> Option<PeerId> {
        self.remote
    }

    /// Feed bytes the peer sent: returns how many were used. It never
    /// uses bytes past the handshake's last message (they are the first
    /// transport frames), so call it again with the rest while it uses
    /// some and is not finished.
    pub fn read(&mut self, mut bytes: &[u8]) -> Result<usize, NoiseError> {
        if self.failed {
            return Err(NoiseError::Poisoned);
        }
        let mut used = 0;
        while !bytes.is_empty() && !self.state.is_handshake_finished() && !self.state.is_my_turn() {
            let want = if self.input.len() < 2 {
                2 - self.input.len()
            } else {
                2 + usize::from(u16::from_be_bytes([self.input[0], self.input[1]]))
                    - self.input.len()
            };
            let n = want.min(bytes.len());
            self.input.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
            used += n;
            if self.input.len() == 2 {
                let len = usize::from(u16::from_be_bytes([self.input[0], self.input[1]]));
                if len > MAX_HANDSHAKE_MESSAGE {
                    return Err(self.fail(NoiseError::MessageTooLong {
                        len,
                        max: MAX_HANDSHAKE_MESSAGE,
                    }));
                }
            }
            let complete = self.input.len() >= 2
                && self.input.len()
                    == 2 + usize::from(u16::from_be_bytes([self.input[0], self.input[1]]));
            if complete {
                let r = self.message();
                self.input.clear();
                r.map_err(|e| self.fail(e))?;
            }
        }
        Ok(used)
    }

    /// The session keys and the peer's identity, once finished.
    pub fn into_session(mut self) -> Result<Session, NoiseError> {
        if !self.is_finished() {
            return Err(NoiseError::Protocol("the handshake is not finished".into()));
        }
        let peer = self.remote.ok_or(NoiseError::Poisoned)?;
        let (k1, k2) = self.state.dangerously_get_raw_split();
        let (k1, k2) = (Zeroizing::new(k1), Zeroizing::new(k2));
        let (send, recv) = match self.role {
            Role::Initiator => (k1, k2),
            Role::Responder => (k2, k1),
        };
        Ok(Session {
            sealer: Sealer::new(self.backend, &send),
            opener: Opener::new(self.backend, &recv),
            peer,
        })
    }

    fn fail(&mut self, e: NoiseError) -> NoiseError {
        self.failed = true;
        e
    }

    /// A whole message is in `input`: read it, check a payload, answer.
    fn message(&mut self) -> Result<(), NoiseError> {
        let body = &self.input[2..];
        let mut plain = vec![0u8; body.len()];
        let n = self
            .state
            .read_message(body, &mut plain)
            .map_err(snow_error)?;
        // Message 1 carries no identity (its payload, if any, is ignored,
        // as go-libp2p ignores it); 2 and 3 carry the sender's.
        if self.state.get_remote_static().is_some() {
            let remote_static = self.state.get_remote_static().unwrap_or_default();
            let key = payload::verify(&plain[..n], remote_static)?;
            let id = PeerId::from_public_key(&key);
            if let Some(want) = self.expect {
                if want != id {
                    return Err(NoiseError::UnexpectedPeer {
                        expected: want,
                        got: id,
                    });
                }
            }
            self.remote = Some(id);
        }
        if !self.state.is_handshake_finished() {
            let payload = std::mem::take(&mut self.payload);
            self.write(&payload)?;
        }
        Ok(())
    }

    /// Write our next message (with `payload`) into the output.
    fn write(&mut self, payload: &[u8]) -> Result<(), NoiseError> {
        let mut msg = vec![0u8; 2 + MAX_HANDSHAKE_MESSAGE];
        let n = self
            .state
            .write_message(payload, &mut msg[2..])
            .map_err(snow_error)?;
        msg[..2].copy_from_slice(&(n as u16).to_be_bytes());
        msg.truncate(2 + n);
        self.output.extend_from_slice(&msg);
        Ok(())
    }
}

fn snow_error(e: snow::Error) -> NoiseError {
    match e {
        snow::Error::Decrypt => NoiseError::Decrypt,
        snow::Error::Dh => NoiseError::LowOrderKey,
        other => NoiseError::Protocol(other.to_string()),
    }
}

/// A finished handshake: the two directions' keys and the peer's
/// identity.
#[derive(Debug)]
pub struct Session {
    sealer: Sealer,
    opener: Opener,
    peer: PeerId,
}

impl Session {
    /// The peer's libp2p identity, checked in the handshake.
    pub fn peer(&self) -> PeerId {
        self.peer
    }

    /// The sealing (our writes) and opening (the peer's) halves.
    pub fn split(self) -> (Sealer, Opener) {
        (self.sealer, self.opener)
    }
}
