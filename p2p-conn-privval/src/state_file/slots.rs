//! The slot state file: p2p-conn's own format for the high-water mark,
//! saved with one `fdatasync` of a file that never changes size.
//!
//! # Format
//! 8192 bytes: two 4096-byte slots. Each slot, little-endian:
//! ```text
//! 0      8   magic "P2PCPVS1"
//! 8      8   seq (u64): which save wrote it; the valid slot with the
//!            higher seq holds the mark
//! 16     8   height (i64)
//! 24     4   round (i32)
//! 28     1   step (0 none, 1 propose, 2 prevote, 3 precommit)
//! 29     2   signature length n (u16), then n bytes
//! ..     2   sign bytes length m (u16), then m bytes
//! ..         zeros
//! 4064  32   SHA-256 of bytes 0..4064
//! ```
//! Save number `s` goes to slot `s % 2`, so a save never touches the slot
//! that holds the current mark.
//!
//! # Why one sync is enough (see spec/privval.md §6, "Slot state file")
//! - The file is written whole (8192 bytes, both slots valid) and synced
//!   at creation, then linked into place and its folder synced: its size
//!   and blocks never change after, so a save is an overwrite of allocated
//!   blocks and `fdatasync` flushes only those data (no size, no block
//!   map to commit).
//! - A save writes the other slot, then `fdatasync`; the signature leaves
//!   only after that returned. A crash or power cut before it returned can
//!   leave that slot torn: its checksum fails, and the older slot, which
//!   was not written, holds the mark of the last signature that could have
//!   left. After it returned, the new slot is on stable storage.
//! - A process killed at any moment (`kill -9`) leaves what it wrote in
//!   the page cache, which the next process reads: a completed write is
//!   seen, a partial one fails its checksum.
//! - A slot is valid only whole and under its own checksum, which covers
//!   its seq: no mix of two saves, and no old slot read as new.
//!
//! # Not provided
//! - Protection against a disk that acknowledges a flush it has not made
//!   (a write cache without power-loss protection, with barriers off).
//! - Sign bytes over 3900 bytes (canonical votes and proposals are under
//!   300): such a save fails, and nothing is signed.

use std::path::Path;

use sha2::{Digest, Sha256};

use super::StateFileProblem;
use crate::guard::{Hrs, SignState, Step};

/// The first bytes of every slot.
pub(crate) const MAGIC: &[u8; 8] = b"P2PCPVS1";
/// One slot.
pub(crate) const SLOT_BYTES: usize = 4096;
/// The whole file: two slots.
pub(crate) const FILE_BYTES: usize = 2 * SLOT_BYTES;
const SUM_AT: usize = SLOT_BYTES - 32;
/// Where the signature's length is (the sign bytes' follows the signature).
const PARTS_AT: usize = 29;

/// One slot's bytes for save number `seq` of `state`; `None` when the
/// state does not fit (sign bytes and signature together over 3900 bytes
/// or more).
pub(crate) fn encode(seq: u64, state: &SignState) -> Option<Box<[u8; SLOT_BYTES]>> {
    let (sig, sb) = (state.signature(), state.sign_bytes());
    if sig.len() + sb.len() > 3900 {
        return None;
    }
    let hrs = state.hrs();
    let mut slot = Box::new([0u8; SLOT_BYTES]);
    slot[..8].copy_from_slice(MAGIC);
    slot[8..16].copy_from_slice(&seq.to_le_bytes());
    slot[16..24].copy_from_slice(&hrs.height.to_le_bytes());
    slot[24..28].copy_from_slice(&hrs.round.to_le_bytes());
    slot[28] = hrs.step.as_i8() as u8;
    let mut at = PARTS_AT;
    for part in [sig, sb] {
        slot[at..at + 2].copy_from_slice(&(part.len() as u16).to_le_bytes());
        slot[at + 2..at + 2 + part.len()].copy_from_slice(part);
        at += 2 + part.len();
    }
    let sum = Sha256::digest(&slot[..SUM_AT]);
    slot[SUM_AT..].copy_from_slice(&sum);
    Some(slot)
}

/// One slot's save number and state, if it is whole.
fn decode_slot(slot: &[u8]) -> Option<(u64, SignState)> {
    if slot.len() != SLOT_BYTES || &slot[..8] != MAGIC {
        return None;
    }
    if Sha256::digest(&slot[..SUM_AT])[..] != slot[SUM_AT..] {
        return None;
    }
    let seq = u64::from_le_bytes(slot[8..16].try_into().ok()?);
    let height = i64::from_le_bytes(slot[16..24].try_into().ok()?);
    let round = i32::from_le_bytes(slot[24..28].try_into().ok()?);
    let step = Step::from_i8(slot[28] as i8)?;
    let mut at = PARTS_AT;
    let mut parts = [Vec::new(), Vec::new()];
    for part in &mut parts {
        let n = usize::from(u16::from_le_bytes(slot.get(at..at + 2)?.try_into().ok()?));
        *part = slot
            .get(at + 2..at + 2 + n)
            .filter(|_| at + 2 + n <= SUM_AT)?
            .to_vec();
        at += 2 + n;
    }
    let [signature, sign_bytes] = parts;
    if signature.is_empty() && !sign_bytes.is_empty() {
        return None;
    }
    Some((
        seq,
        SignState::new(Hrs::new(height, round, step), sign_bytes, signature),
    ))
}

