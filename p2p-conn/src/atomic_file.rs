//! What [`crate::keyfile`] needs to read `node_key.json` with a bound and
//! write it so that it appears whole: a new owner-only temporary name beside
//! the file, the directory sync after the link, and a bounded read.
//! Crate-private. `p2p-conn-privval` keeps its own copy of these helpers
//! (with the staged write its state file uses): one durable-write recipe,
//! no public API that only the layer above would call.

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

/// Sync `dir`, so a name just linked into it survives a crash (Unix;
/// elsewhere nothing to do).
pub(crate) fn sync_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    std::fs::File::open(dir)?.sync_all()?;
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// Read all of `path` into `buf`, but never more than `max` bytes and one:
/// `Ok(false)` when the file holds more than `max`.
pub(crate) fn read_bounded(path: &Path, max: usize, buf: &mut Vec<u8>) -> std::io::Result<bool> {
    std::fs::File::open(path)?
        .take(max as u64 + 1)
        .read_to_end(buf)?;
    Ok(buf.len() <= max)
}
