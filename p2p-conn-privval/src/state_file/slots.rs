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
//! ..     1   block ID flag: 0 none, 1 a block ID follows (only in a mark
//!            with no signature and no sign bytes: tmkms's, imported)
//! ..         flag 1: hash length (u8, 0 or 32), hash, parts total (u32),
//!            parts hash length (u8, 0 or 32), parts hash
//! ..         zeros
//! 4064  32   SHA-256 of bytes 0..4064
//! ```
//! Save number `s` goes to slot `s % 2`, so a save never touches the slot
//! that holds the current mark.
//!
//! The block ID flag came later, in the zeros after the sign bytes: every
//! slot written before has flag 0 (no block ID) and reads as it did. A
//! version before it reads a slot with a block ID as the same mark without
//! it, which refuses the mark's own height, round and step (it signs less,
//! never more). A whole slot (its checksum holds) with another flag or a
//! block ID that does not parse makes the file unreadable
//! ([`StateFileProblem::BadField`]): never read as torn, which would fall
//! back to the older slot's lower mark.
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
use crate::messages::{BlockId, PartSetHeader};

/// The first bytes of every slot.
pub(crate) const MAGIC: &[u8; 8] = b"P2PCPVS1";
/// One slot.
pub(crate) const SLOT_BYTES: usize = 4096;
/// The whole file: two slots.
pub(crate) const FILE_BYTES: usize = 2 * SLOT_BYTES;
const SUM_AT: usize = SLOT_BYTES - 32;
/// Where the signature's length is (the sign bytes' follows the signature).
const PARTS_AT: usize = 29;
/// The block ID flag that says a block ID follows (0: none).
const BLOCK_ID: u8 = 1;

/// A block ID hash a slot holds: empty or 32 bytes.
fn hash_len_ok(hash: &[u8]) -> bool {
    hash.is_empty() || hash.len() == 32
}

/// A whole slot's block ID that does not parse (module docs).
const BAD_BLOCK_ID: StateFileProblem = StateFileProblem::BadField {
    field: "a slot's block ID",
    expected:
        "flag 0 (none) or 1 (a block ID of hashes of 0 or 32 bytes, in a mark with no sign bytes)",
};

/// One slot's bytes for save number `seq` of `state`; `None` when the
/// state does not fit (sign bytes and signature together over 3900 bytes).
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
    // A block ID: at most 1 + 1 + 32 + 4 + 1 + 32 bytes, after at most
    // 29 + 4 + 3900: it fits before the checksum.
    if let Some(id) = state.block_id() {
        let psh = &id.part_set_header;
        if !hash_len_ok(&id.hash) || !hash_len_ok(&psh.hash) {
            return None;
        }
        let mut put = |bytes: &[u8]| {
            slot[at..at + bytes.len()].copy_from_slice(bytes);
            at += bytes.len();
        };
        put(&[BLOCK_ID]);
        put(&[id.hash.len() as u8]);
        put(&id.hash);
        put(&psh.total.to_le_bytes());
        put(&[psh.hash.len() as u8]);
        put(&psh.hash);
    }
    let sum = Sha256::digest(&slot[..SUM_AT]);
    slot[SUM_AT..].copy_from_slice(&sum);
    Some(slot)
}

/// One slot's save number and state, if it is whole (`Ok(None)` when it
/// is not: torn, or never written); an error when it is whole but its
/// block ID does not parse.
fn decode_slot(slot: &[u8]) -> Result<Option<(u64, SignState)>, StateFileProblem> {
    if slot.len() != SLOT_BYTES || &slot[..8] != MAGIC {
        return Ok(None);
    }
    if Sha256::digest(&slot[..SUM_AT])[..] != slot[SUM_AT..] {
        return Ok(None);
    }
    let Some((seq, state, at)) = decode_mark(slot) else {
        return Ok(None);
    };
    // `decode_mark` refuses sign bytes without a signature.
    let (hrs, no_sign_bytes) = (state.hrs(), state.signature().is_empty());
    let state = match slot[..SUM_AT].get(at) {
        None | Some(0) => state,
        Some(&BLOCK_ID) if no_sign_bytes => SignState::with_block_id(
            hrs,
            decode_block_id(&slot[at + 1..SUM_AT]).ok_or(BAD_BLOCK_ID)?,
        ),
        Some(_) => return Err(BAD_BLOCK_ID),
    };
    Ok(Some((seq, state)))
}

