//! The validator's signing key: [`ValidatorKey`], the one interface the
//! [`GuardedSigner`](crate::GuardedSigner) signs through, and the soft key
//! ([`Identity`], loaded from a `priv_validator_key.json` by
//! [`load_validator_key`]). The PKCS#11 key is the `pkcs11` module's.
//!
//! # Design
//! - A key hands out its public key (read once, when it is opened) and
//!   signs the bytes the guard let through: nothing else. The guard, the
//!   state file and the order "save, then release" are the
//!   `GuardedSigner`'s, whatever the key.
//! - Keys are Ed25519: `GuardedSigner::open` refuses a key whose public key
//!   is of another type ([`SignerError::KeyType`]).

use std::path::Path;

use super::SignerError;
use crate::messages::{crypto_public_key, CryptoPublicKey};
use crate::tmkms_key::SoftsignError;
use p2p_conn::keyfile::{KeyFileError, KeyFileProblem};
use p2p_conn::Identity;

/// A validator's signing key, wherever it is kept: the soft key
/// ([`Identity`]) or a key in a token (`pkcs11::Pkcs11Key`, feature
/// `pkcs11`). [`GuardedSigner`](crate::GuardedSigner) asks it for its public
/// key once, at open, and has it sign each message its guard allowed.
pub trait ValidatorKey: Send {
    /// The public key, as the node receives it (`PubKeyResponse`).
    fn public_key(&self) -> CryptoPublicKey;

    /// Sign `message` (the sign bytes of a vote, a proposal or a vote
    /// extension). An error means no signature: the request fails, and the
    /// next one may succeed (a token's session is reopened).
    fn sign(&mut self, message: &[u8]) -> Result<Vec<u8>, SignerError>;
}

/// The soft key: an Ed25519 key in this process's memory.
impl ValidatorKey for Identity {
    fn public_key(&self) -> CryptoPublicKey {
        CryptoPublicKey {
            sum: Some(crypto_public_key::Key::Ed25519(
                self.public_key().as_bytes().to_vec(),
            )),
        }
    }

    fn sign(&mut self, message: &[u8]) -> Result<Vec<u8>, SignerError> {
        Ok(Identity::sign(self, message).to_vec())
    }
}

impl<K: ValidatorKey + ?Sized> ValidatorKey for Box<K> {
    fn public_key(&self) -> CryptoPublicKey {
        (**self).public_key()
    }

    fn sign(&mut self, message: &[u8]) -> Result<Vec<u8>, SignerError> {
        (**self).sign(message)
    }
}

/// The Ed25519 public key of `key`, or [`SignerError::KeyType`] naming
/// what it is instead.
pub(crate) fn ed25519_public_key(key: &dyn ValidatorKey) -> Result<[u8; 32], SignerError> {
    let refuse = |key_type: &str| SignerError::KeyType {
        key: "the validator key".into(),
        key_type: key_type.into(),
    };
    match key.public_key().sum {
        Some(crypto_public_key::Key::Ed25519(bytes)) => bytes
            .as_slice()
            .try_into()
            .map_err(|_| refuse("Ed25519 of a length other than 32 bytes")),
        Some(crypto_public_key::Key::Secp256k1(_)) => Err(refuse("secp256k1")),
        _ => Err(refuse("unknown")),
    }
}

