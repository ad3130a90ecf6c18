//! The primitives snow runs the handshake with: X25519 (x25519-dalek),
//! SHA-256 (sha2), ChaCha20-Poly1305 (this crate's AEAD backends, the ones
//! the secret connection seals with) and the randomness the caller passed
//! in. Nothing here reads the operating system's generator: the core stays
//! sans-IO.

use snow::params::{CipherChoice, DHChoice, HashChoice};
use snow::resolvers::CryptoResolver;
use snow::types::{Cipher, Dh, Hash, Random};
use zeroize::Zeroizing;

use crate::proto::aead::{self, Backend};
use crate::proto::wire::{NONCE_LEN, TAG_LEN};

/// The only suite: `Noise_XX_25519_ChaChaPoly_SHA256`.
pub(super) struct Resolver {
    backend: Backend,
    /// The bytes the handshake's ephemeral key is drawn from, taken from
    /// the caller's generator when the handshake began.
    seed: std::sync::Mutex<Option<Zeroizing<[u8; 32]>>>,
}

impl Resolver {
    pub(super) fn new(backend: Backend, seed: Zeroizing<[u8; 32]>) -> Resolver {
        Resolver {
            backend,
            seed: std::sync::Mutex::new(Some(seed)),
        }
    }
}

impl CryptoResolver for Resolver {
    fn resolve_rng(&self) -> Option<Box<dyn Random>> {
        let seed = self.seed.lock().ok()?.take();
        Some(Box::new(Seeded(seed)))
    }

    fn resolve_dh(&self, choice: &DHChoice) -> Option<Box<dyn Dh>> {
        matches!(choice, DHChoice::Curve25519).then(|| Box::new(X25519::default()) as Box<dyn Dh>)
    }

    fn resolve_hash(&self, choice: &HashChoice) -> Option<Box<dyn Hash>> {
        matches!(choice, HashChoice::SHA256).then(|| Box::new(Sha256::default()) as Box<dyn Hash>)
    }

    fn resolve_cipher(&self, choice: &CipherChoice) -> Option<Box<dyn Cipher>> {
        matches!(choice, CipherChoice::ChaChaPoly).then(|| {
            Box::new(ChaChaPoly {
                backend: self.backend,
                cipher: None,
            }) as Box<dyn Cipher>
        })
    }
}

/// Hands out the one 32-byte seed, then refuses: a handshake draws one
/// ephemeral key and nothing else.
struct Seeded(Option<Zeroizing<[u8; 32]>>);

impl Random for Seeded {
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), snow::Error> {
        match self.0.take() {
            Some(seed) if dest.len() == seed.len() => {
                dest.copy_from_slice(&seed[..]);
                Ok(())
            }
            _ => Err(snow::Error::Rng),
        }
    }
}

/// X25519. A shared secret of all zeros (the peer sent a low-order point)
/// is refused, as go-libp2p's Noise (Go's `curve25519.X25519`) refuses it.
#[derive(Default)]
struct X25519 {
    secret: Zeroizing<[u8; 32]>,
    public: [u8; 32],
}

impl X25519 {
    fn set_secret(&mut self, secret: [u8; 32]) {
        let s = x25519_dalek::StaticSecret::from(secret);
        self.public = x25519_dalek::PublicKey::from(&s).to_bytes();
        *self.secret = s.to_bytes();
    }
}

impl Dh for X25519 {
    fn name(&self) -> &'static str {
        "25519"
    }
    fn pub_len(&self) -> usize {
        32
    }
    fn priv_len(&self) -> usize {
        32
    }
    fn set(&mut self, privkey: &[u8]) {
        let mut k = Zeroizing::new([0u8; 32]);
        k.copy_from_slice(&privkey[..32]);
        self.set_secret(*k);
    }
    fn generate(&mut self, rng: &mut dyn Random) -> Result<(), snow::Error> {
        let mut k = Zeroizing::new([0u8; 32]);
        rng.try_fill_bytes(&mut k[..])?;
        self.set_secret(*k);
        Ok(())
    }
    fn pubkey(&self) -> &[u8] {
        &self.public
    }
    fn privkey(&self) -> &[u8] {
        &self.secret[..]
    }
    fn dh(&self, pubkey: &[u8], out: &mut [u8]) -> Result<(), snow::Error> {
        // snow passes its whole key buffer: the key is the first 32 bytes.
        let peer: [u8; 32] = pubkey
            .get(..32)
            .and_then(|k| k.try_into().ok())
            .ok_or(snow::Error::Dh)?;
        let shared = x25519_dalek::StaticSecret::from(*self.secret)
            .diffie_hellman(&x25519_dalek::PublicKey::from(peer));
        if !shared.was_contributory() {
            return Err(snow::Error::Dh);
        }
        out[..32].copy_from_slice(shared.as_bytes());
        Ok(())
    }
}

#[derive(Default)]
struct Sha256(sha2::Sha256);

impl Hash for Sha256 {
    fn name(&self) -> &'static str {
        "SHA256"
    }
    fn block_len(&self) -> usize {
        64
    }
    fn hash_len(&self) -> usize {
        32
    }
    fn reset(&mut self) {
        self.0 = sha2::Sha256::default();
    }
    fn input(&mut self, data: &[u8]) {
        sha2::Digest::update(&mut self.0, data);
    }
    fn result(&mut self, out: &mut [u8]) {
        let digest = sha2::Digest::finalize_reset(&mut self.0);
        out[..32].copy_from_slice(&digest);
    }
}

/// ChaCha20-Poly1305 over this crate's backends, with Noise's nonce: four
/// zero bytes and the 64-bit counter, little-endian (the secret
/// connection's layout too).
struct ChaChaPoly {
    backend: Backend,
    cipher: Option<aead::Cipher>,
}

pub(super) fn nonce(n: u64) -> [u8; NONCE_LEN] {
    let mut out = [0u8; NONCE_LEN];
    out[4..].copy_from_slice(&n.to_le_bytes());
    out
}

impl Cipher for ChaChaPoly {
    fn name(&self) -> &'static str {
        "ChaChaPoly"
    }
    fn set(&mut self, key: &[u8; 32]) {
        self.cipher = Some(aead::Cipher::new(self.backend, key));
    }
    fn encrypt(&self, n: u64, authtext: &[u8], plaintext: &[u8], out: &mut [u8]) -> usize {
        let Some(cipher) = &self.cipher else {
            return 0;
        };
        let len = plaintext.len();
        out[..len].copy_from_slice(plaintext);
        let tag = cipher.seal_in_place_ad(&nonce(n), authtext, &mut out[..len]);
        out[len..len + TAG_LEN].copy_from_slice(&tag);
        len + TAG_LEN
    }
    fn decrypt(
        &self,
        n: u64,
        authtext: &[u8],
        ciphertext: &[u8],
        out: &mut [u8],
    ) -> Result<usize, snow::Error> {
        let cipher = self.cipher.as_ref().ok_or(snow::Error::Decrypt)?;
        let len = ciphertext
            .len()
            .checked_sub(TAG_LEN)
            .ok_or(snow::Error::Decrypt)?;
        if out.len() < len {
            return Err(snow::Error::Decrypt);
        }
        // snow may hand an `out` of just the plaintext's size (a static
        // key): open a copy in place (handshake messages only, small).
        let mut sealed = Zeroizing::new(ciphertext.to_vec());
        cipher
            .open_in_place_ad(&nonce(n), authtext, &mut sealed)
            .map_err(|_| snow::Error::Decrypt)?;
        out[..len].copy_from_slice(&sealed[..len]);
        Ok(len)
    }
}
