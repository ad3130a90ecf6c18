//! tmkms's softsign consensus key file, read by
//! [`crate::load_validator_key`] beside CometBFT's
//! `priv_validator_key.json`.
//!
//! # Format
//! tmkms 0.15.0's `softsign keygen` and `softsign import` (from a
//! `priv_validator_key.json`) write the standard base64 (with padding) of
//! the 32-byte Ed25519 seed, no newline, mode 0600; tmkms reads it with
//! white space trimmed at the end. tmkms also reads 64 and 96 bytes there
//! (an expanded secret key, one exported from a YubiHSM): they hold no
//! seed, and an Ed25519 signer here signs from a seed, so they are refused
//! ([`TmkmsKeyProblem::NoSeed`]).
//!
//! # Telling it from a JSON key file
//! A JSON key file starts with `{` (after white space), which is not a
//! base64 character: anything else is read as softsign's.
//!
//! # Guarantees
//! The file's bytes, the decoded seed and every copy of them are zeroized;
//! an error names the file and the problem, never the content.

use std::path::Path;

use base64::Engine;
use p2p_conn::Identity;
use zeroize::Zeroizing;

/// What is wrong with a tmkms softsign key file.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TmkmsKeyProblem {
    /// Not base64 (nor JSON).
    #[error("it is neither a priv_validator_key.json (JSON) nor a tmkms softsign key (base64)")]
    NotBase64,
    /// 64 or 96 bytes: an expanded key with no seed.
    #[error("it is a tmkms softsign key of {bytes} bytes, an expanded Ed25519 key with no seed: only a 32-byte seed can be used (`tmkms softsign keygen` and `import` write one)")]
    NoSeed {
        /// Its decoded length.
        bytes: usize,
    },
    /// Another length.
    #[error("it decodes to {bytes} bytes, not a tmkms softsign key's 32-byte Ed25519 seed")]
    BadLength {
        /// Its decoded length.
        bytes: usize,
    },
}

/// Why [`load_if_softsign`] failed: the caller words it.
#[derive(Debug)]
pub(crate) enum SoftsignError {
    /// The file could not be read.
    Read(std::io::Error),
    /// It is not a usable softsign key.
    Problem(TmkmsKeyProblem),
}

/// The key in the file at `path` if it is tmkms's softsign format; `None`
/// when it is JSON (for the caller to read as a `priv_validator_key.json`).
pub(crate) fn load_if_softsign(path: &Path) -> Result<Option<Identity>, SoftsignError> {
    use std::io::Read;
    let read_err = SoftsignError::Read;
    let max = p2p_conn::keyfile::MAX_KEY_FILE_BYTES;
    let mut bytes = Zeroizing::new(Vec::with_capacity(max + 1));
    std::fs::File::open(path)
        .map_err(read_err)?
        .take(max as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    let text = bytes.trim_ascii();
    if text.first().is_none_or(|&b| b == b'{') || bytes.len() > max {
        // JSON, empty or too large: the JSON reader says what it is.
        return Ok(None);
    }
    let problem = SoftsignError::Problem;
    if text.len() > 128 {
        // More than 96 bytes' worth.
        return Err(problem(TmkmsKeyProblem::BadLength {
            bytes: text.len() / 4 * 3,
        }));
    }
    let mut seed = Zeroizing::new([0u8; 96]);
    let len = base64::engine::general_purpose::STANDARD
        .decode_slice(text, &mut seed[..])
        .map_err(|_| problem(TmkmsKeyProblem::NotBase64))?;
    match len {
        32 => {
            let mut exact = Zeroizing::new([0u8; 32]);
            exact.copy_from_slice(&seed[..32]);
            Ok(Some(Identity::from_seed(&exact)))
        }
        64 | 96 => Err(problem(TmkmsKeyProblem::NoSeed { bytes: len })),
        bytes => Err(problem(TmkmsKeyProblem::BadLength { bytes })),
    }
}
