//! The state file's durable write (a signer's high-water mark): read with
//! a bound, written so that it appears whole, and the names it leads to
//! checked. Crate-private; `p2p-conn`'s `keyfile` keeps its own copy of the
//! few helpers it needs (`create_temp`, `parent_dir`, `sync_dir`,
//! `read_bounded`), so neither crate makes them public API.
//!
//! # Design
//! A file is read into memory only up to its limit ([`read_bounded`]). A
//! file is written under a new, owner-only temporary name in its own
//! directory and synced ([`Staged::new`]), then put in place (a hard link
//! that never replaces, [`Staged::link_new`], or a rename that does,
//! [`Staged::rename_over`]), and the directory is synced so the new name
//! survives a crash. [`FileId`] and [`link_count`] tell which file a name
//! leads to and how many names it has.
//!
//! # Guarantees
//! - A [`Staged`] file dropped without being put removes its temporary
//!   name; a crash can leave one, named as [`is_temp_name_of`] says.
//! - `Ok` from [`Staged::rename_over`] or [`Staged::link_new`] means the
//!   file and its directory entry were synced. A rename whose directory
//!   sync failed says so ([`PutError::NotSynced`], with the new file's
//!   identity): the caller must count the new file as possibly on disk.
//!
//! # Not provided
//! - Locking, and any check of what the name led to before: the caller's.

use std::io::Read;
use std::path::{Path, PathBuf};

/// How many temporary names [`create_temp`] tries before giving up.
const TEMP_ATTEMPTS: u32 = 16;

/// Create `.NAME.RANDOM.tmp` in `dir` (RANDOM: 16 lower-case hex digits):
/// new (never an existing file) and owner-only on Unix.
pub(crate) fn create_temp(
    dir: &Path,
    file_name: &std::ffi::OsStr,
) -> std::io::Result<(PathBuf, std::fs::File)> {
    use rand_core::RngCore;
    let mut last = None;
    for _ in 0..TEMP_ATTEMPTS {
        let mut name = std::ffi::OsString::from(".");
        name.push(file_name);
        name.push(format!(".{:016x}.tmp", rand_core::OsRng.next_u64()));
        let temp = dir.join(name);
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        match opts.open(&temp) {
            Ok(f) => return Ok((temp, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no temporary name was free")))
}

/// The directory `path` is in (`.` for a bare file name).
pub(crate) fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Sync `dir`, so a name just linked or renamed into it survives a crash
/// (Unix; elsewhere nothing to do).
pub(crate) fn sync_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(test)]
    faults::DIR_SYNC.take_one()?;
    #[cfg(unix)]
    std::fs::File::open(dir)?.sync_all()?;
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// A file written under a temporary name in its directory and synced,
/// waiting to be put in place. Dropped without being put, it removes the
/// temporary name (best effort).
pub(crate) struct Staged {
    temp: PathBuf,
    dir: PathBuf,
    id: FileId,
    put: bool,
}

impl Staged {
    /// Write `data` with `write` into a new temporary file beside `path`
    /// (`.NAME.<16 hex>.tmp`, created new, owner-only on Unix) and sync it.
    pub(crate) fn new(
        path: &Path,
        data: &[u8],
        write: impl FnOnce(&mut std::fs::File, &[u8]) -> std::io::Result<()>,
    ) -> std::io::Result<Staged> {
        let name = path.file_name().ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "the path names no file")
        })?;
        let dir = parent_dir(path).to_path_buf();
        let (temp, mut file) = create_temp(&dir, name)?;
        let mut staged = Staged {
            temp,
            dir,
            id: FileId::default(),
            put: false,
        };
        write(&mut file, data)?;
        file.sync_all()?;
        staged.id = FileId::of(&file.metadata()?);
        Ok(staged)
    }

    /// Rename it over `path`, then sync the directory: the file's identity
    /// at `path`. A failed sync after the rename is
    /// [`PutError::NotSynced`]: the new file is at `path`, but after a
    /// crash `path` may lead to it or to the file it replaced.
    pub(crate) fn rename_over(mut self, path: &Path) -> Result<FileId, PutError> {
        std::fs::rename(&self.temp, path).map_err(PutError::NotPut)?;
        self.put = true;
        sync_dir(&self.dir).map_err(|source| PutError::NotSynced {
            id: self.id,
            source,
        })?;
        Ok(self.id)
    }

    /// Link it at `path`, which must not exist (never replacing anything),
    /// remove the temporary name, and sync the directory.
    pub(crate) fn link_new(mut self, path: &Path) -> std::io::Result<FileId> {
        std::fs::hard_link(&self.temp, path)?;
        self.put = true;
        std::fs::remove_file(&self.temp)?;
        sync_dir(&self.dir)?;
        Ok(self.id)
    }
}

