//! The RustCrypto backend: the pure-Rust `chacha20poly1305` crate, always
//! compiled (the backend of a build without `ring`). It wipes its key on
//! drop.

use chacha20poly1305::aead::{AeadInPlace, KeyInit};

use super::OpenFailed;
use crate::proto::wire::{KEY_LEN, NONCE_LEN, TAG_LEN};

pub(super) struct RustCryptoKey(chacha20poly1305::ChaCha20Poly1305);

impl RustCryptoKey {
    pub(super) fn new(key: &[u8; KEY_LEN]) -> Self {
        RustCryptoKey(chacha20poly1305::ChaCha20Poly1305::new(key.into()))
    }

    pub(super) fn seal(&self, nonce: &[u8; NONCE_LEN], ad: &[u8], buf: &mut [u8]) -> [u8; TAG_LEN] {
        self.0
            .encrypt_in_place_detached(nonce.into(), ad, buf)
            .unwrap_or_else(|_| unreachable!("frame fits ChaCha20-Poly1305 limits"))
            .into()
    }

    pub(super) fn open(
        &self,
        nonce: &[u8; NONCE_LEN],
        ad: &[u8],
        sealed: &mut [u8],
    ) -> Result<(), OpenFailed> {
        let (ct, tag) = sealed.split_at_mut(sealed.len() - TAG_LEN);
        let tag = chacha20poly1305::Tag::clone_from_slice(tag);
        self.0
            .decrypt_in_place_detached(nonce.into(), ad, ct, &tag)
            .map_err(|_| OpenFailed)
    }
}
