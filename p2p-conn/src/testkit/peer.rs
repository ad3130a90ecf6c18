//! A peer played by hand: its ephemeral key from a fixed secret and the
//! session it derives against the other side's ephemeral key, exactly as
//! `proto::handshake` does (`proto::kdf::session`), so a test can seal frames
//! the other side accepts, sign the challenge it expects, or reopen what it
//! sent.

use x25519_dalek::{PublicKey as XPublic, StaticSecret};

use crate::proto::handshake::EPH_MSG_LEN;
use crate::proto::kdf;

/// One side's ephemeral key and session keys.
#[derive(Clone)]
pub struct PeerKeys {
    /// This side's ephemeral X25519 public key.
    pub eph_public: [u8; 32],
    /// The challenge both sides sign.
    pub challenge: [u8; 32],
    /// The key this side seals with (the other side opens with it).
    pub send: [u8; 32],
    /// The key this side opens with.
    pub recv: [u8; 32],
}

impl std::fmt::Debug for PeerKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Test keys, but keys: show the public half only.
        f.debug_struct("PeerKeys")
            .field("eph_public", &hex::encode(self.eph_public))
            .finish_non_exhaustive()
    }
}

impl PeerKeys {
    /// The session of a peer whose ephemeral secret is `eph_secret`, against
    /// the other side's ephemeral public key `their_eph`.
    pub fn derive(eph_secret: [u8; 32], their_eph: &[u8; 32]) -> PeerKeys {
        let secret = StaticSecret::from(eph_secret);
        let eph_public = XPublic::from(&secret).to_bytes();
        let dh = secret.diffie_hellman(&XPublic::from(*their_eph)).to_bytes();
        let (challenge, keys) = kdf::session(&eph_public, their_eph, &dh);
        PeerKeys {
            eph_public,
            challenge,
            send: keys.send,
            recv: keys.recv,
        }
    }

    /// The ephemeral-key message this side sends first:
    /// `0x22 0x0a 0x20 || eph_public`.
    pub fn eph_message(&self) -> [u8; EPH_MSG_LEN] {
        eph_message(&self.eph_public)
    }
}

/// The ephemeral-key message for `key`: `0x22 0x0a 0x20 || key` (the
/// handshake's own encoder).
pub fn eph_message(key: &[u8; 32]) -> [u8; EPH_MSG_LEN] {
    crate::proto::handshake::eph_message(key)
}
