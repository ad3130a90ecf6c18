//! The rule for a file only its owner may touch (a validator key, a
//! signer's state file, a PIN file) and for the folder such a file is
//! replaced in, checked at start by the commands that read them.
//!
//! - **The file:** no permission bit for the group or for others (mode
//!   `0600` or stricter). Reading a key is signing as the validator; writing
//!   a state file can lower its high-water mark, and so let the signer sign
//!   twice. A state file's content is not secret, but one rule for both is
//!   simpler to hold than two: `chmod 600 FILE` fixes either. Group bits
//!   count too: a group is a set of other accounts, and a shared group
//!   (`users`, a deploy group) is how such files leak.
//! - **The folder** of a file that is replaced by rename (the state file):
//!   no write bit for the group or for others, sticky or not. Whoever may
//!   write the folder may put another file in the state file's place.
//!   `chmod go-w FOLDER` fixes it.
//! - **A file that names the others** (the signer's config): no write bit
//!   for the group or for others; it may be readable (it holds paths, no
//!   secret). `chmod go-w FILE` fixes it.
//!
//! The owner is not checked: a file this user may read that another user
//! owns passes only if its mode gives the group or others nothing, and
//! then only root could have read it.
//!
//! On systems other than Unix there are no such bits, and nothing is
//! checked.

use std::path::Path;

/// Why a file or folder is refused: the sentence to show, with the
/// `chmod` that fixes it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LoosePermissions(pub String);

impl From<LoosePermissions> for crate::error::CliError {
    /// A refusal at start, as a mistake in the flags is (exit 1).
    fn from(e: LoosePermissions) -> Self {
        crate::error::CliError::Usage(e.0)
    }
}

/// Bits of a file's mode the group and others must not have.
#[cfg(unix)]
const FILE_BITS: u32 = 0o077;
/// Bits of a folder's (or a config file's) mode the group and others
/// must not have.
#[cfg(unix)]
const FOLDER_BITS: u32 = 0o022;

/// `path` (`what` names it, e.g. "validator key") must give the group and
/// others no permission. A file that cannot be read is not refused here:
/// whatever opens it says why.
pub fn check_file(path: &Path, what: &str) -> Result<(), LoosePermissions> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let Ok(meta) = std::fs::metadata(path) else {
            return Ok(());
        };
        let mode = meta.permissions().mode() & 0o7777;
        if mode & FILE_BITS != 0 {
            return Err(LoosePermissions(format!(
                "{what} {} has mode {mode:04o}: the group or others may {}; it must be \
                 readable and writable by its owner only (`chmod 600 {}`)",
                path.display(),
                access(mode, FILE_BITS),
                path.display()
            )));
        }
    }
    #[cfg(not(unix))]
    let _ = (path, what);
    Ok(())
}

/// `path` (`what` names it, e.g. "config file"), a file that names the
/// others (a config: which key, which state file), must give the group
/// and others no write permission: whoever may write it may point the
/// signer at another state file. Reading it is allowed.
pub fn check_unwritable(path: &Path, what: &str) -> Result<(), LoosePermissions> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let Ok(meta) = std::fs::metadata(path) else {
            return Ok(());
        };
        let mode = meta.permissions().mode() & 0o7777;
        if mode & FOLDER_BITS != 0 {
            return Err(LoosePermissions(format!(
                "{what} {} has mode {mode:04o}: the group or others may write it, and so                  point the signer at another key or state file; `chmod go-w {}`",
                path.display(),
                path.display()
            )));
        }
    }
    #[cfg(not(unix))]
    let _ = (path, what);
    Ok(())
}

/// The folder of `path` (a file replaced by rename, which `what` names)
/// must give the group and others no write permission.
pub fn check_folder_of(path: &Path, what: &str) -> Result<(), LoosePermissions> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let folder = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let Ok(meta) = std::fs::metadata(folder) else {
            return Ok(());
        };
        let mode = meta.permissions().mode() & 0o7777;
        if mode & FOLDER_BITS != 0 {
            return Err(LoosePermissions(format!(
                "the folder of {what} {}, {}, has mode {mode:04o}: the group or others may \
                 write there, and so replace the file; `chmod go-w {}`",
                path.display(),
                folder.display(),
                folder.display()
            )));
        }
    }
    #[cfg(not(unix))]
    let _ = (path, what);
    Ok(())
}

/// "read", "write" or "read and write": what `mode`'s `bits` allow.
#[cfg(unix)]
fn access(mode: u32, bits: u32) -> &'static str {
    let read = mode & bits & 0o044 != 0;
    let write = mode & bits & 0o022 != 0;
    match (read, write) {
        (true, true) => "read and write it",
        (true, false) => "read it",
        (false, true) => "write it",
        // Only execute bits.
        (false, false) => "execute it",
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "p2p-conn-private-file-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        dir
    }

    #[test]
    fn a_file_with_any_group_or_other_bit_is_refused() {
        let dir = scratch("file");
        let f = dir.join("key.json");
        std::fs::write(&f, "{}").unwrap();
        for (mode, ok) in [
            (0o600, true),
            (0o400, true),
            (0o700, true),
            (0o640, false),
            (0o604, false),
            (0o620, false),
            (0o602, false),
            (0o610, false),
            (0o644, false),
        ] {
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).unwrap();
            let r = check_file(&f, "validator key");
            assert_eq!(r.is_ok(), ok, "mode {mode:o}: {r:?}");
            if let Err(LoosePermissions(msg)) = r {
                assert!(msg.contains(&format!("chmod 600 {}", f.display())), "{msg}");
                assert!(msg.starts_with("validator key "), "{msg}");
            }
        }
        // Missing: left to whatever opens it.
        assert!(check_file(&dir.join("none"), "validator key").is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_folder_others_may_write_is_refused() {
        let dir = scratch("folder");
        let f = dir.join("state");
        for (mode, ok) in [
            (0o700, true),
            (0o755, true),
            (0o775, false),
            (0o757, false),
            (0o1777, false),
        ] {
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
            let r = check_folder_of(&f, "state file");
            assert_eq!(r.is_ok(), ok, "mode {mode:o}: {r:?}");
            if let Err(LoosePermissions(msg)) = r {
                assert!(
                    msg.contains(&format!("chmod go-w {}", dir.display())),
                    "{msg}"
                );
            }
        }
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_config_others_may_write_is_refused() {
        let dir = scratch("config");
        let f = dir.join("signer.toml");
        std::fs::write(&f, "").unwrap();
        for (mode, ok) in [(0o600, true), (0o644, true), (0o664, false), (0o646, false)] {
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).unwrap();
            let r = check_unwritable(&f, "config file");
            assert_eq!(r.is_ok(), ok, "mode {mode:o}: {r:?}");
            if let Err(LoosePermissions(msg)) = r {
                assert!(
                    msg.contains(&format!("chmod go-w {}", f.display())),
                    "{msg}"
                );
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
