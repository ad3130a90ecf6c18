//! libp2p peer IDs: the identity CometBFT v0.40's `noise://` remote-signer
//! transport names its peers by (`noise://<peer-id>@IP:PORT`, and what
//! `cometbft show-node-id --libp2p` prints).
//!
//! # Design
//! - A peer ID is a multihash of the peer's public key in libp2p's key
//!   encoding (the `PublicKey` protobuf: field 1 the key type, Ed25519 = 1;
//!   field 2 the 32 key bytes). A key encoding of at most 42 bytes, as every
//!   Ed25519 key's 36 bytes, is inlined: the identity multihash (code
//!   `0x00`), so the ID carries the key itself. Longer ones (RSA) are
//!   hashed: SHA2-256 (code `0x12`). This is go-libp2p's `IDFromPublicKey`.
//! - Its text form is the base58btc (Bitcoin alphabet) encoding of the
//!   multihash bytes; an Ed25519 peer ID is always 52 characters starting
//!   `12D3KooW`.
//! - [`PeerId`] holds the multihash bytes (at most 44) inline, so it is
//!   `Copy`; two IDs are equal when their bytes are, which is how go-libp2p
//!   compares them (case matters in the text form).
//!
//! # Guarantees
//! - [`PublicKey::peer_id`](crate::PublicKey::peer_id) is go-libp2p's ID of that Ed25519 key
//!   (checked against go-libp2p's and CometBFT's own test vectors).
//! - Parsing refuses, with [`IdentityError::InvalidPeerId`] and a reason:
//!   characters outside the base58btc alphabet, leading or trailing space,
//!   a multihash other than identity (at most 42 bytes) or SHA2-256 (32
//!   bytes), a length that does not match, and an identity multihash whose
//!   digest is not a key encoding libp2p writes.
//!
//! # Not provided
//! - The CIDv1 text forms (`bafz…`, multibase) that go-libp2p's
//!   `peer.Decode` also reads: CometBFT prints the base58btc form, and a
//!   CID is refused rather than guessed at.
//! - Keys other than Ed25519: an ID of a secp256k1 or RSA key parses and
//!   compares, but [`PeerId::ed25519_key`] gives `None` for it.

use crate::identity::{IdentityError, PublicKey};

/// The multihash code of the identity "hash" (the digest is the input).
const IDENTITY: u8 = 0x00;
/// The multihash code of SHA2-256.
const SHA2_256: u8 = 0x12;
/// The longest key encoding libp2p inlines (go-libp2p `maxInlineKeyLength`).
const MAX_INLINE_KEY: usize = 42;
/// The longest multihash a peer ID holds: code, length, 42 bytes.
const MAX_LEN: usize = 2 + MAX_INLINE_KEY;
/// libp2p's encoding of an Ed25519 public key, before the 32 key bytes:
/// field 1 (varint) = 1 (Ed25519), field 2 (bytes), length 32.
const ED25519_KEY_PREFIX: [u8; 4] = [0x08, 0x01, 0x12, 0x20];

/// The base58btc (Bitcoin) alphabet.
const ALPHABET: &[u8; 58] = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

/// A libp2p peer ID, as CometBFT v0.40's `noise://` remote-signer addresses
/// name peers (`noise://<peer-id>@IP:PORT`) and `cometbft show-node-id
/// --libp2p` prints them: the multihash of the peer's key in libp2p's
/// encoding (inlined for Ed25519: the ID carries the key), written in
/// base58btc, always `12D3KooW…` and 52 characters for an Ed25519 key.
///
/// [`PublicKey::peer_id`] is go-libp2p's `IDFromPublicKey`, checked
/// against go-libp2p's and CometBFT's own vectors. Two IDs are equal when
/// their bytes are (the text form is case-sensitive). Parsing refuses, with
/// [`IdentityError::InvalidPeerId`] and a reason, anything but base58btc of
/// an identity multihash of a libp2p key encoding or of a 32-byte SHA2-256
/// multihash. Not provided: the CIDv1 text forms (`bafz…`) that go-libp2p
/// also reads (refused, not guessed at); keys other than Ed25519 parse and
/// compare, but [`PeerId::ed25519_key`] gives `None` for them.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PeerId {
    len: u8,
    bytes: [u8; MAX_LEN],
}

