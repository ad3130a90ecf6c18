//! The `ring` backend (feature `ring`): ring's assembly ChaCha20-Poly1305.

use zeroize::Zeroizing;

use super::OpenFailed;
use crate::proto::wire::{KEY_LEN, NONCE_LEN, TAG_LEN};

/// A ring key, expanded on first use. ring's key type is 544 bytes (it is
/// sized for AES key schedules; ChaCha20-Poly1305 needs the 32-byte key), so
/// an idle connection that kept two of them inline would hold over 1 KiB for
/// nothing. The expanded key lives on the heap from the first frame on
/// ([`super::Cipher::warm`], called by the sealer and the opener); until then only
/// the 32-byte key is held, and a call without it expands a temporary one.
pub(super) struct RingKey {
    key: Zeroizing<[u8; KEY_LEN]>,
    expanded: Option<Box<ring::aead::LessSafeKey>>,
}

impl RingKey {
    /// Hold `key`; nothing is expanded yet.
    pub(super) fn new(key: Zeroizing<[u8; KEY_LEN]>) -> Self {
        RingKey {
            key,
            expanded: None,
        }
    }

    /// Drop the expanded key until the next [`Self::warm`].
    pub(super) fn release(&mut self) {
        self.expanded = None;
    }

    /// Expand the key if it is not yet.
    pub(super) fn warm(&mut self) {
        if self.expanded.is_none() {
            self.expanded = Some(Box::new(Self::expand(&self.key)));
        }
    }

    fn expand(key: &[u8; KEY_LEN]) -> ring::aead::LessSafeKey {
        // Cannot fail: the key length is exactly what the algorithm takes.
        let unbound = ring::aead::UnboundKey::new(&ring::aead::CHACHA20_POLY1305, key)
            .unwrap_or_else(|_| unreachable!("32-byte key is valid for CHACHA20_POLY1305"));
        ring::aead::LessSafeKey::new(unbound)
    }

    fn with<R>(&self, f: impl FnOnce(&ring::aead::LessSafeKey) -> R) -> R {
        match &self.expanded {
            Some(k) => f(k),
            None => f(&Self::expand(&self.key)),
        }
    }

    pub(super) fn seal(&self, nonce: &[u8; NONCE_LEN], ad: &[u8], buf: &mut [u8]) -> [u8; TAG_LEN] {
        let nonce = ring::aead::Nonce::assume_unique_for_key(*nonce);
        let tag = self
            .with(|key| key.seal_in_place_separate_tag(nonce, ring::aead::Aad::from(ad), buf))
            // ring only fails for inputs over 256 GiB; frames are tiny.
            .unwrap_or_else(|_| unreachable!("frame fits ChaCha20-Poly1305 limits"));
        let mut out = [0u8; TAG_LEN];
        out.copy_from_slice(tag.as_ref());
        out
    }

    pub(super) fn open(
        &self,
        nonce: &[u8; NONCE_LEN],
        ad: &[u8],
        sealed: &mut [u8],
    ) -> Result<(), OpenFailed> {
        let nonce = ring::aead::Nonce::assume_unique_for_key(*nonce);
        self.with(|key| key.open_in_place(nonce, ring::aead::Aad::from(ad), sealed))
            .map(|_| ())
            .map_err(|_| OpenFailed)
    }
}