/// How [`Staged::rename_over`] failed.
#[derive(Debug)]
pub(crate) enum PutError {
    /// The rename failed: nothing changed at the path.
    NotPut(std::io::Error),
    /// The rename took place (the path leads to the new file, `id`), but
    /// the directory could not be synced.
    NotSynced { id: FileId, source: std::io::Error },
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.put {
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}

/// Which file a name leads to: its device and inode on Unix, so that a
/// file replaced under its name, or reached under another, can be told
/// apart. Elsewhere every file is alike (and nothing is checked).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct FileId {
    #[cfg(unix)]
    dev: u64,
    #[cfg(unix)]
    ino: u64,
}

impl FileId {
    /// The file `meta` describes (from `std::fs::metadata`, or
    /// `symlink_metadata` for the name itself).
    pub(crate) fn of(meta: &std::fs::Metadata) -> FileId {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            FileId {
                dev: meta.dev(),
                ino: meta.ino(),
            }
        }
        #[cfg(not(unix))]
        {
            let _ = meta;
            FileId {}
        }
    }
}

/// How many names (hard links) the file of `meta` has: 1 where that
/// cannot be known.
pub(crate) fn link_count(meta: &std::fs::Metadata) -> u64 {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        meta.nlink()
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        1
    }
}

/// The temporary names [`Staged::new`] makes for `file_name`:
/// `.NAME.<16 hex digits>.tmp`.
pub(crate) fn is_temp_name_of(candidate: &std::ffi::OsStr, file_name: &std::ffi::OsStr) -> bool {
    let (Some(candidate), Some(name)) = (candidate.to_str(), file_name.to_str()) else {
        return false;
    };
    candidate
        .strip_prefix('.')
        .and_then(|rest| rest.strip_prefix(name))
        .and_then(|rest| rest.strip_prefix('.'))
        .and_then(|rest| rest.strip_suffix(".tmp"))
        .is_some_and(|hex| {
            hex.len() == 16
                && hex
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        })
}

/// Read all of `path` into `buf`, but never more than `max` bytes and one:
/// `Ok(false)` when the file holds more than `max`.
pub(crate) fn read_bounded(path: &Path, max: usize, buf: &mut Vec<u8>) -> std::io::Result<bool> {
    std::fs::File::open(path)?
        .take(max as u64 + 1)
        .read_to_end(buf)?;
    Ok(buf.len() <= max)
}

/// Disk faults injected by this crate's unit tests: each hook fails its
/// next `n` calls on this thread with `EIO`.
#[cfg(test)]
pub(crate) mod faults {
    use std::cell::Cell;

    /// One kind of call that can be made to fail.
    pub(crate) struct Hook(std::thread::LocalKey<Cell<u32>>);

    thread_local! {
        static DIR_SYNC_LEFT: Cell<u32> = const { Cell::new(0) };
        static DATA_SYNC_LEFT: Cell<u32> = const { Cell::new(0) };
    }

    /// The directory `fsync` after a rename or link ([`super::sync_dir`]).
    pub(crate) static DIR_SYNC: Hook = Hook(DIR_SYNC_LEFT);
    /// The slot file's `fdatasync`.
    pub(crate) static DATA_SYNC: Hook = Hook(DATA_SYNC_LEFT);

    impl Hook {
        /// Fail the next `n` calls on this thread.
        pub(crate) fn fail_next(&'static self, n: u32) {
            self.0.with(|c| c.set(n));
        }

        /// `Err(EIO)` if a failure is due, counting it.
        pub(crate) fn take_one(&'static self) -> std::io::Result<()> {
            self.0.with(|c| match c.get() {
                0 => Ok(()),
                n => {
                    c.set(n - 1);
                    // EIO on Linux and the BSDs.
                    Err(std::io::Error::from_raw_os_error(5))
                }
            })
        }
    }
}
