//! The signer's state file: the double-sign guard's high-water mark on
//! disk, in CometBFT's `priv_validator_state.json` format, so that an
//! operator can move a FilePV state file to p2p-conn and back.
//!
//! # Format
//! As FilePV writes it (`cmtjson.MarshalIndent(lss, "", "  ")`, v0.38.26
//! and v1.0.1): `height` is an int64, so a JSON string; `round` and `step`
//! are numbers; `signature` is standard base64 and `signbytes` upper-case
//! hex, both omitted when empty.
//! ```text
//! {
//!   "height": "5",
//!   "round": 0,
//!   "step": 3,
//!   "signature": "base64...",
//!   "signbytes": "HEX..."
//! }
//! ```
//! [`to_json`] writes exactly that (no trailing newline, as FilePV).
//! [`parse`] also accepts `height` as a number, lower-case hex, `null` or
//! empty `signature`/`signbytes`, and ignores other fields.
//!
//! # Design
//! [`save`] replaces the file atomically and durably: it writes a
//! temporary file in the same directory (created new, mode 0600 on Unix),
//! syncs it (`fsync`), renames it over the state file, and syncs the
//! directory (Unix). Only when all of that succeeded does it return `Ok`,
//! and [`super::GuardedSigner`] releases a signature only then. FilePV's
//! `WriteFileAtomic` opens its temporary file `O_SYNC` and renames it, but
//! does not sync the directory.
//!
//! # Guarantees
//! - After a failed [`save`] (at any step before the rename) the old file
//!   is untouched and the temporary file is removed (unless removing it
//!   fails too). A crash leaves either the old or the new file whole,
//!   perhaps with a stray temporary file beside it.
//! - [`load`] reads at most [`MAX_STATE_FILE_BYTES`]; its errors name the
//!   file and the problem.
//!
//! # Not provided
//! - Locking: two signers on one state file defeat the guard. Run one.
//! - Filesystems where rename is not atomic (some network mounts).

use std::io::Write;
use std::path::Path;

use base64::Engine;

use super::guard::{Hrs, SignState, Step};
use super::signer::SignerError;
use crate::atomic_file::{create_temp, parent_dir, read_bounded, sync_dir};

/// The largest state file [`load`] reads. A FilePV state file is under
/// 1 KiB (its sign bytes are a canonical vote or proposal).
pub const MAX_STATE_FILE_BYTES: usize = 64 * 1024;

/// What is wrong with the content of a state file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StateFileProblem {
    /// Not UTF-8.
    #[error("it is not UTF-8 text, so not JSON")]
    NotUtf8,
    /// Not valid JSON.
    #[error("it is not valid JSON (syntax error at line {line}, column {column})")]
    NotJson {
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
    },
    /// Not a JSON object.
    #[error("it is not a JSON object")]
    NotObject,
    /// A field is missing or has the wrong JSON type.
    #[error("{field} is missing or not {expected}")]
    BadField {
        /// The field.
        field: &'static str,
        /// What it must be.
        expected: &'static str,
    },
    /// `step` is not 0 to 3.
    #[error("step is {step}, not 0 (none), 1 (propose), 2 (prevote) or 3 (precommit)")]
    BadStep {
        /// The value.
        step: i64,
    },
    /// Sign bytes are recorded but no signature (FilePV panics on this).
    #[error("signbytes are recorded but no signature")]
    SignBytesWithoutSignature,
}

/// Parse the text of a `priv_validator_state.json`.
pub fn parse(json: &str) -> Result<SignState, StateFileProblem> {
    let value: serde_json::Value =
        serde_json::from_str(json).map_err(|e| StateFileProblem::NotJson {
            line: e.line(),
            column: e.column(),
        })?;
    let obj = value.as_object().ok_or(StateFileProblem::NotObject)?;
    let height = match obj.get("height") {
        Some(serde_json::Value::String(s)) => s.parse::<i64>().ok(),
        Some(serde_json::Value::Number(n)) => n.as_i64(),
        _ => None,
    }
    .ok_or(StateFileProblem::BadField {
        field: "height",
        expected: "an int64 (a decimal string)",
    })?;
    let round = obj
        .get("round")
        .and_then(serde_json::Value::as_i64)
        .and_then(|r| i32::try_from(r).ok())
        .ok_or(StateFileProblem::BadField {
            field: "round",
            expected: "an int32",
        })?;
    let step_n =
        obj.get("step")
            .and_then(serde_json::Value::as_i64)
            .ok_or(StateFileProblem::BadField {
                field: "step",
                expected: "an integer",
            })?;
    let step = i8::try_from(step_n)
        .ok()
        .and_then(Step::from_i8)
        .ok_or(StateFileProblem::BadStep { step: step_n })?;
    let signature = match obj.get("signature") {
        None | Some(serde_json::Value::Null) => Vec::new(),
        Some(serde_json::Value::String(s)) => base64::engine::general_purpose::STANDARD
            .decode(s)
            .map_err(|_| StateFileProblem::BadField {
            field: "signature",
            expected: "standard base64",
        })?,
        Some(_) => {
            return Err(StateFileProblem::BadField {
                field: "signature",
                expected: "a base64 string",
            })
        }
    };
    let sign_bytes = match obj.get("signbytes") {
        None | Some(serde_json::Value::Null) => Vec::new(),
        Some(serde_json::Value::String(s)) => {
            hex::decode(s).map_err(|_| StateFileProblem::BadField {
                field: "signbytes",
                expected: "hex",
            })?
        }
        Some(_) => {
            return Err(StateFileProblem::BadField {
                field: "signbytes",
                expected: "a hex string",
            })
        }
    };
    if !sign_bytes.is_empty() && signature.is_empty() {
        return Err(StateFileProblem::SignBytesWithoutSignature);
    }
    Ok(SignState::new(
        Hrs::new(height, round, step),
        sign_bytes,
        signature,
    ))
}

