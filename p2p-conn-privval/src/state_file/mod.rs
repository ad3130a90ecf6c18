//! The signer's state file: the double-sign guard's high-water mark on
//! disk, in one of two formats, told apart by their first bytes:
//! - CometBFT's `priv_validator_state.json` (FilePV's), saved by a new
//!   file, `fsync`, rename and folder `fsync`: below;
//! - p2p-conn's slot file (`P2PCPVS1`): two checksummed slots in a file of
//!   fixed size, saved with one `fdatasync` of one overwritten slot (about
//!   half the sign latency; the format is in `spec/privval.md` §6).
//!
//! [`load`] reads either, and tmkms's consensus state file too (read
//! only: `tmkms.rs` has its format and how its mark maps onto FilePV's);
//! [`create_new`] and [`write_new`] make either; [`load`] then
//! [`write_new`] moves a mark from one format to another (`p2p-conn state
//! import` / `export`), so a FilePV or tmkms state file can come to
//! p2p-conn and a FilePV one go back. The JSON formats are told apart by
//! their content ([`Format`]), and a file that mixes them is refused.
//!
//! # Format
//! FilePV's JSON is in `filepv.rs`, tmkms's in `tmkms.rs`, the slot file in
//! `slots.rs` (and `spec/privval.md` §6).
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
//! One state file, one name. [`super::GuardedSigner`] keeps one signer per
//! state file with a lock beside it (`<file>.lock`), so the lock must be
//! the same file whatever path a signer is given. A path through a
//! symbolic-linked or bind-mounted folder, or with `.` and `..` in it,
//! reaches the same folder and so the same lock. A second name for the
//! file itself would not: a symbolic link or a hard link in another
//! folder, or a bind mount of the file, has a lock of its own beside it.
//! So a state file must be a regular file with one name that is not a
//! mount point ([`StatePathProblem`] says which rule failed), checked when
//! the signer opens it and again before every save, when the file must
//! also still be the one the signer last wrote (not moved away, not
//! replaced by another writer). The checks read the file's own metadata
//! (`lstat`: device, inode, link count) and, on Linux,
//! `/proc/self/mountinfo`.
//!
//! # Guarantees
//! - After a failed [`save`] (at any step before the rename) the old file
//!   is untouched and the temporary file is removed (unless removing it
//!   fails too). A save that failed after the new mark reached the file
//!   (the folder's `fsync` after the rename, or a slot's write or
//!   `fdatasync`) is [`StateFileError::NotDurable`]: the file may hold
//!   either mark, and [`super::GuardedSigner`] keeps the new one and saves
//!   it again before it releases anything. A crash leaves either the old or the new file whole,
//!   perhaps with a stray temporary file beside it, which the next
//!   [`super::GuardedSigner::open`] removes.
//! - [`load`] reads at most [`MAX_STATE_FILE_BYTES`]; its errors name the
//!   file and the problem.
//!
//! # Not provided
//! - A copy is another file: two signers with two copies of one state
//!   file (`cp`, a restored backup, a second machine) each keep their own
//!   mark, and nothing here can see that. Never start a second signer from
//!   a copy.
//! - The name checks on systems other than Unix (there, only the lock
//!   holds), and a bind mount of the file where `/proc/self/mountinfo`
//!   cannot be read (the signer's first save then fails: Linux refuses to
//!   rename over a mount point, so nothing is signed).
//! - Filesystems where rename is not atomic or `flock` is not shared
//!   between machines (some network mounts).

mod filepv;
mod slots;
mod tmkms;

pub use filepv::{parse, to_json};

use std::io::Write;
use std::path::{Path, PathBuf};

use super::guard::SignState;
use crate::atomic_file::{
    is_temp_name_of, link_count, parent_dir, read_bounded, FileId, PutError, Staged,
};

/// The largest state file [`load`] reads. A FilePV state file is under
/// 1 KiB (its sign bytes are a canonical vote or proposal).
pub const MAX_STATE_FILE_BYTES: usize = 64 * 1024;

