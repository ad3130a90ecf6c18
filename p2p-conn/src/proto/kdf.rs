//! Key derivation: the HKDF-SHA256 frame keys and the Merlin challenge.
//!
//! * Frame keys: HKDF-SHA256 with no salt, IKM = the raw 32-byte X25519 output,
//!   info = `TENDERMINT_SECRET_CONNECTION_KEY_AND_CHALLENGE_GEN`; the first 64
//!   output bytes are two ChaCha20-Poly1305 keys. `okm[32..64]` carries traffic
//!   from the side with the lexicographically lower ephemeral key to the higher
//!   one; `okm[0..32]` carries the other direction.
//! * Challenge: a Merlin transcript over both ephemeral keys (lower first) and
//!   the DH output; the 32 bytes each side signs with its identity key.

use hkdf::Hkdf;
use merlin::Transcript;
use sha2::Sha256;
use zeroize::{Zeroize, ZeroizeOnDrop};

/// HKDF info string.
pub const HKDF_INFO: &[u8] = b"TENDERMINT_SECRET_CONNECTION_KEY_AND_CHALLENGE_GEN";
/// Merlin transcript label.
pub const TRANSCRIPT_LABEL: &[u8] = b"TENDERMINT_SECRET_CONNECTION_TRANSCRIPT_HASH";
/// Transcript label of the lower ephemeral key.
pub const LABEL_LOWER: &[u8] = b"EPHEMERAL_LOWER_PUBLIC_KEY";
/// Transcript label of the upper ephemeral key.
pub const LABEL_UPPER: &[u8] = b"EPHEMERAL_UPPER_PUBLIC_KEY";
/// Transcript label of the DH output.
pub const LABEL_DH: &[u8] = b"DH_SECRET";
/// Transcript label of the challenge.
pub const LABEL_CHALLENGE: &[u8] = b"SECRET_CONNECTION_MAC";

/// The two directional frame keys of one side.
#[derive(Zeroize, ZeroizeOnDrop)]
pub struct SessionKeys {
    /// Key this side seals with.
    pub send: [u8; 32],
    /// Key this side opens with.
    pub recv: [u8; 32],
}

/// Derive this side's keys from the DH output. `local_is_least` is true when our
/// ephemeral public key sorts first (ties count as least).
pub fn derive_keys(dh_secret: &[u8; 32], local_is_least: bool) -> SessionKeys {
    let hk = Hkdf::<Sha256>::new(None, dh_secret);
    let mut okm = zeroize::Zeroizing::new([0u8; 64]);
    hk.expand(HKDF_INFO, &mut okm[..])
        .unwrap_or_else(|_| unreachable!("64 bytes is a valid HKDF-SHA256 length"));
    let mut first = [0u8; 32];
    let mut second = [0u8; 32];
    first.copy_from_slice(&okm[..32]);
    second.copy_from_slice(&okm[32..]);
    if local_is_least {
        SessionKeys {
            recv: first,
            send: second,
        }
    } else {
        SessionKeys {
            send: first,
            recv: second,
        }
    }
}

/// Order two ephemeral keys: `(lower, upper)` by plain byte comparison. On a tie
/// the remote key is "lower" (which equals ours), so the local side is least.
pub fn sort_keys<'a>(
    local: &'a [u8; 32],
    remote: &'a [u8; 32],
) -> (&'a [u8; 32], &'a [u8; 32], bool) {
    if local < remote {
        (local, remote, true)
    } else {
        (remote, local, local == remote)
    }
}

/// The challenge to sign and this side's keys, from the DH output between
/// our ephemeral key `local` and the peer's `remote`: the one place the keys
/// are ordered, the challenge made and the keys split between directions.
pub fn session(
    local: &[u8; 32],
    remote: &[u8; 32],
    dh_secret: &[u8; 32],
) -> ([u8; 32], SessionKeys) {
    let (lower, upper, local_is_least) = sort_keys(local, remote);
    (
        challenge(lower, upper, dh_secret),
        derive_keys(dh_secret, local_is_least),
    )
}

/// The 32-byte challenge each side signs.
pub fn challenge(lower: &[u8; 32], upper: &[u8; 32], dh_secret: &[u8; 32]) -> [u8; 32] {
    let mut t = Transcript::new(TRANSCRIPT_LABEL);
    t.append_message(LABEL_LOWER, lower);
    t.append_message(LABEL_UPPER, upper);
    t.append_message(LABEL_DH, dh_secret);
    let mut out = [0u8; 32];
    t.challenge_bytes(LABEL_CHALLENGE, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merlin_self_check() {
        let mut t = Transcript::new(b"test protocol");
        t.append_message(b"some label", b"some data");
        let mut out = [0u8; 32];
        t.challenge_bytes(b"challenge", &mut out);
        assert_eq!(
            hex::encode(out),
            "d5a21972d0d5fe320c0d263fac7fffb8145aa640af6e9bca177c03c7efcf0615"
        );
    }

    #[test]
    fn sort_is_bytewise_and_ties_are_least() {
        let a = [0u8; 32];
        let mut b = [0u8; 32];
        b[0] = 1;
        assert!(sort_keys(&a, &b).2);
        assert!(!sort_keys(&b, &a).2);
        assert!(sort_keys(&a, &a).2);
        // Byte 0 is most significant, unlike a little-endian integer compare.
        let mut c = [0xffu8; 32];
        c[0] = 0;
        assert!(sort_keys(&c, &b).2);
    }
}
