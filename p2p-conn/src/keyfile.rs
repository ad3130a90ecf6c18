//! CometBFT `node_key.json` files: parse, serialise, load, and save without
//! ever replacing an existing file.
//!
//! ## Format
//! `{"priv_key":{"type":"tendermint/PrivKeyEd25519","value":B64}}`, where B64
//! is the standard base64 (with padding) of the 32-byte Ed25519 seed followed
//! by the 32-byte public key: 64 bytes, 88 characters. [`to_json`] writes
//! exactly this compact form. [`parse`] accepts any JSON layout, ignores
//! other top-level fields, and trims whitespace around the base64 value.
//!
//! ## Design
//! * [`Identity`] knows nothing of files or JSON: the sans-IO core depends
//!   on it. All file I/O and JSON for node keys lives here, as free
//!   functions: [`parse`], [`to_json`], [`load`], [`save_new`].
//! * Parsing goes through an untyped [`serde_json::Value`], and every check
//!   after that is ours, so no error message is built by serde from the
//!   file's content.
//! * [`save_new`] writes a temporary file beside the target (created new,
//!   owner-only on Unix), syncs it, then hard-links it to the target name.
//!   A hard link fails if the name exists, so the target appears complete or
//!   not at all and an existing file (or symlink, even a dangling one) is
//!   never replaced. The temporary name is removed and, on Unix, the
//!   directory is synced.
//!
//! ## Guarantees
//! * A [`KeyFileError`] names the file and the kind of problem (not JSON,
//!   missing field, unsupported key type, not base64, wrong length, public
//!   half not matching), and never contains the file's content or any part of
//!   it. Positions (line, column) and the decoded length are reported.
//! * The file's text, the parsed JSON tree (every string in it, keys
//!   included), the base64 value and the decoded key bytes are zeroized once
//!   parsing is done, whether it succeeded or not. [`to_json`] builds its
//!   output in one allocation of the final size inside a
//!   [`Zeroizing`] string.
//! * [`load`] reads at most [`MAX_KEY_FILE_BYTES`] into one buffer allocated
//!   up front, so the secret is not left behind by a reallocation.
//! * [`save_new`] returns [`KeyFileError::AlreadyExists`] and leaves the path
//!   untouched if anything exists there; on every return no temporary file
//!   is left behind (unless removing it fails, reported as
//!   [`KeyFileError::TempFileLeft`]). On Unix the file has mode 0600.
//!
//! ## Not provided
//! * Wiping serde_json's internal scratch buffer: it holds a copy of a string
//!   only when that string contains JSON escapes (`\/`, `\u...`), which
//!   CometBFT does not write.
//! * Wiping copies the OS or a caller made (page cache, swap, `json` passed to
//!   [`parse`]: the caller owns it).
//! * Key types other than Ed25519, and encrypted key files (CometBFT has none).
//! * Saving on filesystems without hard links (some FAT or network mounts):
//!   [`save_new`] fails there with [`KeyFileError::Write`] rather than fall
//!   back to a write that could replace or half-write a key.
//! * Locking: two processes calling [`save_new`] on one path cannot both
//!   succeed, but nothing stops another program from writing there by other
//!   means.

use std::io::Write;
use std::path::{Path, PathBuf};

use base64::Engine;
use zeroize::{Zeroize, Zeroizing};

use crate::atomic_file::{create_temp, parent_dir, read_bounded, sync_dir};
use crate::Identity;

/// The `type` of an Ed25519 node key, the only kind CometBFT's p2p layer uses.
const KEY_TYPE: &str = "tendermint/PrivKeyEd25519";

/// Largest key file [`load`] reads. A `node_key.json` is about 130 bytes; the
/// bound leaves room for any formatting and keeps a wrong path (a log file, a
/// device) from being read whole.
pub const MAX_KEY_FILE_BYTES: usize = 64 * 1024;

/// Bytes of the decoded value: the 32-byte seed, then the 32-byte public key.
const RAW_KEY_BYTES: usize = 64;