/// A whole slot's save number, its mark without a block ID, and where the
/// block ID flag is.
fn decode_mark(slot: &[u8]) -> Option<(u64, SignState, usize)> {
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
    let state = SignState::new(Hrs::new(height, round, step), sign_bytes, signature);
    Some((seq, state, at))
}

/// The block ID after its flag (`bytes` ends at the checksum), if it
/// parses.
fn decode_block_id(bytes: &[u8]) -> Option<BlockId> {
    let hash = |bytes: &[u8]| -> Option<(Vec<u8>, usize)> {
        let n = usize::from(*bytes.first()?);
        let h = bytes.get(1..1 + n).filter(|h| hash_len_ok(h))?;
        Some((h.to_vec(), 1 + n))
    };
    let (hash_of_block, at) = hash(bytes)?;
    let total = u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?);
    let (hash_of_parts, _) = hash(bytes.get(at + 4..)?)?;
    Some(BlockId {
        hash: hash_of_block,
        part_set_header: PartSetHeader {
            total,
            hash: hash_of_parts,
        },
    })
}

/// The mark a slot file holds and the save number it was written by: the
/// valid slot with the higher number.
pub(crate) fn decode(file: &[u8]) -> Result<(u64, SignState), StateFileProblem> {
    if file.len() != FILE_BYTES {
        return Err(StateFileProblem::SlotFileSize { bytes: file.len() });
    }
    let a = decode_slot(&file[..SLOT_BYTES])?;
    let b = decode_slot(&file[SLOT_BYTES..])?;
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

    fn block(n: u8) -> BlockId {
        let mut id = BlockId::default();
        if n != 0 {
            id.hash = vec![n; 32];
            id.part_set_header.total = 70_000;
            id.part_set_header.hash = vec![n ^ 0xff; 32];
        }
        id
    }

    /// A block-ID mark (tmkms's, imported) comes back whole, nil included;
    /// a mark without one has flag 0 where slots before the flag had their
    /// zeros.
    #[test]
    fn a_block_id_survives_a_slot() {
        for n in [0, 3] {
            let s = SignState::with_block_id(Hrs::new(9, 2, Step::Precommit), block(n));
            let file = new_file(&s).unwrap();
            assert_eq!(decode(&file).unwrap(), (1, s));
        }
        let slot = encode(4, &state(1)).unwrap();
        let flag = PARTS_AT + 2 + 64 + 2 + 150;
        assert!(slot[flag..SUM_AT].iter().all(|&b| b == 0));
    }

    /// A whole slot whose block ID does not parse makes the file
    /// unreadable: never read as torn, which would fall back to the older
    /// slot's lower mark.
    #[test]
    fn a_whole_slot_with_a_bad_block_id_is_refused() {
        let s = SignState::with_block_id(Hrs::new(9, 2, Step::Precommit), block(3));
        let flag = PARTS_AT + 4;
        let resum = |slot: &mut [u8]| {
            let sum = Sha256::digest(&slot[..SUM_AT]);
            slot[SUM_AT..].copy_from_slice(&sum);
        };
        for (at, value) in [
            (flag, 2),              // an unknown flag
            (flag + 1, 31),         // a hash of 31 bytes
            (flag + 1 + 33 + 4, 1), // a parts hash of 1 byte
        ] {
            let mut file = new_file(&state(1)).unwrap();
            let mut newer = encode(2, &s).unwrap();
            newer[at] = value;
            resum(&mut newer[..]);
            file[..SLOT_BYTES].copy_from_slice(&newer[..]);
            assert_eq!(decode(&file), Err(BAD_BLOCK_ID), "byte {at} = {value}");
        }
        // A block ID beside sign bytes: never written, refused.
        let mut file = new_file(&state(1)).unwrap();
        let mut slot = encode(2, &state(2)).unwrap();
        slot[PARTS_AT + 2 + 64 + 2 + 150] = BLOCK_ID;
        resum(&mut slot[..]);
        file[..SLOT_BYTES].copy_from_slice(&slot[..]);
        assert_eq!(decode(&file), Err(BAD_BLOCK_ID));
    }

    #[test]
    fn a_state_too_large_for_a_slot_is_refused() {
        let big = SignState::new(Hrs::new(1, 0, Step::Propose), vec![1; 3900], vec![2; 64]);
        assert!(encode(1, &big).is_none());
    }
}