/// Why a state file could not be read, written or trusted: this module's
/// one error (the signer wraps it in its own).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateFileError {
    /// The state file could not be opened or read.
    #[error("cannot read state file {}: {source}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The state file is larger than [`MAX_STATE_FILE_BYTES`].
    #[error("state file {} is larger than {max_bytes} bytes; check the path", .path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The limit.
        max_bytes: usize,
    },
    /// The state file's content is not a `priv_validator_state.json`.
    #[error("state file {}: {problem}", .path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: StateFileProblem,
    },
    /// The path is not the state file's one name, or no longer leads to
    /// the file last written ([`StatePathProblem`]).
    #[error("state file {}: {problem}", .path.display())]
    Path {
        /// The path given.
        path: PathBuf,
        /// Which rule it breaks.
        problem: StatePathProblem,
    },
    /// The state file could not be written: a signer releases nothing.
    #[error("cannot write state file {}: {source}", .path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The new mark was written (renamed into place, or written into its
    /// slot), but the disk failed to make it durable (the `fsync` of the
    /// folder, or the write or `fdatasync` of the slot, failed): the file
    /// may hold the new mark or the one before. A signer releases
    /// nothing, keeps the new mark, and saves it again before it releases
    /// anything.
    #[error("state file {}: the disk failed ({source}) before the new mark was durable, so no signature was released; the signer keeps that mark and saves it again at the next request", .path.display())]
    NotDurable {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// What is wrong with the content of a state file.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
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
    /// A slot state file of another size than 8192 bytes.
    #[error("it is a slot state file of {bytes} bytes, not 8192: it was cut or changed by something else")]
    SlotFileSize {
        /// Its size.
        bytes: usize,
    },
    /// Neither slot of a slot state file is whole under its checksum.
    #[error("neither of its two slots is whole (both fail their checksum): the file was damaged")]
    NoValidSlot,
    /// The file is empty (or only white space).
    #[error("it is empty: a state file not yet written, or cut to nothing")]
    Empty,
    /// The JSON ends before its last value does.
    #[error("it ends before its JSON does (line {line}, column {column}): the file was cut short, a half-written copy?")]
    CutShort {
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
    },
    /// The file has marks of both FilePV's and tmkms's formats, or of
    /// neither whole, so which mark it holds is not certain.
    #[error("it is neither FilePV's nor tmkms's state file whole: {why}; its mark cannot be read safely")]
    Ambiguous {
        /// What it mixes.
        why: &'static str,
    },
    /// A tmkms state file's `step` is not one tmkms writes.
    #[error("step is {step}, not 0 (proposal), 1 (prevote) or 2 (precommit) as tmkms writes it")]
    BadTmkmsStep {
        /// The value.
        step: i64,
    },
    /// A signer was given tmkms's state file: it reads it only through an
    /// import, which leaves tmkms's file as tmkms wrote it.
    #[error("it is tmkms's consensus state file: import it into a state file of p2p-conn's first (`p2p-conn state import`), and start the signer on that")]
    TmkmsFile,
}

/// A state file's format.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Format {
    /// CometBFT's `priv_validator_state.json`, as FilePV writes it.
    FilePv,
    /// p2p-conn's slot file (`spec/privval.md` §6).
    Slots,
    /// tmkms's consensus state file (tmkms 0.15: `height`, `round`,
    /// `step` and `block_id`), read only: [`load`] and [`format_of`] read
    /// it, a signer refuses it ([`StateFileProblem::TmkmsFile`]), and
    /// [`write_new`] writes it as FilePV's. Its mark keeps the block ID
    /// ([`SignState::with_block_id`], `tmkms.rs`).
    Tmkms,
}

/// Why a state file's path is not the one name of the state file, or no
/// longer leads to the file the signer last wrote (module docs: one state
/// file, one name).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum StatePathProblem {
    /// The path is a symbolic link: a signer given the target's own path
    /// would take another lock.
    #[error("it is a symbolic link (to {}): give the state file's own path, so that every signer takes the one lock beside it", .target.display())]
    Symlink {
        /// Where it leads (resolved where possible).
        target: PathBuf,
    },
    /// The file has more than one name (hard links): a signer given
    /// another name would take another lock.
    #[error("the file has {names} names (hard links), and a signer under another name would take another lock: remove the other names (find them with `find / -xdev -samefile FILE`)")]
    HardLinks {
        /// Its link count.
        names: u64,
    },
    /// The path is a mount point (a bind mount of the file): a signer given
    /// the mount's source would take another lock.
    #[error("it is a mount point (a bind mount of the file): give its path in the filesystem it lives in")]
    MountPoint,
    /// Not a regular file (a folder, a device...).
    #[error("it is not a regular file")]
    NotAFile,
    /// The file was moved or removed while the signer ran: it signs
    /// nothing more (another signer may have taken the file elsewhere).
    #[error("it is no longer there: it was moved or removed while this signer ran, and this signer signs nothing more; restart it on the state file's path")]
    Gone,
    /// Another writer replaced the file while the signer ran (a restored
    /// backup, a signer that takes no lock): the signer's mark may be
    /// wrong either way, so it signs nothing more.
    #[error("it was replaced by another writer while this signer ran (a restored backup, a signer that takes no lock), and this signer signs nothing more; restart it to load what is there now")]
    Replaced,
}