const JSON_PREFIX: &str = r#"{"priv_key":{"type":"tendermint/PrivKeyEd25519","value":""#;
const JSON_SUFFIX: &str = r#""}}"#;

/// What is wrong with the content of a key file. Never carries any of it.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[non_exhaustive]
pub enum KeyFileProblem {
    /// The bytes are not UTF-8 text.
    #[error("it is not UTF-8 text, so not JSON")]
    NotUtf8,
    /// The text is not valid JSON (or is cut short).
    #[error("it is not valid JSON (syntax error at line {line}, column {column})")]
    NotJson {
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
    },
    /// The JSON lacks a field of the node key format, or has it with the
    /// wrong JSON type. The field is named by its path, e.g. `priv_key.value`.
    #[error("it is not a node key: {field} is missing or not a JSON {json_type}")]
    MissingField {
        /// Path of the field, e.g. `priv_key.value`.
        field: &'static str,
        /// The JSON type it must have.
        json_type: &'static str,
    },
    /// `priv_key.type` is not `tendermint/PrivKeyEd25519`.
    #[error(
        "priv_key.type is not \"tendermint/PrivKeyEd25519\" (only Ed25519 node keys are supported)"
    )]
    UnsupportedKeyType,
    /// `priv_key.value` is not standard base64.
    #[error("priv_key.value is not valid base64")]
    NotBase64,
    /// `priv_key.value` decodes to the wrong number of bytes.
    #[error("priv_key.value decodes to {bytes} bytes, expected 64 (32-byte seed, then 32-byte public key)")]
    WrongLength {
        /// Decoded length.
        bytes: usize,
    },
    /// The public key half does not belong to the seed half.
    #[error("the public key half of priv_key.value does not match its private seed (corrupted or hand-edited)")]
    PublicKeyMismatch,
}

