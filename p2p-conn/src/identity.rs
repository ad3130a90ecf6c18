//! Node identity: the Ed25519 key pair, node IDs, and CometBFT `node_key.json`.
//!
//! * Node ID = lowercase hex of the first 20 bytes of SHA-256(Ed25519 public key).
//! * `node_key.json` = `{"priv_key":{"type":"tendermint/PrivKeyEd25519","value":B64}}`
//!   where B64 is the base64 of the 32-byte seed followed by the 32-byte public key.
//!
//! The private key is zeroized on drop (by `ed25519-dalek`). Serialised JSON
//! holds the secret; [`Identity::to_node_key_json`] returns it in a zeroizing
//! string.

#[cfg(feature = "keyfile")]
use std::path::Path;

#[cfg(feature = "keyfile")]
use base64::Engine;
use rand_core::{OsRng, RngCore};
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

/// Errors loading or parsing identities and node IDs.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IdentityError {
    /// The node key file could not be read or written.
    #[error("node key file {path}: {source}")]
    File {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The node key JSON is not a CometBFT Ed25519 node key.
    #[error("invalid node key: {0}")]
    InvalidNodeKey(String),
    /// A node ID string is not 40 hex digits.
    #[error("invalid node ID {0:?}: expected 40 hex digits")]
    InvalidNodeId(String),
}

/// A 20-byte node ID, displayed as 40 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId([u8; 20]);

impl NodeId {
    /// The ID of an Ed25519 public key.
    pub fn from_public_key(pk: &[u8; 32]) -> Self {
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
        f.write_str(&hex::encode(self.0))
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
}

impl std::fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PublicKey({})", hex::encode(self.0))
    }
}

#[cfg(feature = "keyfile")]
const KEY_TYPE: &str = "tendermint/PrivKeyEd25519";

#[cfg(feature = "keyfile")]
#[derive(serde::Serialize, serde::Deserialize)]
struct NodeKeyFile {
    priv_key: TypedValue,
}

#[cfg(feature = "keyfile")]
#[derive(serde::Serialize, serde::Deserialize)]
struct TypedValue {
    #[serde(rename = "type")]
    kind: String,
    value: String,
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
    /// A fresh random identity.
    pub fn generate() -> Self {
        let mut seed = Zeroizing::new([0u8; 32]);
        OsRng.fill_bytes(&mut seed[..]);
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

    pub(crate) fn signing_key(&self) -> &ed25519_dalek::SigningKey {
        &self.signing
    }

    #[cfg(feature = "keyfile")]
    /// Parse a CometBFT `node_key.json`. The embedded public key must match the
    /// seed.
    pub fn from_node_key_json(json: &str) -> Result<Self, IdentityError> {
        let f: NodeKeyFile =
            serde_json::from_str(json).map_err(|e| IdentityError::InvalidNodeKey(e.to_string()))?;
        if f.priv_key.kind != KEY_TYPE {
            return Err(IdentityError::InvalidNodeKey(format!(
                "key type {:?} is not supported (expected {KEY_TYPE:?})",
                f.priv_key.kind
            )));
        }
        let raw = Zeroizing::new(
            base64::engine::general_purpose::STANDARD
                .decode(f.priv_key.value.trim())
                .map_err(|e| IdentityError::InvalidNodeKey(format!("value is not base64: {e}")))?,
        );
        if raw.len() != 64 {
            return Err(IdentityError::InvalidNodeKey(format!(
                "value decodes to {} bytes, expected 64 (seed || public key)",
                raw.len()
            )));
        }
        let mut seed = Zeroizing::new([0u8; 32]);
        seed.copy_from_slice(&raw[..32]);
        let id = Identity::from_seed(&seed);
        if id.public_key().as_bytes()[..] != raw[32..] {
            return Err(IdentityError::InvalidNodeKey(
                "the public key half does not match the private seed".into(),
            ));
        }
        Ok(id)
    }

    #[cfg(feature = "keyfile")]
    /// Serialise as CometBFT `node_key.json` (contains the secret key).
    pub fn to_node_key_json(&self) -> Zeroizing<String> {
        let mut raw = Zeroizing::new([0u8; 64]);
        raw[..32].copy_from_slice(&self.signing.to_bytes());
        raw[32..].copy_from_slice(self.public_key().as_bytes());
        let f = NodeKeyFile {
            priv_key: TypedValue {
                kind: KEY_TYPE.into(),
                value: base64::engine::general_purpose::STANDARD.encode(&raw[..]),
            },
        };
        Zeroizing::new(
            serde_json::to_string(&f).unwrap_or_else(|_| unreachable!("plain struct serialises")),
        )
    }

    #[cfg(feature = "keyfile")]
    /// Load a `node_key.json` file.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, IdentityError> {
        let path = path.as_ref();
        let json = Zeroizing::new(std::fs::read_to_string(path).map_err(|source| {
            IdentityError::File {
                path: path.display().to_string(),
                source,
            }
        })?);
        Self::from_node_key_json(&json)
    }

    #[cfg(feature = "keyfile")]
    /// Write a `node_key.json` file, readable by its owner only on Unix.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<(), IdentityError> {
        let path = path.as_ref();
        let err = |source| IdentityError::File {
            path: path.display().to_string(),
            source,
        };
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let mut f = opts.open(path).map_err(err)?;
        // `mode` only applies to a new file: tighten an existing one before
        // the secret goes in.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            f.set_permissions(std::fs::Permissions::from_mode(0o600))
                .map_err(err)?;
        }
        std::io::Write::write_all(&mut f, self.to_node_key_json().as_bytes()).map_err(err)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_key_json_roundtrip_and_checks() {
        let id = Identity::generate();
        let json = id.to_node_key_json();
        let back = Identity::from_node_key_json(&json).unwrap();
        assert_eq!(back.public_key(), id.public_key());
        assert!(json.contains("tendermint/PrivKeyEd25519"));

        let other = Identity::generate();
        let mut raw = id.signing.to_bytes().to_vec();
        raw.extend_from_slice(other.public_key().as_bytes());
        let bad = format!(
            r#"{{"priv_key":{{"type":"tendermint/PrivKeyEd25519","value":"{}"}}}}"#,
            base64::engine::general_purpose::STANDARD.encode(&raw)
        );
        assert!(Identity::from_node_key_json(&bad).is_err());
        let wrong_type = json.replace("PrivKeyEd25519", "PrivKeySecp256k1");
        assert!(Identity::from_node_key_json(&wrong_type).is_err());
        assert!(Identity::from_node_key_json("{}").is_err());
    }

    #[test]
    fn node_id_parse() {
        let id = Identity::generate().node_id();
        let s = id.to_string();
        assert_eq!(s.len(), 40);
        assert_eq!(s, s.to_lowercase());
        assert_eq!(s.parse::<NodeId>().unwrap(), id);
        assert_eq!(s.to_uppercase().parse::<NodeId>().unwrap(), id);
        assert!("abc".parse::<NodeId>().is_err());
        assert!("zz".repeat(20).parse::<NodeId>().is_err());
    }
}
