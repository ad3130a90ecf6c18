//! Node identity: the Ed25519 key pair, node IDs and public keys.
//!
//! * Node ID = lowercase hex of the first 20 bytes of SHA-256(Ed25519 public key).
//! * The private key is zeroized on drop (by `ed25519-dalek`).
//!
//! The sans-IO core uses this module, so it does no file I/O and no JSON:
//! CometBFT `node_key.json` files are read and written by
//! [`crate::keyfile`].

use rand_core::{CryptoRng, OsRng, RngCore};
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

/// A node ID or libp2p peer ID that could not be parsed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IdentityError {
    /// A node ID string is not 40 hex digits. Check for a truncated or
    /// mistyped ID (CometBFT prints them as 40 lowercase hex digits).
    #[error("invalid node ID {0:?}: expected 40 hex digits")]
    InvalidNodeId(String),
    /// A libp2p peer ID (`12D3KooW…`, as `cometbft show-node-id --libp2p`
    /// prints it) that could not be read: `id` is the text (or the hex of
    /// the bytes) given, `why` what is wrong with it.
    #[error("invalid libp2p peer ID {id:?}: {why}")]
    InvalidPeerId {
        /// The ID as given.
        id: String,
        /// What is wrong with it.
        why: &'static str,
    },
}

/// A 20-byte node ID, displayed as 40 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId([u8; 20]);

impl NodeId {
    /// The ID of an Ed25519 public key ([`PublicKey::node_id`]).
    pub(crate) fn from_public_key(pk: &[u8; 32]) -> Self {
        let digest = Sha256::digest(pk);
        let mut id = [0u8; 20];
        id.copy_from_slice(&digest[..20]);
        NodeId(id)
    }

    /// The raw 20 bytes.
    pub fn as_bytes(&self) -> &[u8; 20] {
        &self.0
    }
}

impl std::fmt::Display for NodeId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // On the stack: a seed writes hundreds of IDs per answer.
        let mut hex = [0u8; 40];
        hex::encode_to_slice(self.0, &mut hex).map_err(|_| std::fmt::Error)?;
        f.write_str(std::str::from_utf8(&hex).map_err(|_| std::fmt::Error)?)
    }
}

impl std::fmt::Debug for NodeId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NodeId({self})")
    }
}

impl std::str::FromStr for NodeId {
    type Err = IdentityError;
    /// Parse 40 hex digits (either case; CometBFT prints lowercase).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut id = [0u8; 20];
        if s.len() != 40 {
            return Err(IdentityError::InvalidNodeId(s.to_string()));
        }
        hex::decode_to_slice(s, &mut id)
            .map_err(|_| IdentityError::InvalidNodeId(s.to_string()))?;
        Ok(NodeId(id))
    }
}

/// An Ed25519 public key (a peer's authenticated identity).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PublicKey([u8; 32]);

impl PublicKey {
    /// Wrap raw key bytes.
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        PublicKey(bytes)
    }

    /// The raw 32 bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The node ID of this key.
    pub fn node_id(&self) -> NodeId {
        NodeId::from_public_key(&self.0)
    }

    /// The libp2p peer ID of this key (`12D3KooW…`).
    pub fn peer_id(&self) -> crate::PeerId {
        crate::PeerId::from_public_key(self)
    }
}

impl std::fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PublicKey({})", hex::encode(self.0))
    }
}

/// A node's Ed25519 identity key pair.
#[derive(Clone)]
pub struct Identity {
    signing: ed25519_dalek::SigningKey,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity")
            .field("node_id", &self.node_id())
            .finish_non_exhaustive()
    }
}

impl Identity {
    /// A fresh random identity from the operating system's generator.
    pub fn generate() -> Self {
        Identity::from_rng(&mut OsRng)
    }

    /// A fresh identity whose 32-byte seed comes from `rng` (a seeded RNG
    /// gives reproducible identities in tests and simulations).
    pub fn from_rng(rng: &mut (impl RngCore + CryptoRng)) -> Self {
        let mut seed = Zeroizing::new([0u8; 32]);
        rng.fill_bytes(&mut seed[..]);
        Identity::from_seed(&seed)
    }

    /// The identity with this 32-byte RFC 8032 seed.
    pub fn from_seed(seed: &[u8; 32]) -> Self {
        Identity {
            signing: ed25519_dalek::SigningKey::from_bytes(seed),
        }
    }

    /// The public key.
    pub fn public_key(&self) -> PublicKey {
        PublicKey(self.signing.verifying_key().to_bytes())
    }

    /// The node ID.
    pub fn node_id(&self) -> NodeId {
        self.public_key().node_id()
    }

    /// Sign `message` with this Ed25519 key: the 64-byte signature. For
    /// the layers above that sign with a node's or a validator's key (a
    /// remote signer's votes); the handshake signs its challenge itself.
    pub fn sign(&self, message: &[u8]) -> [u8; 64] {
        use ed25519_dalek::Signer as _;
        self.signing_key().sign(message).to_bytes()
    }

    pub(crate) fn signing_key(&self) -> &ed25519_dalek::SigningKey {
        &self.signing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_rng_is_deterministic_for_a_seeded_rng() {
        struct Counting(u8);
        impl RngCore for Counting {
            fn next_u32(&mut self) -> u32 {
                rand_core::impls::next_u32_via_fill(self)
            }
            fn next_u64(&mut self) -> u64 {
                rand_core::impls::next_u64_via_fill(self)
            }
            fn fill_bytes(&mut self, dest: &mut [u8]) {
                for b in dest {
                    self.0 = self.0.wrapping_add(1);
                    *b = self.0;
                }
            }
            fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
                self.fill_bytes(dest);
                Ok(())
            }
        }
        impl CryptoRng for Counting {}
        let seed: [u8; 32] = std::array::from_fn(|i| i as u8 + 1);
        let a = Identity::from_rng(&mut Counting(0));
        assert_eq!(a.public_key(), Identity::from_seed(&seed).public_key());
        assert_ne!(Identity::generate().public_key(), a.public_key());
    }

    #[test]
    fn node_id_parse() {
        let id = Identity::generate().node_id();
        let s = id.to_string();
        assert_eq!(s.len(), 40);
        assert_eq!(s, hex::encode(id.as_bytes()));
        assert_eq!(format!("{id:?}"), format!("NodeId({s})"));
        assert_eq!(s.parse::<NodeId>().unwrap(), id);
        assert_eq!(s.to_uppercase().parse::<NodeId>().unwrap(), id);
        assert!("abc".parse::<NodeId>().is_err());
        assert!("zz".repeat(20).parse::<NodeId>().is_err());
    }
}