/// Read and parse a state file.
pub fn load(path: impl AsRef<Path>) -> Result<SignState, StateFileError> {
    read_decoded(path.as_ref()).map(|d| d.state)
}

/// The bytes of the state file at `path`, at most [`MAX_STATE_FILE_BYTES`].
fn read_file(path: &Path) -> Result<Vec<u8>, StateFileError> {
    let mut bytes = Vec::new();
    let whole = read_bounded(path, MAX_STATE_FILE_BYTES, &mut bytes).map_err(|source| {
        StateFileError::Read {
            path: path.to_path_buf(),
            source,
        }
    })?;
    if !whole {
        return Err(StateFileError::TooLarge {
            path: path.to_path_buf(),
            max_bytes: MAX_STATE_FILE_BYTES,
        });
    }
    Ok(bytes)
}

/// [`read_file`] and [`decode`].
fn read_decoded(path: &Path) -> Result<Decoded, StateFileError> {
    decode(&read_file(path)?).map_err(|problem| StateFileError::Invalid {
        path: path.to_path_buf(),
        problem,
    })
}

/// What a state file holds: the mark, the format, and for a slot file the
/// save number that wrote it.
struct Decoded {
    state: SignState,
    format: Format,
    seq: Option<u64>,
}

/// A state file's content, its format told by the content: a slot file by
/// its first bytes, tmkms's JSON by its `block_id` (`tmkms::detect`),
/// FilePV's otherwise.
fn decode(bytes: &[u8]) -> Result<Decoded, StateFileProblem> {
    if slots::is_slot_file(bytes) {
        let (seq, state) = slots::decode(bytes)?;
        return Ok(Decoded {
            state,
            format: Format::Slots,
            seq: Some(seq),
        });
    }
    let text = std::str::from_utf8(bytes).map_err(|_| StateFileProblem::NotUtf8)?;
    if text.trim().is_empty() {
        return Err(StateFileProblem::Empty);
    }
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| {
        let (line, column) = (e.line(), e.column());
        if e.is_eof() {
            StateFileProblem::CutShort { line, column }
        } else {
            StateFileProblem::NotJson { line, column }
        }
    })?;
    let obj = value.as_object().ok_or(StateFileProblem::NotObject)?;
    let (state, format) = if tmkms::detect(obj)? {
        (tmkms::mark(obj)?, Format::Tmkms)
    } else {
        (filepv::mark(obj)?, Format::FilePv)
    };
    Ok(Decoded {
        state,
        format,
        seq: None,
    })
}

/// The format of the state file at `path`, once its whole content has
/// been read as that format (so a damaged file is an error here too).
pub fn format_of(path: impl AsRef<Path>) -> Result<Format, StateFileError> {
    read_decoded(path.as_ref()).map(|d| d.format)
}

/// Write `state` as a new state file of `format` at `path`, durably (the
/// file synced, linked into place, its folder synced), never replacing
/// anything there (`io::ErrorKind::AlreadyExists` inside
/// [`StateFileError::Write`]). With [`load`], this moves a mark between
/// the formats. FilePV's format has no place for a block ID
/// ([`SignState::block_id`]): it is left out, so FilePV (or a signer on
/// that file) refuses the mark's own height, round and step, and signs
/// above it.
pub fn write_new(
    path: impl AsRef<Path>,
    state: &SignState,
    format: Format,
) -> Result<(), StateFileError> {
    let path = path.as_ref();
    let bytes = match format {
        Format::FilePv | Format::Tmkms => to_json(state).into_bytes(),
        Format::Slots => slots::new_file(state).ok_or_else(|| StateFileError::Write {
            path: path.to_path_buf(),
            source: slots::too_large(),
        })?,
    };
    Staged::new(path, &bytes, |f, d| f.write_all(d))
        .map_err(write_err(path))?
        .link_new(path)
        .map_err(write_err(path))?;
    Ok(())
}

/// What a signer keeps of its state file between saves.
#[derive(Debug)]
pub(crate) enum Store {
    /// FilePV's format: each save is a new file renamed over it.
    FilePv,
    /// A slot file, held open.
    Slots(slots::SlotFile),
}