impl PeerId {
    /// The peer ID of an Ed25519 public key: the identity multihash of its
    /// libp2p encoding (`00 24 08 01 12 20` and the 32 key bytes).
    pub(crate) fn from_public_key(key: &PublicKey) -> PeerId {
        let mut bytes = [0u8; MAX_LEN];
        bytes[0] = IDENTITY;
        bytes[1] = 36;
        bytes[2..6].copy_from_slice(&ED25519_KEY_PREFIX);
        bytes[6..38].copy_from_slice(key.as_bytes());
        PeerId { len: 38, bytes }
    }

    /// A peer ID from its multihash bytes, checked as [`str::parse`] checks
    /// the decoded text.
    pub fn from_bytes(multihash: &[u8]) -> Result<PeerId, IdentityError> {
        let bad = |why: &'static str| IdentityError::InvalidPeerId {
            id: hex_of(multihash),
            why,
        };
        let (&code, rest) = multihash.split_first().ok_or(bad("empty"))?;
        let (&len, digest) = rest.split_first().ok_or(bad("no digest length"))?;
        if usize::from(len) != digest.len() {
            return Err(bad("the digest length does not match"));
        }
        match code {
            IDENTITY if digest.len() > MAX_INLINE_KEY => {
                return Err(bad("an identity multihash longer than 42 bytes"))
            }
            IDENTITY if !is_key_encoding(digest) => {
                return Err(bad("the identity multihash holds no libp2p public key"))
            }
            IDENTITY => {}
            SHA2_256 if digest.len() == 32 => {}
            SHA2_256 => return Err(bad("a SHA2-256 multihash of other than 32 bytes")),
            _ => return Err(bad("neither an identity nor a SHA2-256 multihash")),
        }
        let mut bytes = [0u8; MAX_LEN];
        bytes[..multihash.len()].copy_from_slice(multihash);
        Ok(PeerId {
            len: multihash.len() as u8,
            bytes,
        })
    }

    /// The multihash bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// The Ed25519 public key this ID inlines, if it is the ID of one.
    pub fn ed25519_key(&self) -> Option<PublicKey> {
        let b = self.as_bytes();
        if b.len() == 38 && b[..2] == [IDENTITY, 36] && b[2..6] == ED25519_KEY_PREFIX {
            let mut key = [0u8; 32];
            key.copy_from_slice(&b[6..]);
            Some(PublicKey::from_bytes(key))
        } else {
            None
        }
    }
}

/// Whether `b` is a libp2p `PublicKey` encoding as go-libp2p writes one:
/// field 1 (varint key type 0..=3), then field 2 (the key bytes) filling
/// the rest, with Ed25519 keys exactly 32 bytes.
fn is_key_encoding(b: &[u8]) -> bool {
    match b {
        [0x08, key_type @ 0..=3, 0x12, len, data @ ..] => {
            usize::from(*len) == data.len() && (*key_type != 1 || data.len() == 32)
        }
        _ => false,
    }
}

fn hex_of(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

impl std::fmt::Display for PeerId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let input = self.as_bytes();
        // Base 58 digits, least significant first; at most 61 for 44 bytes.
        let mut digits = [0u8; 64];
        let mut n = 0;
        for &byte in input {
            let mut carry = u32::from(byte);
            for d in &mut digits[..n] {
                carry += u32::from(*d) << 8;
                *d = (carry % 58) as u8;
                carry /= 58;
            }
            while carry > 0 {
                digits[n] = (carry % 58) as u8;
                n += 1;
                carry /= 58;
            }
        }
        let zeros = input.iter().take_while(|&&b| b == 0).count();
        let mut out = String::with_capacity(zeros + n);
        out.extend(std::iter::repeat_n('1', zeros));
        out.extend(
            digits[..n]
                .iter()
                .rev()
                .map(|&d| char::from(ALPHABET[usize::from(d)])),
        );
        f.write_str(&out)
    }
}