/// The mark a slot file holds and the save number it was written by: the
/// valid slot with the higher number.
pub(crate) fn decode(file: &[u8]) -> Result<(u64, SignState), StateFileProblem> {
    if file.len() != FILE_BYTES {
        return Err(StateFileProblem::SlotFileSize { bytes: file.len() });
    }
    let a = decode_slot(&file[..SLOT_BYTES]);
    let b = decode_slot(&file[SLOT_BYTES..]);
    match (a, b) {
        (None, None) => Err(StateFileProblem::NoValidSlot),
        (Some((sa, _)), Some((sb, _))) if sa == sb => Err(StateFileProblem::NoValidSlot),
        (Some(x), None) | (None, Some(x)) => Ok(x),
        (Some(x), Some(y)) => Ok(if x.0 > y.0 { x } else { y }),
    }
}

/// The error of a state that does not fit a slot.
pub(crate) fn too_large() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        "sign bytes and signature over 3900 bytes do not fit a slot",
    )
}

/// Whether `bytes` (a file's start) is a slot file.
pub(crate) fn is_slot_file(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}

/// The whole file for a new slot state file holding `state`: both slots
/// written (save numbers 0 and 1), so every block is allocated.
pub(crate) fn new_file(state: &SignState) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(FILE_BYTES);
    out.extend_from_slice(&encode(0, state)?[..]);
    out.extend_from_slice(&encode(1, state)?[..]);
    Some(out)
}

/// An open slot state file: saves go to the slot the next save number
/// names, each followed by `fdatasync`.
#[derive(Debug)]
pub(crate) struct SlotFile {
    file: std::fs::File,
    seq: u64,
}

impl SlotFile {
    /// Open `path` (already loaded: `seq` is the save number it holds).
    pub(crate) fn open(path: &Path, seq: u64) -> std::io::Result<SlotFile> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)?;
        let len = file.metadata()?.len();
        if len != FILE_BYTES as u64 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("a slot state file of {len} bytes, not {FILE_BYTES}"),
            ));
        }
        Ok(SlotFile { file, seq })
    }

    /// The file's identity, from the open file itself.
    pub(crate) fn metadata(&self) -> std::io::Result<std::fs::Metadata> {
        self.file.metadata()
    }

    /// Write `state` into the other slot and sync it: `Ok` only once it is
    /// on stable storage. After a failed write or sync the slot may hold
    /// the new state ([`SlotSaveError::MaybeWritten`]); the next save
    /// writes the same slot again, so the slot of the last durable save is
    /// never touched until a save succeeds.
    pub(crate) fn save(&mut self, state: &SignState) -> Result<(), SlotSaveError> {
        let seq = self.seq + 1;
        let slot = encode(seq, state).ok_or_else(|| SlotSaveError::NotWritten(too_large()))?;
        let at = (seq % 2) * SLOT_BYTES as u64;
        let written = || -> std::io::Result<()> {
            write_all_at(&self.file, &slot[..], at)?;
            #[cfg(test)]
            crate::atomic_file::faults::DATA_SYNC.take_one()?;
            self.file.sync_data()
        };
        written().map_err(SlotSaveError::MaybeWritten)?;
        self.seq = seq;
        Ok(())
    }
}

/// How [`SlotFile::save`] failed.
#[derive(Debug)]
pub(crate) enum SlotSaveError {
    /// Nothing was written (the state does not fit in a slot).
    NotWritten(std::io::Error),
    /// The write or its sync failed: the slot may hold the new state.
    MaybeWritten(std::io::Error),
}

#[cfg(unix)]
fn write_all_at(file: &std::fs::File, buf: &[u8], at: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, buf, at)
}

#[cfg(not(unix))]
fn write_all_at(mut file: &std::fs::File, buf: &[u8], at: u64) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    file.seek(SeekFrom::Start(at))?;
    file.write_all(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(h: i64) -> SignState {
        SignState::new(Hrs::new(h, 1, Step::Prevote), vec![7; 150], vec![9; 64])
    }

    #[test]
    fn the_higher_whole_slot_wins() {
        let mut file = new_file(&state(1)).unwrap();
        assert_eq!(decode(&file).unwrap(), (1, state(1)));
        file[..SLOT_BYTES].copy_from_slice(&encode(2, &state(2)).unwrap()[..]);
        assert_eq!(decode(&file).unwrap(), (2, state(2)));
        // Slot 1 half written: its checksum fails, slot 0 holds the mark.
        let next = encode(3, &state(3)).unwrap();
        file[SLOT_BYTES..SLOT_BYTES + 100].copy_from_slice(&next[..100]);
        assert_eq!(decode(&file).unwrap(), (2, state(2)));
        // Any single flipped bit of the newer slot falls back to the older.
        file[SLOT_BYTES..].copy_from_slice(&next[..]);
        for at in (0..SLOT_BYTES).step_by(97) {
            let mut torn = file.clone();
            torn[SLOT_BYTES + at] ^= 0x10;
            assert_eq!(decode(&torn).unwrap(), (2, state(2)), "byte {at}");
        }
        assert_eq!(decode(&file).unwrap(), (3, state(3)));
    }

    #[test]
    fn no_whole_slot_or_a_wrong_size_is_refused() {
        let file = new_file(&state(1)).unwrap();
        assert!(matches!(
            decode(&file[..FILE_BYTES - 1]),
            Err(StateFileProblem::SlotFileSize { .. })
        ));
        let mut bad = file.clone();
        bad[5] ^= 1;
        bad[SLOT_BYTES + 5] ^= 1;
        assert!(matches!(decode(&bad), Err(StateFileProblem::NoValidSlot)));
    }

    #[test]
    fn a_state_too_large_for_a_slot_is_refused() {
        let big = SignState::new(Hrs::new(1, 0, Step::Propose), vec![1; 3900], vec![2; 64]);
        assert!(encode(1, &big).is_none());
    }
}