/// [`load`] for a signer: the mark and how to save the next one.
pub(crate) fn open_store(path: &Path) -> Result<(SignState, Store), StateFileError> {
    let Decoded { state, format, seq } = read_decoded(path)?;
    if format == Format::Tmkms {
        return Err(StateFileError::Invalid {
            path: path.to_path_buf(),
            problem: StateFileProblem::TmkmsFile,
        });
    }
    let store = match seq {
        None => Store::FilePv,
        Some(seq) => Store::Slots(slots::SlotFile::open(path, seq).map_err(|source| {
            StateFileError::Read {
                path: path.to_path_buf(),
                source,
            }
        })?),
    };
    Ok((state, store))
}

/// A failed save of a signer's mark: the error, and whether the new mark
/// may be on disk.
#[derive(Debug)]
pub(crate) struct SaveFailure {
    pub(crate) error: StateFileError,
    /// `Some` when the new mark may be on disk (the rename took place, or
    /// the slot was written): the state file's identity now.
    pub(crate) written: Option<FileId>,
}

impl From<StateFileError> for SaveFailure {
    fn from(error: StateFileError) -> Self {
        SaveFailure {
            error,
            written: None,
        }
    }
}

/// Save `state` to the state file `store` holds, if `path` is still the
/// file that `expected` identifies with one name: a new FilePV file renamed
/// into place, or the next slot and `fdatasync`. The file's identity after.
pub(crate) fn save_store(
    path: &Path,
    store: &mut Store,
    state: &SignState,
    expected: FileId,
) -> Result<FileId, SaveFailure> {
    match store {
        Store::FilePv => save_over(path, state, expected),
        Store::Slots(file) => {
            still_the_file(path, expected)?;
            let open = file.metadata().map_err(write_err(path))?;
            if FileId::of(&open) != expected {
                return Err(path_err(path, StatePathProblem::Replaced).into());
            }
            file.save(state).map_err(|e| match e {
                slots::SlotSaveError::NotWritten(source) => write_err(path)(source).into(),
                slots::SlotSaveError::MaybeWritten(source) => SaveFailure {
                    error: not_durable(path, source),
                    written: Some(expected),
                },
            })?;
            Ok(expected)
        }
    }
}

/// Replace the state file at `path` with `state`, atomically and durably
/// (module docs). `Ok` only once the new file and its directory entry are
/// synced. Checks nothing about the file it replaces: a signer uses
/// [`super::GuardedSigner`], which does.
pub fn save(path: impl AsRef<Path>, state: &SignState) -> Result<(), StateFileError> {
    let path = path.as_ref();
    stage(path, state)?
        .rename_over(path)
        .map_err(|e| put_err(path, e).error)?;
    Ok(())
}

/// Write the initial state (nothing signed) as a new state file, never
/// replacing anything at `path` (an existing name fails with
/// `io::ErrorKind::AlreadyExists` inside [`StateFileError::Write`]).
pub fn create_new(path: impl AsRef<Path>) -> Result<(), StateFileError> {
    let path = path.as_ref();
    stage(path, &SignState::default())?
        .link_new(path)
        .map_err(write_err(path))?;
    Ok(())
}

/// [`save`], but only over the file that `expected` identifies, still with
/// one name (module docs), checked once the new state is written and
/// synced and just before it is renamed into place. The new file's
/// identity.
pub(crate) fn save_over(
    path: &Path,
    state: &SignState,
    expected: FileId,
) -> Result<FileId, SaveFailure> {
    let staged = stage(path, state)?;
    still_the_file(path, expected)?;
    staged.rename_over(path).map_err(|e| put_err(path, e))
}

/// A failed [`Staged::rename_over`] as a [`SaveFailure`]: after the rename,
/// the new file may be the one on disk.
fn put_err(path: &Path, e: PutError) -> SaveFailure {
    match e {
        PutError::NotPut(source) => write_err(path)(source).into(),
        PutError::NotSynced { id, source } => SaveFailure {
            error: not_durable(path, source),
            written: Some(id),
        },
    }
}

fn not_durable(path: &Path, source: std::io::Error) -> StateFileError {
    StateFileError::NotDurable {
        path: path.to_path_buf(),
        source,
    }
}

/// Check that `path` is still the one name of the file `expected`
/// identifies.
fn still_the_file(path: &Path, expected: FileId) -> Result<(), StateFileError> {
    let problem = match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(StatePathProblem::Gone),
        Err(source) => {
            return Err(StateFileError::Read {
                path: path.to_path_buf(),
                source,
            })
        }
        Ok(meta) if meta.file_type().is_symlink() => Some(symlink_problem(path)),
        Ok(meta) if FileId::of(&meta) != expected => Some(StatePathProblem::Replaced),
        Ok(meta) => match link_count(&meta) {
            1 => None,
            names => Some(StatePathProblem::HardLinks { names }),
        },
    };
    match problem {
        Some(problem) => Err(path_err(path, problem)),
        None => Ok(()),
    }
}

