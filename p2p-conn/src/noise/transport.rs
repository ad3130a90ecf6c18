//! Transport frames, sans-IO: `len (2 bytes, big-endian) ‖ ciphertext ‖
//! tag`, at most 65535 bytes after the length, sealed in place with this
//! crate's ChaCha20-Poly1305 backends and Noise's counter nonce.

use std::ops::Range;

use super::crypto::nonce;
use super::{NoiseError, MAX_FRAME, MAX_FRAME_PLAINTEXT};
use crate::proto::aead::{self, Backend};
use crate::proto::wire::TAG_LEN;

/// The largest nonce Noise allows to be used (2^64 - 1 is reserved).
const LAST_NONCE: u64 = u64::MAX - 1;

/// Seals our writes: each call appends whole frames to a buffer, for one
/// socket write.
pub struct Sealer {
    cipher: aead::Cipher,
    next: u64,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealer")
            .field("frames", &self.next)
            .finish()
    }
}

impl Sealer {
    pub(super) fn new(backend: Backend, key: &[u8; 32]) -> Sealer {
        let mut cipher = aead::Cipher::new(backend, key);
        cipher.warm();
        Sealer { cipher, next: 0 }
    }

    /// Append `plaintext` to `out` as frames of at most 65519 plaintext
    /// bytes each (nothing for an empty `plaintext`). Fails, appending
    /// nothing, only when the frames would pass the last nonce.
    pub fn seal(&mut self, plaintext: &[u8], out: &mut Vec<u8>) -> Result<(), NoiseError> {
        let frames = plaintext.len().div_ceil(MAX_FRAME_PLAINTEXT) as u64;
        if frames > 0
            && self
                .next
                .checked_add(frames - 1)
                .is_none_or(|n| n > LAST_NONCE)
        {
            return Err(NoiseError::NonceExhausted);
        }
        out.reserve(plaintext.len() + frames as usize * (2 + TAG_LEN));
        for chunk in plaintext.chunks(MAX_FRAME_PLAINTEXT) {
            out.extend_from_slice(&((chunk.len() + TAG_LEN) as u16).to_be_bytes());
            let start = out.len();
            out.extend_from_slice(chunk);
            let tag = self
                .cipher
                .seal_in_place(&nonce(self.next), &mut out[start..]);
            out.extend_from_slice(&tag);
            self.next += 1;
        }
        Ok(())
    }
}

/// A frame opened in place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opened {
    /// Bytes of the buffer the frame took (length prefix included).
    pub frame_len: usize,
    /// Where its plaintext now is in the buffer.
    pub plaintext: Range<usize>,
}

/// Opens the peer's frames in place.
pub struct Opener {
    cipher: aead::Cipher,
    next: u64,
    failed: bool,
}

impl std::fmt::Debug for Opener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opener")
            .field("frames", &self.next)
            .finish()
    }
}

impl Opener {
    pub(super) fn new(backend: Backend, key: &[u8; 32]) -> Opener {
        let mut cipher = aead::Cipher::new(backend, key);
        cipher.warm();
        Opener {
            cipher,
            next: 0,
            failed: false,
        }
    }

    /// The length of the frame `buf` starts with, once its 2-byte prefix is
    /// in (prefix included): how much to read before [`Self::open`] can
    /// open it.
    pub fn frame_len(buf: &[u8]) -> Option<usize> {
        (buf.len() >= 2).then(|| 2 + usize::from(u16::from_be_bytes([buf[0], buf[1]])))
    }

    /// Open the frame `buf` starts with, in place: `None` until all of it
    /// is there. A frame that fails its tag, is too short to hold one, or
    /// comes after the last nonce ends the session: every later call
    /// fails too.
    pub fn open(&mut self, buf: &mut [u8]) -> Result<Option<Opened>, NoiseError> {
        if self.failed {
            return Err(NoiseError::Poisoned);
        }
        let Some(frame_len) = Self::frame_len(buf) else {
            return Ok(None);
        };
        debug_assert!(frame_len - 2 <= MAX_FRAME);
        if frame_len - 2 < TAG_LEN {
            self.failed = true;
            return Err(NoiseError::FrameTooShort(frame_len - 2));
        }
        if buf.len() < frame_len {
            return Ok(None);
        }
        if self.next > LAST_NONCE {
            self.failed = true;
            return Err(NoiseError::NonceExhausted);
        }
        if self
            .cipher
            .open_in_place(&nonce(self.next), &mut buf[2..frame_len])
            .is_err()
        {
            self.failed = true;
            return Err(NoiseError::Decrypt);
        }
        self.next += 1;
        Ok(Some(Opened {
            frame_len,
            plaintext: 2..frame_len - TAG_LEN,
        }))
    }
}