/// The state as FilePV writes it (two-space indent, no trailing newline).
pub fn to_json(state: &SignState) -> String {
    let hrs = state.hrs();
    let mut out = format!(
        "{{\n  \"height\": \"{}\",\n  \"round\": {},\n  \"step\": {}",
        hrs.height,
        hrs.round,
        hrs.step.as_i8()
    );
    if !state.signature().is_empty() {
        out.push_str(",\n  \"signature\": \"");
        base64::engine::general_purpose::STANDARD.encode_string(state.signature(), &mut out);
        out.push('"');
    }
    if !state.sign_bytes().is_empty() {
        out.push_str(",\n  \"signbytes\": \"");
        out.push_str(&hex::encode_upper(state.sign_bytes()));
        out.push('"');
    }
    out.push_str("\n}");
    out
}

/// Read and parse a state file.
pub fn load(path: impl AsRef<Path>) -> Result<SignState, SignerError> {
    let path = path.as_ref();
    let read_err = |source| SignerError::StateRead {
        path: path.to_path_buf(),
        source,
    };
    let mut bytes = Vec::new();
    if !read_bounded(path, MAX_STATE_FILE_BYTES, &mut bytes).map_err(read_err)? {
        return Err(SignerError::StateTooLarge {
            path: path.to_path_buf(),
            max_bytes: MAX_STATE_FILE_BYTES,
        });
    }
    let parsed = match std::str::from_utf8(&bytes) {
        Ok(text) => parse(text),
        Err(_) => Err(StateFileProblem::NotUtf8),
    };
    parsed.map_err(|problem| SignerError::StateInvalid {
        path: path.to_path_buf(),
        problem,
    })
}

/// Replace the state file at `path` with `state`, atomically and durably
/// (module docs). `Ok` only once the new file and its directory entry are
/// synced.
pub fn save(path: impl AsRef<Path>, state: &SignState) -> Result<(), SignerError> {
    let path = path.as_ref();
    write_atomic(path, to_json(state).as_bytes(), true, |f, d| f.write_all(d)).map_err(|source| {
        SignerError::StateWrite {
            path: path.to_path_buf(),
            source,
        }
    })
}

/// Write the initial state (nothing signed) as a new state file, never
/// replacing anything at `path` (an existing name fails with
/// `io::ErrorKind::AlreadyExists` inside [`SignerError::StateWrite`]).
pub fn create_new(path: impl AsRef<Path>) -> Result<(), SignerError> {
    let path = path.as_ref();
    let json = to_json(&SignState::default());
    write_atomic(path, json.as_bytes(), false, |f, d| f.write_all(d)).map_err(|source| {
        SignerError::StateWrite {
            path: path.to_path_buf(),
            source,
        }
    })
}

/// Temporary file in `path`'s directory, written by `write`, synced, then
/// renamed over `path` (`replace`) or hard-linked to it (never replacing),
/// and the directory synced. The temporary name is removed on every error.
fn write_atomic(
    path: &Path,
    data: &[u8],
    replace: bool,
    write: impl FnOnce(&mut std::fs::File, &[u8]) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let name = path.file_name().ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "the path names no file")
    })?;
    let dir = parent_dir(path);
    let (tmp, mut file) = create_temp(dir, name)?;
    let result = (|| {
        write(&mut file, data)?;
        file.sync_all()?;
        drop(file);
        if replace {
            std::fs::rename(&tmp, path)?;
        } else {
            std::fs::hard_link(&tmp, path)?;
            std::fs::remove_file(&tmp)?;
        }
        sync_dir(dir)
    })();
    if result.is_err() {
        // Gone already after a successful rename; harmless then.
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn temp_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "p2p-conn-state-{tag}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    /// A write that fails half way (a full disk) leaves the old state file
    /// as it was and no temporary file behind.
    #[test]
    fn failed_write_never_replaces_the_state() {
        let dir = temp_dir("fail");
        let path = dir.join("priv_validator_state.json");
        let old = SignState::new(Hrs::new(7, 1, Step::Prevote), vec![1, 2], vec![3, 4]);
        save(&path, &old).unwrap();
        let before = std::fs::read(&path).unwrap();
        let new = SignState::new(Hrs::new(8, 0, Step::Propose), vec![5], vec![6]);
        let err = write_atomic(&path, to_json(&new).as_bytes(), true, |f, d| {
            f.write_all(&d[..d.len() / 2])?;
            Err(std::io::Error::other("disk full"))
        })
        .unwrap_err();
        assert_eq!(err.to_string(), "disk full");
        assert_eq!(std::fs::read(&path).unwrap(), before);
        assert_eq!(load(&path).unwrap(), old);
        assert_eq!(entries(&dir), vec!["priv_validator_state.json".to_string()]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// `save` replaces; `create_new` never does.
    #[test]
    fn save_replaces_create_new_does_not() {
        let dir = temp_dir("create");
        let path = dir.join("s.json");
        create_new(&path).unwrap();
        assert_eq!(load(&path).unwrap(), SignState::default());
        let s = SignState::new(Hrs::new(1, 0, Step::Precommit), vec![9], vec![8]);
        save(&path, &s).unwrap();
        assert_eq!(load(&path).unwrap(), s);
        match create_new(&path) {
            Err(SignerError::StateWrite { source, .. }) => {
                assert_eq!(source.kind(), std::io::ErrorKind::AlreadyExists)
            }
            other => panic!("expected AlreadyExists, got {other:?}"),
        }
        assert_eq!(load(&path).unwrap(), s);
        assert_eq!(entries(&dir), vec!["s.json".to_string()]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