/// The `priv_key.type` of the key file at `path`, which
/// `keyfile::load` found is not Ed25519, as [`SignerError::KeyType`].
fn key_type_of(path: &Path) -> SignerError {
    use std::io::Read;

    #[derive(serde::Deserialize)]
    struct Typed {
        #[serde(rename = "type")]
        key_type: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct File {
        priv_key: Option<Typed>,
    }
    let mut text = zeroize::Zeroizing::new(Vec::new());
    let read = std::fs::File::open(path).and_then(|f| {
        f.take(p2p_conn::keyfile::MAX_KEY_FILE_BYTES as u64)
            .read_to_end(&mut text)
    });
    let key_type = read
        .ok()
        .and_then(|_| serde_json::from_slice::<File>(&text).ok())
        .and_then(|f| f.priv_key?.key_type)
        .map(|t| t.chars().take(64).collect())
        .unwrap_or_else(|| "unknown".into());
    SignerError::KeyType {
        key: path.display().to_string(),
        key_type,
    }
}

/// Load a CometBFT `priv_validator_key.json` (`address`, `pub_key` and
/// `priv_key`, each Ed25519 key as `{"type":..., "value": base64}`). The
/// private key is read as [`p2p_conn::keyfile::load`] reads a node key (its
/// checks, size limit and zeroization); `pub_key.value` and `address` must
/// belong to it. A file with neither is refused
/// ([`SignerError::NotValidatorKey`]): that is a `node_key.json`, and a
/// signer serving it would sign as a validator no validator set holds. The second pass, for the public parts,
/// skips `priv_key` without copying it and zeroizes the text it read.
///
/// A file that is not JSON is read as tmkms's softsign key (the base64 of
/// the 32-byte seed, as `tmkms softsign keygen` and `import` write it),
/// which has no public parts to check ([`SignerError::TmkmsKey`] when it
/// is neither).
///
/// A key of another type than Ed25519 (`tendermint/PrivKeySecp256k1`,
/// `cometbft/PrivKeyBls12_381`, ...) is refused with
/// [`SignerError::KeyType`], which names it.
pub fn load_validator_key(path: impl AsRef<Path>) -> Result<Identity, SignerError> {
    use base64::Engine;
    use std::io::Read;

    #[derive(serde::Deserialize)]
    struct PubKey {
        value: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct Public {
        address: Option<String>,
        pub_key: Option<PubKey>,
    }

    let path = path.as_ref();
    match crate::tmkms_key::load_if_softsign(path) {
        Ok(Some(key)) => return Ok(key),
        Ok(None) => {}
        Err(SoftsignError::Read(source)) => {
            return Err(SignerError::Key(KeyFileError::Read {
                path: path.to_path_buf(),
                source,
            }))
        }
        Err(SoftsignError::Problem(problem)) => {
            return Err(SignerError::TmkmsKey {
                path: path.to_path_buf(),
                problem,
            })
        }
    }

    let key = match p2p_conn::keyfile::load(path) {
        Ok(key) => key,
        Err(KeyFileError::Invalid {
            problem: KeyFileProblem::UnsupportedKeyType,
            ..
        }) => return Err(key_type_of(path)),
        Err(e) => return Err(e.into()),
    };
    let read_err = |source| {
        SignerError::Key(KeyFileError::Read {
            path: path.to_path_buf(),
            source,
        })
    };
    let mut text = zeroize::Zeroizing::new(Vec::new());
    std::fs::File::open(path)
        .map_err(read_err)?
        .take(p2p_conn::keyfile::MAX_KEY_FILE_BYTES as u64)
        .read_to_end(&mut text)
        .map_err(read_err)?;
    // keyfile::load accepted the file, so this parses unless it changed
    // in between; then there is nothing public to check against.
    let public: Option<Public> = serde_json::from_slice(&text).ok();
    let Some(public) = public.filter(|p| p.address.is_some() || p.pub_key.is_some()) else {
        return Err(SignerError::NotValidatorKey {
            path: path.to_path_buf(),
        });
    };
    let ours = key.public_key();
    if let Some(pk) = public.pub_key.and_then(|p| p.value) {
        let decoded = base64::engine::general_purpose::STANDARD.decode(pk.trim());
        if decoded.ok().as_deref() != Some(&ours.as_bytes()[..]) {
            return Err(SignerError::KeyMismatch {
                path: path.to_path_buf(),
                field: "pub_key.value",
            });
        }
    }
    if let Some(addr) = public.address {
        let decoded = hex::decode(addr.trim());
        if decoded.ok().as_deref() != Some(&ours.node_id().as_bytes()[..]) {
            return Err(SignerError::KeyMismatch {
                path: path.to_path_buf(),
                field: "address",
            });
        }
    }
    Ok(key)
}