impl std::fmt::Debug for PeerId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PeerId({self})")
    }
}

impl std::str::FromStr for PeerId {
    type Err = IdentityError;

    /// Parse the base58btc form (`12D3KooW…`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |why: &'static str| IdentityError::InvalidPeerId {
            id: s.to_string(),
            why,
        };
        // 44 bytes are at most 61 digits; refuse anything longer before
        // doing arithmetic on it.
        if s.is_empty() {
            return Err(bad("empty"));
        }
        if s.len() > 61 {
            return Err(bad("too long for a peer ID"));
        }
        // Base 256 bytes, least significant first.
        let mut bytes = [0u8; MAX_LEN + 1];
        let mut n = 0;
        for c in s.bytes() {
            let Some(digit) = ALPHABET.iter().position(|&a| a == c) else {
                return Err(bad("a character outside the base58btc alphabet"));
            };
            let mut carry = digit as u32;
            for b in &mut bytes[..n] {
                carry += u32::from(*b) * 58;
                *b = carry as u8;
                carry >>= 8;
            }
            while carry > 0 {
                if n == bytes.len() {
                    return Err(bad("too long for a peer ID"));
                }
                bytes[n] = carry as u8;
                n += 1;
                carry >>= 8;
            }
        }
        let zeros = s.bytes().take_while(|&c| c == b'1').count();
        if zeros + n > MAX_LEN {
            return Err(bad("too long for a peer ID"));
        }
        let mut multihash = [0u8; MAX_LEN];
        for (i, &b) in bytes[..n].iter().rev().enumerate() {
            multihash[zeros + i] = b;
        }
        PeerId::from_bytes(&multihash[..zeros + n]).map_err(|e| match e {
            IdentityError::InvalidPeerId { why, .. } => bad(why),
            other => other,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Identity;
    use sha2::{Digest, Sha256};

    fn key(hex: &str) -> PublicKey {
        let mut k = [0u8; 32];
        hex::decode_to_slice(hex, &mut k).unwrap();
        PublicKey::from_bytes(k)
    }

    /// go-libp2p's vector (p2p/security/tls/crypto_test.go).
    #[test]
    fn go_libp2p_vector() {
        let pk = key("a77f1d92fedb59dddaea5a1c4abd1ac2fbde7d7b879ed364501809923d7c11b9");
        let id = PeerId::from_public_key(&pk);
        assert_eq!(
            id.to_string(),
            "12D3KooWM6CgA9iBFZmcYAHA6A2qvbAxqfkmrYiRQuz3XEsk4Ksv"
        );
        let back: PeerId = id.to_string().parse().unwrap();
        assert_eq!(back, id);
        assert_eq!(back.ed25519_key(), Some(pk));
    }

    /// CometBFT v0.40.0's vector (lp2p/utils_test.go): the key of
    /// `ed25519.GenPrivKeyFromSecret("lp2p-test-secret")`, whose seed is the
    /// SHA-256 of the secret.
    #[test]
    fn cometbft_vector() {
        let seed: [u8; 32] = Sha256::digest(b"lp2p-test-secret").into();
        let id = PeerId::from_public_key(&Identity::from_seed(&seed).public_key());
        assert_eq!(
            id.to_string(),
            "12D3KooWE3h4xxbYockU6Y5EKhffWqo4AtMGwNS3UzmGkEFKGPZK"
        );
    }

    /// A secp256k1 key's ID (the same CometBFT test) parses and prints
    /// back, and is no Ed25519 key.
    #[test]
    fn secp256k1_ids_parse() {
        let s = "16Uiu2HAmNt4G6MjXTVwSz5HoajXdpbApHvwBNCc5WX6peH3rosN9";
        let id: PeerId = s.parse().unwrap();
        assert_eq!(id.to_string(), s);
        assert_eq!(id.as_bytes()[..4], [0x00, 0x25, 0x08, 0x02]);
        assert_eq!(id.ed25519_key(), None);
    }

    #[test]
    fn every_ed25519_id_is_52_characters_from_12d3koow() {
        for i in 0..64u8 {
            let id = Identity::from_seed(&[i; 32]).public_key();
            let s = PeerId::from_public_key(&id).to_string();
            assert_eq!(s.len(), 52, "{s}");
            assert!(s.starts_with("12D3KooW"), "{s}");
            assert_eq!(s.parse::<PeerId>().unwrap().ed25519_key(), Some(id));
        }
    }

    #[test]
    fn bad_ids_are_refused_with_a_reason() {
        let good = "12D3KooWM6CgA9iBFZmcYAHA6A2qvbAxqfkmrYiRQuz3XEsk4Ksv";
        let cases = [
            ("", "empty"),
            (
                " 12D3KooWM6CgA9iBFZmcYAHA6A2qvbAxqfkmrYiRQuz3XEsk4Ksv",
                "alphabet",
            ),
            (
                "12D3KooWM6CgA9iBFZmcYAHA6A2qvbAxqfkmrYiRQuz3XEsk4Ks0",
                "alphabet",
            ),
            (
                "12D3KooWM6CgA9iBFZmcYAHA6A2qvbAxqfkmrYiRQuz3XEsk4Ks",
                "length",
            ),
            (
                "12D3KooWM6CgA9iBFZmcYAHA6A2qvbAxqfkmrYiRQuz3XEsk4KsvA",
                "length",
            ),
            (
                "bafzaajaiaejcalj5ni6ydxeg6dqvmmdq4rbtlf3hiwafz7mhvikm5fugxxgu",
                "alphabet",
            ),
            (&"z".repeat(62), "too long"),
            ("1", "no digest length"),
        ];
        for (s, want) in cases {
            match s.parse::<PeerId>() {
                Err(e @ IdentityError::InvalidPeerId { .. }) => {
                    assert!(e.to_string().contains(want), "{s:?}: {e}")
                }
                other => panic!("{s:?}: {other:?}"),
            }
        }
        assert!(good.parse::<PeerId>().is_ok());
        // Lower case is another ID, or none.
        assert_ne!(
            good.to_lowercase().parse::<PeerId>().ok(),
            good.parse::<PeerId>().ok()
        );
    }

    #[test]
    fn multihash_rules() {
        let ed = PeerId::from_public_key(&Identity::from_seed(&[7; 32]).public_key());
        assert_eq!(PeerId::from_bytes(ed.as_bytes()).unwrap(), ed);
        // SHA2-256 of 32 bytes: an RSA key's ID.
        let mut sha = vec![0x12, 32];
        sha.extend([9u8; 32]);
        assert!(PeerId::from_bytes(&sha).is_ok());
        sha[1] = 31;
        assert!(PeerId::from_bytes(&sha).is_err());
        // An identity multihash of something that is not a key.
        assert!(PeerId::from_bytes(&[0x00, 3, 1, 2, 3]).is_err());
        // An Ed25519 key of 31 bytes.
        let mut short = vec![0x00, 35, 0x08, 0x01, 0x12, 31];
        short.extend([1u8; 31]);
        assert!(PeerId::from_bytes(&short).is_err());
        // Other multihash codes.
        let mut other = vec![0x13, 32];
        other.extend([0u8; 32]);
        assert!(PeerId::from_bytes(&other).is_err());
        assert!(PeerId::from_bytes(&[]).is_err());
    }
}
