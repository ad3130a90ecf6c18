//! The high-water mark a signer keeps: its state file, locked, loaded,
//! and saved before anything signed leaves. One place for the rules of
//! [`GuardedSigner`](super::GuardedSigner) and of a threshold cosigner
//! (`threshold::Cosigner`), which guard what they sign alike.
//!
//! # Design
//! [`Mark::open`] checks the path is the state file's one name, takes the
//! lock beside it (held while the mark lives), removes what a killed save
//! left, and loads the mark. [`Mark::save`] writes the next mark through
//! the state file's store; [`Mark::make_durable`] saves again a mark the
//! disk may not hold before an earlier signature is served again.
//!
//! # Guarantees
//! - The mark in memory is never lower than what the disk may hold: a
//!   save that failed after the new mark reached the file keeps the new
//!   mark, and refuses to release anything until a save succeeds.

use std::path::{Path, PathBuf};

use super::{lock_state, SignerError};
use crate::atomic_file::FileId;
use crate::guard::SignState;
use crate::state_file::{self, StateFileError, StatePathProblem};

/// A signer's mark and its state file (module docs).
pub(crate) struct Mark {
    state: SignState,
    path: PathBuf,
    /// The state file as this mark last read or wrote it: a save over
    /// anything else is refused.
    id: FileId,
    /// How the next mark is saved (the state file's format).
    store: state_file::Store,
    /// A save of `state` failed after its rename or slot write: the disk
    /// may hold it or the mark before, so nothing is released until a
    /// save succeeds ([`Mark::make_durable`]).
    unsynced: bool,
    /// Holds the exclusive lock on `<state file>.lock` while the mark
    /// lives.
    _lock: std::fs::File,
}

impl Mark {
    /// The mark in the state file at `path` (`GuardedSigner::open`'s
    /// docs: the name checks, the lock, the stale temporary files).
    pub(crate) fn open(path: &Path) -> Result<Mark, SignerError> {
        let path = path.to_path_buf();
        let id = state_file::inspect(&path)?;
        let lock = lock_state(&path)?;
        state_file::remove_stale_temps(&path);
        let (state, store) = state_file::open_store(&path)?;
        // Swapped between the check and the read: refuse rather than guess
        // which file the state came from.
        if state_file::inspect(&path)? != id {
            return Err(StateFileError::Path {
                path,
                problem: StatePathProblem::Replaced,
            }
            .into());
        }
        Ok(Mark {
            state,
            path,
            id,
            store,
            unsynced: false,
            _lock: lock,
        })
    }

    /// The mark: as last saved, or, after a save the disk failed to make
    /// durable, the mark that save wrote.
    pub(crate) fn state(&self) -> &SignState {
        &self.state
    }

    /// Save `next` as the mark. When the save fails after the new mark
    /// reached the file (the rename took place, or the slot was written),
    /// the disk may hold it: it becomes the mark in memory too (never
    /// lower than what the disk may hold), with the file's new identity,
    /// and nothing is released until a later save succeeds.
    pub(crate) fn save(&mut self, next: SignState) -> Result<(), SignerError> {
        match state_file::save_store(&self.path, &mut self.store, &next, self.id) {
            Ok(id) => {
                self.id = id;
                self.state = next;
                self.unsynced = false;
                Ok(())
            }
            Err(failure) => {
                if let Some(id) = failure.written {
                    self.id = id;
                    self.state = next;
                    self.unsynced = true;
                }
                Err(failure.error.into())
            }
        }
    }

    /// Before a signature made earlier is served again (or the same sign
    /// bytes signed again): if the disk failed to make the mark durable,
    /// save it again now (the file then holds it for certain once this
    /// returns `Ok`).
    pub(crate) fn make_durable(&mut self) -> Result<(), SignerError> {
        if self.unsynced {
            self.save(self.state.clone())?;
        }
        Ok(())
    }
}

impl std::fmt::Debug for Mark {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mark")
            .field("state", &self.state)
            .field("path", &self.path)
            .field("unsynced", &self.unsynced)
            .finish_non_exhaustive()
    }
}
