//! The validator key `--key` names (and a config file's `key = "..."`):
//! one syntax, read by [`KeySpec::parse`] and opened by [`KeySpec::open`]
//! (the start checks the key file's or PIN file's permissions between
//! the two).
//!
//! - `pkcs11:...`: a key in a PKCS#11 token, an RFC 7512 URI
//!   ([`Pkcs11Uri`]: `pkcs11:token=LABEL;object=LABEL?module-path=/PATH&pin-source=file:/PATH`).
//! - anything else: the path of a CometBFT `priv_validator_key.json`
//!   ([`load_validator_key`]).

use std::path::PathBuf;

use p2p_conn_privval::pkcs11::{Pkcs11Key, Pkcs11Uri};
use p2p_conn_privval::{load_validator_key, ValidatorKey};

use crate::error::CliError;

/// Where the validator key is, as `--key` names it.
#[derive(Debug, Clone)]
pub enum KeySpec {
    /// A `priv_validator_key.json`.
    File(PathBuf),
    /// A key in a PKCS#11 token.
    Pkcs11(Pkcs11Uri),
}

impl KeySpec {
    /// Read `spec`: a `pkcs11:` URI (checked, nothing opened yet), or a
    /// file's path.
    pub fn parse(spec: &str) -> Result<KeySpec, CliError> {
        if spec.starts_with("pkcs11:") {
            Ok(KeySpec::Pkcs11(spec.parse()?))
        } else if spec.is_empty() {
            Err(CliError::usage(
                "the key is empty: give a priv_validator_key.json's path or a pkcs11: URI",
            ))
        } else {
            Ok(KeySpec::File(PathBuf::from(spec)))
        }
    }

    /// Open the key.
    pub fn open(&self) -> Result<OpenedKey, CliError> {
        let (key, backend, name): (Box<dyn ValidatorKey>, _, _) = match self {
            KeySpec::File(path) => (
                Box::new(load_validator_key(path)?),
                "file",
                path.display().to_string(),
            ),
            KeySpec::Pkcs11(uri) => {
                let name = uri.to_string();
                let name = name.split('?').next().unwrap_or_default().to_owned();
                (Box::new(Pkcs11Key::open(uri)?), "pkcs11", name)
            }
        };
        let public = match key.public_key().sum {
            Some(p2p_conn_privval::crypto_public_key::Key::Ed25519(k)) => k.try_into().ok(),
            _ => None,
        }
        .ok_or_else(|| CliError::Failed(format!("{name}: not an Ed25519 key")))?;
        Ok(OpenedKey {
            key,
            backend,
            name,
            public,
        })
    }
}

/// An open validator key, and how to name it in the start line and event.
pub struct OpenedKey {
    /// The key, for `GuardedSigner::open`.
    pub key: Box<dyn ValidatorKey>,
    /// `file` or `pkcs11`.
    pub backend: &'static str,
    /// The key file's path, or the token and object (the URI without its
    /// query: the module and the PIN file are not repeated).
    pub name: String,
    /// Its Ed25519 public key.
    pub public: [u8; 32],
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pkcs11_uri_is_a_token_key_and_anything_else_a_file() {
        let uri = "pkcs11:token=t;object=k?module-path=/usr/lib/softhsm/libsofthsm2.so\
                   &pin-source=file:/etc/p2p-conn/pin";
        assert!(matches!(
            KeySpec::parse(uri).unwrap(),
            KeySpec::Pkcs11(u) if u.pin_file() == Some(std::path::Path::new("/etc/p2p-conn/pin"))
        ));
        assert!(matches!(
            KeySpec::parse("config/priv_validator_key.json").unwrap(),
            KeySpec::File(p) if p == std::path::Path::new("config/priv_validator_key.json")
        ));
        assert!(KeySpec::parse("").is_err());
        let err = KeySpec::parse("pkcs11:object=k?module-path=/m&pin-value=1234")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("pin-value is refused") && !err.contains("1234"),
            "{err}"
        );
    }
}