/// Errors reading, parsing or writing a key file. Each names the path (when
/// there is one) and never any of the file's content.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyFileError {
    /// The file could not be opened or read. Check the path and permissions.
    #[error("cannot read key file {}: {source}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is larger than [`MAX_KEY_FILE_BYTES`]: probably not a key file.
    #[error("key file {} is larger than {max_bytes} bytes, so it is not a node_key.json; check the path", .path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The limit.
        max_bytes: usize,
    },
    /// The content is not a CometBFT Ed25519 node key. Fix or regenerate it.
    #[error("{}: {problem}", invalid_prefix(.path))]
    Invalid {
        /// The file, when the key came from one.
        path: Option<PathBuf>,
        /// What is wrong.
        problem: KeyFileProblem,
    },
    /// [`save_new`] found something at the path and left it alone. Move it
    /// away or choose another path.
    #[error("key file {} already exists; not overwriting it", .path.display())]
    AlreadyExists {
        /// The path.
        path: PathBuf,
    },
    /// The path names no file (it is empty, `/` or ends in `..`).
    #[error("cannot save a key file to {:?}: the path names no file", .path.display())]
    NotAFilePath {
        /// The path.
        path: PathBuf,
    },
    /// Writing the key failed; nothing was saved at `path` and no temporary
    /// file is left. Check the directory's permissions and free space.
    #[error("cannot write key file {}: {source}; nothing was saved", .path.display())]
    Write {
        /// The target path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The key was saved at `path`, but its temporary copy could not be
    /// removed: delete `temp` by hand (it holds the secret key).
    #[error("key file {} was saved, but its temporary copy {} could not be removed ({source}); delete it, it holds the secret key", .path.display(), .temp.display())]
    TempFileLeft {
        /// The saved key file.
        path: PathBuf,
        /// The temporary file still there.
        temp: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The key was saved at `path`, but syncing its directory failed, so the
    /// new name may not survive a crash. Sync or check the disk.
    #[error("key file {} was saved, but syncing its directory failed ({source}); it may not survive a power loss", .path.display())]
    DirectorySync {
        /// The saved key file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

fn invalid_prefix(path: &Option<PathBuf>) -> String {
    match path {
        Some(p) => format!("invalid key file {}", p.display()),
        None => "invalid node key JSON".to_string(),
    }
}

/// Parse the text of a CometBFT `node_key.json`. The embedded public key must
/// match the seed. Errors carry no path; [`load`] adds it.
pub fn parse(json: &str) -> Result<Identity, KeyFileError> {
    parse_inner(json).map_err(|problem| KeyFileError::Invalid {
        path: None,
        problem,
    })
}

/// Serialise as CometBFT `node_key.json` (compact, no trailing newline). The
/// string holds the secret key and is zeroized on drop.
pub fn to_json(identity: &Identity) -> Zeroizing<String> {
    let mut raw = Zeroizing::new([0u8; RAW_KEY_BYTES]);
    raw[..32].copy_from_slice(identity.signing_key().as_bytes());
    raw[32..].copy_from_slice(identity.public_key().as_bytes());
    let b64_len = RAW_KEY_BYTES.div_ceil(3) * 4;
    // One allocation of the final size: no reallocation leaves a copy behind.
    let mut out = Zeroizing::new(String::with_capacity(
        JSON_PREFIX.len() + b64_len + JSON_SUFFIX.len(),
    ));
    out.push_str(JSON_PREFIX);
    base64::engine::general_purpose::STANDARD.encode_string(&raw[..], &mut out);
    out.push_str(JSON_SUFFIX);
    debug_assert_eq!(out.len(), out.capacity());
    out
}

/// Read and parse a `node_key.json` file.
pub fn load(path: impl AsRef<Path>) -> Result<Identity, KeyFileError> {
    let path = path.as_ref();
    let read_err = |source| KeyFileError::Read {
        path: path.to_path_buf(),
        source,
    };
    // Allocated once at the limit plus one byte, so reading never reallocates.
    let mut bytes = Zeroizing::new(Vec::with_capacity(MAX_KEY_FILE_BYTES + 1));
    if !read_bounded(path, MAX_KEY_FILE_BYTES, &mut bytes).map_err(read_err)? {
        return Err(KeyFileError::TooLarge {
            path: path.to_path_buf(),
            max_bytes: MAX_KEY_FILE_BYTES,
        });
    }
    let parsed = match std::str::from_utf8(&bytes) {
        Ok(text) => parse_inner(text),
        Err(_) => Err(KeyFileProblem::NotUtf8),
    };
    parsed.map_err(|problem| KeyFileError::Invalid {
        path: Some(path.to_path_buf()),
        problem,
    })
}

/// Write `identity` as a new `node_key.json` at `path`, never replacing
/// anything already there ([`KeyFileError::AlreadyExists`]). The file is
/// complete when it appears (written to a temporary file in the same
/// directory, synced, then hard-linked into place), owner-only on Unix, and
/// the directory is synced on Unix.
pub fn save_new(identity: &Identity, path: impl AsRef<Path>) -> Result<(), KeyFileError> {
    let path = path.as_ref();
    let write_err = |source| KeyFileError::Write {
        path: path.to_path_buf(),
        source,
    };
    let Some(file_name) = path.file_name() else {
        return Err(KeyFileError::NotAFilePath {
            path: path.to_path_buf(),
        });
    };
    let dir = parent_dir(path);
    // An early, clearer answer; the hard link below is what guarantees it.
    if std::fs::symlink_metadata(path).is_ok() {
        return Err(KeyFileError::AlreadyExists {
            path: path.to_path_buf(),
        });
    }

    let (temp, mut file) = create_temp(dir, file_name).map_err(write_err)?;
    let guard = TempGuard(Some(temp.clone()));
    file.write_all(to_json(identity).as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(write_err)?;
    drop(file);
    match std::fs::hard_link(&temp, path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(KeyFileError::AlreadyExists {
                path: path.to_path_buf(),
            })
        }
        Err(e) => return Err(write_err(e)),
    }
    guard
        .remove()
        .map_err(|(temp, source)| KeyFileError::TempFileLeft {
            path: path.to_path_buf(),
            temp,
            source,
        })?;
    sync_dir(dir).map_err(|source| KeyFileError::DirectorySync {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(())
}

/// Removes the temporary file on drop (best effort, for error paths);
/// [`TempGuard::remove`] removes it and reports failure.
struct TempGuard(Option<PathBuf>);

impl TempGuard {
    fn remove(mut self) -> Result<(), (PathBuf, std::io::Error)> {
        match self.0.take() {
            Some(temp) => std::fs::remove_file(&temp).map_err(|e| (temp, e)),
            None => Ok(()),
        }
    }
}

impl Drop for TempGuard {
    fn drop(&mut self) {
        if let Some(temp) = self.0.take() {
            let _ = std::fs::remove_file(temp);
        }
    }
}

/// A parsed JSON tree whose strings (keys included) are zeroized on drop.
struct WipedValue(serde_json::Value);

impl Drop for WipedValue {
    fn drop(&mut self) {
        wipe(std::mem::take(&mut self.0));
    }
}

fn wipe(v: serde_json::Value) {
    match v {
        serde_json::Value::String(mut s) => s.zeroize(),
        serde_json::Value::Array(items) => items.into_iter().for_each(wipe),
        serde_json::Value::Object(map) => {
            for (mut k, v) in map {
                k.zeroize();
                wipe(v);
            }
        }
        serde_json::Value::Null | serde_json::Value::Bool(_) | serde_json::Value::Number(_) => {}
    }
}

fn missing(field: &'static str, json_type: &'static str) -> KeyFileProblem {
    KeyFileProblem::MissingField { field, json_type }
}

fn parse_inner(json: &str) -> Result<Identity, KeyFileProblem> {
    // Parsing into a `Value` never fails on content types, only on syntax,
    // and serde_json's syntax errors carry positions, not text. The error is
    // dropped here; only its position is kept.
    let doc = WipedValue(
        serde_json::from_str(json).map_err(|e| KeyFileProblem::NotJson {
            line: e.line(),
            column: e.column(),
        })?,
    );
    let priv_key = doc
        .0
        .get("priv_key")
        .and_then(serde_json::Value::as_object)
        .ok_or(missing("priv_key", "object"))?;
    let kind = priv_key
        .get("type")
        .and_then(serde_json::Value::as_str)
        .ok_or(missing("priv_key.type", "string"))?;
    if kind != KEY_TYPE {
        return Err(KeyFileProblem::UnsupportedKeyType);
    }
    let value = priv_key
        .get("value")
        .and_then(serde_json::Value::as_str)
        .ok_or(missing("priv_key.value", "string"))?;
    // `decode` allocates its output once, at the estimated length.
    let raw = Zeroizing::new(
        base64::engine::general_purpose::STANDARD
            .decode(value.trim())
            .map_err(|_| KeyFileProblem::NotBase64)?,
    );
    if raw.len() != RAW_KEY_BYTES {
        return Err(KeyFileProblem::WrongLength { bytes: raw.len() });
    }
    let mut seed = Zeroizing::new([0u8; 32]);
    seed.copy_from_slice(&raw[..32]);
    let identity = Identity::from_seed(&seed);
    if identity.public_key().as_bytes()[..] != raw[32..] {
        return Err(KeyFileProblem::PublicKeyMismatch);
    }
    Ok(identity)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn to_json_is_the_compact_cometbft_form() {
        let id = Identity::from_seed(&[7u8; 32]);
        let json = to_json(&id);
        assert!(json.starts_with(JSON_PREFIX) && json.ends_with(JSON_SUFFIX));
        assert_eq!(json.len(), JSON_PREFIX.len() + 88 + JSON_SUFFIX.len());
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["priv_key"]["type"], KEY_TYPE);
        assert_eq!(parse(&json).unwrap().public_key(), id.public_key());
    }
}