/// Check that `path` is the one name of a regular file that is not a
/// mount point (module docs): its identity.
pub(crate) fn inspect(path: &Path) -> Result<FileId, StateFileError> {
    let meta = std::fs::symlink_metadata(path).map_err(|source| StateFileError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    if meta.file_type().is_symlink() {
        return Err(path_err(path, symlink_problem(path)));
    }
    if !meta.is_file() {
        return Err(path_err(path, StatePathProblem::NotAFile));
    }
    let names = link_count(&meta);
    if names > 1 {
        return Err(path_err(path, StatePathProblem::HardLinks { names }));
    }
    if is_mount_point(path) {
        return Err(path_err(path, StatePathProblem::MountPoint));
    }
    Ok(FileId::of(&meta))
}

/// Remove the temporary files [`save`] leaves beside `path` when it is
/// killed mid-write (`.NAME.<16 hex>.tmp`); only for the holder of the
/// state file's lock, so that no save is under way. Best effort: how many
/// were removed.
pub(crate) fn remove_stale_temps(path: &Path) -> usize {
    let (Some(name), Ok(entries)) = (path.file_name(), std::fs::read_dir(parent_dir(path))) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| is_temp_name_of(&e.file_name(), name))
        .filter(|e| std::fs::remove_file(e.path()).is_ok())
        .count()
}

fn stage(path: &Path, state: &SignState) -> Result<Staged, StateFileError> {
    Staged::new(path, to_json(state).as_bytes(), |f, d| f.write_all(d)).map_err(write_err(path))
}

fn write_err(path: &Path) -> impl Fn(std::io::Error) -> StateFileError + '_ {
    move |source| StateFileError::Write {
        path: path.to_path_buf(),
        source,
    }
}

fn path_err(path: &Path, problem: StatePathProblem) -> StateFileError {
    StateFileError::Path {
        path: path.to_path_buf(),
        problem,
    }
}

fn symlink_problem(path: &Path) -> StatePathProblem {
    let target = std::fs::canonicalize(path)
        .or_else(|_| std::fs::read_link(path))
        .unwrap_or_default();
    StatePathProblem::Symlink { target }
}

/// Whether `path` is a mount point in this process's mount table (Linux;
/// elsewhere, and when the table cannot be read, false).
fn is_mount_point(path: &Path) -> bool {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::ffi::OsStrExt;
        let (Ok(real), Ok(table)) = (
            std::fs::canonicalize(path),
            std::fs::read_to_string("/proc/self/mountinfo"),
        ) else {
            return false;
        };
        let real = real.as_os_str().as_bytes();
        table
            .lines()
            .filter_map(|line| line.split(' ').nth(4))
            .any(|point| unescape_mount_point(point) == real)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = path;
        false
    }
}

/// A mount point as `/proc/self/mountinfo` writes it, with its `\NNN`
/// octal escapes (space, tab, newline, backslash) undone.
#[cfg(target_os = "linux")]
fn unescape_mount_point(field: &str) -> Vec<u8> {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                out.push(
                    d.iter()
                        .fold(0u8, |n, c| n.wrapping_mul(8).wrapping_add(c - b'0')),
                );
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::guard::{Hrs, Step};

    /// A new folder of its own for a test (also the signer's disk-fault
    /// tests').
    pub(crate) fn temp_dir(tag: &str) -> PathBuf {
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
        let err = Staged::new(&path, to_json(&new).as_bytes(), |f, d| {
            f.write_all(&d[..d.len() / 2])?;
            Err(std::io::Error::other("disk full"))
        })
        .err()
        .unwrap();
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
            Err(StateFileError::Write { source, .. }) => {
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

    /// mountinfo's escapes, and only well-formed ones.
    #[cfg(target_os = "linux")]
    #[test]
    fn mount_points_are_unescaped() {
        assert_eq!(unescape_mount_point(r"/a\040b\011c"), b"/a b\tc");
        assert_eq!(unescape_mount_point(r"/x\134y"), b"/x\\y");
        assert_eq!(unescape_mount_point(r"/end\04"), b"/end\\04");
        assert_eq!(unescape_mount_point(r"/no\999"), b"/no\\999");
    }
}
